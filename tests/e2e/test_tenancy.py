"""Tenancy that holds through reloads and approvals (issue 46), tried as an attacker would,
over HTTP against `sandgate serve`, with reloads in the middle:

- an unnamed static token removed from the config hands the token after it nothing: not its
  `state`, not its per-user credential, not its task (an identity is a token's name or digest,
  never its place in the list);
- a console login through an identity provider ends when a reload removes its issuer, or when
  the rules stop giving its user the same profile: the API refuses, the event stream closes;
- the agent that asked for an approval cannot answer it in the console with its own token,
  even as an admin; an approver of its profile can;
- the learned return shape of a backend that serves each user on their own connection shows no
  value one user's results held;
- other parties' error texts (an introspection 400, a token-exchange refusal, a backend's
  `WWW-Authenticate`) reach no log, audit line or result with the credential they quote;
- console cookies are `Secure` when the gateway is reached over https.

Each case checks how long it took, that the answer is small, and that the gateway still
answers."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import anyio
import httpx2 as httpx
import pytest
from mcp import Client

from conftest import FAKE_BACKEND, SANDGATE, OneProcess, free_port, structured
from issuer import USERS, as_user, issuers  # noqa: F401 - a fixture
from rawhttp import Conn, stateless_call
from test_user_credentials import KEY, credentials, whoami_http

pytestmark = pytest.mark.anyio

ASKS = {"elicitation": {"form": {}}}


def token_id(token: str) -> str:
    """The id an unnamed token goes by: `sha256:` and 16 hex digits of its digest."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:16]


def healthy(server) -> bool:
    return httpx.get(server.url.replace("/mcp", "/healthz"), timeout=5).status_code == 200


def reloads(server) -> int:
    return sum("config reloaded: HTTP tokens replaced" in line for line in server.log)


def reload_with(server, path: Path, text: str, within: float = 15):
    """Writes `text` as the served config and waits until the gateway has taken it."""
    before = reloads(server)
    path.write_text(text)
    deadline = time.monotonic() + within
    while reloads(server) <= before:
        assert time.monotonic() < deadline, "the reload was not taken:\n" + "".join(server.log[-20:])
        time.sleep(0.1)


def console(server) -> str:
    return server.url.removesuffix("/mcp") + "/ui"


def origin(server) -> str:
    return server.url.removesuffix("/mcp")


def console_login(server, token: str) -> str:
    """A console session for `token`, as any HTTP client gets one: its cookie header."""
    answer = httpx.post(console(server) + "/login", json={"token": token},
                        headers={"Origin": origin(server)}, timeout=10)
    assert answer.status_code == 200, answer.text
    return "sandgate_console=" + answer.cookies["sandgate_console"]


async def chain(server, token: str, code: str) -> dict:
    headers = {"Authorization": f"Bearer {token}"}
    async with Client(server.target(headers), mode="2026-07-28", read_timeout_seconds=30) as client:
        result = await client.call_tool("call_tool_chain", {"code": code})
        return {"error": result.is_error, "text": result.content[0].text if result.content else "",
                **(structured(result) if not result.is_error else {})}


def fake_server(name: str) -> str:
    """The fake backend (`ok` mode) as `[servers.NAME]`, for keys to follow."""
    return (f"[servers.{name}]\ncommand = {json.dumps(sys.executable)}\n"
            f"args = [{json.dumps(str(FAKE_BACKEND))}, \"ok\"]\n")


# --- 1. identities that never shift -------------------------------------------------------------

FIRST = "first-unnamed-token-" + "a" * 20
SECOND = "second-unnamed-token-" + "b" * 20


def unnamed_tokens_config(tmp_path: Path, tokens: list[str]) -> str:
    entries = "".join(f'\n[[http.tokens]]\ntoken = "{t}"\nprofile = "team"\n' for t in tokens)
    return f"""
{fake_server("vault")}user_secret = {{ env = "NOTES_TOKEN" }}

[credentials]
key = "${{SANDGATE_TEST_CREDENTIAL_KEY}}"

[profiles.team]
tools = ["*"]

[store]
path = "{tmp_path / 'store.db'}"
{entries}"""


