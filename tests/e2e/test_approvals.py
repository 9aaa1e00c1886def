"""Calls a person approves before they run, from inside a script (issue 30): the real Python SDK
client's elicitation callback answers, over 2025-11-25 sessions on stdio and HTTP
(`elicitation/create`) and a 2026-07-28 stateless connection (input-required results and the client's retry, with sealed
request state). The gated tool is server-memory's `create_entities`, so a call that did not run
is seen not to have run: the graph stays empty.

In a `Promise.all` of five calls, the four others run while the gated one waits; yes runs it, no
throws `ApprovalDenied` (which the script catches), a timeout throws it, and a client that
cannot be asked gets a clear refusal at once. Every question and answer is an audit line."""

from __future__ import annotations

import json
import time

import pytest

import mcp.types as types
from mcp import Client, StdioServerParameters

from conftest import NODE_MODULES, SANDGATE, HttpServer, one_process_only, structured, text_of

pytestmark = [pytest.mark.anyio, one_process_only(
    "a parked script lives on the replica that runs it; the retry must reach it (docs/call_tool_chain.md, Approvals)")]

ERAS = [("stdio", "legacy"), ("http", "legacy"), ("http", "2026-07-28")]

# Five calls at once: four plain, one gated. Each reports when it settled, and how.
FIVE = """
const t0 = Date.now();
const settle = (p) => p.then(
  (v) => ({ ok: true, at: Date.now() - t0 }),
  (e) => ({ ok: false, denied: e instanceof ApprovalDenied, name: e.name, message: e.message, at: Date.now() - t0 }));
const results = await Promise.all([
  settle(everything.echo({ message: "one" })),
  settle(everything.echo({ message: "two" })),
  settle(everything.echo({ message: "three" })),
  settle(everything.echo({ message: "four" })),
  settle(memory.create_entities({ entities: [{ name: "release", entityType: "event", observations: ["token=s3cr3t-value"] }] })),
]);
const graph = await memory.read_graph({});
return { results, entities: graph.entities.length };
"""


def config(tmp_path, timeout="20s", audit=True):
    path = tmp_path / "sandgate.toml"
    servers = {
        "everything": f'command = "node"\nargs = [{json.dumps(str(NODE_MODULES / "server-everything/dist/index.js"))}, "stdio"]',
        "memory": f'command = "node"\nargs = [{json.dumps(str(NODE_MODULES / "server-memory/dist/index.js"))}]\n'
                  f'approve = ["create_*"]\nenv = {{ MEMORY_FILE_PATH = {json.dumps(str(tmp_path / "memory.jsonl"))} }}',
    }
    text = "".join(f"[servers.{name}]\n{body}\n\n" for name, body in servers.items())
    text += f'[approvals]\ntimeout = "{timeout}"\n\n[store]\npath = {json.dumps(str(tmp_path / "store.db"))}\n'
    if audit:
        text += f'\n[audit]\npath = {json.dumps(str(tmp_path / "audit.jsonl"))}\narguments = true\n'
    path.write_text(text)
    return path


class Person:
    """The person behind the client: answers each question after `delay` seconds with
    `action`, and keeps what they were asked."""

    def __init__(self, action: str, delay: float = 1.0):
        self.action, self.delay, self.asked = action, delay, []

    async def __call__(self, context, params):
        import anyio
        self.asked.append(params.message)
        await anyio.sleep(self.delay)
        return types.ElicitResult(action=self.action)


def client_for(transport: str, mode: str, path, person, server_holder: list):
    if transport == "stdio":
        params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(path)])
        return Client(params, mode=mode, read_timeout_seconds=60, elicitation_callback=person)
    server = HttpServer(path)
    server_holder.append(server)
    return Client(server.target(), mode=mode, read_timeout_seconds=60, elicitation_callback=person)


async def run_five(transport, mode, path, person):
    servers = []
    try:
        async with client_for(transport, mode, path, person, servers) as client:
            started = time.monotonic()
            result = await client.call_tool("call_tool_chain", {"code": FIVE})
            return structured(result)["result"], time.monotonic() - started
    finally:
        for server in servers:
            server.close()


def audit_lines(tmp_path):
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("transport,mode", ERAS)
async def test_yes_runs_the_gated_call_after_the_other_four(tmp_path, transport, mode):
    path = config(tmp_path)
    person = Person("accept", delay=1.5)
    result, took = await run_five(transport, mode, path, person)
    plain, gated = result["results"][:4], result["results"][4]
    assert all(r["ok"] for r in plain) and gated["ok"], result
    assert max(r["at"] for r in plain) < 1000 <= gated["at"], f"the four ran while the gated call waited: {result}"
    assert result["entities"] == 1, "approved, it ran"
    assert len(person.asked) == 1
    question = person.asked[0]
    assert "memory.create_entities" in question and "servers.memory.approve: memory.create_*" in question, question
    assert "line 11)" in question, f"the question names the script's line: {question}"
    assert "s3cr3t-value" not in question and "release" in question, question
    lines = [line for line in audit_lines(tmp_path) if line.get("kind") == "approval"]
    assert [line["decision"] for line in lines] == ["ask", "allow"], lines
    assert lines[0]["rule"].startswith("asked:") and lines[1]["rule"].startswith("approved by client"), lines


