"""The HTTP front holds under hostile clients (issue 13): slow headers and bodies from many
connections, thousands of sessions opened and dropped, reused request ids and malformed bodies.
While each attack runs, a healthy client on its own keep-alive connection keeps calling
`call_tool_chain`; its p99 must stay under 100 ms and it must never fail. Attackers connect from
other loopback addresses (127.0.0.2 and up), as clients from other machines would."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

import pytest

from conftest import write_config
from rawhttp import Conn, HttpGateway, chain, initialize

HEALTHY_P99_S = 0.100


def gateway(tmp_path, **http) -> HttpGateway:
    config = write_config(tmp_path, "toml", {})
    # These cases are about connections and bodies, not tokens: auth is off (loopback only).
    settings = {"auth": "none", "header_timeout": "2s", "body_timeout": "2s", "max_connections_per_ip": 300,
                "max_connections": 2000, "max_sessions": 20000, "session_idle_timeout": "3s", **http}
    with open(config, "a") as f:
        f.write("\n[http]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()))
    return HttpGateway(config)


class Healthy:
    """A client calling `call_tool_chain` back to back on one keep-alive connection."""

    def __init__(self, port: int):
        self.conn = Conn(port)
        self.session = initialize(self.conn)
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        i = 1000
        while not self.stop.is_set():
            i += 1
            started = time.monotonic()
            try:
                reply = chain(self.conn, self.session, i, "return 6 * 7")
                message = reply.message()
                if message.get("result", {}).get("structuredContent", {}).get("result") != 42:
                    self.errors.append(f"wrong answer: {reply.body[:200]}")
            except Exception as e:  # noqa: BLE001 - any failure is the finding
                self.errors.append(repr(e))
                return
            self.latencies.append(time.monotonic() - started)
            time.sleep(0.005)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)
        self.conn.close()

    def check(self):
        assert not self.errors, self.errors[:3]
        assert len(self.latencies) >= 20, f"only {len(self.latencies)} healthy calls"
        ordered = sorted(self.latencies)
        p99 = ordered[int(len(ordered) * 0.99)]
        assert p99 < HEALTHY_P99_S, f"healthy p99 {p99 * 1000:.0f} ms over {len(ordered)} calls"


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(0.05)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except (TimeoutError, BlockingIOError, socket.timeout):
        return False
    except OSError:
        return True


def attackers(port: int, count: int, opening: bytes) -> list[socket.socket]:
    """`count` connections, each sending `opening` as soon as it is open: the header timeout
    runs from the moment a connection is accepted, so bytes sent only after all of them are
    open may come after it on a slow machine (CI saw 169 of 300 closed before their headers)."""
    socks = []
    for i in range(count):
        source = f"127.0.0.{2 + i % 4}"
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
        except OSError:
            continue
        with contextlib.suppress(OSError):
            s.sendall(opening)
        socks.append(s)
    return socks


def first_status(sock: socket.socket) -> str:
    """The status of the first response on `sock`, or what came instead."""
    sock.settimeout(2)
    try:
        data = sock.recv(100)
    except OSError as e:
        return type(e).__name__
    parts = data.split(b" ")
    return parts[1].decode(errors="replace") if len(parts) > 1 else "closed without an answer"


def test_slow_headers_from_many_connections_are_cut_off(tmp_path):
    g = gateway(tmp_path)
    try:
        with Healthy(g.port) as healthy:
            time.sleep(0.5)
            socks = attackers(g.port, 800, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            # Trickle a header line now and then, never finishing.
            for _ in range(4):
                time.sleep(0.5)
                for s in socks:
                    with contextlib.suppress(OSError):
                        s.sendall(b"X-Slow: 1\r\n")
            time.sleep(1.0)
            fresh = Conn(g.port)
            assert fresh.request({"jsonrpc": "2.0", "id": 1, "method": "ping"}).status in (200, 400), "a new client still gets in"
            fresh.close()
        closed = sum(closed_by_server(s) for s in socks)
        assert closed == len(socks), f"{len(socks) - closed} of {len(socks)} slow connections still open after the header timeout"
        for s in socks:
            s.close()
        healthy.check()
    finally:
        g.close()


def test_slow_bodies_time_out_with_408(tmp_path):
    g = gateway(tmp_path)
    try:
        with Healthy(g.port) as healthy:
            socks = attackers(g.port, 300, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              b"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"json")
            # Trickle well within the timeout, then stop (a write after the server answered
            # and closed would reset the connection and lose the answer before it is read; on
            # a loaded machine a third trickle at 1.5 s came too close to the 2 s deadline).
            for _ in range(2):
                time.sleep(0.5)
                for s in socks:
                    with contextlib.suppress(OSError):
                        s.sendall(b" ")
            time.sleep(2.0)
        statuses = [first_status(s) for s in socks]
        for s in socks:
            s.close()
        got = {status: statuses.count(status) for status in set(statuses)}
        assert got == {"408": len(socks)}, f"what the {len(socks)} slow bodies got: {got}"
        healthy.check()
    finally:
        g.close()


def test_sessions_are_capped_and_expire_and_memory_comes_back(tmp_path):
    g = gateway(tmp_path)
    try:
        time.sleep(1)
        start = g.rss_mib()
        with Healthy(g.port) as healthy:
            workers = []

            def open_sessions(n):
                conn = Conn(g.port)
                for _ in range(n):
                    initialize(conn)
                conn.close()

            for _ in range(4):
                workers.append(threading.Thread(target=open_sessions, args=(2500,)))
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            peak = g.rss_mib()
        healthy.check()
        # Idle sessions expire after 3 s; the gateway hands the memory back.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and g.rss_mib() > start + 50:
            time.sleep(1)
        assert g.rss_mib() <= start + 50, f"RSS {start:.0f} → {peak:.0f} → {g.rss_mib():.0f} MiB after 10,000 sessions expired"
    finally:
        g.close()


def test_a_session_past_the_cap_gets_503_and_the_open_ones_keep_working(tmp_path):
    g = gateway(tmp_path, max_sessions=20, session_idle_timeout="60s")
    try:
        conn = Conn(g.port)
        sessions = [initialize(conn) for _ in range(20)]
        refused = conn.request({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}})
        assert refused.status == 503 and "http.max_sessions" in refused.body, refused
        assert refused.headers.get("retry-after") == "5"
        for i, session in enumerate(sessions):
            reply = chain(conn, session, i + 1, "return 1")
            assert reply.message()["result"]["structuredContent"]["result"] == 1
        conn.close()
    finally:
        g.close()


def test_a_reused_request_id_gets_an_error_and_the_first_request_its_answer(tmp_path):
    g = gateway(tmp_path)
    try:
        first, second = Conn(g.port), Conn(g.port)
        session = initialize(first)
        answers = {}
        slow = threading.Thread(target=lambda: answers.setdefault("first", chain(
            first, session, 7, "await new Promise(r => setTimeout(r, 1000)); return 'slow'")))
        slow.start()
        time.sleep(0.3)
        started = time.monotonic()
        reused = chain(second, session, 7, "return 'fast'")
        assert time.monotonic() - started < 0.5, "the reused id is refused at once"
        assert reused.status == 400 and reused.message()["error"]["code"] == -32600, reused
        assert "already in use" in reused.message()["error"]["message"]
        slow.join()
        assert answers["first"].message()["result"]["structuredContent"]["result"] == "slow"
        again = chain(second, session, 7, "return 'again'")
        assert again.message()["result"]["structuredContent"]["result"] == "again", "an answered id may be used again"
    finally:
        g.close()


@pytest.mark.parametrize("body,status,code", [
    (b"{not json", 400, -32700),
    (b"[]", 400, -32600),
    (json.dumps([{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(10_000)]).encode(), 400, -32600),
    (b"[" * 100_000 + b"]" * 100_000, 400, -32700),
    (b"\"just a string\"", 400, -32600),
    (b"\xff\xfe\x00garbage", 400, -32700),
])
def test_malformed_bodies_get_400_with_a_json_rpc_error(tmp_path, body, status, code):
    g = gateway(tmp_path)
    try:
        with Healthy(g.port) as healthy:
            conn = Conn(g.port)
            session = initialize(conn)
            # 50 bodies or a second's worth, whichever is more, within the session's 3-s idle
            # timeout (a refused body does not keep a session alive; 50 bodies of 10,000
            # requests each took over 3 s on a slow machine, and the session was gone).
            sent, until, deadline = 0, time.monotonic() + 1.0, time.monotonic() + 2.5
            while (sent < 50 or time.monotonic() < until) and time.monotonic() < deadline:
                sent += 1
                reply = conn.request(body, session)
                assert reply.status == status, reply
                assert reply.message()["error"]["code"] == code, reply.body[:300]
            conn.close()
        healthy.check()
    finally:
        g.close()


def test_an_unknown_method_says_what_is_supported(tmp_path):
    g = gateway(tmp_path)
    try:
        conn = Conn(g.port)
        session = initialize(conn)
        reply = conn.request({"jsonrpc": "2.0", "id": 3, "method": "tools/frobnicate", "params": {}}, session)
        error = reply.message()["error"]
        assert error["code"] == -32601
        assert "tools/frobnicate" in error["message"] and "tools/call" in error["message"], error
        conn.close()
        time.sleep(0.2)
        assert not [line for line in g.log if " ERROR " in line], [line for line in g.log if " ERROR " in line][:3]
    finally:
        g.close()


def test_an_answer_given_before_the_body_was_read_says_the_connection_closes(tmp_path):
    """A refused token is answered before its body is read; hyper then closes the connection.
    The answer must say `Connection: close`, or a keep-alive client sends its next request on a
    closed connection and gets no answer at all (the identity tests' flood of made-up tokens
    met this in CI). A request whose body was read keeps its connection."""
    config = write_config(tmp_path, "toml", {})
    token = "t-" + "k" * 40
    with open(config, "a") as f:
        f.write(f'\n[[http.tokens]]\ntoken = "{token}"\nprofile = "default"\n\n[profiles.default]\ntools = ["*"]\n')
    g = HttpGateway(config)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
        for bearer, status in (("wrong-" + "x" * 40, 401), (None, 401)):
            conn = Conn(g.port)
            head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{g.port}\r\nContent-Type: application/json\r\n"
                    f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n")
            if bearer:
                head += f"Authorization: Bearer {bearer}\r\n"
            # The headers alone: the refusal comes before the body is sent.
            conn.send_raw((head + "\r\n").encode())
            reply = conn.read_reply()
            assert reply.status == status, reply
            assert reply.headers.get("connection", "").lower() == "close", reply.headers
            assert len(reply.body) < 2000
            conn.close()
        # The right token, body read: the same connection answers again, and is not closed.
        conn = Conn(g.port)
        for i in range(3):
            reply = conn.request({"jsonrpc": "2.0", "id": i, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}},
                headers=[("Authorization", f"Bearer {token}")])
            assert reply.status == 200, reply
            assert reply.headers.get("connection", "").lower() != "close", reply.headers
        conn.close()
        assert g.rss_mib() < 200
    finally:
        g.close()
