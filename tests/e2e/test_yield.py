"""Scripts that outlive their first answer (issue 30, clients without tasks): `call_tool_chain`
with `yield_after_ms` answers with the execution's id, `running`, and the logs and calls so
far; `wait_execution` waits again, returns the very answer the call would have given (same
result, same record), or cancels it. Over stdio (2025-11-25) and HTTP (2026-07-28), with the
fake backend's `slow` tool as the slow API."""

from __future__ import annotations

import time

import pytest

from mcp import Client

from conftest import HttpServer, connect, execution_records, fake_backend_toml, one_process_only, structured, text_of

pytestmark = [pytest.mark.anyio, one_process_only(
    "a detached execution lives on the replica that runs it; behind a balancer without stickiness, wait_execution may reach another (docs/call_tool_chain.md)")]

SCRIPT = """console.log("started");
for (let i = 0; i < 4; i++) {
  await fake.slow({ ms: 400 });
  console.log("step " + i);
}
return { done: true, steps: 4 };"""

FOREVER = """let i = 0;
while (true) { await fake.slow({ ms: 100 }); i++; }"""


def config(tmp_path):
    path = tmp_path / "sandgate.toml"
    path.write_text(fake_backend_toml() + f'\n[store]\npath = "{tmp_path / "store.db"}"\n')
    return path


def same_answer(a, b):
    """Two answers to one script, alike but for the execution's own id and times."""
    def strip(result):
        data = dict(result.structured_content or {})
        for key in ("execution_id", "duration_ms", "calls"):
            data.pop(key, None)
        return data
    return strip(a) == strip(b) and a.is_error == b.is_error


@pytest.mark.parametrize("transport,mode", [("stdio", "legacy"), ("http", "2026-07-28")])
async def test_a_yielded_script_is_waited_for_and_answers_as_it_would_have(tmp_path, transport, mode):
    path = config(tmp_path)
    async with connect(transport, path, mode) as client:
        whole = await client.call_tool("call_tool_chain", {"code": SCRIPT})
        assert structured(whole)["result"] == {"done": True, "steps": 4}
        started = time.monotonic()
        first = await client.call_tool("call_tool_chain", {"code": SCRIPT, "yield_after_ms": 600})
        assert time.monotonic() - started < 1.5, "the answer came at the yield, not at the end"
        running = structured(first)
        assert running["status"] == "running", running
        assert [line["message"] for line in running["logs"]][:1] == ["started"], running
        assert running["calls_finished"] >= 1 and running["calls"][0]["tool"] == "fake.slow", running
        assert "wait_execution" in text_of(first)
        execution = running["execution_id"]
        again = structured(await client.call_tool("wait_execution", {"execution_id": execution, "timeout_ms": 100}))
        assert again["status"] == "running" and again["calls_finished"] >= running["calls_finished"], again
        done = await client.call_tool("wait_execution", {"execution_id": execution, "timeout_ms": 10_000})
        assert same_answer(done, whole), (done.structured_content, whole.structured_content)
        assert structured(done)["execution_id"] == execution
        # The same record as a call that was waited for whole.
        records = {r["id"]: r for r in execution_records(path)}
        ours, theirs = records[execution], records[structured(whole)["execution_id"]]
        assert (ours["status"], ours["calls"], ours["tier"]) == (theirs["status"], theirs["calls"], theirs["tier"]) == ("ok", 4, "sandbox")
        # Once done, waiting again gives the same answer at once.
        started = time.monotonic()
        later = await client.call_tool("wait_execution", {"execution_id": execution})
        assert time.monotonic() - started < 1 and same_answer(later, whole)


@pytest.mark.parametrize("transport,mode", [("stdio", "legacy"), ("http", "2026-07-28")])
async def test_a_yielded_script_is_cancelled_and_starts_no_call_after(tmp_path, transport, mode):
    path = config(tmp_path)
    async with connect(transport, path, mode) as client:
        first = structured(await client.call_tool("call_tool_chain", {"code": FOREVER, "yield_after_ms": 300}))
        execution = first["execution_id"]
        stopped = await client.call_tool("wait_execution", {"execution_id": execution, "cancel": True})
        assert stopped.is_error and "cancelled" in text_of(stopped), text_of(stopped)
        time.sleep(1)
        record = {r["id"]: r for r in execution_records(path)}[execution]
        assert record["status"] == "cancelled", record
        calls_then = record["calls"]
        time.sleep(1)
        assert {r["id"]: r for r in execution_records(path)}[execution]["calls"] == calls_then


