"""Each user's own credentials for a backend (issue 29): two users an identity provider proved
(oidc-provider, as in test_identity.py) reach one backend, each with a secret of their own that
the operator keeps sealed in the store (`sandgate credentials set`). The backend is a real MCP
server (the Python SDK's, tests/fixtures/whoami_server.py) that refuses any request without a
token it knows, and tells whose credential reached it. Also: a user with none gets an error
that says how to add one, a refused credential is named as such, the secret shows up nowhere
(responses, logs, audit, the store file), the connections are counted in /metrics and closed
when idle, and a stdio backend runs one process per user with the user's secret in its
environment."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2 as httpx
import pytest
from mcp import Client

from conftest import SANDGATE, OneProcess, free_port, state_home, structured
from issuer import USERS, as_user, issuers, oauth_toml  # noqa: F401 - a fixture


WHOAMI = Path(__file__).resolve().parent.parent / "fixtures" / "whoami_server.py"
KEY = "c2FuZGdhdGUtdGVzdC1rZXktMzItYnl0ZXMtbG9uZyE="  # 32 bytes, base64
ADMIN_TOKEN = "admin-" + "m" * 40


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


def whoami_http(port: int, tokens: list[str], env: dict | None = None) -> subprocess.Popen:
    """The whoami server on `port`, accepting `tokens` (and what `env` adds: WHOAMI_ISSUER and
    WHOAMI_AUDIENCE for exchanged tokens), once it answers."""
    server = subprocess.Popen([sys.executable, str(WHOAMI), "http", str(port)],
                              env={**os.environ, "WHOAMI_TOKENS": ",".join(tokens), **(env or {})},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.post(f"http://127.0.0.1:{port}/mcp", json={}, timeout=1).status_code == 401:
                return server
        except httpx.TransportError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("the whoami server did not start")


def config(tmp: Path, port: int, issuer: str, backend_port: int, service_token: str) -> Path:
    path = tmp / "sandgate.toml"
    path.write_text(f"""
[servers.notes]
url = "http://127.0.0.1:{backend_port}/mcp"
headers = {{ Authorization = "Bearer {service_token}" }}
user_secret = {{ header = "Authorization", format = "Bearer {{secret}}" }}
user_idle_timeout = "2s"

[servers.local_notes]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(WHOAMI))}, "stdio"]
user_secret = {{ env = "NOTES_TOKEN" }}
max_users = 2

[credentials]
key = "${{SANDGATE_TEST_CREDENTIAL_KEY}}"

[profiles.builder]
tools = ["*"]

[profiles.ops]
tools = ["*"]
admin = true

[[http.tokens]]
token = "{ADMIN_TOKEN}"
profile = "ops"
{oauth_toml(port, issuer)}
[store]
path = "{tmp / 'store.db'}"