async def test_a_removed_unnamed_token_hands_the_next_one_nothing(tmp_path, monkeypatch):
    """Two unnamed tokens of one profile. The first keeps `state`, a per-user credential and a
    running task; then its entry is deleted. The second, now first in the list, reads no state
    of the first's, is served with no credential of the first's, and finds no task of the
    first's; the first is refused. Before, the second became `tokens[0]` and took it all."""
    from test_tasks import CancelTask, Detailed, GetTask, MCPError, TaskIdParams, Tasks, start_task

    monkeypatch.setenv("SANDGATE_TEST_CREDENTIAL_KEY", KEY)
    path = tmp_path / "sandgate.toml"
    path.write_text(unnamed_tokens_config(tmp_path, [FIRST, SECOND]))
    listed = subprocess.run([SANDGATE, "status", "--config", str(path)], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "SANDGATE_TEST_CREDENTIAL_KEY": KEY})
    assert f"{token_id(FIRST)} → team" in listed.stdout, listed.stdout
    stale = credentials(path, "set", "vault", "--token", "tokens[0]", secret="nobody's")
    assert stale.returncode != 0 and "never by its position" in stale.stderr, stale.stderr
    kept = credentials(path, "set", "vault", "--token", token_id(FIRST), secret="first-secret-0123456789")
    assert kept.returncode == 0, kept.stderr
    server = OneProcess(path, token=FIRST)
    try:
        stored = await chain(server, FIRST, 'await state.set("k", "first\'s value"); return await vault.env({ name: "NOTES_TOKEN" });')
        assert json.loads(stored["result"]) == "first-secret-0123456789", stored
        firsts = Client(server.target({"Authorization": f"Bearer {FIRST}"}), mode="2026-07-28",
                        read_timeout_seconds=30, extensions=[Tasks()])
        async with firsts:
            task = await start_task(firsts, "while (true) { await new Promise((r) => setTimeout(r, 100)); }")

        reload_with(server, path, unnamed_tokens_config(tmp_path, [SECOND]))
        started = time.monotonic()
        assert httpx.post(server.url, json={}, headers={"Authorization": f"Bearer {FIRST}"}).status_code == 401
        seen = await chain(server, SECOND, 'return await state.get("k");')
        assert seen["result"] is None, f"the second token read the first's state: {seen}"
        served = await chain(server, SECOND, 'return await vault.env({ name: "NOTES_TOKEN" });')
        assert served["error"] and "first-secret" not in served["text"], served
        assert token_id(SECOND) in served["text"], served["text"]
        seconds = Client(server.target({"Authorization": f"Bearer {SECOND}"}), mode="2026-07-28",
                         read_timeout_seconds=30, extensions=[Tasks()])
        async with seconds:
            for request in (GetTask(params=TaskIdParams(task_id=task.task_id)),
                            CancelTask(params=TaskIdParams(task_id=task.task_id))):
                with pytest.raises(MCPError) as refused:
                    await seconds.session.send_request(request, Detailed)
                assert "no task" in str(refused.value), refused.value
        assert time.monotonic() - started < 20
        assert healthy(server)
    finally:
        server.close()


def test_a_token_name_that_could_pass_for_a_digest_is_refused_at_load(tmp_path):
    path = tmp_path / "sandgate.toml"
    path.write_text(f'[[http.tokens]]\ntoken = "{FIRST}"\nname = "{token_id(SECOND)}"\n')
    checked = subprocess.run([SANDGATE, "check", "--config", str(path)], capture_output=True, text=True, timeout=60)
    assert checked.returncode != 0 and "http.tokens[0].name" in checked.stderr, checked.stderr
    assert "does not begin with `sha256:`" in checked.stderr, checked.stderr


# --- 2. console logins re-checked against the live config ---------------------------------------

def oauth_console_config(tmp_path: Path, port: int, issuers_: list[str], console_issuer: str,
                         rule_profile: str = "builder") -> str:
    listed = "".join(f'\n[[auth.oauth.issuers]]\nissuer = "{url}"\n' for url in issuers_)
    return f"""
[profiles.builder]
tools = ["*"]

[profiles.viewer]
tools = []

[auth.oauth]
resource = "http://127.0.0.1:{port}/mcp"
console = {{ client_id = "console", scope = "openid sandgate", issuer = "{console_issuer}" }}
{listed}
[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "{rule_profile}"

[store]
path = "{tmp_path / 'store.db'}"
"""


