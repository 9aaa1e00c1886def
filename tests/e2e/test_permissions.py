"""Permissions as a security boundary, at the MCP level, against `sandgate serve --http` with the
real npm servers: profiles, tokens, the one door, host capabilities and the audit log.

`test_every_escape_is_refused_and_audited` is the table-driven escape suite (issue 16): every
case is an attempt to reach something outside a profile's grant (a tool by every route, a
host, an address in any spelling, a path in any form, an environment variable, another
profile's output, the HTTP front without the right token). Each must be refused with a message
that names the grant, and leave a `deny` line in the audit log. A tool outside the grant is
absent, and answered exactly as a tool that does not exist (issue 26: errors must not tell a
profile which hidden tools exist); its note names the grant all the same. The gateway must still answer
afterwards. Traffic stays on loopback: the "outside" servers are this test's own.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from mcp import Client

from conftest import HttpServer, Site, reference_servers, text_of, toml_value

pytestmark = pytest.mark.anyio

READER_TOKEN = "reader-token-" + "r" * 40
WRITER_TOKEN = "writer-token-" + "w" * 40
NETONLY_TOKEN = "netonly-token-" + "n" * 40
ADMIN_TOKEN = "admin-token-" + "a" * 40
LIMITED_TOKEN = "limited-token-" + "l" * 40


@dataclass
class World:
    """The gateway and everything around it."""

    server: HttpServer
    audit: Path
    root: Path
    outside: Path
    granted: Site
    other: Site
    tokens: dict = field(default_factory=dict)

    def audit_lines(self) -> list[dict]:
        if not self.audit.exists():
            return []
        return [json.loads(line) for line in self.audit.read_text().splitlines() if line.strip()]

    def client(self, profile: str, mode: str = "legacy") -> Client:
        headers = {"Authorization": f"Bearer {self.tokens[profile]}"}
        return Client(self.server.target(headers), mode=mode, read_timeout_seconds=60)


def build_world(tmp_path: Path) -> World:
    granted, other = Site(), Site()
    root = tmp_path / "root"
    (root / "out").mkdir(parents=True)
    (root / "notes.txt").write_text("notes inside the root\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret outside the root\n")
    (root / "escape").symlink_to(outside / "secret.txt")
    (root / "dirlink").symlink_to(outside)
    (root / "proc").symlink_to("/proc/self/environ")
    (root / "out" / "escape-link").symlink_to(outside / "secret.txt")
    (root / "inner-link").symlink_to("notes.txt")
    audit = tmp_path / "audit.jsonl"
    servers = reference_servers(tmp_path)
    lines = [f'[store]\npath = "{tmp_path / "store.db"}"', f'[gateway]\ncache_file = "{tmp_path / "tools.json"}"']
    for name, entry in servers.items():
        lines.append(f"[servers.{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in entry.items()]
    lines.append(f"""
[profiles.default]
tools = ["everything.echo"]

[profiles.reader]
tools = ["memory.read_*", "memory.search_*", "everything.echo", "filesystem.read_text_file", "filesystem.list_directory"]
deny_tools = ["memory.search_nodes"]
net = ["127.0.0.1:{granted.port}", "localhost:{other.port}"]
fs = [{{ path = "{root}", write = false }}, {{ path = "{root / 'out'}", write = true }}]
env = ["SANDGATE_ESCAPE_GRANTED"]

[profiles.writer]
tools = ["memory.*", "everything.*"]

[profiles.netonly]
tools = ["everything.echo"]
net = ["*"]

[profiles.admin]
tools = ["*"]
admin = true

[profiles.limited]
tools = ["everything.echo"]
env = ["HOME"]
limits = {{ timeout_ms = 500, max_calls = 2, executions_per_minute = 5 }}

[[http.tokens]]
token = "${{LIMITED_TOKEN}}"
profile = "limited"
name = "limited-agent"

[[http.tokens]]
token = "${{READER_TOKEN}}"
profile = "reader"
name = "reader-agent"

