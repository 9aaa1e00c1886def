"""Hostile and broken backends, one per case, each next to the real `server-everything`.

Every case starts its own `sandgate serve` (stdio) with `everything` and one backend from
tests/fixtures/hostile_backend.py that does the case's harm when its `trigger` tool is called
(result and list cases) or from its first message (startup cases). While the harm happens, a
probe calls `everything.echo` through `call_tool_chain` every 25 ms. Each case checks:

- the gateway's peak RSS (the kernel's high-water mark and a 10 ms sampler) and its RSS after;
- that the healthy backend's calls stay fast while the case runs (p99 within 100 ms of the
  p99 measured just before it);
- the error text the client sees (and that the response is bounded);
- that the gateway and the healthy backend still answer afterwards.

Failures are collected and reported together (HOSTILE_VERBOSE=1 prints a line per case). A
case that fails is run once more, and counts as failed only if it fails again.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import REPO, SANDGATE, reference_servers, write_config
from hostile import find_gateway, rss_kib, text

pytestmark = pytest.mark.anyio

HOSTILE = REPO / "tests" / "fixtures" / "hostile_backend.py"
CHECKER = REPO / "tests" / "node" / "check_declarations.js"
PROBE = "return await everything.echo({message: 'probe'})"
PROBE_EVERY_S = 0.025
# A response to any call_tool_chain is at most max_output_size (20,000) plus 12 KiB.
MAX_RESPONSE = 20_000 + 12 * 1024 + 2_000


@dataclass
class Outcome:
    """What the client saw when the case's harm was done."""

    text: str
    structured: dict
    response_chars: int
    is_error: bool


Check = Callable[["Gateway", Outcome], Awaitable[str | None]]


@dataclass
class BackendCase:
    name: str
    kind: str  # "call", "list" or "startup"
    check: Check
    config: dict | None = None
    code: str = "return await hostile.trigger({})"
    timeout_ms: int | None = None
    seconds: float = 10.0
    gateway_mib: float = 64.0
    after_mib: float = 24.0
    # Tells two cases of the same backend behaviour apart.
    variant: str = ""

    @property
    def label(self) -> str:
        return f"{self.name}_{self.variant}" if self.variant else self.name


class Gateway:
    def __init__(self, client: Client, pid: int, tmp_path: Path):
        self.client = client
        self.pid = pid
        self.tmp_path = tmp_path

    async def chain(self, code: str, **extra) -> Outcome:
        result = await self.client.call_tool("call_tool_chain", {"code": code, **extra})
        dumped = json.dumps(result.model_dump(by_alias=True, exclude_none=True, mode="json"), ensure_ascii=False)
        return Outcome(text(result), result.structured_content or {}, len(dumped), bool(result.is_error))

    async def tool(self, name: str, arguments: dict) -> Outcome:
        result = await self.client.call_tool(name, arguments)
        dumped = json.dumps(result.model_dump(by_alias=True, exclude_none=True, mode="json"), ensure_ascii=False)
        return Outcome(text(result), result.structured_content or {}, len(dumped), bool(result.is_error))

    async def status(self) -> dict:
        return json.loads((await self.client.read_resource("sandgate://backend/hostile")).contents[0].text)

    async def wait_for(self, predicate: Callable[[dict], bool], seconds: float = 15) -> dict:
        deadline = time.monotonic() + seconds
        status = await self.status()
        while not predicate(status) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            status = await self.status()
        return status

    async def probe_once(self) -> float:
        started = time.monotonic()
        outcome = await self.chain(PROBE)
        if outcome.structured.get("result") != "Echo: probe":
            raise AssertionError(f"the healthy backend answered wrongly: {outcome.text[:200]}")
        return time.monotonic() - started

    def rss_mib(self, field: str = "VmRSS") -> float:
        return rss_kib(self.pid, field) / 1024


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


# ---- checks -------------------------------------------------------------------------------


def error_says(*needles: str) -> Check:
    async def check(g: Gateway, o: Outcome) -> str | None:
        if not o.is_error:
            return f"expected an error, got: {o.text[:200]}"
        missing = [n for n in needles if n not in o.text]
        return f"error lacks {missing}: {o.text[:400]}" if missing else None
    return check