def oidc_console_login(chromium, server, issuer, user: str) -> str:
    """Logs `user` into the console through `issuer`'s own pages; the session's cookie header."""
    from test_console import open_page

    page = open_page(chromium, server)
    page.goto(console(server))
    page.click("#oauth-login")
    page.wait_for_selector("input[name=login]")
    assert page.url.startswith(issuer.url), page.url
    page.fill("input[name=login]", user)
    page.fill("input[name=password]", "anything")
    page.click("button[type=submit]")
    page.wait_for_selector("button[type=submit]:has-text('Continue')")
    page.click("button[type=submit]:has-text('Continue')")
    page.wait_for_selector("#profile")
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    page.context.close()
    return "sandgate_console=" + cookies["sandgate_console"]


class EventStream:
    """`/ui/api/events` read on a thread until the gateway ends it."""

    def __init__(self, server, cookie: str):
        self.ended = threading.Event()
        self.opened = threading.Event()

        def read():
            try:
                with httpx.stream("GET", console(server) + "/api/events", headers={"cookie": cookie},
                                  timeout=httpx.Timeout(60, read=60)) as answer:
                    self.opened.set()
                    for _ in answer.iter_bytes():
                        pass
            except httpx.HTTPError:
                pass
            self.ended.set()

        threading.Thread(target=read, daemon=True).start()
        assert self.opened.wait(10), "the event stream did not open"


def console_answers(server, cookie: str) -> dict[str, int]:
    me = httpx.get(console(server) + "/api/me", headers={"cookie": cookie}, timeout=10)
    run = httpx.post(console(server) + "/api/run", json={"code": "return 1"},
                     headers={"cookie": cookie, "Origin": origin(server)}, timeout=30)
    return {"me": me.status_code, "run": run.status_code, "bytes": len(me.content) + len(run.content)}


def test_a_console_login_ends_when_its_issuer_or_its_rule_is_removed(tmp_path, issuers):
    """alice logs into the console through issuer A. A reload that keeps only issuer B ends her
    session: `/ui/api/me` and `/ui/api/run` answer 401, and her open event stream closes. She
    logs in again through B; a reload whose rule now gives her group another profile ends that
    session too (her fresh tokens would get another profile, so the console must not keep the
    old one)."""
    from test_console import browser

    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    callback = f"http://127.0.0.1:{port}/ui/oauth/callback"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = issuers(tmp_path / "a", [resource], console_redirect=callback)
    second = issuers(tmp_path / "b", [resource], console_redirect=callback)
    path = tmp_path / "sandgate.toml"
    path.write_text(oauth_console_config(tmp_path, port, [first.url, second.url], first.url))
    server = OneProcess(path, listen=f"127.0.0.1:{port}")
    try:
        with browser() as chromium:
            cookie = oidc_console_login(chromium, server, first, "alice")
            assert console_answers(server, cookie)["me"] == 200
            stream = EventStream(server, cookie)
            reload_with(server, path, oauth_console_config(tmp_path, port, [second.url], second.url))
            started = time.monotonic()
            answers = console_answers(server, cookie)
            assert (answers["me"], answers["run"]) == (401, 401), f"issuer A's login outlived A: {answers}"
            assert answers["bytes"] < 2000
            assert stream.ended.wait(5), "the event stream of A's login stayed open"
            assert time.monotonic() - started < 8

            cookie = oidc_console_login(chromium, server, second, "alice")
            assert console_answers(server, cookie) | {"bytes": 0} == {"me": 200, "run": 200, "bytes": 0}
            stream = EventStream(server, cookie)
            reload_with(server, path, oauth_console_config(tmp_path, port, [second.url], second.url,
                                                           rule_profile="viewer"))
            answers = console_answers(server, cookie)
            assert (answers["me"], answers["run"]) == (401, 401), f"the login kept a profile no rule gives: {answers}"
            assert stream.ended.wait(5), "the event stream stayed open"
        assert healthy(server)
    finally:
        server.close()


# --- 3. the one who says yes is not the one who asks --------------------------------------------

AGENT = "agent-token-" + "g" * 24
LEAD = "lead-token-" + "l" * 24
ROOT = "root-token-" + "r" * 24
GATED = "return await fake.echo({ text: 'shipped' });"


