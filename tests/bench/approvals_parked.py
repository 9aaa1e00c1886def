"""1,000 scripts waiting on approvals at once (issue 30): what they hold, and how fast the gateway
answers a trivial call meanwhile.

One `sandgate serve --http` (the build given) in front of the fake backend, whose `echo` needs a
person's approval (`approve = ["echo"]`). N stateless 2026-07-28 clients that declare elicitation
each run a script that calls `fake.echo`: each is answered with an input-required result, and
its script stays parked on the gateway, waiting for the answer. Then, while all N wait, a
trivial call (`{"tool": "fake.pid"}`, the JSON tier, no approval) is timed M times, one after
another, beside the same call timed before any script waited. Then every question is answered
yes through the clients' retries, and every script must finish with its result.

Printed: the time to park N, the questions waiting and executions in flight (from /metrics), the
gateway's and its workers' resident memory before and while N wait, the trivial call's p50/p99
before and during, and the time to answer all N. The memory admission limits are the sandbox's
executions in flight (2,048 by default) and parked memory (1 GiB per worker); the questions
waiting are bounded by `[approvals] max_waiting`.

    .venv/bin/python tests/bench/approvals_parked.py target/release/sandgate [N] [M]
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import httpx2 as httpx  # noqa: E402
from conftest import fake_backend_toml  # noqa: E402
from http_throughput import start  # noqa: E402
from rawhttp import rss_mib  # noqa: E402

TOKEN = "bench-approvals-token-000000000001"
ASKS = {"elicitation": {"form": {}}}
# A script that builds some state of its own, then waits on the approval-gated call: it runs in
# the sandbox (not a shortcut tier), and its heap is parked while it waits.
SCRIPT = """const items = [];
for (let i = 0; i < 200; i++) items.push({ i, note: "item " + i });
const shipped = await fake.echo({ text: "ship " + items.length });
return { shipped, items: items.length };"""


def body(code: str, capabilities: dict, request_id: int, **params) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
        "name": "call_tool_chain", "arguments": {"code": code}, **params,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": capabilities}}}


HEADERS = {"authorization": f"Bearer {TOKEN}", "accept": "application/json, text/event-stream",
           "content-type": "application/json", "mcp-protocol-version": "2026-07-28",
           "mcp-method": "tools/call", "mcp-name": "call_tool_chain"}


def message(response) -> dict:
    text = response.text
    if "event-stream" in response.headers.get("content-type", ""):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return json.loads(data[-1])
    return json.loads(text)


def workers_mib(pid: int) -> float:
    """The sandbox workers' resident memory, summed: the gateway's children that run its own
    binary (the backends run others)."""
    own = Path(f"/proc/{pid}/exe").resolve()
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                if Path(f"/proc/{child}/exe").resolve() == own:
                    total += rss_mib(int(child))
            except OSError:
                pass
    return total


def gauge(url: str, name: str) -> float:
    text = httpx.get(url.replace("/mcp", "/metrics"), headers={"authorization": f"Bearer {TOKEN}"}, timeout=10).text
    found = re.search(rf"^{name} ([0-9.]+)$", text, re.M)
    return float(found.group(1)) if found else -1


def trivial_latencies(url: str, count: int) -> list[float]:
    times = []
    with httpx.Client(timeout=30) as client:
        for i in range(count):
            started = time.perf_counter()
            reply = client.post(url, headers=HEADERS, json=body(json.dumps({"tool": "fake.pid"}), {}, i))
            times.append((time.perf_counter() - started) * 1000)
            assert "isError\":true" not in reply.text, reply.text[:300]
    return times


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def park_all(url: str, n: int) -> list[dict]:
    limits = httpx.Limits(max_connections=64)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        async def one(i):
            reply = await client.post(url, headers=HEADERS, json=body(SCRIPT, ASKS, i))
            result = message(reply)["result"]
            assert result.get("resultType") == "input_required", result
            return result
        return await asyncio.gather(*(one(i) for i in range(n)))


async def answer_all(url: str, asked: list[dict]) -> int:
    limits = httpx.Limits(max_connections=64)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        async def one(i, result):
            answers = {key: {"action": "accept"} for key in result["inputRequests"]}
            reply = await client.post(url, headers=HEADERS, json=body(
                SCRIPT, ASKS, i, requestState=result["requestState"], inputResponses=answers))
            done = message(reply)["result"]
            return int(not done.get("isError") and done.get("structuredContent", {}).get("status") == "ok")
        return sum(await asyncio.gather(*(one(i, r) for i, r in enumerate(asked))))


def main():
    binary = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    m = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    tmp = Path(tempfile.mkdtemp())
    config = tmp / "sandgate.toml"
    config.write_text(fake_backend_toml().replace('"ok"]\n', '"ok"]\napprove = ["echo"]\n', 1)
                      .replace("register_tools = true", "register_tools = true\nadmin = true") + f"""
[approvals]
timeout = "10m"
max_waiting_per_caller = {n + 100}
max_waiting = {n + 100}

[store]
path = "{tmp / 'store.db'}"

[[http.tokens]]
token = "{TOKEN}"
profile = "default"
""")
    proc, port = start(binary, config)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        trivial_latencies(url, 20)
        before = trivial_latencies(url, m)
        rss_before, workers_before = rss_mib(proc.pid), workers_mib(proc.pid)
        started = time.monotonic()
        asked = asyncio.run(park_all(url, n))
        parked_s = time.monotonic() - started
        waiting = gauge(url, "sandgate_questions_waiting")
        in_flight = gauge(url, "sandgate_sandbox_executions_in_flight")
        rss_during, workers_during = rss_mib(proc.pid), workers_mib(proc.pid)
        during = trivial_latencies(url, m)
        started = time.monotonic()
        finished = asyncio.run(answer_all(url, asked))
        answered_s = time.monotonic() - started
        print(f"parked {n} scripts on approvals in {parked_s:.2f} s; questions waiting {waiting:.0f}, "
              f"sandbox executions in flight {in_flight:.0f}")
        print(f"gateway RSS {rss_before:.0f} -> {rss_during:.0f} MiB; workers RSS {workers_before:.0f} -> {workers_during:.0f} MiB")
        print(f"trivial call before: p50 {statistics.median(before):.2f} ms, p99 {percentile(before, 0.99):.2f} ms")
        print(f"trivial call while {n} wait: p50 {statistics.median(during):.2f} ms, p99 {percentile(during, 0.99):.2f} ms")
        print(f"answered all {n} in {answered_s:.2f} s; finished with their result: {finished}")
        assert waiting == n and finished == n, (waiting, finished)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
