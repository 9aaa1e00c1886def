"""The supply-chain guard (issue 49) at the MCP level, against `sandgate serve`: text a backend
hides in its definitions (tag characters, zero-width and bidirectional characters, HTML
comments) never reaches the model, on any surface; a tool whose name hides characters is not
listed; what was taken out is said to the operator."""

from __future__ import annotations

import json
import re
import sys

import pytest

from conftest import FAKE_BACKEND, connect, write_config

pytestmark = pytest.mark.anyio

HIDDEN = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]|<!--")


async def test_hidden_text_never_reaches_the_model(tmp_path):
    backend = {"command": sys.executable, "args": [str(FAKE_BACKEND), "hidden-text"]}
    config = write_config(tmp_path, "toml", {"notes": backend})
    async with connect("stdio", config) as client:
        shown = []
        listed = await client.list_tools()
        shown += [json.dumps(t.model_dump(mode="json"), ensure_ascii=False) for t in listed.tools]
        for name, args in [("search_tools", {"query": "keeps a note", "detail": "full"}),
                           ("tool_info", {"name": "notes.take_note"}),
                           ("list_tools_meta", {})]:
            result = await client.call_tool(name, args)
            assert not result.is_error, result.content
            shown += [c.text for c in result.content] + [json.dumps(result.structured_content, ensure_ascii=False)]
        for uri in ["sandgate://types.d.ts", "sandgate://overview"]:
            shown.append((await client.read_resource(uri)).contents[0].text)
        status = json.loads((await client.read_resource("sandgate://backend/notes")).contents[0].text)
    everything = "\n".join(shown)
    assert "Keeps a note. Returns its id." in everything, "the visible words stay"
    assert not HIDDEN.search(everything), HIDDEN.search(everything)
    assert "ssh" not in everything and "drop@hidden.test" not in everything and "Ignore previous" not in everything
    names = [t["tool"] for t in status["tool_problems"]]
    problems = " ".join(p["problem"] for p in status["tool_problems"])
    assert "take_note" in names and "characters no person sees" in problems, status["tool_problems"]
    dropped = {t["tool"]: t["problem"] for t in status["tool_problems"]}
    assert "dropped" in dropped.get("no\\u{200b}te", ""), dropped  # shown to the operator as an escape
