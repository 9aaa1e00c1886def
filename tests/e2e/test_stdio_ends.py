"""What a client's end of stdio may be. Python's `subprocess` gives pipes, Node's
`child_process` (and so Electron apps) gives Unix socket pairs, and a shell may give a file.
Pipes and Unix sockets are read and written by the gateway's runtime threads directly, so they
are non-blocking (`O_NONBLOCK` in `/proc/PID/fdinfo`); anything else goes through blocking
reads. Each kind must answer, and end the session at end of input."""

import json
import os
import socket
import subprocess
import time

import pytest

from conftest import SANDGATE, write_config

O_NONBLOCK = 0o4000
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "ends", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
SEARCH = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": {"name": "search_tools", "arguments": {"query": "anything"}}}


def lines(*messages) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def flags(pid: int, fd: int) -> int:
    for line in open(f"/proc/{pid}/fdinfo/{fd}"):
        if line.startswith("flags:"):
            return int(line.split()[1], 8)
    raise AssertionError("no flags line")


def read_answers(read, count: int, deadline: float) -> list[dict]:
    """JSON-RPC answers (lines with an id) until `count` arrived or the deadline passed."""
    answers, buffer = [], b""
    while len(answers) < count and time.monotonic() < deadline:
        chunk = read()
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            message = json.loads(line)
            if "id" in message:
                answers.append(message)
    return answers


def converse(proc, write, read, close_input):
    """Initializes, searches, checks both answers and fd 0's flags, then ends the input."""
    write(lines(INITIALIZE))
    first = read_answers(read, 1, time.monotonic() + 20)
    assert first and first[0]["result"]["serverInfo"]["name"], first
    nonblocking = bool(flags(proc.pid, 0) & O_NONBLOCK) and bool(flags(proc.pid, 1) & O_NONBLOCK)
    write(lines(INITIALIZED, SEARCH))
    second = read_answers(read, 1, time.monotonic() + 20)
    assert second and second[0]["id"] == 2 and "result" in second[0], second
    close_input()
    started = time.monotonic()
    assert proc.wait(timeout=15) is not None
    return nonblocking, time.monotonic() - started


