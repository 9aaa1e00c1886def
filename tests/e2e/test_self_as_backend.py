"""A config that lists sandgate itself (issue 34, item 1): by every route, no second sandgate
serves, the entry says why it is not started, and the other backends work.

Before, `sandgate check --config self.json` with an entry that ran `sandgate serve` on the same
file left about 100 `sandgate serve` processes within 40 s on 2 cores. Each case here starts
the gateway with such an entry next to the real `server-everything`, watches the whole process
table for 4 s, and checks:
- at most one other sandgate process ever appears (a copy reached indirectly, which refuses at
  once), none lives past a moment, and none has a child;
- the entry's status names the reason, and it is not retried;
- `everything.echo` answers through `call_tool_chain`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from conftest import SANDGATE, reference_servers

pytestmark = pytest.mark.anyio

WATCH_S = 4.0


def sandgate_processes(names: set[str]) -> dict[int, tuple[str, int]]:
    """Every process whose program is one of `names` (by its executable's inode, or its name),
    as pid → (command line, parent pid). Sandbox workers are left out."""
    found = {}
    own = os.stat(SANDGATE)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.stat(f"/proc/{pid}/exe")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError, ValueError):
            continue
        same_file = (exe.st_dev, exe.st_ino) == (own.st_dev, own.st_ino)
        if (same_file or Path(cmdline.split(" ")[0]).name in names) and "__worker" not in cmdline \
                and "sandbox-worker" not in cmdline:
            found[int(pid)] = (cmdline, parent)
    return found


class Watch:
    """Samples the process table every 20 ms while the case runs. A pid seen as a sandgate that
    later runs another program (a sandbox worker, `node`, `sh`) was the gateway's own fork
    caught between fork and exec, not a copy: it is left out."""

    def __init__(self, names: set[str]):
        self.names = names
        self.seen: dict[int, tuple[str, int, float, float]] = {}
        self.became_other: set[int] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            now = time.monotonic()
            current = sandgate_processes(self.names)
            for pid, (cmdline, parent) in current.items():
                first = self.seen.get(pid, (cmdline, parent, now, now))[2]
                self.seen[pid] = (cmdline, parent, first, now)
            for pid in set(self.seen) - set(current) - self.became_other:
                if runs_another_program(pid):
                    self.became_other.add(pid)
            self.stop.wait(0.02)

    def done(self) -> dict:
        self.stop.set()
        self.thread.join()
        return {pid: v for pid, v in self.seen.items() if pid not in self.became_other}


def runs_another_program(pid: int) -> bool:
    """Whether `pid` still runs, now as some other program than sandgate (its exe readable: not
    gone, not a zombie) or as a sandbox worker."""
    try:
        exe = os.stat(f"/proc/{pid}/exe")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    own = os.stat(SANDGATE)
    return (exe.st_dev, exe.st_ino) != (own.st_dev, own.st_ino) or "__worker" in cmdline \
        or "sandbox-worker" in cmdline


def config_with(tmp_path: Path, entry: dict, name: str = "self.json") -> Path:
    servers = {"everything": reference_servers(tmp_path)["everything"], "me": entry}
    config = tmp_path / name
    config.write_text(json.dumps({"mcpServers": servers, "sandgate": {
        "gateway": {"cache_file": str(tmp_path / "tools.json")}, "store": {"path": str(tmp_path / "store.db")}}}))
    return config


def routes(tmp_path: Path) -> list[tuple[str, dict, set[str]]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gateway-alias").symlink_to(SANDGATE)
    shutil.copy(SANDGATE, bin_dir / "gateway-copy")
    config = str(tmp_path / "self.json")
    serve = ["serve", "--config", config]
    path = f"{bin_dir}:{Path(SANDGATE).parent}:{os.environ['PATH']}"
    return [
        ("its own path", {"command": SANDGATE, "args": serve}, set()),
        ("its name on PATH", {"command": "sandgate", "args": serve, "env": {"PATH": path}}, set()),
        ("a link to it", {"command": str(bin_dir / "gateway-alias"), "args": serve}, set()),
        ("through a shell", {"command": "sh", "args": ["-c", f"exec {SANDGATE} serve --config {config}"]}, set()),
        ("a copy of it", {"command": str(bin_dir / "gateway-copy"), "args": serve}, {"gateway-copy"}),
        ("sandgate check", {"command": SANDGATE, "args": ["check", "--config", config]}, set()),
    ]


async def serve_and_watch(config: Path, names: set[str], cwd: Path | None = None, args: list[str] | None = None):
    watch = Watch(names | {"sandgate"})
    params = StdioServerParameters(command=SANDGATE, args=args or ["serve", "--config", str(config)],
                                   cwd=str(cwd) if cwd else None)
    async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
        result = await client.call_tool("call_tool_chain", {"code": 'return await everything.echo({message: "still here"})'})
        echoed = (result.structured_content or {}).get("result")
        started = time.monotonic()
        while time.monotonic() - started < WATCH_S:
            time.sleep(0.1)
        status = json.loads((await client.read_resource("sandgate://backend/me")).contents[0].text)
    return echoed, status, watch.done()


def judge(label: str, echoed, status: dict, seen: dict) -> list[str]:
    problems = []
    if echoed != "Echo: still here":
        problems.append(f"the other backend did not answer: {echoed!r}")
    why = json.dumps(status)
    if "sandgate itself" not in why:
        problems.append(f"the entry's status does not say why: {why[:400]}")
    if status.get("state") == "restarting" or status.get("restarts", 0) > 0:
        problems.append(f"the entry is retried: {why[:300]}")
    # The gateway under test is this test's child; any other sandgate is a copy it started.
    copies = {pid: v for pid, v in seen.items() if v[1] != os.getpid()}
    if len(copies) > 1:
        problems.append(f"{len(copies)} other sandgate processes started: {[v[0] for v in copies.values()][:5]}")
    for cmd, _, first, last in copies.values():
        if last - first > 1.0:
            problems.append(f"a second sandgate lived {last - first:.1f} s: {cmd}")
    if {v[1] for v in copies.values()} & set(copies):
        problems.append("a second sandgate started a third")
    return [f"{label}: {p}" for p in problems]


@pytest.mark.anyio
async def test_a_config_that_lists_sandgate_starts_no_second_one(tmp_path):
    failures = []
    for label, entry, names in routes(tmp_path):
        case = tmp_path / label.replace(" ", "_")
        case.mkdir()
        config = config_with(case, entry)
        config.write_text(config.read_text().replace(str(tmp_path / "self.json"), str(config)))
        echoed, status, seen = await serve_and_watch(config, names)
        failures += judge(label, echoed, status, seen)
    assert not failures, "\n".join(failures)


@pytest.mark.anyio
async def test_the_default_lookup_of_a_project_mcp_json_that_lists_sandgate(tmp_path):
    """A Claude Code project `.mcp.json` holding the README's own sandgate entry, read by the
    default lookup (`sandgate serve` with no `--config`, in that directory)."""
    entry = {"command": SANDGATE, "args": ["serve"]}
    config = config_with(tmp_path, entry, name=".mcp.json")
    echoed, status, seen = await serve_and_watch(config, set(), cwd=tmp_path, args=["serve"])
    problems = judge("default lookup", echoed, status, seen)
    assert not problems, problems


def test_check_says_the_entry_is_not_started_and_exits_1(tmp_path):
    config = config_with(tmp_path, {"command": SANDGATE, "args": ["serve", "--config", str(tmp_path / "self.json")]})
    watch = Watch(set())
    done = subprocess.run([SANDGATE, "check", "--config", str(config)], capture_output=True, text=True, timeout=120)
    seen = watch.done()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "sandgate itself" in done.stdout + done.stderr, done.stdout + done.stderr
    copies = [v for v in seen.values() if "serve" in v[0]]
    assert not copies, copies
