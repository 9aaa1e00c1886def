"""Node's habits with `fetch`, `fs` and `env` (issue 32): every snippet of
tests/habits_corpus/snippets.json runs through `call_tool_chain` over stdio and HTTP, against a
profile that grants one directory, one loopback HTTP server and one variable. A `fit` gives what
Node gives (the same snippet run by Node 20 against the same files, server and variable, or the
`expect` written beside it); a `hint` answers with its fix; a `guard` is refused naming the
grant. The counts are printed."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from conftest import REPO, SANDGATE, HttpServer, free_port

pytestmark = pytest.mark.anyio

CORPUS = json.loads((REPO / "tests" / "habits_corpus" / "snippets.json").read_text())["snippets"]
KEY = "k-123"


class Site(http.server.BaseHTTPRequestHandler):
    # Slow answers whose client had gone when they were due (an abort the host honoured), and
    # slow answers a client still waited for.
    dropped = 0
    answered_slow = 0

    def do_GET(self):
        if self.path == "/slow":
            time.sleep(3)
            if self.client_gone():
                Site.dropped += 1
                return
            Site.answered_slow += 1
        body, kind = {
            "/json": (json.dumps({"ok": True, "n": 3}), "application/json"),
            "/text": ("plain body", "text/plain"),
            "/slow": ("late", "text/plain"),
        }.get(self.path, ("missing", "text/plain"))
        self.answer(body, kind)

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        self.answer(self.rfile.read(length).decode(), "application/json")

    def answer(self, body: str, kind: str):
        data = body.encode()
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except OSError:
            pass

    def client_gone(self) -> bool:
        """Whether the client closed the connection (a peek reads its end)."""
        self.connection.setblocking(False)
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True
        finally:
            self.connection.setblocking(True)

    def log_message(self, *args):
        pass


def fresh_root(root: Path):
    if root.exists():
        shutil.rmtree(root)
    (root / "dir").mkdir(parents=True)
    (root / "out").mkdir()
    (root / "a.txt").write_text("hello file\n")
    (root / "data.json").write_text(json.dumps({"items": [{"name": "one"}, {"name": "two"}]}))
    for name in ["b.md", "a.md", "c.md"]:
        (root / "dir" / name).write_text(name)


def filled(code: str, root: Path, base: str) -> str:
    return code.replace("ROOT", str(root)).replace("BASE", base)


def in_node(code: str, root: Path, base: str, tmp: Path):
    """What Node 20 gives for `code`: imports at the top of a module, the rest in an async
    function whose value is printed as JSON (CommonJS when it uses `require`)."""
    fresh_root(root)
    code = filled(code, root, base)
    lines = code.split("\n")
    imports = [line for line in lines if line.startswith("import ")]
    body = "\n".join(line for line in lines if not line.startswith("import "))
    if imports:
        path = tmp / "snippet.mjs"
        path.write_text("\n".join(imports) + f"\nconst value = await (async () => {{\n{body}\n}})();\nconsole.log(JSON.stringify(value === undefined ? null : value));\n")
    else:
        path = tmp / "snippet.cjs"
        path.write_text(f"(async () => {{\n{body}\n}})().then((value) => console.log(JSON.stringify(value === undefined ? null : value)));\n")
    done = subprocess.run(["node", str(path)], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "SG_HABITS_KEY": KEY})
    assert done.returncode == 0, f"Node failed on:\n{code}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def config(tmp: Path, root: Path, port: int) -> Path:
    path = tmp / "sandgate.toml"
    path.write_text(f"""
[profiles.default]
tools = ["*"]
fs = [{{ path = {json.dumps(str(root))}, write = true }}]
env = ["SG_HABITS_KEY"]
net = ["127.0.0.1:{port}"]

[store]
path = {json.dumps(str(tmp / "store.db"))}
""")
    return path


def judged(snippet: dict, result, node_value) -> str | None:
    data = result.structured_content or {}
    text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    if snippet["label"] == "fit":
        expected = node_value if snippet.get("node") else snippet["expect"]
        if result.is_error or data.get("result") != expected:
            return f"gave {data.get('result')!r} (error: {result.is_error}), Node gives {expected!r}: {text[:300]}"
        return None
    missing = [fix for fix in snippet["fix"] if fix not in text]
    if missing:
        return f"the response does not name {missing}: {text[:400]}"
    if snippet["label"] == "guard" and not result.is_error:
        return f"not refused: {text[:300]}"
    return None


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_every_snippet_fits_hints_or_is_refused_as_labelled(tmp_path, transport):
    root = tmp_path / "root"
    port = free_port()
    site = http.server.ThreadingHTTPServer(("127.0.0.1", port), Site)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    node_tmp = tmp_path / "node"
    node_tmp.mkdir()
    try:
        node = {s["name"]: in_node(s["code"], root, base, node_tmp) for s in CORPUS if s["label"] == "fit" and s.get("node")}
        path = config(tmp_path, root, port)
        os.environ["SG_HABITS_KEY"] = KEY
        server = HttpServer(path) if transport == "http" else None
        target = server.target() if server else StdioServerParameters(
            command=SANDGATE, args=["serve", "--config", str(path)], env={**os.environ, "SG_HABITS_KEY": KEY})
        failures, tally = [], {"fit": 0, "hint": 0, "guard": 0}
        time.sleep(3.5)  # Node's own aborted requests end first
        Site.dropped = Site.answered_slow = 0
        try:
            async with Client(target, mode="legacy", read_timeout_seconds=60) as client:
                for snippet in CORPUS:
                    fresh_root(root)
                    result = await client.call_tool("call_tool_chain", {"code": filled(snippet["code"], root, base)})
                    problem = judged(snippet, result, node.get(snippet["name"]))
                    if problem:
                        failures.append(f"{snippet['label']} {snippet['name']!r}: {problem}")
                    else:
                        tally[snippet["label"]] += 1
        finally:
            if server:
                server.close()
        # No aborted fetch ran to its end: the slow server found its client gone when its answer
        # was due (or the host dropped the request before sending it).
        time.sleep(3.5)
        assert Site.answered_slow == 0 and Site.dropped >= 1, (Site.answered_slow, Site.dropped)
        counts = {label: sum(1 for s in CORPUS if s["label"] == label) for label in tally}
        print(f"\nhabits corpus over {transport}: " + ", ".join(f"{tally[k]} of {counts[k]} {k}" for k in tally))
        assert not failures, "\n".join(failures)
        assert len(CORPUS) >= 40
    finally:
        site.shutdown()