OWNER_TOKEN = "owner-token-" + "o" * 24
OTHER_TOKEN = "other-token-" + "t" * 24


async def test_an_execution_is_its_callers_in_any_session_and_nobody_elses(tmp_path):
    """Issue 47, item 18: `wait_execution` and `read_output` are bound to the caller (its
    token), not to the MCP session that started the execution: another session of the same
    token waits for it and reads its output. Another token of the same profile, and a made-up
    id, get the same answer: nothing."""
    path = config(tmp_path)
    path.write_text(path.read_text() + f"""
[[http.tokens]]
name = "owner"
token = "{OWNER_TOKEN}"
profile = "default"

[[http.tokens]]
name = "other"
token = "{OTHER_TOKEN}"
profile = "default"
""")
    server = HttpServer(path, token=OWNER_TOKEN)
    owner_headers = {"Authorization": f"Bearer {OWNER_TOKEN}"}
    try:
        async with Client(server.target(owner_headers), mode="legacy") as owner:
            first = structured(await owner.call_tool("call_tool_chain", {"code": SCRIPT, "yield_after_ms": 100}))
            execution = first["execution_id"]
            async with Client(server.target({"Authorization": f"Bearer {OTHER_TOKEN}"}), mode="legacy") as other:
                for asked in (execution, "ex-made-up-" + "0" * 32):
                    for arguments in ({"execution_id": asked}, {"execution_id": asked, "cancel": True}):
                        refused = await other.call_tool("wait_execution", arguments)
                        assert refused.is_error and "no execution" in text_of(refused), text_of(refused)
                        assert "started with yield_after_ms (a caller is its token or user" in text_of(refused)
            bad = await owner.call_tool("wait_execution", {"execution_id": execution, "timeout_ms": "soon"})
            assert bad.is_error and "invalid arguments" in text_of(bad)
            large = structured(await owner.call_tool("call_tool_chain", {"code": "return 'x'.repeat(30000);"}))
            assert large["output"]["stored"], large["output"]
        # The owner's first session has ended; a new one of the same token is the same caller.
        async with Client(server.target(owner_headers), mode="legacy") as again:
            done = await again.call_tool("wait_execution", {"execution_id": execution, "timeout_ms": 10_000})
            assert structured(done)["result"] == {"done": True, "steps": 4}, "the other caller changed nothing"
            read = await again.call_tool("read_output", {"execution_id": large["execution_id"], "length": 100})
            assert not read.is_error and read.structured_content["text"] == "x" * 100, text_of(read)
        async with Client(server.target({"Authorization": f"Bearer {OTHER_TOKEN}"}), mode="legacy") as other:
            refused = await other.call_tool("read_output", {"execution_id": large["execution_id"]})
            assert refused.is_error and "its token or user, in any session" in text_of(refused), text_of(refused)
    finally:
        server.close()


async def test_a_client_that_can_be_asked_still_gets_its_yield(tmp_path):
    """A 2026-07-28 client that declares elicitation is answered by the path that can ask it
    (input-required results); `yield_after_ms` holds there too."""
    import mcp.types as types

    async def never(context, params):
        return types.ElicitResult(action="decline")

    path = config(tmp_path)
    server = HttpServer(path)
    try:
        async with Client(server.target(), mode="2026-07-28", read_timeout_seconds=60, elicitation_callback=never) as client:
            started = time.monotonic()
            first = await client.call_tool("call_tool_chain", {"code": SCRIPT, "yield_after_ms": 600})
            assert time.monotonic() - started < 1.5, "the answer came at the yield"
            running = structured(first)
            assert running["status"] == "running", running
            done = await client.call_tool("wait_execution", {"execution_id": running["execution_id"], "timeout_ms": 10_000})
            assert structured(done)["result"] == {"done": True, "steps": 4}
    finally:
        server.close()