def result_is(expected) -> Check:
    async def check(g: Gateway, o: Outcome) -> str | None:
        got = o.structured.get("result")
        return None if got == expected else f"expected result {expected!r}, got {str(got)[:200]!r}: {o.text[:200]}"
    return check


def content_kept(*needles: str) -> Check:
    """A result with an item of a type MCP does not define keeps the rest, and says what it
    left out."""
    async def check(g: Gateway, o: Outcome) -> str | None:
        if o.is_error:
            return f"the whole result was refused: {o.text[:300]}"
        shown = json.dumps(o.structured.get("result"))
        missing = [n for n in needles if n.replace('"', '\\"') not in shown and n not in shown]
        return f"the result lacks {missing}: {shown[:300]}" if missing else None
    return check


def bounded_error() -> Check:
    async def check(g: Gateway, o: Outcome) -> str | None:
        return None if o.is_error else f"expected an error, got: {o.text[:200]}"
    return check


BASE_TOOLS = ["count", "ok", "trigger"]


async def relisted(g: Gateway, o: Outcome) -> dict:
    """The backend's status once the re-fetch the trigger caused has landed."""
    if o.structured.get("result") != "armed":
        raise AssertionError(f"the trigger did not arm: {o.text[:300]}")
    return await g.wait_for(lambda s: s["state"] == "ready" and (sorted(s["tools"]) != BASE_TOOLS or s["tool_problems"]), 15)


def problem_says(tool: str, needle: str, kept: bool) -> Check:
    async def check(g: Gateway, o: Outcome) -> str | None:
        status = await relisted(g, o)
        problems = {p["tool"]: p["problem"] for p in status.get("tool_problems", [])}
        shown = tool if len(tool) <= 100 else tool[:100] + "…"
        if needle not in problems.get(shown, ""):
            return f"no problem {needle!r} for {shown[:40]!r}: {json.dumps(problems)[:400]}"
        if (shown in status["tools"] or tool in status["tools"]) != kept:
            return f"{shown[:40]} should {'be kept' if kept else 'be dropped'}: {status['tools'][:10]}"
        sibling = await g.chain("return await hostile.ok({})")
        if sibling.structured.get("result") != "ok":
            return f"a sibling tool stopped working: {sibling.text[:200]}"
        return None
    return check


def list_problem(needle: str) -> Check:
    async def check(g: Gateway, o: Outcome) -> str | None:
        status = await relisted(g, o)
        if not any(needle in p["problem"] for p in status.get("tool_problems", [])):
            return f"no list problem {needle!r}: {json.dumps(status.get('tool_problems'))[:400]}"
        return None
    return check


async def problems_bounded(g: Gateway, o: Outcome) -> str | None:
    status = await relisted(g, o)
    problems = status.get("tool_problems", [])
    size = len(json.dumps(status))
    if len(problems) != 101 or "199900 more problems" not in problems[-1]["problem"]:
        return f"{len(problems)} problems kept, the last {json.dumps(problems[-1:])[:300]}"
    if size > 40_000:
        return f"the status is {size} bytes"
    return None


async def tool_info_bounded(g: Gateway, o: Outcome) -> str | None:
    status = await relisted(g, o)
    found = await g.tool("tool_info", {"name": "hostile.wide_schema"})
    searched = await g.tool("search_tools", {"query": "wide schema", "detail": "full"})
    for what, outcome in (("tool_info", found), ("search_tools", searched)):
        if outcome.response_chars > 60_000:
            return f"{what} answered {outcome.response_chars} chars"
    if "wide_schema" not in status["tools"]:
        return "the wide tool was dropped"
    return None


async def description_bounded(g: Gateway, o: Outcome) -> str | None:
    status = await relisted(g, o)
    found = await g.tool("tool_info", {"name": "hostile.long_description"})
    if found.response_chars > 60_000:
        return f"tool_info answered {found.response_chars} chars"
    if not any("max_description_chars" in p["problem"] for p in status["tool_problems"]):
        return "the cut description is not reported"
    return None


