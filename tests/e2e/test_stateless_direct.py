"""Stateless (2026-07-28) tool calls answered without rmcp's per-request service (`mcp::direct`).

A plain stateless `tools/call` is answered by the gateway itself; anything else goes to rmcp.
These tests hold that the two answer alike (the same status, type and JSON-RPC message, ids and
timings aside), that a request the direct path does not recognise still gets rmcp's checks,
that a client that leaves cancels its call and the execution is still recorded, and that a
burst of clients that vanish mid-call leaves the gateway answering with its memory bounded.
The gateway logs each direct answer at trace level, which is how the tests see which path
answered."""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path

from conftest import HttpServer, assert_one_cancelled_soon, execution_records, reference_servers, write_config
from rawhttp import Conn

DIRECT_LOG = "answered without rmcp's per-request service"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
# An Accept with a weight: the same request to rmcp, which the direct path leaves alone.
WEIGHTED = "application/json;q=1, text/event-stream"
PLAIN = "application/json, text/event-stream"


def serve(tmp_path: Path) -> tuple[HttpServer, Path]:
    config = write_config(tmp_path, "toml", {"everything": reference_servers(tmp_path)["everything"]})
    server = HttpServer(config, extra_args=["--log-level", "info,sandgate_gateway::mcp::direct=trace"])
    return server, config


def port_of(server: HttpServer) -> int:
    return int(re.search(r":(\d+)/mcp", server.url).group(1))


def call(conn: Conn, server: HttpServer, name: str, arguments: dict | None, request_id=1,
         accept: str = PLAIN, headers: list[tuple[str, str]] | None = None):
    params = {"name": name, "_meta": META}
    if arguments is not None:
        params["arguments"] = arguments
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    standard = [("Authorization", f"Bearer {server.token}"), ("Mcp-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"), ("Mcp-Name", name)]
    return conn.request(body, headers=headers if headers is not None else standard, accept=accept)


def direct_answers(server: HttpServer) -> int:
    return sum(DIRECT_LOG in line for line in server.log)


def normalised(text: str) -> str:
    """The answer without what differs between two runs of one call: execution ids and times."""
    text = re.sub(r"ex-[0-9a-f]+-[0-9a-f]+", "EX", text)
    text = re.sub(r"\d+(\.\d+)? ?ms", "N ms", text)
    return re.sub(r'"duration_ms":[0-9.]+', '"duration_ms":0', text)


def settle(server: HttpServer, count: int, wait: float = 3.0):
    deadline = time.time() + wait
    while time.time() < deadline and direct_answers(server) < count:
        time.sleep(0.05)


def test_a_plain_stateless_call_is_answered_directly_and_as_rmcp_answers_it(tmp_path):
    server, _ = serve(tmp_path)
    try:
        conn = Conn(port_of(server))
        cases = [
            ("call_tool_chain", {"code": json.dumps({"tool": "everything.echo", "arguments": {"message": "hi"}})}, 1),
            ("call_tool_chain", {"code": "return (await everything.echo({message: 'x'}))"}, "req-7"),
            ("call_tool_chain", {"code": "throw new Error('boom')"}, 3),
            ("call_tool_chain", {"code": "return ["}, 4),
            ("search_tools", {"task_description": "echo a message"}, 5),
            ("tool_info", {"tool": "everything.echo"}, 6),
            ("no_such_tool", {}, 7),
            ("call_tool_chain", None, 8),
        ]
        for name, arguments, request_id in cases:
            before = direct_answers(server)
            direct = call(conn, server, name, arguments, request_id)
            settle(server, before + 1)
            assert direct_answers(server) == before + 1, (name, arguments)
            through_rmcp = call(conn, server, name, arguments, request_id, accept=WEIGHTED)
            time.sleep(0.1)
            assert direct_answers(server) == before + 1, "the weighted Accept must go to rmcp"
            assert direct.status == through_rmcp.status == 200, (direct, through_rmcp)
            assert direct.headers["content-type"] == through_rmcp.headers["content-type"] == "application/json"
            assert direct.message()["id"] == request_id
            assert normalised(direct.body) == normalised(through_rmcp.body), (name, direct.body, through_rmcp.body)
        conn.close()
    finally:
        server.close()