[[http.tokens]]
token = "${{WRITER_TOKEN}}"
profile = "writer"
name = "writer-agent"

[[http.tokens]]
token_sha256 = "{__import__('hashlib').sha256(NETONLY_TOKEN.encode()).hexdigest()}"
profile = "netonly"
name = "netonly-agent"

[[http.tokens]]
token = "${{ADMIN_TOKEN}}"
profile = "admin"
name = "operator"

[audit]
path = "{audit}"
""")
    config = tmp_path / "sandgate.toml"
    config.write_text("\n".join(lines))
    os.environ.update({
        "READER_TOKEN": READER_TOKEN, "WRITER_TOKEN": WRITER_TOKEN, "ADMIN_TOKEN": ADMIN_TOKEN,
        "LIMITED_TOKEN": LIMITED_TOKEN,
        "SANDGATE_ESCAPE_GRANTED": "granted value", "SANDGATE_ESCAPE_SECRET": "hidden value",
    })
    server = HttpServer(config)
    return World(server, audit, root, outside, granted, other, tokens={
        "reader": READER_TOKEN, "writer": WRITER_TOKEN, "netonly": NETONLY_TOKEN, "admin": ADMIN_TOKEN,
        "limited": LIMITED_TOKEN})


@pytest.fixture
def world(tmp_path):
    w = build_world(tmp_path)
    try:
        yield w
    finally:
        w.server.close()
        w.granted.close()
        w.other.close()


@dataclass
class Escape:
    """One attempt, by one profile, and the grant its refusal must name."""

    name: str
    profile: str
    code: str
    grant: str
    extra: dict = field(default_factory=dict)


def escapes(w: World) -> list[Escape]:
    a, b = w.granted.port, w.other.port
    root = w.root
    cases = []

    def tool(name, code, profile="reader", grant="profiles.reader.tools", **extra):
        cases.append(Escape(f"tool: {name}", profile, code, grant, extra))

    # A tool outside the profile, by every route.
    tool("direct", "return await memory.create_entities({entities: []})")
    tool("globalThis", "return await globalThis.memory.create_entities({entities: []})")
    tool("bracket names", 'return await globalThis["memory"]["create_entities"]({entities: []})')
    tool("bracket on the backend", 'return await memory["create_entities"]({entities: []})')
    tool("an alias of the backend", "const m: any = memory; return await m.create_entities({entities: []})")
    tool("tools.<backend>", "return await tools.memory.create_entities({entities: []})")
    tool("mcp.<backend>", "return await mcp.memory.create_entities({entities: []})")
    tool(".raw()", "return await memory.create_entities.raw({entities: []})")
    tool("__interfaces", "return (__interfaces as any).memory.create_entities.length")
    tool("__getToolInterface", 'return __getToolInterface("memory.create_entities")')
    tool("tier 1 JSON", '{"tool": "memory.create_entities", "arguments": {"entities": []}}')
    tool("tier 1 JSON, bare name", '{"tool": "create_entities", "arguments": {"entities": []}}')
    tool("tier 2 single call", 'return await memory.delete_entities({entityNames: ["x"]})')
    tool("forced sandbox", "return await memory.create_entities({entities: []})", force_sandbox=True)
    tool("a whole backend outside the grant", 'return await filesystem.write_file({path: "x", content: "y"})',
         profile="writer", grant="profiles.writer.tools")
    tool("a denied tool", 'return await memory.search_nodes({query: "x"})')
    tool("a denied tool by JSON", '{"tool": "memory.search_nodes", "arguments": {"query": "x"}}')
    tool("another backend's tool", "return await everything.get_sum({a: 1, b: 2})")
    tool("in a Promise.all", "return await Promise.all([memory.read_graph({}), memory.create_entities({entities: []})])")
    tool("after a granted call", "await memory.read_graph({}); return await memory.add_observations({observations: []})")
    # allow_tools only narrows.
    tool("allow_tools cannot widen", "return await memory.create_entities({entities: []})", allow_tools=["memory.*"])
    tool("allow_tools * cannot widen", "return await memory.create_entities({entities: []})", allow_tools=["*"])
    tool("allow_tools narrows", 'return await everything.echo({message: "x"})', grant="allow_tools",
         allow_tools=["memory.read_*"])
    tool("allow_tools narrows tier 1", '{"tool": "everything.echo", "arguments": {"message": "x"}}', grant="allow_tools",
         allow_tools=["memory.read_*"])

    def env(name, code, profile="reader", grant="profiles.reader.env"):
        cases.append(Escape(f"env: {name}", profile, code, grant))

    env("a secret", 'return env.get("SANDGATE_ESCAPE_SECRET")')
    env("PATH", 'return env.get("PATH")')
    env("the token of another profile", 'return env.get("WRITER_TOKEN")')
    env("an empty name", 'return env.get("")')
    env("a NUL byte", 'return env.get("SANDGATE_ESCAPE_GRANTED\\u0000")')
    env("a prefix of the granted name", 'return env.get("SANDGATE_ESCAPE")')
    env("no env at all", 'return env.get("HOME")', profile="writer", grant="profiles.writer.env")

    def files(name, code, grant="profiles.reader.fs", profile="reader"):
        cases.append(Escape(f"fs: {name}", profile, code, grant))

    files("an absolute path outside", 'return await fs.readFile("/etc/passwd")')
    files("/proc/self", 'return await fs.readFile("/proc/self/environ")')
    files("an absolute path with ..", f'return await fs.readFile("{root}/../outside/secret.txt")')
    files("a relative path with ..", 'return await fs.readFile("../outside/secret.txt")')
    files(".. deeper down", 'return await fs.readFile("out/../../outside/secret.txt")')
    files("a sibling with the root as prefix", f'return await fs.readFile("{root}extra/secret.txt")')
    files("double slashes", 'return await fs.readFile("//etc/passwd")')
    files("a NUL byte", 'return await fs.readFile("notes.txt\\u0000.png")')
    files("a symlink to a file outside", 'return await fs.readFile("escape")')
    files("a symlink to a directory outside", 'return await fs.readFile("dirlink/secret.txt")')
    files("a symlink to /proc/self", 'return await fs.readFile("proc")')
    files("writing a read-only root", 'return await fs.writeFile("notes.txt", "overwritten")')
    files("writing through .. from a writable root", f'return await fs.writeFile("{root}/out/../notes.txt", "x")')
    files("writing through a symlink out", f'return await fs.writeFile("{root}/out/escape-link", "x")')
    files("listing outside", 'return await fs.readdir("/")')
    files("listing the parent", f'return await fs.readdir("{root}/..")')
    files("stat outside", 'return await fs.stat("/etc")')
    files("no fs at all", 'return await fs.readFile("notes.txt")', grant="profiles.writer.fs", profile="writer")

    def net(name, code, profile="netonly", grant=None):
        cases.append(Escape(f"net: {name}", profile, code, grant or f"profiles.{profile}.net"))

    for alias in ["0x7f000001", "2130706433", "017700000001", "127.1", "[::ffff:127.0.0.1]", "[::1]", "[::]",
                  "0.0.0.0", "localhost"]:
        net(f"loopback as {alias}", f'return await (await fetch("http://{alias}:{a}/ok")).text()')
    net("cloud metadata", 'return await (await fetch("http://169.254.169.254/latest/meta-data/")).text()')
    net("IPv6 metadata", 'return await (await fetch("http://[fd00:ec2::254]/")).text()')
    net("a private address", 'return await (await fetch("http://10.0.0.1/")).text()')
    net("carrier-grade NAT", 'return await (await fetch("http://100.100.100.200/")).text()')
    net("a port not granted", f'return await (await fetch("http://127.0.0.1:{b}/ok")).text()', profile="reader")
    net("a granted name that resolves to loopback", f'return await (await fetch("http://localhost:{b}/ok")).text()',
        profile="reader")
    net("a redirect to a port not granted",
        f'return await (await fetch("http://127.0.0.1:{a}/redirect?to=http://127.0.0.1:{b}/ok")).text()', profile="reader")
    net("a redirect to metadata",
        f'return await (await fetch("http://127.0.0.1:{a}/redirect?to=http://169.254.169.254/")).text()', profile="reader")
    net("a redirect to a name that resolves to loopback",
        f'return await (await fetch("http://127.0.0.1:{a}/redirect?to=http://localhost:{b}/ok")).text()', profile="reader")
    net("no network at all", f'return await (await fetch("http://127.0.0.1:{a}/ok")).text()', profile="writer")
    return cases


async def run_chain(client, code, **extra):
    result = await client.call_tool("call_tool_chain", {"code": code, **extra})
    return result, result.structured_content or {}


async def wait_for_audit(w: World, predicate, seconds=3.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = [line for line in w.audit_lines() if predicate(line)]
        if found:
            return found
        await anyio.sleep(0.02)
    return []


async def test_every_escape_is_refused_and_audited(world):
    w = world
    cases = escapes(w)
    failures = []
    hits_before = w.other.requests
    async with contextlib.AsyncExitStack() as stack:
        clients = {p: await stack.enter_async_context(w.client(p)) for p in ["reader", "writer", "netonly"]}
        for case in cases:
            started = time.monotonic()
            result, data = await run_chain(clients[case.profile], case.code, **case.extra)
            took = time.monotonic() - started
            message = json.dumps(data.get("error") or {}) if data else text_of(result)
            problems = []
            # A tool outside the grant is absent, and answered as a tool that does not exist
            # (test_grants_under_attack.py compares the two); the note names the grant.
            expected = "runtime" if case.name.startswith("tool:") else "tool_denied"
            if not result.is_error:
                problems.append(f"not refused: {text_of(result)[:200]}")
            elif (data.get("error") or {}).get("kind") != expected:
                problems.append(f"error kind {(data.get('error') or {}).get('kind')!r}, not {expected}: {message[:300]}")
            if case.grant not in message:
                problems.append(f"the message does not name {case.grant}: {message[:300]}")
            if took > 5:
                problems.append(f"took {took:.1f} s")
            execution = data.get("execution_id")
            audited = await wait_for_audit(w, lambda l: l.get("execution_id") == execution and l["decision"] == "deny")
            if not audited:
                problems.append(f"no deny line for execution {execution} in the audit log")
            elif any(l.get("token") is None for l in audited):
                problems.append(f"the audit line names no token: {audited}")
            if problems:
                failures.append(f"{case.name} ({case.profile}): " + "; ".join(problems))
        # Still answering, for every profile.
        for profile, client in clients.items():
            result, data = await run_chain(client, 'return await everything.echo({message: "still here"})')
            assert data.get("result") == "Echo: still here", (profile, text_of(result))
    assert not failures, f"{len(failures)} of {len(cases)} escapes not refused as they should be:\n" + "\n".join(failures)
    assert len(cases) >= 60, len(cases)
    assert w.other.requests == hits_before, "a refused fetch reached the server it was refused"
    # No token and no argument value is ever written to the audit log.
    log = w.audit.read_text()
    for secret in [READER_TOKEN, WRITER_TOKEN, NETONLY_TOKEN, ADMIN_TOKEN, "hidden value"]:
        assert secret not in log


async def test_what_a_profile_grants_works(world):
    """The other side of the escapes: each granted thing is reachable, and audited as allowed."""
    w = world
    a = w.granted.port
    async with w.client("reader") as client:
        result, data = await run_chain(client, f"""
            const page = await fetch("http://127.0.0.1:{a}/ok");
            const redirected = await fetch("http://127.0.0.1:{a}/redirect?to=/ok");
            await fs.writeFile("out/made.txt", "written by the sandbox");
            return {{
              status: page.status, body: await page.text(), type: page.headers.get("content-type"),
              redirected: redirected.redirected, after: await redirected.text(),
              notes: await fs.readFile("notes.txt"), inner: await fs.readFile("inner-link"),
              listed: await fs.readdir("{w.root}/out"), size: (await fs.stat("notes.txt")).size,
              made: await fs.readFile("out/made.txt"), base64: await fs.readFile("notes.txt", {{encoding: "base64"}}),
              env: await env.get("SANDGATE_ESCAPE_GRANTED"),
              graph: await memory.read_graph({{}}),
            }};""")
        assert not result.is_error, text_of(result)
        got = data["result"]
        assert (got["status"], got["body"], got["type"]) == (200, "fine", "text/plain"), got
        assert got["redirected"] is True and got["after"] == "fine", got
        assert got["notes"] == "notes inside the root\n" and got["inner"] == got["notes"], got
        assert got["listed"] == ["escape-link", "made.txt"], got
        assert got["size"] == len("notes inside the root\n"), got
        assert got["made"] == "written by the sandbox", got
        assert got["env"] == "granted value", got
        assert (w.root / "out" / "made.txt").read_text() == "written by the sandbox"
        assert [c["tool"] for c in data["calls"]][:2] == ["fetch", "fetch"], data["calls"]
        assert [c["changed_state"] for c in data["calls"]][2:4] == [True, False], data["calls"]
        # The record keeps the capability calls like tool calls (and the profile).
        import subprocess

        from conftest import SANDGATE
        config = w.server.config
        for _ in range(50):
            shown = subprocess.run([SANDGATE, "executions", "show", data["execution_id"], "--config", str(config), "--json"],
                                   capture_output=True, text=True)
            if shown.returncode == 0:
                break
            await anyio.sleep(0.1)
        record = json.loads(shown.stdout)["execution"]
        assert record["profile"] == "reader", record
        rows = [(r["backend"], r["tool"]) for r in record["call_rows"]]
        assert rows[:3] == [("(capability)", "fetch"), ("(capability)", "fetch"), ("(capability)", "fs.writeFile")], rows
        assert ("memory", "read_graph") in rows, rows
        allowed = await wait_for_audit(w, lambda l: l.get("execution_id") == data["execution_id"] and l["decision"] == "allow")
        kinds = {line["kind"] for line in allowed}
        assert kinds == {"net", "fs", "env", "tool"}, allowed
        rules = {line["rule"] for line in allowed}
        assert f"profiles.reader.net: 127.0.0.1:{a}" in rules, rules
        assert "profiles.reader.tools: memory.read_*" in rules, rules


async def test_http_needs_the_right_token_in_the_right_form(world):
    """Every wrong form of the header gets 401 with `WWW-Authenticate: Bearer` before anything
    else happens, and is audited; the right token in any case of the scheme gets in."""
    import http.client

    w = world
    url = urllib.parse.urlparse(w.server.url)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})

    def post(headers: list[tuple[str, str]], path=None):
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        conn.putrequest("POST", path or url.path)
        for k, v in [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"),
                     ("Content-Length", str(len(body))), *headers]:
            conn.putheader(k, v)
        conn.endheaders(body.encode())
        response = conn.getresponse()
        answer = response.read().decode(errors="replace")
        return response.status, response.getheader("WWW-Authenticate"), answer

    wrong = [
        [],
        [("Authorization", "Bearer wrong-token-0123456789abcdef")],
        [("Authorization", f"Basic {READER_TOKEN}")],
        [("Authorization", "Bearer")],
        [("Authorization", "Bearer ")],
        [("Authorization", READER_TOKEN)],
        [("Authorization", f"Bearer {READER_TOKEN} extra")],
        [("Authorization", f"Bearer  {READER_TOKEN}")],
        [("Authorization", f"Bearer {READER_TOKEN[:-1]}")],
        [("Authorization", f"Bearer {READER_TOKEN}x")],
        [("Authorization", f"Bearer {READER_TOKEN}"), ("Authorization", f"Bearer {WRITER_TOKEN}")],
        [("X-Api-Key", READER_TOKEN)],
        [("Cookie", f"token={READER_TOKEN}")],
    ]
    before = len([l for l in w.audit_lines() if l["kind"] == "http"])
    for headers in wrong:
        status, challenge, answer = post(headers)
        assert status == 401, (headers, status, answer)
        assert challenge and challenge.startswith("Bearer"), (headers, challenge)
        assert "Authorization: Bearer" in answer, answer
    status, _, _ = post([], path=f"{url.path}?token={READER_TOKEN}")
    assert status == 401
    def http_denials():
        return [l for l in w.audit_lines() if l["kind"] == "http" and l["decision"] == "deny"]

    deadline = time.monotonic() + 3
    while len(http_denials()) - before < len(wrong) + 1 and time.monotonic() < deadline:
        await anyio.sleep(0.02)
    assert len(http_denials()) - before == len(wrong) + 1, http_denials()[-3:]
    for token in [READER_TOKEN, f"{READER_TOKEN[:-1]}", WRITER_TOKEN]:
        assert token not in w.audit.read_text()
    for scheme in ["Bearer", "bearer", "BEARER"]:
        status, _, answer = post([("Authorization", f"{scheme} {READER_TOKEN}")])
        assert status == 200, (scheme, answer)


async def test_two_profiles_see_different_tools(world):
    w = world
    seen = {}
    for profile in ["reader", "writer", "admin"]:
        async with w.client(profile) as client:
            tools = await client.list_tools()
            search = (await client.call_tool("search_tools", {"query": "create entities in the knowledge graph", "limit": 50})).structured_content
            types = (await client.read_resource("sandgate://types.d.ts")).contents[0].text
            overview = (await client.read_resource("sandgate://overview")).contents[0].text
            backends = json.loads((await client.read_resource("sandgate://backends")).contents[0].text)
            listed = []
            cursor = None
            while True:
                page = (await client.call_tool("list_tools_meta", {"cursor": cursor} if cursor else {})).structured_content
                listed += [t["name"] for t in page["tools"]]
                cursor = page.get("nextCursor")
                if not cursor:
                    break
            info = await client.call_tool("tool_info", {"name": "memory.create_entities"})
            seen[profile] = {
                "search_description": next(t.description for t in tools.tools if t.name == "search_tools"),
                "found": [r["name"] for r in search["results"]],
                "types": types, "overview": overview, "listed": listed,
                "backends": {b["name"]: b["tools"] for b in backends["backends"]},
                "info_error": info.is_error, "info_text": text_of(info),
            }
    reader, writer, admin = seen["reader"], seen["writer"], seen["admin"]
    assert set(reader["listed"]) == {"everything.echo", "memory.read_graph",
                                     "filesystem.read_text_file", "filesystem.list_directory"}, reader["listed"]
    assert "memory.create_entities" in writer["listed"] and "filesystem.read_text_file" not in writer["listed"]
    assert len(admin["listed"]) > len(writer["listed"]) > len(reader["listed"])
    assert "memory.create_entities" in writer["found"] and "memory.create_entities" not in reader["found"]
    assert all(name in reader["listed"] for name in reader["found"]), reader["found"]
    assert "create_entities" in writer["types"] and "create_entities" not in reader["types"]
    assert "read_graph" in reader["types"] and "read_text_file" not in writer["types"]
    assert reader["search_description"] != writer["search_description"]
    assert "filesystem" not in writer["overview"] and "filesystem" in reader["overview"]
    assert set(writer["backends"]) == {"everything", "memory"}, writer["backends"]
    assert reader["backends"]["memory"] == ["read_graph"], reader["backends"]
    assert reader["info_error"] and "profiles.reader.tools" in reader["info_text"], reader["info_text"]
    assert not writer["info_error"], writer["info_text"]


async def test_one_profile_cannot_read_another_profiles_output(world):
    w = world
    big = "return Array.from({length: 4000}, (_, i) => `line ${i} of a long result`).join('\\n')"
    async with w.client("writer") as writer:
        _, data = await run_chain(writer, big, max_output_size=200)
        execution = data["execution_id"]
        assert data["output"]["stored"] is True, data
        mine = await writer.call_tool("read_output", {"execution_id": execution, "offset": 0, "length": 100})
        assert not mine.is_error and "line 0" in text_of(mine)
    async with w.client("reader") as reader:
        theirs = await reader.call_tool("read_output", {"execution_id": execution})
        assert theirs.is_error and "line 0" not in text_of(theirs), text_of(theirs)
        assert "profile (`reader`)" in text_of(theirs), text_of(theirs)
        with pytest.raises(Exception) as refused:
            await reader.read_resource(f"sandgate://executions/{execution}/output")
        assert "line 0" not in str(refused.value)
    audited = await wait_for_audit(w, lambda l: l["kind"] == "output" and l.get("execution_id") == execution)
    assert len(audited) >= 2 and all(l["decision"] == "deny" and l["profile"] == "reader" for l in audited), audited
    async with w.client("admin") as admin:
        theirs = await admin.call_tool("read_output", {"execution_id": execution, "length": 100})
        assert not theirs.is_error and "line 0" in text_of(theirs), text_of(theirs)
        stats = json.loads((await admin.read_resource("sandgate://stats")).contents[0].text)
        assert "sandbox" in stats and stats["executions"]["executions"] >= 1
    async with w.client("reader") as reader:
        stats = json.loads((await reader.read_resource("sandgate://stats")).contents[0].text)
        assert stats["profile"] == "reader" and "sandbox" not in stats, stats
        assert stats["executions"]["executions"] == 0, stats


async def test_capability_globals_exist_only_when_granted(world):
    w = world
    probe = "return [typeof fetch, typeof fs, typeof env, typeof Headers]"
    expected = {
        "reader": ["function", "object", "object", "function"],
        "writer": ["undefined", "undefined", "undefined", "undefined"],
        "netonly": ["function", "undefined", "undefined", "function"],
    }
    for profile, want in expected.items():
        async with w.client(profile) as client:
            _, data = await run_chain(client, probe)
            assert data.get("result") == want, (profile, data)


def stateless(w: World, profile: str, method: str, params: dict | None = None) -> dict:
    """One stateless (2026-07-28) request, as raw JSON: what a client (or a cache) receives."""
    import http.client

    url = urllib.parse.urlparse(w.server.url)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": meta}})
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    conn.request("POST", url.path, body=body, headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Authorization": f"Bearer {w.tokens[profile]}",
        **({"Mcp-Name": params["uri"]} if params and "uri" in params else {})})
    text = conn.getresponse().read().decode()
    data = [line[5:] for line in text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1] if data else text)


async def test_per_profile_lists_are_private_to_caches(world):
    """A list or resource that depends on the profile is marked `cacheScope: private`, so no
    shared cache serves one profile's list to another."""
    reader = stateless(world, "reader", "tools/list")["result"]
    writer = stateless(world, "writer", "tools/list")["result"]
    assert reader["cacheScope"] == writer["cacheScope"] == "private", reader
    assert reader["tools"] != writer["tools"]
    resources = stateless(world, "reader", "resources/list")["result"]
    assert resources["cacheScope"] == "private"
    types = stateless(world, "reader", "resources/read", {"uri": "sandgate://types.d.ts"})
    assert "result" in types, types
    types = types["result"]
    assert types["cacheScope"] == "private" and "read_graph" in types["contents"][0]["text"]


