"""Replicas of `sandgate serve --http` on one PostgreSQL store: a stored tool registered on one
is callable on the other, an output one stored is read whole and by range from the other (by
its owner only), the records either wrote are listed by the CLI from the same store, one
execution rate holds across them, a 2025-11-25 session opened on one continues on any other
(with its own token only) and ends on all when ended on one, a console login works on every
replica, and the console's live list shows every replica's executions, from their start.

PostgreSQL is the throwaway server `scripts/test` starts (`SANDGATE_TEST_DATABASE_URL`); each
test makes a database of its own. Without it the tests are skipped, unless
`SANDGATE_REQUIRE_POSTGRES=1`, which makes that a failure."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time

import anyio
import httpx2 as httpx
import pytest
from mcp import Client

from cluster import fresh_database
from conftest import REPO, SANDGATE, OneProcess, fake_backend_toml, read_output_whole, state_home, structured, text_of

pytestmark = pytest.mark.anyio

TOKEN_A = "replica-token-" + secrets.token_hex(16)
TOKEN_B = "replica-other-" + secrets.token_hex(16)


def replica_config(tmp_path, url: str):
    os.environ.update({"REPLICA_DATABASE_URL": url, "REPLICA_TOKEN_A": TOKEN_A, "REPLICA_TOKEN_B": TOKEN_B})
    config = tmp_path / "sandgate.toml"
    ca = os.environ.get("SANDGATE_TEST_DATABASE_CA")
    ca_line = f"ca_file = {json.dumps(ca)}" if ca else ""
    config.write_text(f"""
[store]
backend = "postgres"
url = "${{REPLICA_DATABASE_URL}}"
{ca_line}

{fake_backend_toml()}
[profiles.other]
tools = ["*"]

[stored_tools]
expose_as_mcp_tools = true

[[http.tokens]]
token = "${{REPLICA_TOKEN_A}}"
profile = "default"
name = "a"

