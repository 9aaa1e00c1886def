"""Real operations (issue 18, items 2-4): a backend that is slow to start still connects, the
config is reloaded while serving, and the HTTP listener answers health, readiness and metrics."""

from __future__ import annotations

import json
import time

import anyio
import pytest

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
