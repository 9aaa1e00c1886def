"""The hostile-input harness: one `sandgate serve` over stdio, driven by the Python MCP SDK client,
in front of the real npm reference servers, with its process tree watched.

A `Case` is one hostile input and what containment means for it: the error kind it must end in,
the time it may take, the response size, and the peak RSS of the gateway and of its sandbox
workers. `Watched.run_case` sends it, measures all four while it runs (a sampler thread reads
/proc every 10 ms; the kernel's own peak counter is reset before each case), and then checks
that the gateway still answers a benign call with the right result. Failures are collected, not
raised one at a time, so one run shows every case that is not contained (DESIGN.md section 10).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment

from cluster import rss_kib  # noqa: F401 (the tests import it from here)
from conftest import SANDGATE, on_v8, reference_servers, write_config

# The response to any execution is at most max_output_size plus this (docs/call_tool_chain.md).
RESPONSE_SLACK = 8192
DEFAULT_MAX_OUTPUT = 20_000
# jemalloc hands freed pages back to the kernel at once (it keeps them for up to 10 s by
# default), so a case's peak RSS is what the gateway holds for it, not what an earlier case
# freed (a 20 MB result left about 40 MiB in the next case's peak).
FREED_PAGES_BACK_AT_ONCE = {"_RJEM_MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0"}
# Slack on every case's time limit: scheduling on a loaded 2-core machine.
TIME_SLACK_S = 0.25


@dataclass
class Case:
    """One hostile input and its containment."""

    name: str
    code: str | None = None
    # Extra call_tool_chain arguments (timeout_ms, max_output_size, ...).
    extra: dict = field(default_factory=dict)
    # Another meta-tool, with its arguments, instead of call_tool_chain.
    tool: str | None = None
    arguments: dict | None = None
    # The error kind the execution must end in; None: it must succeed; "any": an error of any kind
    # is containment (e.g. a protocol error for a malformed request).
    kind: str | None = "any"
    # Wall-clock limit, in seconds (TIME_SLACK_S is added).
    seconds: float = 2.0
    # Response size limit, in characters of the whole result's JSON.
    max_response: int | None = None
    # Peak RSS limits, in MiB: of the gateway process, and of any one worker.
    gateway_mib: float = 64
    worker_mib: float = 96
    # Extra check on (structuredContent or {}, text); returns a failure message or None.
    check: Callable[[dict, str], str | None] | None = None
    # What differs on the V8 engine, by field (e.g. {"kind": None}), each with its reason where
    # the case is written (SECURITY.md, "The V8 engine").
    on_v8: dict = field(default_factory=dict)

    def limit_chars(self) -> int:
        budget = self.extra.get("max_output_size", DEFAULT_MAX_OUTPUT)
        return self.max_response if self.max_response is not None else budget + RESPONSE_SLACK


def children(pid: int) -> list[int]:
    """Every child of `pid`, whichever of its threads started it."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(p) for p in f.read().split()]
        except FileNotFoundError:
            pass
    return found


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except FileNotFoundError:
        return ""


def find_gateway(config: Path) -> int:
    """The pid of the `sandgate serve` started for `config`."""
    deadline = time.time() + 10
    while time.time() < deadline:
        for entry in os.listdir("/proc"):
            if entry.isdigit() and "serve" in cmdline(int(entry)) and str(config) in cmdline(int(entry)):
                return int(entry)
        time.sleep(0.05)
    raise RuntimeError("sandgate serve did not start")