[[http.tokens]]
token = "${{REPLICA_TOKEN_B}}"
profile = "other"
name = "b"
""")
    return config


SUM = """export const meta = {
  description: "Sum of a list of numbers",
  input: { type: "object", properties: { xs: { type: "array", items: { type: "number" } } }, required: ["xs"] },
};
export default async function (input: { xs: number[] }) {
  return { total: input.xs.reduce((a, b) => a + b, 0) };
}
"""


async def test_a_tool_registered_on_one_replica_runs_on_the_other_and_outputs_are_read_anywhere(tmp_path):
    config = replica_config(tmp_path, fresh_database("replicas"))
    one = OneProcess(config, token=TOKEN_A)
    two = OneProcess(config, token=TOKEN_A)
    try:
        async with Client(one.target(), mode="2026-07-28") as a, Client(two.target(), mode="2026-07-28") as b:
            done = await a.call_tool("register_tool", {"name": "sum_numbers", "code": SUM})
            assert not done.is_error and "version 1" in text_of(done), text_of(done)
            # The other replica sees the change (its watch reads the store's change mark).
            executions = 0
            with anyio.fail_after(10):
                while True:
                    executions += 1
                    ran = await b.call_tool("call_tool_chain", {"code": "return await user.sum_numbers({xs: [2, 3]})"})
                    if not ran.is_error and structured(ran).get("result") == {"ok": True, "data": {"total": 5}}:
                        break
                    assert "user is not defined" in text_of(ran), text_of(ran)
                    await anyio.sleep(0.2)
            # An output stored by one replica is read whole and by range on the other (by a
            # stateless caller, whose outputs its profile shares).
            big = structured(await a.call_tool("call_tool_chain", {"code": "return 'é'.repeat(40000)"}))
            executions += 1
            assert big["shaped"], big
            pieces = await read_output_whole(b, big["execution_id"])
            assert "".join(pieces) == "é" * 40000, [len(p) for p in pieces]
            part = structured(await b.call_tool("read_output", {"execution_id": big["execution_id"], "offset": 3, "length": 5}))
            assert (part["text"], part["start"], part["end"]) == ("ééé", 2, 8), part  # on character boundaries
        # Another caller on the other replica does not read it.
        async with Client(two.target(headers={"Authorization": f"Bearer {TOKEN_B}"}), mode="2026-07-28") as other:
            refused = await other.call_tool("read_output", {"execution_id": big["execution_id"]})
            assert refused.is_error and "no stored output" in text_of(refused), text_of(refused)
    finally:
        one.close()
        two.close()
    # The CLI lists what both replicas recorded, from the same store.
    env = {**os.environ, "XDG_STATE_HOME": str(state_home(config))}
    listed = subprocess.run([SANDGATE, "executions", "list", "--json", "--config", str(config)],
                            capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert listed.returncode == 0, listed.stderr
    records = json.loads(listed.stdout)
    assert len(records) == executions and big["execution_id"] in [r["id"] for r in records], (executions, records[:3])
    migrated = subprocess.run([SANDGATE, "migrate", "--config", str(config)],
                              capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert migrated.returncode == 0 and "postgres" in migrated.stdout, migrated.stderr


async def test_a_profiles_execution_rate_is_one_limit_across_replicas(tmp_path):
    config = replica_config(tmp_path, fresh_database("rates"))
    config.write_text(config.read_text().replace(
        "[profiles.other]\ntools = [\"*\"]",
        "[profiles.other]\ntools = [\"*\"]\nlimits = { executions_per_minute = 4 }"))
    one = OneProcess(config, token=TOKEN_B)
    two = OneProcess(config, token=TOKEN_B)
    try:
        async with Client(one.target(), mode="2026-07-28") as a, Client(two.target(), mode="2026-07-28") as b:
            answers = []
            for i in range(8):
                client = a if i % 2 == 0 else b
                answers.append(await client.call_tool("call_tool_chain", {"code": f"return {i}"}))
            refused = [text_of(r) for r in answers if r.is_error]
            assert len(refused) == 4, [text_of(r)[:120] for r in answers]
            assert all("may start 4 executions a minute" in said and "Retry in" in said for said in refused), refused
    finally:
        one.close()
        two.close()


def rpc_answer(response) -> dict:
    """The JSON-RPC answer in a response, whether plain JSON or a stream of events."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if "result" in message or "error" in message:
                    return message
        raise AssertionError(f"no answer in the stream: {response.text[:300]}")
    return response.json()


LEGACY = "2025-11-25"


def session_post(server, body: dict, token: str, session: str | None = None):
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", "MCP-Protocol-Version": LEGACY}
    if session:
        headers["Mcp-Session-Id"] = session
    return httpx.post(server.url, json=body, headers=headers, timeout=30)


def open_session(server, token: str) -> str:
    opened = session_post(server, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "replica-test", "version": "1"}}}, token)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    done = session_post(server, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token, session)
    assert done.status_code in (200, 202), done.text
    return session


