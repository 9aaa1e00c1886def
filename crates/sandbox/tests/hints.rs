//! Error hints for the mistakes models make, each with the exact bad code.

#![allow(clippy::expect_used)]

mod common;

use common::*;
use sandgate_sandbox::{ErrorKind, ExecError};

async fn error_of(code: &str) -> ExecError {
    let sb = sandbox(1).await;
    run(&sb, code).await.error.expect("this code must fail")
}

fn hint(error: &ExecError) -> &str {
    error
        .hint
        .as_deref()
        .unwrap_or_else(|| panic!("no hint for {error:?}"))
}

#[tokio::test]
async fn a_variable_shadowing_a_backend() {
    let e = error_of("const x = 1;\nconst test = await test.echo({ a: 1 });\nreturn test;").await;
    assert_eq!((e.kind, e.line), (ErrorKind::Runtime, Some(2)));
    assert!(
        hint(&e).contains("`test` is a backend") && hint(&e).contains("testResult"),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_misspelled_backend() {
    let e = error_of("return await tset.echo({});").await;
    assert!(hint(&e).contains("Did you mean `test`?"), "{e:?}");
    assert_eq!((e.line, e.column), (Some(1), Some(14)));
}

#[tokio::test]
async fn a_misspelled_tool() {
    let e = error_of("const r = await test.ecko({ a: 1 });\nreturn r;").await;
    assert!(
        hint(&e).contains("`test` has no tool `ecko`. Did you mean `test.echo`?"),
        "{e:?}"
    );
    let e = error_of("return await mcp.tets.echo({});").await;
    assert!(
        hint(&e).contains("`mcp.tets` is not a backend. Did you mean `mcp.test`?"),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_bare_tool_name() {
    let e = error_of("return await echo({ a: 1 });").await;
    assert!(
        hint(&e).contains("`echo` is a tool, not a global") && hint(&e).contains("test.echo(...)"),
        "{e:?}"
    );
    let e = error_of("return await get_sum({ a: 1, b: 2 });").await;
    assert!(hint(&e).contains("my_server.get_sum(...)"), "{e:?}");
}

#[tokio::test]
async fn a_meta_tool_called_in_the_sandbox() {
    // The embedder hands over the names its model calls outside code.
    let sb = sandbox(1)
        .await
        .with_outside_tools(["search_tools", "read_output"]);
    for code in [
        "const found = await search_tools({ query: 'sum' });",
        "return await read_output({ execution_id: 'x' });",
    ] {
        let e = run(&sb, code).await.error.expect("this code must fail");
        assert!(
            hint(&e).contains("meta-tools") && hint(&e).contains("__getToolInterface"),
            "{e:?}"
        );
    }
}

#[tokio::test]
async fn a_backend_that_is_still_starting() {
    let e = error_of("return await test.starting({});").await;
    assert_eq!(e.kind, ErrorKind::ToolFailed);
    assert!(e.message.contains("still starting"), "{e:?}");
    assert!(hint(&e).contains("not ready yet"), "{e:?}");
}

#[tokio::test]
async fn fetch_require_import_and_process() {
    assert!(
        hint(&error_of("const r = await fetch('https://example.com');").await)
            .contains("no network access")
    );
    assert!(hint(&error_of("const fs = require('fs');").await).contains("no modules"));
    assert!(hint(&error_of("return process.env.HOME;").await).contains("no process"));
    let e = error_of("import x from 'lodash';\nreturn x;").await;
    assert_eq!((e.kind, e.line), (ErrorKind::Syntax, Some(1)));
    assert!(hint(&e).contains("Backends are already globals"), "{e:?}");
}

#[tokio::test]
async fn results_that_cannot_be_serialized() {
    let e = error_of("const a: any = { name: 'a' };\na.self = a;\nreturn a;").await;
    assert!(
        e.message.contains("cannot be turned into JSON") && hint(&e).contains("refers to itself"),
        "{e:?}"
    );
    let e = error_of("return { big: 2n ** 64n };").await;
    assert!(hint(&e).contains("String(value)"), "{e:?}");
}

#[tokio::test]
async fn syntax_errors_point_at_the_users_line() {
    let e = error_of("const a = 1;\nconst b = {;\n").await;
    assert_eq!((e.kind, e.line), (ErrorKind::Syntax, Some(2)));
}

#[tokio::test]
async fn runtime_errors_point_at_the_users_line_through_typescript() {
    let e = error_of("interface A { x: number }\nconst a: A = { x: 1 };\nconst b = (a as any).missing.deep;\nreturn b;").await;
    assert_eq!((e.kind, e.line), (ErrorKind::Runtime, Some(3)), "{e:?}");
}

#[tokio::test]
async fn arguments_the_tool_rejects() {
    let e = error_of("const n = \"3\";\nreturn await test.strict({ count: n });").await;
    // The position is the call's, not that of the argument QuickJS evaluated last (`n`).
    assert_eq!(
        (e.kind, e.line, e.column),
        (ErrorKind::ToolFailed, Some(2), Some(14)),
        "{e:?}"
    );
    assert_eq!(
        hint(&e),
        "The tool rejected its arguments. test.strict is declared as:\nstrict(args: { count: number }): Promise<unknown>\nPass arguments that match it.",
    );
    // When calls to two different tools failed, which one ended the run is not certain: the
    // hint then names no declaration rather than a wrong one.
    let e = error_of(
        "try { await test.fail({}); } catch (_) {}\nreturn await test.strict({ count: \"3\" });",
    )
    .await;
    assert!(
        hint(&e).starts_with("The tool rejected its arguments. Check them against its declaration"),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_tool_call_without_await() {
    let e = error_of("const r = test.text({});\nreturn r.toUpperCase();").await;
    assert_eq!(
        (e.kind, e.message.as_str(), e.line),
        (
            ErrorKind::Runtime,
            "TypeError: r.toUpperCase is not a function",
            Some(2)
        ),
        "{e:?}"
    );
    assert_eq!(
        hint(&e),
        "`r` holds a Promise, not the tool's result: `test.text(...)` was called without `await`. Write `await test.text(...)`."
    );
    let e = error_of("let graph;\ngraph = mcp.test.echo({ a: 1 });\nreturn graph.echo.a;").await;
    assert!(
        hint(&e).starts_with("`graph` holds a Promise") && hint(&e).contains("`test.echo(...)`"),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_value_that_is_not_a_function_is_named() {
    let e = error_of("const s = \"x\";\nreturn s.nope();").await;
    assert_eq!(e.message, "TypeError: s.nope is not a function", "{e:?}");
    assert!(
        hint(&e).starts_with("A value is not what the code expects"),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_property_read_from_undefined_names_what_was_undefined() {
    let e = error_of("const r = await test.text({});\nreturn r.data.items.length;").await;
    assert_eq!(
        (e.kind, e.message.as_str(), e.line),
        (
            ErrorKind::Runtime,
            "TypeError: cannot read property 'items' of undefined",
            Some(2)
        ),
        "{e:?}"
    );
    assert!(
        hint(&e).starts_with("`r.data` is undefined, so `items` cannot be read from it. If it came from a tool, check the shape of its result"),
        "{e:?}"
    );
}

#[tokio::test]
async fn json_parse_of_a_result_is_a_runtime_error_not_a_syntax_error() {
    let e = error_of("const text = await test.text({});\nreturn JSON.parse(text);").await;
    assert_eq!((e.kind, e.line), (ErrorKind::Runtime, Some(2)), "{e:?}");
    assert!(e.message.starts_with("SyntaxError: "), "{e:?}");
    assert!(hint(&e).contains("arrive already parsed"), "{e:?}");
}

#[tokio::test]
async fn a_thrown_error_points_at_its_throw_and_says_where_it_was_called() {
    // QuickJS places `new Error(`...${x}...`)` at the template's last expression.
    let e = error_of(
        "const x = 41;\nfunction fail(n: number) {\n  throw new Error(`bad value ${n + 1} here`);\n}\nfail(x);",
    )
    .await;
    assert_eq!(
        (e.kind, e.line, e.column),
        (ErrorKind::Runtime, Some(3), Some(3)),
        "{e:?}"
    );
    assert_eq!(e.message, "Error: bad value 42 here");
    assert_eq!(
        hint(&e),
        "Thrown in `fail`; `fail` was called at line 5, column 1."
    );
    // Through async functions too, innermost call first.
    let e = error_of(
        "async function inner(v: number) {\n  if (v > 1) throw new RangeError(`too big: ${v}`);\n}\nasync function outer() { await inner(5); }\nawait outer();",
    )
    .await;
    assert_eq!((e.line, e.column), (Some(2), Some(14)), "{e:?}");
    assert_eq!(
        hint(&e),
        "Thrown in `inner`; `inner` was called at line 4, column 32 in `outer`; `outer` was called at line 5, column 7."
    );
    // An error the engine raises keeps its own position, and a throw at the top level has no
    // call site to give.
    let e = error_of("const o: any = null;\nthrow new Error(`x ${o.y}`);").await;
    assert_eq!(
        (e.message.as_str(), e.column),
        ("TypeError: cannot read property 'y' of null", Some(22)),
        "{e:?}"
    );
    let e = error_of("throw new Error(`top ${1 + 1}`);").await;
    assert_eq!((e.line, e.column), (Some(1), Some(1)), "{e:?}");
    assert!(e.hint.is_none(), "{e:?}");
}
