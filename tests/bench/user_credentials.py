"""What each user's own credential costs a call, beside the config's shared one: one gateway, a
real `oidc-provider` (as the identity tests start it) and one real MCP server over HTTP
(tests/fixtures/whoami_server.py), reached three ways by the same user's access token:

- `shared`: the config's own header, one connection for everyone (the baseline);
- `stored`: the user's own secret, kept sealed in the store (`user_secret`), opened and cached;
- `exchanged`: a token the issuer exchanged for the user's (RFC 8693), kept until it expires.

The same stateless tier-1 call (`{"tool": "<backend>.whoami"}`) is sent to each in alternating
rounds; the difference in the gateway's CPU per request is what the user's own credential
costs once cached (target for the exchange: ≤ 20 µs).

    .venv/bin/python tests/bench/user_credentials.py target/release/sandgate [seconds] [clients...]

ROUNDS (default 3) alternating rounds. With CRITERION=1 it then runs the criterion benchmark of
the kept exchange against the same issuer (`cargo bench -p sandgate-identity --bench
credentials`), which measures that path alone."""

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
import http_throughput  # noqa: E402
import httpx2 as httpx  # noqa: E402
from conftest import free_port  # noqa: E402
from issuer import USERS, Issuer  # noqa: E402

WHOAMI = Path(__file__).resolve().parents[1] / "fixtures" / "whoami_server.py"
KEY = "c2FuZGdhdGUtdGVzdC1rZXktMzItYnl0ZXMtbG9uZyE="


def main():
    binary = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5
    counts = [int(c) for c in sys.argv[3:]] or [1, 10]
    tmp = Path(tempfile.mkdtemp())
    port, backend_port = free_port(), free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    backend_resource = f"http://127.0.0.1:{backend_port}/mcp"
    issuer = Issuer(tmp, [resource, backend_resource], exchangers=("gateway",))
    service, mine = "tok-service-" + "s" * 20, "tok-alice-" + "a" * 20
    backend = subprocess.Popen([sys.executable, str(WHOAMI), "http", str(backend_port)],
                               env={**os.environ, "WHOAMI_TOKENS": f"{service},{mine}", "WHOAMI_ISSUER": issuer.url,
                                    "WHOAMI_AUDIENCE": backend_resource},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    config = tmp / "sandgate.toml"
    url = f'url = "{backend_resource}"\nheaders = {{ Authorization = "Bearer {service}" }}\n'
    config.write_text(f"""
[servers.shared]
{url}
[servers.stored]
{url}user_secret = {{ header = "Authorization", format = "Bearer {{secret}}" }}

[servers.exchanged]
{url}token_exchange = {{ audience = "{backend_resource}" }}

[credentials]
key = "${{BENCH_CREDENTIAL_KEY}}"

[store]
path = "{tmp / 'store.db'}"

[profiles.default]
tools = ["*"]

[auth.oauth]
resource = "{resource}"

[[auth.oauth.issuers]]
issuer = "{issuer.url}"
token_exchange = {{ client_id = "gateway", client_secret = "${{BENCH_EXCHANGE_SECRET}}" }}

[[auth.oauth.rules]]
claim = "groups"
value = "eng"
profile = "default"
""")
    env = {**os.environ, "BENCH_CREDENTIAL_KEY": KEY, "BENCH_EXCHANGE_SECRET": USERS["gateway"]["secret"]}
    subprocess.run([binary, "credentials", "set", "stored", "--user", issuer.url, "alice", "--config", str(config)],
                   input=mine, text=True, check=True, env=env, capture_output=True)
    proc = subprocess.Popen([binary, "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    time.sleep(3)
    http_throughput.TOKEN = issuer.client_token("alice", resource)
    http_throughput.EXPECT = b"credential"
    try:
        for backend_name in ["shared", "stored", "exchanged"]:
            # Each way works before it is measured (and its first, uncached call is out of the way).
            answer = httpx.post(f"http://127.0.0.1:{port}/mcp", timeout=30, headers={
                "authorization": f"Bearer {http_throughput.TOKEN}", "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "call_tool_chain"}, json={
                "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                    "name": "call_tool_chain", "_meta": http_throughput.META,
                    "arguments": {"code": json.dumps({"tool": f"{backend_name}.whoami"})}}})
            assert "credential" in answer.text and "isError\":true" not in answer.text, answer.text[:500]
        for round_ in range(1, int(os.environ.get("ROUNDS", "3")) + 1):
            for backend_name in ["shared", "stored", "exchanged"]:
                http_throughput.CALL = {"name": "call_tool_chain", "arguments": {
                    "code": json.dumps({"tool": f"{backend_name}.whoami", "arguments": {}})}}
                for clients in counts:
                    line = http_throughput.measure(port, "2026-07-28", clients, seconds, proc.pid)
                    print(f"[{backend_name}, round {round_}] {line}", flush=True)
        print(f"exchanges answered by the issuer: {issuer.exchanges()}")
        if os.environ.get("CRITERION") == "1":
            subprocess.run(["cargo", "bench", "-p", "sandgate-identity", "--bench", "credentials"], check=True,
                           cwd=Path(__file__).resolve().parents[2],
                           env={**os.environ, "SANDGATE_BENCH_ISSUER": issuer.url,
                                "SANDGATE_BENCH_SUBJECT_TOKEN": http_throughput.TOKEN,
                                "SANDGATE_BENCH_AUDIENCE": backend_resource,
                                "SANDGATE_BENCH_EXCHANGE_SECRET": USERS["gateway"]["secret"]})
    finally:
        proc.terminate()
        proc.wait()
        backend.kill()
        issuer.close()


if __name__ == "__main__":
    main()