def test_a_request_the_direct_path_does_not_recognise_gets_rmcps_checks(tmp_path):
    server, _ = serve(tmp_path)
    try:
        conn = Conn(port_of(server))
        auth = ("Authorization", f"Bearer {server.token}")
        code = {"code": "return 1"}
        standard = [auth, ("Mcp-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call")]
        # Mcp-Name that contradicts the body, or none: rmcp's header check answers 400.
        for headers in ([*standard, ("Mcp-Name", "search_tools")], standard,
                        [*standard, ("Mcp-Name", "call_tool_chain"), ("Mcp-Name", "call_tool_chain")]):
            reply = call(conn, server, "call_tool_chain", code, headers=headers)
            assert reply.status == 400, reply
            assert reply.message()["error"]["code"] == -32020, reply
        # A version header that contradicts _meta.
        reply = call(conn, server, "call_tool_chain", code,
                     headers=[auth, ("Mcp-Protocol-Version", "2025-11-25"), ("Mcp-Method", "tools/call"),
                              ("Mcp-Name", "call_tool_chain")])
        assert reply.status == 400, reply
        # Neither took the direct path, and the gateway still answers a plain call directly.
        assert direct_answers(server) == 0, server.log
        reply = call(conn, server, "call_tool_chain", code)
        assert reply.status == 200 and reply.message()["result"]["isError"] is False, reply
        settle(server, 1)
        assert direct_answers(server) == 1
        conn.close()
    finally:
        server.close()


def send_and_leave(port: int, server: HttpServer, code: str) -> socket.socket:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "call_tool_chain", "arguments": {"code": code}, "_meta": META}}).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: {PLAIN}\r\nContent-Length: {len(body)}\r\nAuthorization: Bearer {server.token}\r\n"
            "Mcp-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: call_tool_chain\r\n\r\n")
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(head.encode() + body)
    return conn


def test_a_client_that_leaves_cancels_its_direct_call_and_the_execution_is_recorded(tmp_path):
    server, config = serve(tmp_path)
    try:
        port = port_of(server)
        code = "await everything.echo({message: 'a'}); await new Promise(r => setTimeout(r, 8000)); return 1"
        conn = send_and_leave(port, server, code)
        settle(server, 1)
        assert direct_answers(server) == 1, server.log
        time.sleep(1.0)
        conn.close()
        assert_one_cancelled_soon(config)
    finally:
        server.close()


def test_a_burst_of_clients_that_vanish_mid_call_leaves_the_gateway_answering(tmp_path):
    """200 direct calls whose clients close their sockets while the scripts wait: every one is
    cancelled and recorded, the gateway's memory stays bounded, and it answers the next call."""
    server, config = serve(tmp_path)
    try:
        port = port_of(server)
        conn = Conn(port)
        assert call(conn, server, "call_tool_chain", {"code": "return 1"}).status == 200
        baseline = server.rss_kib() / 1024
        code = "await new Promise(r => setTimeout(r, 20000)); return 1"
        started = time.time()
        sockets = [send_and_leave(port, server, code) for _ in range(200)]
        settle(server, 201, wait=20)
        assert direct_answers(server) == 201
        for s in sockets:
            s.close()
        deadline = time.time() + 15
        while time.time() < deadline and len(execution_records(config)) < 201:
            time.sleep(0.2)
        found = execution_records(config)
        statuses = sorted(r["status"] for r in found)
        assert statuses.count("cancelled") == 200 and statuses.count("ok") == 1, statuses
        assert time.time() - started < 25
        reply = call(conn, server, "call_tool_chain", {"code": "return 2"})
        assert reply.status == 200 and len(reply.body) < 10_000, reply
        grown = server.rss_kib() / 1024 - baseline
        assert grown < 64, f"the gateway grew {grown:.0f} MiB"
        conn.close()
    finally:
        server.close()
