"""A soak: 1,000 executions, hostile and benign interleaved, through one `sandgate serve` with the
real npm servers. Every benign execution returns its right result; afterwards the gateway's RSS is
within 50 MB of where it started and no sandbox worker is above its baseline plus its margin."""

import json
import time

import pytest

from hostile import DEFAULT_MAX_OUTPUT, RESPONSE_SLACK, watched_gateway

pytestmark = pytest.mark.anyio

EXECUTIONS = 1000
GATEWAY_GROWTH_MIB = 50
# A worker keeps its template image plus up to 8 MiB of the region past it (TRIM_ABOVE_BYTES),
# and what the allocator's free lists hold there.
WORKER_MARGIN_MIB = 16

BENIGN = [
    ("return 1 + 1", 2),
    ("return await everything.echo({message: 'soak'})", "Echo: soak"),
    ('{"tool": "everything.echo", "arguments": {"message": "json"}}', "Echo: json"),
    ("everything.echo({message: 'single'})", "Echo: single"),
    ("const r = await Promise.all([1, 2, 3].map(n => everything.echo({message: `m${n}`}))); return r.join(',')", "Echo: m1,Echo: m2,Echo: m3"),
    ("return Array.from({length: 100}, (_, i) => i).reduce((a, b) => a + b, 0)", 4950),
    ("console.log('hello'); return {ok: true}", {"ok": True}),
    ("return new URL('https://example.com/a?b=1').searchParams.get('b')", "1"),
    ("return 'x\\ud800'", "x\ufffd"),
    ("return (await everything['get-sum']({a: 2, b: 3}))", None),
]

HOSTILE = [
    "return " + "[" * 5000 + "]" * 5000,
    "throw new Error('x'.repeat(3e6))",
    "for (let i = 0; i < 20000; i++) console.log(i)",
    "return 'x'.repeat(20e6)",
    "for (let n = 1; n < 40; n++) { try { new ArrayBuffer(n * 1024 * 1024) } catch (e) {} } return 1",
    "return 'x'.repeat(100e6).length",
    "return await everything.echo({message: 'x'.repeat(5 * 1024 * 1024)})",
    "return Object.keys(await import('sandgate:preamble'))",
    "let a = []; for (let i = 0; i < 100000; i++) a = [a]; return a",
    "const o = {}; for (let i = 0; i < 50000; i++) o['k' + i] = 'v'.repeat(20); return o",
]


@pytest.mark.timeout(900)
async def test_a_thousand_executions_leave_the_gateway_as_they_found_it(tmp_path):
    async with watched_gateway(tmp_path) as gateway:
        # Warm up every path once, then take the baselines.
        for code, _ in BENIGN:
            await gateway.chain(code)
        for code in HOSTILE:
            await gateway.chain(code)
        time.sleep(0.5)
        gateway_start = gateway.gateway_rss_mib()
        worker_start = max(gateway.worker_rss_mib())
        wrong = []
        started = time.monotonic()
        for i in range(EXECUTIONS):
            if i % 2 == 0:
                code, expected = BENIGN[(i // 2) % len(BENIGN)]
                result = await gateway.chain(code)
                data = result.structured_content or {}
                if result.is_error or (expected is not None and data.get("result") != expected):
                    wrong.append((code[:60], json.dumps(data.get("result"))[:100], (data.get("error") or {}).get("message", "")[:200]))
            else:
                code = HOSTILE[(i // 2) % len(HOSTILE)]
                result = await gateway.chain(code)
                size = len(json.dumps(result.model_dump(by_alias=True, exclude_none=True, mode="json"), ensure_ascii=False))
                if size > DEFAULT_MAX_OUTPUT + RESPONSE_SLACK:
                    wrong.append(("hostile response not bounded", code[:60], size))
        elapsed = time.monotonic() - started
        assert not wrong, wrong[:10]
        time.sleep(1.0)
        gateway_end = gateway.gateway_rss_mib()
        workers_end = gateway.worker_rss_mib()
        print(f"\n{EXECUTIONS} executions in {elapsed:.1f} s; gateway RSS {gateway_start:.0f} → {gateway_end:.0f} MiB; "
              f"workers {worker_start:.0f} → {[round(w) for w in workers_end]} MiB")
        assert gateway_end <= gateway_start + GATEWAY_GROWTH_MIB, (gateway_start, gateway_end)
        assert all(w <= worker_start + WORKER_MARGIN_MIB for w in workers_end), (worker_start, workers_end)
