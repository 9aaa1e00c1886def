"""Hostile answers to approvals, at the level a 2026-07-28 client reaches (raw HTTP against
`sandgate serve`): a forged request state, an altered one, one presented by another caller, a
replayed one, an answer for a question never asked, answers without a state, and 10,000
approvals asked in a loop. Each is refused with nothing run (the gated tool is server-memory's
`create_entities`, so a call that ran would leave an entity), within its time, with a bounded
response, the gateway's memory bounded, and the gateway still answering. A state that expired is
refused by the same check (`approvals::seal`'s unit test; the wait it needs is 15 minutes)."""

from __future__ import annotations

import json
import re
import time

import pytest

import httpx2 as httpx

from conftest import NODE_MODULES, HttpServer, one_process_only
from rawhttp import Conn, stateless_call

pytestmark = one_process_only("a parked script lives on the replica that runs it")

ASKS = {"elicitation": {"form": {}}}
CREATE = """await memory.create_entities({ entities: [{ name: "release", entityType: "event", observations: [] }] });
return (await memory.read_graph({})).entities.length;"""
COUNT = "return (await memory.read_graph({})).entities.length;"
OTHER = "other-token-" + "z" * 24
OWNER = "owner-token-" + "w" * 24


def serve(tmp_path, approvals="") -> HttpServer:
    path = tmp_path / "sandgate.toml"
    memory = json.dumps(str(NODE_MODULES / "server-memory/dist/index.js"))
    path.write_text(
        f'[servers.memory]\ncommand = "node"\nargs = [{memory}]\napprove = ["create_*"]\n'
        f'env = {{ MEMORY_FILE_PATH = {json.dumps(str(tmp_path / "memory.jsonl"))} }}\n\n'
        f'[[http.tokens]]\ntoken = "{OWNER}"\nprofile = "default"\nname = "owner"\n\n'
        f'[[http.tokens]]\ntoken = "{OTHER}"\nprofile = "default"\nname = "other"\n\n'
        f'[store]\npath = "{tmp_path / "store.db"}"\n{approvals}')
    return HttpServer(path, token=OWNER)


def port_of(server: HttpServer) -> int:
    return int(re.search(r":(\d+)/mcp", server.url).group(1))


def ask(conn: Conn, code: str = CREATE, token: str = OWNER) -> dict:
    """Runs `code`; its first answer, which should be an input-required result."""
    reply = stateless_call(conn, token, "call_tool_chain", {"code": code}, capabilities=ASKS)
    return reply.message()


def retry(conn: Conn, state, responses, token: str = OWNER, code: str = CREATE):
    params = {}
    if state is not None:
        params["requestState"] = state
    if responses is not None:
        params["inputResponses"] = responses
    started = time.monotonic()
    reply = stateless_call(conn, token, "call_tool_chain", {"code": code}, capabilities=ASKS, **params)
    return reply, time.monotonic() - started


def entities(conn: Conn) -> int:
    reply = stateless_call(conn, OWNER, "call_tool_chain", {"code": COUNT})
    return reply.message()["result"]["structuredContent"]["result"]


def refused(reply, took: float, words: str):
    message = reply.message()
    assert "error" in message, message
    assert message["error"]["code"] == -32602 and words in message["error"]["message"], message
    assert took < 2 and len(reply.body) < 4096, (took, len(reply.body))