[audit]
path = "{tmp / 'audit.jsonl'}"
""")
    return path


def credentials(config: Path, *args: str, secret: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SANDGATE, "credentials", *args, "--config", str(config)], input=secret,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SANDGATE_TEST_CREDENTIAL_KEY": KEY,
                               "XDG_STATE_HOME": str(state_home(config))})


async def whoami(server, issuer, user: str, backend: str = "notes"):
    async with Client(as_user(server, issuer, user), mode="2026-07-28") as client:
        return await client.call_tool("call_tool_chain", {"code": f"return await {backend}.whoami()"})


def metrics(server) -> str:
    answer = httpx.get(server.url.replace("/mcp", "/metrics"), headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
    assert answer.status_code == 200, answer.text
    return answer.text


@pytest.mark.anyio
async def test_two_users_reach_one_backend_each_with_their_own_credential(tmp_path, monkeypatch, issuers):
    monkeypatch.setenv("SANDGATE_TEST_CREDENTIAL_KEY", KEY)
    port, backend_port = free_port(), free_port()
    secrets_of = {"alice": "tok-alice-" + "a" * 20, "bob": "tok-bob-" + "b" * 20}
    service = "tok-service-" + "s" * 20
    backend = whoami_http(backend_port, [service, *secrets_of.values()])
    issuer = issuers(tmp_path, [f"http://127.0.0.1:{port}/mcp"])
    path = config(tmp_path, port, issuer.url, backend_port, service)
    server = None
    try:
        for user, secret in secrets_of.items():
            kept = credentials(path, "set", "notes", "--user", issuer.url, user, secret=secret)
            assert kept.returncode == 0, kept.stderr
            assert secret not in kept.stdout + kept.stderr
        server = OneProcess(path, listen=f"127.0.0.1:{port}")
        rss_before = server.rss_kib()
        # Each user reaches the backend as themselves.
        seen = {}
        for user in ["alice", "bob", "alice"]:
            started = time.monotonic()
            result = await whoami(server, issuer, user)
            assert time.monotonic() - started < 20
            seen.setdefault(user, structured(result)["result"]["credential"])
        assert seen == {user: digest(secret) for user, secret in secrets_of.items()}, seen
        assert digest(service) not in seen.values(), "no call went with the config's own credential"
        assert 'sandgate_backend_user_connections{backend="notes"} 2' in metrics(server)
        # carol is in the group and has no credential: the error says how to add one.
        result = await whoami(server, issuer, "carol")
        assert result.is_error
        text = result.content[0].text
        assert "none is kept for you" in text and "sandgate credentials set notes --user-id" in text, text
        assert "/ui" in text, text
        # A credential set meanwhile with the CLI is seen within 5 s; one the backend refuses
        # is named as such, quickly, and changes nothing for anyone else.
        assert credentials(path, "set", "notes", "--user", issuer.url, "carol", secret="tok-wrong").returncode == 0
        deadline = time.monotonic() + 10
        while "none is kept" in (text := (await whoami(server, issuer, "carol")).content[0].text):
            assert time.monotonic() < deadline, text
            time.sleep(0.5)
        started = time.monotonic()
        result = await whoami(server, issuer, "carol")
        assert result.is_error and time.monotonic() - started < 10
        text = result.content[0].text
        assert "did not accept the connection made with your own credential" in text, text
        assert "set it again" in text, text
        assert "tok-wrong" not in text
        assert structured(await whoami(server, issuer, "bob"))["result"]["credential"] == digest(secrets_of["bob"])
        # Idle connections close (user_idle_timeout = 2 s), and a later call opens one again.
        deadline = time.monotonic() + 15
        while 'sandgate_backend_user_connections{backend="notes"} 0' not in metrics(server):
            assert time.monotonic() < deadline, metrics(server)
            time.sleep(0.5)
        assert structured(await whoami(server, issuer, "alice"))["result"]["credential"] == digest(secrets_of["alice"])
        assert server.rss_kib() - rss_before < 100 * 1024
        # The secrets show up nowhere but at the backend.
        server.close()
        for place in [tmp_path / "audit.jsonl", tmp_path / "store.db", tmp_path / "store.db-wal"]:
            if place.exists():
                data = place.read_bytes()
                for secret in secrets_of.values():
                    assert secret.encode() not in data, place
        for secret in secrets_of.values():
            assert not server.logged(secret), "a secret reached the gateway's log"
        # The CLI lists whose credentials exist, never the secrets; and removes them.
        listed = credentials(path, "list", "--user", issuer.url, "alice")
        assert listed.returncode == 0 and listed.stdout.startswith("notes\t"), listed
        assert secrets_of["alice"] not in listed.stdout
        assert credentials(path, "remove", "notes", "--user", issuer.url, "alice").returncode == 0
        assert credentials(path, "list", "--user", issuer.url, "alice").stdout == ""
    finally:
        if server:
            server.close()
        backend.kill()


@pytest.mark.anyio
async def test_a_stdio_backend_runs_one_process_per_user_with_that_users_secret(tmp_path, monkeypatch, issuers):
    monkeypatch.setenv("SANDGATE_TEST_CREDENTIAL_KEY", KEY)
    port, backend_port = free_port(), free_port()
    backend = whoami_http(backend_port, ["unused"])
    issuer = issuers(tmp_path, [f"http://127.0.0.1:{port}/mcp"])
    path = config(tmp_path, port, issuer.url, backend_port, "unused")
    secrets_of = {"alice": "env-alice-" + "a" * 20, "bob": "env-bob-" + "b" * 20, "carol": "env-carol-" + "c" * 20}
    server = None
    try:
        for user, secret in secrets_of.items():
            assert credentials(path, "set", "local_notes", "--user", issuer.url, user, secret=secret).returncode == 0
        server = OneProcess(path, listen=f"127.0.0.1:{port}")
        seen = {}
        for user in ["alice", "bob"]:
            seen[user] = structured(await whoami(server, issuer, user, "local_notes"))["result"]
        assert {u: s["credential"] for u, s in seen.items()} == {u: digest(secrets_of[u]) for u in seen}
        assert seen["alice"]["pid"] != seen["bob"]["pid"], "each user has a process of their own"
        assert 'sandgate_backend_user_connections{backend="local_notes"} 2' in metrics(server)
        # max_users = 2: a third user takes the place of the least recently used idle one.
        carol = structured(await whoami(server, issuer, "carol", "local_notes"))["result"]
        assert carol["credential"] == digest(secrets_of["carol"])
        assert carol["pid"] not in (seen["alice"]["pid"], seen["bob"]["pid"])
        assert 'sandgate_backend_user_connections{backend="local_notes"} 2' in metrics(server)
        time.sleep(1)
        for pid in (seen["alice"]["pid"],):
            assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower(), \
                "the evicted user's process ended"
    finally:
        if server:
            server.close()
        backend.kill()


def test_a_user_keeps_their_own_secret_in_the_console_and_never_sees_it_again(tmp_path, monkeypatch):
    """In Chromium: a token's user opens Credentials, saves a secret for the per-user backend,
    and its calls then reach the backend with it. The page, the API and another user's session
    never show it; a secret too large, a backend that takes none, and a write from another
    origin are refused."""
    from test_console import browser, console_url, log_in, open_page, session_cookie

    monkeypatch.setenv("SANDGATE_TEST_CREDENTIAL_KEY", KEY)
    backend_port = free_port()
    service, mine = "tok-service-" + "s" * 20, "tok-console-" + "k" * 20
    backend = whoami_http(backend_port, [service, mine])
    alpha, beta = "alpha-cred-token-" + "a" * 20, "beta-cred-token-" + "b" * 20
    path = tmp_path / "sandgate.toml"
    path.write_text(f"""
