"""Return types learned from results, for tools that declare no output schema (issue 31).

server-everything's tools declare none (sandgate shows `Promise<unknown>` for them). After a
few calls through `call_tool_chain`, `tool_info`, `search_tools` and `sandgate://types.d.ts`
declare what they return, marked as observed; `tsc` checks that every result the scripts saw
satisfies the declared type, and that a result of another shape does not. The shapes keep no
value a tool returned (secrets fed as values and keys appear in no declaration and nowhere in the
store); a backend with `learn_shapes = false` teaches nothing; an error result teaches nothing;
a backend that returns a new random key set on every call cannot grow a shape or the gateway."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcp import Client, StdioServerParameters

from conftest import FAKE_BACKEND, REPO, SANDGATE, reference_servers, settled, structured, write_config
from hostile import Case, watched_gateway

pytestmark = pytest.mark.anyio

TSC = REPO / "tests" / "node" / "node_modules" / ".bin" / "tsc"

# Each returns what the script saw, so the test can check it against the declaration.
CALLS = {
    "everything.get_sum": "everything.get_sum({ a: ROUND, b: 2 })",
    "everything.echo": "everything.echo({ message: 'call ROUND' })",
    "everything.get_resource_links": "everything.get_resource_links({ count: 1 + ROUND % 3 })",
    "everything.get_annotated_message": "everything.get_annotated_message({ messageType: ['error', 'success', 'debug'][ROUND % 3], includeImage: ROUND % 2 === 0 })",
    "everything.get_tiny_image": "everything.get_tiny_image({})",
}


def fake(mode: str = "ok", **extra) -> dict:
    return {"command": sys.executable, "args": [str(FAKE_BACKEND), mode], **extra}


def config(tmp_path: Path, learn_fake: bool = True) -> Path:
    servers = {"everything": reference_servers(tmp_path)["everything"], "fake": fake(learn_shapes=learn_fake)}
    return write_config(tmp_path, "toml", servers)


def stdio(path: Path) -> Client:
    return Client(StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(path)]),
                  mode="legacy", read_timeout_seconds=120)


async def chain(client, code: str):
    return structured(await client.call_tool("call_tool_chain", {"code": code, "max_output_size": 200_000}))["result"]


async def info(client, name: str) -> dict:
    return structured(await client.call_tool("tool_info", {"name": name}))


async def learned(client, name: str, calls: int, within: float = 15.0) -> dict:
    """tool_info for `name` once it says it learned from at least `calls` results."""
    deadline = time.monotonic() + within
    while True:
        found = await info(client, name)
        if found.get("returns", {}).get("calls", 0) >= calls or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.2)


def tsc(directory: Path, declarations: str, checks: str) -> tuple[int, str]:
    (directory / "types.d.ts").write_text(declarations)
    (directory / "check.ts").write_text(checks)
    done = subprocess.run([str(TSC), "--noEmit", "--strict", "--target", "es2022", "--lib", "es2022",
                           "types.d.ts", "check.ts"], cwd=directory, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


def checks_for(seen: dict[str, list]) -> str:
    lines = ["type Returned<F extends (...args: any) => any> = Awaited<ReturnType<F>>;"]
    for name, values in seen.items():
        for i, value in enumerate(values):
            lines.append(f"const seen_{name.replace('.', '_')}_{i}: Returned<typeof {name}> = {json.dumps(value)};")
    return "\n".join(lines) + "\n"


async def test_tool_info_declares_what_the_tools_returned_and_tsc_holds_every_result_to_it(tmp_path):
    path = config(tmp_path)
    async with stdio(path) as client:
        await settled(client)
        before = await info(client, "everything.get_sum")
        assert "Promise<unknown>" in before["signature"] and "returns" not in before, before
        seen: dict[str, list] = {name: [] for name in CALLS}
        for round in range(4):
            code = "return {" + ", ".join(
                f"{json.dumps(name)}: await {call.replace('ROUND', str(round))}" for name, call in CALLS.items()) + "};"
            for name, value in (await chain(client, code)).items():
                seen[name].append(value)
        for name in CALLS:
            found = await learned(client, name, 4)
            assert found.get("returns", {}).get("observed") is True and found["returns"]["calls"] == 4, found
            assert "Promise<unknown>" not in found["signature"], found["signature"]
            assert "observed in 4 calls since" in found["declaration"], found["declaration"]
        links = (await info(client, "everything.get_resource_links"))["signature"]
        assert '"resource_link" | "text"' in links and "uri?: string" in links, links
        assert "Promise<string>" in (await info(client, "everything.get_sum"))["signature"]
        search = structured(await client.call_tool("search_tools", {"query": "sum of two numbers", "detail": "full"}))
        hit = next(r for r in search["results"] if r["name"] == "everything.get-sum")
        assert "observed in 4 calls" in hit["signature"] and "Promise<string>" in hit["signature"], hit
        # Python code mode is given the same learned types (issue 50).
        py_info = structured(await client.call_tool("tool_info", {"name": "everything.get_sum", "language": "python"}))
        assert py_info["signature"].endswith("-> str"), py_info["signature"]
        assert "observed in 4 calls since" in py_info["declaration"], py_info["declaration"]
        stub = (await client.read_resource("sandgate://types.pyi")).contents[0].text
        __import__("ast").parse(stub)
        assert "observed in 4 calls since" in stub and "-> Any:" in stub, stub[:3000]
        declarations = (await client.read_resource("sandgate://types.d.ts")).contents[0].text
    assert "observed in 4 calls since" in declarations
    code, out = tsc(tmp_path, declarations, checks_for(seen))
    assert code == 0, f"a result the script saw does not satisfy its declared type:\n{out}"
    # The check can fail: a result of another shape is refused.
    wrong = dict(seen)
    wrong["everything.get_resource_links"] = [[{"type": "text", "txet": "misspelt key"}]]
    code, out = tsc(tmp_path, declarations, checks_for(wrong))
    assert code != 0 and "txet" in out, out


async def test_shapes_are_kept_across_a_restart_and_a_declared_output_schema_wins(tmp_path):
    path = config(tmp_path)
    async with stdio(path) as client:
        await chain(client, "for (let i = 0; i < 3; i++) await everything.get_sum({ a: i, b: 1 }); return await everything.get_structured_content({ location: 'New York' });")
        await learned(client, "everything.get_sum", 3)
        await asyncio.sleep(2.5)  # written to the store every 2 s
    async with stdio(path) as client:
        found = await info(client, "everything.get_sum")
        assert found.get("returns", {}).get("calls") == 3 and "Promise<string>" in found["signature"], found
        declared = await info(client, "everything.get_structured_content")
        assert "returns" not in declared and "observed" not in declared["declaration"], declared


async def test_a_clean_stop_keeps_the_shapes_of_its_last_calls(tmp_path):
    """Issue 47, item 12: a stdio client's short session ends right after its calls; what they
    taught is written when sandgate stops cleanly, not lost for want of the next 2-s write."""
    path = config(tmp_path)
    async with stdio(path) as client:
        await chain(client, "for (let i = 0; i < 3; i++) await everything.get_sum({ a: i, b: 1 }); return 1;")
        await learned(client, "everything.get_sum", 3)
    async with stdio(path) as client:
        found = await info(client, "everything.get_sum")
        assert found.get("returns", {}).get("calls") == 3, found


SECRETS = ["ghp_16C7e42F292c6912E7710c838347Ae178B4a", "sk-live-abcdefghijklmnopqrstuv", "hunter", "alice@example.com"]


async def test_no_value_a_tool_returned_appears_in_a_declaration_or_the_store(tmp_path):
    path = config(tmp_path)
    async with stdio(path) as client:
        calls = 0
        for round in range(3):
            for secret in SECRETS:
                await chain(client, f"return await fake.secret_record({{ secret: {json.dumps(secret)} }});")
                calls += 1
                # After every lesson, not only the last: a shape that kept a value for a while
                # and dropped it later has leaked it meanwhile.
                shown = json.dumps(await learned(client, "fake.secret_record", calls))
                leaked = [s for s in SECRETS if s in shown]
                assert not leaked, f"{leaked} shown after call {calls}: {shown}"
        found = await learned(client, "fake.secret_record", 12)
        assert found.get("returns", {}).get("calls") == 12, found
        shown = json.dumps(found) + (await client.read_resource("sandgate://types.d.ts")).contents[0].text
        shown += (await client.read_resource("sandgate://types.pyi")).contents[0].text
        shown += json.dumps(structured(await client.call_tool("search_tools", {"query": "secret record", "detail": "full"})))
        await asyncio.sleep(2.5)
    assert "password: string" in shown and "by: Record<string, number>" in shown, shown
    stored = "\n".join(row[0] for row in sqlite3.connect(tmp_path / "state" / "store.db").execute("SELECT shape FROM tool_shapes"))
    assert stored, "the shape was written to the store"
    for secret in SECRETS:
        assert secret not in shown, f"{secret} appears in a declaration"
        assert secret not in stored, f"{secret} appears in the store"


async def test_a_backend_with_learn_shapes_false_and_an_error_result_teach_nothing(tmp_path):
    path = config(tmp_path, learn_fake=False)
    async with stdio(path) as client:
        await chain(client, "for (let i = 0; i < 3; i++) await fake.secret_record({ secret: 'x' }); return 1;")
        await chain(client, "for (let i = 0; i < 3; i++) { try { await fake.error_shaped({}); } catch {} } return 1;")
        await chain(client, "return await everything.echo({ message: 'one lesson' });")
        await learned(client, "everything.echo", 1)
        assert "returns" not in await info(client, "fake.secret_record")
        assert "returns" not in await info(client, "fake.error_shaped")
    (tmp_path / "learning").mkdir()
    path = config(tmp_path / "learning", learn_fake=True)
    async with stdio(path) as client:
        await chain(client, "for (let i = 0; i < 3; i++) { try { await fake.error_shaped({}); } catch {} } return await everything.echo({ message: 'x' });")
        await chain(client, "return await fake.secret_record({ secret: 'x' });")
        await learned(client, "fake.secret_record", 1)
        assert "returns" not in await info(client, "fake.error_shaped"), "an error result taught a shape"
        await asyncio.sleep(2.5)  # written to the store
    # Turned off later, the backend's shapes are declared no more, though the store has them.
    config(tmp_path / "learning", learn_fake=False)
    async with stdio(path) as client:
        assert "returns" in await info(client, "everything.echo")
        assert "returns" not in await info(client, "fake.secret_record")


RANDOM_CALLS = 100_000 if __import__("os").environ.get("SANDGATE_LONG") == "1" else 20_000
PER_EXECUTION = 1000


async def test_a_backend_that_returns_a_new_key_set_every_call_grows_neither_the_shape_nor_the_gateway(tmp_path):
    """RANDOM_CALLS calls (100,000 with SANDGATE_LONG=1) of a tool that answers with a new random
    key set, nested 12 deep, every time: the shape stays within its bound, and the gateway's
    RSS after the second half is within a few MiB of where it was after the first."""
    code = f"""
