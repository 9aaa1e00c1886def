"""Cancellation and shutdown, end to end, against the real npm servers.

- A client that cancels a running call_tool_chain (notifications/cancelled, sent by the Python SDK
  when the calling task is cancelled) stops the script: no later tool call is made, and the record
  says `cancelled`.
- SIGINT and SIGTERM stop `sandgate serve` within 2 s on stdio (with stdin held open) and on HTTP,
  cancel what is running, and leave no child process behind. A second signal exits at once.
  SIGHUP does not stop it.
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from conftest import (GENERATED_TOKEN, SANDGATE, HttpServer, assert_one_cancelled_soon, auth_headers, connect,
                      reference_servers, state_home, write_config)
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from hostile import children, cmdline

pytestmark = pytest.mark.anyio


def descendants(pid: int) -> list[int]:
    found, queue = [], [pid]
    while queue:
        for child in children(queue.pop()):
            found.append(child)
            queue.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as status:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in status)
    except FileNotFoundError:
        return False


def records(config: Path) -> list[dict]:
    out = subprocess.run([SANDGATE, "executions", "list", "--config", str(config), "--json"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def memory_entities(tmp_path: Path) -> list[str]:
    path = tmp_path / "memory.jsonl"
    if not path.exists():
        return []
    names = []
    for line in path.read_text().splitlines():
        if line.strip():
            item = json.loads(line)
            if item.get("type") == "entity":
                names.append(item["name"])
    return names


WRITER = """
for (let i = 0; i < 20; i++) {
  await memory.create_entities({entities: [{name: `e${i}`, entityType: "test", observations: []}]});
  await new Promise(r => setTimeout(r, 300));
}
return "all written";
"""


async def test_a_cancelled_chain_stops_writing(tmp_path):
    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    async with connect("stdio", config) as client:
        async with anyio.create_task_group() as group:
            scope = anyio.CancelScope()

            async def run():
                with scope:
                    await client.call_tool("call_tool_chain", {"code": WRITER})

            group.start_soon(run)
            with anyio.fail_after(20):
                while memory_entities(tmp_path) != ["e0"]:
                    await anyio.sleep(0.02)
            # The backend writes its file before it answers: give the answer a moment to arrive
            # (the next write is 300 ms away), so the first call is on record as finished.
            await anyio.sleep(0.1)
            scope.cancel()
        # Longer than several of the script's write intervals: had it gone on, e1.. would exist.
        await anyio.sleep(1.5)
        assert memory_entities(tmp_path) == ["e0"]
        graph = await client.call_tool("call_tool_chain", {"code": "return (await memory.read_graph({})).entities.map(e => e.name)"})
        assert graph.structured_content["result"] == ["e0"], graph.structured_content
    cancelled = [r for r in records(config) if r["status"] == "cancelled"]
    assert len(cancelled) == 1, records(config)
    assert cancelled[0]["error_kind"] == "cancelled"
    shown = subprocess.run([SANDGATE, "executions", "show", cancelled[0]["id"], "--config", str(config), "--json"], capture_output=True, text=True, timeout=30)
    calls = json.loads(shown.stdout)["execution"]["call_rows"]
    assert [(c["tool"], c["duration_ms"] is not None, c["changed_state"]) for c in calls] == [("create_entities", True, True)], calls


@pytest.mark.parametrize("code", [
    '{"tool": "everything.trigger-long-running-operation", "arguments": {"duration": 8, "steps": 1}}',
    "return await everything['trigger-long-running-operation']({duration: 8, steps: 1})",
], ids=["json", "single_call"])
async def test_a_cancel_stops_the_direct_tiers_too(tmp_path, code):
    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    async with connect("stdio", config) as client:
        started = time.monotonic()
        with anyio.move_on_after(0.8):
            await client.call_tool("call_tool_chain", {"code": code})
        with anyio.fail_after(5):
            while not records(config):
                await anyio.sleep(0.05)
        assert time.monotonic() - started < 3
    found = records(config)
    tier = "json" if code.startswith("{") else "single_call"
    assert [(r["status"], r["tier"]) for r in found] == [("cancelled", tier)], found


class Serving:
    """`sandgate serve` in a process of its own, with its stderr collected."""

    def __init__(self, config: Path, http: bool):
        args = [SANDGATE, "serve", "--config", str(config)] + (["--http", "127.0.0.1:0"] if http else [])
        # stdin stays open (a pipe nobody writes to or closes): the case that used to hang.
        env = {**os.environ, "XDG_STATE_HOME": str(state_home(config))}
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        self.log: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.time() + 30
        while time.time() < deadline and sum("backend ready" in line for line in self.log) < 3:
            time.sleep(0.05)
        assert sum("backend ready" in line for line in self.log) == 3, "".join(self.log)
        # The sandbox workers are up by now too.
        self.tree = descendants(self.proc.pid)
        assert any("__sandbox-worker" in cmdline(p) for p in self.tree), self.tree
        assert sum("node" in cmdline(p) for p in self.tree) >= 3, [cmdline(p) for p in self.tree]

    def _pump(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def target(self):
        """A transport to the HTTP front with the token sandgate generated and printed."""
        token = next(m.group(1) for line in self.log if (m := GENERATED_TOKEN.search(line)))
        client = create_mcp_http_client(headers=auth_headers(token))
        return streamable_http_client(self.url(), http_client=client)

    def url(self) -> str:
        for line in self.log:
            if match := re.search(r"at (http://\S+/mcp)", line):
                return match.group(1)
        raise AssertionError("no URL in the log:\n" + "".join(self.log))

    def stop_with(self, *signals, gap=0.0) -> float:
        started = time.monotonic()
        for sig in signals:
            self.proc.send_signal(sig)
            time.sleep(gap)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("sandgate did not exit within 5 s:\n" + "".join(self.log[-20:]))
        return time.monotonic() - started

    def assert_no_child_survives(self):
        time.sleep(0.2)
        left = [(p, cmdline(p)) for p in self.tree if alive(p)]
        assert not left, left


@pytest.mark.parametrize("http", [False, True], ids=["stdio", "http"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_gateway_and_its_children(tmp_path, http, sig):
    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    serving = Serving(config, http)
    took = serving.stop_with(sig)
    assert took < 2.0, f"took {took:.2f} s:\n" + "".join(serving.log[-10:])
    serving.assert_no_child_survives()


def test_a_second_signal_exits_at_once(tmp_path):
    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    serving = Serving(config, http=False)
    took = serving.stop_with(signal.SIGINT, signal.SIGINT, gap=0.01)
    assert took < 2.0
    serving.assert_no_child_survives()


async def test_sighup_does_not_stop_it_and_a_shutdown_cancels_what_runs(tmp_path):
    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    serving = Serving(config, http=True)
    try:
        serving.proc.send_signal(signal.SIGHUP)
        await anyio.sleep(0.5)
        assert serving.proc.poll() is None, "SIGHUP stopped the gateway"
        from mcp import Client

        async with Client(serving.target(), mode="legacy", read_timeout_seconds=30) as client:
            still = await client.call_tool("call_tool_chain", {"code": "return await everything.echo({message: 'after SIGHUP'})"})
            assert still.structured_content["result"] == "Echo: after SIGHUP"

            async def long_running():
                try:
                    await client.call_tool("call_tool_chain", {"code": "await everything.echo({message: 'started'}); await new Promise(r => setTimeout(r, 20000)); return 1"})
                except Exception:  # noqa: BLE001 - the connection goes away with the gateway
                    pass

            async with anyio.create_task_group() as group:
                group.start_soon(long_running)
                await anyio.sleep(1.0)
                took = await anyio.to_thread.run_sync(serving.stop_with, signal.SIGTERM)
                group.cancel_scope.cancel()
        assert took < 2.0, took
        serving.assert_no_child_survives()
        statuses = [r["status"] for r in records(config)]
        assert "cancelled" in statuses, statuses
    finally:
        if serving.proc.poll() is None:
            serving.proc.kill()


def test_a_client_that_disconnects_over_http_cancels_its_execution(tmp_path):
    """A legacy (2025-11-25) HTTP session whose client drops the connection while its
    call_tool_chain runs: the execution is cancelled then, not when its 8 s would have passed."""
    import re
    import socket

    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    server = HttpServer(config)
    try:
        port = int(re.search(r":(\d+)/mcp", server.url).group(1))

        def post(body, session=None, keep=False):
            conn = socket.create_connection(("127.0.0.1", port))
            data = json.dumps(body).encode()
            head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                    f"Accept: application/json, text/event-stream\r\nContent-Length: {len(data)}\r\n"
                    f"Authorization: Bearer {server.token}\r\n")
            if session:
                head += f"Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n"
            conn.sendall((head + "\r\n").encode() + data)
            if keep:
                return conn
            conn.settimeout(5)
            received = b""
            while b"\r\n\r\n" not in received or (b"data:" not in received and b" 202 " not in received):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                received += chunk
            conn.close()
            return received.decode(errors="replace")

        answer = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        session = re.search(r"(?i)mcp-session-id: (\S+)", answer).group(1)
        post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        code = "await everything.echo({message: 'a'}); await new Promise(r => setTimeout(r, 8000)); return 1"
        conn = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "call_tool_chain", "arguments": {"code": code}}}, session, keep=True)
        time.sleep(1.0)
        conn.close()
        assert_one_cancelled_soon(config)
    finally:
        server.close()
