"""Python code mode (issue 50): `call_tool_chain` with `language: "python"` (or code fenced as
```python) runs on Monty in sandgate's locked-down workers, against the real npm servers, over
stdio and HTTP in both protocol eras: tools are async keyword-only functions of each backend's
object, `asyncio.gather` fans out, a tool's value is what TypeScript gets, a failed call raises,
and a detached Python script is cancelled like a TypeScript one."""

from __future__ import annotations

import json
import time

import pytest

from conftest import (connect, execution_records, fake_backend_toml, one_process_only, reference_servers,
                      structured, text_of, write_config)

pytestmark = pytest.mark.anyio


def config(tmp_path, extra: str = ""):
    servers = reference_servers(tmp_path)
    path = write_config(tmp_path, "toml", {"everything": servers["everything"], "memory": servers["memory"]})
    path.write_text(path.read_text() + extra)
    return path


async def py(client, code: str, **args):
    return await client.call_tool("call_tool_chain", {"code": code, "language": "python", **args})


SCRIPT = """import asyncio
await memory.create_entities(entities=[{"name": "Ada", "entityType": "person", "observations": ["wrote notes"]}])
graph = await memory.read_graph()
sums = await asyncio.gather(*[everything.get_sum(a=i, b=1) for i in range(3)])
by_name = await getattr(everything, "get-sum")(a=20, b=22)
echoed = await everything.echo(message="hi from python")
{"people": [e["name"] for e in graph["entities"]], "sums": sums, "by_name": by_name, "echoed": echoed}"""

SAME_IN_TYPESCRIPT = """await memory.create_entities({entities: [{name: "Ada", entityType: "person", observations: ["wrote notes"]}]});
const graph = await memory.read_graph({});
const sums = await Promise.all([0, 1, 2].map(i => everything.get_sum({a: i, b: 1})));
const by_name = await everything["get-sum"]({a: 20, b: 22});
const echoed = await everything.echo({message: "hi from python"});
return {people: graph.entities.map((e: any) => e.name), sums, by_name, echoed};"""


@pytest.mark.parametrize("transport,mode", [("stdio", "legacy"), ("http", "legacy"), ("http", "2026-07-28")])
async def test_a_python_script_calls_the_real_servers_and_gets_what_typescript_gets(tmp_path, transport, mode):
    async with connect(transport, config(tmp_path), mode) as client:
        result = await py(client, SCRIPT)
        data = structured(result)
        assert data["result"]["people"] == ["Ada"], data
        assert data["result"]["echoed"] == "Echo: hi from python", data
        assert [c["tool"] for c in data["calls"]][:2] == ["memory.create_entities", "memory.read_graph"], data["calls"]
        assert len(data["calls"]) == 7 and all(c["ok"] for c in data["calls"]), data["calls"]
        typescript = structured(await client.call_tool("call_tool_chain", {"code": SAME_IN_TYPESCRIPT}))
        assert typescript["result"] == data["result"], (typescript["result"], data["result"])
        # The model is told, in the tool's description and its schema.
        tools = {t.name: t for t in (await client.list_tools()).tools}
        chain = tools["call_tool_chain"]
        assert "language: \"python\"" in chain.description and "asyncio.gather" in chain.description
        assert chain.input_schema["properties"]["language"]["enum"] == ["typescript", "python"]


async def test_fenced_python_needs_no_language_and_errors_point_at_the_users_line(tmp_path):
    async with connect("stdio", config(tmp_path)) as client:
        fenced = structured(await client.call_tool("call_tool_chain", {"code": "```python\nr = await everything.echo(message='x')\nr.upper()\n```"}))
        assert fenced["result"] == "ECHO: X", fenced
        failed = await py(client, "a = 1\nb = await everything.get_sum(a='x', b=2)\n")
        assert failed.is_error
        error = failed.structured_content["error"]
        assert error["kind"] == "tool_failed" and error["line"] == 2, error
        positional = await py(client, "await everything.echo('hi')")
        assert positional.is_error and "keyword arguments" in text_of(positional), text_of(positional)
        caught = structured(await py(client, "said = None\ntry:\n    await everything.get_sum(a='x', b=2)\nexcept Exception as e:\n    said = 'caught'\nsaid"))
        assert caught["result"] == "caught"
        printed = structured(await py(client, "print('hello', 1)\n2"))
        assert [line["message"] for line in printed["logs"]] == ["hello 1"] and printed["result"] == 2, printed
        bad = await client.call_tool("call_tool_chain", {"code": "1", "language": "ruby"})
        assert bad.is_error and "write \"typescript\" or \"python\"" in text_of(bad), text_of(bad)
        mixed = await client.call_tool("call_tool_chain", {"code": "1", "language": "python", "engine": "v8"})
        assert mixed.is_error and "leave `engine` out" in text_of(mixed), text_of(mixed)


