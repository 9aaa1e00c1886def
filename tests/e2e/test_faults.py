"""The gateway keeps serving when a backend misbehaves (fake backends in tests/fixtures)."""

import json
import sys
import time

import pytest

from conftest import FAKE_BACKEND, HttpServer, connect, reference_servers, structured, write_config

pytestmark = pytest.mark.anyio


async def test_a_stuck_backend_is_reported_and_the_rest_stay_usable(tmp_path):
    servers = reference_servers(tmp_path)
    servers["stuck"] = {"command": sys.executable, "args": [str(FAKE_BACKEND), "hang-handshake"], "handshake_timeout": "1s"}
    servers["dead"] = {"command": sys.executable, "args": [str(FAKE_BACKEND), "exit-at-start"]}
    config = write_config(tmp_path, "toml", servers)
    async with connect("stdio", config) as client:
        started = time.monotonic()
        found = structured(await client.call_tool("search_tools", {"query": "sum two numbers"}))
        assert found["results"][0]["name"] == "everything.get-sum"
        assert time.monotonic() - started < 8, "a stuck backend does not hold up the others for long"
        time.sleep(1.5)
        stuck = json.loads((await client.read_resource("sandgate://backend/stuck")).contents[0].text)
        assert stuck["state"] in ("starting", "restarting"), stuck
        assert "handshake did not finish within 1s" in (stuck["last_error"] or ""), stuck
        dead = json.loads((await client.read_resource("sandgate://backend/dead")).contents[0].text)
        assert dead["state"] in ("restarting", "failed") and "exit" in dead["last_error"], dead
        assert "refusing to start" not in json.dumps(dead), "backend stderr never reaches the client"
        overview = (await client.read_resource("sandgate://overview")).contents[0].text
        assert "| everything | ready |" in overview


def test_http_front_rejects_foreign_host_and_origin(tmp_path):
    """DNS rebinding: a page on evil.example resolving to 127.0.0.1 must not reach the gateway."""
    import http.client
    from urllib.parse import urlparse

    config = write_config(tmp_path, "json", {})
    server = HttpServer(config)
    try:
        url = urlparse(server.url)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})

        def post(headers):
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
            conn.request("POST", url.path, body=body, headers={
                "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                **server.headers, **headers})
            response = conn.getresponse()
            response.read()
            return response.status

        assert post({}) == 200, "a loopback request is served"
        assert post({"Host": "evil.example:%d" % url.port}) == 403
        assert post({"Origin": "http://evil.example"}) == 403
        assert post({"Origin": "http://localhost:5173"}) == 200, "a loopback page is allowed"
    finally:
        server.close()


async def test_a_call_waits_only_for_its_own_backend(tmp_path):
    """A backend stuck in its first handshake holds up no call to another backend."""
    servers = reference_servers(tmp_path)
    servers["stuck"] = {"command": sys.executable, "args": [str(FAKE_BACKEND), "hang-handshake"], "handshake_timeout": "30s"}
    config = write_config(tmp_path, "toml", servers)
    async with connect("stdio", config) as client:
        structured(await client.call_tool("call_tool_chain", {"code": "return 1"}))  # everything is up
        started = time.monotonic()
        result = structured(await client.call_tool(
            "call_tool_chain", {"code": 'return (await everything.echo({message: "hi"}))'}))
        took = time.monotonic() - started
        assert "hi" in json.dumps(result), result
        assert took < 3, f"the call waited {took:.1f} s for a backend it does not use"
        result = await client.call_tool("call_tool_chain", {"code": "return await stuck.anything({})"})
        error = json.dumps(result.structured_content["error"])
        assert result.is_error and "is still starting" in error and "sandgate://backend/stuck" in error, error
