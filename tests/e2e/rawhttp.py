"""A raw HTTP/1.1 keep-alive client for the HTTP front's tests: byte-level control (slow headers,
trickled bodies, malformed JSON, reused ids) that an SDK client does not give."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from conftest import SANDGATE

PROTOCOL = "2025-11-25"


@dataclass
class Reply:
    status: int
    headers: dict
    body: str

    def message(self) -> dict:
        """The JSON-RPC message in the body (plain JSON, or the last `data:` of an SSE stream)."""
        if "event-stream" in self.headers.get("content-type", ""):
            data = [line[5:].strip() for line in self.body.splitlines() if line.startswith("data:")]
            data = [d for d in data if d]
            return json.loads(data[-1]) if data else {}
        return json.loads(self.body) if self.body.strip() else {}


class Conn:
    """One keep-alive connection, one request at a time."""

    def __init__(self, port: int, source: str | None = None, timeout: float = 30):
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def request(self, body: bytes | dict | list, session: str | None = None, content_type="application/json",
                headers: list[tuple[str, str]] | None = None,
                accept: str = "application/json, text/event-stream") -> Reply:
        """POSTs `body` to /mcp, in `session` if given, with `headers` added as they are."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Type: {content_type}\r\n"
                f"Accept: {accept}\r\nContent-Length: {len(data)}\r\n")
        if session:
            head += f"Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: {PROTOCOL}\r\n"
        for name, value in headers or []:
            head += f"{name}: {value}\r\n"
        self.sock.sendall((head + "\r\n").encode() + data)
        return self.read_reply()

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk

    def read_reply(self) -> Reply:
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode(errors="replace").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    self._fill()
                size_line, _, self.buf = self.buf.partition(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                while len(self.buf) < size + 2:
                    self._fill()
                body += self.buf[:size]
                self.buf = self.buf[size + 2:]
                if size == 0:
                    break
        else:
            length = int(headers.get("content-length", "0"))
            while len(self.buf) < length:
                self._fill()
            body, self.buf = self.buf[:length], self.buf[length:]
        return Reply(status, headers, body.decode(errors="replace"))


def rss_mib(pid: int) -> float:
    """A process's resident memory, in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def initialize(conn: Conn) -> str:
    """Opens a 2025-11-25 session on `conn`; returns its id."""
    reply = conn.request({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    assert reply.status == 200, reply
    session = reply.headers["mcp-session-id"]
    conn.request({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    return session


def stateless_call(conn: Conn, token: str, name: str, arguments: dict | None, request_id=1,
                   capabilities: dict | None = None, **params) -> Reply:
    """A stateless 2026-07-28 `tools/call` of `name` with the standard headers; `capabilities`
    are the client's (per request), and `params` are more of the request's params, as they are
    (`requestState`, `inputResponses`)."""
    body_params = {"name": name, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities or {}}, **params}
    if arguments is not None:
        body_params["arguments"] = arguments
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body_params}
    headers = [("Authorization", f"Bearer {token}"), ("Mcp-Protocol-Version", "2026-07-28"),
               ("Mcp-Method", "tools/call"), ("Mcp-Name", name)]
    return conn.request(body, headers=headers)


def chain(conn: Conn, session: str, request_id, code: str) -> Reply:
    return conn.request({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                         "params": {"name": "call_tool_chain", "arguments": {"code": code}}}, session)


class HttpGateway:
    """`sandgate serve --http 127.0.0.1:0` for a config; the port it bound."""

    def __init__(self, config: Path):
        self.proc = subprocess.Popen([SANDGATE, "serve", "--config", str(config), "--http", "127.0.0.1:0"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        self.port = 0
        for line in self.proc.stderr:
            self.log.append(line)
            found = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", line)
            if found:
                self.port = int(found.group(1))
                break
        assert self.port, "".join(self.log)
        import threading
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()
        time.sleep(0.5)

    def rss_mib(self) -> float:
        return rss_mib(self.proc.pid)

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