async def test_a_legacy_session_continues_on_any_replica_with_its_own_token_only(tmp_path):
    config = replica_config(tmp_path, fresh_database("sessions"))
    one = OneProcess(config, token=TOKEN_A)
    two = OneProcess(config, token=TOKEN_A)
    try:
        session = open_session(one, TOKEN_A)
        # The other replica never saw this session: it restores it from the store.
        listed = session_post(two, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, TOKEN_A, session)
        assert listed.status_code == 200, listed.text
        names = [t["name"] for t in rpc_answer(listed)["result"]["tools"]]
        assert "call_tool_chain" in names, names
        # An output stored in the session on one replica is the session's on the other too.
        ran = session_post(two, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "call_tool_chain", "arguments": {"code": "return 'x'.repeat(50000)"}}}, TOKEN_A, session)
        big = rpc_answer(ran)["result"]["structuredContent"]
        assert big["shaped"], big
        read = session_post(one, {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "read_output", "arguments": {"execution_id": big["execution_id"], "offset": 49990}}}, TOKEN_A, session)
        assert rpc_answer(read)["result"]["structuredContent"]["text"] == "x" * 10, read.text[:300]
        # Another valid token with this session id: the answer an unknown session gets, on
        # either replica, and on one that has not restored it yet.
        three = OneProcess(config, token=TOKEN_A)
        try:
            for server in (one, two, three):
                stolen = session_post(server, {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, TOKEN_B, session)
                assert stolen.status_code == 404, (stolen.status_code, stolen.text)
            fresh = session_post(three, {"jsonrpc": "2.0", "id": 6, "method": "tools/list"}, TOKEN_A, session)
            assert fresh.status_code == 200, fresh.text
        finally:
            three.close()
        # Ended on one replica, it is ended on all of them.
        ended = httpx.delete(two.url, headers={"Authorization": f"Bearer {TOKEN_A}", "Mcp-Session-Id": session,
                                               "MCP-Protocol-Version": LEGACY}, timeout=30)
        assert ended.status_code == 204, ended.text
        with anyio.fail_after(5):
            while True:
                after = session_post(one, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}, TOKEN_A, session)
                if after.status_code == 404:
                    break
                assert after.status_code == 200, after.text
                await anyio.sleep(0.1)
    finally:
        one.close()
        two.close()


async def test_a_console_login_and_its_live_executions_span_the_replicas(tmp_path):
    config = replica_config(tmp_path, fresh_database("console"))
    one = OneProcess(config, token=TOKEN_A)
    two = OneProcess(config, token=TOKEN_A)
    try:
        own_one, own_two = one.url.removesuffix("/mcp"), two.url.removesuffix("/mcp")
        login = httpx.post(own_one + "/ui/login", json={"token": TOKEN_A}, headers={"Origin": own_one}, timeout=10)
        assert login.status_code == 200, login.text
        cookie = login.headers["set-cookie"].split(";")[0]
        me = httpx.get(own_two + "/ui/api/me", headers={"Cookie": cookie}, timeout=10)
        assert me.status_code == 200 and me.json()["profile"] == "default", me.text
        # Replica two's browser sees an execution replica one ran.
        seen, watching = anyio.Event(), anyio.Event()
        found: list[str] = []

        async def watch():
            async with httpx.AsyncClient(timeout=None) as http:
                async with http.stream("GET", own_two + "/ui/api/events", headers={"Cookie": cookie}) as events:
                    assert events.status_code == 200
                    watching.set()
                    async for line in events.aiter_lines():
                        if line.startswith("data:") and '"execution_id"' not in line and '"tier"' in line:
                            found.append(json.loads(line[5:])["id"])
                            seen.set()
                            return

        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            with anyio.fail_after(10):
                await watching.wait()
            async with Client(one.target(), mode="2026-07-28") as a:
                ran = structured(await a.call_tool("call_tool_chain", {"code": "return 41 + 1"}))
            with anyio.fail_after(10):
                await seen.wait()
            group.cancel_scope.cancel()
        assert found == [ran["execution_id"]], (found, ran["execution_id"])
        # An execution is on record from its start: replica two lists one still running on one.
        async with Client(one.target(), mode="2026-07-28") as a:
            async with anyio.create_task_group() as group:
                group.start_soon(a.call_tool, "call_tool_chain", {"code": "return await fake.slow({ms: 2500})"})
                with anyio.fail_after(5):
                    while True:
                        listed = httpx.get(own_two + "/ui/api/executions?status=running", headers={"Cookie": cookie}, timeout=10)
                        running = listed.json()["executions"]
                        if running:
                            break
                        await anyio.sleep(0.1)
                assert len(running) == 1 and running[0]["tier"] == "single_call", running
        finished = httpx.get(own_two + "/ui/api/execution?id=" + running[0]["id"], headers={"Cookie": cookie}, timeout=10)
        assert finished.json()["execution"]["status"] == "ok", finished.text[:300]
        # Logged out on replica two, the login is gone on replica one.
        out = httpx.post(own_two + "/ui/logout", headers={"Cookie": cookie, "Origin": own_two}, timeout=10)
        assert out.status_code == 204, out.text
        gone = httpx.get(own_one + "/ui/api/me", headers={"Cookie": cookie}, timeout=10)
        assert gone.status_code == 401, gone.text
    finally:
        one.close()
        two.close()


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def test_hostile_session_ids_and_oversized_handshakes_on_a_shared_store(tmp_path):
    """Unknown, forged and long session ids cost one lookup each and get 404 on every replica;
    a session whose `initialize` parameters are over the 64 KiB kept for other replicas works on
    its own replica and is an unknown session elsewhere (not a 4 MiB row per session)."""
    config = replica_config(tmp_path, fresh_database("hostile_sessions"))
    one = OneProcess(config, token=TOKEN_A)
    two = OneProcess(config, token=TOKEN_A)
    try:
        rss_before = rss_kib(two.proc.pid)
        started = time.monotonic()
        for i in range(300):
            forged = ("f" * 36) if i % 3 else secrets.token_hex(2000)
            answer = session_post(two, {"jsonrpc": "2.0", "id": i, "method": "tools/list"}, TOKEN_A, forged)
            assert answer.status_code == 404 and len(answer.content) < 300, (answer.status_code, answer.text[:200])
        assert time.monotonic() - started < 30, time.monotonic() - started
        assert rss_kib(two.proc.pid) - rss_before < 50 * 1024, (rss_before, rss_kib(two.proc.pid))
        huge = session_post(one, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "x" * 100_000, "version": "1"}}}, TOKEN_A)
        assert huge.status_code == 200, huge.text[:200]
        session = huge.headers["mcp-session-id"]
        session_post(one, {"jsonrpc": "2.0", "method": "notifications/initialized"}, TOKEN_A, session)
        here = session_post(one, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, TOKEN_A, session)
        assert here.status_code == 200, here.text[:200]
        elsewhere = session_post(two, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, TOKEN_A, session)
        assert elsewhere.status_code == 404, (elsewhere.status_code, elsewhere.text[:200])
        rows = subprocess.run(["psql", os.environ["REPLICA_DATABASE_URL"] + "?sslmode=disable", "-At", "-c",
                               "SELECT coalesce(max(length(state)), 0) FROM shared_sessions"],
                              capture_output=True, text=True, check=True)
        assert int(rows.stdout.strip()) <= 64 * 1024, rows.stdout
        # Both still answer.
        fresh = open_session(two, TOKEN_A)
        assert session_post(one, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, TOKEN_A, fresh).status_code == 200
    finally:
        one.close()
        two.close()


