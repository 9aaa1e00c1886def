"""Hostile Python (issue 50) at the level an attacker reaches: `call_tool_chain` with
`language: "python"` against `sandgate serve`. Each case checks the error kind, the time, the
response size, the gateway's and the workers' peak RSS, and that the gateway still answers
(the harness is `hostile.py`). Monty's own refusals are a second line; the worker's lockdown is
the first (crates/sandbox/tests/lockdown.rs)."""

from __future__ import annotations

import pytest

from hostile import Case, watched_gateway

pytestmark = pytest.mark.anyio

PY = {"language": "python", "timeout_ms": 3000}


def says(*words: str):
    def check(data: dict, text: str):
        return None if all(w in text for w in words) else f"the answer lacks {words}: {text[:300]}"
    return check


CASES = [
    # Introspection escapes: no way from an object to the interpreter, its modules or the host.
    Case("subclasses through __class__", "().__class__.__base__.__subclasses__()", PY, kind="runtime"),
    Case("__import__ of os", "__import__('os').system('id')", PY, kind="runtime"),
    Case("globals and builtins", "globals()['__builtins__']", PY, kind="runtime"),
    Case("eval of a built string", "eval('1' + '+1')", PY, kind="runtime"),
    Case("exec of a built string", "exec('import os')", PY, kind="runtime"),
    Case("a backend's private attributes", "everything.__dict__", PY, kind="runtime"),
    Case("a backend's class", "type(everything).__subclasses__()", PY, kind="runtime"),
    Case("open a host file", "open('/etc/passwd').read()", PY, kind="runtime", check=says("open()")),
    Case("pathlib", "from pathlib import Path\nPath('/etc/passwd').read_text()", PY, kind="runtime"),
    Case("the environment", "import os\nos.environ", PY, kind="runtime"),
    # Size bombs: each ends its own run with the memory limit, not the worker.
    Case("a ten-gigabyte string", "x = 'x' * 10**10", PY, kind="memory", worker_mib=120),
    Case("a billion-element list", "x = [0] * 10**9", PY, kind="memory", worker_mib=120),
    Case("a huge integer", "x = 10**10**8", PY, kind="memory", worker_mib=120),
    Case("a growing list", "l = []\nwhile True:\n    l.append('x' * 10000)", PY, kind="memory", worker_mib=120),
    Case("a growing dict", "{i: str(i) * 10 for i in range(10**8)}", PY, kind="memory", worker_mib=120),
    Case("a 4 MB string result is shaped", "'ab' * 2_000_000", PY, kind=None, gateway_mib=96, check=says("read_output")),
    Case("a 20 MB result passes the raw limit", "'x' * 20_000_000", PY, kind="output_limit", gateway_mib=96, worker_mib=160,
         check=says("max_result_bytes")),
    # Time: loops, regular-expression catastrophes and recursion.
    Case("an endless loop", "while True:\n    pass", PY, kind="timeout", seconds=4),
    Case("catastrophic backtracking", "import re\nre.match('(a+)+$', 'a' * 5000 + 'b')", PY, kind=None, seconds=4),
    Case("deep recursion", "def f(n):\n    return f(n + 1)\nf(0)", PY, kind="stack"),
    Case("source nested 100,000 deep", "(" * 100_000 + "1" + ")" * 100_000, PY, kind="syntax"),
    # Floods: calls, timers and output are bounded per execution.
    Case("a flood of calls", "import asyncio\nawait asyncio.gather(*[everything.echo(message=str(i)) for i in range(5000)])",
         PY, kind="any", seconds=10, check=says("max_tool_calls")),
    Case("a flood of timers", "import asyncio\nawait asyncio.gather(*[asyncio.sleep(1) for _ in range(20000)])",
         PY, kind="any", seconds=4, check=says("max_timers")),
    Case("a flood of output", "for i in range(10**6):\n    print('x' * 100)\n1", {**PY, "timeout_ms": 8000}, kind=None, seconds=9),
    # Nothing of one execution reaches the next.
    Case("a secret kept in a global", "secret = 's3cr3t'\nsecret", PY, kind=None),
    Case("the next execution reads it", "secret", PY, kind="runtime", check=says("not defined")),
]


async def test_hostile_python_is_contained(tmp_path):
    async with watched_gateway(tmp_path) as gateway:
        for case in CASES:
            await gateway.run_case(case)
        gateway.assert_all_contained()
