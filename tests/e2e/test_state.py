"""State that lasts between executions (issue 31): a script keeps a value with `state.set` and
the next execution reads it, over stdio and HTTP (2025-11-25 sessions and stateless
2026-07-28); it expires after its ttl; a value past a bound is refused with what to do; it
survives a gateway restart; a profile can turn it off; and it is each caller's own: two tokens,
and two users an identity provider proved (oidc-provider), never see each other's. Hostile
keys and values are contained: time, response size, RSS, and the gateway still answers."""

from __future__ import annotations

import json
import time

import pytest
from mcp import Client, StdioServerParameters

from conftest import SANDGATE, HttpServer, OneProcess, free_port, reference_servers, structured, write_config
from hostile import Case, watched_gateway
from issuer import as_user, issuers, oauth_toml  # noqa: F401 - a fixture

pytestmark = pytest.mark.anyio

TOKENS = {"alpha": "alpha-" + "a" * 40, "beta": "beta-" + "b" * 40}


def config(tmp_path, extra: str = ""):
    servers = {"everything": reference_servers(tmp_path)["everything"]}
    path = write_config(tmp_path, "toml", servers)
    path.write_text(path.read_text() + extra)
    return path


def stdio(path) -> Client:
    return Client(StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(path)]),
                  mode="legacy", read_timeout_seconds=60)


async def run(client, code: str):
    return await client.call_tool("call_tool_chain", {"code": code})


async def value(client, code: str):
    return structured(await run(client, code))["result"]


@pytest.mark.parametrize("transport,mode", [("stdio", "legacy"), ("http", "legacy"), ("http", "2026-07-28")])
async def test_a_value_kept_in_one_execution_is_read_in_the_next(tmp_path, transport, mode):
    path = config(tmp_path)
    server = HttpServer(path) if transport == "http" else None
    try:
        target = server.target() if server else StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(path)])
        async with Client(target, mode=mode, read_timeout_seconds=60) as client:
            kept = await value(client, """
const issues = [];
for (let i = 0; i < 500; i++) issues.push({ number: i, title: `issue ${i}`, labels: ["bug"] });
await state.set("issues", issues, { ttl: 600 });
await state.set("cursor", "page-2");
return (await state.keys()).join(",");""")
            assert kept == "cursor,issues"
            read = await value(client, """
const issues = await state.get("issues");
return { count: issues.length, last: issues[499].title, cursor: await state.get("cursor"), none: await state.get("never-set") === undefined };""")
            assert read == {"count": 500, "last": "issue 499", "cursor": "page-2", "none": True}, read
            assert await value(client, "return [await state.delete('cursor'), await state.delete('cursor'), await state.keys()];") == [True, False, ["issues"]]
            # Declared for the model: the tool description, and types.d.ts.
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert "state.set(key, value, { ttl: seconds })" in tools["call_tool_chain"].description
            declarations = (await client.read_resource("sandgate://types.d.ts")).contents[0].text
            assert "declare const state" in declarations and "get<T = any>(key: string)" in declarations
    finally:
        if server:
            server.close()


async def test_a_value_expires_after_its_ttl_and_bad_input_says_what_to_do(tmp_path):
    async with stdio(config(tmp_path)) as client:
        await value(client, "await state.set('brief', 1, { ttl: 1 }); await state.set('long', 2, { ttl: 60 }); return 1;")
        time.sleep(1.3)
        assert await value(client, "return [await state.get('brief'), await state.get('long'), await state.keys()];") == [None, 2, ["long"]]
        cases = {
            "await state.set('big', 'x'.repeat(70000))": "at most 65536 bytes",
            "await state.set('k', 1, { ttl: -5 })": "more than 0 and at most 2592000",
            "await state.set('k', 1, { ttl: 'soon' })": "ttl in seconds, a number",
            "await state.set('k')": "needs a value",
            "await state.set('', 1)": "a key is 1 to 256 bytes",
            "await state.get(42)": "must be a string",
            "await state.set('k', 10n)": "BigInt",
        }
        for code, expected in cases.items():
            result = await run(client, f"try {{ {code}; return 'no error'; }} catch (e) {{ return String(e.message || e); }}")
            message = structured(result)["result"]
            assert expected in message, f"{code}: {message}"


async def test_state_is_kept_across_a_restart(tmp_path):
    path = config(tmp_path)
    async with stdio(path) as client:
        await value(client, "await state.set('kept', { across: 'restarts' }); return 1;")
    async with stdio(path) as client:
        assert await value(client, "return await state.get('kept');") == {"across": "restarts"}


async def test_a_profile_with_state_false_has_no_state_and_is_told_why(tmp_path):
    path = config(tmp_path, '\n[profiles.default]\ntools = ["*"]\nstate = false\n')
    async with stdio(path) as client:
        assert await value(client, "return typeof state;") == "undefined"
        result = await run(client, "await state.set('k', 1); return 1;")
        assert result.is_error
        text = result.content[0].text
        assert "profiles.default.state is false" in text and "ask the operator" in text, text
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "state.set" not in tools["call_tool_chain"].description


