"""One replica against three behind HAProxy, on this machine: the reference deployment
(`scripts/cluster`: PostgreSQL, three replicas, HAProxy) under the same load as
`http_throughput.py` (tier-1 `call_tool_chain` calls of `everything.echo`, stateless
2026-07-28, keep-alive clients), sent in alternating rounds either to replica 1 directly (one
replica) or to HAProxy (three replicas, round robin).

    .venv/bin/python tests/bench/replicas.py target/release/sandgate [seconds] [clients...]

Prints requests/s, p50 and p99, and the CPU per request of what served it: the one replica, or
the three replicas and HAProxy together (the CPU each request costs, from which capacity per
core follows: 1e6 / µs per request)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from cluster import cluster_command, free_base_port, start_cluster  # noqa: E402
from conftest import reference_servers, write_config  # noqa: E402
from http_throughput import TOKEN, measure  # noqa: E402


def main():
    binary = str(Path(sys.argv[1]).resolve())
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5
    counts = [int(c) for c in sys.argv[3:]] or [50, 200]
    rounds = int(os.environ.get("ROUNDS", "2"))
    home = Path(tempfile.mkdtemp(prefix="sandgate-bench-"))
    home.chmod(0o755)
    config = write_config(home, "toml", {"everything": reference_servers(home)["everything"]})
    text = config.read_text()
    head, _, rest = text.partition("[store]\n")
    rest = "\n".join(line for line in rest.splitlines() if not line.startswith("path ="))
    config.write_text(head + '[store]\nbackend = "postgres"\nurl = "${DATABASE_URL}"\nca_file = "${DATABASE_CA}"\n'
                      + rest + f'\n[[http.tokens]]\ntoken = "{TOKEN}"\nprofile = "default"\n')
    port = free_base_port()
    cluster = home / "cluster"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DATABASE_CA")}
    env["SANDGATE_BIN"] = binary
    try:
        start_cluster(cluster, config, port, env)
    except RuntimeError as error:
        sys.exit(str(error))
    try:
        replicas = [int((cluster / f"replica-{n}.pid").read_text()) for n in (1, 2, 3)]
        haproxy = int((cluster / "haproxy.pid").read_text())
        for round_ in range(1, rounds + 1):
            for clients in counts:
                # From another loopback address: HAProxy's kept-alive connections to replica 1
                # count against its per-address cap, and these must not.
                os.environ["SOURCE_IP"] = "127.0.0.2"
                one = measure(port + 1, "2026-07-28", clients, seconds, replicas[0])
                os.environ.pop("SOURCE_IP")
                print(f"[one replica   round {round_}] {one}", flush=True)
                three = measure(port, "2026-07-28", clients, seconds, replicas + [haproxy])
                print(f"[three + HAProxy round {round_}] {three}", flush=True)
    finally:
        cluster_command("stop", str(cluster))


if __name__ == "__main__":
    main()
