"""Real operations (issue 18, items 2-4): a backend that is slow to start still connects, the
config is reloaded while serving, and the HTTP listener answers health, readiness and metrics."""

from __future__ import annotations

import json
import time

import anyio
import pytest

from mcp import Client

from conftest import NODE_MODULES, REPO, connect, structured, write_config

pytestmark = pytest.mark.anyio

SLOW_START = REPO / "tests" / "fixtures" / "slow_start.sh"


async def test_a_server_that_takes_12_s_to_start_connects(tmp_path):
    """A 2025-11-25 server (the real npm memory server) that first answers 12 s after it was
    started, as `npx -y` on first run does. rmcp's own era probe gives up after 10 s, and the
    late answer used to fail the handshake; `handshake_timeout` now bounds it all."""
    memory = str(NODE_MODULES / "server-memory/dist/index.js")
    slow = {
        "command": str(SLOW_START),
        "args": ["12", "node", memory],
        "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
        "timeout": "40s",
    }
    config = write_config(tmp_path, "toml", {"slowmemory": slow})
    async with connect("stdio", config) as client:
        started = time.monotonic()
        status = await backend_status(client, "slowmemory")
        while status["state"] == "starting" and time.monotonic() - started < 40:
            await anyio.sleep(0.5)
            status = await backend_status(client, "slowmemory")
        assert status["state"] == "ready", status
        assert time.monotonic() - started > 8, "the backend was meant to be slow"
        assert status["protocol_version"] == "2025-11-25", status
        assert status["restarts"] == 0 and status["last_error"] is None, status
        graph = structured(await client.call_tool(
            "call_tool_chain", {"code": {"tool": "slowmemory.read_graph", "arguments": {}}}))
        assert graph["result"] == {"entities": [], "relations": []}, graph


async def backend_status(client, name: str) -> dict:
    return json.loads((await client.read_resource(f"sandgate://backend/{name}")).contents[0].text)


async def test_a_2026_stdio_backend_is_found_modern_by_the_probe(tmp_path):
    """The era probe's other answer: a stdio backend that speaks 2026-07-28 (sandgate itself,
    serving a fake backend) is connected with `server/discover`, not `initialize`."""
    import sys
    from conftest import FAKE_BACKEND, SANDGATE

    inner_dir = tmp_path / "inner"
    inner_dir.mkdir()
    inner = write_config(inner_dir, "toml", {"fake": {"command": sys.executable, "args": [str(FAKE_BACKEND), "ok"]}})
    config = write_config(tmp_path, "toml", {"inner": {"command": SANDGATE, "args": ["serve", "--config", str(inner)]}})
    async with connect("stdio", config) as client:
        status = await backend_status(client, "inner")
        started = time.monotonic()
        while status["state"] == "starting" and time.monotonic() - started < 20:
            await anyio.sleep(0.2)
            status = await backend_status(client, "inner")
        assert status["state"] == "ready" and status["protocol_version"] == "2026-07-28", status


async def until(predicate, seconds: float, what: str):
    """Polls the async `predicate` until it is true, or fails naming `what`."""
    deadline = time.monotonic() + seconds
    while True:
        value = await predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await anyio.sleep(0.2)


async def tool_names(client) -> set[str]:
    found = structured(await client.call_tool("search_tools", {"query": "entities graph echo pid", "limit": 50}))
    return {r["name"] for r in found["results"]}


