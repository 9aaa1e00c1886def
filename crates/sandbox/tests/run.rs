//! Scripts through real, locked-down worker processes: code shapes, TypeScript, result
//! mapping, fan-out, ToolError, hyphenated names, `.raw()`, console, timers, host functions.

#![allow(clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::*;
use sandgate_sandbox::{ErrorKind, PoolConfig, Sandbox};
use serde_json::json;

#[tokio::test]
async fn every_code_shape_runs() {
    let sb = sandbox(1).await;
    assert_eq!(
        value(&run(&sb, "const x = await test.echo({a: 1});\nreturn x;").await),
        json!({"echo": {"a": 1}})
    );
    assert_eq!(
        value(
            &run(
                &sb,
                "export default async function main() { return 1 + 1; }"
            )
            .await
        ),
        json!(2)
    );
    assert_eq!(
        value(&run(&sb, "export default async function () { return 'anon'; }").await),
        json!("anon")
    );
    assert_eq!(
        value(&run(&sb, "export async function main() { return [1, 2]; }").await),
        json!([1, 2])
    );
    assert_eq!(
        value(&run(&sb, "const a = 1;\na + 1;").await),
        json!(2),
        "a script that ends in an expression returns it"
    );
    assert_eq!(
        value(&run(&sb, "test.echo({a: 1})").await),
        json!({"echo": {"a": 1}}),
        "a bare call is the value"
    );
    assert_eq!(
        value(&run(&sb, "const a = 1;").await),
        json!(null),
        "no return gives null"
    );
}

#[tokio::test]
async fn typescript_syntax_is_accepted() {
    let sb = sandbox(1).await;
    let code = r#"
        interface Item { id: number; tags?: string[] }
        type Pair<T> = [T, T];
        enum Color { Red = "red", Green = "green" }
        function first<T>(xs: T[]): T | undefined { return xs[0]; }
        const items = [{ id: 1 }, { id: 2, tags: ["a"] }] as Item[];
        const pair: Pair<number> = [items[0].id, items[1]?.id ?? 0];
        const missing = (items[0] as Item).tags?.length ?? "none";
        return { pair, color: Color.Green, first: first(items)!.id, missing };
    "#;
    assert_eq!(
        value(&run(&sb, code).await),
        json!({"pair": [1, 2], "color": "green", "first": 1, "missing": "none"})
    );
}

#[tokio::test]
async fn results_map_as_the_contract_says() {
    let sb = sandbox(1).await;
    let code = "return { s: await test.echo({x: 1}), t: await test.text(), j: await test.json_text(), m: await test.multi(), raw: await test.text.raw() };";
    assert_eq!(
        value(&run(&sb, code).await),
        json!({
            "s": {"echo": {"x": 1}},
            "t": "plain text",
            "j": {"parsed": true},
            "m": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "raw": {"content": [{"type": "text", "text": "plain text"}]}
        })
    );
}

#[tokio::test]
async fn tool_errors_are_catchable() {
    let sb = sandbox(1).await;
    let code = r#"
        try { await test.fail({}); return "not thrown"; }
        catch (e) { return { isToolError: e instanceof ToolError, name: e.name, tool: e.tool, message: e.message, content: e.content }; }
    "#;
    assert_eq!(
        value(&run(&sb, code).await),
        json!({"isToolError": true, "name": "ToolError", "tool": "test.fail", "message": "it broke", "content": [{"type": "text", "text": "it broke"}]})
    );
    let uncaught = run(&sb, "await test.fail({});").await;
    let error = uncaught.error.expect("uncaught tool error");
    assert_eq!(error.kind, ErrorKind::ToolFailed);
    assert!(error.message.contains("it broke"), "{error:?}");
    assert_eq!(error.line, Some(1));
}

#[tokio::test]
async fn a_result_that_is_not_json_fails_the_call_at_the_calling_line() {
    let sb = sandbox(1).await;
    let caught = run(
        &sb,
        "try { await test.garbage({}); } catch (e) { return { name: e.name, kind: e.kind, json: e.message.includes('not valid JSON') }; }",
    )
    .await;
    assert_eq!(
        value(&caught),
        json!({"name": "ToolCallError", "kind": "tool_failed", "json": true})
    );
    let uncaught = run(&sb, "const a = 1;\nawait test.garbage.raw({});").await;
    let error = uncaught.error.expect("the call fails");
    assert_eq!(error.kind, ErrorKind::ToolFailed, "{error:?}");
    assert_eq!(error.line, Some(2), "{error:?}");
}

