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