class Watched:
    """A gateway, its client, and its process tree."""

    def __init__(self, client: Client, pid: int, tmp_path: Path, engine: str = "quickjs"):
        self.client = client
        self.pid = pid
        self.tmp_path = tmp_path
        self.engine = engine
        # What a worker holds before any case: 0 on QuickJS, whose limits include it; a V8
        # worker's limit is what it holds at rest (Deno, its warm isolates) plus the case's.
        self.worker_baseline = 0.0
        self.failures: list[str] = []
        self.cases_run = 0

    def workers(self) -> list[int]:
        # A V8 worker is a sandgate worker that became Deno (`execve`).
        return [p for p in children(self.pid) if "__sandbox-worker" in cmdline(p) or cmdline(p).startswith("deno run ")]

    def reset_peaks(self):
        for pid in [self.pid, *self.workers()]:
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/clear_refs", "w") as f:
                    f.write("5")

    def gateway_rss_mib(self) -> float:
        return rss_kib(self.pid) / 1024

    def worker_rss_mib(self) -> list[float]:
        return [rss_kib(p) / 1024 for p in self.workers()]

    async def chain(self, code: str, **extra):
        return await self.client.call_tool("call_tool_chain", {"code": code, **extra})

    async def answers(self) -> str | None:
        """None when the gateway answers a benign execution correctly; else what went wrong."""
        try:
            result = await self.chain("return await everything.echo({message: 'still here'})")
        except Exception as e:  # noqa: BLE001 - any failure to answer is the finding
            return f"the gateway did not answer afterwards: {e!r}"
        data = result.structured_content or {}
        if data.get("result") != "Echo: still here":
            return f"the gateway answered wrongly afterwards: {text(result)[:300]}"
        return None

    async def run_case(self, case: Case):
        if self.engine == "v8" and case.on_v8:
            case = dataclasses.replace(case, **case.on_v8)
        self.cases_run += 1
        self.reset_peaks()
        peaks = {"gateway": 0.0, "worker": 0.0}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peaks["gateway"] = max(peaks["gateway"], self.gateway_rss_mib())
                peaks["worker"] = max([peaks["worker"], *self.worker_rss_mib()])
                stop.wait(0.01)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        error = None
        result = None
        try:
            if case.tool:
                result = await self.client.call_tool(case.tool, case.arguments or {})
            else:
                result = await self.chain(case.code, **case.extra)
        except Exception as e:  # noqa: BLE001 - a protocol error is an outcome to judge
            error = e
        elapsed = time.monotonic() - started
        stop.set()
        sampler.join()
        peaks["gateway"] = max(peaks["gateway"], rss_kib(self.pid, "VmHWM") / 1024)
        for pid in self.workers():
            peaks["worker"] = max(peaks["worker"], rss_kib(pid, "VmHWM") / 1024)

        problems = []
        if elapsed > case.seconds + TIME_SLACK_S:
            problems.append(f"took {elapsed:.2f} s, limit {case.seconds} s")
        if result is not None:
            size = len(json.dumps(result.model_dump(by_alias=True, exclude_none=True, mode="json"), ensure_ascii=False))
            if size > case.limit_chars():
                problems.append(f"response of {size} chars, limit {case.limit_chars()}")
            data = result.structured_content or {}
            kind = (data.get("error") or {}).get("kind") if data else None
            if case.kind is None and result.is_error:
                problems.append(f"expected success, got: {text(result)[:300]}")
            elif case.kind not in (None, "any") and kind != case.kind:
                problems.append(f"expected error kind {case.kind!r}, got {kind!r}: {text(result)[:300]}")
            elif case.kind == "any" and not result.is_error:
                problems.append(f"expected an error, got success: {text(result)[:200]}")
            if case.check:
                found = case.check(data, text(result))
                if found:
                    problems.append(found)
        elif case.kind not in ("any",):
            problems.append(f"protocol error instead of a result: {error!r}")
        if peaks["gateway"] > case.gateway_mib + self.gateway_baseline:
            problems.append(f"gateway peak RSS {peaks['gateway']:.0f} MiB, limit {self.gateway_baseline:.0f}+{case.gateway_mib} MiB")
        if peaks["worker"] > case.worker_mib + self.worker_baseline:
            problems.append(f"worker peak RSS {peaks['worker']:.0f} MiB, limit {self.worker_baseline:.0f}+{case.worker_mib} MiB")
        still = await self.answers()
        if still:
            problems.append(still)
        if os.environ.get("HOSTILE_VERBOSE"):
            kind = ((result.structured_content or {}).get("error") or {}).get("kind") if result else repr(error)[:60]
            size = len(json.dumps(result.model_dump(by_alias=True, exclude_none=True, mode="json"), ensure_ascii=False)) if result else 0
            print(f"{case.name:<50} {str(kind):<14} {elapsed:6.2f} s {size:>9} chars  gateway {peaks['gateway']:5.0f}/{self.gateway_baseline + case.gateway_mib:.0f} MiB  worker {peaks['worker']:5.0f}/{self.worker_baseline + case.worker_mib:.0f} MiB  {'FAIL' if problems else 'ok'}")
        if problems:
            self.failures.append(f"{case.name}: " + "; ".join(problems))

    def assert_all_contained(self):
        assert not self.failures, f"{len(self.failures)} of {self.cases_run} cases not contained:\n" + "\n".join(self.failures)


