"""`read_output` from another replica: two `sandgate serve --http` replicas on one PostgreSQL
database; one stores a 1 MiB output, the other serves 20,000-byte reads of it at random
offsets (stateless 2026-07-28 requests, one keep-alive client, in sequence). The same reads
from one replica on its SQLite store, in the same run, for comparison.

    .venv/bin/python tests/bench/read_output.py target/release/sandgate <postgres admin URL> [reads]

Prints p50 and p99 of each, in milliseconds."""

from __future__ import annotations

import asyncio
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from http_throughput import META, TOKEN, fresh_database, request, start  # noqa: E402

HEADERS = {"Authorization": f"Bearer {TOKEN}", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}


def config(store: str) -> Path:
    tmp = Path(tempfile.mkdtemp())
    path = tmp / "sandgate.toml"
    path.write_text(f'{store}\n[[http.tokens]]\ntoken = "{TOKEN}"\nprofile = "default"\n')
    return path


async def call(port: int, name: str, arguments: dict, i: int) -> dict:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        _, body, _ = await request(reader, writer, port, {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                                            "params": {"name": name, "arguments": arguments, "_meta": META}},
                                   {**HEADERS, "Mcp-Name": name})
    finally:
        writer.close()
    return json.loads(body)["result"]


async def reads(port: int, execution_id: str, count: int) -> list[float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    rng = random.Random(7)
    took = []
    loop = asyncio.get_running_loop()
    for i in range(count):
        offset = rng.randrange(0, (1 << 20) - 20_000)
        started = loop.time()
        status, body, _ = await request(reader, writer, port, {
            "jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "read_output", "arguments": {"execution_id": execution_id, "offset": offset, "length": 20_000},
                       "_meta": META}}, {**HEADERS, "Mcp-Name": "read_output"})
        took.append(loop.time() - started)
        assert status == 200 and b'"isError":true' not in body, body[:300]
    writer.close()
    return sorted(took)


def summary(label: str, took: list[float]) -> str:
    return (f"{label:<40} p50 {took[len(took) // 2] * 1000:6.2f} ms  "
            f"p99 {took[int(len(took) * 0.99)] * 1000:6.2f} ms  ({len(took)} reads)")


async def main():
    binary, admin = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    make = "return 'x'.repeat(1 << 20)"
    pg = config(f'[store]\nbackend = "postgres"\nurl = "{fresh_database(admin)}"\n')
    (one, port_one), (two, port_two) = start(binary, pg), start(binary, pg)
    sqlite, port_sqlite = start(binary, config(""))
    try:
        stored = await call(port_one, "call_tool_chain", {"code": make}, 1)
        execution_id = stored["structuredContent"]["execution_id"]
        print(summary("postgres, read from the other replica", await reads(port_two, execution_id, count)), flush=True)
        stored = await call(port_sqlite, "call_tool_chain", {"code": make}, 1)
        execution_id = stored["structuredContent"]["execution_id"]
        print(summary("sqlite, read from the same process", await reads(port_sqlite, execution_id, count)), flush=True)
    finally:
        for proc in (one, two, sqlite):
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    asyncio.run(main())
