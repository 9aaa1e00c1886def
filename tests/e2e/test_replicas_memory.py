"""What scripts keep and what sandgate learns, across replicas on one PostgreSQL store (issue
31): a value a script keeps on one replica is read by the same caller on the other, and by no
other caller; a return shape learned on one replica is declared on the other within seconds
(each replica merges what it learned into the store, and reads what the others wrote)."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from conftest import OneProcess, settled, structured
from test_replicas import TOKEN_A, TOKEN_B, replica_config
from cluster import fresh_database

pytestmark = pytest.mark.anyio


async def test_state_and_learned_shapes_are_shared_by_replicas(tmp_path):
    config = replica_config(tmp_path, fresh_database("memory"))
    one = OneProcess(config, token=TOKEN_A)
    two = OneProcess(config, token=TOKEN_A)
    try:
        async with Client(one.target(), mode="2026-07-28") as a, Client(two.target(), mode="2026-07-28") as b, \
                Client(two.target({"Authorization": f"Bearer {TOKEN_B}"}), mode="2026-07-28") as other:
            kept = await a.call_tool("call_tool_chain", {"code": "await state.set('cursor', { page: 3 }); return 1;"})
            assert not kept.is_error, kept.content
            read = await b.call_tool("call_tool_chain", {"code": "return await state.get('cursor');"})
            assert structured(read)["result"] == {"page": 3}
            theirs = await other.call_tool("call_tool_chain", {"code": "return [await state.get('cursor'), await state.keys()];"})
            assert structured(theirs)["result"] == [None, []]
            await settled(b)
            before = structured(await b.call_tool("tool_info", {"name": "fake.secret_record"}))
            assert "returns" not in before, before
            taught = await a.call_tool("call_tool_chain", {
                "code": "for (const s of ['a', 'b', 'c']) await fake.secret_record({ secret: s }); return 1;"})
            assert not taught.is_error, taught.content
            with anyio.fail_after(20):
                while True:
                    found = structured(await b.call_tool("tool_info", {"name": "fake.secret_record"}))
                    if found.get("returns", {}).get("calls") == 3:
                        break
                    await anyio.sleep(0.5)
            assert "password: string" in found["declaration"], found["declaration"]
    finally:
        one.close()
        two.close()
