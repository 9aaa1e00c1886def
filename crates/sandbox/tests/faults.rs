//! Each engine names the fault a guest's code meets where it raises it (`Fault`), so the host
//! matches on a fact, not on one engine's words. Runs on QuickJS, and on V8 with
//! `SANDGATE_TEST_ENGINE=v8`: the same code must give the same fault on both.

#![allow(clippy::expect_used)]

mod common;

use common::*;
use sandgate_sandbox::{ErrorKind, Fault, Nullish};

async fn fault_of(code: &str) -> Option<Fault> {
    let sb = sandbox(1).await;
    let error = run(&sb, code).await.error.expect("this code must fail");
    assert_eq!(error.kind, ErrorKind::Runtime, "{code}: {error:?}");
    error.fault
}

#[tokio::test]
async fn every_engine_names_the_same_fault() {
    let cases: Vec<(&str, Option<Fault>)> = vec![
        (
            "return await memroy.read({});",
            Some(Fault::NotDefined {
                name: "memroy".into(),
            }),
        ),
        (
            "const r = await test.echo({ a: 1 });\nreturn r.missing.deeper;",
            Some(Fault::NullishRead {
                property: "deeper".into(),
                of: Nullish::Undefined,
            }),
        ),
        (
            "const x = null;\nreturn x.field;",
            Some(Fault::NullishRead {
                property: "field".into(),
                of: Nullish::Null,
            }),
        ),
        (
            "const x = undefined;\nx.field = 1;\nreturn x;",
            Some(Fault::NullishWrite {
                property: "field".into(),
                of: Nullish::Undefined,
            }),
        ),
        (
            "return await test.nothing_here({});",
            Some(Fault::NotAFunction),
        ),
        (
            "const a = b + 1;\nconst b = 2;\nreturn a;",
            Some(Fault::NotInitialized { name: "b".into() }),
        ),
        (
            "let n = 0;\nfor (const x of 5) n += x;\nreturn n;",
            Some(Fault::NotIterable),
        ),
        (
            "return __getToolInterface(\"nowhere.nothing\");",
            Some(Fault::NoSuchTool {
                name: "nowhere.nothing".into(),
            }),
        ),
        // The code's own error with the engine's words is no fault of the engine's.
        ("throw new Error(\"x is not defined\");", None),
        ("throw new TypeError(\"boom\");", None),
    ];
    for (code, expected) in cases {
        assert_eq!(fault_of(code).await, expected, "{code}");
    }
}
