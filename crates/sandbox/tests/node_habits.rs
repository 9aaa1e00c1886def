//! Node's habits with files and modules, as models write them (issue 32): where `fs` is
//! granted, `import fs from "node:fs/promises"`, named and namespace imports, `require("fs")`,
//! `fs.promises` and a callback given last all reach it; the sync functions and the ones `fs`
//! does not have throw naming what to write instead; other modules and globals Node has are
//! refused naming the sandbox's equivalent. Without `fs`, nothing of it exists to probe.

#![allow(clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use sandgate_sandbox::{ExecutionResult, Sandbox};
use serde_json::json;

const FS: [&str; 4] = ["fs.readFile", "fs.writeFile", "fs.readdir", "fs.stat"];

async fn run_granting(sandbox: &Sandbox, code: &str, granted: &[&str]) -> ExecutionResult {
    let mut execution = execution(code);
    execution.host_functions = Arc::new(granted.iter().map(|f| f.to_string()).collect());
    sandbox
        .run(execution, Arc::new(TestBridge::default()))
        .await
}

fn failure(result: &ExecutionResult) -> String {
    let error = result.error.as_ref().expect("this code must fail");
    format!("{} {}", error.message, error.hint.as_deref().unwrap_or(""))
}

#[tokio::test]
async fn the_ways_node_code_reaches_fs_reach_the_granted_one() {
    let sb = sandbox(1).await;
    for code in [
        "import fs from \"node:fs/promises\";\nreturn await fs.readFile(\"/a.txt\", \"utf8\");",
        "import * as fs from \"fs/promises\";\nreturn await fs.readFile(\"/a.txt\", \"utf8\");",
        "import { readFile as rf, stat } from \"fs/promises\";\nreturn typeof stat === \"function\" ? await rf(\"/a.txt\", \"utf8\") : 0;",
        "import fs from \"fs\";\nreturn await fs.promises.readFile(\"/a.txt\", \"utf8\");",
        "const fs = require(\"fs\");\nreturn await fs.promises.readFile(\"/a.txt\", \"utf8\");",
        "const { readFile } = require(\"node:fs/promises\");\nreturn await readFile(\"/a.txt\", \"utf8\");",
        "return await new Promise((ok, no) => fs.readFile(\"/a.txt\", \"utf8\", (e, d) => (e ? no(e) : ok(d))));",
    ] {
        let result = run_granting(&sb, code, &FS).await;
        assert_eq!(value(&result), json!("read /a.txt"), "{code}");
    }
}

#[tokio::test]
async fn what_fs_does_not_do_says_what_to_write_instead() {
    let sb = sandbox(1).await;
    let cases = [
        (
            "return fs.readFileSync(\"/a.txt\", \"utf8\");",
            "await fs.readFile(path, \"utf8\")",
        ),
        (
            "return fs.existsSync(\"/a.txt\");",
            "await fs.stat(path) in a try/catch",
        ),
        (
            "await fs.appendFile(\"/a.txt\", \"x\");\nreturn 1;",
            "fs has readFile, writeFile, readdir and stat",
        ),
        (
            "const axios = require(\"axios\");\nreturn 1;",
            "no network in this execution",
        ),
        (
            "const path = require(\"path\");\nreturn 1;",
            "Join paths as strings",
        ),
    ];
    for (code, expected) in cases {
        let result = run_granting(&sb, code, &FS).await;
        assert!(
            failure(&result).contains(expected),
            "{code}: {}",
            failure(&result)
        );
    }
    let with_fetch = run_granting(
        &sb,
        "const axios = require(\"axios\");\nreturn 1;",
        &["fetch", "fs.readFile"],
    )
    .await;
    assert!(
        failure(&with_fetch).contains("Use fetch(url, init)"),
        "{}",
        failure(&with_fetch)
    );
}

