"""The console's Approvals page (issue 30), in a real headless Chromium: a call that waits for a
person's approval is listed to a profile that approves the asker's (and an admin), never to the
asking token itself nor to another profile, and Approve there runs it: the script's client collects the result by retrying with the state it
was given (2026-07-28). Deny makes the call throw `ApprovalDenied`. The answer is an audit line
that names the console profile that gave it."""

from __future__ import annotations

import json
import re

from conftest import NODE_MODULES, OneProcess, one_process_only
from rawhttp import Conn, stateless_call
from test_console import browser, console_url, log_in, open_page

pytestmark = one_process_only("the console lists the questions of the replica it runs on")

OPS = "ops-console-token-000000000001"
BETA = "beta-console-token-00000000002"
LEAD = "lead-console-token-00000000003"
ASKS = {"elicitation": {"form": {}}}
CREATE = """await memory.create_entities({ entities: [{ name: "release", entityType: "event", observations: ["api_key=abc123"] }] });
return (await memory.read_graph({})).entities.length;"""


def serve(tmp_path, ops_rule='approve = ["memory.create_*"]') -> OneProcess:
    memory = json.dumps(str(NODE_MODULES / "server-memory/dist/index.js"))
    path = tmp_path / "sandgate.toml"
    path.write_text(
        f'[servers.memory]\ncommand = "node"\nargs = [{memory}]\n'
        f'env = {{ MEMORY_FILE_PATH = {json.dumps(str(tmp_path / "memory.jsonl"))} }}\n\n'
        f'[profiles.ops]\ntools = ["*"]\n{ops_rule}\n\n'
        '[profiles.beta]\ntools = ["*"]\n\n'
        '[profiles.leads]\ntools = []\napproves = ["ops"]\n\n'
        f'[[http.tokens]]\ntoken = "{LEAD}"\nprofile = "leads"\nname = "ops-lead"\n\n'
        f'[[http.tokens]]\ntoken = "{OPS}"\nprofile = "ops"\nname = "ops-user"\n\n'
        f'[[http.tokens]]\ntoken = "{BETA}"\nprofile = "beta"\nname = "beta-user"\n\n'
        f'[store]\npath = "{tmp_path / "store.db"}"\n\n'
        f'[audit]\npath = "{tmp_path / "audit.jsonl"}"\n')
    return OneProcess(path, token=OPS)


def port_of(server) -> int:
    return int(re.search(r":(\d+)/mcp", server.url).group(1))


def test_the_console_lists_a_waiting_call_to_its_profile_and_approve_runs_it(tmp_path):
    server = serve(tmp_path)
    try:
        conn = Conn(port_of(server), timeout=60)
        first = stateless_call(conn, OPS, "call_tool_chain", {"code": CREATE}, capabilities=ASKS).message()["result"]
        assert first["resultType"] == "input_required", first
        (question, _), = first["inputRequests"].items()
        with browser() as chromium:
            other = open_page(chromium, server)
            log_in(other, server, BETA)
            other.goto(console_url(server) + "#/approvals")
            other.wait_for_selector("#approvals")
            assert other.query_selector(f'[data-approval="{question}"]') is None, "another profile does not see it"
            asker = open_page(chromium, server)
            log_in(asker, server, OPS)
            asker.goto(console_url(server) + "#/approvals")
            asker.wait_for_selector("#you-answer")
            assert asker.query_selector(f'[data-approval="{question}"]') is None, "the asker does not see its own"
            page = open_page(chromium, server)
            log_in(page, server, LEAD)
            page.goto(console_url(server) + "#/approvals")
            page.wait_for_selector(f'[data-approval="{question}"]')
            row = page.inner_text(f'[data-approval="{question}"]')
            assert "memory.create_entities" in row and "profiles.ops.approve: memory.create_*" in row, row
            assert "line 1" in row, f"the row names the script's line: {row}"
            assert "abc123" not in page.content(), "secrets are masked"
            page.click(f'[data-approve="{question}"]')
            page.wait_for_selector(f'[data-approval="{question}"]', state="detached")
        # The client collects the result with the state it was given, answering nothing itself.
        done = stateless_call(conn, OPS, "call_tool_chain", {"code": CREATE}, capabilities=ASKS,
                              requestState=first["requestState"]).message()["result"]
        assert done["structuredContent"]["result"] == 1, done
        lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
        answers = [line for line in lines if line["kind"] == "approval" and line["decision"] != "ask"]
        assert [(a["decision"], a["rule"].split(":")[0]) for a in answers] == [("allow", "approved by console")], answers
        assert "console:leads:token:ops-lead" in answers[0]["rule"], answers
    finally:
        server.close()


