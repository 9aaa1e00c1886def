"""Does a learned return type help? (issue 31) The corpus in tests/shapes_corpus/ holds tasks on
server-everything's tools (no output schemas), each with the script a model writes knowing only
`Promise<unknown>` and the one it writes knowing the learned type. Each script is type-checked
with tsc against the types.d.ts of its setting (fetched from sandgate before and after the
teaching calls) and run through call_tool_chain; the counts are printed (docs/BENCHMARKS.md
records them) and must show that every script written against the learned types type-checks
and gives the right answer."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, structured
from test_learned_shapes import TSC, config, learned, stdio

pytestmark = pytest.mark.anyio

CORPUS = json.loads((REPO / "tests" / "shapes_corpus" / "corpus.json").read_text())


def type_checks(directory: Path, declarations: str, name: str, code: str) -> tuple[bool, str]:
    slug = "".join(c if c.isalnum() else "_" for c in name)
    (directory / "types.d.ts").write_text(declarations)
    (directory / f"{slug}.ts").write_text(f"export async function task() {{\n{code}\n}}\n")
    done = subprocess.run([str(TSC), "--noEmit", "--strict", "--target", "es2022", "--lib", "es2022",
                           "types.d.ts", f"{slug}.ts"], cwd=directory, capture_output=True, text=True, timeout=120)
    return done.returncode == 0, done.stdout


async def runs_correctly(client, code: str, expect) -> bool:
    result = await client.call_tool("call_tool_chain", {"code": code})
    return not result.is_error and (result.structured_content or {}).get("result") == expect


async def score(client, directory: Path, declarations: str, setting: str) -> dict:
    directory.mkdir(exist_ok=True)
    tally = {"type_checks": 0, "runs_correctly": 0, "failures": []}
    for task in CORPUS["tasks"]:
        checked, why = type_checks(directory, declarations, task["name"], task[setting])
        correct = await runs_correctly(client, task[setting], task["expect"])
        tally["type_checks"] += checked
        tally["runs_correctly"] += correct
        if not (checked and correct):
            tally["failures"].append(f"{task['name']}: tsc {'ok' if checked else why.strip()[:160]}; run {'ok' if correct else 'wrong'}")
    return tally


async def test_scripts_written_against_learned_types_type_check_and_run(tmp_path):
    async with stdio(config(tmp_path)) as client:
        before = (await client.read_resource("sandgate://types.d.ts")).contents[0].text
        assert "function get_sum(args: EverythingGetSumInput): Promise<unknown>;" in before
        unknown = await score(client, tmp_path / "unknown", before, "unknown")
        for code in CORPUS["teach"]:
            assert not (await client.call_tool("call_tool_chain", {"code": code + "\nreturn 1;"})).is_error
        for tool in ["everything.get_resource_links", "everything.get_annotated_message", "everything.get_env"]:
            await learned(client, tool, 3)
        after = (await client.read_resource("sandgate://types.d.ts")).contents[0].text
        knowing = await score(client, tmp_path / "learned", after, "learned")
    total = len(CORPUS["tasks"])
    print(f"\nshapes corpus, {total} tasks: with unknown, {unknown['type_checks']} type-check and "
          f"{unknown['runs_correctly']} run correctly; with learned types, {knowing['type_checks']} type-check "
          f"and {knowing['runs_correctly']} run correctly")
    assert knowing["type_checks"] == total and knowing["runs_correctly"] == total, knowing["failures"]
    assert unknown["type_checks"] < total, "scripts that read fields of unknown should not type-check"
