"""Stored tools end to end: registered with the CLI, called through MCP (the Python SDK client
against `sandgate serve` with the real npm servers), in every tier, with versions, rollback and
removal, and every refusal: at registration (nothing is written) and at call time."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import REPO, SANDGATE, reference_servers, text_of, toml_value

pytestmark = pytest.mark.anyio

EXAMPLES = REPO / "examples" / "tools"


def make_config(tmp_path: Path) -> Path:
    servers = reference_servers(tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    lines = [f'[store]\npath = "{tmp_path / "store.db"}"', f'[gateway]\ncache_file = "{tmp_path / "tools.json"}"']
    for name, entry in servers.items():
        lines.append(f"[servers.{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in entry.items()]
    lines.append(f"""
[profiles.default]
tools = ["*"]
fs = [{{ path = "{marks}", write = true }}]

[profiles.narrow]
tools = ["everything.*"]
""")
    config = tmp_path / "sandgate.toml"
    config.write_text("\n".join(lines))
    return config


def cli(config: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SANDGATE, "tools", *args, "--config", str(config)], capture_output=True, text=True, timeout=60)


def add(config: Path, file: Path, *extra: str) -> subprocess.CompletedProcess:
    done = cli(config, "add", str(file), *extra)
    assert done.returncode == 0, done.stderr
    return done


def gateway(config: Path, **options) -> Client:
    params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(config)])
    return Client(params, mode="legacy", read_timeout_seconds=60, **options)


async def chain(client, code: str, **extra):
    result = await client.call_tool("call_tool_chain", {"code": code, **extra})
    return result, result.structured_content or {}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def returning(value: str, extra_meta: str = "") -> str:
    return (f"export const meta = {{ description: 'returns {value}', input: {{ type: 'object' }}{extra_meta} }};\n"
            f"export default async function () {{ return {value}; }}\n")


async def test_the_examples_register_and_run_in_every_tier(tmp_path):
    config = make_config(tmp_path)
    for example in ["sum_numbers.ts", "remember_fact.ts", "file_digest.ts"]:
        add(config, EXAMPLES / example)
    hello = tmp_path / "files" / "hello.txt"
    hello.write_text("# Greetings\nhello from the filesystem backend\nsecond line here\n")
    async with gateway(config) as client:
        found = (await client.call_tool("search_tools", {"query": "sum of a list of numbers"})).structured_content
        assert found["results"][0]["name"] == "user.sum_numbers", found
        info = text_of(await client.call_tool("tool_info", {"name": "user.sum_numbers"}))
        assert "xs: number[]" in info and "total: number" in info, info
        types = (await client.read_resource("sandgate://types.d.ts")).contents[0].text
        assert "sum_numbers" in types and "remember_fact" in types

        expected = {"ok": True, "data": {"total": 6.5}}
        for code, tier, extra in [
            ('{"tool": "user.sum_numbers", "arguments": {"xs": [1, 2, 3.5]}}', "json", {}),
            ("return await user.sum_numbers({xs: [1, 2, 3.5]})", "single_call", {}),
            ("return await user.sum_numbers({xs: [1, 2, 3.5]})", "sandbox", {"force_sandbox": True}),
        ]:
            result, data = await chain(client, code, **extra)
            assert data.get("result") == expected and data["tier"] == tier, (tier, text_of(result))

        _, first = await chain(client, "return await user.remember_fact({person: 'Ada', fact: 'wrote the first program'})")
        _, second = await chain(client, "return await user.remember_fact({person: 'Ada', fact: 'worked with Babbage'})")
        assert first["result"]["data"]["created"] is True, first
        assert second["result"]["data"] == {"person": "Ada", "created": False,
                                            "facts": ["wrote the first program", "worked with Babbage"]}, second

        _, digest = await chain(client, f"return await user.file_digest({{paths: [{json.dumps(str(hello))}]}})")
        assert digest["result"]["data"] == [{"path": str(hello), "lines": 3, "words": 10, "heading": "Greetings"}], digest


async def test_versions_rollback_export_import_and_removal(tmp_path):
    config = make_config(tmp_path)
    v1 = write(tmp_path, "answer.ts", returning("1"))
    add(config, v1)
    changed = []

    async def on_message(message):
        if type(message).__name__ == "ToolListChangedNotification":
            changed.append(message)

    async with gateway(config, message_handler=on_message) as client:
        async def answer():
            _, data = await chain(client, "return await user.answer({})")
            return (data.get("result") or {}).get("data"), data

        async def becomes(value, seconds=5.0):
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                got, _ = await answer()
                if got == value:
                    return True
                await anyio.sleep(0.1)
            return False

        assert await becomes(1)
        seen = len(changed)
        write(tmp_path, "answer.ts", returning("2"))
        assert cli(config, "update", str(v1)).returncode == 0
        assert await becomes(2), "a running gateway picks up the new version"
        with anyio.fail_after(5):
            while len(changed) == seen:
                await anyio.sleep(0.05)
        # (clients are told the tool list changed when the CLI changed it)
        assert cli(config, "rollback", "answer", "1").returncode == 0
        assert await becomes(1), "rollback points the name back"
        versions = cli(config, "versions", "answer").stdout
        assert "v1" in versions and "v2" in versions and versions.index("current") > versions.index("v1")
        exported = cli(config, "export", "answer", "--version", "2").stdout
        assert exported == returning("2")
        again = write(tmp_path, "copy.ts", exported)
        imported = cli(config, "import", str(again), "--name", "answer")
        assert imported.returncode == 0 and "version 3" in imported.stdout, imported.stderr
        assert await becomes(2)
        assert cli(config, "remove", "answer").returncode == 0
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            result, data = await chain(client, "return await user.answer({})")
            if result.is_error:
                break
            await anyio.sleep(0.1)
        assert result.is_error, data
        assert cli(config, "show", "answer").returncode == 1
        assert "version 2" in cli(config, "show", "answer", "--version", "2").stdout, "versions outlive the name"


def test_every_bad_registration_is_refused_and_writes_nothing(tmp_path):
    config = make_config(tmp_path)
    add(config, write(tmp_path, "keep.ts", returning("1")))
    before = cli(config, "versions", "keep").stdout
    bad_schema = "export const meta = { description: 'x', input: { type: 'object', properties: { n: { type: 'integr' } } } };\nexport default async () => 1;\n"
    cases = {
        "invalid schema": (bad_schema, [], "meta.input.properties.n.type"),
        "no contract": ("export const meta = { description: 'x', input: { type: 'object' } };\nconst f = 1;\n", [], "no default export"),
        "no meta": ("export default async () => 1;\n", [], "no `meta`"),
        "does not transpile": ("export const meta = { description: 'x', input: { type: 'object' } };\nexport default async () => { return 1 +; };\n", [], "line 2:"),
        "meta that is not a literal": ("const d = 'x';\nexport const meta = { description: d, input: { type: 'object' } };\nexport default async () => 1;\n", [], "must be a literal"),
        "more than the profile holds": (
            "export const meta = { description: 'x', input: { type: 'object' }, capabilities: { tools: ['memory.create_entities'] } };\nexport default async () => 1;\n",
            ["--profile", "narrow"], "profiles.narrow.tools"),
        "a host the profile lacks": (
            "export const meta = { description: 'x', input: { type: 'object' }, capabilities: { net: ['api.github.com:443'] } };\nexport default async () => 1;\n",
            [], "profiles.default.net"),
        "a bad name": (returning("1"), ["--name", "Bad-Name"], "not a stored tool name"),
    }
    for label, (code, extra, expect) in cases.items():
        file = write(tmp_path, "bad.ts", code)
        done = cli(config, "add", str(file), "--name", "bad", *extra) if "--name" not in extra else cli(config, "add", str(file), *extra)
        assert done.returncode == 1, (label, done.stdout)
        assert expect in done.stderr and "nothing was written" in done.stderr, (label, done.stderr)
        listed = cli(config, "stored").stdout
        assert "user.bad" not in listed, (label, listed)
    assert cli(config, "versions", "keep").stdout == before
    # update of an absent tool, add of an existing one
    assert cli(config, "update", str(write(tmp_path, "ghost.ts", returning("1")))).returncode == 1
    assert cli(config, "add", str(tmp_path / "keep.ts")).returncode == 1
    assert cli(config, "versions", "keep").stdout == before


async def test_refusals_at_call_time(tmp_path):
    config = make_config(tmp_path)
    marks = tmp_path / "marks"
    # Writes a mark first thing: if its input were not validated before the code runs, the
    # mark would appear for a bad input too.
    add(config, write(tmp_path, "marked.ts", f"""export const meta = {{
  description: 'marks, then answers', input: {{ type: 'object', properties: {{ n: {{ type: 'integer', minimum: 1 }} }}, required: ['n'] }},
  capabilities: {{ fs: [{{ path: '{marks}', write: true }}] }},
}};
export default async function (input: {{ n: number }}, ctx: any) {{
  await ctx.fs.writeFile('{marks}/mark-' + input.n, 'ran');
  return input.n;
}}
"""))
    add(config, write(tmp_path, "sneaky.ts", "export const meta = { description: 'calls what it did not declare', input: { type: 'object' }, capabilities: { tools: ['everything.echo'] } };\nexport default async function (input: any, ctx: any) {\n  return [typeof ctx.tools.memory, typeof ctx.fetch, typeof ctx.env, typeof memory, typeof fetch];\n}\n"))
    add(config, write(tmp_path, "ping.ts", "export const meta = { description: 'ping', input: { type: 'object' }, capabilities: { tools: ['user.pong'] } };\nexport default async function (input: any, ctx: any) { return await ctx.tools.user.pong({}); }\n"))
    add(config, write(tmp_path, "pong.ts", "export const meta = { description: 'pong', input: { type: 'object' }, capabilities: { tools: ['user.ping'] } };\nexport default async function (input: any, ctx: any) { return await ctx.tools.user.ping({}); }\n"))
    add(config, write(tmp_path, "liar.ts", "export const meta = { description: 'lies about its output', input: { type: 'object' }, output: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] } };\nexport default async () => ({ n: 'three' });\n"))
    add(config, write(tmp_path, "failing.ts", "export const meta = { description: 'fails', input: { type: 'object' } };\nexport default async () => ({ ok: false, errors: ['the thing was missing'] });\n"))
    async with gateway(config) as client:
        result, data = await chain(client, "return await user.marked({n: 0})")
        assert result.is_error and "$.n" in data["error"]["message"] and "minimum" in data["error"]["message"], data
        result, data = await chain(client, "return await user.marked({})")
        assert result.is_error and "required" in data["error"]["message"], data
        assert list(marks.iterdir()) == [], "the sandbox was not entered for a bad input"
        _, data = await chain(client, "return await user.marked({n: 3})")
        assert data["result"] == {"ok": True, "data": 3} and (marks / "mark-3").read_text() == "ran", data

        _, data = await chain(client, "return await user.sneaky({})")
        assert data["result"]["data"] == ["undefined", "undefined", "undefined", "undefined", "undefined"], data

        result, data = await chain(client, "return await user.ping({})")
        assert result.is_error and "cycle" in data["error"]["message"] and "user.ping → user.pong → user.ping" in data["error"]["message"], data

        result, data = await chain(client, "return await user.liar({})")
        assert result.is_error and "meta.output" in data["error"]["message"] and "$.n" in data["error"]["message"], data
        result, data = await chain(client, "return await user.failing({})")
        assert result.is_error and "the thing was missing" in data["error"]["message"], data


async def test_registering_through_mcp_needs_register_tools_and_lists_change(tmp_path):
    config = make_config(tmp_path)
    text = config.read_text().replace('[profiles.default]\ntools = ["*"]', '[profiles.default]\ntools = ["*"]\nregister_tools = true')
    config.write_text(text + "\n[stored_tools]\nexpose_as_mcp_tools = true\n")
    changed = []

    async def on_message(message):
        if type(message).__name__ == "ToolListChangedNotification":
            changed.append(message)

    params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(config)])
    async with Client(params, mode="legacy", read_timeout_seconds=60, message_handler=on_message) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "register_tool" in names and "remove_tool" in names, names
        code = (EXAMPLES / "sum_numbers.ts").read_text()
        bad = await client.call_tool("register_tool", {"name": "broken", "code": code.replace("type: \"number\"", "type: \"numbr\"")})
        assert bad.is_error and "nothing was written" in text_of(bad), text_of(bad)
        seen = len(changed)
        done = await client.call_tool("register_tool", {"name": "sum_numbers", "code": code})
        assert not done.is_error and "version 1" in text_of(done), text_of(done)
        assert "warning" not in text_of(done), text_of(done)
        # Allowed but likely a mistake: said, not silently accepted (issue 34, item 7).
        doubtful = code.replace("everything.get_sum", "everything.get_summ").replace(
            'description: "Sum of a list', 'description: "TODO: say what it does. Sum of a list')
        warned = await client.call_tool("register_tool", {"name": "doubtful", "code": doubtful})
        said = text_of(warned)
        assert not warned.is_error and "version 1" in said, said
        assert "no backend lists `everything.get_summ` now (did you mean `everything.get-sum`?)" in said, said
        assert "meta.description still says TODO" in said, said
        await client.call_tool("remove_tool", {"name": "doubtful"})
        with anyio.fail_after(5):
            while len(changed) == seen:
                await anyio.sleep(0.05)
        names = [t.name for t in (await client.list_tools()).tools]
        assert "user.sum_numbers" in names and "user.broken" not in names, names
        direct = await client.call_tool("user.sum_numbers", {"xs": [2, 3]})
        assert direct.structured_content == {"ok": True, "data": {"total": 5}}, direct
        _, data = await chain(client, "return await user.sum_numbers({xs: [2, 3]})")
        assert data["result"] == direct.structured_content, "the same result as through call_tool_chain"
        removed = await client.call_tool("remove_tool", {"name": "sum_numbers"})
        assert not removed.is_error, text_of(removed)
        names = [t.name for t in (await client.list_tools()).tools]
        assert "user.sum_numbers" not in names
    # Without register_tools, the meta-tools are not there.
    config.write_text(config.read_text().replace("register_tools = true", "register_tools = false"))
    async with gateway(config) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "register_tool" not in names and "remove_tool" not in names, names
        with pytest.raises(Exception) as refused:
            await client.call_tool("register_tool", {"name": "x", "code": "x"})
        assert "unknown tool `register_tool`" in str(refused.value)


def versioned(n: int) -> str:
    """A tool file whose every part says which version it is: a call that mixed two versions
    would answer with numbers that do not agree."""
    return (f"export const meta = {{ description: 'version {n} of a tool', input: {{ type: 'object' }},\n"
            f"  output: {{ type: 'object', properties: {{ v: {{ const: {n} }} }} }} }};\n"
            f"const V = {n};\nexport default async function () {{ return {{ v: V, check: V * 7, text: 'v{n}' }}; }}\n")


def register_config(tmp_path: Path) -> Path:
    config = make_config(tmp_path)
    config.write_text(config.read_text().replace('[profiles.default]\ntools = ["*"]', '[profiles.default]\ntools = ["*"]\nregister_tools = true'))
    return config


async def test_a_gateway_killed_during_a_burst_of_updates_leaves_only_whole_versions(tmp_path):
    import os
    import signal
    import sqlite3

    from hostile import find_gateway

    config = register_config(tmp_path)
    names = ["alpha", "beta", "gamma", "delta"]
    answered = []
    killed = False
    try:
        async with gateway(config) as client:
            pid = find_gateway(config)

            async def update(i: int):
                result = await client.call_tool("register_tool", {"name": names[i % 4], "code": versioned(i)})
                if not result.is_error:
                    answered.append(i)

            async with anyio.create_task_group() as group:
                async def burst():
                    for start in range(0, 1000, 50):
                        async with anyio.create_task_group() as wave:
                            for i in range(start, start + 50):
                                wave.start_soon(update, i)

                async def killer():
                    nonlocal killed
                    while len(answered) < 300:
                        await anyio.sleep(0.005)
                    os.kill(pid, signal.SIGKILL)
                    killed = True

                group.start_soon(burst)
                group.start_soon(killer)
    except BaseException:  # noqa: BLE001 - the client fails once its server is killed; that is the test
        pass
    assert killed and 300 <= len(answered) < 1000, len(answered)
    db = sqlite3.connect(tmp_path / "store.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    pointers = dict(db.execute("SELECT name, version FROM stored_tools").fetchall())
    assert set(pointers) == set(names), pointers
    for name, version in pointers.items():
        code, meta = db.execute("SELECT code, meta FROM stored_tool_versions WHERE name = ? AND version = ?",
                                (name, version)).fetchone()
        n = int(code.split("const V = ")[1].split(";")[0])
        assert code == versioned(n) and json.loads(meta)["description"] == f"version {n} of a tool", (name, version)
    for code, meta in db.execute("SELECT code, meta FROM stored_tool_versions"):
        n = int(code.split("const V = ")[1].split(";")[0])
        assert code == versioned(n) and f"version {n} " in meta, "a half-written version is visible"
    db.close()
    # After a restart, each name answers at its committed version.
    async with gateway(config) as client:
        for name, version in pointers.items():
            _, data = await chain(client, f"return await user.{name}({{}})")
            got = data["result"]["data"]
            assert got["check"] == got["v"] * 7, got


async def test_calls_during_updates_each_see_one_whole_version(tmp_path):
    config = register_config(tmp_path)
    seen: dict[int, int] = {}
    problems = []
    async with gateway(config) as client:
        first = await client.call_tool("register_tool", {"name": "moving", "code": versioned(0)})
        assert not first.is_error, text_of(first)

        async def call():
            result, data = await chain(client, "return await user.moving({})")
            got = (data.get("result") or {}).get("data") or {}
            if result.is_error or got.get("check") != got.get("v", -1) * 7 or got.get("text") != f"v{got.get('v')}":
                problems.append(text_of(result)[:300])
            else:
                seen[got["v"]] = seen.get(got["v"], 0) + 1

        async def update(n: int):
            result = await client.call_tool("register_tool", {"name": "moving", "code": versioned(n)})
            if result.is_error:
                problems.append(text_of(result)[:300])

        async with anyio.create_task_group() as group:
            for i in range(200):
                group.start_soon(call)
                if i % 10 == 0:
                    group.start_soon(update, i // 10 + 1)
    assert not problems, problems[:5]
    assert sum(seen.values()) == 200
    print("calls per version seen:", dict(sorted(seen.items())))
    assert len(seen) > 1, f"every call saw the same version, so the updates did not overlap the calls: {seen}"


async def test_a_past_execution_is_promoted_to_a_tool(tmp_path):
    config = make_config(tmp_path)
    code = "const a = await everything.echo({ message: 'one' });\nconst b = await everything.echo({ message: 'two' });\nreturn [a, b];"
    async with gateway(config) as client:
        _, data = await chain(client, code)
        assert data["result"] == ["Echo: one", "Echo: two"], data
        execution = data["execution_id"]
    shown = subprocess.run([SANDGATE, "executions", "show", execution, "--config", str(config)],
                           capture_output=True, text=True, timeout=60)
    assert code in shown.stdout, shown.stdout
    promoted = cli(config, "promote", execution, "--name", "two_echoes")
    assert promoted.returncode == 0, promoted.stderr
    assert 'tools: ["everything.echo"]' in promoted.stdout and "const { everything } = ctx.tools;" in promoted.stdout, promoted.stdout
    file = write(tmp_path, "two_echoes.ts", promoted.stdout)
    add(config, file)
    async with gateway(config) as client:
        _, data = await chain(client, "return await user.two_echoes({})")
        assert data["result"] == {"ok": True, "data": ["Echo: one", "Echo: two"]}, data
    assert cli(config, "promote", "ex-nope", "--name", "x").returncode == 1


async def test_profiles_grant_stored_tools_like_any_other(tmp_path):
    """A profile reaches `user.<name>` only through its `tools` patterns, and sees it only then;
    a stored tool may call another it declares."""
    from conftest import HttpServer

    config = make_config(tmp_path)
    config.write_text(config.read_text() + '''
[profiles.users]
tools = ["user.*"]

[[http.tokens]]
token = "narrow-token-0123456789abcdef"
profile = "narrow"

[[http.tokens]]
token = "users-token-0123456789abcdef"
profile = "users"
''')
    server = HttpServer(config)
    try:
        # Added while it serves: the gateway (every replica of a cluster) takes them from its store.
        add(server.config, EXAMPLES / "sum_numbers.ts")
        add(server.config, write(tmp_path, "twice.ts", "export const meta = { description: 'sums twice', input: { type: 'object' }, capabilities: { tools: ['user.sum_numbers'] } };\nexport default async function (input: any, ctx: any) {\n  const a = await ctx.tools.user.sum_numbers({ xs: [1, 2] });\n  return a.data.total * 2;\n}\n"))
        async def as_profile(token: str):
            return Client(server.target({"Authorization": f"Bearer {token}"}), mode="legacy", read_timeout_seconds=60)

        async with await as_profile("narrow-token-0123456789abcdef") as narrow:
            found = (await narrow.call_tool("search_tools", {"query": "sum of a list of numbers"})).structured_content
            assert all(not r["name"].startswith("user.") for r in found["results"]), found
            result, data = await chain(narrow, "return await user.sum_numbers({xs: [1]})")
            # Answered as a tool that does not exist would be (nothing tells it exists), with
            # the grant named.
            assert data["error"]["kind"] == "runtime" and "profiles.narrow.tools" in data["error"]["hint"], data
        async with await as_profile("users-token-0123456789abcdef") as users:
            # A tool added with the CLI is seen within a second (at once on a shared store).
            for _ in range(30):
                _, data = await chain(users, "return await user.twice({})")
                if data["result"] is not None:
                    break
                await anyio.sleep(0.2)
            assert data["result"] == {"ok": True, "data": 6}, data
    finally:
        server.close()


def test_sandgate_run_calls_stored_tools_like_any_client(tmp_path):
    """`sandgate run` reaches stored tools as `user.<name>`, as every MCP client does (issue 34,
    item 4: it answered "user is not defined")."""
    config = make_config(tmp_path)
    add(config, EXAMPLES / "sum_numbers.ts")
    script = write(tmp_path, "uses_stored.ts", "const r = await user.sum_numbers({xs: [1, 2, 3.5]});\nreturn r;\n")
    done = subprocess.run([SANDGATE, "run", str(script), "--config", str(config), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["error"] is None, result["error"]
    assert result["value"]["ok"] is True and result["value"]["data"]["total"] == 6.5, result["value"]


def test_versions_show_local_times_and_a_promotion_hint_names_its_flag(tmp_path):
    """`tools versions` prints when each version was made as a local time (it printed unix
    milliseconds), and `executions show` suggests `tools promote ID --name NAME`, the form the
    command takes (it left out the required `--name`). Issue 34, item 7."""
    import re

    config = make_config(tmp_path)
    add(config, EXAMPLES / "sum_numbers.ts")
    versions = cli(config, "versions", "sum_numbers")
    assert versions.returncode == 0, versions.stderr
    assert "unix ms" not in versions.stdout and re.search(r"v1 .* \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", versions.stdout), versions.stdout
    script = write(tmp_path, "hello.ts", "return 1 + 1;\n")
    ran = subprocess.run([SANDGATE, "run", str(script), "--config", str(config), "--json"], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    listed = subprocess.run([SANDGATE, "executions", "list", "--config", str(config), "--json"], capture_output=True, text=True, timeout=60)
    execution = json.loads(listed.stdout)[0]["id"]
    shown = subprocess.run([SANDGATE, "executions", "show", execution, "--config", str(config)], capture_output=True, text=True, timeout=60)
    assert f"sandgate tools promote {execution} --name NAME" in shown.stdout, shown.stdout
    # An id may be typed short; the table's columns fit what they hold.
    short = subprocess.run([SANDGATE, "executions", "show", execution[:14], "--config", str(config)], capture_output=True, text=True, timeout=60)
    assert short.returncode == 0 and execution in short.stdout, short.stdout + short.stderr
    table = subprocess.run([SANDGATE, "executions", "list", "--config", str(config)], capture_output=True, text=True, timeout=60).stdout.splitlines()
    header, row = table[0], table[1]
    assert row.index(execution) == header.index("ID") and row[header.index("PROFILE")] != " " and header.index("PROFILE") > row.index(execution) + len(execution), table[:2]


async def test_a_result_read_without_data_is_named_with_the_keys_it_has(tmp_path):
    """A stored tool answers `{ ok, data }`: code that reads `r.items` (the tool's own field)
    returns nothing, and the note names the property, the keys the result has, and the fix."""
    config = make_config(tmp_path)
    meta = ", output: { type: 'object', properties: { items: { type: 'array' } } }"
    add(config, write(tmp_path, "listing.ts", returning("{ items: [1, 2] }", meta)), "--name", "listing")
    async with gateway(config) as client:
        result, data = await chain(client, "const r = await user.listing({});\nreturn r.items;")
        text = result.content[0].text
        assert "`r.items` is undefined" in text and "`ok`, `data`" in text and "write `r.data.items`" in text, text
        _, fixed = await chain(client, "const r = await user.listing({});\nreturn r.data.items;")
        assert fixed["result"] == [1, 2], fixed
