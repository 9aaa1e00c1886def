"""Clients hear when the tool set changes: a notification on 2025-11-25 sessions, an event on a
2026-07-28 `subscriptions/listen` stream. The trigger is a backend that adds a tool at run time
and announces it with tools/list_changed."""

import sys

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import FAKE_BACKEND, SANDGATE, HttpServer, one_process_only, settled, structured, write_config

pytestmark = pytest.mark.anyio


def growing_config(tmp_path):
    servers = {"grower": {"command": sys.executable, "args": [str(FAKE_BACKEND), "grow-later"]}}
    return write_config(tmp_path, "toml", servers)


async def assert_extra_is_searchable(client):
    found = structured(await client.call_tool("search_tools", {"query": "added at run time"}))
    assert found["results"] and found["results"][0]["name"] == "grower.extra", found


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_legacy_sessions_get_tools_list_changed(tmp_path, transport):
    notifications = []

    async def on_message(message):
        if type(message).__name__ == "ToolListChangedNotification":
            notifications.append(anyio.current_time())

    config = growing_config(tmp_path)
    server = HttpServer(config) if transport == "http" else None
    target = server.target() if server else StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(config)])
    try:
        async with Client(target, mode="legacy", message_handler=on_message) as client:
            first = structured(await client.call_tool("search_tools", {"query": "added at run time"}))
            assert all(r["name"] != "grower.extra" for r in first["results"])
            # Notifications from the backend's first connection have drained by now; the backend
            # grows 3 s after its handshake, and a new notification must follow.
            await anyio.sleep(1)
            seen = len(notifications)
            with anyio.fail_after(15):
                while len(notifications) == seen:
                    await anyio.sleep(0.05)
            await assert_extra_is_searchable(client)
    finally:
        if server:
            server.close()


@one_process_only("each replica's backend adds its tool 3 s after that replica starts, and the replicas start one after another")
async def test_stateless_listen_streams_tools_list_changed(tmp_path):
    config = growing_config(tmp_path)
    server = HttpServer(config)
    try:
        async with Client(server.target(), mode="2026-07-28") as client:
            # The backend's first connection has its own notice; this test is about the growth.
            await settled(client)
            await client.call_tool("search_tools", {"query": "echo"})
            first = structured(await client.call_tool("search_tools", {"query": "added at run time"}))
            assert all(r["name"] != "grower.extra" for r in first["results"])
            async with client.listen(tools_list_changed=True) as subscription:
                with anyio.fail_after(15):
                    event = await subscription.__anext__()
                assert "tool" in repr(event).lower(), event
            await assert_extra_is_searchable(client)
    finally:
        server.close()