def approvals_config(tmp_path: Path) -> str:
    return f"""
{fake_server("fake")}
[profiles.agents]
tools = ["*"]
approve = ["fake.echo"]

[profiles.leads]
tools = ["fake.pid"]
approves = ["agents"]

[profiles.root]
tools = ["*"]
admin = true
approve = ["fake.echo"]

[[http.tokens]]
token = "{AGENT}"
profile = "agents"
name = "agent"

[[http.tokens]]
token = "{LEAD}"
profile = "leads"
name = "lead"

[[http.tokens]]
token = "{ROOT}"
profile = "root"
name = "root"

[audit]
path = "{tmp_path / 'audit.jsonl'}"
"""


def ask(conn: Conn, token: str) -> tuple[str, dict]:
    first = stateless_call(conn, token, "call_tool_chain", {"code": GATED}, capabilities=ASKS).message()["result"]
    assert first["resultType"] == "input_required", first
    (question, _), = first["inputRequests"].items()
    return question, first


def approvals_of(server, cookie: str) -> dict:
    answer = httpx.get(console(server) + "/api/approvals", headers={"cookie": cookie}, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


def approve(server, cookie: str, question: str) -> httpx.Response:
    return httpx.post(console(server) + "/api/approvals", params={"id": question}, json={"approve": True},
                      headers={"cookie": cookie, "Origin": origin(server)}, timeout=10)


def test_the_asking_token_cannot_approve_itself_in_the_console(tmp_path):
    """The agent's gated call waits. The agent logs into the console with its own token (any
    HTTP client can) and neither sees nor answers its question; an admin that asked cannot
    answer its own either. The lead, whose profile approves the agents', sees it (the page says
    whose it answers) and approves it, and the agent's retry collects the result."""
    path = tmp_path / "sandgate.toml"
    path.write_text(approvals_config(tmp_path))
    server = OneProcess(path, token=AGENT)
    try:
        conn = Conn(int(server.url.rsplit(":", 1)[1].split("/")[0]), timeout=60)
        question, first = ask(conn, AGENT)
        agent = console_login(server, AGENT)
        started = time.monotonic()
        listed = approvals_of(server, agent)
        assert question not in json.dumps(listed["approvals"]), "the agent sees its own question"
        assert "approves no one" in listed["you_answer"], listed
        refused = approve(server, agent, question)
        assert refused.status_code == 404 and len(refused.content) < 1000, refused.text

        root_question, root_first = ask(conn, ROOT)
        root = console_login(server, ROOT)
        assert root_question not in json.dumps(approvals_of(server, root)["approvals"])
        assert approve(server, root, root_question).status_code == 404, "an admin approved its own call"
        assert time.monotonic() - started < 10

        lead = console_login(server, LEAD)
        shown = approvals_of(server, lead)
        assert [q["id"] for q in shown["approvals"]] == [question], shown
        assert shown["approvals"][0]["asker"] == "token:agent", shown
        assert "agents" in shown["you_answer"], shown
        assert approve(server, lead, question).status_code == 200
        done = stateless_call(conn, AGENT, "call_tool_chain", {"code": GATED}, capabilities=ASKS,
                              requestState=first["requestState"]).message()["result"]
        assert done["structuredContent"]["result"] == "shipped", done
        # The admin's own question: another admin or approver answers it; the lead approves
        # only the agents' calls.
        assert approve(server, lead, root_question).status_code == 404
        lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
        approved = [line for line in lines if line["kind"] == "approval" and line["decision"] == "allow"]
        assert len(approved) == 1 and "console:leads:token:lead" in approved[0]["rule"], approved
        assert healthy(server)
    finally:
        server.close()


# --- 4. one user's values are not another's type hints ------------------------------------------

ADA = "ada-token-" + "a" * 26
BOB = "bob-token-" + "b" * 26


def per_user_config(tmp_path: Path, per_user: bool) -> Path:
    path = tmp_path / "sandgate.toml"
    path.write_text(f"""
{fake_server("crm")}per_user = {"true" if per_user else "false"}

[profiles.team]
tools = ["*"]

[[http.tokens]]
token = "{ADA}"
profile = "team"
name = "ada"

[[http.tokens]]
token = "{BOB}"
profile = "team"
name = "bob"

[store]
path = "{tmp_path / 'store.db'}"
""")
    return path


async def learned_hint(server) -> str:
    """What `tool_info` tells bob of `crm.echo`, once a shape has been learned."""
    headers = {"Authorization": f"Bearer {BOB}"}
    async with Client(server.target(headers), mode="2026-07-28") as client:
        deadline = time.monotonic() + 15
        while True:
            info = await client.call_tool("tool_info", {"name": "crm.echo"})
            text = info.content[0].text
            if "observed in" in text or time.monotonic() > deadline:
                return text
            await anyio.sleep(0.3)


@pytest.mark.parametrize("per_user", [True, False])
async def test_a_per_user_backends_learned_shape_shows_no_users_values(tmp_path, per_user):
    """ada's results from a backend she reaches on her own connection carry her customers'
    names; the shape bob is shown names the keys and no value of hers. A shared backend's
    shape keeps its small vocabulary as before (the control)."""
    server = OneProcess(per_user_config(tmp_path, per_user), token=ADA)
    try:
        code = """for (const name of ["ada", "alan", "ada", "alan", "ada"]) {
  await crm.echo({ text: JSON.stringify({ customer: name, tier: "gold" }) });
}
return "done";"""
        assert (await chain(server, ADA, code))["result"] == "done"
        hint = await learned_hint(server)
        assert "customer" in hint and "tier" in hint, hint
        words = [w for w in ('"ada"', '"alan"', '"gold"') if w in hint]
        if per_user:
            assert words == [], f"bob is shown ada's values: {hint}"
        else:
            # "gold" is one word only: no enum of one.
            assert words == ['"ada"', '"alan"'], hint
        assert healthy(server)
    finally:
        server.close()


# --- 5. other parties' words pass one redaction step --------------------------------------------

class Quoting(http.server.ThreadingHTTPServer):
    """What a careless party says. As a token or introspection endpoint (a form with `token` or
    `subject_token`), a 400 that quotes the token it was sent. As an MCP server, the whoami
    server behind it for the `service` credential, and for any other a 401 whose
    `WWW-Authenticate` quotes the credential it received."""

    def __init__(self, whoami: str, service: str):
        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self, status: int, body: bytes, headers: dict):
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                form = urllib.parse.parse_qs(body.decode(errors="replace"))
                credential = self.headers.get("authorization", "").removeprefix("Bearer ")
                if "token" in form or "subject_token" in form:
                    quoted = (form.get("subject_token") or form["token"])[0]
                    said = json.dumps({"error": "invalid_request",
                                       "error_description": f"{quoted} is not a token we issued"}).encode()
                    self.answer(400, said, {"content-type": "application/json"})
                elif credential == service:
                    kept = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                    upstream = httpx.request(self.command, whoami, content=body, headers=kept, timeout=30)
                    passed = {k: v for k, v in upstream.headers.items()
                              if k.lower() in ("content-type", "mcp-session-id", "mcp-protocol-version")}
                    self.answer(upstream.status_code, upstream.content, passed)
                else:
                    self.answer(401, b"{}", {
                        "content-type": "application/json",
                        "www-authenticate": f'Bearer error="invalid_token", error_description="{credential} was revoked"'})

            def do_GET(self):  # noqa: N802 - the stdlib's name
                self.answer(405, b"", {})

            do_DELETE = do_POST  # noqa: N815

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.daemon_threads = True
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def leaks(secret: str, *texts: str) -> list[str]:
    """Which of `texts` hold any 16 characters of `secret` in a row."""
    pieces = {secret[i:i + 16] for i in range(0, max(1, len(secret) - 15))}
    return [t[:200] for t in texts if any(p in t for p in pieces)]


