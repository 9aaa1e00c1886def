//! Code as models write it: fenced in markdown, a `main` never called, type-only imports,
//! decorators, and the console and timer surface agent code reaches for.

#![allow(clippy::expect_used)]

mod common;

use common::*;
use sandgate_sandbox::ErrorKind;
use serde_json::json;

#[tokio::test]
async fn fenced_code_runs_and_errors_point_into_what_was_sent() {
    let sb = sandbox(1).await;
    for sent in [
        "```ts\nreturn 1 + 1;\n```",
        "```typescript\nconst a: number = 1;\nreturn a + 1;\n```\n",
        "```\nreturn 2;\n```",
        "Here is the script:\n\n```js\nreturn 2;\n```\nIt returns two.",
    ] {
        assert_eq!(value(&run(&sb, sent).await), json!(2), "{sent:?}");
    }
    let failing = run(
        &sb,
        "Sure, this reads it:\n```ts\nconst x = null;\nreturn x.length;\n```",
    )
    .await;
    let error = failing.error.expect("fails");
    assert_eq!(error.kind, ErrorKind::Runtime, "{error:?}");
    assert_eq!(
        error.line,
        Some(4),
        "the line in what the model sent: {error:?}"
    );
    let syntax = run(&sb, "```ts\nconst = 1;\n```").await;
    let error = syntax.error.expect("fails");
    assert_eq!(
        (error.kind, error.line),
        (ErrorKind::Syntax, Some(2)),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_main_that_is_never_called_runs() {
    let sb = sandbox(1).await;
    let defined = "const greeting = 'hi';\n\
                   async function helper(n: number) { return n * 2; }\n\
                   async function main() {\n  const r = await test.echo({ n: await helper(2) });\n  return [greeting, r.echo.n];\n}";
    assert_eq!(value(&run(&sb, defined).await), json!(["hi", 4]));
    // Called by the code itself: it runs once, as written.
    let called =
        "let runs = 0;\nasync function main() { runs++; return runs; }\nreturn await main();";
    assert_eq!(value(&run(&sb, called).await), json!(1));
    // Code that does something at the top level besides is a plain script.
    let busy = "async function main() { return 'main'; }\nconsole.log('top level');";
    assert_eq!(value(&run(&sb, busy).await), json!(null));
}

#[tokio::test]
async fn type_only_imports_and_exports_are_erased() {
    let sb = sandbox(1).await;
    let code = "import type { Issue } from \"./types\";\n\
                import { type Label } from \"./labels\";\n\
                type Local = { n: number };\n\
                export type { Local };\n\
                const x: Local = { n: 3 };\n\
                return x.n;";
    assert_eq!(value(&run(&sb, code).await), json!(3));
    // A value import is still refused, with the alternative (`fs` imports give the granted
    // `fs`: tests/node_habits.rs).
    let value_import = run(&sb, "import { chunk } from \"lodash\";\nreturn 1;").await;
    let error = value_import.error.expect("refused");
    assert_eq!((error.kind, error.line), (ErrorKind::Syntax, Some(1)));
}

#[tokio::test]
async fn decorators_are_refused_at_their_line() {
    let sb = sandbox(1).await;
    let result = run(&sb, "function log(t: any) { return t; }\nclass A {\n  @log\n  m() { return 1; }\n}\nreturn new A().m();").await;
    let error = result.error.expect("refused");
    assert_eq!(
        (error.kind, error.line),
        (ErrorKind::Syntax, Some(3)),
        "{error:?}"
    );
    assert!(error.message.contains("decorators"), "{error:?}");
    assert!(
        error
            .hint
            .as_deref()
            .is_some_and(|h| h.contains("directly")),
        "{error:?}"
    );
}

#[tokio::test]
async fn the_console_surface_agent_code_uses() {
    let sb = sandbox(1).await;
    let code = r#"
        console.table([{ name: "a", n: 1 }, { name: "bb", n: 22 }]);
        console.group("outer");
        console.info("inside");
        console.groupEnd();
        console.count(); console.count(); console.count("x");
        console.time("t"); console.timeEnd("t");
        console.assert(1 === 2, "math broke");
        console.assert(true, "never shown");
        console.dir({ deep: { a: 1 } });
        console.trace("here");
        return "done";
    "#;
    let result = run(&sb, code).await;
    assert_eq!(value(&result), json!("done"));
    let logs: Vec<&str> = result.logs.iter().map(|l| l.message.as_str()).collect();
    let table = logs[0];
    assert!(
        table.contains("(index)")
            && table.contains("name")
            && table.contains("bb")
            && table.contains("22"),
        "{table}"
    );
    assert_eq!(
        table.lines().count(),
        4,
        "a header, a rule and two rows: {table}"
    );
    assert_eq!(&logs[1..3], ["outer", "  inside"]);
    assert_eq!(&logs[3..6], ["default: 1", "default: 2", "x: 1"]);
    assert!(
        logs[6].starts_with("t: ") && logs[6].ends_with(" ms"),
        "{}",
        logs[6]
    );
    assert_eq!(logs[7], "Assertion failed: math broke");
    assert_eq!(logs[8], r#"{"deep":{"a":1}}"#);
    assert!(logs[9].starts_with("Trace: here"), "{}", logs[9]);
    assert_eq!(logs.len(), 10, "{logs:?}");
}

#[tokio::test]
async fn intervals_tick_until_cleared_and_count_as_one_timer() {
    let sb = sandbox(1).await;
    let code = r#"
        let n = 0;
        const id = setInterval(() => { n++; }, 5);
        await new Promise((r) => setTimeout(r, 80));
        clearInterval(id);
        const seen = n;
        await new Promise((r) => setTimeout(r, 40));
        // clearTimeout clears an interval too, as in browsers.
        let m = 0;
        const other = setInterval(() => { m++; }, 5);
        clearTimeout(other);
        await new Promise((r) => setTimeout(r, 20));
        return [seen >= 3, n === seen, m];
    "#;
    assert_eq!(value(&run(&sb, code).await), json!([true, true, 0]));
    let strings = run(&sb, "setInterval('n++', 5); return 1;").await;
    let error = strings.error.expect("refused");
    assert!(
        error.message.contains("setInterval needs a function"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_result_that_holds_a_promise_names_the_fix_and_the_call() {
    let sb = sandbox(1).await;
    let listed = run(&sb, "const a = test.slow({ ms: 300 });\nreturn [a];").await;
    let error = listed.error.expect("refused");
    assert_eq!(error.kind, ErrorKind::Runtime, "{error:?}");
    assert!(
        error.message.contains("the result holds a Promise at [0]"),
        "{error:?}"
    );
    let hint = error.hint.expect("a hint");
    assert!(
        hint.contains("`await` the call")
            && hint.contains("test.slow")
            && hint.contains("Promise.all"),
        "{hint}"
    );
    let keyed = run(&sb, "return { later: test.echo({ n: 1 }) };").await;
    let error = keyed.error.expect("refused");
    assert!(error.message.contains("at .later"), "{error:?}");
    let top = run(&sb, "return test.echo({ n: 1 }).then((r) => r);").await;
    // A promise returned at the top is awaited by the async wrapper, as JavaScript does.
    assert_eq!(value(&top), json!({"echo": {"n": 1}}));
    // Awaited, the same values are fine.
    let awaited = run(
        &sb,
        "return await Promise.all([test.echo({ n: 1 }), test.echo({ n: 2 })]);",
    )
    .await;
    assert_eq!(
        value(&awaited),
        json!([{"echo": {"n": 1}}, {"echo": {"n": 2}}])
    );
}

fn with_declared_echo(code: &str) -> sandgate_sandbox::Execution {
    let mut tools = tools().as_ref().clone();
    for tool in &mut tools {
        if tool.backend == "test" && tool.name == "echo" {
            tool.declaration = "interface TestEchoInput {\n  /** What to echo */\n  message: string;\n  times?: number;\n}\nfunction echo(args: TestEchoInput): Promise<unknown>;".into();
        }
    }
    sandgate_sandbox::Execution {
        tools: std::sync::Arc::new(tools),
        ..execution(code)
    }
}

#[tokio::test]
async fn hints_name_the_fix() {
    let sb = sandbox(1).await;
    let bridge = || std::sync::Arc::new(TestBridge::default());
    // A positional argument: the hint names the parameters from the declaration.
    let positional = sb
        .run(
            with_declared_echo("return await test.echo(\"hi\");"),
            bridge(),
        )
        .await;
    let hint = positional.error.and_then(|e| e.hint).expect("a hint");
    assert!(
        hint.contains("`test.echo({ message: …, times: … })`"),
        "{hint}"
    );
    // `.content[0].text` on a result that is already the text.
    let content = run(
        &sb,
        "const res = await test.text({});\nreturn res.content[0].text;",
    )
    .await;
    let error = content.error.expect("fails");
    let hint = error.hint.expect("a hint");
    assert!(
        hint.contains("`res.content` is undefined")
            && hint.contains("already mapped")
            && hint.contains(".raw("),
        "{hint}"
    );
    // A doubled prefix, and another case.
    for (code, meant) in [
        ("return await test.test_echo({});", "test.echo"),
        ("return await test.Echo({});", "test.echo"),
    ] {
        let result = run(&sb, code).await;
        let hint = result.error.and_then(|e| e.hint).expect("a hint");
        assert!(
            hint.contains(&format!("Did you mean `{meant}`")),
            "{code}: {hint}"
        );
    }
}

#[tokio::test]
async fn locale_methods_give_what_other_runtimes_give_or_say_why_not() {
    let sb = sandbox(1).await;
    let code = r#"
        const d = new Date(Date.UTC(2026, 10, 24, 9, 5, 7));
        return {
            grouped: (1234567.891).toLocaleString("en-US"),
            plain: (1234.5).toLocaleString(),
            de: (1234567.891).toLocaleString("de-DE"),
            fr: (1234.5).toLocaleString("fr-FR"),
            usd: new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" }).format(-1234.5),
            eur: (1234.5).toLocaleString("de-DE", { style: "currency", currency: "EUR" }),
            percent: (0.256).toLocaleString("en-US", { style: "percent" }),
            fixed: (3).toLocaleString("en-US", { minimumFractionDigits: 2 }),
            date: d.toLocaleDateString("en-US"),
            long: d.toLocaleDateString("en-US", { year: "numeric", month: "long", day: "numeric" }),
            full: new Intl.DateTimeFormat("en-US", { dateStyle: "full" }).format(d),
            both: d.toLocaleString("en-US"),
            time: d.toLocaleTimeString("en-US", { hour: "2-digit", minute: "2-digit" }),
            deDate: d.toLocaleDateString("de-DE"),
            zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
            sorted: ["banana", "Apple", "cherry", "apple", "Éclair", "eclair"].sort((a, b) => a.localeCompare(b)),
            numeric: ["item10", "item2", "item1"].sort(new Intl.Collator("en", { numeric: true }).compare),
            base: "résumé".localeCompare("RESUME", "en", { sensitivity: "base" }),
            punctuation: ["b", "_a", "a", "A", "1", " z"].sort((x, y) => x.localeCompare(y)),
            short: new Intl.DateTimeFormat("en-US", { dateStyle: "short" }).format(d),
            medium: new Intl.DateTimeFormat("en-US", { dateStyle: "medium" }).format(d),
            frDate: d.toLocaleDateString("fr-FR"),
            deTime: d.toLocaleTimeString("de-DE"),
            gbp: (5).toLocaleString("en-GB", { style: "currency", currency: "GBP" }),
            jpy: (1234).toLocaleString("en-US", { style: "currency", currency: "JPY" }),
            neg: (-1234.5).toLocaleString("de-DE"),
            max0: (1234.567).toLocaleString("en-US", { maximumFractionDigits: 0 }),
        };
    "#;
    assert_eq!(
        value(&run(&sb, code).await),
        json!({
            "grouped": "1,234,567.891", "plain": "1,234.5", "de": "1.234.567,891", "fr": "1\u{202f}234,5",
            "usd": "-$1,234.50", "eur": "1.234,50\u{a0}€", "percent": "26%", "fixed": "3.00",
            "date": "11/24/2026", "long": "November 24, 2026", "full": "Tuesday, November 24, 2026",
            "both": "11/24/2026, 9:05:07 AM", "time": "09:05 AM", "deDate": "24.11.2026", "zone": "UTC",
            "sorted": ["apple", "Apple", "banana", "cherry", "eclair", "Éclair"],
            "numeric": ["item1", "item2", "item10"], "base": 0,
            "punctuation": [" z", "_a", "1", "a", "A", "b"], "short": "11/24/26", "medium": "Nov 24, 2026",
            "frDate": "24/11/2026", "deTime": "09:05:07", "gbp": "£5.00", "jpy": "¥1,234", "neg": "-1.234,5",
            "max0": "1,235",
        }),
        "each figure is what Node 20 gives with TZ=UTC"
    );
    // V8 has all of ICU (tests/intl.rs); QuickJS refuses what it cannot give exactly.
    if on_v8() {
        return;
    }
    for code in [
        "return (5).toLocaleString('ja-JP');",
        "return new Intl.NumberFormat('en', { notation: 'scientific' }).format(1000);",
        "return new Date(0).toLocaleDateString('en-US', { timeZone: 'America/New_York' });",
    ] {
        let result = run(&sb, code).await;
        let error = result.error.expect("refused, not silently different");
        assert!(
            error
                .message
                .contains("is not supported in the sandbox on this engine, which has no ICU"),
            "{code}: {error:?}"
        );
    }
}

#[tokio::test]
async fn an_abort_signal_rejects_a_call_and_drops_it() {
    let sb = sandbox(1).await;
    let aborted = run(
        &sb,
        "const c = new AbortController();\n\
         setTimeout(() => c.abort(), 50);\n\
         try { await test.slow({ ms: 3000 }, { signal: c.signal }); return 'finished'; }\n\
         catch (e) { return [e.name, c.signal.aborted]; }",
    )
    .await;
    assert_eq!(value(&aborted), json!(["AbortError", true]));
    assert!(aborted.stats.wall_ms < 2000.0, "{}", aborted.stats.wall_ms);
    let call = &aborted.trace[0];
    assert!(
        !call.ok && call.error.as_deref() == Some("aborted by its AbortSignal"),
        "{:?}",
        aborted.trace
    );
    let timeout = run(
        &sb,
        "try { await test.slow({ ms: 3000 }, { signal: AbortSignal.timeout(30) }); } catch (e) { return e.name; }",
    )
    .await;
    assert_eq!(value(&timeout), json!("TimeoutError"));
    let already = run(
        &sb,
        "try { await test.echo({ n: 1 }, { signal: AbortSignal.abort('no') }); } catch (e) { return e; }",
    )
    .await;
    assert_eq!(value(&already), json!("no"));
    assert!(already.trace.is_empty(), "an aborted signal sends no call");
    let untouched = run(
        &sb,
        "const c = new AbortController();\nconst r = await test.echo({ n: 2 }, { signal: c.signal });\nc.abort();\nreturn r.echo.n;",
    )
    .await;
    assert_eq!(value(&untouched), json!(2));
}

/// The full text of every hint this issue added, as a model reads it.
#[tokio::test]
async fn the_new_hints_in_full() {
    let sb = sandbox(1).await;
    let bridge = || std::sync::Arc::new(TestBridge::default());
    let mut shown = String::new();
    let cases: Vec<(&str, sandgate_sandbox::Execution)> = vec![
        (
            "positional argument",
            with_declared_echo("return await test.echo(\"hi\");"),
        ),
        (
            "content[0].text",
            execution("const res = await test.text({});\nreturn res.content[0].text;"),
        ),
        (
            "doubled prefix",
            execution("return await test.test_echo({});"),
        ),
        ("wrong case", execution("return await test.Echo({});")),
        (
            "a Promise in the result",
            execution("const a = test.slow({ ms: 300 });\nreturn [a];"),
        ),
        (
            "decorators",
            execution("class A {\n  @log\n  m() {}\n}\nreturn 1;"),
        ),
    ];
    // V8 formats every locale (it has all of ICU): only QuickJS refuses these.
    let mut cases = cases;
    if !on_v8() {
        cases.push((
            "unsupported locale",
            execution("return (5).toLocaleString('ja-JP');"),
        ));
        cases.push((
            "unsupported option",
            execution("return new Intl.NumberFormat('en', { notation: 'scientific' }).format(1);"),
        ));
    }
    for (label, execution) in cases {
        let result = sb.run(execution, bridge()).await;
        let error = result.error.expect("fails");
        shown.push_str(&format!(
            "## {label}\n{:?} at {:?}:{:?}: {}\nhint: {}\n\n",
            error.kind,
            error.line,
            error.column,
            error.message,
            error.hint.unwrap_or_default()
        ));
    }
    // V8 places a few errors at other columns (an error raised inside the sandbox's own web
    // basics, at the `new` rather than the constructor's name): its own snapshot.
    insta::with_settings!({ snapshot_suffix => if on_v8() { "v8" } else { "" } }, {
        insta::assert_snapshot!(shown);
    });
}

#[tokio::test]
async fn a_missing_method_blames_the_call_not_its_argument() {
    let sb = sandbox(1).await;
    for (code, callee) in [
        (
            "const rows = [{ a: 1 }];\nconsole.tabel(rows);\nreturn 1;",
            "console.tabel",
        ),
        (
            "const items = [1, 2];\nconst out = items.flatMapp((x) => [x]);\nreturn out;",
            "items.flatMapp",
        ),
    ] {
        let result = run(&sb, code).await;
        let error = result.error.expect("fails");
        assert!(
            error
                .message
                .contains(&format!("{callee} is not a function")),
            "{code}: {error:?}"
        );
    }
}
