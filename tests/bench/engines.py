"""Heavy code on each engine, end to end (issue 33).

Through the Python `mcp` client over stdio, each workload below is sent to `call_tool_chain` one
call at a time, after one call to warm up; the median wall time of `--rounds` calls is reported
per system, with the answer checked against the one every system must give (the workloads are
deterministic). The systems, in the same run, one after another:
- `quickjs`: sandgate (`--sandgate BIN`, default target/release/sandgate) on QuickJS;
- `v8`: the same binary with `[sandbox] engine = "v8"` (Deno from npm, which scripts/test
  installs under tests/node);
- `peer`: @utcp/code-mode 1.2.12, which runs code in V8 (isolated-vm), behind a stdio MCP server
  (tests/bench/peer/code_mode_server.mjs), with `--peer`. It needs Node 22 (scripts/test installs
  it under tests/node); the peer's packages are installed on first use.

`--bursts N` instead sends N copies of each heavy workload at once to the V8 engine, `--rounds`
times a workload with `--pace` seconds between bursts, and reports the median wall time of a
burst and the RSS of the Deno processes 3 s after the last one (ready isolates keep what
their runs left until they run again, issue 33).

`--concurrent N` instead sends N scripts at once to the V8 engine, each awaiting a 1-s tool (as
tests/bench/concurrent_scripts.py does for QuickJS), and reports the wall time and the peak RSS
of the gateway and of its Deno processes.

    .venv/bin/python tests/bench/engines.py --peer --rounds 5
    .venv/bin/python tests/bench/engines.py --concurrent 1000
    .venv/bin/python tests/bench/engines.py --bursts 8 --rounds 5 --pace 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(REPO / "tests" / "bench"))
from concurrent_scripts import (  # noqa: E402
    NODE22,
    PEER,
    SANDGATE_SCRIPT,
    WORKER_ARG,
    RssSampler,
    ensure_peer,
    peer_value,
    processes,
    rss_kib,
    run_batch,
    sandgate_value,
)
from conftest import NODE_MODULES, on_v8, reference_servers, write_config  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

# name, code, the answer. The code uses no tool, so the same text runs on every system.
WORKLOADS = [
    (
        "loop_5m",
        "let s = 0; for (let i = 0; i < 5000000; i++) s = (s + i * 7) % 1000003; return s;",
        None,
    ),
    (
        "sort_200k",
        "const a = []; let x = 1; for (let i = 0; i < 200000; i++) { x = (x * 1103515245 + 12345) % 2147483648; a.push(x); }"
        " a.sort((p, q) => p - q); return [a[0], a[100000], a[199999]];",
        None,
    ),
    (
        "json_20k",
        "const items = []; for (let i = 0; i < 20000; i++) items.push({ id: i, name: 'item ' + i, tags: ['a', 'b'], score: i / 2, on: i % 3 === 0 });"
        " const back = JSON.parse(JSON.stringify(items)); return back.length + back[19999].score;",
        None,
    ),
    (
        "regex_100k",
        "const lines = []; for (let i = 0; i < 100000; i++) lines.push(`2026-11-${(i % 28) + 1} INFO user${i % 97} did thing ${i}`);"
        " let n = 0; for (const m of lines.join('\\n').matchAll(/user(\\d+) did thing (\\d+)/g)) if (Number(m[1]) % 2 === 0) n += 1; return n;",
        None,
    ),
    (
        "group_100k",
        "const m = new Map(); for (let i = 0; i < 100000; i++) { const k = 'k' + (i % 1000); const l = m.get(k); if (l) l.push(i); else m.set(k, [i]); }"
        " let longest = 0; for (const l of m.values()) longest = Math.max(longest, l.length); return [m.size, longest];",
        None,
    ),
    ("trivial", "return 1;", 1),
]


def sandgate_params(binary: str, config: Path) -> StdioServerParameters:
    return StdioServerParameters(command=binary, args=["serve", "--config", str(config)], env=dict(os.environ, RUST_LOG="warn"))


def peer_params() -> StdioServerParameters:
    everything = str(NODE_MODULES / "server-everything" / "dist" / "index.js")
    return StdioServerParameters(
        command=str(NODE22 / "node"),
        args=[str(PEER / "code_mode_server.mjs"), everything],
        env=dict(os.environ, PATH=f"{NODE22}:{os.environ['PATH']}"),
    )


async def timed_call(client, code: str, read) -> tuple[float, object]:
    started = time.perf_counter()
    result = await client.call_tool("call_tool_chain", {"code": code})
    wall = time.perf_counter() - started
    return wall, read(result)


async def measure(name: str, params: StdioServerParameters, read, rounds: int, answers: dict, pace: float) -> dict:
    """Median milliseconds per workload, with `pace` seconds between calls (not counted); each
    answer must match the first system's. Every call's text is its own (a comment numbers it),
    as an agent's scripts differ: no engine serves a call from a cache of the same source."""
    medians = {}
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        for workload, code, expected in WORKLOADS:
            _, warm = await timed_call(client, f"{code}\n// warm-up", read)
            want = expected if expected is not None else answers.setdefault(workload, warm)
            if warm != want:
                raise SystemExit(f"{name} answered {workload} with {warm!r}, expected {want!r}")
            walls = []
            for call in range(rounds):
                await asyncio.sleep(pace)
                wall, value = await timed_call(client, f"{code}\n// call {call}", read)
                if value != want:
                    raise SystemExit(f"{name} answered {workload} with {value!r}, expected {want!r}")
                walls.append(wall * 1000)
            medians[workload] = statistics.median(walls)
            print(f"{name:<8} {workload:<11} median {medians[workload]:8.1f} ms  (min {min(walls):.1f}, max {max(walls):.1f}, {rounds} calls)", flush=True)
    return medians


