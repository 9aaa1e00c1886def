"""The gateway's CPU per call over stdio: one client calling `call_tool_chain` in sequence
(each call sent when the last is answered) against `sandgate serve` with `server-everything`,
in a 2025-11-25 session. Raw JSON-RPC lines over the pipes, no SDK, so the client costs little.

    .venv/bin/python tests/bench/stdio_cpu.py target/release/sandgate [seconds]

LOAD=tier1 (the default: `{"tool": "everything.echo", ...}`) or LOAD=script (the same call as
TypeScript forced through the sandbox); VS=<binary> runs a second build in alternating rounds
(ROUNDS, default 2).

Prints one line per (build, round): calls per second, p50 latency, and the gateway's CPU per
call: the user and system time of the gateway process (all its threads; not its sandbox
workers or its backend, which are processes of their own) over the run, divided by the calls
answered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from conftest import reference_servers, write_config  # noqa: E402
from http_throughput import CALL, cpu_seconds  # noqa: E402


def rpc(proc: subprocess.Popen, message: dict) -> dict | None:
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    if "id" not in message:
        return None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the gateway closed its stdout")
        answer = json.loads(line)
        if answer.get("id") == message["id"]:
            return answer


def measure(binary: str, config: Path, seconds: float) -> str:
    proc = subprocess.Popen([binary, "serve", "--config", str(config)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        rpc(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        time.sleep(3)  # the backend connects; its first calls warm up
        for i in range(1, 50):
            rpc(proc, {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": CALL})
        latencies, errors, i = [], 0, 100
        cpu_before = cpu_seconds(proc.pid)
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            i += 1
            started = time.monotonic()
            answer = rpc(proc, {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": CALL})
            if "Echo: k" not in json.dumps(answer):
                errors += 1
                continue
            latencies.append(time.monotonic() - started)
        cpu = cpu_seconds(proc.pid) - cpu_before
    finally:
        proc.stdin.close()
        proc.terminate()
        proc.wait()
    latencies.sort()
    if not latencies:
        return f"no answers ({errors} errors)"
    return (f"{len(latencies) / seconds:6.0f} calls/s  p50 {latencies[len(latencies) // 2] * 1000:5.2f} ms"
            f"  errors {errors}  gateway {cpu / len(latencies) * 1e6:5.0f} µs CPU/call")


def main():
    binary = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 8
    builds = [binary] + ([os.environ["VS"]] if os.environ.get("VS") else [])
    rounds = int(os.environ.get("ROUNDS", "2")) if len(builds) > 1 else 1
    configs = {}
    for build in builds:
        tmp = Path(tempfile.mkdtemp())  # a store of its own per build
        configs[build] = write_config(tmp, "toml", {"everything": reference_servers(tmp)["everything"]})
    for round_ in range(1, rounds + 1):
        for build in builds:
            label = f"[{build} round {round_}] " if len(builds) > 1 else ""
            print(label + measure(build, configs[build], seconds), flush=True)


if __name__ == "__main__":
    main()
