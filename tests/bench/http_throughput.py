"""Throughput and CPU per request of the HTTP front: `call_tool_chain` calls from 1, 10, 50 and
200 keep-alive clients, in both protocol eras: 2025-11-25 sessions (one per client) and
stateless 2026-07-28 requests. Each client sends its next request when the last is answered.
The load runs in two processes of asyncio clients (raw sockets, no SDK), next to the gateway on
the same machine.

    .venv/bin/python tests/bench/http_throughput.py target/release/sandgate [seconds] [clients...]

LOAD=tier1 (the default: `{"tool": "everything.echo", ...}`, the JSON tier) or LOAD=script (the
same call as TypeScript forced through the sandbox); ERAS=2026-07-28 for one era; VS=<binary>
runs a second build in alternating rounds (ROUNDS, default 2) for side-by-side figures;
VS_STORE=<postgres URL> runs the same build a second time with `[store] backend = "postgres"`
on that server (a database of its own per run), against its SQLite store; with
VS_RECORDS=before_response as well, a third time on PostgreSQL with `[store] records` set so.

Prints one line per (build, era, clients): requests/s, p50 and p99 latency, errors, and the
gateway's CPU per request: the user and system time of the gateway process (all its threads;
not its sandbox workers, which are processes of their own) over the run, divided by the
requests answered."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from conftest import reference_servers, write_config  # noqa: E402

LOADS = {
    "tier1": {"code": json.dumps({"tool": "everything.echo", "arguments": {"message": "k"}})},
    "script": {"code": "return await everything.echo({message: 'k'});", "force_sandbox": True},
}
CALL = {"name": "call_tool_chain", "arguments": LOADS[os.environ.get("LOAD", "tier1")]}
# What every answer must hold to count (another harness that sends another call sets its own).
EXPECT = b"Echo: k"
TICKS = os.sysconf("SC_CLK_TCK")
# Requests carry a bearer token, so the token check is measured as a deployment pays it
# (`tests/bench/identity.py` sends an access token instead, through this same module).
TOKEN = "bench-token-0123456789abcdef"


def cpu_seconds(pid: int) -> float:
    """User plus system time of process `pid`, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}