#[tokio::test]
async fn without_fs_there_is_no_loader_and_imports_name_the_grant() {
    let sb = sandbox(1).await;
    let result = run_granting(&sb, "import fs from \"node:fs/promises\";\nreturn 1;", &[]).await;
    assert!(
        failure(&result).contains("grants no files"),
        "{}",
        failure(&result)
    );
    let result = run_granting(&sb, "return typeof require;", &[]).await;
    assert_eq!(value(&result), json!("undefined"));
    for (code, expected) in [
        ("return Buffer.from(\"x\");", "TextEncoder"),
        ("setImmediate(() => {});\nreturn 1;", "setTimeout(fn, 0)"),
        (
            "return await axios.get(\"https://example.com\");",
            "no network",
        ),
    ] {
        let result = run_granting(&sb, code, &[]).await;
        assert!(
            failure(&result).contains(expected),
            "{code}: {}",
            failure(&result)
        );
    }
}

#[tokio::test]
async fn fetch_honours_a_signal_and_a_body_that_is_not_json_says_what_it_is() {
    let sb = sandbox(1).await;
    let code = "const t0 = Date.now();\n\
        try { await fetch(\"http://slow.test/\", { signal: AbortSignal.timeout(100) }); return \"answered\"; }\n\
        catch (e) { return { name: e.name, ms: Date.now() - t0 }; }";
    let result = run_granting(&sb, code, &["fetch"]).await;
    let got = value(&result);
    assert_eq!(got["name"], json!("TimeoutError"), "{got}");
    assert!(got["ms"].as_f64().is_some_and(|ms| ms < 2000.0), "{got}");
    let aborted = run_granting(
        &sb,
        "const c = new AbortController();\nconst p = fetch(\"http://slow.test/\", { signal: c.signal });\nc.abort();\ntry { await p; return 1; } catch (e) { return e.name; }",
        &["fetch"],
    )
    .await;
    assert_eq!(value(&aborted), json!("AbortError"));
    let html = run_granting(
        &sb,
        "const r = await fetch(\"http://fast.test/page\");\nreturn await r.json();",
        &["fetch"],
    )
    .await;
    let message = failure(&html);
    assert!(
        message.contains("content-type text/html")
            && message.contains("<!doctype html>")
            && message.contains("response.text()"),
        "{message}"
    );
}

#[tokio::test]
async fn crypto_subtle_digest_hashes_as_node_does() {
    let sb = sandbox(1).await;
    let code = "const hex = (b) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, \"0\")).join(\"\");\n\
        const enc = new TextEncoder();\n\
        return [\n\
          hex(await crypto.subtle.digest(\"SHA-256\", enc.encode(\"abc\"))),\n\
          hex(await crypto.subtle.digest({ name: \"SHA-256\" }, enc.encode(\"a\".repeat(1000)))),\n\
          hex(await crypto.subtle.digest(\"SHA-256\", enc.encode(\"h\\u00e9llo\"))),\n\
          hex(await crypto.subtle.digest(\"SHA-256\", new Uint8Array(0))),\n\
          hex(await crypto.subtle.digest(\"SHA-1\", enc.encode(\"abc\"))),\n\
          hex(await crypto.subtle.digest(\"sha-1\", enc.encode(\"a\".repeat(1000)).buffer)),\n\
        ];";
    assert_eq!(
        value(&run_granting(&sb, code, &[]).await),
        json!([
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3",
            "3c48591d8d098a4538f5e013dfcf406e948eac4d3277b10bf614e295d6068179",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "a9993e364706816aba3e25717850c26c9cd0d89d",
            "291e9a6c66994949b57ba5e650361e98fc36b1ba",
        ])
    );
    let refused = run_granting(
        &sb,
        "return await crypto.subtle.digest(\"MD5\", new Uint8Array(1));",
        &[],
    )
    .await;
    assert!(
        failure(&refused).contains("SHA-256 and SHA-1 are"),
        "{}",
        failure(&refused)
    );
    let text = run_granting(
        &sb,
        "return await crypto.subtle.digest(\"SHA-256\", \"abc\");",
        &[],
    )
    .await;
    assert!(failure(&text).contains("TextEncoder"), "{}", failure(&text));
}

#[tokio::test]
async fn a_capability_call_without_await_is_named() {
    let sb = sandbox(1).await;
    let result = run_granting(
        &sb,
        "const text = fs.readFile(\"/a.txt\", \"utf8\");\nreturn text.toUpperCase();",
        &FS,
    )
    .await;
    assert!(
        failure(&result).contains("`fs.readFile(...)` was called without `await`"),
        "{}",
        failure(&result)
    );
}