def serve_and_collect(config: Path, *args, env=None, seconds=30) -> tuple[int | None, str]:
    """Starts `sandgate serve`, returns (exit code or None if it served, its stderr so far)."""
    import subprocess

    from conftest import SANDGATE, state_home

    proc = subprocess.Popen([SANDGATE, "serve", "--config", str(config), *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "XDG_STATE_HOME": str(state_home(config)), **(env or {})})
    log = []
    serving = False
    deadline = time.monotonic() + seconds
    for line in proc.stderr:
        log.append(line)
        if "serving MCP over streamable HTTP" in line:
            serving = True
            break
        if time.monotonic() > deadline:
            break
    if serving:
        proc.terminate()
        proc.wait(10)
        return None, "".join(log)
    # Its stderr ended: it is exiting, or has.
    code = proc.wait(10)
    return code, "".join(log)


def test_a_fresh_gateway_prints_a_token_once_and_requires_it(tmp_path):
    from conftest import state_home, write_config

    config = write_config(tmp_path, "toml", {})
    first = HttpServer(config)
    try:
        log = "".join(first.log)
        assert first.token and first.token in log, log
        assert f'"Authorization": "Bearer {first.token}"' in log, "the line a client config needs"
        files = list((state_home(config) / "sandgate").glob("http-token-*.txt"))
        assert len(files) == 1 and files[0].read_text().strip() == first.token
        assert files[0].stat().st_mode & 0o777 == 0o600
        assert probe(first, {}) == 401
        assert probe(first, first.headers) == 200
    finally:
        first.close()
    again = HttpServer(config, token=first.token)
    try:
        log = "".join(again.log)
        assert first.token not in log, "the token is printed only the first time"
        assert str(files[0]) in log, "the later starts say where it is"
        assert probe(again, {}) == 401 and probe(again, first.headers) == 200
    finally:
        again.close()


