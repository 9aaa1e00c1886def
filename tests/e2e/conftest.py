"""Fixtures for end-to-end tests: the real sandgate binary, driven by the Python `mcp` SDK
client, in front of the real npm reference servers (installed by scripts/test)."""

import contextlib
import http.server
import json
import urllib.parse
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cluster import ClusterServer, Served
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[2]
SANDGATE = os.environ.get("SANDGATE_BIN", str(REPO / "target" / "debug" / "sandgate"))
NODE_MODULES = REPO / "tests" / "node" / "node_modules" / "@modelcontextprotocol"
FAKE_BACKEND = REPO / "tests" / "fixtures" / "fake_backend.py"


def fake_backend_toml() -> str:
    """The fake backend (`ok` mode) as `[servers.fake]`, and a `default` profile that reaches
    every tool and may register stored tools: the start of the replica tests' configs."""
    return f"""
[servers.fake]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(FAKE_BACKEND))}, "ok"]

[profiles.default]
tools = ["*"]
register_tools = true
"""


@pytest.fixture
def anyio_backend():
    return "asyncio"


def reference_servers(tmp_path: Path) -> dict:
    """The three real npm servers, as an mcpServers map."""
    root = tmp_path / "files"
    root.mkdir(exist_ok=True)
    (root / "hello.txt").write_text("hello from the filesystem backend\n")
    return {
        "everything": {"command": "node", "args": [str(NODE_MODULES / "server-everything/dist/index.js"), "stdio"]},
        "memory": {
            "command": "node",
            "args": [str(NODE_MODULES / "server-memory/dist/index.js")],
            "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
        },
        "filesystem": {"command": "node", "args": [str(NODE_MODULES / "server-filesystem/dist/index.js"), str(root)]},
    }