const batch = [];
for (let i = 0; i < {PER_EXECUTION}; i++) batch.push(fake.random_keys({{}}));
const answers = await Promise.all(batch);
return answers.length;"""
    async with watched_gateway(tmp_path, {"fake": fake()}) as gateway:
        executions = RANDOM_CALLS // PER_EXECUTION
        marks = []
        for i in range(executions):
            if i in (executions // 2, executions - 1):
                marks.append(gateway.gateway_rss_mib())
            await gateway.run_case(Case(f"random keys {i}", code=code, kind=None, seconds=60, gateway_mib=64))
        gateway.assert_all_contained()
        found = await learned(gateway.client, "fake.random_keys", RANDOM_CALLS - 2 * PER_EXECUTION, within=30)
        assert found["returns"]["calls"] >= RANDOM_CALLS - 2 * PER_EXECUTION, found["returns"]
        assert len(found["declaration"]) < 20_000, len(found["declaration"])
        assert "data: Record<string," in found["declaration"] or "data: {" in found["declaration"], found["declaration"]
        grew = marks[1] - marks[0]
        print(f"\n{RANDOM_CALLS} calls with random key sets: gateway RSS {marks[0]:.1f} MiB at the half, "
              f"{marks[1]:.1f} MiB near the end; declaration {len(found['declaration'])} characters")
        assert grew < 8, f"the gateway grew by {grew:.1f} MiB over the second half of {RANDOM_CALLS} calls"


async def test_what_a_result_lacks_is_named_from_its_learned_type(tmp_path):
    """Issue 47, item 7. A script that returns a key the learned type lacks (`t.state`, or
    `t.assignee.name` where the assignee has `login` and `team`) was told it "returned nothing
    … add `return`". Now the note names the keys that level has, from the learned type. And
    `res.tickets.map`, where `tickets` is also a backend, was told "`tickets` has no tool
    `map`"."""
    path = write_config(tmp_path, "toml", {"tickets": fake()})
    ticket = {"id": "T-1", "status": "open", "assignee": {"login": "sam", "team": "ops"}}
    get = f"const t = await tickets.echo({{ text: {json.dumps(json.dumps(ticket))} }});\n"
    async with stdio(path) as client:
        for _ in range(3):
            assert (await chain(client, get + "return t;"))["status"] == "open"
        await asyncio.sleep(0.5)  # the learner drains every 20 ms
        for code, words in [
            (get + "return t.state;", ["`t.state` is undefined", "`assignee`, `id`, `status`", "learned from"]),
            (get + "return t.assignee.name;", ["`t.assignee.name` is undefined: `t.assignee`", "`login`, `team`"]),
        ]:
            data = structured(await client.call_tool("call_tool_chain", {"code": code}))
            notes = " ".join(data.get("notes") or [])
            assert all(w in notes for w in words) and "add `return" not in notes, notes
        wrong = (await client.call_tool("call_tool_chain", {"code": get.replace("const t", "const res") + "return res.tickets.map((x) => x.id);"})).structured_content
        hint = (wrong.get("error") or {}).get("hint") or ""
        assert wrong["error"] and "has no tool `map`" not in hint, wrong["error"]
