"""sandgate as an OAuth 2.1 resource server, against a real OpenID provider (`oidc-provider`
from npm, started here on loopback with a key made for the run; tests/node/oidc_provider.mjs):

- the Python SDK's OAuth client finds the issuer by itself (401 → `resource_metadata` →
  RFC 9728 metadata → the issuer's metadata), gets a token by client credentials with the
  gateway as its resource (RFC 8707), and calls `call_tool_chain`;
- two users of one profile each own what they store: one cannot read the other's output;
- a valid token that no rule maps gets 403 with the reason;
- hostile tokens are refused with 401, the reason, an audit line, and no effect: `alg: none`,
  HS256 signed with the issuer's public key, an unknown `kid`, a `jku` pointing elsewhere, a
  wrong issuer, another resource's audience, expired, not yet valid, a 1 MB token, deeply
  nested claims, claims that try to widen a rule; a JWKS endpoint that is slow, huge, or
  garbage. Each case checks the time, the response size, and that the gateway still answers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx2 as httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client

from conftest import OneProcess, fake_backend_toml, free_port, read_output_whole, structured
from issuer import USERS, Issuer, KeyServer, as_user, b64, hs256, issuers  # noqa: F401 - a fixture

pytestmark = pytest.mark.anyio

def gateway_config(tmp: Path, port: int, issuer: str, jwks_uri: str | None = None, introspect: bool = False,
                   per_minute: int | None = None, introspection_endpoint: str | None = None,
                   register: bool = False) -> Path:
    resource = f"http://127.0.0.1:{port}/mcp"
    config = tmp / "sandgate.toml"
    jwks = f'jwks_uri = "{jwks_uri}"' if jwks_uri else ""
    if introspect:
        endpoint = f'endpoint = "{introspection_endpoint}", ' if introspection_endpoint else ""
        jwks += ('\nintrospection = { ' + endpoint +
                 'client_id = "gateway", client_secret = "${SANDGATE_TEST_INTROSPECTION_SECRET}" }')
    config.write_text(f"""
{fake_backend_toml()}
[profiles.builder]
tools = ["*"]
{f"limits = {{ executions_per_minute = {per_minute} }}" if per_minute else ""}
{"register_tools = true" if register else ""}

[auth.oauth]
resource = "{resource}"

[[auth.oauth.issuers]]
issuer = "{issuer}"
{jwks}

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "builder"