async def long_word_searchable(g: Gateway, o: Outcome) -> str | None:
    await relisted(g, o)
    found = await g.tool("search_tools", {"query": "find"})
    return None if "long_word" in found.text else f"search misses the tool: {found.text[:200]}"


async def colliding_names_reachable(g: Gateway, o: Outcome) -> str | None:
    await relisted(g, o)
    both = await g.chain('return [await hostile.get_sum({}), await hostile["get-sum"]({}), await hostile.get_sum_2({})]')
    return None if both.structured.get("result") == ["get_sum", "get-sum", "get-sum"] else both.text[:300]


async def declarations_check(g: Gateway, o: Outcome) -> str | None:
    await relisted(g, o)
    return await declarations_parse(g)


async def declarations_parse(g: Gateway) -> str | None:
    """None when the real TypeScript compiler finds `types.d.ts` valid and only declaring."""
    declarations = (await g.client.read_resource("sandgate://types.d.ts")).contents[0].text
    path = g.tmp_path / "types.d.ts"
    path.write_text(declarations)
    checked = await asyncio.to_thread(
        subprocess.run, ["node", str(CHECKER), str(path)], capture_output=True, text=True, timeout=120)
    return None if checked.returncode == 0 else checked.stdout[:600]


async def old_list_kept(g: Gateway, o: Outcome) -> str | None:
    if o.structured.get("result") != "armed":
        return f"the trigger did not arm: {o.text[:200]}"
    await asyncio.sleep(1.5)
    again = await g.chain("return await hostile.ok({})")
    return None if again.structured.get("result") == "ok" else f"the backend was lost: {again.text[:200]}"


async def flood_coalesced(g: Gateway, o: Outcome) -> str | None:
    await asyncio.sleep(3)
    served = await g.chain("return await hostile.count({})")
    count = int(served.structured.get("result", "0"))
    return None if count <= 5 else f"{count} tools/list requests for a 2 s flood"


async def answered_after_start(g: Gateway, o: Outcome) -> str | None:
    status = await g.wait_for(lambda s: s["state"] == "ready", 20)
    if status["state"] != "ready":
        return f"the slow backend never became ready: {status}"
    return None


def state_named(*needles: str) -> Check:
    """The backend is not ready: the error's kind says so (`unavailable`, not a ReferenceError
    with the state in its hint), and its message names the state and when to retry."""
    async def check(g: Gateway, o: Outcome) -> str | None:
        error = o.structured.get("error") or {}
        if error.get("kind") != "unavailable":
            return f"error kind {error.get('kind')!r}, not unavailable: {o.text[:400]}"
        missing = [n for n in needles if n not in error.get("message", "")]
        if missing:
            return f"the error does not name the state {missing}: {o.text[:400]}"
        return None if "again in" in error.get("hint", "") else f"no retry time: {o.text[:400]}"
    return check


# ---- the cases ----------------------------------------------------------------------------

