"""The V8 engine (issue 33) through `sandgate serve`: a profile that allows both
engines lets `call_tool_chain` choose with `engine`, and the same code gives the same results
on both (tool calls, console, timers, errors); a profile fixed to QuickJS refuses `v8`, naming
the key that decides; a name that is no engine says which are; `sandgate status` reports the
V8 workers' protections; on V8 a loop past its time and a heap past its limit are stopped
while the gateway and a neighbour execution go on; and once a V8 worker is quiet, its ready
isolates give back what a burst of heavy runs left. Deno comes from npm (`scripts/test`)."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from conftest import DENO, SANDGATE, HttpServer, auth_headers, reference_servers, structured, write_config
from hostile import children, cmdline, find_gateway, rss_kib

pytestmark = pytest.mark.anyio

TOKENS = {"both": "both-" + "b" * 40, "quick": "quick-" + "q" * 40}


def config(tmp_path, profiles: str):
    assert DENO.is_file(), f"Deno is not installed at {DENO}: run scripts/test, which installs it from npm"
    servers = {"everything": reference_servers(tmp_path)["everything"]}
    path = write_config(tmp_path, "toml", servers)
    path.write_text(path.read_text() + f'\n[sandbox]\ndeno = "{DENO}"\n' + profiles)
    return path


def stdio(path) -> Client:
    return Client(StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(path)]),
                  mode="legacy", read_timeout_seconds=60)


async def run(client, code: str, **extra):
    return structured(await client.call_tool("call_tool_chain", {"code": code, **extra}))


async def failed(client, code: str, **extra) -> dict:
    """The structured answer of a run that fails (an `isError` result)."""
    result = await client.call_tool("call_tool_chain", {"code": code, **extra})
    assert result.is_error, result.content
    return result.structured_content


# Code as models write it: each gives the same result on both engines.
SAME_ON_BOTH = [
    "const r = await everything.echo({ message: 'hi' }); return r;",
    "const [a, b] = await Promise.all([everything['get-sum']({ a: 1, b: 2 }), everything['get-sum']({ a: 3, b: 4 })]); return [a, b];",
    "console.log('one', { n: 1 }); console.warn('two'); return 'logged';",
    "const order = []; setTimeout(() => order.push('late'), 20); await new Promise((r) => setTimeout(r, 40)); return order;",
    "const m = new Map([['k', 1]]); return { m, s: new Set([1, 2]), d: new Date(0).toISOString() };",
    "return JSON.parse(JSON.stringify({ a: [1, 2, { b: 'c' }] }));",
    "try { JSON.parse('{'); } catch (e) { return [e.name, e instanceof SyntaxError]; }",
    "return [typeof Deno, typeof fetch, typeof WebAssembly, typeof Worker, typeof SharedArrayBuffer, typeof require];",
    "return new URL('https://example.com/a?b=1').searchParams.get('b');",
    "return (1234.5).toLocaleString('en-US', { style: 'currency', currency: 'USD' });",
    "return [new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-GB'), new Intl.ListFormat('en').format(['a', 'b', 'c']), new Intl.NumberFormat('en', { notation: 'compact' }).format(1234), typeof performance.now()];",
]


async def test_a_call_chooses_its_engine_and_gets_the_same_results(tmp_path):
    path = config(tmp_path, '\n[profiles.default]\ntools = ["*"]\nengine = "any"\n')
    async with stdio(path) as client:
        for code in SAME_ON_BOTH:
            quick = await run(client, code, force_sandbox=True)
            v8 = await run(client, code, force_sandbox=True, engine="v8")
            assert v8.get("result") == quick.get("result"), (code, quick, v8)
            assert [log["message"] for log in v8.get("logs", [])] == [log["message"] for log in quick.get("logs", [])], code
        # It really ran on V8: the code itself sees each engine's own words for a fault.
        probe = "try { null.x; } catch (e) { return e.message; }"
        assert (await run(client, probe))["result"] == "cannot read property 'x' of null"
        assert (await run(client, probe, engine="v8"))["result"] == "Cannot read properties of null (reading 'x')"
        # An uncaught fault reads the same on both: kind, words, line and hint.
        uncaught = "const r = undefined;\nreturn r.items.length;"
        errors = [(await failed(client, uncaught, engine=engine))["error"] for engine in ("quickjs", "v8")]
        assert errors[0]["kind"] == errors[1]["kind"] == "runtime", errors
        assert errors[0]["message"] == errors[1]["message"], errors
        assert errors[0]["line"] == errors[1]["line"] == 2, errors
        # Heavy code runs on V8 to its end.
        heavy = "let s = 0; for (let i = 0; i < 20_000_000; i++) s += i % 7; return s;"
        assert (await run(client, heavy, engine="v8"))["result"] == sum(i % 7 for i in range(7)) * (20_000_000 // 7) + sum(range(20_000_000 % 7))
        # A name that is no engine says which are.
        bad = await client.call_tool("call_tool_chain", {"code": "return 1;", "engine": "spidermonkey"})
        assert bad.is_error and '"quickjs" or "v8"' in bad.content[0].text, bad


async def test_a_profile_fixed_to_quickjs_refuses_v8_naming_its_key(tmp_path):
    tokens = "".join(f'\n[[http.tokens]]\ntoken = "{token}"\nprofile = "{name}"\nname = "{name}"\n' for name, token in TOKENS.items())
    path = config(tmp_path, tokens + '\n[profiles.both]\ntools = ["*"]\nengine = "any"\n\n[profiles.quick]\ntools = ["*"]\nengine = "quickjs"\n')
    server = HttpServer(path)
    try:
        async with Client(server.target(headers=auth_headers(TOKENS["quick"])), mode="legacy", read_timeout_seconds=60) as quick:
            refused = await quick.call_tool("call_tool_chain", {"code": "return 1;", "engine": "v8"})
            assert refused.is_error, refused
            text = refused.content[0].text
            assert "profiles.quick" in text and 'engine = "any"' in text and "operator" in text, text
            assert (await run(quick, "return 1;", engine="quickjs"))["result"] == 1
        async with Client(server.target(headers=auth_headers(TOKENS["both"])), mode="legacy", read_timeout_seconds=60) as both:
            assert (await run(both, "return 2;", engine="v8"))["result"] == 2
    finally:
        server.close()


async def test_status_reports_the_v8_workers_and_their_protections(tmp_path):
    path = config(tmp_path, '\n[profiles.default]\ntools = ["*"]\nengine = "v8"\n')
    done = subprocess.run([SANDGATE, "status", "--config", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {line.split(":", 1)[0]: line for line in done.stdout.splitlines() if ":" in line}
    assert str(DENO) in lines["v8 engine"], done.stdout
    protections = lines["v8 engine protections"]
    for name in ("rlimits", "no_new_privs", "landlock", "empty_environment", "seccomp"):
        assert f"{name} on" in protections, protections
    # Without a profile or default that uses it, V8 is not started (and Deno is never needed).
    (tmp_path / "plain").mkdir()
    plain = config(tmp_path / "plain", '\n[profiles.default]\ntools = ["*"]\n')
    done = subprocess.run([SANDGATE, "status", "--config", str(plain)], capture_output=True, text=True, timeout=120)
    assert "v8 engine: off" in done.stdout, done.stdout


async def test_on_v8_a_loop_and_a_heap_past_their_limits_stop_and_the_gateway_goes_on(tmp_path):
    path = config(tmp_path, '\n[profiles.default]\ntools = ["*"]\nengine = "v8"\n')
    async with stdio(path) as client:
        neighbour = asyncio.create_task(run(client, "await new Promise((r) => setTimeout(r, 1500)); return 'neighbour';"))
        loop = await failed(client, "while (true) {}", timeout_ms=800)
        assert loop["error"]["kind"] == "timeout", loop
        # An isolate past its heap is stopped where it stands (SECURITY.md: on V8 it is reported
        # when its time is up); the process, and every other execution on it, goes on.
        bomb = await failed(client, "const keep = []; while (true) keep.push(new Array(100_000).fill(keep.length));", timeout_ms=1500)
        assert bomb["error"]["kind"] in ("memory", "timeout"), bomb
        buffers = await failed(client, "const kept = []; for (let i = 0; i < 100; i++) kept.push(new ArrayBuffer(256 * 1024 * 1024)); return kept.length;", timeout_ms=1500)
        assert buffers["error"]["kind"] == "memory" and "ArrayBuffer" in buffers["error"]["message"], buffers
        assert (await neighbour)["result"] == "neighbour"
        assert (await run(client, "return 'still serving';"))["result"] == "still serving"


async def test_on_v8_stopped_runs_lose_no_worker_when_the_gateway_logs_to_a_file(tmp_path):
    """Runs stopped while they wait (their deadline) and runs that end on their own, beside a
    neighbour, with the gateway's standard error a regular file. Workers may create no file
    (`RLIMIT_FSIZE` 0), so a worker writing to that file would be killed by the kernel, and the
    neighbour with it: the host gives each worker a pipe of its own and logs what comes through
    it, and the V8 worker has nothing to say (stopping an isolate once made Deno print an
    uncaught error from inside it)."""
    path = config(tmp_path, '\n[profiles.default]\ntools = ["*"]\nengine = "v8"\n')
    log_path = tmp_path / "gateway.log"
    params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(path)])
    with open(log_path, "w") as log:
        async with Client(stdio_client(params, errlog=log), mode="legacy", read_timeout_seconds=60) as client:
            stop = asyncio.Event()
            answers: list = []

            async def neighbour():
                while not stop.is_set():
                    answers.append(await client.call_tool("call_tool_chain", {"code": "await new Promise((r) => setTimeout(r, 50)); return 'mine';"}))

            beside = asyncio.create_task(neighbour())
            try:
                for _ in range(6):
                    waiting = await failed(client, "await new Promise((r) => setTimeout(r, 1e9));", timeout_ms=300)
                    assert waiting["error"]["kind"] == "timeout", waiting
                    never = await failed(client, "await new Promise(() => {});")
                    assert never["error"]["kind"] == "runtime", never
            finally:
                stop.set()
                await beside
    wrong = [a.content for a in answers if a.is_error or (a.structured_content or {}).get("result") != "mine"]
    assert answers and not wrong, f"{len(wrong)} of {len(answers)} neighbour answers wrong: {wrong[:3]}"
    said = log_path.read_text()
    assert "sandbox worker" not in said and "Uncaught" not in said, said[-3000:]


async def test_on_v8_ready_isolates_give_back_what_a_burst_of_heavy_runs_left(tmp_path):
    """An isolate collects a run's garbage only when it runs again, so after eight heavy runs at
    once every isolate kept ready would hold its run's leftovers (the worker grew by 175 MiB and
    stayed there). Once the worker is quiet, the ready ones may hold 16 MiB of leftovers between
    them, besides the one that serves next: the rest are ended, and the worker gives their
    memory back (it comes back to 35-50 MiB over where it started)."""
    path = config(tmp_path, '\n[profiles.default]\ntools = ["*"]\nengine = "v8"\n')
    path.write_text(path.read_text().replace("[sandbox]\n", "[sandbox]\nworkers = 1\n"))
    heavy = "let a = []; for (let i = 0; i < 40; i++) a.push(('x'.repeat(1e6) + i).split('').length); return a.length"
    async with stdio(path) as client:
        assert (await run(client, "return 1")).get("result") == 1
        gateway = find_gateway(path)

        def deno_mib() -> float:
            return sum(rss_kib(p) for p in children(gateway) if cmdline(p).startswith("deno run ")) / 1024

        await asyncio.sleep(2)  # the isolates kept ready have started
        before = deno_mib()
        for burst in range(2):
            answers = await asyncio.gather(*[run(client, f"{heavy} // {burst}.{i}") for i in range(8)])
            assert [a.get("result") for a in answers] == [40] * 8, answers
        await asyncio.sleep(3)
        for i in range(10):
            assert (await run(client, f"return {i}")).get("result") == i
        await asyncio.sleep(1)
        after = deno_mib()
    assert before > 0, "no Deno worker found under the gateway"
    assert after - before < 100, f"the V8 worker grew from {before:.0f} to {after:.0f} MiB after bursts of heavy runs"


async def test_code_that_times_out_computing_on_quickjs_is_pointed_at_v8(tmp_path):
    """A public benchmark's replay (issue 47): a naive search over a few thousand files timed
    out at 30 s on QuickJS and took 1.4 s on V8. A timeout with no call in flight says so: a
    caller that may choose is told `engine: "v8"`; one that may not, what the operator sets."""
    spin = "let n = 0;\nfor (let i = 0; i < 1e12; i++) n += i % 7;\nreturn n;"
    (tmp_path / "any").mkdir()
    async with stdio(config(tmp_path / "any", '\n[profiles.default]\ntools = ["*"]\nengine = "any"\n')) as client:
        error = (await failed(client, spin, timeout_ms=300))["error"]
        assert error["kind"] == "timeout" and 'engine: "v8"' in error["hint"], error
        waiting = (await failed(client, "await everything.trigger_long_running_operation({ duration: 5, steps: 5 });", timeout_ms=300))["error"]
        assert waiting["kind"] == "timeout" and "v8" not in waiting["hint"], "a wait for a call is not computing"
    (tmp_path / "plain").mkdir()
    plain = write_config(tmp_path / "plain", "toml", {"everything": reference_servers(tmp_path)["everything"]})
    async with stdio(plain) as client:
        error = (await failed(client, spin, timeout_ms=300))["error"]
        assert 'engine = "any"' in error["hint"] and "[profiles.default]" in error["hint"], error


def test_the_hosts_time_zone_never_reaches_either_engine(tmp_path):
    """The host says Tokyo (its /etc/localtime and the gateway's TZ, in a private mount
    namespace); `Date` and `Intl` say UTC on both engines (V8's `Intl` is ICU's own)."""
    code = tmp_path / "zone.ts"
    code.write_text("return [new Date(0).getTimezoneOffset(), Intl.DateTimeFormat().resolvedOptions().timeZone, "
                    "new Date(Date.UTC(2024, 0, 1, 23)).toLocaleString('en-US'), new Date(0).toString()];")
    probe = "date +%Z"
    for engine in ("quickjs", "v8"):
        cfg = tmp_path / f"{engine}.toml"
        cfg.write_text(f'[sandbox]\nengine = "{engine}"\ndeno = "{DENO}"\n')
        script = (f"mount --bind /usr/share/zoneinfo/Asia/Tokyo /etc/localtime && {probe} && "
                  f"TZ=Asia/Tokyo exec {SANDGATE} run --json --config {cfg} {code}")
        done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        zone, _, answer = done.stdout.partition("\n")
        assert zone == "JST", f"the namespace's host says Tokyo: {zone!r}"
        result = json.loads(answer)["value"]
        assert result[:3] == [0, "UTC", "1/1/2024, 11:00:00 PM"], (engine, result)
        assert result[3].startswith("Thu Jan 01 1970 00:00:00 GMT+0000"), (engine, result)
