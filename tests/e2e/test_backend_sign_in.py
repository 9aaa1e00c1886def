"""Users sign in to a backend that authorizes each user with OAuth (issue 51, second half): a
per-user HTTP backend with `oauth`, whose authorization server is the tests' real oidc-provider,
and which takes only tokens that server signed for it (tests/node/oauth_backend.mjs). sandgate
finds the server from the backend's own metadata (RFC 9728, then the server's), registers itself
as a client (RFC 7591), and signs the user in with the authorization code and PKCE, for exactly
this backend (RFC 8707). A headless Chromium presses Connect on the console's Credentials page
and goes through the server's own login and consent pages as a person would; no token is
pasted anywhere. The tokens are sealed in the store, the refresh token too, and a call then
carries the user's own access token."""

from __future__ import annotations

import json
import subprocess
import time

import anyio
import httpx2 as httpx
import pytest
from mcp import Client

from conftest import NODE_MODULES, OneProcess, free_port, one_process_only, structured, text_of
from issuer import Issuer
from test_console import browser, console_url, log_in, open_page

pytestmark = one_process_only("the sign-in's callback comes back to the console of one gateway here")

KEY = "c2FuZGdhdGUtdGVzdC1rZXktMzItYnl0ZXMtbG9uZyE="  # 32 bytes, base64
ALICE = "alice-token-" + "a" * 30
BOB = "bob-token-" + "b" * 32
BACKEND = NODE_MODULES.parent.parent / "oauth_backend.mjs"


class Notes:
    """The OAuth-protected backend on `port`, trusting `issuer`."""

    def __init__(self, port: int, issuer: str):
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(["node", str(BACKEND), str(port), issuer],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        if "listening" not in line:
            raise RuntimeError("the notes backend did not start: " + line + self.proc.stderr.read()[-2000:])

    def seen(self) -> dict:
        return httpx.get(self.url + "/test/seen", timeout=10).json()

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)


def notes_config(resource: str, callback: str, oauth_extra: str = "") -> str:
    """The config's `notes` backend, reached with each user's sign-in coming back to `callback`;
    the key that seals the tokens; the `builder` profile and alice's token."""
    return f"""
[servers.notes]
url = "{resource}"
oauth = {{ scope = "notes:read", redirect_uri = "{callback}"{oauth_extra} }}

[credentials]
key = "${{SANDGATE_TEST_CREDENTIAL_KEY}}"

[profiles.builder]
tools = ["*"]

[[http.tokens]]
token = "{ALICE}"
profile = "builder"
name = "alice"
"""


def make_world(tmp_path, monkeypatch, ttl: int = 300, refresh_ttl: int | None = None,
               client: str | None = None, approvals_timeout: str = "5m"):
    """oidc-provider (its access tokens living `ttl` seconds), the notes backend, and a gateway
    whose `notes` backend takes each user's sign-in; alice and bob hold static tokens of the
    `builder` profile."""
    monkeypatch.setenv("SANDGATE_TEST_CREDENTIAL_KEY", KEY)
    port, backend_port = free_port(), free_port()
    resource = f"http://127.0.0.1:{backend_port}/mcp"
    callback = f"http://127.0.0.1:{port}/ui/connect/callback"
    issuer = Issuer(tmp_path, resources=[],
                    upstream={"resource": resource, "scope": "notes:read notes:write", "ttl": ttl,
                              "refresh_ttl": refresh_ttl,
                              "client": {"id": client, "redirect": callback} if client else None})
    notes = Notes(backend_port, issuer.url)
    path = tmp_path / "sandgate.toml"
    oauth_extra = f', client_id = "{client}"' if client else ""
    path.write_text(notes_config(resource, callback, oauth_extra) + f"""
[approvals]
timeout = "{approvals_timeout}"

[[http.tokens]]
token = "{BOB}"
profile = "builder"
name = "bob"

[store]
path = "{tmp_path / 'store.db'}"

[audit]
path = "{tmp_path / 'audit.jsonl'}"
""")
    server = OneProcess(path, token=ALICE, listen=f"127.0.0.1:{port}")
    try:
        yield server, issuer, notes, tmp_path
    finally:
        server.close()
        notes.close()
        issuer.close()