def test_deny_in_the_console_throws_approval_denied_in_the_script(tmp_path):
    server = serve(tmp_path)
    code = """try { await memory.create_entities({ entities: [{ name: "x", entityType: "t", observations: [] }] }); return "ran"; }
catch (e) { return e instanceof ApprovalDenied ? "denied: " + e.message : "other"; }"""
    try:
        conn = Conn(port_of(server), timeout=60)
        first = stateless_call(conn, OPS, "call_tool_chain", {"code": code}, capabilities=ASKS).message()["result"]
        (question, _), = first["inputRequests"].items()
        with browser() as chromium:
            page = open_page(chromium, server)
            log_in(page, server, LEAD)
            page.goto(console_url(server) + "#/approvals")
            page.click(f'[data-deny="{question}"]')
            page.wait_for_selector(f'[data-approval="{question}"]', state="detached")
        done = stateless_call(conn, OPS, "call_tool_chain", {"code": code}, capabilities=ASKS,
                              requestState=first["requestState"]).message()["result"]
        result = done["structuredContent"]["result"]
        assert result.startswith("denied:") and "refused in the console" in result, result
    finally:
        server.close()


def test_a_whole_script_waits_in_the_console_for_another_person_and_approve_runs_exactly_it(tmp_path):
    """Issue 51: a profile whose scripts a person approves (`approve_scripts`) parks the script
    before any of it runs; the console shows its code and the tools it names to a profile that
    approves the asker's, never to the asker, and Approve runs it."""
    server = serve(tmp_path, ops_rule='approve_scripts = "writes"')
    try:
        conn = Conn(port_of(server), timeout=60)
        first = stateless_call(conn, OPS, "call_tool_chain", {"code": CREATE}, capabilities=ASKS).message()["result"]
        assert first["resultType"] == "input_required", first
        (question, _), = first["inputRequests"].items()
        with browser() as chromium:
            asker = open_page(chromium, server)
            log_in(asker, server, OPS)
            asker.goto(console_url(server) + "#/approvals")
            asker.wait_for_selector("#you-answer")
            assert asker.query_selector(f'[data-approval="{question}"]') is None, "the asker does not see its own"
            page = open_page(chromium, server)
            log_in(page, server, LEAD)
            page.goto(console_url(server) + "#/approvals")
            page.wait_for_selector(f'[data-approval="{question}"]')
            row = page.inner_text(f'[data-approval="{question}"]')
            assert "script (typescript)" in row and 'profiles.ops.approve_scripts = "writes"' in row, row
            assert "await memory.create_entities" in row, f"the row shows the code: {row}"
            tools = page.inner_text(f'[data-approval="{question}"] .named-tools')
            assert "memory.create_entities (may write)" in tools and "memory.read_graph (reads only)" in tools, tools
            page.click(f'[data-approve="{question}"]')
            page.wait_for_selector(f'[data-approval="{question}"]', state="detached")
        done = stateless_call(conn, OPS, "call_tool_chain", {"code": CREATE}, capabilities=ASKS,
                              requestState=first["requestState"]).message()["result"]
        assert done["structuredContent"]["result"] == 1, done
        lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
        script = [line for line in lines if line["kind"] == "approval" and line["target"] == "script"]
        assert [s["decision"] for s in script] == ["ask", "allow"], script
        assert "approved by console:leads:token:ops-lead" in script[1]["rule"], script
    finally:
        server.close()
