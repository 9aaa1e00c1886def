"""A person approves a whole script before any of it runs (issue 51): `approve_scripts` on a
profile, or `[approvals] scripts` for the config. The real Python SDK client's elicitation
callback answers over 2025-11-25 sessions (stdio, HTTP) and a 2026-07-28 stateless connection
(input-required results, a retry with the sealed state); the console answers in Chromium (in
test_approvals_console.py), and a task's `input_required` in test_tasks.py.

The tool that writes is server-memory's `create_entities` (its annotations say
`readOnlyHint: false`); `read_graph` says `readOnlyHint: true`. A script not approved is seen
not to have run: the graph stays empty."""

from __future__ import annotations

import json
import time

import pytest

from mcp import Client, StdioServerParameters

from conftest import NODE_MODULES, SANDGATE, HttpServer, one_process_only, structured, text_of
from test_approvals import ERAS, Person, audit_lines, client_for

pytestmark = [pytest.mark.anyio, one_process_only(
    "a parked script lives on the replica that runs it; the retry must reach it (docs/call_tool_chain.md, Approvals)")]

WRITE = """const before = (await memory.read_graph({})).entities.length;
await memory.create_entities({ entities: [{ name: "release", entityType: "event", observations: ["api_key=abc123"] }] });
return { before, after: (await memory.read_graph({})).entities.length };"""
READ = "return (await memory.read_graph({})).entities.length;"
WRITE_PY = """before = len((await memory.read_graph())["entities"])
await memory.create_entities(entities=[{"name": "release", "entityType": "event", "observations": []}])
{"before": before, "after": len((await memory.read_graph())["entities"])}"""


def config(tmp_path, scripts="writes", profile_rule=None, timeout="20s", extra=""):
    path = tmp_path / "sandgate.toml"
    memory = json.dumps(str(NODE_MODULES / "server-memory/dist/index.js"))
    text = (f'[servers.memory]\ncommand = "node"\nargs = [{memory}]\n'
            f'env = {{ MEMORY_FILE_PATH = {json.dumps(str(tmp_path / "memory.jsonl"))} }}\n\n'
            f'[approvals]\ntimeout = "{timeout}"\nscripts = "{scripts}"\n\n'
            f'[store]\npath = {json.dumps(str(tmp_path / "store.db"))}\n\n'
            f'[audit]\npath = {json.dumps(str(tmp_path / "audit.jsonl"))}\n')
    if profile_rule is not None:
        text += f'\n[profiles.default]\ntools = ["*"]\napprove_scripts = "{profile_rule}"\n'
    path.write_text(text + extra)
    return path


async def run(transport, mode, path, person, code, language=None):
    servers = []
    arguments = {"code": code} | ({"language": language} if language else {})
    try:
        async with client_for(transport, mode, path, person, servers) as client:
            started = time.monotonic()
            result = await client.call_tool("call_tool_chain", arguments)
            took = time.monotonic() - started
            graph = structured(await client.call_tool("call_tool_chain", {"code": '{"tool": "memory.read_graph"}'}))
            return result, took, len(graph["result"]["entities"])
    finally:
        for server in servers:
            server.close()


def script_lines(tmp_path):
    return [line for line in audit_lines(tmp_path) if line.get("kind") == "approval" and line.get("target") == "script"]


@pytest.mark.parametrize("transport,mode", ERAS)
async def test_a_script_that_may_write_runs_only_after_a_yes_and_shows_its_code_and_tools(tmp_path, transport, mode):
    path = config(tmp_path)
    person = Person("accept", delay=1.0)
    result, took, entities = await run(transport, mode, path, person, WRITE)
    assert not result.is_error, text_of(result)
    assert structured(result)["result"] == {"before": 0, "after": 1}, structured(result)
    assert entities == 1 and took >= 1.0, (entities, took)
    assert len(person.asked) == 1, f"one question for the script, none per call: {person.asked}"
    question = person.asked[0]
    assert "Approve this script" in question and "memory.create_entities" in question, question
    assert "memory.create_entities (may write)" in question and "memory.read_graph (reads only)" in question, question
    assert 'observations: ["api_key=abc123"]' in question, "the code is shown as it is sent"
    assert "approvals] scripts = \"writes\"" in question and "profile `default`" in question, question
    lines = script_lines(tmp_path)
    assert [line["decision"] for line in lines] == ["ask", "allow"], lines
    assert lines[1]["rule"].startswith("approved by client"), lines


@pytest.mark.parametrize("transport,mode", ERAS)
@pytest.mark.parametrize("action", ["decline", "timeout"])
async def test_a_no_or_no_answer_runs_none_of_it_and_says_approval_denied(tmp_path, transport, mode, action):
    path = config(tmp_path, timeout="2s" if action == "timeout" else "20s")
    person = Person("accept", delay=5) if action == "timeout" else Person("decline", delay=0.3)
    result, took, entities = await run(transport, mode, path, person, WRITE)
    assert result.is_error and entities == 0, (text_of(result), entities)
    text = text_of(result)
    assert "approval_denied" in text and "None of it ran" in text, text
    assert ("declined" if action == "decline" else "nobody answered within 2 s") in text, text
    # A 2026-07-28 client asks its person before it retries, so its answer comes after theirs.
    assert took < (person.delay + 3 if mode == "2026-07-28" else 5), took
    lines = script_lines(tmp_path)
    assert [line["decision"] for line in lines] == ["ask", "deny"], lines