#[tokio::test]
async fn process_env_and_env_names_give_the_granted_values_and_warn_of_the_rest() {
    let sb = sandbox(1).await;
    let mut run = execution(
        "return [`Bearer ${process.env.KEY}`, env.KEY, process.env.HOME === undefined, process.env.UNSET === undefined, Object.keys(process.env)];",
    );
    run.host_functions = Arc::new(vec!["env.get".into()]);
    run.env = Arc::new(vec![
        ("KEY".into(), Some("k-1".into())),
        ("UNSET".into(), None),
    ]);
    let result = sb.run(run, Arc::new(TestBridge::default())).await;
    assert_eq!(
        value(&result),
        json!(["Bearer k-1", "k-1", true, true, ["KEY"]])
    );
    let logs: Vec<&str> = result.logs.iter().map(|l| l.message.as_str()).collect();
    assert!(
        logs.iter()
            .any(|l| l.contains("process.env.HOME is undefined")
                && l.contains("ask the operator to add HOME")),
        "{logs:?}"
    );
    assert!(
        logs.iter().any(|l| l
            .contains("process.env.UNSET is undefined: the profile grants it, and it is not set")),
        "{logs:?}"
    );
    // Without granted variables there is no `process`.
    let none = run_granting(&sb, "return typeof process;", &["env.get"]).await;
    assert_eq!(value(&none), json!("undefined"));
}

#[tokio::test]
async fn bytes_are_written_as_base64() {
    let sb = sandbox(1).await;
    let result = run_granting(
        &sb,
        "return [await fs.writeFile(\"/b.bin\", new Uint8Array([0, 255, 1])), await fs.writeFile(\"/c.txt\", \"text\")];",
        &FS,
    )
    .await;
    assert_eq!(
        value(&result),
        json!([["AP8B", {"encoding": "base64"}], ["text", null]])
    );
}

/// Node 20's answers (full ICU), for the same calls, for the date 2024-06-30 12:00 UTC.
#[tokio::test]
async fn intl_gives_nodes_answers_for_partial_dates_plurals_and_relative_times() {
    let sb = sandbox(1).await;
    let code = "const d = new Date(Date.UTC(2024, 5, 30, 12));\n\
        const o = (x) => d.toLocaleDateString(\"en-US\", { ...x, timeZone: \"UTC\" });\n\
        const r = new Intl.RelativeTimeFormat(\"en\");\n\
        const ra = new Intl.RelativeTimeFormat(\"en\", { numeric: \"auto\" });\n\
        const p = new Intl.PluralRules(\"en\"), po = new Intl.PluralRules(\"en\", { type: \"ordinal\" });\n\
        const pf = new Intl.PluralRules(\"fr\"), pd = new Intl.PluralRules(\"de\");\n\
        return [\n\
          [o({ month: \"long\" }), o({ month: \"short\" }), o({ year: \"numeric\", month: \"long\" }), o({ year: \"numeric\", month: \"short\" }), o({ month: \"long\", day: \"numeric\" }), o({ weekday: \"long\", month: \"long\", day: \"numeric\" }), o({ year: \"numeric\" }), o({ year: \"numeric\", month: \"numeric\" }), o({ month: \"numeric\", day: \"numeric\" }), o({ day: \"numeric\" }), new Intl.DateTimeFormat(\"en-US\", { month: \"long\", timeZone: \"UTC\" }).format(d)],\n\
          [r.format(-1, \"day\"), r.format(2, \"hours\"), r.format(1000, \"days\"), r.format(-3, \"month\"), r.format(0, \"year\"), ra.format(-1, \"day\"), ra.format(0, \"day\"), ra.format(1, \"day\"), ra.format(-1, \"year\"), ra.format(1, \"week\"), ra.format(0, \"second\"), ra.format(0, \"minute\"), ra.format(2, \"day\"), r.format(1.5, \"hour\")],\n\
          [[0, 1, 2, 1.5].map((n) => p.select(n)), [1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111].map((n) => po.select(n)), [0, 1, 1.5, 2, 1000000].map((n) => pf.select(n)), [0, 1, 2].map((n) => pd.select(n))],\n\
        ];";
    assert_eq!(
        value(&run_granting(&sb, code, &[]).await),
        json!([
            [
                "June",
                "Jun",
                "June 2024",
                "Jun 2024",
                "June 30",
                "Sunday, June 30",
                "2024",
                "6/2024",
                "6/30",
                "30",
                "June"
            ],
            [
                "1 day ago",
                "in 2 hours",
                "in 1,000 days",
                "3 months ago",
                "in 0 years",
                "yesterday",
                "today",
                "tomorrow",
                "last year",
                "next week",
                "now",
                "this minute",
                "in 2 days",
                "in 1.5 hours"
            ],
            [
                ["other", "one", "other", "other"],
                [
                    "one", "two", "few", "other", "other", "other", "other", "one", "two", "few",
                    "one", "other"
                ],
                ["one", "one", "one", "other", "many"],
                ["other", "one", "other"]
            ]
        ])
    );
    // V8 has all of ICU; QuickJS says what it writes instead.
    let asked = run_granting(
        &sb,
        "return new Intl.RelativeTimeFormat(\"de\").format(1, \"day\");",
        &[],
    )
    .await;
    if on_v8() {
        assert_eq!(value(&asked), json!("in 1 Tag"));
    } else {
        assert!(
            failure(&asked).contains("it writes en-US and en-GB"),
            "{}",
            failure(&asked)
        );
    }
}