async def test_two_tokens_never_see_each_others_state(tmp_path):
    extra = "".join(f'\n[[http.tokens]]\ntoken = "{token}"\nprofile = "default"\nname = "{name}"\n' for name, token in TOKENS.items())
    path = config(tmp_path, extra + '\n[profiles.default]\ntools = ["*"]\n')
    server = OneProcess(path)
    try:
        async def as_token(name: str, code: str):
            headers = {"Authorization": f"Bearer {TOKENS[name]}"}
            async with Client(server.target(headers), mode="2026-07-28", read_timeout_seconds=60) as client:
                return await value(client, code)

        await as_token("alpha", "await state.set('secret', 'alpha only'); return 1;")
        assert await as_token("beta", "return [await state.get('secret'), await state.keys()];") == [None, []]
        await as_token("beta", "await state.set('secret', 'beta only'); return 1;")
        assert await as_token("alpha", "return await state.get('secret');") == "alpha only"
        assert await as_token("beta", "return await state.get('secret');") == "beta only"
    finally:
        server.close()


async def test_two_users_an_identity_provider_proved_never_see_each_others_state(tmp_path, issuers):
    port = free_port()
    issuer = issuers(tmp_path, [f"http://127.0.0.1:{port}/mcp"])
    path = config(tmp_path, '\n[profiles.builder]\ntools = ["*"]\n' + oauth_toml(port, issuer.url))
    server = OneProcess(path, listen=f"127.0.0.1:{port}")
    try:
        async def as_person(user: str, code: str):
            async with Client(as_user(server, issuer, user), mode="2026-07-28") as client:
                return await value(client, code)

        await as_person("alice", "await state.set('notes', ['alice']); return 1;")
        assert await as_person("bob", "return [await state.get('notes'), await state.keys()];") == [None, []]
        await as_person("bob", "await state.set('notes', ['bob']); return 1;")
        assert await as_person("alice", "return await state.get('notes');") == ["alice"]
    finally:
        server.close()


# Removes up to 900 keys (an execution makes at most 1,000 calls).
CLEAR = Case("clearing", code="""
const keys = await state.keys();
for (const k of keys.slice(0, 900)) await state.delete(k);
return keys.length;""", kind=None, seconds=20)


async def test_hostile_keys_and_values_are_contained(tmp_path):
    cases = [
        Case("five hundred keys", code="""
for (let i = 0; i < 500; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => state.set(`k${i + j}`, i + j)));
return (await state.keys()).length;""", kind=None, seconds=20, check=lambda d, t: None if d.get("result") == 500 else t[:200]),
        Case("five hundred more, then one past the bound", code="""
for (let i = 500; i < 1000; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => state.set(`k${i + j}`, i + j)));
try { await state.set('one-more', 1); } catch (e) { return e.message; }
return 'kept past the bound';""", kind=None, seconds=20,
             check=lambda d, t: None if "at most 1000 keys" in str(d.get("result")) else f"no bound: {t[:200]}"),
        CLEAR, CLEAR,
        Case("keys in every encoding", code="""
const keys = ["\\u0000", "../../etc/passwd", "\\ud800", "é".repeat(128), "'; DROP TABLE script_state; --", "%00", "a".repeat(256)];
for (const k of keys) await state.set(k, k);
const back = [];
// A lone surrogate is repaired on its way out of the sandbox, as every string is.
for (const k of keys) back.push((await state.get(k)) === (k === "\\ud800" ? "\\ufffd" : k));
return back.every(Boolean) && (await state.keys()).length >= 7;""", kind=None, seconds=5,
             check=lambda d, t: None if d.get("result") is True else f"keys did not round-trip: {t[:200]}"),
        Case("four MiB of values, then more", code="""
const chunk = "v".repeat(60000);
let refused = null;
for (let i = 0; i < 80 && !refused; i++) { try { await state.set(`big${i}`, chunk); } catch (e) { refused = e.message; } }
return refused;""", kind=None, seconds=20, check=lambda d, t: None if "4194304 bytes" in str(d.get("result")) else f"no total bound: {t[:200]}"),
        CLEAR,
        Case("a deeply nested value", code="""
let v = 1; for (let i = 0; i < 5000; i++) v = [v];
try { await state.set('deep', v); return 'kept'; } catch (e) { return e.name; }""", kind=None, seconds=5,
             check=lambda d, t: None if d.get("result") in ("kept", "RangeError") else f"unexpected: {t[:200]}"),
    ]
    async with watched_gateway(tmp_path) as gateway:
        for case in cases:
            await gateway.run_case(case)
        gateway.assert_all_contained()