@pytest.mark.parametrize("transport,mode", ERAS)
async def test_no_throws_approval_denied_and_the_call_never_runs(tmp_path, transport, mode):
    path = config(tmp_path)
    person = Person("decline", delay=0.5)
    result, _ = await run_five(transport, mode, path, person)
    plain, gated = result["results"][:4], result["results"][4]
    assert all(r["ok"] for r in plain), result
    assert gated["ok"] is False and gated["denied"] is True and gated["name"] == "ApprovalDenied", gated
    assert "declined" in gated["message"], gated
    assert result["entities"] == 0, "denied, it never ran"
    lines = [line for line in audit_lines(tmp_path) if line.get("kind") == "approval"]
    assert [line["decision"] for line in lines] == ["ask", "deny"] and "declined" in lines[1]["rule"], lines


@pytest.mark.parametrize("transport,mode", ERAS)
async def test_no_answer_in_time_throws_approval_denied(tmp_path, transport, mode):
    path = config(tmp_path, timeout="2s")
    person = Person("accept", delay=6)
    result, took = await run_five(transport, mode, path, person)
    gated = result["results"][4]
    assert gated["denied"] is True and gated["at"] < 5000, gated
    assert result["entities"] == 0


@pytest.mark.parametrize("transport,mode", ERAS)
async def test_a_client_that_cannot_be_asked_is_refused_at_once(tmp_path, transport, mode):
    path = config(tmp_path)
    servers = []
    try:
        if transport == "stdio":
            client = Client(StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(path)]), mode=mode)
        else:
            servers.append(HttpServer(path))
            client = Client(servers[0].target(), mode=mode)
        async with client:
            result = structured(await client.call_tool("call_tool_chain", {"code": FIVE}))["result"]
    finally:
        for server in servers:
            server.close()
    gated = result["results"][4]
    assert gated["denied"] is True and gated["at"] < 1000, gated
    assert "cannot ask" in gated["message"] and "elicitation" in gated["message"], gated
    assert result["entities"] == 0 and all(r["ok"] for r in result["results"][:4])


async def test_an_uncaught_denial_ends_the_script_with_a_hint_that_names_it(tmp_path):
    path = config(tmp_path)
    person = Person("decline", delay=0.1)
    async with Client(StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(path)]),
                      mode="legacy", elicitation_callback=person) as client:
        result = await client.call_tool("call_tool_chain", {
            "code": 'await memory.create_entities({ entities: [{ name: "x", entityType: "t", observations: [] }] }); return "ran";'})
    assert result.is_error, text_of(result)
    text = text_of(result)
    assert "ApprovalDenied" in text and "instanceof ApprovalDenied" in text, text


async def test_the_tool_description_names_the_calls_that_need_approval(tmp_path):
    path = config(tmp_path)
    async with Client(StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(path)]), mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    description = tools["call_tool_chain"].description
    assert "memory.create_*" in description and "ApprovalDenied" in description, description


# The same five calls in Python (issue 50): a Python script parks on an approval as a
# TypeScript one does, and `except ApprovalDenied` catches a no.
FIVE_PY = """
import asyncio
from datetime import datetime
t0 = datetime.now()
gated = memory.create_entities(entities=[{"name": "release", "entityType": "event", "observations": ["token=s3cr3t-value"]}])
plain = await asyncio.gather(
    everything.echo(message="one"),
    everything.echo(message="two"),
    everything.echo(message="three"),
    everything.echo(message="four"),
)
plain_at = (datetime.now() - t0).total_seconds()
try:
    await gated
    outcome = {"ok": True}
except ApprovalDenied as e:
    outcome = {"ok": False, "denied": True, "message": str(e)}
graph = await memory.read_graph()
{"plain": plain, "plain_at": plain_at, "gated_at": (datetime.now() - t0).total_seconds(), "gated": outcome,
 "entities": len(graph["entities"])}
"""

# Monty 0.0.23 fails an `asyncio.gather` whose task's call failed, before the task's own
# `except` sees it (CPython raises it in the task first), so the gated call is awaited by
# itself here; docs/call_tool_chain.md says so.


@pytest.mark.parametrize("transport,mode", ERAS)
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_a_python_script_parks_on_an_approval_like_a_typescript_one(tmp_path, transport, mode, action):
    path = config(tmp_path)
    person = Person(action, delay=1.0)
    servers = []
    try:
        async with client_for(transport, mode, path, person, servers) as client:
            result = structured(await client.call_tool("call_tool_chain", {"code": FIVE_PY, "language": "python"}))["result"]
    finally:
        for server in servers:
            server.close()
    plain, gated = result["plain"], result["gated"]
    assert plain == ["Echo: one", "Echo: two", "Echo: three", "Echo: four"], result
    assert result["plain_at"] < 1.0 <= result["gated_at"], f"the four ran while the gated call waited: {result}"
    assert len(person.asked) == 1 and "memory.create_entities" in person.asked[0], person.asked
    assert "s3cr3t-value" not in person.asked[0], person.asked
    if action == "accept":
        assert gated["ok"] and result["entities"] == 1, result
    else:
        assert gated["denied"] and "declined" in gated["message"] and result["entities"] == 0, result
    lines = [line for line in audit_lines(tmp_path) if line.get("kind") == "approval"]
    assert [line["decision"] for line in lines] == ["ask", "allow" if action == "accept" else "deny"], lines
