"""Grants under attack (issue 26): every route around a grant that an attack round found open,
tried again the way the attacker did, over HTTP against `sandgate serve --http` with the real npm
servers, canaries everywhere (a secret file outside the roots, a backend's secret variable, a
loopback site that counts its hits).

Each case checks what containment means for it: the refusal (and that the canary was not
reached), the time it took, the size of the response, the gateway's RSS, and that the gateway
still answers afterwards. The DNS case runs in a private network namespace with its own
resolver (`grants_dns.py`), so no query can leave the machine and every query is seen.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from mcp import Client

from conftest import HttpServer, Site, reference_servers, text_of, toml_value
from hostile import rss_kib

pytestmark = pytest.mark.anyio

BUILDER_TOKEN = "builder-token-" + "b" * 40
READER_TOKEN = "reader-token-" + "r" * 40
OPS_TOKEN = "ops-token-" + "o" * 40
ROTATING_TOKEN = "rotating-token-" + "1" * 40
BACKEND_SECRET = "backend-secret-value-7f3a"

# Every case: at most this long, this large an answer, and the gateway within this much RSS.
MAX_SECONDS = 10
MAX_RESPONSE = 20_000 + 12 * 1024
MAX_RSS_MIB = 250


@dataclass
class World:
    server: HttpServer
    config: Path
    audit: Path
    owner: Path
    outside: Path
    site: Site
    tokens: dict = field(default_factory=dict)

    def client(self, profile: str, token: str | None = None) -> Client:
        headers = {"Authorization": f"Bearer {token or self.tokens[profile]}"}
        return Client(self.server.target(headers), mode="legacy", read_timeout_seconds=60)

    @property
    def base(self) -> str:
        return self.server.url.removesuffix("/mcp")

    def rss_mib(self) -> float:
        return self.server.rss_kib() / 1024

    def audit_lines(self) -> list[dict]:
        if not self.audit.exists():
            return []
        return [json.loads(line) for line in self.audit.read_text().splitlines() if line.strip()]


def profiles(w_owner: Path, site: int, rotating: str) -> str:
    return f"""
[profiles.default]
tools = ["everything.echo"]

[profiles.builder]
tools = ["everything.echo", "user.*"]
register_tools = true
net = ["127.0.0.1:{site}"]
fs = [{{ path = "{w_owner}", write = true }}, {{ path = "{w_owner / 'ro'}", write = false }}]

[profiles.reader]
tools = ["everything.echo", "everything.get-sum"]

[profiles.ops]
tools = ["everything.*", "user.*"]
deny_tools = ["everything.get_env"]
register_tools = true

[[http.tokens]]
token = "${{GRANTS_BUILDER_TOKEN}}"
profile = "builder"
name = "builder"

[[http.tokens]]
token = "${{GRANTS_READER_TOKEN}}"
profile = "reader"
name = "reader"

[[http.tokens]]
token = "${{GRANTS_OPS_TOKEN}}"
profile = "ops"
name = "ops"