async def test_python_turned_off_says_how_to_turn_it_on(tmp_path):
    path = config(tmp_path, "\n[sandbox]\npython = false\n")
    async with connect("stdio", path) as client:
        off = await py(client, "1 + 1")
        assert off.is_error and "[sandbox] python" in text_of(off), text_of(off)
        chain = {t.name: t for t in (await client.list_tools()).tools}["call_tool_chain"]
        assert "language: \"python\"" not in chain.description
        # TypeScript is unaffected.
        assert structured(await client.call_tool("call_tool_chain", {"code": "return 1 + 1"}))["result"] == 2


@one_process_only("a detached execution lives on the replica that runs it")
@pytest.mark.parametrize("transport,mode", [("stdio", "legacy"), ("http", "2026-07-28")])
async def test_a_detached_python_script_is_cancelled_and_starts_no_call_after(tmp_path, transport, mode):
    path = tmp_path / "sandgate.toml"
    path.write_text(fake_backend_toml() + f'\n[store]\npath = "{tmp_path / "store.db"}"\n')
    async with connect(transport, path, mode) as client:
        first = structured(await py(client, "i = 0\nwhile True:\n    await fake.slow(ms=100)\n    i += 1", yield_after_ms=300))
        assert first["status"] == "running", first
        execution = first["execution_id"]
        stopped = await client.call_tool("wait_execution", {"execution_id": execution, "cancel": True})
        assert stopped.is_error and "cancelled" in text_of(stopped), text_of(stopped)
        time.sleep(1)
        record = {r["id"]: r for r in execution_records(path)}[execution]
        assert record["status"] == "cancelled", record
        calls_then = record["calls"]
        time.sleep(1)
        assert {r["id"]: r for r in execution_records(path)}[execution]["calls"] == calls_then


async def test_the_gateway_still_answers_after_hostile_python(tmp_path):
    """A few of the hostile cases at the MCP level (the sandbox's suite has the rest): each ends
    its own run with a readable error, within its time, and the next script runs."""
    async with connect("stdio", config(tmp_path)) as client:
        for code in ["x = 'x' * 10**10", "def f():\n    return f()\nf()", "().__class__.__base__.__subclasses__()",
                     "__import__('os').system('id')", "while True:\n    pass"]:
            started = time.monotonic()
            result = await py(client, code, timeout_ms=2000)
            assert result.is_error, (code, result.content)
            assert time.monotonic() - started < 10, code
            assert len(json.dumps(result.structured_content)) < 20_000, code
        assert structured(await py(client, "'still here'"))["result"] == "still here"


@pytest.mark.parametrize("transport,mode", [("stdio", "legacy"), ("http", "2026-07-28")])
async def test_state_kept_in_python_is_read_in_typescript_and_back(tmp_path, transport, mode):
    async with connect(transport, config(tmp_path), mode) as client:
        kept = structured(await py(client, "await state.set('cursor', {'page': 2}, ttl=600)\nawait state.keys()"))
        assert kept["result"] == ["cursor"], kept
        read = structured(await client.call_tool("call_tool_chain", {"code": "return await state.get('cursor');"}))
        assert read["result"] == {"page": 2}, read
        await client.call_tool("call_tool_chain", {"code": "await state.set('from_ts', [1, 2]); return 1;"})
        back = structured(await py(client, "[await state.get('from_ts'), await state.get('never'), await state.delete('cursor')]"))
        assert back["result"] == [[1, 2], None, True], back
        calls = [c["tool"] for c in back["calls"]]
        assert calls == ["state.get", "state.get", "state.delete"], calls