@pytest.fixture
def world(tmp_path, monkeypatch):
    yield from make_world(tmp_path, monkeypatch)


@pytest.fixture
def short_lived(tmp_path, monkeypatch):
    yield from make_world(tmp_path, monkeypatch, ttl=20)


@pytest.fixture
def configured_client(tmp_path, monkeypatch):
    yield from make_world(tmp_path, monkeypatch, client="sandgate-static", approvals_timeout="3s")


@pytest.fixture
def refresh_lapses(tmp_path, monkeypatch):
    yield from make_world(tmp_path, monkeypatch, ttl=20, refresh_ttl=5)


def sign_in_through_the_console(chromium, server, issuer, token: str, user: str):
    """Logs in to the console with `token`, presses Connect beside `notes`, and signs in at the
    authorization server as `user` through its own login and consent pages."""
    page = open_page(chromium, server)
    log_in(page, server, token)
    page.goto(console_url(server) + "#/credentials")
    page.wait_for_selector('[data-connect="notes"]')
    page.click('[data-connect="notes"]')
    page.wait_for_selector("input[name=login]")
    assert page.url.startswith(issuer.url), page.url
    page.fill("input[name=login]", user)
    page.fill("input[name=password]", "anything")
    page.click("button[type=submit]")
    page.wait_for_selector("button[type=submit]:has-text('Continue')")
    page.click("button[type=submit]:has-text('Continue')")
    page.wait_for_selector('[data-state="notes"]:has-text("kept since")', timeout=15_000)
    assert page.url.startswith(console_url(server)), page.url
    page.context.close()


async def call(server, token: str, code: str):
    async with Client(server.target({"Authorization": f"Bearer {token}"}), mode="2026-07-28") as client:
        return await client.call_tool("call_tool_chain", {"code": code})


def test_a_user_signs_in_through_the_console_and_calls_carry_their_own_token(world):
    server, issuer, notes, tmp_path = world
    before = anyio.run(call, server, ALICE, "return await notes.whoami({})")
    assert before.is_error and "Connect beside `notes`" in text_of(before), text_of(before)
    assert notes.seen()["seen"] == 0, "no call went out without a token"
    with browser() as chromium:
        sign_in_through_the_console(chromium, server, issuer, ALICE, "alice")
    answer = anyio.run(call, server, ALICE, "return await notes.whoami({})")
    assert not answer.is_error, text_of(answer)
    who = json.loads(structured(answer)["result"]) if isinstance(structured(answer)["result"], str) else structured(answer)["result"]
    assert who["sub"] == "alice" and who["scope"] == "notes:read", who
    # Bob has not signed in: his call is his own, and fails with what to do.
    bobs = anyio.run(call, server, BOB, "return await notes.whoami({})")
    assert bobs.is_error and "Connect beside `notes`" in text_of(bobs), text_of(bobs)
    assert notes.seen()["last_subject"] == "alice"
    # The tokens are sealed: neither is in the store file, nor in the audit log.
    store = (tmp_path / "store.db").read_bytes()
    assert b"notes:read" not in store and b"refresh_token" not in store
    audit = (tmp_path / "audit.jsonl").read_text()
    assert "sign-in to notes" in audit and "signed in" in audit, audit[-2000:]


def test_no_token_is_pasted_and_a_stray_or_forged_callback_signs_nobody_in(world):
    server, issuer, notes, tmp_path = world
    from test_console import session_cookie
    pasted = httpx.put(console_url(server) + "/api/credentials", params={"backend": "notes"},
                       json={"secret": "a-token-someone-pasted"},
                       headers={"cookie": session_cookie(server, ALICE), "origin": server.url.removesuffix("/mcp")})
    assert pasted.status_code == 400 and "not a pasted token" in pasted.text, pasted.text
    started = time.monotonic()
    stray = httpx.get(console_url(server) + "/connect/callback", params={"code": "x", "state": "y"})
    assert stray.status_code == 400 and "started no sign-in" in stray.text, stray.text
    forged = httpx.get(console_url(server) + "/connect/callback", params={"code": "x", "state": "y"},
                       headers={"cookie": "sandgate_connect=" + "YWxpY2U." + "A" * 200})
    assert forged.status_code == 400 and "started no sign-in" in forged.text, forged.text
    assert time.monotonic() - started < 5
    unsigned = httpx.get(console_url(server) + "/connect/start", params={"backend": "notes"})
    assert unsigned.status_code in (401, 403), unsigned.status_code


