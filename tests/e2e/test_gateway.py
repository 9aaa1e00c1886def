"""The gateway's meta-tools and resources, seen by the Python MCP SDK client, over stdio and
HTTP, on both protocol eras, with the config given as .mcp.json and as sandgate.toml."""

import json

import pytest

from conftest import connect, reference_servers, structured, text_of, write_config

pytestmark = pytest.mark.anyio

TRANSPORTS = ["stdio", "http"]
FORMATS = ["json", "toml"]
MODES = ["legacy", "2026-07-28"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_meta_tools_answer_correctly(tmp_path, transport, fmt, mode):
    config = write_config(tmp_path, fmt, reference_servers(tmp_path))
    async with connect(transport, config, mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
        if mode == "legacy":
            assert client.server_info.name == "sandgate"
        tools = await client.list_tools()
        assert {t.name for t in tools.tools} == {"search_tools", "tool_info", "list_tools_meta", "call_tool_chain", "read_output",
                                                 "wait_execution"}

        found = structured(await client.call_tool("search_tools", {"query": "sum two numbers"}))
        assert found["results"][0]["name"] == "everything.get-sum", found
        assert found["results"][0]["signature"].startswith("everything.get_sum(")

        info = structured(await client.call_tool("tool_info", {"name": "memory.create_entities"}))
        declaration = info["declaration"]
        for word in ("entities", "name", "entityType", "observations"):
            assert word in declaration, declaration
        assert "function create_entities(" in declaration

        overview = await client.read_resource("sandgate://overview")
        text = overview.contents[0].text
        for backend in ("everything", "memory", "filesystem"):
            assert f"| {backend} | ready |" in text, text


async def test_tool_info_resolves_names_and_suggests_on_a_miss(tmp_path):
    config = write_config(tmp_path, "json", reference_servers(tmp_path))
    async with connect("stdio", config) as client:
        for name in ("everything.get-sum", "everything.get_sum", "get-sum", "get_sum"):
            info = structured(await client.call_tool("tool_info", {"name": name}))
            assert info["name"] == "everything.get-sum", (name, info)
        miss = await client.call_tool("tool_info", {"name": "memory.create_entitys"})
        assert miss.is_error
        assert "did you mean" in text_of(miss) and "memory.create_entities" in text_of(miss)
        meta = await client.call_tool("tool_info", {"name": "search_tools"})
        assert meta.is_error and "call it directly" in text_of(meta)
        bad = await client.call_tool("search_tools", {"query": "x", "limit": 0})
        assert bad.is_error and "limit must be between 1 and 50" in text_of(bad)
        unknown_arg = await client.call_tool("search_tools", {"query": "x", "lmit": 3})
        assert unknown_arg.is_error and "lmit" in text_of(unknown_arg)


async def test_list_tools_meta_pages_through_everything(tmp_path):
    config = write_config(tmp_path, "toml", reference_servers(tmp_path))
    async with connect("http", config) as client:
        seen, cursor = [], None
        while True:
            args = {"page_size": 7} | ({"cursor": cursor} if cursor else {})
            page = structured(await client.call_tool("list_tools_meta", args))
            seen += [t["name"] for t in page["tools"]]
            cursor = page["nextCursor"]
            if cursor is None:
                break
        assert len(seen) == page["total"] == len(set(seen))
        assert "memory.read_graph" in seen and "filesystem.read_text_file" in seen
        bad = await client.call_tool("list_tools_meta", {"cursor": "nonsense"})
        assert bad.is_error and "start again without a cursor" in text_of(bad)


async def test_resources_describe_backends_and_types(tmp_path):
    config = write_config(tmp_path, "json", reference_servers(tmp_path))
    async with connect("stdio", config) as client:
        await client.call_tool("search_tools", {"query": "anything"})  # lets backends settle
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"sandgate://overview", "sandgate://backends", "sandgate://stats", "sandgate://types.d.ts", "sandgate://backend/memory"} <= uris
        memory = json.loads((await client.read_resource("sandgate://backend/memory")).contents[0].text)
        assert memory["state"] == "ready" and "create_entities" in memory["tools"]
        assert "stderr" not in json.dumps(memory).lower()
        types = (await client.read_resource("sandgate://types.d.ts")).contents[0].text
        assert "declare namespace memory {" in types and "function get_sum(" in types
        stats = json.loads((await client.read_resource("sandgate://stats")).contents[0].text)
        assert stats["requests"]["search_tools"] == 1 and stats["backends"]["ready"] == 3
        templates = await client.list_resource_templates()
        assert any(t.uri_template == "sandgate://backend/{name}" for t in templates.resource_templates)
