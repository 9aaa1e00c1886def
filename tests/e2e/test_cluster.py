"""The reference deployment end to end: `scripts/cluster` (PostgreSQL, three replicas, HAProxy
with stickiness off, so consecutive requests land on different replicas) and a representative
set of what a client does over HTTP, all through HAProxy: stateless calls, a 2025-11-25 session
from the Python SDK whose requests go round the replicas, a stored tool registered through one
replica and called through the others, a shortened output read back in pieces, the console,
and a token the cluster does not know. Every end-to-end test can run against a cluster too:
`SANDGATE_E2E_CLUSTER=1` (see `cluster.py`)."""

from __future__ import annotations

import json
import secrets
import subprocess
import time

import anyio

import httpx2 as httpx
import pytest
from mcp import Client

from cluster import REPO, ClusterServer
from conftest import fake_backend_toml, read_output_whole, structured, text_of

pytestmark = pytest.mark.anyio

TOKEN = "cluster-token-" + secrets.token_hex(16)

SUM = """export const meta = {
  description: "Sum of a list of numbers",
  input: { type: "object", properties: { xs: { type: "array", items: { type: "number" } } }, required: ["xs"] },
};
export default async function (input: { xs: number[] }) {
  return { total: input.xs.reduce((a, b) => a + b, 0) };
}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("cluster")
    config = home / "sandgate.toml"
    config.write_text(f"""
{fake_backend_toml()}
[stored_tools]
expose_as_mcp_tools = true

[http]
drain = "3s"

[[http.tokens]]
token = "{TOKEN}"
profile = "default"
name = "cluster"
""")
    server = ClusterServer(config, token=TOKEN)
    yield server
    server.close()


async def test_stateless_calls_go_round_the_replicas_and_each_answers(cluster):
    async with Client(cluster.target(), mode="2026-07-28") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"call_tool_chain", "search_tools", "read_output"} <= names, names
        pids = set()
        for i in range(9):
            ran = structured(await client.call_tool("call_tool_chain", {"code": "return await fake.pid({})"}))
            pids.add(json.dumps(ran["result"]))
        # Round robin over three replicas, each with its own backend process.
        assert len(pids) == 3, pids


async def test_a_legacy_session_goes_round_the_replicas_without_stickiness(cluster):
    async with Client(cluster.target(), mode="legacy") as client:
        pids = set()
        for i in range(6):
            ran = structured(await client.call_tool("call_tool_chain", {"code": "return await fake.pid({})"}))
            pids.add(json.dumps(ran["result"]))
        assert len(pids) == 3, pids
        # Its outputs are its own on every replica: one shortened here is read in pieces there.
        big = structured(await client.call_tool("call_tool_chain", {"code": "return 'ab'.repeat(30000)"}))
        assert big["shaped"], big
        assert "".join(await read_output_whole(client, big["execution_id"])) == "ab" * 30000


async def test_a_tool_registered_through_one_replica_is_called_through_every_one(cluster):
    async with Client(cluster.target(), mode="2026-07-28") as client:
        done = await client.call_tool("register_tool", {"name": "cluster_sum", "code": SUM})
        assert not done.is_error, text_of(done)
        # At once, with no wait and no retry: the next three calls land on three replicas, and
        # each reads the store's change mark before running code that could call a stored tool.
        for _ in range(3):
            ran = await client.call_tool("call_tool_chain", {"code": "return await user.cluster_sum({xs: [1, 2, 3]})"})
            assert structured(ran)["result"] == {"ok": True, "data": {"total": 6}}, text_of(ran)


async def test_the_console_and_a_wrong_token_through_the_balancer(cluster):
    front = cluster.url.removesuffix("/mcp")
    login = httpx.post(front + "/ui/login", json={"token": TOKEN}, headers={"Origin": front}, timeout=10)
    assert login.status_code == 200, login.text
    cookie = login.headers["set-cookie"].split(";")[0]
    # Three requests, three replicas: the login holds on each.
    for _ in range(3):
        me = httpx.get(front + "/ui/api/me", headers={"Cookie": cookie}, timeout=10)
        assert me.status_code == 200 and me.json()["profile"] == "default", me.text
    wrong = httpx.post(cluster.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                       headers={"Authorization": "Bearer not-a-token-" + "x" * 40,
                                "Accept": "application/json, text/event-stream"}, timeout=10)
    assert wrong.status_code == 401, wrong.text
    ready = httpx.get(front + "/readyz", timeout=10)
    assert ready.status_code == 200, ready.text


async def test_a_rolling_restart_of_every_replica_under_load_fails_no_request(cluster):
    """Each replica in turn gets SIGTERM and is started again, while stateless and 2025-11-25
    clients keep calling through HAProxy: the replica drains (`/readyz` 503, each response
    closing its connection) until HAProxy has taken it out, finishes what it has, and stops;
    no client sees an error, and the sessions go on."""
    outcomes: list[tuple[str, bool, str]] = []
    restarting = anyio.Event()
    done = anyio.Event()

    async def client(mode: str, n: int):
        async with Client(cluster.target(), mode=mode, read_timeout_seconds=60) as session:
            i = 0
            while not done.is_set():
                i += 1
                try:
                    ran = await session.call_tool("call_tool_chain", {"code": f"await fake.slow({{ms: 150}}); return {n * 1000 + i}"})
                    ok = not ran.is_error and ran.structured_content.get("result") == n * 1000 + i
                    outcomes.append((mode, ok, "" if ok else text_of(ran)[:200]))
                except Exception as error:  # noqa: BLE001 - every failure is the finding
                    outcomes.append((mode, False, repr(error)[:200]))

    async def restart_each():
        await anyio.sleep(1.0)
        restarting.set()
        for n in (1, 2, 3):
            restarted = await anyio.to_thread.run_sync(lambda: subprocess.run(
                [str(REPO / "scripts" / "cluster"), "restart", str(cluster.dir), str(n)],
                capture_output=True, text=True, timeout=120))
            assert restarted.returncode == 0, restarted.stderr
        await anyio.sleep(1.0)
        done.set()

    started = time.monotonic()
    async with anyio.create_task_group() as group:
        for n in range(4):
            group.start_soon(client, "2026-07-28", n)
        for n in range(4, 6):
            group.start_soon(client, "legacy", n)
        group.start_soon(restart_each)
    failed = [o for o in outcomes if not o[1]]
    assert restarting.is_set() and len(outcomes) > 50, (len(outcomes), time.monotonic() - started)
    assert not failed, (len(failed), len(outcomes), failed[:5])