@pytest.mark.parametrize("transport,mode", ERAS)
async def test_a_read_only_script_runs_at_once_under_writes(tmp_path, transport, mode):
    path = config(tmp_path)
    person = Person("decline")
    result, took, _ = await run(transport, mode, path, person, READ)
    assert not result.is_error and structured(result)["result"] == 0, text_of(result)
    assert person.asked == [] and took < 5, (person.asked, took)
    assert script_lines(tmp_path) == []


async def test_a_write_reached_by_a_name_no_parse_sees_is_refused_at_run_time(tmp_path):
    """Under `writes`, a script whose text names only tools that read runs unasked; a call it
    makes to a tool that may write, reached by a name built as it runs, is refused there."""
    path = config(tmp_path)
    person = Person("accept")
    hidden = """const read = await memory.read_graph({});
const m = [].constructor.constructor("return glob" + "alThis")()["mem" + "ory"];
try { await m["create_" + "entities"]({ entities: [{ name: "x", entityType: "t", observations: [] }] }); return "ran"; }
catch (e) { return { denied: e instanceof ApprovalDenied, message: e.message }; }"""
    # The parse sees `memory` read off with a fixed name only, and no evaluator by name.
    result, _, entities = await run("stdio", "legacy", path, person, hidden)
    value = structured(result)["result"]
    assert person.asked == [], person.asked
    assert entities == 0, "the write did not run"
    assert value != "ran" and value["denied"] is True, value
    assert "memory.create_entities` may write" in value["message"] and "Name the tool" in value["message"], value


async def test_code_that_reaches_tools_by_computed_names_is_asked_about(tmp_path):
    path = config(tmp_path)
    person = Person("decline", delay=0.1)
    code = 'const m = memory; return (await m.read_graph({})).entities.length;'
    result, _, _ = await run("stdio", "legacy", path, person, code)
    assert result.is_error and "approval_denied" in text_of(result), text_of(result)
    assert len(person.asked) == 1 and "names computed as it runs" in person.asked[0], person.asked


@pytest.mark.parametrize("transport,mode", ERAS)
async def test_always_asks_about_every_script_but_not_a_json_call(tmp_path, transport, mode):
    path = config(tmp_path, scripts="never", profile_rule="always")
    person = Person("accept", delay=0.1)
    result, _, _ = await run(transport, mode, path, person, READ)
    assert not result.is_error and len(person.asked) == 1, (text_of(result), person.asked)
    assert 'profiles.default.approve_scripts = "always"' in person.asked[0], person.asked[0]
    # `run` ends with a JSON call of read_graph: it asked nothing more.
    assert [line["decision"] for line in script_lines(tmp_path)] == ["ask", "allow"]


@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_a_python_script_is_approved_like_a_typescript_one(tmp_path, action):
    path = config(tmp_path)
    person = Person(action, delay=0.2)
    result, _, entities = await run("stdio", "legacy", path, person, WRITE_PY, language="python")
    assert len(person.asked) == 1 and "python code" in person.asked[0], person.asked
    assert "memory.create_entities (may write)" in person.asked[0], person.asked[0]
    if action == "accept":
        assert structured(result)["result"] == {"before": 0, "after": 1} and entities == 1, text_of(result)
    else:
        assert result.is_error and "approval_denied" in text_of(result) and entities == 0, text_of(result)


async def test_a_gated_call_the_approved_script_names_is_not_asked_again(tmp_path):
    """A yes to the script is a yes to the gated calls of the tools its question listed."""
    path = config(tmp_path, extra='\n[profiles.default]\ntools = ["*"]\napprove = ["memory.create_*"]\n')
    person = Person("accept", delay=0.1)
    result, _, entities = await run("http", "legacy", path, person, WRITE)
    assert not result.is_error and entities == 1, text_of(result)
    assert len(person.asked) == 1 and "(gated: profiles.default.approve: memory.create_*)" in person.asked[0], person.asked
    lines = [line for line in audit_lines(tmp_path) if line.get("kind") == "approval"]
    call = [line for line in lines if line.get("target") == "memory.create_entities"]
    assert [line["decision"] for line in call] == ["allow"] and "approved with its script" in call[0]["rule"], lines


async def test_a_client_that_cannot_be_asked_is_refused_at_once_with_nothing_run(tmp_path):
    path = config(tmp_path)
    async with Client(StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(path)]), mode="legacy") as client:
        started = time.monotonic()
        result = await client.call_tool("call_tool_chain", {"code": WRITE})
        took = time.monotonic() - started
        graph = structured(await client.call_tool("call_tool_chain", {"code": '{"tool": "memory.read_graph"}'}))
    assert result.is_error and "cannot ask" in text_of(result) and took < 5, text_of(result)
    assert graph["result"]["entities"] == [], graph


def test_the_config_names_a_bad_rule_and_how_to_fix_it(tmp_path):
    import subprocess
    path = config(tmp_path, profile_rule="sometimes")
    checked = subprocess.run([SANDGATE, "check", "--config", str(path)], capture_output=True, text=True, timeout=60)
    assert checked.returncode != 0, checked.stdout
    said = checked.stdout + checked.stderr
    assert "profiles.default.approve_scripts" in said and '"writes"' in said, said


@pytest.mark.parametrize("scripts,said", [("never", None), ("writes", "names a tool that may write"), ("always", "Every script waits")])
async def test_the_tool_description_says_which_scripts_wait_for_a_person(tmp_path, scripts, said):
    path = config(tmp_path, scripts=scripts)
    async with Client(StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(path)]), mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    description = tools["call_tool_chain"].description
    if said is None:
        assert "approval_denied" not in description, description
    else:
        assert said in description and "approval_denied" in description, description