[[http.tokens]]
token = "{rotating}"
profile = "reader"
name = "rotating"
"""


def build(tmp_path: Path) -> World:
    site = Site()
    owner = tmp_path / "owner"
    (owner / "ro").mkdir(parents=True)
    (owner / "ro" / "kept.txt").write_text("kept\n")
    (owner / "later").mkdir()
    (owner / "notes.txt").write_text("notes\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret outside every root\n")
    (owner / "link-out").symlink_to(outside)
    (owner / "link-slash").symlink_to("/")
    (owner / "link-proc").symlink_to("/proc/self/root")
    (owner / "to-ro").symlink_to("ro")
    (owner / "to-kept").symlink_to("ro/kept.txt")
    os.mkfifo(owner / "fifo")
    audit = tmp_path / "audit.jsonl"
    servers = reference_servers(tmp_path)
    servers["everything"]["env"] = {"GRANTS_BACKEND_SECRET": BACKEND_SECRET}
    lines = [f'[store]\npath = "{tmp_path / "store.db"}"', f'[gateway]\ncache_file = "{tmp_path / "tools.json"}"']
    for name, entry in servers.items():
        lines.append(f"[servers.{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in entry.items()]
    lines.append(profiles(owner, site.port, ROTATING_TOKEN))
    lines.append(f'[audit]\npath = "{audit}"')
    config = tmp_path / "sandgate.toml"
    config.write_text("\n".join(lines))
    os.environ.update({"GRANTS_BUILDER_TOKEN": BUILDER_TOKEN, "GRANTS_READER_TOKEN": READER_TOKEN,
                       "GRANTS_OPS_TOKEN": OPS_TOKEN})
    server = HttpServer(config, token=BUILDER_TOKEN)
    return World(server, config, audit, owner, outside, site, tokens={
        "builder": BUILDER_TOKEN, "reader": READER_TOKEN, "ops": OPS_TOKEN})


@pytest.fixture
def world(tmp_path):
    w = build(tmp_path)
    try:
        yield w
    finally:
        w.server.close()
        w.site.close()


async def chain(client, code, **extra):
    result = await client.call_tool("call_tool_chain", {"code": code, **extra})
    return result, result.structured_content or {}


@contextlib.asynccontextmanager
async def contained(w: World, what: str):
    """Times the block, and afterwards checks the gateway's RSS and that it still answers."""
    started = time.monotonic()
    yield
    took = time.monotonic() - started
    assert took < MAX_SECONDS, f"{what}: took {took:.1f} s"
    assert w.rss_mib() < MAX_RSS_MIB, f"{what}: the gateway holds {w.rss_mib():.0f} MiB"
    async with w.client("reader") as client:
        _, data = await chain(client, 'return await everything.echo({message: "still here"})')
        assert data.get("result") == "Echo: still here", f"{what}: the gateway stopped answering: {data}"


def small(result) -> str:
    text = text_of(result)
    assert len(text) < MAX_RESPONSE, f"a response of {len(text)} characters"
    return text


def tool_file(roots: list[tuple[str, bool]], body: str) -> str:
    fs = ", ".join(f'{{ path: {json.dumps(p)}, write: {"true" if w else "false"} }}' for p, w in roots)
    return (f"export const meta = {{ description: 'reads and writes its roots', input: {{ type: 'object' }},"
            f" capabilities: {{ fs: [{fs}] }} }};\n"
            f"export default async function (input: any, ctx: any) {{ {body} }}\n")


async def test_a_stored_tool_root_cannot_be_a_link_out_of_its_owners_root(world):
    """Item 1: a declared root that is a symbolic link (to a directory outside, to `/`, to
    `/proc/self/root`) is refused at registration, and a root swapped for such a link after
    registration leads nowhere at call time."""
    w = world
    async with w.client("builder") as client:
        for link in ["link-out", "link-slash", "link-proc"]:
            async with contained(w, link):
                root = str(w.owner / link)
                code = tool_file([(root, True)], f'return await ctx.fs.readFile({json.dumps(root + "/secret.txt")});')
                result = await client.call_tool("register_tool", {"name": f"peek_{link.replace('-', '_')}", "code": code})
                text = small(result)
                assert result.is_error, f"{link}: registered: {text}"
                assert "leads out of the root" in text, f"{link}: {text}"
        # Registered while `later` is a plain directory, then swapped for a link out.
        later = str(w.owner / "later")
        code = tool_file([(later, True)], f"""
            const read = await ctx.fs.readFile({json.dumps(later + "/secret.txt")}).catch((e: any) => "refused: " + e.message);
            const wrote = await ctx.fs.writeFile({json.dumps(later + "/planted.txt")}, "x").catch((e: any) => "refused: " + e.message);
            return {{ read, wrote }};""")
        done = await client.call_tool("register_tool", {"name": "peek_later", "code": code})
        assert not done.is_error, text_of(done)
        (w.owner / "later").rmdir()
        (w.owner / "later").symlink_to(w.outside)
        async with contained(w, "a root swapped after registration"):
            result, data = await chain(client, "return await user.peek_later({})")
            text = small(result)
            assert "s3cret" not in text, text
            got = (data.get("result") or {}).get("data") or {}
            assert str(got.get("read", "")).startswith("refused") and "leads out of the root" in got["read"], text
            assert str(got.get("wrote", "")).startswith("refused"), text
        assert not (w.outside / "planted.txt").exists()
        assert (w.outside / "secret.txt").read_text() == "s3cret outside every root\n"