[audit]
path = "{tmp / 'audit.jsonl'}"
""")
    return config


@pytest.fixture
def deployment(tmp_path, issuers):
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    issuer = issuers(tmp_path, [resource, "http://127.0.0.1:1/other"])
    server = OneProcess(gateway_config(tmp_path, port, issuer.url), listen=f"127.0.0.1:{port}")
    try:
        yield issuer, server, resource
    finally:
        server.close()


async def test_the_sdk_client_finds_the_issuer_gets_a_token_and_each_user_owns_its_outputs(deployment):
    issuer, server, resource = deployment
    # What a client sees first: 401, and where the metadata is.
    bare = httpx.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert bare.status_code == 401
    challenge = bare.headers["www-authenticate"]
    assert challenge == f'Bearer resource_metadata="http://127.0.0.1:{server.url.split(":")[2].split("/")[0]}/.well-known/oauth-protected-resource/mcp"', challenge
    metadata = httpx.get(challenge.split('"')[1]).json()
    assert metadata["resource"] == resource and metadata["authorization_servers"] == [issuer.url], metadata

    big = "return 'w'.repeat(300000)"
    async with Client(as_user(server, issuer, "alice"), mode="2026-07-28") as alice:
        ran = structured(await alice.call_tool("call_tool_chain", {"code": "return await fake.echo({text: 'as alice'})"}))
        assert ran["result"] is not None, ran
        stored = structured(await alice.call_tool("call_tool_chain", {"code": big}))
        assert stored["output"]["stored"], stored
        pieces = await read_output_whole(alice, stored["execution_id"])
        assert "".join(pieces).count("w") == 300000
    async with Client(as_user(server, issuer, "bob"), mode="2026-07-28") as bob:
        # Same profile, another user: alice's output is not there for bob.
        other = await bob.call_tool("read_output", {"execution_id": stored["execution_id"]})
        assert other.is_error, other.content


async def test_a_valid_token_no_rule_admits_is_forbidden_with_the_reason(deployment):
    issuer, server, resource = deployment
    token = issuer.client_token("mallory", resource)
    answer = httpx.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                        headers={"authorization": f"Bearer {token}"})
    assert answer.status_code == 403, answer.text
    assert "no rule" in answer.json()["error"]["message"], answer.text
    # Alice's token works on the same route.
    answer = initialize(server, issuer.client_token("alice", resource))
    assert answer.status_code == 200, answer.text


def refused_quickly(server, token: str, expect: tuple[int, ...] = (401,), within: float = 8.0) -> dict:
    started = time.monotonic()
    answer = httpx.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                        headers={"authorization": f"Bearer {token}"}, timeout=30)
    took = time.monotonic() - started
    assert answer.status_code in expect, (answer.status_code, answer.text[:300])
    assert took < within, took
    assert len(answer.content) < 2000, len(answer.content)
    return answer.json() if answer.content else {}


def initialize(server, token: str, timeout: float = 5) -> httpx.Response:
    return httpx.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        headers={"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"},
        timeout=timeout)


def still_answers(server, issuer: Issuer, resource: str):
    assert httpx.get(server.url.replace("/mcp", "/healthz")).status_code == 200
    ok = initialize(server, issuer.client_token("alice", resource))
    assert ok.status_code == 200, ok.text


async def test_hostile_tokens_are_refused_with_the_reason_and_an_audit_line(deployment, tmp_path):
    issuer, server, resource = deployment
    now = int(time.time())
    claims = {"iss": issuer.url, "sub": "alice", "aud": resource, "exp": now + 300, "iat": now, "groups": ["eng"]}
    # A valid token made the same way passes, so each refusal below is the case's own doing.
    assert initialize(server, issuer.sign(claims)).status_code == 200
    attacker_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    attacker_public = attacker_key.public_key().public_numbers()
    attacker = KeyServer(lambda path: (200, json.dumps({"keys": [{"kty": "RSA", "kid": "evil", "use": "sig",
                                                                  "n": b64(attacker_public.n), "e": b64(attacker_public.e)}]}).encode(), 0))
    attacker_pem = attacker_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption())
    deep = json.dumps(claims)[:-1] + ', "deep": ' + "[" * 5000 + "]" * 5000 + "}"
    rss_before = server.rss_kib()
    cases = {
        "alg none": (jwt.encode(claims, None, algorithm="none"), "not a signed JWT"),
        "HS256 with the issuer's public key": (hs256(claims, issuer.public_pem, {"kid": issuer.kid}), "algorithm"),
        "an unknown kid": (issuer.sign(claims, {"kid": "no-such-kid"}), "kid"),
        "a jku and kid of the attacker's keys": (
            jwt.encode(claims, attacker_pem, algorithm="RS256", headers={"kid": "evil", "jku": attacker.url + "/jwks"}), "kid"),
        "a wrong issuer": (issuer.sign({**claims, "iss": "http://127.0.0.1:1/evil"}), "not one [auth.oauth] trusts"),
        "another resource's token": (issuer.client_token("alice", "http://127.0.0.1:1/other"), "another resource"),
        "a forged audience": (issuer.sign({**claims, "aud": "http://127.0.0.1:1/other"}), "another resource"),
        "expired": (issuer.sign({**claims, "exp": now - 3600}), "expired"),
        "not yet valid": (issuer.sign({**claims, "nbf": now + 3600}), "not valid yet"),
        "a 64 KiB token": (issuer.sign({**claims, "pad": "a" * 65536}), "over the 16 KiB"),
        "deeply nested claims": (issuer.sign_raw(deep.encode()), "claims"),
        "no sub": (issuer.sign({k: v for k, v in claims.items() if k != "sub"}), "sub"),
    }
    for name, (token, says) in cases.items():
        answer = refused_quickly(server, token)
        assert says in answer["error"]["message"], (name, answer)
    assert attacker.hits == 0, "a token named where to fetch keys, and sandgate went"
    # A 1 MB token is refused before it is read as one (the header limit).
    refused_quickly(server, issuer.sign({**claims, "pad": "a" * 1_000_000}), expect=(401, 431))
    # Claims that try to widen a rule: valid tokens, no rule admits them.
    for groups in ["eng builder", ["eng*"], [["eng"]], {"eng": True}, ["ENG"], "eng\u0000"]:
        answer = refused_quickly(server, issuer.sign({**claims, "groups": groups}), expect=(403,))
        assert "no rule" in answer["error"]["message"], (groups, answer)
    refused_quickly(server, issuer.sign({**{k: v for k, v in claims.items() if k != "groups"}, "groups.eng": "eng"}),
                    expect=(403,))
    # A token the issuer's key signed with an expiry at the end of time: valid, and nothing
    # that adds the leeway to it overflows (the session sweep reads it every 2 s).
    forever = initialize(server, issuer.sign({**claims, "exp": 2**64 - 1}))
    assert forever.status_code == 200, forever.text
    time.sleep(3)
    assert initialize(server, issuer.sign({**claims, "exp": 2**64 - 1})).status_code == 200
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    refusals = [a for a in audit if a.get("decision") == "deny" and a.get("kind") == "http"]
    assert len(refusals) >= len(cases) + 7, len(refusals)
    assert server.rss_kib() - rss_before < 50 * 1024
    still_answers(server, issuer, resource)
    attacker.shutdown()


@pytest.mark.parametrize("fault", ["slow", "huge", "garbage"])
async def test_a_faulty_key_endpoint_refuses_tokens_and_the_gateway_still_answers(tmp_path, fault, issuers):
    answers = {
        "slow": lambda path: (200, b'{"keys": []}', 30),
        "huge": lambda path: (200, b'{"keys": [' + b'{"kty": "RSA"},' * 400_000 + b'{}]}', 0),
        "garbage": lambda path: (200, b'\x00\xff<html>not json', 0),
    }
    keys = KeyServer(answers[fault])
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    issuer = issuers(tmp_path, [resource])
    server = OneProcess(gateway_config(tmp_path, port, issuer.url, jwks_uri=keys.url + "/jwks"),
                        listen=f"127.0.0.1:{port}")
    try:
        now = int(time.time())
        token = issuer.sign({"iss": issuer.url, "sub": "alice", "aud": resource, "exp": now + 300, "groups": ["eng"]})
        rss_before = server.rss_kib()
        answer = refused_quickly(server, token, within=8.0)
        assert "keys could not be read" in answer["error"]["message"], answer
        # A second token meanwhile does not fetch again (at most once per 10 s).
        hits = keys.hits
        refused_quickly(server, token, within=8.0)
        assert keys.hits == hits
        assert server.rss_kib() - rss_before < 50 * 1024
        assert httpx.get(server.url.replace("/mcp", "/healthz")).status_code == 200
    finally:
        server.close()
        keys.shutdown()


async def test_an_opaque_token_is_asked_about_at_its_issuer(tmp_path, monkeypatch, issuers):
    """RFC 7662: an opaque token (oidc-provider's own format) is active, for this gateway, and
    maps to a profile only if the issuer says so; what it says is kept for a minute at most."""
    monkeypatch.setenv("SANDGATE_TEST_INTROSPECTION_SECRET", USERS["gateway"]["secret"])
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    other = "http://127.0.0.1:1/other"
    issuer = issuers(tmp_path, [resource, other], opaque=(resource, other))
    server = OneProcess(gateway_config(tmp_path, port, issuer.url, introspect=True), listen=f"127.0.0.1:{port}")
    try:
        alice = issuer.client_token("alice", resource)
        assert alice.count(".") == 0, "the issuer made an opaque token"
        assert initialize(server, alice).status_code == 200
        assert "not active" in refused_quickly(server, "made-up-" + "x" * 40)["error"]["message"]
        assert "another resource" in refused_quickly(server, issuer.client_token("alice", other))["error"]["message"]
        refused_quickly(server, issuer.client_token("mallory", resource), expect=(403,))
        revoked = issuer.client_token("bob", resource)
        issuer.revoke(revoked, "bob")
        assert "not active" in refused_quickly(server, revoked)["error"]["message"]
        # A flood of made-up tokens: each is asked about (at most 8 at once), none gets in, and
        # the gateway still answers.
        rss_before = server.rss_kib()
        async with httpx.AsyncClient(timeout=30) as client:
            async def one(i: int):
                return await client.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                         headers={"authorization": f"Bearer flood-{i}-{'y' * 30}"})
            started = time.monotonic()
            import anyio
            answers = []

            async def record(i: int):
                answers.append(await one(i))
            async with anyio.create_task_group() as group:
                for i in range(200):
                    group.start_soon(record, i)
        assert all(a.status_code == 401 for a in answers), {a.status_code for a in answers}
        assert time.monotonic() - started < 30
        assert server.rss_kib() - rss_before < 50 * 1024
        still_answers(server, issuer, resource)
    finally:
        server.close()


def test_a_hostile_introspection_endpoint_lets_no_token_in_and_breaks_nothing(tmp_path, monkeypatch, issuers):
    """Fault injection: the introspection endpoint answers what no issuer should (an exp at
    the end of time, `active` as a string, another audience, a huge or deep body, garbage, a
    stall). Each token is refused or admitted as the answer deserves, quickly, and the gateway
    keeps answering in bounded memory."""
    monkeypatch.setenv("SANDGATE_TEST_INTROSPECTION_SECRET", "s3cret")
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    now = int(time.time())
    good = {"active": True, "sub": "alice", "aud": resource, "exp": now + 300, "groups": ["eng"]}
    answers = {
        "end-of-time": (200, json.dumps({**good, "exp": 2**64 - 1, "nbf": 2**64 - 1}).encode(), 0),
        "active-string": (200, json.dumps({**good, "active": "true"}).encode(), 0),
        "other-audience": (200, json.dumps({**good, "aud": "http://127.0.0.1:1/other"}).encode(), 0),
        "no-exp": (200, json.dumps({k: v for k, v in good.items() if k != "exp"}).encode(), 0),
        "huge": (200, b'{"active": true, "pad": "' + b"a" * 2_000_000 + b'"}', 0),
        "deep": (200, b'{"active": true, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 0),
        "garbage": (200, b"\x00\xff<html>", 0),
        "error": (500, b"{}", 0),
        "stall": (200, json.dumps(good).encode(), 30),
        "good": (200, json.dumps(good).encode(), 0),
    }
    endpoint = KeyServer(lambda path: answers[path.rsplit("/", 1)[-1]])
    issuer = issuers(tmp_path, [resource])
    config = gateway_config(tmp_path, port, issuer.url, introspect=True,
                            introspection_endpoint=endpoint.url + "/introspect/CASE")
    servers = []
    try:
        rss_most = 0
        for case, expect in [("end-of-time", 401), ("active-string", 401), ("other-audience", 401),
                             ("no-exp", 401), ("huge", 401), ("deep", 401), ("garbage", 401),
                             ("error", 401), ("stall", 401), ("good", 200)]:
            config.write_text(config.read_text().replace("/introspect/" + (servers[-1][0] if servers else "CASE"),
                                                         "/introspect/" + case))
            server = OneProcess(config, listen=f"127.0.0.1:{port}")
            servers.append((case, server))
            started = time.monotonic()
            # The issuer is given 5 s (a stall is cut there): the client waits longer.
            answer = initialize(server, "opaque-" + case + "-" + "z" * 30, timeout=15)
            assert answer.status_code == expect, (case, answer.status_code, answer.text[:300])
            assert time.monotonic() - started < 8, case
            assert len(answer.content) < 4000, case
            rss_most = max(rss_most, server.rss_kib())
            assert httpx.get(server.url.replace("/mcp", "/healthz")).status_code == 200, case
            server.close()
        assert rss_most < 200 * 1024, rss_most
    finally:
        for _, server in servers:
            server.close()
        endpoint.shutdown()


async def test_each_user_has_the_profiles_rate_to_itself(tmp_path, issuers):
    """`limits.executions_per_minute` of a profile counts each user an identity provider
    proved on its own: one busy user does not slow another of the same profile."""
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    issuer = issuers(tmp_path, [resource])
    server = OneProcess(gateway_config(tmp_path, port, issuer.url, per_minute=2), listen=f"127.0.0.1:{port}")
    try:
        async def runs(user: str, n: int) -> list:
            async with Client(as_user(server, issuer, user), mode="2026-07-28") as client:
                return [await client.call_tool("call_tool_chain", {"code": "return 1"}) for _ in range(n)]
        alice = await runs("alice", 3)
        assert [r.is_error for r in alice] == [False, False, True], [r.content for r in alice]
        assert "each user of profile `builder`" in alice[2].content[0].text, alice[2].content
        bob = await runs("bob", 2)
        assert not any(r.is_error for r in bob), [r.content for r in bob]
    finally:
        server.close()


TOOL = """export const meta = {
  description: "Says who wrote it",
  input: { type: "object", properties: {} },
  capabilities: { tools: [], net: [], fs: [], env: [] },
};
export default async function () { return "WHO"; }
"""


async def test_a_stored_tool_a_user_registers_is_theirs_to_change(tmp_path, issuers):
    """A stored tool registered by a user an identity provider proved belongs to that user:
    another user of the same profile may call it (the profile's library), but neither update
    nor remove it; the owner may."""
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    issuer = issuers(tmp_path, [resource])
    server = OneProcess(gateway_config(tmp_path, port, issuer.url, register=True), listen=f"127.0.0.1:{port}")
    try:
        async def as_(user: str, tool: str, arguments: dict):
            async with Client(as_user(server, issuer, user), mode="2026-07-28") as client:
                return await client.call_tool(tool, arguments)

        made = await as_("alice", "register_tool", {"name": "signed", "code": TOOL.replace("WHO", "alice")})
        assert not made.is_error, made.content
        taken = await as_("bob", "register_tool", {"name": "signed", "code": TOOL.replace("WHO", "bob")})
        assert taken.is_error and "belongs to `builder@user:" in taken.content[0].text, taken.content
        removed = await as_("bob", "remove_tool", {"name": "signed"})
        assert removed.is_error and "belongs to" in removed.content[0].text, removed.content
        deadline = time.monotonic() + 10
        while True:
            ran = await as_("bob", "call_tool_chain", {"code": "return (await user.signed({})).data"})
            if not ran.is_error:
                break
            assert time.monotonic() < deadline, ran.content
            time.sleep(0.3)
        assert structured(ran)["result"] == "alice", "bob calls alice's tool, unchanged"
        again = await as_("alice", "register_tool", {"name": "signed", "code": TOOL.replace("WHO", "alice v2")})
        assert not again.is_error and "version 2" in again.content[0].text, again.content
        gone = await as_("alice", "remove_tool", {"name": "signed"})
        assert not gone.is_error, gone.content
    finally:
        server.close()