def toml_value(value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


# Deno from npm, for the V8 engine (scripts/test installs it under tests/node).
DENO = REPO / "tests" / "node" / "node_modules" / "@deno" / "linux-x64-glibc" / "deno"


def on_v8(config: Path, sandbox: str = "") -> Path:
    """Adds a `[sandbox]` section that runs every execution on V8 (Deno from npm), with
    `sandbox` (more settings, one per line) after it, to a sandgate.toml."""
    assert DENO.is_file(), f"Deno is not installed at {DENO}: run scripts/test, which installs it from npm"
    config.write_text(config.read_text() + f'\n[sandbox]\nengine = "v8"\ndeno = "{DENO}"\n{sandbox}')
    return config


def write_config(tmp_path: Path, fmt: str, servers: dict) -> Path:
    """Writes `servers` as a .mcp.json or a sandgate.toml, with a private tool cache."""
    cache = str(tmp_path / "cache" / "tools.json")
    store = str(tmp_path / "state" / "store.db")
    if fmt == "json":
        path = tmp_path / ".mcp.json"
        extra = {"gateway": {"cache_file": cache}, "store": {"path": store}}
        path.write_text(json.dumps({"mcpServers": servers, "sandgate": extra}, indent=2))
    else:
        path = tmp_path / "sandgate.toml"
        lines = ["[gateway]", f"cache_file = {json.dumps(cache)}", "", "[store]", f"path = {json.dumps(store)}", ""]
        for name, entry in servers.items():
            lines.append(f"[servers.{name}]")
            lines += [f"{key} = {toml_value(value)}" for key, value in entry.items()]
            lines.append("")
        path.write_text("\n".join(lines))
    return path


def state_home(config: Path) -> Path:
    """A private XDG_STATE_HOME beside a test's config: a generated HTTP token (and anything
    else sandgate keeps per user) stays in the test's own directory."""
    path = Path(config).parent / "state-home"
    path.mkdir(exist_ok=True)
    return path


GENERATED_TOKEN = re.compile(r"Bearer ([0-9a-f]{64})")


def auth_headers(token: str | None) -> dict:
    return {"Authorization": f"Bearer {token}"} if token else {}


class HttpServer(Served):
    """`sandgate serve --http 127.0.0.1:0` in a subprocess; learns its URL from the log, and the
    bearer token sandgate generated and printed at its first start (HTTP needs one by default).
    With `SANDGATE_E2E_CLUSTER=1`, the reference deployment instead (`cluster.ClusterServer`)."""

    def __new__(cls, config: Path, extra_args=(), token: str | None = None):
        if os.environ.get("SANDGATE_E2E_CLUSTER") == "1":
            return ClusterServer(config, extra_args, token, state_home(config))
        return super().__new__(cls)

    def __init__(self, config: Path, extra_args=(), token: str | None = None, listen: str = "127.0.0.1:0"):
        env = {**os.environ, "XDG_STATE_HOME": str(state_home(config))}
        self.config = Path(config)
        self.proc = subprocess.Popen(
            [SANDGATE, "serve", "--config", str(config), "--http", listen, *extra_args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        )
        self.log: list[str] = []
        found = threading.Event()
        self.url = None
        self.token = token

        def pump():
            for line in self.proc.stderr:
                self.log.append(line)
                generated = GENERATED_TOKEN.search(line)
                if generated and self.token is None:
                    self.token = generated.group(1)
                match = re.search(r"at (http://\S+/mcp)", line)
                if match and not found.is_set():
                    self.url = match.group(1)
                    found.set()
            found.set()

        threading.Thread(target=pump, daemon=True).start()
        if not found.wait(30) or self.url is None:
            self.close()
            raise RuntimeError("sandgate did not start serving HTTP:\n" + "".join(self.log))

    def pids(self) -> list[int]:
        return [self.proc.pid]

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def one_process_only(why: str):
    """Marks a test of what one process shows about itself, which a balancer in front of
    replicas cannot: skipped with `SANDGATE_E2E_CLUSTER=1`, saying why."""
    return pytest.mark.skipif(os.environ.get("SANDGATE_E2E_CLUSTER") == "1", reason=f"one process only: {why}")


class OneProcess(HttpServer):
    """One `sandgate serve --http` process, also when `SANDGATE_E2E_CLUSTER=1`: for tests that
    start replicas of their own, or test what one process does by itself."""

    def __new__(cls, config: Path, extra_args=(), token: str | None = None, listen: str = "127.0.0.1:0"):
        return object.__new__(cls)


@contextlib.asynccontextmanager
async def connect(transport: str, config: Path, mode: str = "legacy", settle: bool = True):
    """An initialized Python SDK client talking to sandgate over `transport`; with `settle`,
    once its backends are past their first connection attempt (see `settled`)."""
    if transport == "stdio":
        params = StdioServerParameters(command=SANDGATE, args=["serve", "--config", str(config)])
        async with Client(params, mode=mode, read_timeout_seconds=60) as client:
            if settle:
                await settled(client)
            yield client
    else:
        server = HttpServer(config)
        try:
            async with Client(server.target(), mode=mode, read_timeout_seconds=60) as client:
                if settle:
                    await settled(client)
                yield client
        finally:
            server.close()


async def settled(client, most: float = 10.0) -> None:
    """Waits (at most `most` seconds, the old wait of the meta-tools) until no backend the
    client sees is on its first connection attempt with no tool list cached. The meta-tools
    answer at once while one starts, naming it (issue 47, item 13): a test about what a search
    finds, rather than about start-up, asks once the backends are up, as a model a few seconds
    into its session does."""
    import asyncio
    import time

    deadline = time.monotonic() + most
    while time.monotonic() < deadline:
        text = (await client.read_resource("sandgate://backends")).contents[0].text
        if not any(b["state"] == "starting" and not b.get("tools") for b in json.loads(text)["backends"]):
            return
        await asyncio.sleep(0.1)


def structured(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content


async def read_output_whole(client, execution_id: str, **options) -> list[str]:
    """Every piece of a stored output, read with `read_output` from offset 0 until
    `next_offset` says there is no more (`options`, such as `length`, go with each read)."""
    pieces, offset = [], 0
    while offset is not None:
        part = structured(await client.call_tool("read_output", {"execution_id": execution_id, "offset": offset, **options}))
        pieces.append(part["text"])
        offset = part["next_offset"]
    return pieces


def shown_result(result):
    """The result as the response shows it: the value when structuredContent repeats it, else
    the text it starts with (`output.shown_chars` characters)."""
    data = result.structured_content
    if data.get("result") is not None or not data.get("output"):
        return data.get("result")
    return text_of(result)[: data["output"]["shown_chars"]]


def free_port() -> int:
    """A loopback port free now (for a server that must know its URL before it starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


class Site:
    """A loopback HTTP server for the permission tests: `/ok` (and any other path) answers,
    `/redirect?to=URL` redirects, `/count` says how many requests it has had (so a test can
    tell that a refused fetch never connected); `hosts` keeps each request's `Host`."""

    def __init__(self):
        site = self
        self.requests = 0
        self.hosts: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib's name
                url = urllib.parse.urlparse(self.path)
                if url.path != "/count":
                    site.requests += 1
                    site.hosts.append(self.headers.get("Host", ""))
                if url.path == "/redirect":
                    target = urllib.parse.parse_qs(url.query)["to"][0]
                    self.send_response(302)
                    self.send_header("Location", target)
                    self.end_headers()
                    return
                body = (str(site.requests) if url.path == "/count" else "fine").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def execution_records(config: Path, limit: int = 1000) -> list[dict]:
    """The gateway's execution records for `config`, newest first (`sandgate executions list`)."""
    env = {**os.environ, "XDG_STATE_HOME": str(state_home(config))}
    out = subprocess.run([SANDGATE, "executions", "list", "--config", str(config), "--json", "--limit", str(limit)],
                         capture_output=True, text=True, timeout=30, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def assert_one_cancelled_soon(config: Path, within: float = 3.0):
    """Waits up to `within` seconds for the one execution of `config` to be recorded as finished
    (on a shared store it is on record as `running` from its start), and checks it was cancelled
    well before the 8 s its script would have run."""
    import time
    deadline = time.time() + within
    while time.time() < deadline and not any(r["status"] != "running" for r in execution_records(config)):
        time.sleep(0.1)
    found = execution_records(config)
    assert [r["status"] for r in found] == ["cancelled"], found
    assert found[0]["duration_ms"] < 3000, found
