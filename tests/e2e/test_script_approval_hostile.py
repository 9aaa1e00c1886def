"""Hostile cases against approving a whole script (issue 51), at the level an attacker reaches:
raw 2026-07-28 requests to `sandgate serve`. A retry that swaps the approved code for other
code, code that hides characters from the person who reads it, code far past what a person is
shown, code nested past every parser's limit, and a flood of scripts that each ask. Each case
checks the time, the response size, the gateway's RSS, and that it still answers."""

from __future__ import annotations

import json
import re
import time

from conftest import NODE_MODULES, HttpServer, one_process_only
from rawhttp import Conn, stateless_call

pytestmark = one_process_only("a parked script lives on the replica that runs it")

ASKS = {"elicitation": {"form": {}}}
OWNER = "owner-token-" + "s" * 24
WRITE = """await memory.create_entities({ entities: [{ name: "approved", entityType: "t", observations: [] }] });
return (await memory.read_graph({})).entities.length;"""
SWAPPED = """for (const n of ["a", "b", "c"]) await memory.create_entities({ entities: [{ name: n, entityType: "t", observations: [] }] });
return (await memory.read_graph({})).entities.length;"""
COUNT = '{"tool": "memory.read_graph"}'


def serve(tmp_path, approvals="") -> HttpServer:
    path = tmp_path / "sandgate.toml"
    memory = json.dumps(str(NODE_MODULES / "server-memory/dist/index.js"))
    path.write_text(
        f'[servers.memory]\ncommand = "node"\nargs = [{memory}]\n'
        f'env = {{ MEMORY_FILE_PATH = {json.dumps(str(tmp_path / "memory.jsonl"))} }}\n\n'
        f'[[http.tokens]]\ntoken = "{OWNER}"\nprofile = "default"\nname = "owner"\n\n'
        f'[approvals]\nscripts = "writes"\n{approvals}\n'
        f'[store]\npath = "{tmp_path / "store.db"}"\n')
    return HttpServer(path, token=OWNER)


def conn_of(server: HttpServer) -> Conn:
    return Conn(int(re.search(r":(\d+)/mcp", server.url).group(1)), timeout=60)


def ask(server, code: str, language: str | None = None, **params):
    started = time.monotonic()
    arguments = {"code": code} | ({"language": language} if language else {})
    reply = stateless_call(conn_of(server), OWNER, "call_tool_chain", arguments, capabilities=ASKS, **params)
    return reply, time.monotonic() - started


def entities(server) -> int:
    reply = stateless_call(conn_of(server), OWNER, "call_tool_chain", {"code": COUNT})
    return len(reply.message()["result"]["structuredContent"]["result"]["entities"])


def question_of(result) -> tuple[str, str]:
    assert result["resultType"] == "input_required", result
    (qid, request), = result["inputRequests"].items()
    return qid, request["params"]["message"]


def test_a_retry_that_swaps_the_approved_code_runs_nothing_and_the_approved_code_runs_once(tmp_path):
    server = serve(tmp_path)
    try:
        rss_before = server.rss_kib() / 1024
        first, _ = ask(server, WRITE)
        result = first.message()["result"]
        qid, message = question_of(result)
        assert "approved" in message and '"a", "b", "c"' not in message, message
        accept = {qid: {"action": "accept"}}
        swapped, took = ask(server, SWAPPED, requestState=result["requestState"], inputResponses=accept)
        error = swapped.message()["error"]
        assert error["code"] == -32602 and "not the code its requestState's execution runs" in error["message"], error
        assert took < 2 and len(swapped.body) < 4096, (took, len(swapped.body))
        assert entities(server) == 0, "nothing ran, and the question was not answered"
        done, _ = ask(server, WRITE, requestState=result["requestState"], inputResponses=accept)
        assert done.message()["result"]["structuredContent"]["result"] == 1, done.body[:400]
        again, took = ask(server, WRITE, requestState=result["requestState"], inputResponses=accept)
        assert "error" in again.message() and took < 2, again.body[:300]
        assert entities(server) == 1, "the approved code ran once"
        assert server.rss_kib() / 1024 - rss_before < 32
    finally:
        server.close()


def test_what_a_person_is_shown_hides_nothing_and_is_bounded(tmp_path):
    server = serve(tmp_path)
    try:
        rss_before = server.rss_kib() / 1024
        # Trojan Source: a right-to-left override and a zero-width space make the text read
        # other than it runs. The person sees them written out.
        hidden = 'const note = "ok \u202e;)}{ = x\u200b"; ' + WRITE
        reply, took = ask(server, hidden)
        _, message = question_of(reply.message()["result"])
        assert "\u202e" not in message and "\u200b" not in message, message
        assert "\\u{202e}" in message and "\\u{200b}" in message, message
        assert took < 5
        # 200 KB of code: the person sees the head and is told how much is left out; the tools
        # are read from all of it, the write at its very end included.
        long = "const pad = [\n" + "  1,\n" * 50_000 + "];\n" + WRITE
        reply, took = ask(server, long)
        _, message = question_of(reply.message()["result"])
        assert "more characters not shown" in message and "memory.create_entities (may write)" in message, message[-600:]
        assert len(reply.body) < 20_000 and took < 10, (len(reply.body), took)
        # Nested past every parser's limit: not read, so unsure, so asked; nothing overflows.
        deep = "return " + "[" * 100_000 + "]" * 100_000 + ";"
        reply, took = ask(server, deep)
        _, message = question_of(reply.message()["result"])
        assert "names computed as it runs" in message and took < 10, message[-300:]
        deep_py = "x = " + "(" * 100_000 + "1" + ")" * 100_000 + "\nawait memory.read_graph()"
        reply, took = ask(server, deep_py, language="python")
        _, message = question_of(reply.message()["result"])
        assert "python code" in message and "names computed as it runs" in message and took < 10, message[-300:]
        assert len(reply.body) < 20_000
        assert server.rss_kib() / 1024 - rss_before < 128
        assert entities(server) == 0
    finally:
        server.close()


def test_a_flood_of_scripts_that_ask_is_bounded_and_none_runs_unapproved(tmp_path):
    server = serve(tmp_path, "max_waiting_per_caller = 16\n")
    try:
        rss_before = server.rss_kib() / 1024
        started = time.monotonic()
        kinds = []
        for i in range(60):
            reply, took = ask(server, WRITE + f"\n// {i}")
            message = reply.message()
            assert took < 5 and len(reply.body) < 20_000, (i, took, len(reply.body))
            result = message.get("result", {})
            if result.get("resultType") == "input_required":
                kinds.append("asked")
            else:
                text = json.dumps(result)
                assert result.get("isError") and "max_waiting_per_caller" in text and "approval_denied" in text, text[:500]
                kinds.append("refused")
        assert kinds.count("asked") == 16 and kinds.count("refused") == 44, kinds
        assert time.monotonic() - started < 60
        assert server.rss_kib() / 1024 - rss_before < 64
        assert entities(server) == 0, "none ran"
    finally:
        server.close()
