"""The user's own MCP file, unchanged (issue 18, item 1): one real file of each client's shape
in tests/fixtures/client-configs/, served by sandgate over stdio with the real npm servers.
Every entry is ready, or skipped with a status that says why; one entry sandgate cannot use
never stops the others."""

from __future__ import annotations

import json

import pytest
from mcp import Client, StdioServerParameters

from conftest import REPO, SANDGATE

pytestmark = pytest.mark.anyio

CONFIGS = REPO / "tests" / "fixtures" / "client-configs"

# client file → {entry: "ready", or a phrase its skipped status must hold}
EXPECTED = {
    "claude_desktop_config.json": {"everything": "ready", "memory": "ready", "legacy-sse": "HTTP+SSE"},
    "claude_code.mcp.json": {"everything": "ready", "signed-in": "oauth", "helped": "headersHelper",
                             "needs-a-secret": "${SANDGATE_TEST_UNSET_SECRET}"},
    "cursor.mcp.json": {"memory": "ready", "filesystem": "ready"},
    "vscode.mcp.json": {"everything": "ready", "prompted": "VS Code input"},
    "gemini.settings.json": {"everything": "ready", "remote": "disabled"},
}


@pytest.mark.parametrize("client_file", sorted(EXPECTED))
async def test_each_clients_file_works_unchanged(client_file, tmp_path):
    import os

    import anyio

    # The tool cache and state go to the test's own directory, not the user's.
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state")}
    params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(CONFIGS / client_file)],
                                   cwd=str(REPO), env=env)
    async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
        with anyio.fail_after(30):
            while True:
                backends = json.loads((await client.read_resource("sandgate://backends")).contents[0].text)["backends"]
                if all(b["state"] not in ("starting", "restarting") for b in backends):
                    break
                await anyio.sleep(0.1)
        states = {b["name"]: b for b in backends}
        assert set(states) == set(EXPECTED[client_file]), states.keys()
        for name, expected in EXPECTED[client_file].items():
            status = states[name]
            if expected == "ready":
                assert status["state"] == "ready", (name, status)
            elif expected == "disabled":
                assert status["state"] == "disabled" and not status.get("last_error"), (name, status)
            else:
                assert status["state"] == "disabled", (name, status)
                assert expected in (status.get("last_error") or ""), (name, status)
        ready = [n for n, e in EXPECTED[client_file].items() if e == "ready"]
        result = await client.call_tool("list_tools_meta", {})
        names = {t["name"].split(".")[0] for t in result.structured_content["tools"]}
        assert set(ready) <= names, names