def test_pipes_are_served_by_the_runtime_and_end_at_eof(tmp_path):
    config = write_config(tmp_path, "toml", {})
    proc = subprocess.Popen([SANDGATE, "serve", "--config", str(config)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        def write(data):
            proc.stdin.write(data)
            proc.stdin.flush()
        nonblocking, ended_in = converse(proc, write, lambda: proc.stdout.read1(65536), proc.stdin.close)
        assert nonblocking, "stdin and stdout pipes are read and written without blocking threads"
        assert ended_in < 10
    finally:
        proc.kill()


def test_unix_socket_pairs_as_node_gives_them_are_served_by_the_runtime(tmp_path):
    config = write_config(tmp_path, "toml", {})
    ours_in, theirs_in = socket.socketpair()
    ours_out, theirs_out = socket.socketpair()
    proc = subprocess.Popen([SANDGATE, "serve", "--config", str(config)], stdin=theirs_in,
                            stdout=theirs_out, stderr=subprocess.DEVNULL)
    theirs_in.close()
    theirs_out.close()
    try:
        ours_out.settimeout(20)
        nonblocking, ended_in = converse(proc, ours_in.sendall, lambda: ours_out.recv(65536),
                                         lambda: ours_in.shutdown(socket.SHUT_WR))
        assert nonblocking, "Unix sockets are read and written without blocking threads"
        assert ended_in < 10
    finally:
        proc.kill()
        ours_in.close()
        ours_out.close()


@pytest.mark.parametrize("stdin_kind", ["file", "pipe"])
def test_a_file_end_falls_back_to_blocking_reads_and_writes(tmp_path, stdin_kind):
    """A file on either end: both ends go through blocking reads and writes. With a pipe for
    stdin and a file for stdout, the pipe was made non-blocking before the file was refused,
    and must be made blocking again, or the first read fails and the session ends at once."""
    config = write_config(tmp_path, "toml", {})
    messages = lines(INITIALIZE, INITIALIZED, SEARCH)
    out_path = tmp_path / "out.jsonl"
    with open(out_path, "wb") as out:
        if stdin_kind == "file":
            (tmp_path / "in.jsonl").write_bytes(messages)
            with open(tmp_path / "in.jsonl", "rb") as given:
                proc = subprocess.Popen([SANDGATE, "serve", "--config", str(config)], stdin=given,
                                        stdout=out, stderr=subprocess.DEVNULL)
                proc.wait(timeout=30)
        else:
            proc = subprocess.Popen([SANDGATE, "serve", "--config", str(config)], stdin=subprocess.PIPE,
                                    stdout=out, stderr=subprocess.DEVNULL)
            try:
                time.sleep(1)  # the gateway has set up its ends before the first message
                proc.stdin.write(messages)
                proc.stdin.flush()
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and out_path.read_bytes().count(b"\n") < 2:
                    time.sleep(0.1)
                assert not flags(proc.pid, 0) & O_NONBLOCK, "stdin was left non-blocking"
                proc.stdin.close()
                proc.wait(timeout=15)
            finally:
                proc.kill()
    answers = [json.loads(line) for line in out_path.read_bytes().splitlines() if line.strip()]
    ids = [a.get("id") for a in answers if "result" in a]
    assert ids == [1, 2], answers


def listen_config(tmp_path, port: int):
    config = write_config(tmp_path, "toml", {})
    with open(config, "a") as f:
        f.write(f'\n[http]\nlisten = "127.0.0.1:{port}"\nauth = "none"\n')
    return config


def healthz(port: int) -> int:
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return answer.status
    except OSError:
        return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def served_over_a_pipe(config, stderr) -> subprocess.Popen:
    """`sandgate serve` of `config` started as a stdio client starts it, once it has answered
    `initialize` and a search; its stdin stays open for the test to close."""
    proc = subprocess.Popen([SANDGATE, "serve", "--config", str(config)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    proc.stdin.write(lines(INITIALIZE, INITIALIZED, SEARCH))
    proc.stdin.flush()
    answers = read_answers(lambda: os.read(proc.stdout.fileno(), 65536), 2, time.monotonic() + 20)
    if [a.get("id") for a in answers] != [1, 2]:
        proc.kill()
        raise AssertionError(f"the stdio client was not answered: {answers}")
    proc.answers = answers
    return proc


def test_a_config_that_listens_on_http_still_serves_its_stdio_client_and_ends_with_it(tmp_path):
    """Issue 47, item 1: `[http] listen` in the config served HTTP only, ignored stdin and stayed
    behind when its stdio client left. Started by a client over a pipe, sandgate serves both,
    and ends (freeing the port) when stdin closes."""
    port = free_port()
    proc = served_over_a_pipe(listen_config(tmp_path, port), subprocess.DEVNULL)
    try:
        assert healthz(port) == 200, "HTTP is served beside stdio"
        proc.stdin.close()
        proc.wait(timeout=5)
        assert healthz(port) == 0, "the port is free once the stdio client left"
    finally:
        proc.kill()


def test_a_port_in_use_is_said_and_the_stdio_client_is_served_anyway(tmp_path):
    """The HTTP copy of the config already runs (here: something holds its port). The stdio
    client is served all the same, and stderr and the client's first answer (`initialize`'s
    instructions) say why HTTP is not."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        proc = served_over_a_pipe(listen_config(tmp_path, port), subprocess.PIPE)
        try:
            # The client's first answer says so too: its person never sees the server's stderr.
            instructions = proc.answers[0]["result"].get("instructions", "")
            assert f"127.0.0.1:{port}" in instructions and "HTTP is not served by this process" in instructions, instructions
            proc.stdin.close()
            proc.wait(timeout=5)
            said = proc.stderr.read().decode()
            assert f"127.0.0.1:{port}" in said and "HTTP is not served by this process; stdio is" in said, said
        finally:
            proc.kill()


def test_a_service_with_no_client_on_stdin_keeps_serving_http(tmp_path):
    """A service manager or a container gives `/dev/null` as stdin: that is no client, and the
    HTTP gateway of `[http] listen` keeps running."""
    port = free_port()
    proc = subprocess.Popen([SANDGATE, "serve", "--config", str(listen_config(tmp_path, port))],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while healthz(port) != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)
        assert proc.poll() is None and healthz(port) == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)
