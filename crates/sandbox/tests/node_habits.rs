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