def text(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@contextlib.asynccontextmanager
async def watched_gateway(tmp_path: Path, extra_servers: dict | None = None, env: dict | None = None, engine: str = "quickjs"):
    """`sandgate serve` over stdio with the three reference servers (and `extra_servers`), its
    executions on `engine`."""
    servers = reference_servers(tmp_path)
    servers.update(extra_servers or {})
    config = write_config(tmp_path, "toml", servers)
    if engine == "v8":
        on_v8(config)
    params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(config)],
                                   env={**get_default_environment(), **FREED_PAGES_BACK_AT_ONCE, **(env or {})})
    async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
        gateway = Watched(client, find_gateway(config), tmp_path, engine)
        # Warm up: backends connected, workers started.
        assert await gateway.answers() is None
        gateway.gateway_baseline = gateway.gateway_rss_mib()
        if engine == "v8":
            await asyncio.sleep(1)  # the warm isolates are started
            gateway.worker_baseline = max(gateway.worker_rss_mib(), default=0.0) + V8_ISOLATES_MIB
        yield gateway


NEIGHBOURS = 3
# On V8 each execution in flight holds an isolate (about 12 MiB before it runs anything), and a
# stopped one inside a loop winds down for up to 2 s: a worker's limit counts this much for the
# isolates beside the case's (the neighbours', the ready ones, stopped ones still going).
V8_ISOLATES_MIB = 256


async def run_table(tmp_path: Path, cases: list[Case], engine: str = "quickjs"):
    """Every case through one gateway, while benign neighbours run beside them the whole time:
    executions that share the cases' workers (a worker holds many at once), each making a call,
    waiting on a timer and setting a global, and each checked for exactly its own answer."""
    async with watched_gateway(tmp_path, engine=engine) as gateway:
        stop = asyncio.Event()
        problems: list[str] = []
        answered = [0]

        async def neighbour(i: int):
            code = (f"const a = await everything.echo({{message: 'n{i}'}});"
                    f" await new Promise(r => setTimeout(r, 20)); globalThis.mine = {i};"
                    " return [a, globalThis.mine, typeof leaked];")
            while not stop.is_set():
                try:
                    result = await gateway.chain(code)
                except Exception as e:  # noqa: BLE001 - any failure is the finding
                    problems.append(f"neighbour {i} got no answer: {e!r}")
                    continue
                got = (result.structured_content or {}).get("result")
                if got != [f"Echo: n{i}", i, "undefined"]:
                    problems.append(f"neighbour {i} answered wrongly: {text(result)[:300]}")
                answered[0] += 1

        neighbours = [asyncio.create_task(neighbour(i)) for i in range(NEIGHBOURS)]
        try:
            # The neighbours are under way before the first case, and go on through the last.
            deadline = time.monotonic() + 30
            while answered[0] < NEIGHBOURS and time.monotonic() < deadline and not problems:
                await asyncio.sleep(0.01)
            before = answered[0]
            for case in cases:
                await gateway.run_case(case)
            during = answered[0] - before
        finally:
            stop.set()
            await asyncio.gather(*neighbours)
        gateway.assert_all_contained()
        assert not problems, f"{len(problems)} neighbour problems:\n" + "\n".join(problems[:10])
        assert before >= NEIGHBOURS and during > 0, f"the neighbours ran {before} times before the cases and {during} during them"

        # Every case was stopped by its own limits: no worker had to be killed.
        stats = json.loads((await gateway.client.read_resource("sandgate://stats")).contents[0].text)
        assert stats["sandbox"]["backstop_kills"] == 0, stats["sandbox"]
