"""Faults under load, checked the way Jepsen would at small scale (`faults.py`): while clients
call through HAProxy, a seeded schedule kills a replica with SIGKILL, pauses one with SIGSTOP
for 10 s, restarts PostgreSQL and crashes it. Then the checker reads the clients' log and the
store:

- every stored-tool version acknowledged exists, and is callable on every replica;
- every execution acknowledged has its record (the cluster runs with `[store] records =
  "before_response"`), and every output named in a response is there, a stateless caller's
  read back whole from every replica;
- the limited profile was never admitted more than its limit in any minute, across replicas;
- no client saw an error other than a request in flight on the killed replica, or a request
  that needed PostgreSQL while it was down and said so;
- afterwards every replica serves again, by itself.

One round of the four faults runs in the suite; `SANDGATE_FAULTS=long` runs five rounds
(about four minutes), `SANDGATE_FAULTS_SEED` picks the order (printed on failure)."""

from __future__ import annotations

import os
import secrets
import time

import anyio
import pytest
from mcp import Client

from faults import PER_MINUTE, FaultCluster, Op, limited, registrar, run_faults, schedule, worker

pytestmark = pytest.mark.anyio

LONG = os.environ.get("SANDGATE_FAULTS") == "long"
SEED = int(os.environ.get("SANDGATE_FAULTS_SEED", secrets.randbelow(1_000_000)))
# What PostgreSQL's absence may still touch after it is back: the pool's broken connections
# are found and replaced, held records are written.
SETTLE = 3.0
# How long HAProxy may take to see a frozen replica and stop sending to it: two failed checks a
# second apart (`inter 1s fall 2`), each waiting up to the 2-s connect timeout.
DETECTION = 4.0


def said_clearly(detail: str) -> bool:
    lowered = detail.lower()
    return "postgresql" in lowered or "store" in lowered or "503" in lowered


def why_allowed(op: Op, faults) -> str | None:
    for fault in faults:
        # A client's own stream (not an operation: its calls are logged each on its own) that
        # was open on a replica killed or paused meanwhile ends with it.
        if op.kind == "session" and fault.kind in ("kill", "pause") and op.start <= fault.end + 1 and op.end >= fault.start:
            return "its stream was on a replica that was killed or paused"
        if fault.kind == "kill" and op.start <= fault.start + 0.1 and op.end >= fault.start - 0.1:
            return "in flight when a replica was killed"
        # A request sent to the paused replica before HAProxy's checks took it out (the kernel
        # still accepts connections for a frozen process): on resume its 10-s header deadline
        # has passed, and it is closed unanswered (a known limit, see docs/config.md). A
        # request it had read finishes. An operation is several requests (a client's
        # handshake, then its call), so one begun just before the pause may send its second
        # request into it: what counts is that it was open across the pause and ended
        # when the replica resumed.
        if (fault.kind == "pause" and op.outcome == "unknown" and "disconnected" in op.detail
                and op.start <= fault.start + DETECTION and op.end >= fault.end - 0.5):
            return "accepted by a replica as it was paused, closed unread when it resumed"
        if fault.kind.startswith("pg-") and op.start <= fault.end + SETTLE and op.end >= fault.start and said_clearly(op.detail):
            return "needed PostgreSQL while it was away, and said so"
    return None


