"""Signing in to a backend across replicas (issue 51): the reference deployment's PostgreSQL and
three replicas. A script's call waits on replica 1 for its user's sign-in; the link it sends
leads to replica 2's console, where the person signs in and the authorization server sends the
browser back; replica 2 seals the tokens in the shared store, and the call on replica 1 goes on
with them. The client sandgate registered at the authorization server is the same on every
replica (kept sealed in the store), so a later call through replica 3 needs no sign-in."""

from __future__ import annotations

import json
import types as pytypes

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import cluster
from cluster import ClusterServer
from conftest import free_port, structured, text_of
from issuer import Issuer
from test_backend_sign_in import ALICE, KEY, Notes, SigningInPerson, notes_config


@pytest.fixture
def deployment(tmp_path, monkeypatch):
    monkeypatch.setenv("SANDGATE_TEST_CREDENTIAL_KEY", KEY)
    port = cluster.free_base_port()
    # The cluster takes the port chosen here, so the config can name replica 2's callback.
    monkeypatch.setattr(cluster, "free_base_port", lambda: port)
    backend_port = free_port()
    resource = f"http://127.0.0.1:{backend_port}/mcp"
    issuer = Issuer(tmp_path, resources=[], upstream={"resource": resource, "scope": "notes:read notes:write"})
    notes = Notes(backend_port, issuer.url)
    path = tmp_path / "sandgate.toml"
    path.write_text(notes_config(resource, f"http://127.0.0.1:{port + 2}/ui/connect/callback"))
    server = ClusterServer(path, token=ALICE)
    try:
        yield server, issuer, notes
    finally:
        server.close()
        notes.close()
        issuer.close()


def replica(server: ClusterServer, n: int):
    """Replica `n` as the browser helpers see a server: its own URL."""
    return pytypes.SimpleNamespace(url=server.replica_url(n))


async def whoami_through(url: str, person=None):
    transport = streamable_http_client(url, http_client=create_mcp_http_client(
        headers={"Authorization": f"Bearer {ALICE}"}))
    options = {"elicitation_callback": person} if person else {}
    async with Client(transport, mode="legacy", read_timeout_seconds=120, **options) as client:
        return await client.call_tool("call_tool_chain", {"code": "return await notes.whoami({})",
                                                          "timeout_ms": 120_000})


def test_a_call_waiting_on_one_replica_goes_on_when_the_sign_in_lands_on_another(deployment):
    server, issuer, notes = deployment
    person = SigningInPerson(replica(server, 2), issuer, ALICE, "alice")
    answer = anyio.run(whoami_through, server.replica_url(1), person)
    assert not answer.is_error, text_of(answer)
    me = structured(answer)["result"]
    me = json.loads(me) if isinstance(me, str) else me
    assert me["sub"] == "alice", me
    assert len(person.asked) == 1 and f":{server.port + 2}/ui/connect/start" in person.asked[0]["url"], person.asked
    # Replica 1 asked and waited (the call went to it alone); the link, and so the callback,
    # was replica 2's.
    later = anyio.run(whoami_through, server.replica_url(3))
    assert not later.is_error, f"replica 3 reads the same sealed tokens: {text_of(later)}"
    assert notes.seen()["last_subject"] == "alice"
