"""The reference deployment (`scripts/cluster`: PostgreSQL, three replicas, HAProxy with
stickiness off) as a drop-in for `HttpServer`: the same `url`, `token`, `headers`, `target()`
and `close()`. `test_cluster.py` runs a representative set of HTTP checks through it; with
`SANDGATE_E2E_CLUSTER=1` every end-to-end test that starts an `HttpServer` gets a cluster
instead (tests that look inside the one process, at its pid, RSS or signals, do not apply)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

REPO = Path(__file__).resolve().parents[2]
ADMIN_URL = os.environ.get("SANDGATE_TEST_DATABASE_URL")
GENERATED_TOKEN = re.compile(r"Bearer ([0-9a-f]{64})")


def fresh_database(label: str) -> str:
    """A new database on the test server (`scripts/test` starts one), as a URL."""
    if not ADMIN_URL:
        if os.environ.get("SANDGATE_REQUIRE_POSTGRES") == "1":
            pytest.fail("SANDGATE_REQUIRE_POSTGRES=1 but SANDGATE_TEST_DATABASE_URL is not set")
        pytest.skip("no PostgreSQL (scripts/test starts one: scripts/test-postgres)")
    name = f"e2e_{label}_{secrets.token_hex(4)}"
    subprocess.run(["psql", ADMIN_URL, "-q", "-c", f"CREATE DATABASE {name}"], check=True)
    return ADMIN_URL.rsplit("/", 1)[0] + "/" + name


def free_base_port() -> int:
    """A port P with P, P+1..P+3 and P+10 free (HAProxy, the replicas and PostgreSQL)."""
    for _ in range(100):
        base = 20000 + secrets.randbelow(30000)
        try:
            for offset in (0, 1, 2, 3, 10):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + offset))
            return base
        except OSError:
            continue
    raise RuntimeError("no free ports for a cluster")


def with_shared_store(config: Path, url: str, ca: str) -> Path:
    """`config`, changed in place to keep its store in PostgreSQL at `url`: the test's own
    `sandgate` commands (the CLI) then read the cluster's store, and a test that rewrites its
    config is heard by every replica. A JSON config gets it in its `sandgate` object."""
    text = config.read_text()
    if config.suffix == ".json":
        root = json.loads(text)
        extra = root.setdefault("sandgate", {})
        extra["store"] = {k: v for k, v in extra.get("store", {}).items() if k not in ("path", "backend", "url", "ca_file")}
        extra["store"].update({"backend": "postgres", "url": url, **({"ca_file": ca} if ca else {})})
        config.write_text(json.dumps(root, indent=2))
        return config
    store = f'[store]\nbackend = "postgres"\nurl = {json.dumps(url)}\n' + (f'ca_file = {json.dumps(ca)}\n' if ca else "")
    if "[store]" in text:
        # The SQLite file's path has no place beside PostgreSQL, and the engine is the one above.
        head, _, rest = text.partition("[store]\n")
        section, bracket, after = rest.partition("\n[")
        section = "\n".join(line for line in section.splitlines()
                             if not re.match(r"\s*(path|backend|url|ca_file)\s*=", line))
        text = head + store + section + ("\n" + bracket + after if bracket else "")
    else:
        text += "\n" + store
    config.write_text(text)
    return config


def cluster_command(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`scripts/cluster ARGS...`, its output captured."""
    return subprocess.run([str(REPO / "scripts" / "cluster"), *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def start_cluster(directory: Path, config: Path, port: int, env: dict) -> str:
    """`scripts/cluster start` with `config` on `port`; the MCP URL it prints. Raises with its
    error output when it did not start (and stops what it had started)."""
    started = cluster_command("start", str(directory), "--config", str(config), "--port", str(port), env=env)
    if started.returncode != 0:
        cluster_command("stop", str(directory), timeout=120)
        raise RuntimeError("the cluster did not start:\n" + started.stderr[-3000:])
    return started.stdout.strip().splitlines()[-1]


def rss_kib(pid: int, field_name: str = "VmRSS") -> int:
    """A process's resident memory (or another `/proc/PID/status` field) in KiB; 0 once gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


class Served:
    """What a test talks to over HTTP: its `url`, the `token` that lets it in, the `config` it
    serves, and its gateway processes (one, or a cluster's replicas)."""

    url: str | None
    token: str | None
    config: Path

    def pids(self) -> list[int]:
        raise NotImplementedError

    def rss_kib(self, field_name: str = "VmRSS") -> int:
        """The largest resident memory (or `field_name`) of its gateway processes, in KiB."""
        return max((rss_kib(pid, field_name) for pid in self.pids()), default=0)

    def signal(self, number: int):
        """Sends signal `number` to every gateway process."""
        for pid in self.pids():
            os.kill(pid, number)

    def logged(self, text: str) -> bool:
        """Whether every gateway process has logged a line holding `text` (a reload, say)."""
        return any(text in line for line in self.log)

    def running(self) -> bool:
        """Whether every gateway process still runs."""
        return all(rss_kib(pid) > 0 for pid in self.pids())

    @property
    def headers(self) -> dict:
        """What a client sends to be let in."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def target(self, headers: dict | None = None):
        """A transport for `mcp.Client`, carrying the token (or `headers` instead)."""
        client = create_mcp_http_client(headers=self.headers if headers is None else headers)
        return streamable_http_client(self.url, http_client=client)


class ClusterServer(Served):
    def __init__(self, config: Path, extra_args=(), token: str | None = None, state_home: Path | None = None):
        self.dir = Path(config).parent / f"cluster-{secrets.token_hex(3)}"
        self.port = free_base_port()
        env = {**os.environ, "SANDGATE_BIN": os.environ.get("SANDGATE_BIN", str(REPO / "target" / "debug" / "sandgate")),
               "SANDGATE_SERVE_ARGS": " ".join(extra_args)}
        if state_home is not None:
            env["SANDGATE_CLUSTER_STATE"] = str(state_home)
        # The test server's PostgreSQL, named to the cluster too, so it starts none of its own.
        env["DATABASE_URL"] = fresh_database("cluster")
        env["DATABASE_CA"] = os.environ.get("SANDGATE_TEST_DATABASE_CA", "")
        self.config = with_shared_store(Path(config), env["DATABASE_URL"], env["DATABASE_CA"])
        self.url = start_cluster(self.dir, self.config, self.port, env)
        self.token = token
        if self.token is None:
            generated = GENERATED_TOKEN.search((self.dir / "replica-1.log").read_text())
            self.token = generated.group(1) if generated else None

    @property
    def log(self) -> list[str]:
        return [line for n in (1, 2, 3) for line in self.replica_log(n)]

    def logged(self, text: str) -> bool:
        return all(any(text in line for line in self.replica_log(n)) for n in (1, 2, 3))

    def replica_log(self, n: int) -> list[str]:
        path = self.dir / f"replica-{n}.log"
        return path.read_text().splitlines(keepends=True) if path.exists() else []

    def pids(self) -> list[int]:
        return [int((self.dir / f"replica-{n}.pid").read_text()) for n in (1, 2, 3)
                if (self.dir / f"replica-{n}.pid").exists()]

    def replica_url(self, n: int) -> str:
        return f"http://127.0.0.1:{self.port + n}/mcp"

    def close(self):
        cluster_command("stop", str(self.dir), timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)