async def test_python_declarations_for_the_real_servers_parse_as_python_and_match_what_runs(tmp_path):
    import ast

    servers = reference_servers(tmp_path)
    path = write_config(tmp_path, "toml", servers)
    async with connect("stdio", path) as client:
        await client.call_tool("search_tools", {"query": "anything"})
        stub = (await client.read_resource("sandgate://types.pyi")).contents[0].text
        ast.parse(stub)  # raises on anything that is not Python
        assert "class memory:" in stub and "async def create_entities(self, *, entities: list[" in stub, stub[:2000]
        assert "class state:" in stub, "the profile keeps state, and the stub says how to use it"
        info = await client.call_tool("tool_info", {"name": "everything.get-sum", "language": "python"})
        data = structured(info)
        assert data["signature"].startswith("await everything.get_sum(*, a: float, b: float)"), data["signature"]
        assert "```py" in text_of(info) and "async def get_sum(self, *, a: float, b: float)" in data["declaration"]
        # The example it gives runs as written.
        example = data["example"].replace("1.0", "2.0")
        ran = structured(await py(client, example + "\nresult"))
        assert ran["result"] == "The sum of 2 and 2 is 4.", ran
        found = structured(await client.call_tool("search_tools", {"query": "add two numbers", "language": "python"}))
        assert any(r["signature"].startswith("await everything.get_sum(*, a: float") for r in found["results"]), found
        bad = await client.call_tool("tool_info", {"name": "everything.echo", "language": "cobol"})
        assert bad.is_error and "\"typescript\" or \"python\"" in text_of(bad)


async def test_a_profile_chooses_its_languages_and_a_refusal_names_the_key(tmp_path):
    only_ts = config(tmp_path, '\n[profiles.default]\ntools = ["*"]\nlanguages = ["typescript"]\n')
    async with connect("stdio", only_ts) as client:
        refused = await py(client, "1 + 1")
        assert refused.is_error and "profiles.default.languages" in text_of(refused), text_of(refused)
        chain = {t.name: t for t in (await client.list_tools()).tools}["call_tool_chain"]
        assert "language: \"python\"" not in chain.description
        assert structured(await client.call_tool("call_tool_chain", {"code": "return 2;"}))["result"] == 2
    only_py = tmp_path / "py"
    only_py.mkdir()
    async with connect("stdio", config(only_py, '\n[profiles.default]\ntools = ["*"]\nlanguages = ["python"]\n')) as client:
        refused = await client.call_tool("call_tool_chain", {"code": "return 2;"})
        assert refused.is_error and "runs no TypeScript" in text_of(refused), text_of(refused)
        assert structured(await py(client, "1 + 1"))["result"] == 2


async def test_a_missing_key_on_a_result_names_the_keys_its_declared_type_has(tmp_path):
    from test_backend_tools import fake

    path = write_config(tmp_path, "toml", {"lister": fake("hostile-list")})
    async with connect("stdio", path) as client:
        await client.call_tool("search_tools", {"query": "sum"})
        ok = structured(await py(client, "r = await lister.get_sum(a=1, as_object=True)\nr"))
        failed = await py(client, "r = await lister.get_sum(a=1, as_object=True)\nr['total']")
        assert failed.is_error, failed.content
        error = failed.structured_content["error"]
        assert error["line"] == 2 and "\"sum\"" in error["hint"] and "lister.get_sum" in error["hint"], (ok, error)


async def test_a_json_call_sent_as_python_is_answered_as_it_is_for_typescript(tmp_path):
    async with connect("stdio", config(tmp_path)) as client:
        call = '{"tool": "everything.echo", "arguments": {"message": "same"}}'
        as_python = structured(await py(client, call))
        as_typescript = structured(await client.call_tool("call_tool_chain", {"code": call}))
        assert as_python["result"] == as_typescript["result"] == "Echo: same", (as_python, as_typescript)
        assert as_python["tier"] == as_typescript["tier"] == "json", (as_python, as_typescript)
        # A Python dict that is not a call is Python.
        assert structured(await py(client, '{"a": 1}'))["result"] == {"a": 1}