async def test_a_read_only_root_nested_in_a_writable_one_stays_read_only(world):
    """Item 3: a link in the writable root that leads into the read-only one nested in it does
    not make it writable (an existing file, a new file); registration refuses a write root that
    resolves there."""
    w = world
    async with w.client("builder") as client:
        for path in ["to-kept", "to-ro/kept.txt", "to-ro/new.txt"]:
            async with contained(w, path):
                result, data = await chain(client, f'return await fs.writeFile({json.dumps(path)}, "overwritten")')
                text = small(result)
                assert result.is_error, f"{path}: written: {text}"
                assert data["error"]["kind"] == "tool_denied", text
                assert "read-only root" in data["error"]["message"], text
        assert (w.owner / "ro" / "kept.txt").read_text() == "kept\n"
        assert not (w.owner / "ro" / "new.txt").exists()
        # What the grant allows still works, through a link that stays writable.
        (w.owner / "to-notes").symlink_to("notes.txt")
        result, data = await chain(client, 'await fs.writeFile("to-notes", "new notes"); await fs.writeFile("made.txt", "m"); return 1')
        assert not result.is_error, text_of(result)
        assert (w.owner / "notes.txt").read_text() == "new notes"
        assert (w.owner / "made.txt").read_text() == "m"
        code = tool_file([(str(w.owner / "to-ro"), True)], "return 1;")
        refused = await client.call_tool("register_tool", {"name": "writes_ro", "code": code})
        assert refused.is_error and "read-only root" in text_of(refused), text_of(refused)


async def test_a_fifo_in_a_root_takes_no_thread(world):
    """Item 7: 600 reads of a FIFO, all at once, each refused at once without blocking in
    open(2); file reads of every profile go on."""
    w = world
    async with w.client("builder") as client:
        async with contained(w, "600 FIFO reads"):
            code = """
                const tries = await Promise.all(Array.from({length: 60}, () =>
                    fs.readFile("fifo").then(() => "read", (e: any) => e.message)));
                return [...new Set(tries)];"""
            async with anyio.create_task_group() as group:
                answers = []

                async def one():
                    result, data = await chain(client, code, timeout_ms=5000)
                    answers.append((result, data))

                for _ in range(10):
                    group.start_soon(one)
            for result, data in answers:
                text = small(result)
                assert not result.is_error, text
                assert len(data["result"]) == 1 and "only regular files" in data["result"][0], text
            result, data = await chain(client, 'return await fs.readFile("notes.txt")', timeout_ms=3000)
            assert not result.is_error and data["result"] == "notes\n", text_of(result)
            result, _ = await chain(client, 'return await fs.writeFile("fifo", "x")', timeout_ms=3000)
            assert result.is_error and "only regular files" in text_of(result), text_of(result)


@dataclass
class Answer:
    status_code: int
    headers: dict
    text: str


def send(w: World, method: str, path: str, headers: dict, body: dict | None = None) -> Answer:
    """One request with exactly these headers (`Host` included), on a connection of its own."""
    url = urllib.parse.urlparse(w.base)
    headers = {"Host": url.netloc, **headers}
    if body is not None:
        headers.setdefault("Content-Type", "application/json")
        headers.setdefault("Accept", "application/json, text/event-stream")
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = conn.getresponse()
        # The console's event stream never ends: only its first bytes are read.
        text = (response.read(64) if path.startswith("/ui/api/events") else response.read()).decode(errors="replace")
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, text)
    finally:
        conn.close()