async def request(reader, writer, port, body: dict, headers: dict) -> tuple[int, bytes]:
    data = json.dumps(body).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(data)}\r\n")
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write((head + "\r\n").encode() + data)
    status_line = await reader.readline()
    status = int(status_line.split()[1])
    length, chunked, found = 0, False, {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        key, _, value = line.decode().partition(":")
        found[key.strip().lower()] = value.strip()
    if found.get("transfer-encoding", "").lower() == "chunked":
        body_bytes = b""
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            body_bytes += chunk[:-2]
            if size == 0:
                break
    else:
        length = int(found.get("content-length", "0"))
        body_bytes = await reader.readexactly(length) if length else b""
    return status, body_bytes, found


async def client(port: int, era: str, until: float, latencies: list, errors: list):
    # SOURCE_IP (another loopback address) counts these clients apart from others of
    # 127.0.0.1, such as a load balancer's connections, under the per-address connection cap.
    source = os.environ.get("SOURCE_IP")
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0) if source else None)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    headers = dict(auth)
    if era == "2025-11-25":
        _, _, found = await request(reader, writer, port, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": era, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}, auth)
        headers = {**auth, "Mcp-Session-Id": found["mcp-session-id"], "Mcp-Protocol-Version": era}
        await request(reader, writer, port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    else:
        headers = {**auth, "Mcp-Protocol-Version": era, "Mcp-Method": "tools/call", "Mcp-Name": "call_tool_chain"}
    i = 0
    while time.monotonic() < until:
        i += 1
        params = dict(CALL)
        if era != "2025-11-25":
            params["_meta"] = META
        started = time.monotonic()
        status, body, _ = await request(reader, writer, port, {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}, headers)
        if status != 200 or EXPECT not in body:
            errors.append(f"{status} {body[:120]!r}")
            continue
        latencies.append(time.monotonic() - started)
    writer.close()


def load(port: int, era: str, clients: int, seconds: float, out):
    async def run():
        latencies, errors = [], []
        until = time.monotonic() + seconds
        await asyncio.gather(*(client(port, era, until, latencies, errors) for _ in range(clients)))
        return latencies, errors
    out.put(asyncio.run(run()))


def measure(port: int, era: str, clients: int, seconds: float, pid: int | list[int]) -> str:
    """One load's line; the CPU is that of `pid` (or of every process in a list of them)."""
    pids = pid if isinstance(pid, list) else [pid]
    processes = min(2, clients)
    queue = multiprocessing.Queue()
    shares = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
    procs = [multiprocessing.Process(target=load, args=(port, era, n, seconds, queue)) for n in shares]
    cpu_before = sum(cpu_seconds(p) for p in pids)
    for p in procs:
        p.start()
    latencies, errors = [], []
    for _ in procs:
        # A load process that died (its connection refused, say) must not hang the run.
        got_latencies, got_errors = queue.get(timeout=seconds + 60)
        latencies += got_latencies
        errors += got_errors
    cpu = sum(cpu_seconds(p) for p in pids) - cpu_before
    for p in procs:
        p.join()
    latencies.sort()
    if not latencies:
        return f"{era:<11} {clients:>4} clients: no answers; errors: {errors[:2]}"
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[int(len(latencies) * 0.99)] * 1000
    per_request = cpu / len(latencies) * 1e6
    return (f"{era:<11} {clients:>4} clients: {len(latencies) / seconds:7.0f} requests/s  p50 {p50:6.2f} ms"
            f"  p99 {p99:7.2f} ms  errors {len(errors)}  gateway {cpu / seconds:4.2f} cores,"
            f" {per_request:5.0f} µs CPU/request")


def fresh_database(admin_url: str) -> str:
    """A new database on the server at `admin_url` (psql), as a URL with sslmode=disable."""
    name = f"bench_{os.getpid()}_{int(time.time() * 1000)}"
    subprocess.run(["psql", admin_url, "-q", "-c", f"CREATE DATABASE {name}"], check=True)
    return admin_url.rsplit("/", 1)[0] + f"/{name}?sslmode=disable"


def start(binary: str, config: Path) -> tuple[subprocess.Popen, int]:
    """`binary serve --http` on a free loopback port; its process and port. A build older than
    bearer tokens (`5b77dca`) refuses `[[http.tokens]]`: it runs without them, and says so."""
    proc = subprocess.Popen([binary, "serve", "--config", str(config), "--http", "127.0.0.1:0"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = 0
    for line in proc.stderr:
        found = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", line)
        if found:
            port = int(found.group(1))
            break
        if "unknown key `http.tokens`" in line:
            proc.wait()
            config.write_text(config.read_text().split("\n[[http.tokens]]")[0])
            print(f"[{binary}] has no bearer tokens: its requests carry one it does not check", flush=True)
            return start(binary, config)
    subprocess.Popen(["cat"], stdin=proc.stderr, stdout=subprocess.DEVNULL)
    time.sleep(3)
    return proc, port


def main():
    binary = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5
    counts = [int(c) for c in sys.argv[3:]] or [1, 10, 50, 200]
    builds = [binary] + ([os.environ["VS"]] if os.environ.get("VS") else [])
    if os.environ.get("VS_STORE"):
        builds = [binary, binary + " (postgres)"]
        if os.environ.get("VS_RECORDS"):
            builds.append(binary + f" (postgres, records = {os.environ['VS_RECORDS']})")
    rounds = int(os.environ.get("ROUNDS", "2")) if len(builds) > 1 else 1
    configs = {}
    for build in builds:
        # A store of its own per build: a newer build's migrated file is refused by an older.
        tmp = Path(tempfile.mkdtemp())
        configs[build] = write_config(tmp, "toml", {"everything": reference_servers(tmp)["everything"]})
        with configs[build].open("a") as out:
            out.write(f'\n[[http.tokens]]\ntoken = "{TOKEN}"\nprofile = "default"\n')
        if " (postgres" in build:
            text = configs[build].read_text()
            url = fresh_database(os.environ["VS_STORE"])
            records = f'records = "{os.environ["VS_RECORDS"]}"\n' if "records =" in build else ""
            configs[build].write_text(re.sub(r'\[store\]\npath = [^\n]*\n',
                                             f'[store]\nbackend = "postgres"\nurl = "{url}"\n{records}', text))
    for round_ in range(1, rounds + 1):
        for build in builds:
            proc, port = start(build.split(" (postgres")[0], configs[build])
            try:
                for era in os.environ.get("ERAS", "2025-11-25,2026-07-28").split(","):
                    for clients in counts:
                        line = measure(port, era, clients, seconds, proc.pid)
                        label = f"[{build} round {round_}] " if len(builds) > 1 else ""
                        print(label + line, flush=True)
            finally:
                proc.terminate()
                proc.wait()


if __name__ == "__main__":
    main()