#[tokio::test]
async fn stats_have_nodes_methods() {
    let sb = sandbox(1).await;
    let result = run_granting(
        &sb,
        "const s = await fs.stat(\"/a.txt\");\nreturn [s.isFile(), s.isDirectory(), s.size, s.mtimeMs, s.mtime.toISOString()];",
        &FS,
    )
    .await;
    assert_eq!(
        value(&result),
        json!([
            true,
            false,
            11,
            1_700_000_000_000_u64,
            "2023-11-14T22:13:20.000Z"
        ])
    );
}

#[tokio::test]
async fn only_a_body_read_from_fetchs_promise_gets_the_fetch_hint() {
    let sb = sandbox(1).await;
    let unawaited = run_granting(
        &sb,
        "return await fetch(\"http://fast.test/\").json();",
        &["fetch"],
    )
    .await;
    assert!(
        failure(&unawaited).contains("(await fetch(url)).json()"),
        "{}",
        failure(&unawaited)
    );
    // The right form, with another mistake after it: no word about fetch.
    let other = run_granting(
        &sb,
        "const body = (await fetch(\"http://fast.test/\")).text();\nconst x: any = 1;\nreturn x.nope();",
        &["fetch"],
    )
    .await;
    assert!(
        !failure(&other).contains("(await fetch(url))"),
        "{}",
        failure(&other)
    );
}

/// `performance.now()` on both engines: milliseconds since this execution began, in tenths of
/// a millisecond, and `timeOrigin` its start; a later execution on the same worker starts again.
#[tokio::test]
async fn performance_counts_this_executions_time_in_tenths_of_a_millisecond() {
    let sb = sandbox_of_exactly(1).await;
    let code = "const a = performance.now();\n\
        await new Promise((r) => setTimeout(r, 60));\n\
        const b = performance.now();\n\
        return { a, waited: b - a, tenths: [a, b].every((t) => Math.abs(t * 10 - Math.round(t * 10)) < 1e-6), origin: Date.now() - performance.timeOrigin };";
    for _ in 0..2 {
        let result = value(&run_granting(&sb, code, &[]).await);
        let a = result["a"].as_f64().expect("a number");
        assert!(
            (0.0..50.0).contains(&a),
            "counted from the execution's start: {result}"
        );
        assert!(
            result["waited"].as_f64().is_some_and(|w| w >= 55.0),
            "{result}"
        );
        assert_eq!(result["tenths"], json!(true), "{result}");
        assert!(
            result["origin"]
                .as_f64()
                .is_some_and(|o| (55.0..5000.0).contains(&o)),
            "{result}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