async def test_faults_under_load_lose_nothing_acknowledged_and_limits_hold(tmp_path):
    cluster = FaultCluster(tmp_path)
    log: list[Op] = []
    faults = []
    plan = schedule(SEED, 5 if LONG else 1)
    try:
        stop = anyio.Event()
        t0 = time.monotonic()

        async def faults_then_stop():
            await run_faults(cluster, plan, faults, t0)
            await anyio.sleep(SETTLE)
            stop.set()

        async with anyio.create_task_group() as group:
            for n in range(3):
                group.start_soon(worker, cluster, f"stateless{n}", "2026-07-28", cluster.token, log, stop)
            for n in range(2):
                group.start_soon(worker, cluster, f"session{n}", "legacy", cluster.token, log, stop)
            group.start_soon(registrar, cluster, log, stop)
            # Four at once, so the limit, not the client, is what holds the rate down.
            for _ in range(4):
                group.start_soon(limited, cluster, log, stop)
            group.start_soon(faults_then_stop)
        context = f"seed {SEED}, plan {plan}, {len(log)} operations"

        # No error but those the faults explain.
        unexplained = [op for op in log if op.outcome != "ok" and op.kind != "limited" and why_allowed(op, faults) is None]
        assert not unexplained, (context, len(unexplained), [(op, [(f.kind, round(f.start - op.start, 2)) for f in faults]) for op in unexplained[:5]])
        refused = [op for op in log if op.kind == "limited" and op.outcome != "ok"]
        unclear = [op for op in refused if "may start" not in op.detail and why_allowed(op, faults) is None]
        assert not unclear, (context, unclear[:5])
        assert sum(op.outcome == "ok" for op in log if op.kind in ("call", "big")) > 100, context

        # Every replica serves again, by itself: each one directly, and the balancer.
        for n in (1, 2, 3):
            async with Client(cluster.direct(n), mode="2026-07-28", read_timeout_seconds=60) as client:
                ran = await client.call_tool("call_tool_chain", {"code": "return await fake.echo({text: 'back'})"})
                assert not ran.is_error, (n, context)

        # Every stored tool acknowledged is callable on every replica, with its own code.
        registered = [op.value for op in log if op.kind == "register" and op.outcome == "ok"]
        assert registered, context
        calls = " + ".join(f"((await user.ft_{k}({{}})).data === {k} ? 1 : 0)" for k in registered)
        for n in (1, 2, 3):
            async with Client(cluster.direct(n), mode="2026-07-28", read_timeout_seconds=60) as client:
                ran = await client.call_tool("call_tool_chain", {"code": f"return {calls}"})
                assert not ran.is_error and ran.structured_content["result"] == len(registered), (n, ran.content, context)

        # Every execution acknowledged has its record; none was left half-written.
        acknowledged = {op.execution_id for op in log if op.outcome == "ok" and op.execution_id}
        await anyio.sleep(2.0)
        recorded = set(cluster.sql("SELECT id FROM executions"))
        # An answer waits for its record. The one way to lose it: the record's write failed
        # because PostgreSQL was away (the answer still went, the record was held to be tried
        # again) and its replica was killed before PostgreSQL was back long enough to take it.
        by_id = {op.execution_id: op for op in log if op.execution_id}
        missing = acknowledged - recorded
        outages = [f for f in faults if f.kind.startswith("pg-")]
        kills = [f.start for f in faults if f.kind == "kill"]
        held_then_killed = {
            i for i in missing
            if any(o.start <= by_id[i].end <= o.end + SETTLE and any(o.start <= k <= o.end + 10 for k in kills) for o in outages)
        }
        assert not missing - held_then_killed, (context, len(missing - held_then_killed), sorted(missing - held_then_killed)[:5])

        # Every output a response named as stored is there; a stateless caller's is read back
        # from every replica by another stateless caller of its profile (a session's outputs
        # are its own, and its session has ended).
        named = [op for op in log if op.kind == "big" and op.outcome == "ok" and op.value]
        # (An output's key is the execution id with its owner and part.)
        kept = "\n".join(cluster.sql("SELECT execution_id FROM outputs"))
        lost = [op.execution_id for op in named if op.execution_id not in kept]
        assert not lost, (context, lost[:5])
        outputs = [op for op in named if op.client.startswith("stateless")]
        assert outputs, context
        for n in (1, 2, 3):
            async with Client(cluster.direct(n), mode="2026-07-28", read_timeout_seconds=60) as client:
                for op in outputs[:: max(1, len(outputs) // 10)]:
                    read = await client.call_tool("read_output", {"execution_id": op.execution_id, "offset": 29990})
                    assert not read.is_error, (n, op, read.content, context)
                    assert read.structured_content["text"].startswith("wwwwwwwwww"), (n, op, context)

        # The limited profile, across the replicas: never more than its bound, the limit at once
        # (the burst) plus one every 60/limit seconds after (GCRA), in any stretch of time.
        # A call is admitted somewhere between its start and its end (a paused replica holds
        # one for seconds): the calls that started between two others were all admitted within
        # the first's start and the latest end among them, and GCRA bounds that stretch.
        admitted = sorted((op.start, op.end) for op in log if op.kind == "limited" and op.outcome == "ok")
        assert len(admitted) >= PER_MINUTE, (context, len(admitted))
        interval = 60.0 / PER_MINUTE
        for i, (first, _) in enumerate(admitted):
            latest_end = first
            for j in range(i, len(admitted)):
                latest_end = max(latest_end, admitted[j][1])
                span = latest_end - first
                assert j - i + 1 <= PER_MINUTE + int(span / interval) + 1, (context, j - i + 1, span)
    finally:
        cluster.close()