def raw(w: World, method: str, path: str, host: str | None = None, origin: str | None = None,
        token: str | None = None, body: dict | None = None, cookie: str | None = None) -> Answer:
    headers = {}
    if host:
        headers["Host"] = host
    if origin:
        headers["Origin"] = origin
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if cookie:
        headers["Cookie"] = cookie
    return send(w, method, path, headers, body)


async def test_every_route_passes_the_host_check_even_without_auth(tmp_path):
    """Item 2: with `auth = "none"`, a DNS-rebinding page (an attacker's name in Host, and a
    matching Origin) gets 403 from the console as from /mcp; so does another site's Origin."""
    site = Site()
    servers = reference_servers(tmp_path)
    lines = [f'[store]\npath = "{tmp_path / "store.db"}"', f'[gateway]\ncache_file = "{tmp_path / "tools.json"}"',
             '[http]\nauth = "none"']
    for name, entry in servers.items():
        lines.append(f"[servers.{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in entry.items()]
    config = tmp_path / "sandgate.toml"
    config.write_text("\n".join(lines))
    server = HttpServer(config)
    w = World(server, config, tmp_path / "none", tmp_path, tmp_path, site)
    try:
        port = urllib.parse.urlparse(w.base).port
        evil_host = f"rebind.attacker.example:{port}"
        evil_origin = f"http://{evil_host}"
        run = {"code": 'return await everything.echo({message: "rebound"})'}
        for method, path, body in [("POST", "/ui/api/run", run), ("GET", "/ui/api/executions", None),
                                   ("GET", "/ui/api/tools", None), ("GET", "/ui/", None),
                                   ("GET", "/ui/api/events", None), ("GET", "/metrics", None),
                                   ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})]:
            started = time.monotonic()
            for host, origin in [(evil_host, evil_origin), (None, "http://attacker.example"), (None, "null")]:
                answer = raw(w, method, path, host=host, origin=origin, body=body)
                assert answer.status_code == 403, (method, path, host, origin, answer.status_code, answer.text[:200])
                assert len(answer.text) < 1000
            assert time.monotonic() - started < 5
        # The gateway's own page still works.
        own = raw(w, "POST", "/ui/api/run", origin=w.base, body=run)
        assert own.status_code == 200 and "rebound" in own.text, (own.status_code, own.text[:300])
        assert raw(w, "GET", "/ui/api/executions").status_code == 200
        assert raw(w, "GET", "/healthz", host=evil_host).status_code == 200, "the probes say only ok"
    finally:
        server.close()
        site.close()