class SigningInPerson:
    """The person behind the client: shown a sign-in link (URL-mode elicitation), they open it in
    a browser logged in to the console with their token, sign in at the authorization server as
    `user`, and say accept; or they decline. Keeps what they were asked."""

    def __init__(self, server, issuer, token: str, user: str, action: str = "accept"):
        self.server, self.issuer, self.token, self.user, self.action = server, issuer, token, user, action
        self.asked = []

    def open_and_sign_in(self, url: str):
        with browser() as chromium:
            page = open_page(chromium, self.server)
            log_in(page, self.server, self.token)
            page.goto(url)
            page.wait_for_selector("input[name=login]")
            page.fill("input[name=login]", self.user)
            page.fill("input[name=password]", "anything")
            page.click("button[type=submit]")
            page.wait_for_selector("button[type=submit]:has-text('Continue')")
            page.click("button[type=submit]:has-text('Continue')")
            page.wait_for_selector('[data-state="notes"]:has-text("kept since")', timeout=15_000)

    async def __call__(self, context, params):
        import mcp.types as types
        self.asked.append({"mode": getattr(params, "mode", "form"), "url": getattr(params, "url", None),
                           "message": params.message})
        if self.action == "accept" and getattr(params, "mode", None) == "url":
            await anyio.to_thread.run_sync(self.open_and_sign_in, params.url)
        return types.ElicitResult(action=self.action)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_script_waits_for_its_user_to_sign_in_and_finishes_with_the_backends_answer(world, mode):
    server, issuer, notes, tmp_path = world
    person = SigningInPerson(server, issuer, ALICE, "alice")
    code = """const started = Date.now();
const other = await Promise.resolve("the script's other work went on");
const me = await notes.whoami({});
return { me, other, waited_ms: Date.now() - started };"""

    async def run():
        headers = {"Authorization": f"Bearer {ALICE}"}
        async with Client(server.target(headers), mode=mode, read_timeout_seconds=120,
                          elicitation_callback=person) as client:
            return await client.call_tool("call_tool_chain", {"code": code, "timeout_ms": 120_000})

    result = anyio.run(run)
    assert not result.is_error, text_of(result)
    value = structured(result)["result"]
    me = json.loads(value["me"]) if isinstance(value["me"], str) else value["me"]
    assert me["sub"] == "alice", value
    assert len(person.asked) == 1 and person.asked[0]["mode"] == "url", person.asked
    asked = person.asked[0]
    assert asked["url"].endswith("/ui/connect/start?backend=notes") and "Sign in to backend `notes`" in asked["message"]
    assert notes.seen()["last_subject"] == "alice"
    audit = (tmp_path / "audit.jsonl").read_text()
    assert "signed in while the call waited" in audit, audit[-1500:]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_user_who_declines_or_cannot_be_asked_gets_sign_in_required_with_what_to_do(world, mode):
    server, issuer, notes, _ = world
    person = SigningInPerson(server, issuer, ALICE, "alice", action="decline")

    async def run(callback):
        headers = {"Authorization": f"Bearer {ALICE}"}
        options = {"elicitation_callback": callback} if callback else {}
        async with Client(server.target(headers), mode=mode, read_timeout_seconds=60, **options) as client:
            started = time.monotonic()
            answer = await client.call_tool("call_tool_chain", {"code": "return await notes.whoami({})"})
            return answer, time.monotonic() - started

    for callback in (person, None):
        answer, took = anyio.run(run, callback)
        text = text_of(answer)
        assert answer.is_error and "sign_in_required" in text and "Connect beside `notes`" in text, text
        assert took < 10, took
    assert "declined" in text_of(anyio.run(run, person)[0])
    assert notes.seen()["seen"] == 0, "no call went out"


