"""A small Jepsen-style harness for the reference deployment: clients drive load through
HAProxy and log every operation's outcome (ok, failed, or unknown when the connection died
under it) while a seeded schedule of faults runs (`kill -9` a replica, `SIGSTOP` one for 10 s,
restart PostgreSQL, crash it); a checker then reads the log and the store.

It is a library: `test_cluster_faults.py` runs a short schedule in the suite and a long one
on demand (`SANDGATE_FAULTS=long`)."""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

from cluster import REPO, Served, cluster_command, free_base_port, start_cluster
from conftest import fake_backend_toml

TOKEN = "faults-token-" + "a1b2c3d4" * 4
LIMITED = "faults-limited-" + "e5f6a7b8" * 4
PER_MINUTE = 40


def config_text() -> str:
    return f"""
[store]
backend = "postgres"
url = "${{DATABASE_URL}}"
ca_file = "${{DATABASE_CA}}"
rate_limit_when_unreachable = "closed"
# Every answer waits for its execution's record: a replica killed just after it answered
# loses nothing it acknowledged.
records = "before_response"

[http]
drain = "2s"

{fake_backend_toml()}
[profiles.limited]
tools = ["*"]
limits = {{ executions_per_minute = {PER_MINUTE} }}

[[http.tokens]]
token = "{TOKEN}"
profile = "default"
name = "load"

[[http.tokens]]
token = "{LIMITED}"
profile = "limited"
name = "limited"
"""


@dataclasses.dataclass
class Op:
    """One operation as a client saw it."""

    client: str
    kind: str
    start: float
    end: float
    outcome: str  # "ok", "failed" (an answer that says so) or "unknown" (no answer)
    detail: str = ""
    execution_id: str | None = None
    value: object = None


@dataclasses.dataclass
class Fault:
    kind: str  # "kill", "pause", "pg-restart", "pg-crash"
    start: float
    end: float
    replica: int | None = None


