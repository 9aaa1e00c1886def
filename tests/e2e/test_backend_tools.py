"""What a backend lists, however hostile, reaches the model as valid, inert TypeScript, and every
tool stays reachable by its own name in every tier (issue 13)."""

import json
import subprocess
import sys

import pytest

from conftest import FAKE_BACKEND, REPO, connect, structured, write_config

pytestmark = pytest.mark.anyio

CHECKER = REPO / "tests" / "node" / "check_declarations.js"


def fake(mode: str) -> dict:
    return {"command": sys.executable, "args": [str(FAKE_BACKEND), mode]}


async def test_hostile_names_and_schemas_give_declarations_that_parse_and_declare_only(tmp_path):
    config = write_config(tmp_path, "toml", {"evil": fake("hostile-names"), "lister": fake("hostile-list")})
    async with connect("stdio", config) as client:
        await client.call_tool("search_tools", {"query": "evil"})  # waits for both backends
        declarations = (await client.read_resource("sandgate://types.d.ts")).contents[0].text
    for expected in ["evil", "lister", "deep_schema", "get_sum"]:
        assert expected in declarations, expected
    path = tmp_path / "types.d.ts"
    path.write_text(declarations)
    checked = subprocess.run(["node", str(CHECKER), str(path)], capture_output=True, text=True, timeout=120)
    report = json.loads(checked.stdout)
    assert checked.returncode == 0, report
    assert report["statements"] >= 2


async def test_types_d_ts_of_tools_whose_names_read_alike_passes_tsc(tmp_path):
    """Issue 47, item 14: `getSum`, `get_sum` and `get-sum` of one backend read alike in Pascal
    case and were declared under one type name: `tsc` merged their interfaces and failed
    ("Subsequent property declarations must have the same type"; a type alias fails with
    "Duplicate identifier")."""
    import asyncio

    config = write_config(tmp_path, "toml", {"lister": fake("hostile-list")})
    async with connect("stdio", config) as client:
        await client.call_tool("search_tools", {"query": "sum"})  # waits for the backend
        for _ in range(2):  # calls of each (their output types are declared)
            await client.call_tool("call_tool_chain", {"code": (
                'return [await lister.get_sum({a: 1, as_object: true}), await lister["get-sum"]({a: 2, as_object: true}),'
                ' await lister.getSum({a: "3", as_object: true})];')})
        await asyncio.sleep(0.5)
        declarations = (await client.read_resource("sandgate://types.d.ts")).contents[0].text
    (tmp_path / "types.d.ts").write_text(declarations)
    tsc = REPO / "tests" / "node" / "node_modules" / ".bin" / "tsc"
    done = subprocess.run([str(tsc), "--noEmit", "--strict", "--target", "es2022", "--lib", "es2022", "types.d.ts"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "sum?: number" in declarations, "the output types are declared"


async def test_names_that_sanitize_alike_stay_reachable_in_every_tier(tmp_path):
    config = write_config(tmp_path, "toml", {"lister": fake("hostile-list")})
    async with connect("stdio", config) as client:
        # The sandbox tier: every name, and a sibling, in one script.
        sandbox = structured(await client.call_tool("call_tool_chain", {"code": (
            'return [await lister.get_sum({}), await lister["get-sum"]({}), await lister.get_sum_2({}),'
            ' await lister.echo({text: "sibling"})]')}))
        assert sandbox["result"] == ["get_sum", "get-sum", "get-sum", "sibling"], sandbox
        # The single-call tier, for each name.
        for code, expected in [("lister.get_sum({})", "get_sum"), ('lister["get-sum"]({})', "get-sum"),
                               ("await lister.get_sum_2({})", "get-sum")]:
            single = structured(await client.call_tool("call_tool_chain", {"code": code}))
            assert single["result"] == expected, (code, single)
        stats = json.loads((await client.read_resource("sandgate://stats")).contents[0].text)
        collisions = stats["identifier_collisions"]
        assert any(c["names"] == ["get_sum", "get-sum"] and c["assigned"] == "get_sum_2" for c in collisions), collisions
        status = json.loads((await client.read_resource("sandgate://backend/lister")).contents[0].text)
        problems = {p["tool"]: p["problem"] for p in status["tool_problems"]}
        assert "no inputSchema" in problems["no_schema"], problems