def run_with(server, person, code: str, mode: str = "legacy"):
    async def run():
        headers = {"Authorization": f"Bearer {ALICE}"}
        async with Client(server.target(headers), mode=mode, read_timeout_seconds=120,
                          elicitation_callback=person) as client:
            return await client.call_tool("call_tool_chain", {"code": code, "timeout_ms": 120_000})

    return anyio.run(run)


def test_a_revoked_token_and_a_wider_scope_each_ask_for_a_new_sign_in_and_the_same_script_finishes(world):
    server, issuer, notes, tmp_path = world
    with browser() as chromium:
        sign_in_through_the_console(chromium, server, issuer, ALICE, "alice")
    first = run_with(server, SigningInPerson(server, issuer, ALICE, "alice"), "return await notes.whoami({})")
    assert not first.is_error, text_of(first)
    # The backend revokes every token it has seen: the call meets a 401, the person signs in
    # again, and the call goes out once more with the new token.
    httpx.post(notes.url + "/test/revoke", timeout=10)
    time.sleep(1.1)
    person = SigningInPerson(server, issuer, ALICE, "alice")
    again = run_with(server, person, "return await notes.whoami({})")
    assert not again.is_error, text_of(again)
    assert len(person.asked) == 1 and person.asked[0]["mode"] == "url", person.asked
    # Writing needs notes:write, which the sign-in did not ask for: a 403 insufficient_scope
    # asks for a sign-in with the wider scope, and the write then runs once.
    person = SigningInPerson(server, issuer, ALICE, "alice")
    wrote = run_with(server, person, 'return await notes.write_note({ text: "hello" })', mode="2026-07-28")
    assert not wrote.is_error, text_of(wrote)
    assert len(person.asked) == 1 and "scope=notes%3Aread%20notes%3Awrite" in person.asked[0]["url"], person.asked
    assert notes.seen()["notes"] == {"alice": ["hello"]}, notes.seen()
    audit = (tmp_path / "audit.jsonl").read_text()
    assert "refused the sign-in's token (401)" in audit and "wants a wider scope" in audit, audit[-2000:]


def test_a_backend_that_refuses_every_token_fails_the_call_after_one_new_sign_in(world):
    server, issuer, notes, _ = world
    with browser() as chromium:
        sign_in_through_the_console(chromium, server, issuer, ALICE, "alice")
    httpx.post(notes.url + "/test/refuse-all", timeout=10)
    person = SigningInPerson(server, issuer, ALICE, "alice")
    started = time.monotonic()
    answer = run_with(server, person, "return await notes.whoami({})")
    text = text_of(answer)
    assert answer.is_error and "sign_in_required" in text and "refused the authorization" in text, text
    assert len(person.asked) == 1, "one new sign-in, then the call fails: no loop"
    assert time.monotonic() - started < 60
    assert "eyJ" not in text, "no token in what the model reads"


def test_a_token_near_its_end_is_refreshed_once_for_many_calls_at_once(short_lived):
    """Tokens living 20 s are refreshed after 10 s. Five calls at once that all find the token
    due refresh it once between them: the server rotates refresh tokens, and one presented
    twice would revoke the whole grant."""
    server, issuer, notes, tmp_path = short_lived
    with browser() as chromium:
        sign_in_through_the_console(chromium, server, issuer, ALICE, "alice")
    first = anyio.run(call, server, ALICE, "return await notes.whoami({})")
    assert not first.is_error, text_of(first)
    assert notes.seen()["tokens"] == 1
    time.sleep(11)
    five = anyio.run(call, server, ALICE, "return await Promise.all([1, 2, 3, 4, 5].map(() => notes.whoami({})))")
    assert not five.is_error, text_of(five)
    assert notes.seen()["tokens"] == 2, f"one refresh for the five calls: {notes.seen()}"
    again = anyio.run(call, server, ALICE, "return await notes.whoami({})")
    assert not again.is_error and notes.seen()["tokens"] == 2, text_of(again)
    store = (tmp_path / "store.db").read_bytes()
    assert b"refresh_token" not in store, "the rotated refresh token is sealed too"