#[tokio::test]
async fn fan_out_runs_concurrently_up_to_the_cap() {
    let sb = sandbox(1).await;
    let bridge = Arc::new(TestBridge::default());
    let result = sb
        .run(execution("const r = await Promise.all([1,2,3,4,5,6,7,8].map(() => test.slow({ms: 200}))); return r.length;"), bridge.clone())
        .await;
    assert_eq!(value(&result), json!(8));
    // Concurrency is shown by the bridge, which counts the calls it holds at once; a wall-time
    // bound would also count the engine's start (250–400 ms for a V8 isolate here).
    assert_eq!(
        bridge.max_in_flight.load(Ordering::SeqCst),
        8,
        "all 8 calls were in flight at once"
    );
    assert_eq!(result.trace.len(), 8);
    assert!(result.trace.iter().all(|c| c.ok && c.name == "test.slow"));

    let limits = sandgate_sandbox::Limits {
        max_concurrent_calls: 2,
        ..Default::default()
    };
    let bridge = Arc::new(TestBridge::default());
    let mut e =
        execution("await Promise.all([1,2,3,4,5,6].map(() => test.slow({ms: 50}))); return 'ok';");
    e.limits = limits;
    assert_eq!(value(&sb.run(e, bridge.clone()).await), json!("ok"));
    assert_eq!(
        bridge.max_in_flight.load(Ordering::SeqCst),
        2,
        "the per-execution cap holds"
    );
}

#[tokio::test]
async fn hyphenated_and_original_names_work() {
    let sb = sandbox(1).await;
    let code = r#"return [await my_server.get_sum({a: 1, b: 2}), await globalThis["my-server"]["get-sum"]({a: 2, b: 2}), await mcp.my_server.get_sum({a: 3, b: 3}), await tools["my-server"].get_sum({a: 1, b: 0})];"#;
    assert_eq!(
        value(&run(&sb, code).await),
        json!([
            "The sum is 3",
            "The sum is 4",
            "The sum is 6",
            "The sum is 1"
        ])
    );
}

#[tokio::test]
async fn console_timers_context_and_host_functions() {
    let sb = sandbox(1).await;
    let code = r#"
        console.log("hello", { n: 1 }, [1, 2]);
        console.warn("careful");
        console.error(new Error("shown"));
        const order: string[] = [];
        setTimeout(() => order.push("late"), 30);
        const t = setTimeout(() => order.push("cancelled"), 10);
        clearTimeout(t);
        await new Promise((r) => setTimeout(r, 60));
        const sum = await addNumbers(2, 3, 4);
        return { order, user: context.user, sum };
    "#;
    let result = run(&sb, code).await;
    assert_eq!(
        value(&result),
        json!({"order": ["late"], "user": "ada", "sum": 9})
    );
    let logs: Vec<(String, String)> = result
        .logs
        .iter()
        .map(|l| (l.level.clone(), l.message.clone()))
        .collect();
    assert_eq!(logs[0], ("log".into(), "hello {\"n\":1} [1,2]".into()));
    assert_eq!(logs[1], ("warn".into(), "careful".into()));
    assert!(
        logs[2].0 == "error" && logs[2].1.starts_with("Error: shown"),
        "{logs:?}"
    );
}

#[tokio::test]
async fn logged_errors_point_at_the_users_own_lines() {
    let sb = sandbox(1).await;
    // TypeScript, so the wrapped script's lines and columns differ from these.
    let code = "interface Row { id: number }
function inner(rows: Row[]): never {
  throw new Error(`bad rows: ${rows.length}`);
}
try { inner([]); } catch (e) { console.log(e); }
try { await test.fail({}); } catch (e) { console.error(e); }
return 1;";
    let result = run(&sb, code).await;
    assert_eq!(value(&result), json!(1));
    let logs: Vec<&str> = result.logs.iter().map(|l| l.message.as_str()).collect();
    // QuickJS places a `new` call at the last position it evaluated, here `rows.length`; V8 at
    // the `new`.
    let column = if on_v8() { 9 } else { 32 };
    assert_eq!(
        logs[0],
        format!(
            "Error: bad rows: 0\n    at inner (line 3, column {column})\n    at <anonymous> (line 5, column 7)\n"
        ),
        "{logs:?}"
    );
    // A failed call's error names where the call was made, which is all the user can act on.
    assert_eq!(
        logs[1], "ToolError: it broke\n    at <anonymous> (line 6, column 18)\n",
        "{logs:?}"
    );
}