[servers.notes]
url = "http://127.0.0.1:{backend_port}/mcp"
headers = {{ Authorization = "Bearer {service}" }}
user_secret = {{ header = "Authorization", format = "Bearer {{secret}}" }}

[credentials]
key = "${{SANDGATE_TEST_CREDENTIAL_KEY}}"

[profiles.builder]
tools = ["*"]

[[http.tokens]]
token = "{alpha}"
profile = "builder"
name = "alpha-user"

[[http.tokens]]
token = "{beta}"
profile = "builder"
name = "beta-user"

[store]
path = "{tmp_path / 'store.db'}"
""")
    server = OneProcess(path)
    try:
        with browser() as chromium:
            page = open_page(chromium, server)
            log_in(page, server, alpha)
            page.goto(console_url(server) + "#/credentials")
            page.wait_for_selector('[data-state="notes"]')
            assert page.inner_text('[data-state="notes"]') == "none"
            page.fill('[data-secret="notes"]', mine)
            page.click('[data-save="notes"]')
            page.wait_for_selector('[data-state="notes"]:has-text("kept since")')
            assert mine not in page.content()
            assert page.input_value('[data-secret="notes"]') == ""
        async def whoami_as(token: str):
            headers = {"authorization": f"Bearer {token}"}
            async with Client(server.target(headers), mode="2026-07-28") as client:
                return await client.call_tool("call_tool_chain", {"code": "return await notes.whoami()"})

        result = anyio.run(whoami_as, alpha)
        assert structured(result)["result"]["credential"] == digest(mine)
        result = anyio.run(whoami_as, beta)
        assert result.is_error and "--token beta-user" in result.content[0].text, result.content
        # The API: beta's session sees none of alpha's; nothing ever carries the secret.
        origin = console_url(server).removesuffix("/ui")
        for token, expect in [(alpha, True), (beta, False)]:
            cookie = session_cookie(server, token)
            listed = httpx.get(console_url(server) + "/api/credentials", headers={"cookie": cookie})
            assert listed.status_code == 200 and mine not in listed.text
            assert listed.json()["backends"][0]["set"] is expect, listed.json()
        cookie = session_cookie(server, beta)
        put = lambda backend, body, headers: httpx.put(  # noqa: E731
            console_url(server) + f"/api/credentials?backend={backend}", json=body,
            headers={"cookie": cookie, **headers}, timeout=10)
        huge = put("notes", {"secret": "x" * 1_000_000}, {"origin": origin})
        assert huge.status_code in (400, 413) and len(huge.content) < 2000, huge.status_code
        assert put("nope", {"secret": "s"}, {"origin": origin}).status_code == 400
        assert put("notes", {"secret": "s"}, {"origin": "http://evil.example"}).status_code == 403
        assert put("notes", {"secret": ""}, {"origin": origin}).status_code == 400
        assert httpx.get(server.url.replace("/mcp", "/healthz")).status_code == 200
    finally:
        server.close()
        backend.kill()


@pytest.mark.anyio
async def test_each_user_reaches_a_backend_with_a_token_their_issuer_exchanged(tmp_path, monkeypatch, issuers):
    """RFC 8693: the gateway presents the caller's own token at the caller's issuer and gets one
    for the backend's audience; the backend (which checks the issuer's signature and its own
    audience) sees each user as themselves. The caller's token never reaches the backend, an
    exchanged token is kept until it expires (one exchange for many calls), and a caller with
    no access token of an issuer gets an error that says why."""
    monkeypatch.setenv("SANDGATE_TEST_EXCHANGE_SECRET", USERS["gateway"]["secret"])
    port, backend_port = free_port(), free_port()
    gateway_resource = f"http://127.0.0.1:{port}/mcp"
    backend_resource = f"http://127.0.0.1:{backend_port}/mcp"
    issuer = issuers(tmp_path, [gateway_resource, backend_resource], exchangers=("gateway",))
    service = "tok-service-" + "s" * 20
    backend = whoami_http(backend_port, [service], {"WHOAMI_ISSUER": issuer.url, "WHOAMI_AUDIENCE": backend_resource})
    path = tmp_path / "sandgate.toml"
    path.write_text(f"""