CASES = [
    # Results.
    BackendCase("result_20mb", "call", error_says("max_result_bytes", "still running")),
    BackendCase("result_200mb", "call", error_says("max_result_bytes", "209715"), seconds=20),
    BackendCase("result_5000_deep", "call", error_says("nests deeper than 100 levels")),
    BackendCase("result_not_utf8", "call", error_says("not valid UTF-8")),
    BackendCase("result_lone_surrogate", "call", result_is("cut \ufffd")),
    BackendCase("result_video", "call", content_kept("before the video", '"video" was not passed on')),
    BackendCase("result_not_an_object", "call", error_says("not a valid MCP tool result")),
    BackendCase("error_1mb_message", "call", error_says("more characters not shown")),
    # A result costs the gateway a few times its size while it is parsed, shaped and stored.
    BackendCase("tool_error_10mb", "call", bounded_error(), gateway_mib=128),
    # Many tiny items cost far more parsed than as text: 100,000 items (4 MB) peak near 200 MiB.
    BackendCase("result_100k_items", "call", lambda g, o: _succeeds(o), gateway_mib=256),
    BackendCase("hang", "call", error_says("ran out of time", "hostile.trigger"), timeout_ms=2000, seconds=4),
    BackendCase("hang", "call", error_says("timed out after 2s", "stuck"), config={"timeout": "2s"}, seconds=4,
                variant="backend_timeout"),
    BackendCase("crash_mid_call", "call", error_says("went away")),
    BackendCase("stdout_garbage_then_silence", "call", error_says("3 line(s) to stdout that are not MCP messages"),
                config={"timeout": "2s"}, seconds=4),
    BackendCase("stdout_noise_flood", "call", result_is("after the noise")),
    BackendCase("notification_flood", "call", result_is("after the notifications")),
    BackendCase("unknown_notification_flood", "call", result_is("after the notifications")),
    BackendCase("request_from_backend", "call", result_is("after asking")),
    BackendCase("unknown_response_id", "call", result_is("answered")),
    BackendCase("duplicate_response", "call", result_is("first")),
    BackendCase("stderr_256mb_no_newline", "call", result_is("after the stderr"), seconds=20),
    BackendCase("stderr_not_utf8", "call", result_is("after the stderr")),
    BackendCase("stdout_15mb_line_then_small", "call", lambda g, o: _succeeds(o), gateway_mib=128),
    # Lists, fetched again after the trigger's list_changed.
    BackendCase("list_endless_pages", "list", list_problem("max_list_pages")),
    # 20,000 tools (max_tools) are kept: the catalog, its index, declarations and the cache
    # copy of a list that size hold about 8 KB a tool.
    # The 20,000 tools kept hold about 4 KB each; what the listing held beyond them comes back
    # (the gateway used to stay 160 to 180 MiB larger, most of it freed memory never returned).
    BackendCase("list_50k_tools", "list", list_problem("max_tools"), gateway_mib=256, after_mib=100),
    BackendCase("list_no_input_schema", "list", problem_says("no_schema", "no inputSchema", kept=False)),
    BackendCase("list_string_input_schema", "list", problem_says("string_schema", "not an object", kept=False)),
    BackendCase("list_schema_80_deep", "list", problem_says("deep_schema", "shown as unknown", kept=True)),
    BackendCase("list_schema_5000_deep", "list", problem_says("very_deep_schema", "shown as unknown", kept=True)),
    BackendCase("list_schema_10k_properties", "list", problem_says("wide_schema", "max_schema_bytes", kept=True)),
    BackendCase("list_schema_5k_properties", "list", tool_info_bounded),
    BackendCase("list_description_5mb", "list", description_bounded),
    BackendCase("list_name_100kb", "list", problem_says("n" * 100_000, "bytes, over the 256", kept=False)),
    BackendCase("list_word_40k", "list", long_word_searchable),
    BackendCase("list_duplicate_names", "list", problem_says("ok", "listed twice", kept=True)),
    BackendCase("list_colliding_names", "list", colliding_names_reachable),
    BackendCase("list_hostile_names", "list", declarations_check),
    BackendCase("list_colliding_properties", "list", declarations_check),
    BackendCase("list_huge_annotations", "list", lambda g, o: _relisted_ok(g, o, "annotated")),
    BackendCase("list_not_objects", "list", list_problem("not an object")),
    # 200,000 tools that cannot be used are 200,000 problems: the first 100 are kept, the rest
    # counted, so the status stays small.
    BackendCase("list_200k_unusable", "list", problems_bounded, gateway_mib=256),
    BackendCase("list_error", "list", old_list_kept),
    BackendCase("list_changed_flood", "list", flood_coalesced),
    # Startup.
    BackendCase("slow_initialize", "startup", answered_after_start, seconds=20),
    BackendCase("hang_tools_list", "startup", state_named("hostile", "sandgate://backend/hostile"),
                config={"handshake_timeout": "2s"}, code="return await hostile.ok({})", seconds=15),
    BackendCase("exit_at_start", "startup", state_named("restarting", "next attempt"),
                code="await new Promise(r => setTimeout(r, 1500)); return await hostile.ok({})", seconds=15),
]


