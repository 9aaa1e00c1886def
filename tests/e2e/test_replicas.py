"""Two replicas of `sandgate serve --http` on one PostgreSQL store (issue 28, first steps): a
stored tool registered on one is callable on the other, an output one stored is read whole and
by range from the other (by its owner only), and the records either wrote are listed by the
CLI from the same store.

PostgreSQL is the throwaway server `scripts/test` starts (`SANDGATE_TEST_DATABASE_URL`); each
test makes a database of its own. Without it the tests are skipped, unless
`SANDGATE_REQUIRE_POSTGRES=1`, which makes that a failure."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import anyio
import pytest
from mcp import Client

from conftest import FAKE_BACKEND, REPO, SANDGATE, HttpServer, state_home, structured, text_of

pytestmark = pytest.mark.anyio

ADMIN_URL = os.environ.get("SANDGATE_TEST_DATABASE_URL")
TOKEN_A = "replica-token-" + secrets.token_hex(16)
TOKEN_B = "replica-other-" + secrets.token_hex(16)


def fresh_database(label: str) -> str:
    if not ADMIN_URL:
        if os.environ.get("SANDGATE_REQUIRE_POSTGRES") == "1":
            pytest.fail("SANDGATE_REQUIRE_POSTGRES=1 but SANDGATE_TEST_DATABASE_URL is not set")
        pytest.skip("no PostgreSQL (scripts/test starts one: scripts/test-postgres)")
    name = f"e2e_{label}_{secrets.token_hex(4)}"
    subprocess.run(["psql", ADMIN_URL, "-q", "-c", f"CREATE DATABASE {name}"], check=True)
    return ADMIN_URL.rsplit("/", 1)[0] + "/" + name


def replica_config(tmp_path, url: str):
    os.environ.update({"REPLICA_DATABASE_URL": url, "REPLICA_TOKEN_A": TOKEN_A, "REPLICA_TOKEN_B": TOKEN_B})
    config = tmp_path / "sandgate.toml"
    ca = os.environ.get("SANDGATE_TEST_DATABASE_CA")
    ca_line = f"ca_file = {json.dumps(ca)}" if ca else ""
    config.write_text(f"""
[store]
backend = "postgres"
url = "${{REPLICA_DATABASE_URL}}"
{ca_line}

[servers.fake]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(FAKE_BACKEND))}, "ok"]

[profiles.default]
tools = ["*"]
register_tools = true

[profiles.other]
tools = ["*"]

[stored_tools]
expose_as_mcp_tools = true

[[http.tokens]]
token = "${{REPLICA_TOKEN_A}}"
profile = "default"
name = "a"

[[http.tokens]]
token = "${{REPLICA_TOKEN_B}}"
profile = "other"
name = "b"
""")
    return config


SUM = """export const meta = {
  description: "Sum of a list of numbers",
  input: { type: "object", properties: { xs: { type: "array", items: { type: "number" } } }, required: ["xs"] },
};
export default async function (input: { xs: number[] }) {
  return { total: input.xs.reduce((a, b) => a + b, 0) };
}
"""


async def test_a_tool_registered_on_one_replica_runs_on_the_other_and_outputs_are_read_anywhere(tmp_path):
    config = replica_config(tmp_path, fresh_database("replicas"))
    one = HttpServer(config, token=TOKEN_A)
    two = HttpServer(config, token=TOKEN_A)
    try:
        async with Client(one.target(), mode="2026-07-28") as a, Client(two.target(), mode="2026-07-28") as b:
            done = await a.call_tool("register_tool", {"name": "sum_numbers", "code": SUM})
            assert not done.is_error and "version 1" in text_of(done), text_of(done)
            # The other replica sees the change (its watch reads the store's change mark).
            executions = 0
            with anyio.fail_after(10):
                while True:
                    executions += 1
                    ran = await b.call_tool("call_tool_chain", {"code": "return await user.sum_numbers({xs: [2, 3]})"})
                    if not ran.is_error and structured(ran).get("result") == {"ok": True, "data": {"total": 5}}:
                        break
                    assert "user is not defined" in text_of(ran), text_of(ran)
                    await anyio.sleep(0.2)
            # An output stored by one replica is read whole and by range on the other (by a
            # stateless caller: a 2025-11-25 session's outputs are its own, and sessions do not
            # move between replicas yet).
            big = structured(await a.call_tool("call_tool_chain", {"code": "return 'é'.repeat(40000)"}))
            executions += 1
            assert big["shaped"], big
            pieces, offset = [], 0
            while offset is not None:
                piece = structured(await b.call_tool("read_output", {"execution_id": big["execution_id"], "offset": offset}))
                pieces.append(piece["text"])
                offset = piece["next_offset"]
            assert "".join(pieces) == "é" * 40000, [len(p) for p in pieces]
            part = structured(await b.call_tool("read_output", {"execution_id": big["execution_id"], "offset": 3, "length": 5}))
            assert (part["text"], part["start"], part["end"]) == ("ééé", 2, 8), part  # on character boundaries
        # Another caller on the other replica does not read it.
        async with Client(two.target(headers={"Authorization": f"Bearer {TOKEN_B}"}), mode="2026-07-28") as other:
            refused = await other.call_tool("read_output", {"execution_id": big["execution_id"]})
            assert refused.is_error and "no stored output" in text_of(refused), text_of(refused)
    finally:
        one.close()
        two.close()
    # The CLI lists what both replicas recorded, from the same store.
    env = {**os.environ, "XDG_STATE_HOME": str(state_home(config))}
    listed = subprocess.run([SANDGATE, "executions", "list", "--json", "--config", str(config)],
                            capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert listed.returncode == 0, listed.stderr
    records = json.loads(listed.stdout)
    assert len(records) == executions and big["execution_id"] in [r["id"] for r in records], (executions, records[:3])
    migrated = subprocess.run([SANDGATE, "migrate", "--config", str(config)],
                              capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert migrated.returncode == 0 and "postgres" in migrated.stdout, migrated.stderr


async def test_a_profiles_execution_rate_is_one_limit_across_replicas(tmp_path):
    config = replica_config(tmp_path, fresh_database("rates"))
    config.write_text(config.read_text().replace(
        "[profiles.other]\ntools = [\"*\"]",
        "[profiles.other]\ntools = [\"*\"]\nlimits = { executions_per_minute = 4 }"))
    one = HttpServer(config, token=TOKEN_B)
    two = HttpServer(config, token=TOKEN_B)
    try:
        async with Client(one.target(), mode="2026-07-28") as a, Client(two.target(), mode="2026-07-28") as b:
            answers = []
            for i in range(8):
                client = a if i % 2 == 0 else b
                answers.append(await client.call_tool("call_tool_chain", {"code": f"return {i}"}))
            refused = [text_of(r) for r in answers if r.is_error]
            assert len(refused) == 4, [text_of(r)[:120] for r in answers]
            assert all("may start 4 executions a minute" in said and "Retry in" in said for said in refused), refused
    finally:
        one.close()
        two.close()