def probe(server: HttpServer, headers: dict) -> int:
    import http.client

    url = urllib.parse.urlparse(server.url)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    conn.request("POST", url.path, body=body, headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    response = conn.getresponse()
    response.read()
    return response.status


def test_beyond_loopback_needs_tokens(tmp_path):
    from conftest import write_config

    config = write_config(tmp_path, "toml", {})
    code, log = serve_and_collect(config, "--http", "0.0.0.0:0")
    assert code not in (None, 0), log
    assert "no token is configured" in log and "[[http.tokens]]" in log, log
    with open(config, "a") as f:
        f.write('\n[http]\nauth = "none"\n')
    code, log = serve_and_collect(config, "--http", "0.0.0.0:0")
    assert code not in (None, 0), log
    assert 'auth = "none"' in log and "not loopback" in log, log
    # On loopback, auth may be turned off.
    code, log = serve_and_collect(config, "--http", "127.0.0.1:0")
    assert code is None, log


async def test_profile_limits_cap_what_a_caller_asks_for(world):
    """A profile's limits cap the sandbox's, and a caller may only lower them: its time, its calls
    (capability calls count like tool calls), and its executions per minute."""
    async with world.client("limited") as client:
        started = time.monotonic()
        _, data = await run_chain(client, "await new Promise(r => setTimeout(r, 5000)); return 1", timeout_ms=20000)
        assert data["error"]["kind"] == "timeout" and time.monotonic() - started < 3, data
        _, data = await run_chain(client, "for (let i = 0; i < 3; i++) await everything.echo({message: `${i}`}); return 1")
        assert "call limit" in data["error"]["message"], data
        _, data = await run_chain(client, "await env.get('HOME'); await env.get('HOME'); return await env.get('HOME')")
        assert "call limit" in data["error"]["message"], data
        assert [c["tool"] for c in data["calls"]] == ["env.get", "env.get"], data["calls"]
        for _ in range(2):
            _, data = await run_chain(client, 'return await everything.echo({message: "ok"})')
            assert data["result"] == "Echo: ok", data
        result, data = await run_chain(client, 'return await everything.echo({message: "one too many"})')
        assert result.is_error and "profiles.limited.limits.executions_per_minute" in text_of(result), text_of(result)
    # Another profile is not slowed by this one's rate.
    async with world.client("writer") as client:
        _, data = await run_chain(client, 'return await everything.echo({message: "mine"})')
        assert data["result"] == "Echo: mine", data
