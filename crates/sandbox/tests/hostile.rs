//! Hostile code: each script must end with a clear error (or a safe result) within its limit
//! plus 250 ms, and the pool must keep serving afterwards (replacing the worker where needed).

#![allow(clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use sandgate_sandbox::{ErrorKind, ExecutionResult, Limits};
use serde_json::json;

/// The wall limit for these runs; short so the suite stays quick.
const WALL_MS: u64 = 600;

/// The wall limit on V8: a run's time there includes starting an isolate with its heap when
/// none is ready (these runs ask for 32 MiB, so each after a stopped one waits for a fresh
/// isolate: 250-400 ms on a 2-core VM), which left cases that end at once in a few
/// milliseconds (a stack overflow, a 1 MB result, a log flood) at their deadline there.
fn wall_ms() -> u64 {
    if on_v8() { 1_500 } else { WALL_MS }
}
/// How far past its limit a run may end.
const SLACK: Duration = Duration::from_millis(250);

/// How far past its limit a run may end on V8: Deno lets an isolate it terminated inside a loop
/// run on for up to 2 s (SECURITY.md, the V8 engine), which slows the runs beside it.
fn slack() -> Duration {
    if on_v8() {
        Duration::from_millis(2_500)
    } else {
        SLACK
    }
}

#[derive(Debug)]
enum Expect {
    Kind(ErrorKind),
    AnyOf(&'static [ErrorKind]),
    /// Succeeds with this value (JSON text).
    Value(&'static str),
    /// Any ending is fine; the point is that it ends in time and harms nothing.
    Ends,
}

fn limits() -> Limits {
    Limits {
        wall_ms: wall_ms(),
        memory_bytes: 32 * 1024 * 1024,
        max_result_bytes: 100_000,
        max_log_bytes: 64 * 1024,
        ..Limits::default()
    }
}

const CASES: &[(&str, &str, Expect)] = &[
    (
        "busy loop",
        "while (true) {}",
        Expect::Kind(ErrorKind::Timeout),
    ),
    (
        "busy loop after await",
        "await null; while (true) {}",
        Expect::Kind(ErrorKind::Timeout),
    ),
    (
        "busy loop after a timer",
        "await new Promise(r => setTimeout(r, 5)); while (true) {}",
        Expect::Kind(ErrorKind::Timeout),
    ),
    (
        "busy loop inside try/catch",
        "try { while (true) {} } catch (e) { return 'caught'; }",
        Expect::Kind(ErrorKind::Timeout),
    ),
    (
        "retrying the busy loop in catch",
        "for (;;) { try { while (true) {} } catch (e) {} }",
        Expect::Kind(ErrorKind::Timeout),
    ),
    (
        "finally that continues",
        "for (;;) { try { throw 1; } finally { continue; } }",
        Expect::Kind(ErrorKind::Timeout),
    ),
    (
        "busy loop in eval",
        "eval('while (true) {}');",
        Expect::Kind(ErrorKind::Timeout),
    ),
    (
        "busy loop in new Function",
        "new Function('while (true) {}')();",
        Expect::Kind(ErrorKind::Timeout),
    ),
    (
        "endless generator",
        "function* g() { while (true) yield 1; } for (const x of g()) {}",
        Expect::Kind(ErrorKind::Timeout),
    ),
    (
        "catastrophic regex",
        "return /^(a+)+$/.test('a'.repeat(40) + 'b');",
        Expect::Kind(ErrorKind::Timeout),
    ),
    (
        "array memory bomb",
        "const a = []; while (true) a.push(new Array(100000).fill(1));",
        Expect::Kind(ErrorKind::Memory),
    ),
    (
        "string doubling",
        "let s = 'x'; while (true) s += s;",
        Expect::AnyOf(&[ErrorKind::Memory, ErrorKind::Runtime]),
    ),
    (
        "huge array",
        "return new Array(1e9).fill(0).length;",
        Expect::AnyOf(&[ErrorKind::Memory, ErrorKind::Runtime]),
    ),
    (
        "map of objects",
        "const m = new Map(); for (let i = 0; ; i++) m.set(i, { i, s: 'v' + i });",
        Expect::AnyOf(&[ErrorKind::Memory, ErrorKind::Timeout]),
    ),
    (
        "huge ArrayBuffer",
        "return new ArrayBuffer(2 ** 31).byteLength;",
        Expect::AnyOf(&[ErrorKind::Memory, ErrorKind::Runtime]),
    ),
    (
        "huge JSON.parse",
        "return JSON.parse('[' + '1,'.repeat(2e7) + '1]').length;",
        Expect::AnyOf(&[ErrorKind::Memory, ErrorKind::Runtime]),
    ),
    (
        "tool arguments memory bomb",
        "await test.echo({ x: 'y'.repeat(50e6) });",
        Expect::AnyOf(&[ErrorKind::Memory, ErrorKind::Runtime]),
    ),
    (
        "deep recursion",
        "function f() { return f() + 1; } return f();",
        Expect::Kind(ErrorKind::Stack),
    ),
    (
        "arrow recursion",
        "const f = (n) => f(n + 1) + 1; return f(0);",
        Expect::Kind(ErrorKind::Stack),
    ),
    (
        "deeply nested result",
        "let o = {}; for (let i = 0; i < 1e6; i++) o = { o }; return o;",
        Expect::AnyOf(&[ErrorKind::Stack, ErrorKind::Memory, ErrorKind::Runtime]),
    ),
    (
        "giant output",
        "return 'x'.repeat(1e6);",
        Expect::Kind(ErrorKind::OutputLimit),
    ),
    (
        "giant array output",
        "return new Array(1e5).fill({ a: 'b' });",
        Expect::Kind(ErrorKind::OutputLimit),
    ),
    (
        "log flood",
        "for (let i = 0; i < 2e4; i++) console.log('spam ' + i); return 1;",
        Expect::Value(r#"1"#),
    ),
    (
        "one huge log line",
        "console.log('x'.repeat(5e6)); return 2;",
        Expect::Value(r#"2"#),
    ),
    (
        "timer flood",
        "for (let i = 0; i < 1e6; i++) setTimeout(() => {}, 1000);",
        Expect::Kind(ErrorKind::Runtime),
    ),
    (
        "endless timer chain",
        "function t() { setTimeout(t, 0); } t(); await new Promise(() => {});",
        Expect::Kind(ErrorKind::Timeout),
    ),
    (
        "promise storm",
        "for (;;) { await Promise.resolve(); }",
        Expect::Kind(ErrorKind::Timeout),
    ),
    (
        "microtask chain",
        "const p = () => Promise.resolve().then(p); p(); await new Promise(r => setTimeout(r, 5000));",
        // Each link stays reachable from the next, so the chain may exhaust the heap first.
        Expect::AnyOf(&[ErrorKind::Timeout, ErrorKind::Memory]),
    ),
    // Depending on where memory runs out, QuickJS may drop the rejection itself; the chain then
    // just stops, which is reported as a stall (runtime) whose message names that cause.
    (
        "async recursion",
        "const f = async () => { await null; return f(); }; await f();",
        Expect::AnyOf(&[ErrorKind::Timeout, ErrorKind::Memory, ErrorKind::Runtime]),
    ),
    (
        "million promises",
        "return (await Promise.all(Array.from({ length: 1e6 }, () => Promise.resolve(1)))).length;",
        Expect::Ends,
    ),
    (
        "promise that never settles",
        "await new Promise(() => {});",
        Expect::Kind(ErrorKind::Runtime),
    ),
    (
        "Atomics.wait",
        "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); return 'woke';",
        Expect::AnyOf(&[ErrorKind::Timeout, ErrorKind::Runtime]),
    ),
    (
        "tool call flood",
        "for (let i = 0; i < 2000; i++) await test.text(); return 'done';",
        Expect::Kind(ErrorKind::Runtime),
    ),
    (
        "constructor escape",
        "const g = constructor.constructor('return this')(); return [typeof g.process, typeof g.require, typeof g.std, typeof g.os, typeof g.print, typeof g.scriptArgs];",
        Expect::Value(
            r#"["undefined", "undefined", "undefined", "undefined", "undefined", "undefined"]"#,
        ),
    ),
    (
        "hunting for the bridge",
        "return Object.getOwnPropertyNames(globalThis).filter(k => /natives|call$|callHost|__sg/.test(k));",
        Expect::Value(r#"[]"#),
    ),
    (
        "reaching natives through the preamble",
        "return [typeof test.echo.caller, Object.getOwnPropertyNames(test.echo)];",
        Expect::AnyOf(&[ErrorKind::Runtime]),
    ),
    (
        "replacing a tool",
        "test.echo = async () => 'hijacked'; return await test.echo({});",
        Expect::Kind(ErrorKind::Runtime),
    ),
    (
        "replacing a backend",
        "globalThis.test = { echo: async () => 'hijacked' }; return await test.echo({});",
        Expect::Kind(ErrorKind::Runtime),
    ),
    (
        "a tool outside the set",
        "return await mcp.evil.steal({});",
        Expect::Kind(ErrorKind::Runtime),
    ),
    (
        "forging results with JSON.parse",
        "JSON.parse = () => ({ structuredContent: 'forged' }); return await test.echo({ a: 1 });",
        Expect::Value(r#"{"echo": {"a": 1}}"#),
    ),
    (
        "polluting Object.prototype.then",
        "Object.prototype.then = function (r) { r('polluted'); }; return await test.echo({ a: 1 });",
        Expect::Ends,
    ),
    (
        "polluting toJSON",
        "Object.defineProperty(Object.prototype, 'toJSON', { value: () => 'evil', configurable: true }); const r = await test.echo({ a: 1 }); delete Object.prototype.toJSON; return r;",
        Expect::Ends,
    ),
    (
        "dynamic import of fs",
        "const fs = await import('fs'); return fs.readFileSync('/etc/passwd', 'utf8');",
        Expect::AnyOf(&[ErrorKind::Runtime, ErrorKind::Syntax]),
    ),
    (
        // An `fs` import gives the granted `fs` (none here: the name is not defined).
        "static import",
        "import { readFileSync } from 'fs';\nreturn readFileSync('/etc/passwd');",
        Expect::Kind(ErrorKind::Runtime),
    ),
    (
        "static import of another module",
        "import { execSync } from 'child_process';\nreturn execSync('id');",
        Expect::Kind(ErrorKind::Syntax),
    ),
    (
        "require",
        "return require('fs').readFileSync('/etc/passwd');",
        Expect::Kind(ErrorKind::Runtime),
    ),
    (
        "the environment",
        "return process.env;",
        Expect::Kind(ErrorKind::Runtime),
    ),
    (
        "a socket via fetch",
        "return await fetch('http://127.0.0.1:22');",
        Expect::Kind(ErrorKind::Runtime),
    ),
    (
        "throwing a non-Error",
        "throw { secret: 1 };",
        Expect::Kind(ErrorKind::Runtime),
    ),
    (
        "throwing null",
        "throw null;",
        Expect::Kind(ErrorKind::Runtime),
    ),
];

async fn check(
    sb: &sandgate_sandbox::Sandbox,
    name: &str,
    code: &str,
    expect: &Expect,
) -> ExecutionResult {
    let started = Instant::now();
    let result = run_with(sb, code, limits()).await;
    let elapsed = started.elapsed();
    assert!(
        elapsed <= Duration::from_millis(wall_ms()) + slack(),
        "{name}: took {elapsed:?}, more than its limit plus {:?}: {result:?}",
        slack()
    );
    // On V8 a heap used up inside a builtin (a billion-slot fill, a huge `JSON.parse`) may
    // end as a loop the deadline stops, or as a stall, rather than as `memory`; and a bomb
    // whose isolate started beside others may reach its deadline first (SECURITY.md, the V8
    // engine). It still ends in time, and nothing else is harmed.
    let memory_expected = match expect {
        Expect::Kind(kind) => *kind == ErrorKind::Memory,
        Expect::AnyOf(kinds) => kinds.contains(&ErrorKind::Memory),
        _ => false,
    };
    let v8_timeout = on_v8()
        && memory_expected
        && result.error.as_ref().is_some_and(|e| {
            matches!(
                e.kind,
                ErrorKind::Memory | ErrorKind::Timeout | ErrorKind::Runtime
            )
        });
    // A V8 isolate stopped inside a loop runs on for up to 2 s (SECURITY.md, the V8 engine):
    // let it end before the next case, whose time is measured.
    if on_v8()
        && result
            .error
            .as_ref()
            .is_some_and(|e| e.kind == ErrorKind::Timeout)
    {
        tokio::time::sleep(Duration::from_millis(2_200)).await;
    }
    if v8_timeout {
        return result;
    }
    // On V8 a tool call crosses two more threads (the isolate's and Deno's main thread, about
    // 0.4 ms a call), so the flood's thousand calls may not fit in the wall time: it ends at its
    // deadline instead of at the call limit, in time all the same.
    if on_v8() && name == "tool call flood" {
        let kind = result.error.as_ref().map(|e| e.kind);
        assert!(
            matches!(kind, Some(ErrorKind::Runtime | ErrorKind::Timeout)),
            "{name}: {result:?}"
        );
        return result;
    }
    match (expect, &result.error) {
        (Expect::Kind(kind), Some(error)) => assert_eq!(error.kind, *kind, "{name}: {error:?}"),
        (Expect::AnyOf(kinds), Some(error)) => {
            assert!(kinds.contains(&error.kind), "{name}: {error:?}")
        }
        (Expect::Value(v), None) => {
            let expected: serde_json::Value = serde_json::from_str(v).expect("valid expectation");
            assert_eq!(result.value.as_ref(), Some(&expected), "{name}");
        }
        (Expect::Ends, _) => {}
        (expect, _) => panic!("{name}: expected {expect:?}, got {result:?}"),
    }
    if let Some(error) = &result.error {
        assert!(
            !error.message.is_empty(),
            "{name}: the error says something"
        );
        assert!(
            !error.message.contains("secret") || name == "throwing a non-Error",
            "{name}"
        );
    }
    result
}

#[tokio::test]
async fn hostile_scripts_end_in_time_and_the_pool_keeps_serving() {
    assert!(CASES.len() >= 40, "at least 40 hostile scripts");
    let sb = sandbox(2).await;
    for (name, code, expect) in CASES {
        let result = check(&sb, name, code, expect).await;
        if *name == "log flood" {
            let bytes: usize = result.logs.iter().map(|l| l.message.len()).sum();
            // The head within the limit, then the marker and a tail of at most 8 KiB.
            assert!(
                bytes <= limits().max_log_bytes + 9 * 1024,
                "logs are capped: {bytes}"
            );
            assert!(
                result
                    .logs
                    .iter()
                    .any(|l| l.message.contains("past the log limits")),
                "the cut is announced"
            );
        }
        let after = run(&sb, "return 'still serving';").await;
        assert_eq!(
            after.value,
            Some(json!("still serving")),
            "after {name}: {after:?}"
        );
    }
    assert_eq!(
        sb.backstop_kills(),
        0,
        "every hostile script was stopped by its own limits, none by killing its worker"
    );
}

#[tokio::test]
async fn hostile_scripts_end_in_time_while_benign_ones_share_their_worker() {
    let sb = sandbox_of_exactly(1).await;
    for (name, code, expect) in CASES {
        let neighbours = (0..4).map(|i| {
            let code = format!(
                "const a = await test.echo({{ i: {i} }});\n\
                 await test.slow({{ ms: 20 }});\n\
                 globalThis.mine = {i};\n\
                 const b = await test.echo({{ j: a.echo.i }});\n\
                 return [b.echo.j, globalThis.mine, typeof leaked];"
            );
            let sb = sb.clone();
            async move { run(&sb, &code).await }
        });
        let (_, neighbours) = tokio::join!(
            check(&sb, name, code, expect),
            futures::future::join_all(neighbours)
        );
        for (i, neighbour) in neighbours.iter().enumerate() {
            assert_eq!(
                neighbour.value,
                Some(json!([i, i, "undefined"])),
                "a neighbour of {name}: {neighbour:?}"
            );
        }
    }
    assert_eq!(sb.workers().len(), 1, "one worker served them all");
    assert_eq!(sb.backstop_kills(), 0, "no worker was killed");
}

#[tokio::test]
async fn errors_carry_hints_for_limit_hits() {
    let sb = sandbox(1).await;
    let result = run_with(&sb, "\n\nwhile (true) {}", limits()).await;
    let error = result.error.expect("timeout");
    assert_eq!(error.kind, ErrorKind::Timeout);
    assert!(
        error
            .hint
            .as_deref()
            .is_some_and(|h| h.contains("endless loop")),
        "{error:?}"
    );
    let result = run_with(&sb, "function f() { return f(); }\nreturn f();", limits()).await;
    let error = result.error.expect("stack");
    assert_eq!((error.kind, error.line), (ErrorKind::Stack, Some(1)));
}