[servers.notes]
url = "{backend_resource}"
headers = {{ Authorization = "Bearer {service}" }}
token_exchange = {{ audience = "{backend_resource}" }}

[profiles.builder]
tools = ["*"]

[[http.tokens]]
token = "{ADMIN_TOKEN}"
profile = "builder"
name = "static-user"

[auth.oauth]
resource = "{gateway_resource}"

[[auth.oauth.issuers]]
issuer = "{issuer.url}"
token_exchange = {{ client_id = "gateway", client_secret = "${{SANDGATE_TEST_EXCHANGE_SECRET}}" }}

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "builder"
""")
    server = None
    try:
        server = OneProcess(path, listen=f"127.0.0.1:{port}")
        before = issuer.exchanges()
        alice_token = issuer.client_token("alice", gateway_resource)
        seen = {}
        for user in ["alice", "bob"]:
            async with Client(as_user(server, issuer, user), mode="2026-07-28") as client:
                for _ in range(3):
                    result = await client.call_tool("call_tool_chain", {"code": "return await notes.whoami()"})
                    seen.setdefault(user, []).append(structured(result)["result"])
        assert {s["subject"] for s in seen["alice"]} == {"alice"}, seen
        assert {s["subject"] for s in seen["bob"]} == {"bob"}, seen
        assert seen["alice"][0]["credential"] != seen["bob"][0]["credential"]
        assert digest(service) not in {s["credential"] for v in seen.values() for s in v}
        assert digest(alice_token) not in {s["credential"] for s in seen["alice"]}, "the caller's own token went upstream"
        # One exchange per user and token: the rest were kept.
        assert issuer.exchanges() - before == 2, issuer.exchanges() - before
        # A static token has no token of an issuer to exchange.
        headers = {"authorization": f"Bearer {ADMIN_TOKEN}"}
        async with Client(server.target(headers), mode="2026-07-28") as client:
            result = await client.call_tool("call_tool_chain", {"code": "return await notes.whoami()"})
            assert result.is_error and "no access token of an [auth.oauth] issuer" in result.content[0].text, result.content
        assert httpx.get(server.url.replace("/mcp", "/healthz")).status_code == 200
    finally:
        if server:
            server.close()
        backend.kill()


def test_the_console_logs_in_through_the_identity_provider_and_shows_each_user_their_own(tmp_path, issuers):
    """In Chromium: the console's login page sends the browser to oidc-provider (authorization
    code with PKCE), alice signs in and consents, and comes back logged in as herself, with
    the profile her claims give. Her executions are hers: bob's (same profile, run over MCP)
    are neither listed nor readable by id. A callback with a state this browser never made,
    or a code from nowhere, is refused with the reason."""
    from test_console import browser, console_url, open_page

    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    issuer = issuers(tmp_path, [resource], console_redirect=f"http://127.0.0.1:{port}/ui/oauth/callback")
    path = tmp_path / "sandgate.toml"
    path.write_text(f"""