#[tokio::test]
async fn maps_sets_and_promises_do_not_turn_into_empty_objects() {
    let sb = sandbox(1).await;
    let code = r#"
        const sent = await test.echo({ tags: new Set(["a", "b"]), counts: new Map([["x", 1]]) });
        console.log(test.text({}));
        console.log(new Map([["k", new Set([1])]]));
        return { sent, result: { m: new Map([["a", 1], ["b", 2]]), s: new Set([3]) } };
    "#;
    let result = run(&sb, code).await;
    assert_eq!(
        value(&result),
        json!({
            "sent": {"echo": {"tags": ["a", "b"], "counts": {"x": 1}}},
            "result": {"m": {"a": 1, "b": 2}, "s": [3]}
        })
    );
    let logs: Vec<&str> = result.logs.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(logs, ["[object Promise]", "{\"k\":[1]}"]);
}

#[tokio::test]
async fn web_basics_are_there_and_nothing_else() {
    let sb = sandbox(1).await;
    let code = r#"
        const u = new URL("/a/b?x=1#h", "https://example.com:8443");
        u.searchParams.append("y", "two words");
        const q = new URLSearchParams({ a: "1", b: "é" });
        const bytes = new TextEncoder().encode("héllo");
        const uuid = crypto.randomUUID();
        const rnd = crypto.getRandomValues(new Uint8Array(8));
        const clone = structuredClone({ d: new Date(0), m: new Map([["k", 1]]), s: new Set([1]) });
        return {
            href: u.href, host: u.host, path: u.pathname, q: q.toString(),
            len: bytes.length, text: new TextDecoder().decode(bytes),
            b64: btoa("hi"), unb64: atob("aGk="),
            uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(uuid),
            rnd: rnd.length, clone: [clone.d instanceof Date, clone.m.get("k"), clone.s.has(1)],
            absent: [typeof fetch, typeof require, typeof process, typeof Deno, typeof XMLHttpRequest],
        };
    "#;
    assert_eq!(
        value(&run(&sb, code).await),
        json!({
            "href": "https://example.com:8443/a/b?x=1&y=two+words#h", "host": "example.com:8443", "path": "/a/b", "q": "a=1&b=%C3%A9",
            "len": 6, "text": "héllo", "b64": "aGk=", "unb64": "hi", "uuid": true, "rnd": 8, "clone": [true, 1, true],
            "absent": ["undefined", "undefined", "undefined", "undefined", "undefined"]
        })
    );
}

#[tokio::test]
async fn interfaces_are_introspectable() {
    let sb = sandbox(1).await;
    let code = r#"return [typeof __interfaces.test.echo, __getToolInterface("test.echo"), __getToolInterface("get-sum").length > 0, Object.keys(__interfaces).sort()];"#;
    assert_eq!(
        value(&run(&sb, code).await),
        json!([
            "string",
            "function echo(args: object): Promise<unknown>",
            true,
            ["my_server", "test"]
        ])
    );
}

#[tokio::test]
async fn every_run_gets_a_fresh_runtime() {
    let sb = sandbox(1).await;
    // The worker copies each runtime back from its template (see `engine::snapshot::Snapshot`), so
    // everything below checks that the copy-back undoes all a run can do.
    // On V8 every run gets an isolate of its own, never used before: there is no template.
    assert!(
        on_v8() || sb.template_bytes().is_some_and(|b| b > 100_000),
        "workers copy runtimes from a template image: {:?}",
        sb.template_bytes()
    );
    nothing_carries_over(&sb).await;
}

#[tokio::test]
async fn workers_told_not_to_use_a_template_build_a_runtime_per_run() {
    let mut config = PoolConfig::new(worker_program());
    config.workers = 1;
    config.args = vec![sandgate_sandbox::NO_TEMPLATE_ARG.into()];
    let sb = Sandbox::start(config).await.expect("sandbox starts");
    assert_eq!(sb.template_bytes(), None);
    nothing_carries_over(&sb).await;
}