async def _succeeds(o: Outcome) -> str | None:
    if o.is_error:
        return f"expected success: {o.text[:300]}"
    if o.response_chars > MAX_RESPONSE:
        return f"response of {o.response_chars} chars"
    return None


async def _relisted_ok(g: Gateway, o: Outcome, tool: str) -> str | None:
    status = await relisted(g, o)
    return None if tool in status["tools"] else f"{tool} was dropped: {status['tools']}"


async def run_case(tmp_path: Path, case: BackendCase) -> list[str]:
    servers = {"everything": reference_servers(tmp_path)["everything"]}
    servers["hostile"] = {"command": sys.executable, "args": [str(HOSTILE), case.name], **(case.config or {})}
    config = write_config(tmp_path, "toml", servers)
    params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(config)])
    problems: list[str] = []
    async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
        g = Gateway(client, find_gateway(config), tmp_path)
        if case.kind != "startup":
            await g.wait_for(lambda s: s["state"] == "ready", 20)
        for _ in range(20):  # warm up: workers started, paths taken once
            await g.probe_once()
        baseline = [await g.probe_once() for _ in range(30)]
        rss_before = g.rss_mib()
        with open(f"/proc/{g.pid}/clear_refs", "w") as f:
            f.write("5")
        peak = [0.0]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], g.rss_mib())
                stop.wait(0.01)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        during: list[float] = []
        probing = asyncio.Event()

        async def probe():
            while not probing.is_set():
                try:
                    during.append(await g.probe_once())
                except Exception as e:  # noqa: BLE001 - a failed probe is the finding
                    problems.append(f"the healthy backend failed during the case: {e!r}")
                    return
                await asyncio.sleep(PROBE_EVERY_S)

        prober = asyncio.create_task(probe())
        started = time.monotonic()
        extra = {"timeout_ms": case.timeout_ms} if case.timeout_ms else {}
        try:
            outcome = await g.chain(case.code, **extra)
            elapsed = time.monotonic() - started
            found = await case.check(g, outcome)
            if found:
                problems.append(found)
            if outcome.response_chars > MAX_RESPONSE:
                problems.append(f"response of {outcome.response_chars} chars")
            if elapsed > case.seconds:
                problems.append(f"took {elapsed:.1f} s, limit {case.seconds} s")
        except Exception as e:  # noqa: BLE001 - a protocol failure is the finding
            problems.append(f"the client got a protocol error: {e!r}")
        probing.set()
        await prober
        stop.set()
        sampler.join()
        peak_mib = max(peak[0], g.rss_mib("VmHWM"))
        if case.kind == "list":
            # Whatever the list held, the declarations still parse and only declare.
            found = await declarations_parse(g)
            if found:
                problems.append(f"types.d.ts: {found}")
        await asyncio.sleep(2.0)
        after = [await g.probe_once() for _ in range(5)]
        rss_after = g.rss_mib()
        limit = p99(baseline) + 0.1
        if during and p99(during) > limit:
            problems.append(f"healthy p99 {p99(during) * 1000:.0f} ms during the case, baseline {p99(baseline) * 1000:.0f} ms")
        if peak_mib > rss_before + case.gateway_mib:
            problems.append(f"gateway peak RSS {peak_mib:.0f} MiB, started at {rss_before:.0f} (+{case.gateway_mib} allowed)")
        if rss_after > rss_before + case.after_mib:
            problems.append(f"gateway RSS after {rss_after:.0f} MiB, started at {rss_before:.0f} (+{case.after_mib} allowed)")
        if os.environ.get("HOSTILE_VERBOSE"):
            print(f"{case.label:<32} {time.monotonic() - started:6.2f} s  probes {len(during):4} p99 {p99(during or [0]) * 1000:5.0f} ms"
                  f" (base {p99(baseline) * 1000:4.0f})  RSS {rss_before:4.0f}→peak {peak_mib:4.0f}→{rss_after:4.0f} MiB  after {max(after) * 1000:4.0f} ms"
                  f"  {'FAIL ' + '; '.join(problems) if problems else 'ok'}")
    return [f"{case.label}: {p}" for p in problems]