async def test_with_records_before_response_a_replica_killed_after_answering_keeps_the_record(tmp_path):
    """`[store] records = "before_response"`: an answered execution is on record, finished,
    even when its replica is killed (SIGKILL) the moment the answer arrives."""
    url = fresh_database("killed")
    config = replica_config(tmp_path, url)
    config.write_text(config.read_text().replace('[store]\n', '[store]\nrecords = "before_response"\n', 1))
    one = OneProcess(config, token=TOKEN_A)
    answered = []
    try:
        async with Client(one.target(), mode="2026-07-28") as client:
            for i in range(5):
                ran = await client.call_tool("call_tool_chain", {"code": f"return await fake.echo({{text: 'x{i}'}})"})
                assert not ran.is_error, ran.content
                answered.append(ran.structured_content["execution_id"])
            ran = await client.call_tool("call_tool_chain", {"code": "return await fake.echo({text: 'last'})"})
            one.proc.kill()
            answered.append(ran.structured_content["execution_id"])
    finally:
        one.proc.kill()
        one.close()
    rows = subprocess.run(["psql", url + "?sslmode=disable", "-At", "-F", " ", "-c", "SELECT id, status FROM executions"],
                          capture_output=True, text=True, check=True)
    statuses = dict(line.split(" ", 1) for line in rows.stdout.split("\n") if line)
    assert all(statuses.get(i) == "ok" for i in answered), (answered, statuses)