async fn nothing_carries_over(sb: &Sandbox) {
    let sb = sb.clone();
    assert_eq!(
        value(
            &run(
                &sb,
                "globalThis.leak = 42; Object.prototype.polluted = true; return 1;"
            )
            .await
        ),
        json!(1)
    );
    assert_eq!(
        value(&run(&sb, "return [typeof leak, ({}).polluted === undefined];").await),
        json!(["undefined", true])
    );

    // Builtins replaced or deleted, a global symbol registered, a timer and a promise left
    // pending, a module-level cache filled: none of it reaches the next run.
    let tamper = r#"
        Array.prototype.map = () => "tampered";
        JSON.stringify = () => "tampered";
        delete Array.prototype.includes;
        Math.random = () => 4;
        Symbol.for("sandgate-test");
        globalThis.cache = new Map([[1, "x".repeat(1000)]]);
        setTimeout(() => {}, 60_000);
        new Promise(() => {});
        return 1;
    "#;
    let tampered = run(&sb, tamper).await;
    assert!(tampered.error.is_none(), "{:?}", tampered.error);
    let check = r#"
        return [
            [1, 2].map((x) => x * 2),
            typeof [].includes,
            Math.random() < 1,
            Symbol.keyFor(Symbol.for("other")) === "other",
            typeof cache,
        ];
    "#;
    assert_eq!(
        value(&run(&sb, check).await),
        json!([[2, 4], "function", true, true, "undefined"])
    );

    // Math.random is seeded for every run, not replayed from the template.
    let draw = "return [Math.random(), Math.random(), Math.random()];";
    let first = value(&run(&sb, draw).await);
    let second = value(&run(&sb, draw).await);
    assert_ne!(first, second, "two runs drew the same numbers");

    // A run that fills tens of MiB leaves nothing behind: the next trivial run's heap is the
    // same as before it.
    let baseline = run(&sb, "return 1;").await.stats.memory_bytes;
    let big = run(
        &sb,
        // Arrays of numbers: V8 keeps a repeated string as a few shared pieces, so strings
        // would not fill its heap.
        "globalThis.parts = []; for (let i = 0; i < 250; i++) parts.push(Array.from({ length: 10_000 }, (_, j) => j + i)); return parts.length;",
    )
    .await;
    assert_eq!(value(&big), json!(250));
    assert!(
        big.stats.memory_bytes > baseline + 15_000_000,
        "{:?}",
        big.stats
    );
    let after = run(&sb, "return 1;").await.stats.memory_bytes;
    // A template copy comes back byte for byte. On V8 a run counts what the isolate's heap
    // grew by while it ran (an isolate serves runs one after another, each in a fresh context),
    // which varies a little with what it compiled.
    let tolerance = if on_v8() { 512 * 1024 } else { 4096 };
    assert!(
        after.abs_diff(baseline) < tolerance,
        "{after} after, {baseline} before"
    );
}

/// One worker serves a thousand varied executions from the same template image: calls,
/// failures, timers, web basics, big and small heaps, thrown errors. Every result stays right
/// and the heap a trivial run reports does not drift, so nothing an execution did survives the
/// copy-back, and the allocator's bookkeeping in the image stays sound.
#[tokio::test]
async fn one_worker_serves_a_thousand_varied_runs_from_its_template() {
    let mut config = PoolConfig::new(worker_program());
    config.workers = 1;
    config.recycle_after = 10_000;
    let sb = Sandbox::start(config).await.expect("sandbox starts");
    let baseline = run(&sb, "return 1;").await.stats.memory_bytes;
    let scripts: [(&str, serde_json::Value); 8] = [
        ("return (await test.echo({n: 1})).echo.n;", json!(1)),
        (
            "const r = await Promise.all([1, 2, 3].map((n) => test.echo({n}))); return r.map((x) => x.echo.n);",
            json!([1, 2, 3]),
        ),
        (
            "try { await test.fail(); } catch (e) { return e.name; }",
            json!("ToolError"),
        ),
        (
            "return await new Promise((resolve) => setTimeout(() => resolve('late'), 1));",
            json!("late"),
        ),
        (
            "return new URL('https://a.example/x?q=1').searchParams.get('q') + btoa('hi');",
            json!("1aGk="),
        ),
        (
            "const big = []; for (let i = 0; i < 2000; i++) big.push({i, s: 'x'.repeat(i % 50)}); return big.length;",
            json!(2000),
        ),
        (
            "globalThis.junk = new Array(100000).fill(7); Object.prototype.bad = 1; return junk.length;",
            json!(100000),
        ),
        (
            "return [typeof junk, ({}).bad];",
            json!(["undefined", null]),
        ),
    ];
    for round in 0..125 {
        for (code, expected) in &scripts {
            let result = run(&sb, code).await;
            assert_eq!(value(&result), *expected, "round {round}: {code}");
        }
        let thrown = run(&sb, "null.x;").await;
        assert_eq!(
            thrown.error.map(|e| e.kind),
            Some(ErrorKind::Runtime),
            "round {round}"
        );
    }
    let after = run(&sb, "return 1;").await.stats.memory_bytes;
    assert!(
        after.abs_diff(baseline) < 4096,
        "{after} after 1,125 runs, {baseline} before"
    );
}
