"""What the model sees of large results (issue 34, item 2), through `call_tool_chain` over MCP.

A result that fits the budget the caller asked for reaches the model whole; one that does not
is cut to that budget with as much of the data as fits, and every list in a summary is
bounded. Before, JSON over 10,240 bytes was always summarised: 200 rows (13 KB) became 3 rows
and a list of ids even with `max_output_size: 100000`, a 31 KB tree a 0.5 KB outline, and
50,000 rows (7 MB) showed 0.6 KB.
"""

from __future__ import annotations

import json

import pytest

from conftest import connect, reference_servers, text_of, write_config

pytestmark = pytest.mark.anyio

ROWS = "Array.from({length: N}, (_, i) => ({id: i, title: `Ticket ${i}: printer on floor ${i % 9} jams`, state: i % 3 ? 'closed' : 'open'}))"
TREE = """
const tree = (depth, at) => depth === 0 ? {name: at + '.txt', type: 'file'}
  : {name: at, type: 'directory', children: Array.from({length: 6}, (_, i) => tree(depth - 1, at + '_' + i))};
return tree(3, 'd');"""


async def run(client, code: str, **extra):
    result = await client.call_tool("call_tool_chain", {"code": code, **extra})
    return result, result.structured_content or {}


def shown_json(result) -> dict | list:
    """The result as the response's text shows it (before the footer and the status line)."""
    text = text_of(result)
    body = text.split("\n[Output: ")[0].split("\n\n[")[0]
    return json.loads(body)


async def test_results_within_the_budget_are_whole_and_larger_ones_fill_it(tmp_path):
    config = write_config(tmp_path, "toml", {"everything": reference_servers(tmp_path)["everything"]})
    async with connect("stdio", config) as client:
        # 200 rows, 13 KB: whole when the caller's budget holds them.
        result, data = await run(client, "return " + ROWS.replace("N", "200"), max_output_size=100_000)
        assert data["output"]["stages"] == [], data["output"]
        assert len(shown_json(result)) == 200

        # 3,000 rows in the default budget: as many whole rows as fit, the rest bounded.
        result, data = await run(client, "return " + ROWS.replace("N", "3000"))
        assert len(text_of(result)) <= 20_000 + 12 * 1024
        shown = shown_json(result)
        assert shown["count"] == 3000 and len(shown["first"]) > 150, {k: v for k, v in shown.items() if k != "first"}
        assert len(shown["rest_by_id"]["first"]) <= 100, shown["rest_by_id"]
        assert shown["rest_by_id"]["more"] == 3000 - len(shown["first"]) - len(shown["rest_by_id"]["first"])

        # 50,000 rows (about 7 MB as JSON): still fills the budget.
        result, data = await run(client, "return " + ROWS.replace("N", "50000"), timeout_ms=20_000)
        assert data["output"]["original_bytes"] > 4_000_000, data["output"]
        assert 15_000 < len(text_of(result)) <= 20_000 + 12 * 1024, len(text_of(result))
        assert len(shown_json(result)["first"]) > 150

        # A tree of about 30 KB keeps its shape and most of its leaves.
        result, data = await run(client, TREE)
        assert data["output"]["original_bytes"] > 20_000 and data["output"]["stages"] == ["json_summary"], data["output"]
        shown = shown_json(result)
        assert shown["name"] == "d" and shown["children"][0]["name"] == "d_0", str(shown)[:300]
        assert len(text_of(result)) > 10_000, len(text_of(result))
        # With room for it, the whole tree.
        result, data = await run(client, TREE, max_output_size=100_000)
        assert data["output"]["stages"] == [], data["output"]


async def test_a_file_read_in_one_call_spends_the_budget_on_its_text(tmp_path):
    """Issue 47, items 4 and 5. `filesystem.read_text_file` answers `{content: "<text>"}`; a
    30 KB file came back as 300 characters of a 20,000-character budget ("98% reduced"), and
    `directory_tree`'s 130 KB as 400, because every string was cut to one small length. Now the
    one string gets the budget, head and tail, and says where `read_output` reads the rest.
    And under a 400-character budget, 167 uniform rows still show their count and keys."""
    servers = reference_servers(tmp_path)
    root = tmp_path / "files"
    lines = [f"Line {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(560)]
    (root / "big.md").write_text("".join(lines))
    for d in range(6):
        for f in range(120):
            (root / f"dir{d}").mkdir(exist_ok=True)
            (root / f"dir{d}" / f"file_{f}_with_a_longish_name.txt").write_text("x")
    config = write_config(tmp_path, "toml", servers)
    async with connect("stdio", config) as client:
        result, data = await run(client, f'return await filesystem.read_text_file({{path: "{root}/big.md"}});')
        shown = shown_json(result)["content"]
        assert 18_000 <= len(shown) <= 20_000, len(shown)
        assert shown.startswith(lines[0]) and shown.endswith(lines[-1]), shown[-200:]
        pointer = shown.split("json_path ")[1]
        path = json.loads(pointer.split(" and offset ")[0])
        offset = int(pointer.split(" and offset ")[1].split(" ")[0])
        head = shown.split("… [")[0]
        assert path == "$.content" and offset == len(head.encode()), pointer[:120]
        rest = await client.call_tool("read_output", {"execution_id": data["execution_id"], "json_path": path,
                                                      "offset": offset, "length": 200})
        assert rest.structured_content["text"] == "".join(lines)[offset:offset + 200], rest.structured_content

        result, data = await run(client, f'return await filesystem.directory_tree({{path: "{root}"}});')
        assert data["output"]["original_bytes"] > 50_000, data["output"]
        assert len(shown_json(result)["content"]) > 15_000, text_of(result)[:300]

        rows = ("return Array.from({length: 167}, (_, i) => ({id: `T-${1000 + i}`, subject: `Printer ${i} jams`, "
                "status: 'open', priority: i % 3, assignee: 'sam'}));")
        result, data = await run(client, rows, max_output_size=400)
        shown = shown_json(result)
        assert shown["count"] == 167 and shown["keys"] == ["id", "subject", "status", "priority", "assignee"], shown