async def test_a_session_is_bound_to_the_token_that_opened_it(world):
    """Item 5: another profile's valid token with a session id gets what an unknown session
    gets (404), for POST, GET and DELETE; the session's own token goes on."""
    w = world
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
    opened = raw(w, "POST", "/mcp", token=READER_TOKEN, body=init)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]

    def with_session(method, token, body=None):
        headers = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session,
                   "Mcp-Protocol-Version": "2025-11-25", "Accept": "application/json, text/event-stream"}
        return send(w, method, "/mcp", headers, body)

    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert with_session("POST", READER_TOKEN, {"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
    for token in [BUILDER_TOKEN, OPS_TOKEN]:
        for method, body in [("POST", listing), ("GET", None), ("DELETE", None)]:
            answer = with_session(method, token, body)
            assert answer.status_code == 404, (token[:6], method, answer.status_code, answer.text[:200])
            assert "no open session" in answer.text
    own = with_session("POST", READER_TOKEN, listing)
    assert own.status_code == 200 and "call_tool_chain" in own.text, own.text[:300]


async def test_a_rotated_token_ends_its_console_and_mcp_sessions(world):
    """Item 6: the value of a named token is rotated in the config; the console session and
    the MCP session the old value opened end with it (the name stays the same)."""
    w = world
    login = raw(w, "POST", "/ui/login", origin=w.base, body={"token": ROTATING_TOKEN})
    assert login.status_code == 200, login.text
    cookie = login.headers["set-cookie"].split(";")[0]
    assert raw(w, "GET", "/ui/api/me", cookie=cookie).status_code == 200
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
    opened = raw(w, "POST", "/mcp", token=ROTATING_TOKEN, body=init)
    session = opened.headers["mcp-session-id"]
    # A live event stream the session opened: it must end with the token too.
    url = urllib.parse.urlparse(w.base)
    stream = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    stream.request("GET", "/ui/api/events", headers={"Cookie": cookie})
    events = stream.getresponse()
    assert events.status == 200
    rotated = "rotating-token-" + "2" * 40
    w.config.write_text(w.config.read_text().replace(ROTATING_TOKEN, rotated))
    deadline = time.monotonic() + 15
    while not w.server.logged("HTTP tokens replaced"):
        assert time.monotonic() < deadline, "the config was not reloaded"
        await anyio.sleep(0.2)
    assert raw(w, "GET", "/ui/api/me", cookie=cookie).status_code == 401, "the console session outlived its token"
    ended = time.monotonic()
    while events.read1(65536):
        assert time.monotonic() - ended < 5, "the event stream outlived its token"
    stream.close()
    headers = {"Authorization": f"Bearer {rotated}", "Mcp-Session-Id": session,
               "Mcp-Protocol-Version": "2025-11-25"}
    answer = send(w, "POST", "/mcp", headers, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert answer.status_code == 404, (answer.status_code, answer.text[:200])
    assert raw(w, "POST", "/mcp", token=ROTATING_TOKEN, body=init).status_code == 401


async def test_deny_tools_written_as_the_model_calls_the_tool_denies_it(world):
    """Item 8: `deny_tools = ["everything.get_env"]` denies `everything.get-env` by every route,
    and a stored tool may not declare it under either spelling."""
    w = world
    async with w.client("ops") as client:
        for code in ["return await everything.get_env({})", 'return await everything["get-env"]({})',
                     '{"tool": "everything.get-env", "arguments": {}}', '{"tool": "everything.get_env", "arguments": {}}',
                     "return await everything.get_env.raw({})"]:
            async with contained(w, code):
                result, data = await chain(client, code)
                text = small(result)
                assert result.is_error, f"{code}: {text}"
                assert BACKEND_SECRET not in text, code
        info = await client.call_tool("tool_info", {"name": "everything.get_env"})
        assert info.is_error and BACKEND_SECRET not in text_of(info)
        found = await client.call_tool("search_tools", {"query": "environment variables"})
        assert "get_env" not in text_of(found) and "get-env" not in text_of(found), text_of(found)
        for declared in ["everything.get_env", "everything.get-env"]:
            code = ("export const meta = { description: 'env', input: { type: 'object' }, "
                    f"capabilities: {{ tools: [{json.dumps(declared)}] }} }};\n"
                    "export default async function (i: any, ctx: any) { return ctx.tools.everything.get_env({}); }\n")
            refused = await client.call_tool("register_tool", {"name": "leak_env", "code": code})
            assert refused.is_error and "profiles.ops.tools" in text_of(refused), (declared, text_of(refused))
        # The rest of the backend is there.
        _, data = await chain(client, "return await everything.get_sum({a: 1, b: 2})")
        assert data.get("result") is not None, data


def normalised(data: dict, name: str) -> dict:
    """The error with the name in it (whole, or either half) written as NAME."""
    error = dict(data.get("error") or {})
    backend, tool = name.split(".")

    def plain(text: str) -> str:
        text = text.replace(name, "NAME")
        for part in (backend, tool):
            text = re.sub(rf"\b{re.escape(part)}\b", "NAME", text)
        return text

    return {k: plain(str(v)) for k, v in error.items() if k in ("kind", "message", "hint")}


async def test_hidden_and_missing_tools_get_the_same_answer(world):
    """Item 9: a tool that exists outside the grant is answered exactly as one that does not
    exist (in code, by JSON, by `.raw`, by tool_info); only the audit log tells them apart."""
    w = world
    pairs = [
        ("return await everything.get_env({})", "everything.get_env", "everything.get_enw"),
        ('{"tool": "everything.get-env", "arguments": {}}', "everything.get-env", "everything.get-enw"),
        ("return await memory.read_graph({})", "memory.read_graph", "memorx.read_graph"),
        ("return await everything.get_env.raw({})", "everything.get_env", "everything.get_enw"),
        ('return __getToolInterface("memory.read_graph")', "memory.read_graph", "memorx.read_graph"),
    ]
    async with w.client("reader") as client:
        for code, hidden, missing in pairs:
            async with contained(w, code):
                hidden_result, hidden_data = await chain(client, code)
                missing_result, missing_data = await chain(client, code.replace(hidden, missing))
            assert hidden_result.is_error == missing_result.is_error, code
            assert normalised(hidden_data, hidden) == normalised(missing_data, missing), (
                f"{code}:\n hidden:  {normalised(hidden_data, hidden)}\n missing: {normalised(missing_data, missing)}")
            assert "profiles.reader.tools" in json.dumps(hidden_data.get("error")), hidden_data
        for hidden, missing in [("everything.get_env", "everything.get_enw"), ("memory.read_graph", "memorx.read_graph")]:
            a = await client.call_tool("tool_info", {"name": hidden})
            b = await client.call_tool("tool_info", {"name": missing})
            assert text_of(a).replace(hidden, "NAME") == text_of(b).replace(missing, "NAME"), (text_of(a), text_of(b))
    deadline = time.monotonic() + 3
    while not any(line.get("target") == "everything.get-env" and line["decision"] == "deny" for line in w.audit_lines()):
        assert time.monotonic() < deadline, "the hidden tool was not audited"
        await anyio.sleep(0.05)
    assert not any("enw" in (line.get("target") or "") for line in w.audit_lines())


async def test_fetch_sends_no_host_header_of_the_codes_choosing(world):
    """Item 10: a `Host` header set by code is refused (behind a shared proxy it would pick
    another virtual host); the granted site is reached with its own name."""
    w = world
    async with w.client("builder") as client:
        async with contained(w, "Host header"):
            result, data = await chain(client, f"""
                return await fetch("http://127.0.0.1:{w.site.port}/", {{ headers: {{ Host: "admin.internal" }} }})
                    .then(() => "sent", (e: any) => e.message)""")
            assert "set by the gateway" in str(data.get("result")), text_of(result)
        assert w.site.requests == 0
        result, data = await chain(client, f'return (await fetch("http://127.0.0.1:{w.site.port}/")).status')
        assert data.get("result") == 200, text_of(result)
        assert w.site.hosts == [f"127.0.0.1:{w.site.port}"]


def namespaces_work() -> bool:
    """Whether this host lets an unprivileged process make user, network and mount namespaces."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-rnm", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not namespaces_work(), reason="needs unshare(1), ip(8) and user namespaces for a private network")
def test_no_name_outside_the_grant_is_looked_up(tmp_path):
    """Item 4: in a private network namespace whose only resolver is a canary that records
    every query, `fetch` of names the grant does not hold (directly, after a redirect from the
    granted server, with a literal-only grant and with a name grant) sends no query at all."""
    script = Path(__file__).with_name("grants_dns.py")
    done = subprocess.run(["unshare", "-rnm", sys.executable, str(script), str(tmp_path)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["granted_name_queried"], f"the canary saw no query at all, so it proves nothing: {report}"
    leaked = [q for q in report["queries"] if "attacker" in q]
    assert not leaked, f"names outside the grant were looked up: {leaked}"
    for outcome in report["refusals"]:
        assert "matches no entry" in outcome, report