async def test_a_served_config_is_reloaded_when_it_changes(tmp_path):
    """Item 3: editing the served file adds the new backend's tools (the real memory server),
    takes a removed backend's away, restarts only the entry that changed, and tells the client
    `tools/list_changed`. A file that then fails to load is reported and the running config
    kept; SIGHUP reloads too."""
    import signal
    import sys
    from conftest import FAKE_BACKEND, HttpServer, reference_servers

    fake = lambda: {"command": sys.executable, "args": [str(FAKE_BACKEND), "ok"]}
    memory = reference_servers(tmp_path)["memory"]
    config = write_config(tmp_path, "toml", {"keep": fake(), "edited": fake(), "gone": memory})
    notifications = []

    async def on_message(message):
        if type(message).__name__ == "ToolListChangedNotification":
            notifications.append(message)

    server = HttpServer(config)
    try:
        async with Client(server.target(), mode="legacy", message_handler=on_message) as client:
            pid = lambda backend: call_text(client, f"{backend}.pid")
            await until(lambda: has_tools(client, {"keep.pid", "edited.pid", "gone.read_graph"}), 20, "the first tools")
            keep_pid, edited_pid = await pid("keep"), await pid("edited")
            await anyio.sleep(1)
            seen = len(notifications)

            edited = fake() | {"env": {"EDITED": "yes"}}
            text = write_config(tmp_path, "toml", {"keep": fake(), "edited": edited, "fresh": memory}).read_text()
            config.write_text(text)
            await until(lambda: has_tools(client, {"fresh.read_graph", "fresh.create_entities"}), 20, "the added backend's tools")
            names = await tool_names(client)
            assert not any(n.startswith("gone.") for n in names), names
            assert await pid("keep") == keep_pid, "an unchanged backend keeps its process"
            assert await pid("edited") != edited_pid, "the changed entry was restarted"
            assert len(notifications) > seen, "the client heard tools/list_changed"
            assert any("removed: gone" in line and "added: fresh" in line and "restarted: edited" in line
                       for line in server.log), server.log

            config.write_text(text.replace("[servers.keep]", "[servers.keep\n"))
            await until(lambda: has_log(server, "did not load"), 10, "the load error in the log")
            assert await pid("keep") == keep_pid, "a config that does not load changes nothing"

            config.write_text(text)
            server.proc.send_signal(signal.SIGHUP)
            await until(lambda: has_log(server, "SIGHUP: reloading"), 10, "the SIGHUP reload")
            assert server.proc.poll() is None, "SIGHUP does not stop sandgate"
            assert await pid("keep") == keep_pid
    finally:
        server.close()


async def call_text(client, tool: str) -> str:
    result = structured(await client.call_tool("call_tool_chain", {"code": {"tool": tool, "arguments": {}}}))
    return result["result"]


async def has_tools(client, wanted: set[str]) -> bool:
    return wanted <= await tool_names(client)


async def has_log(server, text: str) -> bool:
    return any(text in line for line in server.log)


@pytest.mark.parametrize("record_arguments", [False, True])
async def test_what_the_agent_did_is_on_record(tmp_path, record_arguments):
    """Item 5: an execution's record keeps its code and, per call, the tool, the start, the
    duration, the outcome, the sizes and why it failed; the arguments only with `[store]
    record_arguments = true`. `sandgate executions show` prints it in local time."""
    import os
    import re
    import subprocess
    from conftest import SANDGATE, reference_servers

    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    if record_arguments:
        config.write_text(config.read_text().replace("[store]", "[store]\nrecord_arguments = true"))
    code = (
        'const made = await memory.create_entities({entities: [{name: "Ada", entityType: "person", observations: ["sec" + "ret-" + (40 + 2)]}]});\n'
        'try { await filesystem.read_text_file({path: "/nowhere/at/all"}); } catch (e) {}\n'
        'return made;'
    )
    async with connect("stdio", config) as client:
        result = structured(await client.call_tool("call_tool_chain", {"code": code}))
    env = {**os.environ, "TZ": "Asia/Kolkata"}
    shown = subprocess.run([SANDGATE, "executions", "show", result["execution_id"], "--config", str(config)],
                           env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert re.search(r"^started    \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \+05:30$", text, re.M), text
    assert code in text, text
    assert re.search(r"\+\d+\.\d ms  memory\.create_entities  ok  \d+\.\d ms", text), text
    assert re.search(r"filesystem\.read_text_file  failed .*\n      error: .*(denied|not allowed|outside|ENOENT|Access)", text, re.I), text
    shown_json = subprocess.run([SANDGATE, "executions", "show", result["execution_id"], "--json", "--config", str(config)],
                                capture_output=True, text=True, timeout=60)
    calls = json.loads(shown_json.stdout)["execution"]["call_rows"]
    assert [c["tool"] for c in calls] == ["create_entities", "read_text_file"], calls
    assert all(c["started_ms"] is not None and c["args_bytes"] > 0 for c in calls), calls
    if record_arguments:
        assert json.loads(calls[0]["arguments"])["entities"][0]["observations"] == ["secret-42"], calls
        assert "arguments: {" in text, text
    else:
        assert all(c["arguments"] is None for c in calls), calls
        assert "secret-42" not in text and "arguments:" not in text, text
