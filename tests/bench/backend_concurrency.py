"""How many calls at once the npm reference servers take, measured directly (no sandgate in
between), to choose the default per-backend `max_concurrent_calls` (issue 14).

For each server, N calls are sent at once over one stdio session with the Python `mcp` client,
and the wall time until the last answer is reported next to the time of one call:
`server-everything`'s `trigger-long-running-operation` (1 s), `server-memory`'s `read_graph`
and `server-filesystem`'s `list_directory`.

    .venv/bin/python tests/bench/backend_concurrency.py [N ...]      # default: 1 16 100
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from conftest import reference_servers  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

CALLS = {
    "everything": ("trigger-long-running-operation", {"duration": 1, "steps": 1}),
    "memory": ("read_graph", {}),
    "filesystem": ("list_directory", {"path": None}),
}


async def measure(name: str, server: dict, counts: list[int], root: Path):
    tool, arguments = CALLS[name]
    if name == "filesystem":
        arguments = {"path": str(root)}
    params = StdioServerParameters(command=server["command"], args=server["args"], env=server.get("env"))
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        await client.call_tool(tool, arguments)  # warm up
        for n in counts:
            started = time.monotonic()
            results = await asyncio.gather(*(client.call_tool(tool, arguments) for _ in range(n)))
            wall = time.monotonic() - started
            failed = sum(1 for r in results if r.is_error)
            print(f"{name:<11} {tool:<32} {n:>4} at once: {wall:6.2f} s wall  ({failed} errors)", flush=True)


async def main():
    counts = [int(a) for a in sys.argv[1:]] or [1, 16, 100]
    tmp = Path(tempfile.mkdtemp())
    servers = reference_servers(tmp)
    for name, server in servers.items():
        await measure(name, server, counts, tmp / "files")


if __name__ == "__main__":
    asyncio.run(main())