def v8_config(tmp: Path, servers: dict, extra: str = "") -> Path:
    sub = tmp / "v8"
    sub.mkdir(exist_ok=True)
    return on_v8(write_config(sub, "toml", servers), extra)


async def concurrent(binary: str, config: Path, n: int):
    """N scripts at once on V8, each awaiting a 1-s tool: the wall time and the peak RSS of the
    gateway and of its worker processes (QuickJS's and Deno's)."""
    sampler = RssSampler(str(config), is_worker=lambda cmd: WORKER_ARG in cmd or cmd.startswith("deno run "))
    async with Client(sandgate_params(binary, config), mode="legacy", read_timeout_seconds=600) as client:
        await run_batch(client, SANDGATE_SCRIPT, 1, sandgate_value)
        with sampler:
            wall, right = await run_batch(client, SANDGATE_SCRIPT, n, sandgate_value)
    print(
        f"v8 {n} concurrent 1-s scripts: {wall:.2f} s wall, {right}/{n} right; peak RSS: "
        f"gateway {sampler.peak_gateway / 1024:.1f} MiB, worker processes {sampler.peak_workers / 1024:.1f} MiB",
        flush=True,
    )


def workers_mib(marker: str) -> float:
    """The summed RSS of the Deno processes under the gateway whose command line holds `marker`."""
    procs = processes()
    gateways = {p for p, _, cmd in procs if marker in cmd and WORKER_ARG not in cmd}
    return sum(rss_kib(p) for p, parent, cmd in procs if parent in gateways and cmd.startswith("deno run ")) / 1024


async def bursts(binary: str, config: Path, n: int, rounds: int, pace: float):
    """`n` copies of each heavy workload at once on V8, `rounds` times: the median wall time of a
    burst, and the Deno processes' RSS at the start and 3 s after the last burst."""
    async with Client(sandgate_params(binary, config), mode="legacy", read_timeout_seconds=120) as client:
        await client.call_tool("call_tool_chain", {"code": "return 1"})
        await asyncio.sleep(2)
        start = workers_mib(str(config))
        for workload, code, _ in WORKLOADS[:-1]:
            walls = []
            for burst in range(rounds):
                await asyncio.sleep(pace)
                started = time.perf_counter()
                results = await asyncio.gather(*[client.call_tool("call_tool_chain", {"code": f"{code}\n// {burst}.{i}"}) for i in range(n)])
                walls.append((time.perf_counter() - started) * 1000)
                wrong = [r for r in results if r.is_error]
                if wrong:
                    raise SystemExit(f"{workload}: {len(wrong)} of {n} failed: {wrong[0].content}")
            print(f"| {workload} | {statistics.median(walls):.1f} ms |", flush=True)
        await asyncio.sleep(3)
        print(f"Deno processes' RSS: {start:.0f} MiB at the start, {workers_mib(str(config)):.0f} MiB 3 s after", flush=True)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sandgate", default=str(REPO / "target" / "release" / "sandgate"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--peer", action="store_true")
    parser.add_argument("--pace", type=float, default=0.0, help="seconds between two calls, e.g. 0.25 (an agent's turns are seconds apart)")
    parser.add_argument("--concurrent", type=int)
    parser.add_argument("--bursts", type=int, help="N copies of each heavy workload at once, on V8")
    parser.add_argument("--sandbox", nargs="*", default=[], help="more `[sandbox]` settings for the V8 run, e.g. max_workers=8")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sandgate-engines-"))
    servers = {"everything": reference_servers(tmp)["everything"]}
    v8 = v8_config(tmp, servers, "".join(f"{s}\n" for s in args.sandbox))
    if args.concurrent:
        await concurrent(args.sandgate, v8, args.concurrent)
        return
    if args.bursts:
        await bursts(args.sandgate, v8, args.bursts, args.rounds, args.pace)
        return
    quickjs = write_config(tmp, "toml", servers)
    answers: dict = {}
    figures = {"quickjs": await measure("quickjs", sandgate_params(args.sandgate, quickjs), sandgate_value, args.rounds, answers, args.pace)}
    figures["v8"] = await measure("v8", sandgate_params(args.sandgate, v8), sandgate_value, args.rounds, answers, args.pace)
    if args.peer:
        ensure_peer()
        figures["peer"] = await measure("peer", peer_params(), peer_value, args.rounds, answers, args.pace)
    print("\n| workload | " + " | ".join(figures) + " |")
    print("|---|" + "---|" * len(figures))
    for workload, _, _ in WORKLOADS:
        print(f"| {workload} | " + " | ".join(f"{figures[s][workload]:.1f} ms" for s in figures) + " |")
    print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main())