def test_a_task_waits_in_input_required_for_its_users_sign_in(world):
    """A script run as a task (io.modelcontextprotocol/tasks): its call's sign-in link comes
    through `tasks/get` as `input_required`, the person signs in, `tasks/update` says so, and the
    task completes with the backend's answer."""
    from test_tasks import Detailed, TaskUpdateParams, Tasks, UpdateTask, get, start_task

    server, issuer, notes, _ = world
    person = SigningInPerson(server, issuer, ALICE, "alice")

    async def never_called(context, params):
        raise AssertionError("a task's questions come through tasks/get")

    async def run():
        headers = {"Authorization": f"Bearer {ALICE}"}
        async with Client(server.target(headers), mode="2026-07-28", read_timeout_seconds=60,
                          extensions=[Tasks()], elicitation_callback=never_called) as client:
            task = await start_task(client, "return await notes.whoami({})")
            deadline = time.monotonic() + 20
            while (state := await get(client, task.task_id))["status"] == "working" and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            assert state["status"] == "input_required", state
            (key, asked), = state["inputRequests"].items()
            assert asked["params"]["mode"] == "url" and "/ui/connect/start?backend=notes" in asked["params"]["url"], asked
            await anyio.to_thread.run_sync(person.open_and_sign_in, asked["params"]["url"])
            await client.session.send_request(UpdateTask(params=TaskUpdateParams(
                task_id=task.task_id, input_responses={key: {"action": "accept"}})), Detailed)
            while (state := await get(client, task.task_id))["status"] in ("working", "input_required"):
                await anyio.sleep(0.1)
            return state

    state = anyio.run(run)
    assert state["status"] == "completed", state
    import mcp.types as types
    result = structured(types.CallToolResult.model_validate(state["result"]))["result"]
    me = json.loads(result) if isinstance(result, str) else result
    assert me["sub"] == "alice", me


def test_a_refused_refresh_asks_for_a_new_sign_in_and_the_script_finishes(refresh_lapses):
    """Refresh tokens here live 5 s, access tokens 20 s (refreshed after 10 s): by then the
    server refuses the refresh, sandgate forgets the tokens, and the waiting call sends the
    sign-in link; signed in again, the same script finishes."""
    server, issuer, notes, _ = refresh_lapses
    with browser() as chromium:
        sign_in_through_the_console(chromium, server, issuer, ALICE, "alice")
    first = anyio.run(call, server, ALICE, "return await notes.whoami({})")
    assert not first.is_error, text_of(first)
    time.sleep(11)
    person = SigningInPerson(server, issuer, ALICE, "alice")
    answer = run_with(server, person, "return await notes.whoami({})")
    assert not answer.is_error, text_of(answer)
    assert len(person.asked) == 1 and person.asked[0]["mode"] == "url", person.asked
    assert notes.seen()["tokens"] == 2, notes.seen()


def test_a_configured_client_signs_in_without_registering_and_no_sign_in_in_time_fails_the_call(configured_client):
    server, issuer, notes, _ = configured_client
    # Accepted (the link was opened), but nobody signs in: after [approvals] timeout (3 s here)
    # the call fails with sign_in_required, the link and what to do.
    started = time.monotonic()
    person = SigningInPerson(server, issuer, ALICE, "alice")
    person.open_and_sign_in = lambda url: None
    lapsed = run_with(server, person, "return await notes.whoami({})")
    text = text_of(lapsed)
    assert lapsed.is_error and "sign_in_required" in text and "nobody signed in within 3 s" in text, text
    assert "/ui/connect/start?backend=notes" in text and time.monotonic() - started < 15, text
    with browser() as chromium:
        sign_in_through_the_console(chromium, server, issuer, ALICE, "alice")
    answer = anyio.run(call, server, ALICE, "return await notes.whoami({})")
    assert not answer.is_error, text_of(answer)
    assert notes.seen()["last_client"] == "sandgate-static", notes.seen()