class FaultCluster(Served):
    """`scripts/cluster` with its own PostgreSQL, and the hands to break it."""

    def __init__(self, home: Path):
        # Not under pytest's private tmp: as root, PostgreSQL runs as the postgres user, who
        # must be able to reach its data directory.
        self.dir = Path(tempfile.mkdtemp(prefix="sandgate-faults-"))
        self.dir.chmod(0o755)
        self.port = free_base_port()
        self.token = TOKEN
        config = home / "faults.toml"
        config.write_text(config_text())
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DATABASE_CA")}
        env["SANDGATE_BIN"] = os.environ.get("SANDGATE_BIN", str(REPO / "target" / "debug" / "sandgate"))
        try:
            self.url = start_cluster(self.dir, config, self.port, env)
        except RuntimeError:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.env = dict(line.split("=", 1) for line in (self.dir / "env").read_text().splitlines() if "=" in line)
        self.database_url = self.env["DATABASE_URL"].strip('"')

    def replica_url(self, n: int) -> str:
        return f"http://127.0.0.1:{self.port + n}/mcp"

    def direct(self, n: int):
        """A transport to replica `n`, past the balancer."""
        replica = Served()
        replica.url = self.replica_url(n)
        replica.token = self.token
        return replica.target()

    def pid(self, n: int) -> int:
        return int((self.dir / f"replica-{n}.pid").read_text())

    def restart(self, n: int):
        cluster_command("restart", str(self.dir), str(n), timeout=180).check_returncode()

    def pg_halt(self, mode: str):
        if mode == "crash":
            postmaster = int((self.dir / "pg" / "data" / "postmaster.pid").read_text().split()[0])
            os.kill(postmaster, signal.SIGKILL)
            for _ in range(100):
                try:
                    os.kill(postmaster, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
        else:
            subprocess.run([str(REPO / "scripts" / "test-postgres"), "halt", str(self.dir / "pg"), "fast"],
                           check=True, capture_output=True, timeout=60)

    def pg_start(self):
        # A crashed server leaves its pid file: PostgreSQL sees the process gone and recovers.
        subprocess.run([str(REPO / "scripts" / "test-postgres"), "start", str(self.dir / "pg"), str(self.port + 10)],
                       check=True, capture_output=True, timeout=120)

    def sql(self, query: str) -> list[str]:
        done = subprocess.run(["psql", self.database_url + "?sslmode=disable", "-At", "-c", query],
                              capture_output=True, text=True, timeout=60, check=True)
        return [line for line in done.stdout.splitlines() if line]

    def close(self):
        cluster_command("stop", str(self.dir), timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


def schedule(seed: int, rounds: int) -> list[tuple[float, str, int | None]]:
    """(seconds from the start, fault, replica) for `rounds` rounds of the four faults, in a
    seeded order, spaced so each ends (and the cluster settles) before the next."""
    rng = random.Random(seed)
    plan, at = [], 3.0
    for _ in range(rounds):
        kinds = ["kill", "pause", "pg-restart", "pg-crash"]
        rng.shuffle(kinds)
        for kind in kinds:
            replica = rng.randint(1, 3) if kind in ("kill", "pause") else None
            plan.append((at, kind, replica))
            at += {"kill": 6.0, "pause": 14.0, "pg-restart": 7.0, "pg-crash": 7.0}[kind] + rng.uniform(0, 2)
    return plan


async def run_faults(cluster: FaultCluster, plan, faults: list[Fault], t0: float):
    for at, kind, replica in plan:
        await anyio.sleep(max(0.0, t0 + at - time.monotonic()))
        start = time.monotonic()
        if kind == "kill":
            os.kill(cluster.pid(replica), signal.SIGKILL)
            await anyio.sleep(1.0)
            await anyio.to_thread.run_sync(cluster.restart, replica)
        elif kind == "pause":
            pid = cluster.pid(replica)
            os.kill(pid, signal.SIGSTOP)
            await anyio.sleep(10.0)
            os.kill(pid, signal.SIGCONT)
        else:
            await anyio.to_thread.run_sync(cluster.pg_halt, "crash" if kind == "pg-crash" else "fast")
            await anyio.sleep(2.0)
            await anyio.to_thread.run_sync(cluster.pg_start)
        faults.append(Fault(kind, start, time.monotonic(), replica))


async def worker(cluster: FaultCluster, name: str, mode: str, token: str, log: list[Op], stop: anyio.Event):
    """Calls until `stop`: small results, and now and then one large enough to be stored."""
    i = 0
    while not stop.is_set():
        opened = time.monotonic()
        # A call that failed is logged once: the session's own end, which may raise the same
        # error again, is not another operation.
        logged_failure = False
        try:
            async with Client(cluster.target({"Authorization": f"Bearer {token}"}), mode=mode,
                              read_timeout_seconds=60) as client:
                while not stop.is_set():
                    i += 1
                    big = i % 7 == 0
                    code = f"return 'w'.repeat(30000) + '{name}-{i}'" if big else f"await fake.slow({{ms: 30}}); return '{name}-{i}'"
                    start = time.monotonic()
                    try:
                        ran = await client.call_tool("call_tool_chain", {"code": code})
                    except Exception as error:  # noqa: BLE001 - the outcome is the finding
                        log.append(Op(name, "big" if big else "call", start, time.monotonic(), "unknown", repr(error)[:300]))
                        logged_failure = True
                        break
                    data = ran.structured_content or {}
                    text = "\n".join(getattr(c, "text", "") for c in ran.content)
                    expected = f"{name}-{i}"
                    ok = not ran.is_error and (expected in text or data.get("result") == expected)
                    log.append(Op(name, "big" if big else "call", start, time.monotonic(), "ok" if ok else "failed",
                                  "" if ok else text[:300], data.get("execution_id"),
                                  # Named as stored (a write that failed says so, and names none).
                                  bool((data.get("output") or {}).get("stored")) if ok else None))
                    await anyio.sleep(0.02)
        except Exception as error:  # noqa: BLE001 - a session that could not open is logged too
            if not logged_failure:
                log.append(Op(name, "session", opened, time.monotonic(), "unknown", repr(error)[:300]))
            await anyio.sleep(0.2)


async def registrar(cluster: FaultCluster, log: list[Op], stop: anyio.Event):
    k = 0
    while not stop.is_set():
        k += 1
        code = (f"export const meta = {{ description: 'fault tool {k}', input: {{ type: 'object' }} }};\n"
                f"export default async function () {{ return {k}; }}\n")
        start = time.monotonic()
        try:
            async with Client(cluster.target(), mode="2026-07-28", read_timeout_seconds=60) as client:
                done = await client.call_tool("register_tool", {"name": f"ft_{k}", "code": code})
            text = "\n".join(getattr(c, "text", "") for c in done.content)
            log.append(Op("registrar", "register", start, time.monotonic(), "failed" if done.is_error else "ok",
                          text[:300], value=k))
        except Exception as error:  # noqa: BLE001
            log.append(Op("registrar", "register", start, time.monotonic(), "unknown", repr(error)[:300], value=k))
        await anyio.sleep(1.5)


async def limited(cluster: FaultCluster, log: list[Op], stop: anyio.Event):
    """A profile limited to PER_MINUTE executions a minute, calling as fast as it can."""
    while not stop.is_set():
        start = time.monotonic()
        try:
            async with Client(cluster.target({"Authorization": f"Bearer {LIMITED}"}), mode="2026-07-28",
                              read_timeout_seconds=60) as client:
                ran = await client.call_tool("call_tool_chain", {"code": "return 1"})
            text = "\n".join(getattr(c, "text", "") for c in ran.content)
            log.append(Op("limited", "limited", start, time.monotonic(), "failed" if ran.is_error else "ok", text[:300],
                          (ran.structured_content or {}).get("execution_id")))
        except Exception as error:  # noqa: BLE001
            log.append(Op("limited", "limited", start, time.monotonic(), "unknown", repr(error)[:300]))
        await anyio.sleep(0.05)
