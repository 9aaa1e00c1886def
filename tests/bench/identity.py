"""What an access token costs per request, beside a static token: one gateway with both, a
real OpenID provider (`oidc-provider`, as the identity tests start it) issuing the access
token, and the same stateless tier-1 load sent with each credential in alternating rounds.
The difference in the gateway's CPU per request is the JWT check with its keys cached (target
≤ 50 µs).

    .venv/bin/python tests/bench/identity.py target/release/sandgate [seconds] [clients...]

ROUNDS (default 3) alternating rounds of each credential."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import http_throughput  # noqa: E402
from conftest import free_port, reference_servers, write_config  # noqa: E402
from issuer import Issuer  # noqa: E402


def main():
    binary = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5
    counts = [int(c) for c in sys.argv[3:]] or [1, 10]
    tmp = Path(tempfile.mkdtemp())
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    issuer = Issuer(tmp, [resource])
    config = write_config(tmp, "toml", {"everything": reference_servers(tmp)["everything"]})
    with config.open("a") as out:
        out.write(f'\n[[http.tokens]]\ntoken = "{http_throughput.TOKEN}"\nprofile = "default"\n'
                  f'\n[auth.oauth]\nresource = "{resource}"\n\n[[auth.oauth.issuers]]\nissuer = "{issuer.url}"\n'
                  '\n[[auth.oauth.rules]]\nclaim = "groups"\nvalue = "eng"\nprofile = "default"\n')
    proc = subprocess.Popen([binary, "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)
    credentials = {"static token": http_throughput.TOKEN, "access token (RS256 JWT)": issuer.client_token("alice", resource)}
    try:
        for round_ in range(1, int(os.environ.get("ROUNDS", "3")) + 1):
            for name, credential in credentials.items():
                http_throughput.TOKEN = credential
                for clients in counts:
                    line = http_throughput.measure(port, "2026-07-28", clients, seconds, proc.pid)
                    print(f"[{name}, round {round_}] {line}", flush=True)
    finally:
        proc.terminate()
        proc.wait()
        issuer.close()


if __name__ == "__main__":
    main()
