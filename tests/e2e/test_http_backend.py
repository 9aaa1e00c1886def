"""HTTP backends. One that speaks 2026-07-28: one sandgate serving HTTP is itself the backend of
a second sandgate (a real streamable HTTP MCP server on the stateless protocol), so this covers
HTTP backends, `server/discover` negotiation and headers end to end. And one on 2025-11-25
sessions (the npm server-everything) restarted behind sandgate's back."""

import json
import os
import subprocess
import time

import anyio
import pytest

from conftest import NODE_MODULES, HttpServer, connect, free_port, reference_servers, structured, write_config

pytestmark = pytest.mark.anyio


async def test_a_streamable_http_backend_on_2026_07_28(tmp_path):
    inner_dir = tmp_path / "inner"
    inner_dir.mkdir()
    inner = HttpServer(write_config(inner_dir, "json", reference_servers(inner_dir)))
    try:
        outer_dir = tmp_path / "outer"
        outer_dir.mkdir()
        servers = {"inner": {"type": "http", "url": inner.url,
                             "headers": {"X-Sandgate-Test": "${HOME}", **inner.headers}}}
        async with connect("stdio", write_config(outer_dir, "json", servers)) as client:
            found = structured(await client.call_tool("search_tools", {"query": "find tools by what they do"}))
            assert found["results"][0]["name"] == "inner.search_tools", found
            status = json.loads((await client.read_resource("sandgate://backend/inner")).contents[0].text)
            assert status["state"] == "ready" and status["transport"] == "http", status
            assert status["protocol_version"] == "2026-07-28", status
            assert sorted(status["tools"]) == ["call_tool_chain", "list_tools_meta", "read_output", "search_tools", "tool_info",
                                               "wait_execution"]
    finally:
        inner.close()


def everything_over_http(port: int) -> subprocess.Popen:
    """The npm server-everything on streamable HTTP (2025-11-25 sessions), listening on `port`."""
    server = subprocess.Popen(["node", str(NODE_MODULES / "server-everything/dist/index.js"), "streamableHttp"],
                              env={**os.environ, "PORT": str(port)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    for line in server.stderr:
        if "listening" in line:
            return server
    raise RuntimeError("server-everything did not start listening")


async def test_an_http_backend_restarted_behind_sandgates_back_is_reconnected(tmp_path):
    """A restarted HTTP server has forgotten its sessions. server-everything answers the old
    session with 400 (not the 404 rmcp re-initializes on), and every later call used to wait
    for its timeout, forever (mcp-hangar#651). Now the first failed call makes the supervisor
    ping the backend, and the unanswered ping reconnects it: calls work again within seconds."""
    port = free_port()
    server = everything_over_http(port)
    try:
        servers = {"ev": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp", "timeout": "2s"}}
        async with connect("stdio", write_config(tmp_path, "json", servers)) as client:
            code = json.dumps({"tool": "ev.echo", "arguments": {"message": "hi"}})

            async def echo() -> str:
                result = await client.call_tool("call_tool_chain", {"code": code})
                return result.structured_content["status"]

            assert await echo() == "ok"
            server.kill()
            server.wait()
            server = everything_over_http(port)
            restarted = time.monotonic()
            outcomes = []
            while time.monotonic() - restarted < 20:
                outcomes.append(await echo())
                if outcomes[-1] == "ok":
                    break
                await anyio.sleep(0.2)
            assert outcomes[-1] == "ok", outcomes
            assert time.monotonic() - restarted < 12, outcomes
            assert len(outcomes) <= 4, outcomes
            # And it stays reconnected.
            assert [await echo() for _ in range(3)] == ["ok"] * 3
    finally:
        server.kill()


def session_server(port: int) -> subprocess.Popen:
    """tests/node/session_server.mjs: 2025-11-25 sessions, and 404 for a session it does not know."""
    server = subprocess.Popen(["node", str(NODE_MODULES.parent.parent / "session_server.mjs"), str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in server.stderr:
        if "listening" in line:
            return server
    raise RuntimeError("session_server.mjs did not start listening")


async def test_an_http_backend_that_answers_404_for_its_session_is_reinitialized_and_the_call_retried(tmp_path):
    """A restarted server that answers the forgotten session with 404, as the spec says: the
    call is not lost. sandgate opens a new session and sends the call again, once, so the first
    call after the restart already succeeds, in the new session."""
    port = free_port()
    server = session_server(port)
    try:
        servers = {"sessions": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp", "timeout": "5s"}}
        async with connect("stdio", write_config(tmp_path, "json", servers)) as client:
            async def echo(text: str) -> str:
                code = json.dumps({"tool": "sessions.echo", "arguments": {"text": text}})
                found = structured(await client.call_tool("call_tool_chain", {"code": code}))
                return found["result"]

            before = await echo("one")
            status = json.loads((await client.read_resource("sandgate://backend/sessions")).contents[0].text)
            assert status["state"] == "ready" and status["protocol_version"] == "2025-11-25", status
            server.kill()
            server.wait()
            server = session_server(port)
            started = time.monotonic()
            after = await echo("two")
            assert time.monotonic() - started < 3
            assert before.startswith("one (session ") and after.startswith("two (session "), (before, after)
            assert before.split("session ")[1] != after.split("session ")[1], (before, after)
    finally:
        server.kill()


class VideoBackend:
    """Fault injection: a streamable HTTP backend (JSON answers, one session) whose one tool
    answers with a text item and a content item of a type MCP does not define."""

    def __init__(self):
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the stdlib's name
                message = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
                if "id" not in message:
                    self.send_response(202)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                method, params = message.get("method"), message.get("params") or {}
                if method == "initialize":
                    result = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                              "capabilities": {"tools": {}}, "serverInfo": {"name": "video", "version": "1"}}
                elif method == "tools/list":
                    result = {"tools": [{"name": "clip", "description": "A clip of the meeting",
                                         "inputSchema": {"type": "object", "properties": {}}}]}
                elif method == "tools/call":
                    result = {"content": [{"type": "text", "text": "before the video"},
                                          {"type": "video", "data": "AAAA", "mimeType": "video/mp4"}]}
                else:
                    body = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no such method"}}
                    return self.reply(body)
                self.reply({"jsonrpc": "2.0", "id": message["id"], "result": result})

            def reply(self, body):
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("mcp-session-id", "video-session")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - the stdlib's name
                self.send_response(405)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_DELETE(self):  # noqa: N802 - the stdlib's name
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/mcp"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


async def test_an_http_backends_unknown_content_item_is_marked_and_the_rest_kept(tmp_path):
    """Issue 47, item 15. Over stdio the stdout inspector kept the known items; over HTTP the
    whole result was refused ("not a valid MCP tool result"). Now both keep them."""
    backend = VideoBackend()
    try:
        config = write_config(tmp_path, "json", {"video": {"type": "http", "url": backend.url}})
        async with connect("stdio", config) as client:
            for code in ["return await video.clip({});", "const r = await video.clip({});\nreturn r;"]:
                result = await client.call_tool("call_tool_chain", {"code": code})
                data = structured(result)
                assert not data.get("error"), data
                text = json.dumps(data["result"])
                assert "before the video" in text and '\\"video\\" was not passed on' in text, text
    finally:
        backend.close()
