"""An HTTP backend that speaks 2026-07-28: one sandgate serving HTTP is itself the backend of a
second sandgate. The inner one is a real streamable HTTP MCP server on the stateless protocol,
so this covers HTTP backends, `server/discover` negotiation and headers end to end."""

import json

import pytest

from conftest import HttpServer, connect, reference_servers, structured, write_config

pytestmark = pytest.mark.anyio


async def test_a_streamable_http_backend_on_2026_07_28(tmp_path):
    inner_dir = tmp_path / "inner"
    inner_dir.mkdir()
    inner = HttpServer(write_config(inner_dir, "json", reference_servers(inner_dir)))
    try:
        outer_dir = tmp_path / "outer"
        outer_dir.mkdir()
        servers = {"inner": {"type": "http", "url": inner.url,
                             "headers": {"X-Sandgate-Test": "${HOME}", **inner.headers}}}
        async with connect("stdio", write_config(outer_dir, "json", servers)) as client:
            found = structured(await client.call_tool("search_tools", {"query": "find tools by what they do"}))
            assert found["results"][0]["name"] == "inner.search_tools", found
            status = json.loads((await client.read_resource("sandgate://backend/inner")).contents[0].text)
            assert status["state"] == "ready" and status["transport"] == "http", status
            assert status["protocol_version"] == "2026-07-28", status
            assert sorted(status["tools"]) == ["call_tool_chain", "list_tools_meta", "read_output", "search_tools", "tool_info"]
    finally:
        inner.close()
