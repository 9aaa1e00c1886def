"""One keep-alive HTTP client, one request at a time: tier-1 `call_tool_chain` calls over a
legacy (2025-11-25) session against `sandgate serve --http`, with the three reference servers.
The client acks normally (no quick-ack), so a server that writes a response in two pieces
without TCP_NODELAY waits for the delayed ACK on every request.

    .venv/bin/python tests/bench/keepalive_client.py target/release/sandgate [requests]

Prints the p50 and p90 latency and the requests per second of one client."""

import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from conftest import reference_servers, write_config  # noqa: E402

binary = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 500
tmp = Path(tempfile.mkdtemp())
config = write_config(tmp, "toml", reference_servers(tmp))
proc = subprocess.Popen([binary, "serve", "--config", str(config), "--http", "127.0.0.1:0"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
for line in proc.stderr:
    m = re.search(r"http://127.0.0.1:(\d+)/mcp", line)
    if m: port = int(m.group(1)); break
time.sleep(2)
s = socket.create_connection(("127.0.0.1", port))
def req(body, session=None):
    data = json.dumps(body).encode()
    head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {len(data)}\r\n"
    if session: head += f"Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n"
    s.sendall((head + "\r\n").encode() + data)
    buf = b""
    while True:
        chunk = s.recv(65536)
        buf += chunk
        if b"\r\n\r\n" in buf:
            headers, _, body = buf.partition(b"\r\n\r\n")
            if b"transfer-encoding: chunked" in headers.lower():
                if body.endswith(b"0\r\n\r\n"): return buf.decode(errors="replace")
            else:
                m = re.search(rb"(?i)content-length: (\d+)", headers)
                if m and len(body) >= int(m.group(1)): return buf.decode(errors="replace")
                if not m and b" 202 " in headers.split(b"\r\n")[0]: return buf.decode()
r = req({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}})
sid = re.search(r"(?i)mcp-session-id: (\S+)", r).group(1)
req({"jsonrpc":"2.0","method":"notifications/initialized"}, sid)
times = []
for i in range(count):
    t = time.perf_counter()
    req({"jsonrpc":"2.0","id":10+i,"method":"tools/call","params":{"name":"call_tool_chain","arguments":{"code":"{\"tool\": \"everything.echo\", \"arguments\": {\"message\": \"k\"}}"}}}, sid)
    times.append((time.perf_counter() - t) * 1000)
p50, p90 = statistics.median(times), sorted(times)[int(len(times) * 0.9)]
print(f"{binary}: {count} requests, p50 {p50:.2f} ms, p90 {p90:.2f} ms, {1000 * count / sum(times):.0f} requests/s")
proc.terminate(); proc.wait()