[profiles.builder]
tools = ["*"]

[auth.oauth]
resource = "{resource}"
console = {{ client_id = "console", scope = "openid sandgate" }}

[[auth.oauth.issuers]]
issuer = "{issuer.url}"

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "builder"

[store]
path = "{tmp_path / 'store.db'}"

[audit]
path = "{tmp_path / 'audit.jsonl'}"
""")
    server = OneProcess(path, listen=f"127.0.0.1:{port}")
    try:
        async def run_as(user: str, code: str):
            async with Client(as_user(server, issuer, user), mode="2026-07-28") as client:
                return await client.call_tool("call_tool_chain", {"code": code})

        bobs = structured(anyio.run(run_as, "bob", "return 'bob was here'"))["execution_id"]
        alices = structured(anyio.run(run_as, "alice", "return 'alice was here'"))["execution_id"]
        with browser() as chromium:
            page = open_page(chromium, server)
            page.goto(console_url(server))
            page.click("#oauth-login")
            # oidc-provider's own login and consent pages.
            page.wait_for_selector("input[name=login]")
            assert page.url.startswith(issuer.url), page.url
            page.fill("input[name=login]", "alice")
            page.fill("input[name=password]", "anything")
            page.click("button[type=submit]")
            page.wait_for_selector("button[type=submit]:has-text('Continue')")
            page.click("button[type=submit]:has-text('Continue')")
            page.wait_for_selector("#profile")
            assert page.url.startswith(console_url(server)), page.url
            assert page.inner_text("#profile") == "builder"
            assert "user " in page.inner_text("#user")
            page.goto(console_url(server) + "#/executions")
            page.wait_for_selector(f"[data-execution=\"{alices}\"]", timeout=10_000)
            assert bobs not in page.content(), "bob's execution is not alice's to see"
            cookies = {c["name"]: c["value"] for c in page.context.cookies()}
            session = f"sandgate_console={cookies['sandgate_console']}"
            api = console_url(server) + "/api/execution"
            assert httpx.get(api, params={"id": alices}, headers={"cookie": session}).status_code == 200
            theirs = httpx.get(api, params={"id": bobs}, headers={"cookie": session})
            assert theirs.status_code == 404 and "bob was here" not in theirs.text
        # A callback this browser did not start, and one with a made-up state, are refused.
        stray = httpx.get(console_url(server) + "/oauth/callback", params={"code": "x", "state": "y"})
        assert stray.status_code == 400 and "started no login" in stray.text, stray.text
        started = httpx.get(console_url(server) + "/oauth/start")
        assert started.status_code == 302 and started.headers["location"].startswith(issuer.url)
        assert "code_challenge_method=S256" in started.headers["location"]
        pending = started.headers["set-cookie"].split(";")[0]
        forged = httpx.get(console_url(server) + "/oauth/callback", params={"code": "x", "state": "forged"},
                           headers={"cookie": pending})
        assert forged.status_code == 400 and "does not match" in forged.text, forged.text
        state = pending.split("=", 1)[1].split(".")[0]
        made_up = httpx.get(console_url(server) + "/oauth/callback", params={"code": "made-up", "state": state},
                            headers={"cookie": pending}, timeout=15)
        assert made_up.status_code == 401 and "could not be redeemed" in made_up.text, made_up.text
        assert httpx.get(server.url.replace("/mcp", "/healthz")).status_code == 200
    finally:
        server.close()