def test_forged_altered_borrowed_and_misdirected_answers_are_refused_with_nothing_run(tmp_path):
    server = serve(tmp_path)
    try:
        conn = Conn(port_of(server))
        first = ask(conn)["result"]
        assert first["resultType"] == "input_required", first
        (question, _), = first["inputRequests"].items()
        state = first["requestState"]
        accept = {question: {"action": "accept"}}
        rss_before = server.rss_kib() / 1024
        # Forged, altered, and presented by another caller (another token, same profile).
        forged = "rs1." + "A" * len(state)
        middle = len(state) // 2
        altered = state[:middle] + ("B" if state[middle] != "B" else "C") + state[middle + 1:]
        for attempt, token in ((forged, OWNER), (altered, OWNER), (state, OTHER), ("x" * 100_000, OWNER)):
            reply, took = retry(Conn(port_of(server)), attempt, accept, token=token)
            assert "error" in reply.message() and took < 2 and len(reply.body) < 4096, reply.body[:300]
        # An answer for a question never asked, and answers without the state they answer.
        reply, took = retry(conn, state, {"ap-" + "0" * 32: {"action": "accept"}})
        refused(reply, took, "never asked")
        reply, took = retry(conn, None, accept)
        refused(reply, took, "without the requestState")
        # Not an elicitation result.
        reply, took = retry(conn, state, {question: {"action": "maybe"}})
        refused(reply, took, "not the result its request asks for")
        assert entities(Conn(port_of(server))) == 0, "nothing ran"
        # The real answer runs it once; the same answer again is a replay, refused.
        reply, _ = retry(conn, state, accept)
        assert reply.message()["result"]["structuredContent"]["result"] == 1, reply.body[:500]
        reply, took = retry(conn, state, accept)
        refused(reply, took, "answered already")
        assert entities(Conn(port_of(server))) == 1, "the replay ran nothing"
        assert server.rss_kib() / 1024 - rss_before < 32
        # An execution answered in full is not held on (it would count against the cap).
        metrics = httpx.get(server.url.replace("/mcp", "/metrics"), headers={"authorization": f"Bearer {OWNER}"}).text
        assert "\nsandgate_executions_detached 0\n" in metrics, [l for l in metrics.splitlines() if "detached" in l]
    finally:
        server.close()


def test_ten_thousand_approvals_asked_in_a_loop_are_bounded_and_none_runs_unapproved(tmp_path):
    server = serve(tmp_path, '\n[approvals]\nmax_waiting_per_caller = 16\n')
    # An execution makes at most 1,000 calls: the rest are refused as they are made.
    code = """const asks = [];
let limited = 0;
for (let i = 0; i < 10000; i++) {
  try {
    asks.push(memory.create_entities({ entities: [{ name: "e" + i, entityType: "t", observations: [] }] }));
  } catch (e) { limited++; }
}
const settled = await Promise.allSettled(asks);
const denied = settled.filter((s) => s.status === "rejected" && s.reason instanceof ApprovalDenied).length;
const ran = settled.filter((s) => s.status === "fulfilled").length;
return { denied, ran, limited, other: settled.length - denied - ran };"""
    try:
        conn = Conn(port_of(server), timeout=60)
        rss_before = server.rss_kib() / 1024
        started = time.monotonic()
        reply = stateless_call(conn, OWNER, "call_tool_chain", {"code": code}, capabilities=ASKS)
        first = reply.message()["result"]
        assert first["resultType"] == "input_required", first
        assert len(first["inputRequests"]) <= 16, "no more than the cap is asked at once"
        assert len(reply.body) < 64 * 1024 and time.monotonic() - started < 20, (len(reply.body), time.monotonic() - started)
        declines = {key: {"action": "decline"} for key in first["inputRequests"]}
        reply = stateless_call(conn, OWNER, "call_tool_chain", {"code": code}, capabilities=ASKS,
                               requestState=first["requestState"], inputResponses=declines)
        result = reply.message()["result"]
        while result.get("resultType") == "input_required":
            declines = {key: {"action": "decline"} for key in result["inputRequests"]}
            reply = stateless_call(conn, OWNER, "call_tool_chain", {"code": code}, capabilities=ASKS,
                                   requestState=result["requestState"], inputResponses=declines)
            result = reply.message()["result"]
        assert not result.get("isError"), result
        counts = result["structuredContent"]["result"]
        assert counts == {"denied": 1000, "ran": 0, "limited": 9000, "other": 0}, counts
        assert time.monotonic() - started < 60
        assert server.rss_kib() / 1024 - rss_before < 64, "the questions' memory is bounded"
        assert entities(Conn(port_of(server))) == 0, "none ran"
    finally:
        server.close()