@pytest.mark.parametrize("case", ["slow_initialize", "hang_tools_list"])
async def test_a_slow_backend_does_not_hold_up_the_first_tools_list(tmp_path, case):
    """A client that connects while a backend takes 8 s to answer `initialize` (or never
    answers `tools/list`), with nothing cached, gets `tools/list` at once with what is known;
    the slow one is announced with `tools/list_changed` when it comes up."""
    changed = []

    async def on_message(message):
        if type(message).__name__ == "ToolListChangedNotification":
            changed.append(time.monotonic())

    servers = {"everything": reference_servers(tmp_path)["everything"],
               "hostile": {"command": sys.executable, "args": [str(HOSTILE), case], "handshake_timeout": "20s"}}
    config = write_config(tmp_path, "toml", servers)
    params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(config)])
    started = time.monotonic()
    async with Client(params, mode="legacy", read_timeout_seconds=60, message_handler=on_message) as client:
        listed = await client.list_tools()
        took = time.monotonic() - started
        assert took < 3, f"tools/list took {took:.1f} s with a slow backend starting"
        assert any(t.name == "call_tool_chain" for t in listed.tools)
        # The healthy backend is there meanwhile.
        result = await client.call_tool("call_tool_chain", {"code": PROBE})
        assert (result.structured_content or {}).get("result") == "Echo: probe", text(result)
        if case == "slow_initialize":
            with anyio.fail_after(20):
                while not changed or not any(t.name == "search_tools" and "hostile" in (t.description or "")
                                             for t in (await client.list_tools()).tools):
                    await anyio.sleep(0.2)
            assert changed, "no tools/list_changed when the slow backend came up"


@pytest.mark.parametrize("kind", ["call", "list", "startup"])
async def test_hostile_backend_class(tmp_path, kind):
    cases = [c for c in CASES if c.kind == kind]
    failures: list[str] = []
    for case in cases:
        case_dir = tmp_path / case.label
        case_dir.mkdir()
        found = await run_case(case_dir, case)
        if found:
            # A 2-core machine hiccups now and then (a probe's p99 over a few samples is its
            # slowest one): a case counts as failed when it fails twice in a row.
            retry_dir = tmp_path / (case.label + "_retry")
            retry_dir.mkdir()
            found = await run_case(retry_dir, case)
        failures += found
    assert not failures, f"{len(failures)} problem(s) in {len(cases)} {kind} cases:\n" + "\n".join(failures)


def test_the_table_covers_every_class():
    assert len(CASES) >= 40
    assert {c.kind for c in CASES} == {"call", "list", "startup"}


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("case", ["grandchild_in_group", "grandchild_setsid"])
async def test_a_backends_processes_end_with_it_even_after_setsid(tmp_path, case):
    """A backend's grandchild, in its process group or escaped with `setsid`, ends when the
    backend restarts and when the gateway shuts down."""
    pids = tmp_path / "grandchildren"
    servers = {"hostile": {"command": sys.executable, "args": [str(HOSTILE), case],
                           "env": {"GRANDCHILD_PID_FILE": str(pids)}}}
    config = write_config(tmp_path, "toml", servers)
    params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(config)])
    async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
        g = Gateway(client, find_gateway(config), tmp_path)
        await g.wait_for(lambda s: s["state"] == "ready", 20)
        first = int(pids.read_text().split()[0])
        assert alive(first)
        await g.chain("return await hostile.trigger({})")  # the backend exits; it is restarted
        status = await g.wait_for(lambda s: s["state"] == "ready" and s["restarts"] >= 1, 20)
        assert status["restarts"] >= 1, status
        deadline = time.monotonic() + 5
        while alive(first) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not alive(first), "the first run's grandchild ended with it"
        while os.path.exists(f"/proc/{first}") and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not os.path.exists(f"/proc/{first}"), "and was reaped, not left a zombie"
        second = int(pids.read_text().split()[-1])
        assert second != first and alive(second)
    deadline = time.monotonic() + 5
    while alive(second) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not alive(second), "the grandchild ended with the gateway"
