//! Python as models write it (issue 50): what Monty lacks and models reach for gets a hint
//! that names what to write instead, through the real locked-down worker.

#![allow(clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{TestBridge, execution};
use sandgate_sandbox::{Engine, PoolConfig, Sandbox};

async fn python_sandbox() -> Sandbox {
    let mut quickjs = PoolConfig::new(common::worker_program());
    quickjs.workers = 1;
    let mut python = PoolConfig::new(common::worker_program());
    python.args = vec![sandgate_sandbox::PYTHON_ARG.into()];
    python.workers = 1;
    Sandbox::start(quickjs)
        .await
        .expect("sandbox")
        .with_python(python)
        .await
        .expect("the Python engine")
}

/// Each habit, and words its hint must hold.
const HABITS: &[(&str, &str)] = &[
    (
        "import requests\nrequests.get('https://example.com').json()",
        "no HTTP library",
    ),
    ("import httpx", "no HTTP library"),
    ("from urllib.request import urlopen", "no HTTP library"),
    ("with open('/data.csv') as f:\n    f.read()", "open()"),
    (
        "import subprocess\nsubprocess.run(['ls'])",
        "runs no programs",
    ),
    ("import pandas as pd", "no third-party packages"),
    ("import numpy", "no third-party packages"),
    ("import time\ntime.sleep(1)", "asyncio.sleep"),
    (
        "import statistics\nstatistics.mean([1, 2])",
        "sum(xs) / len(xs)",
    ),
    ("import csv", "splitlines"),
    ("from decimal import Decimal", "round(x, 2)"),
    ("import textwrap", "no `textwrap` module"),
    (
        "from itertools import groupby\nlist(groupby([1, 1, 2]))",
        "setdefault",
    ),
    (
        "import asyncio\nt = asyncio.create_task(test.slow(ms=1))",
        "asyncio.gather",
    ),
    ("class Point(dict):\n    pass", "cannot inherit"),
    ("match 1:\n    case 1:\n        pass", "if / elif"),
    ("def gen():\n    yield 1\nlist(gen())", "generators"),
    ("'%s items' % 3", "f-string"),
    ("await test.echo({'a': 1})", "keyword"),
    (
        "const x = await test.echo({a: 1});\nreturn x;",
        "TypeScript",
    ),
    ("r = test.echo(a=1)\nr['echo']", "await"),
    ("d = await test.echo(a=1)\nd['missing']", ".get("),
    ("eval('1 + 1')", "no `eval`"),
];

#[tokio::test]
async fn what_monty_lacks_gets_a_hint_that_names_what_to_write() {
    let sandbox = python_sandbox().await;
    let mut misses = Vec::new();
    for (code, says) in HABITS {
        let mut e = execution(code);
        e.engine = Engine::Monty;
        let result = sandbox.run(e, Arc::new(TestBridge::default())).await;
        let Some(error) = result.error else {
            misses.push(format!("{code:?} ran: {:?}", result.value));
            continue;
        };
        let hint = error.hint.clone().unwrap_or_default();
        if !hint.contains(says) {
            misses.push(format!(
                "{code:?}: {} / hint {hint:?} lacks {says:?}",
                error.message
            ));
        }
    }
    assert!(
        misses.is_empty(),
        "{} of {} habits:\n{}",
        misses.len(),
        HABITS.len(),
        misses.join("\n")
    );
}

#[tokio::test]
async fn python_sent_as_typescript_is_told_how_to_send_it() {
    let sandbox = python_sandbox().await;
    for code in [
        "import asyncio\nr = await test.echo(message='hi')\nprint(r)",
        "for x in [1, 2]:\n    print(x)",
    ] {
        let result = sandbox
            .run(execution(code), Arc::new(TestBridge::default()))
            .await;
        let error = result.error.expect("an error");
        assert!(
            error
                .hint
                .unwrap_or_default()
                .contains("language: \"python\""),
            "{code}: {}",
            error.message
        );
    }
}