async def test_credentials_quoted_by_an_issuer_or_a_backend_reach_no_log_audit_or_result(tmp_path, monkeypatch, issuers):
    """An introspection endpoint answers 400 quoting the caller's opaque token; a token-exchange
    endpoint answers 400 quoting the caller's access token; a backend answers 401 with a
    `WWW-Authenticate` that quotes the per-user secret, or the config's own header, it was sent.
    None of those credentials is in the gateway's log, the audit log, or what the model reads;
    each place shows the mask instead."""
    monkeypatch.setenv("SANDGATE_TEST_CREDENTIAL_KEY", KEY)
    monkeypatch.setenv("SANDGATE_TEST_CLIENT_SECRET", "client-secret-" + "c" * 20)
    service = "service-credential-" + "s" * 20
    backend_port = free_port()
    backend = whoami_http(backend_port, [service])
    quoting = Quoting(f"http://127.0.0.1:{backend_port}/mcp", service)
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    issuer = issuers(tmp_path, [resource])
    config_secret = "config-header-secret-" + "h" * 20
    user_secret = "ada-per-user-secret-" + "u" * 20
    path = tmp_path / "sandgate.toml"
    path.write_text(f"""
[servers.shared_api]
url = "{quoting.url}/mcp"
headers = {{ Authorization = "Bearer {config_secret}" }}

[servers.own_api]
url = "{quoting.url}/mcp"
headers = {{ Authorization = "Bearer {service}" }}
user_secret = {{ header = "Authorization", format = "Bearer {{secret}}" }}

[servers.exchanged_api]
url = "{quoting.url}/mcp"
headers = {{ Authorization = "Bearer {service}" }}
token_exchange = {{ audience = "{quoting.url}/mcp" }}

[credentials]
key = "${{SANDGATE_TEST_CREDENTIAL_KEY}}"

[profiles.builder]
tools = ["*"]

[[http.tokens]]
token = "{ADA}"
profile = "builder"
name = "ada"

[auth.oauth]
resource = "{resource}"

[[auth.oauth.issuers]]
issuer = "{issuer.url}"
introspection = {{ endpoint = "{quoting.url}/introspect", client_id = "gateway", client_secret = "${{SANDGATE_TEST_CLIENT_SECRET}}" }}
token_exchange = {{ endpoint = "{quoting.url}/token", client_id = "gateway", client_secret = "${{SANDGATE_TEST_CLIENT_SECRET}}" }}

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "builder"

[store]
path = "{tmp_path / 'store.db'}"

[audit]
path = "{tmp_path / 'audit.jsonl'}"
""")
    assert credentials(path, "set", "own_api", "--token", "ada", secret=user_secret).returncode == 0
    server = OneProcess(path, listen=f"127.0.0.1:{port}", token=ADA)
    try:
        started = time.monotonic()
        # The introspection endpoint quotes the opaque token it was asked about.
        opaque = "opaque-caller-token-" + "o" * 24
        refused = httpx.post(server.url, json={}, headers={"Authorization": f"Bearer {opaque}"}, timeout=15)
        assert refused.status_code == 401 and len(refused.content) < 4000
        # The token endpoint quotes the caller's access token.
        alice = issuer.client_token("alice", resource)
        async with Client(server.target({"Authorization": f"Bearer {alice}"}), mode="2026-07-28") as client:
            exchanged = await client.call_tool("call_tool_chain", {"code": "return await exchanged_api.whoami()"})
        exchanged_text = exchanged.content[0].text
        assert exchanged.is_error and "exchange" in exchanged_text, exchanged_text
        # The backend quotes the credentials it was sent: the user's own and the config's.
        own = await chain(server, ADA, "return await own_api.whoami()")
        shared = await chain(server, ADA, "return await shared_api.whoami()")
        assert own["error"] and shared["error"], (own, shared)
        assert time.monotonic() - started < 60
        time.sleep(1)  # the audit log's writer
        log = "".join(server.log)
        audit = (tmp_path / "audit.jsonl").read_text()
        model = exchanged_text + own["text"] + shared["text"] + refused.text
        for secret in (opaque, alice, user_secret, config_secret):
            assert leaks(secret, log, audit, model) == [], f"{secret[:12]}… leaked: {model}"
        assert "[redacted]" in audit, "the introspection refusal reached the audit log, masked"
        assert "[redacted]" in exchanged_text, "the exchange refusal reached the model, masked"
        assert "[redacted]" in log, "the backend's challenge reached the log, masked"
        assert healthy(server)
    finally:
        server.close()
        quoting.shutdown()
        backend.kill()


# --- 6. cookies -------------------------------------------------------------------------------

@pytest.mark.parametrize("https", [True, False])
def test_console_cookies_are_secure_when_the_gateway_is_reached_over_https(tmp_path, https):
    path = tmp_path / "sandgate.toml"
    path.write_text(f'[[http.tokens]]\ntoken = "{ADA}"\nname = "ada"\n\n[http]\nsecure_cookies = {str(https).lower()}\n')
    server = OneProcess(path, token=ADA)
    try:
        login = httpx.post(console(server) + "/login", json={"token": ADA}, headers={"Origin": origin(server)})
        assert login.status_code == 200
        cookie = login.headers["set-cookie"]
        assert ("; Secure" in cookie) == https, cookie
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        pending = httpx.get(console(server) + "/oauth/start")
        assert pending.status_code == 404  # no identity provider here; the flag is the same
    finally:
        server.close()
