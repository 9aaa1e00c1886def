//! Python on Monty in the locked-down workers (issue 50): tools as async keyword-only methods
//! of a backend object, fan-out with `asyncio.gather`, values as TypeScript gets them, errors
//! in the user's lines, and runs that wait holding no interpreter.

#![allow(clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{TestBridge, execution};
use sandgate_sandbox::{Engine, ErrorKind, ExecutionResult, Limits, PoolConfig, Sandbox};
use serde_json::{Value, json};

async fn python_sandbox(workers: usize) -> Sandbox {
    let mut quickjs = PoolConfig::new(common::worker_program());
    quickjs.workers = 1;
    let mut python = PoolConfig::new(common::worker_program());
    python.args = vec![sandgate_sandbox::PYTHON_ARG.into()];
    python.workers = workers;
    python.max_workers = workers;
    Sandbox::start(quickjs)
        .await
        .expect("sandbox")
        .with_python(python)
        .await
        .expect("the Python engine starts")
}

async fn py_with(
    sandbox: &Sandbox,
    code: &str,
    limits: Limits,
    bridge: Arc<TestBridge>,
) -> ExecutionResult {
    let mut e = execution(code);
    e.engine = Engine::Monty;
    e.limits = limits;
    sandbox.run(e, bridge).await
}

async fn py(sandbox: &Sandbox, code: &str) -> ExecutionResult {
    py_with(
        sandbox,
        code,
        Limits::default(),
        Arc::new(TestBridge::default()),
    )
    .await
}

fn value(result: &ExecutionResult) -> Value {
    common::value(result)
}

#[tokio::test]
async fn a_python_script_calls_tools_with_keywords_and_gets_what_typescript_gets() {
    let sandbox = python_sandbox(1).await;
    let result = py(
        &sandbox,
        "echoed = await test.echo(message='hi', n=3)\ntext = await test.text()\nparsed = await test.json_text()\nmulti = await test.multi()\n{'echoed': echoed, 'text': text, 'parsed': parsed, 'blocks': len(multi)}",
    )
    .await;
    assert_eq!(
        value(&result),
        json!({"echoed": {"echo": {"message": "hi", "n": 3}}, "text": "plain text", "parsed": {"parsed": true}, "blocks": 2})
    );
    assert_eq!(result.trace.len(), 4, "{:?}", result.trace);
    assert!(result.trace.iter().all(|c| c.ok));
    // A script that ends by assigning a name returns that value, as models expect.
    let assigned = py(&sandbox, "graph = await test.echo(n=1)").await;
    assert_eq!(value(&assigned), json!({"echo": {"n": 1}}));
    let returned = py(&sandbox, "if True:\n    return 7\n8").await;
    assert_eq!(
        value(&returned),
        json!(7),
        "a top-level return ends the script with its value"
    );
    // JSON integers arrive as int, so arithmetic and indexing work on them.
    let result = py(&sandbox, "r = await test.echo(n=41)\nr['echo']['n'] + 1").await;
    assert_eq!(value(&result), json!(42));
}

#[tokio::test]
async fn a_tool_whose_name_is_not_an_identifier_is_reachable_as_written() {
    let sandbox = python_sandbox(1).await;
    let by_identifier = py(&sandbox, "await my_server.get_sum(a=1, b=2)").await;
    assert_eq!(value(&by_identifier), json!("The sum is 3"));
    let by_name = py(
        &sandbox,
        "f = getattr(my_server, 'get-sum')\nawait f(a=2, b=2)",
    )
    .await;
    assert_eq!(value(&by_name), json!("The sum is 4"));
}

#[tokio::test]
async fn gather_sends_the_calls_at_once() {
    let sandbox = python_sandbox(1).await;
    let bridge = Arc::new(TestBridge::default());
    let result = py_with(
        &sandbox,
        "import asyncio\nresults = await asyncio.gather(*[test.slow(ms=300) for _ in range(5)])\nlen(results)",
        Limits::default(),
        bridge.clone(),
    )
    .await;
    assert_eq!(value(&result), json!(5));
    assert_eq!(
        bridge.max_in_flight.load(Ordering::SeqCst),
        5,
        "all five were in flight at once"
    );
}

#[tokio::test]
async fn a_failed_call_raises_and_can_be_caught_and_uncaught_it_ends_the_run_as_tool_failed() {
    let sandbox = python_sandbox(1).await;
    let caught = py(
        &sandbox,
        "said = 'no'\ntry:\n    await test.fail()\nexcept Exception as e:\n    said = str(e)\nsaid",
    )
    .await;
    assert_eq!(value(&caught), json!("it broke"));
    let by_name = py(
        &sandbox,
        "try:\n    await test.fail()\nexcept ToolError as e:\n    said = 'ToolError: ' + str(e)\nsaid",
    )
    .await;
    assert_eq!(value(&by_name), json!("ToolError: it broke"));
    // The names are put in front of the code; its errors still point at the user's lines.
    let later = py(
        &sandbox,
        "try:\n    await test.fail()\nexcept ToolError:\n    pass\n1 / 0",
    )
    .await;
    assert_eq!(later.error.expect("an error").line, Some(5));
    let uncaught = py(&sandbox, "x = 1\nawait test.fail()\n").await;
    let error = uncaught.error.expect("an error");
    assert_eq!(error.kind, ErrorKind::ToolFailed, "{error:?}");
    assert_eq!(error.line, Some(2), "the line of the call: {error:?}");
    assert!(error.message.contains("it broke"), "{error:?}");
}

#[tokio::test]
async fn positional_arguments_and_unknown_tools_say_what_to_write() {
    let sandbox = python_sandbox(1).await;
    let positional = py(&sandbox, "await test.echo({'a': 1})").await;
    let error = positional.error.expect("an error");
    assert!(error.message.contains("keyword arguments"), "{error:?}");
    assert!(positional.trace.is_empty(), "nothing left the sandbox");
    let unknown = py(&sandbox, "await test.nope(a=1)").await;
    let error = unknown.error.expect("an error");
    assert!(
        error.message.contains("has no tool `nope`") && error.message.contains("echo"),
        "{error:?}"
    );
    let undefined = py(&sandbox, "await nothere.echo()").await;
    let error = undefined.error.expect("an error");
    assert!(error.message.starts_with("NameError"), "{error:?}");
}

#[tokio::test]
async fn print_goes_to_the_logs_and_errors_point_at_the_users_line() {
    let sandbox = python_sandbox(1).await;
    let result = py(&sandbox, "print('one', 2)\nprint('three')\n1/0\n").await;
    let lines: Vec<&str> = result.logs.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(lines, ["one 2", "three"]);
    let error = result.error.expect("an error");
    assert_eq!(
        (error.kind, error.line),
        (ErrorKind::Runtime, Some(3)),
        "{error:?}"
    );
    assert!(error.message.starts_with("ZeroDivisionError"), "{error:?}");
    let syntax = py(&sandbox, "```python\nx = (\n```").await;
    assert_eq!(syntax.error.expect("an error").kind, ErrorKind::Syntax);
}

#[tokio::test]
async fn the_sandbox_gives_python_no_files_network_or_imports_of_its_own() {
    let sandbox = python_sandbox(1).await;
    for code in [
        "from pathlib import Path\nPath('/etc/passwd').read_text()",
        "import os\nos.getenv('HOME')",
        "import socket",
        "import subprocess",
        "__import__('os')",
    ] {
        let result = py(&sandbox, code).await;
        let error = result
            .error
            .unwrap_or_else(|| panic!("{code} ran: {:?}", result.value));
        assert_ne!(error.kind, ErrorKind::Internal, "{code}: {error:?}");
    }
    // The worker is still there for the next run.
    assert_eq!(value(&py(&sandbox, "1 + 1").await), json!(2));
}

#[tokio::test]
async fn a_waiting_run_times_out_and_a_loop_is_stopped_by_its_wall_time() {
    let sandbox = python_sandbox(1).await;
    let limits = Limits {
        wall_ms: 300,
        ..Limits::default()
    };
    let waiting = py_with(
        &sandbox,
        "await test.slow(ms=5000)",
        limits,
        Arc::new(TestBridge::default()),
    )
    .await;
    assert_eq!(waiting.error.expect("an error").kind, ErrorKind::Timeout);
    let started = Instant::now();
    let looping = py_with(
        &sandbox,
        "while True:\n    pass",
        limits,
        Arc::new(TestBridge::default()),
    )
    .await;
    assert_eq!(looping.error.expect("an error").kind, ErrorKind::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(value(&py(&sandbox, "'after'").await), json!("after"));
}

#[tokio::test]
async fn many_runs_wait_on_one_worker_at_once() {
    let sandbox = python_sandbox(1).await;
    let bridge = Arc::new(TestBridge::default());
    let runs: Vec<_> = (0..200)
        .map(|i| {
            let (sandbox, bridge) = (sandbox.clone(), bridge.clone());
            tokio::spawn(async move {
                py_with(
                    &sandbox,
                    &format!("await test.slow(ms=500)\n{i}"),
                    Limits::default(),
                    bridge,
                )
                .await
            })
        })
        .collect();
    for (i, run) in runs.into_iter().enumerate() {
        assert_eq!(value(&run.await.expect("joined")), json!(i));
    }
    assert!(
        bridge.max_in_flight.load(Ordering::SeqCst) >= 150,
        "the runs waited together"
    );
}

#[tokio::test]
async fn a_memory_bomb_ends_only_its_own_run() {
    let sandbox = python_sandbox(1).await;
    let waiting = {
        let sandbox = sandbox.clone();
        tokio::spawn(async move {
            py(
                &sandbox,
                "r = await test.slow(ms=800)\n[r, len('k' * 1000)]",
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pids = |sandbox: &Sandbox| {
        let mut pids: Vec<Option<u32>> = sandbox.workers().iter().map(|w| w.pid).collect();
        pids.sort();
        pids
    };
    let before = pids(&sandbox);
    for bomb in [
        "x = 'x' * 10**10",
        "x = [0] * 10**9",
        "x = 10**10**8",
        "l = []\nwhile True:\n    l.append('x' * 1000)",
    ] {
        let result = py(&sandbox, bomb).await;
        let error = result.error.unwrap_or_else(|| panic!("{bomb} ran"));
        assert_eq!(error.kind, ErrorKind::Memory, "{bomb}: {error:?}");
        assert!(
            error.message.starts_with("MemoryError"),
            "{bomb}: {error:?}"
        );
    }
    let waited = waiting.await.expect("joined");
    assert_eq!(
        value(&waited),
        json!(["slept", 1000]),
        "the run waiting on the same worker went on"
    );
    let after = pids(&sandbox);
    assert!(
        before.iter().all(|pid| after.contains(pid)),
        "no worker died: {before:?} then {after:?}"
    );
}

#[tokio::test]
async fn the_granted_capabilities_are_there_in_python_spelling_and_nothing_else() {
    let sandbox = python_sandbox(1).await;
    let granted = |code: &str| {
        let mut e = execution(code);
        e.engine = Engine::Monty;
        e.host_functions = Arc::new(
            ["fetch", "fs.readFile", "fs.writeFile", "fs.stat"]
                .map(String::from)
                .to_vec(),
        );
        e
    };
    let run = |code: &'static str| {
        let (sandbox, e) = (sandbox.clone(), granted(code));
        async move { sandbox.run(e, Arc::new(TestBridge::default())).await }
    };
    let fetched = run("resp = await fetch('https://example.com/x', method='post', headers={'a': 'b'})\n[resp.status, resp.ok, resp.headers['content-type'], resp.text()[:9]]").await;
    assert_eq!(
        value(&fetched),
        json!([200, true, "text/html", "<!doctype"])
    );
    assert_eq!(fetched.trace[0].name, "fetch", "{:?}", fetched.trace);
    let not_json = run("resp = await fetch('https://example.com/x')\nresp.json()").await;
    assert!(
        not_json
            .error
            .expect("an error")
            .message
            .starts_with("ValueError")
    );
    let files = run("[await fs.read_file('/a.txt'), await fs.write_file('/b', 'data', encoding='utf8'), (await fs.stat('/x'))['size']]").await;
    assert_eq!(value(&files), json!(["read /a.txt", ["data", "utf8"], 11]));
    for (code, says) in [
        ("await state.get('k')", "name 'state' is not defined"),
        ("await env.get('HOME')", "name 'env' is not defined"),
        ("await fs.remove('/a')", "`fs` has no `remove`"),
        (
            "await fetch('https://x', verb='GET')",
            "unexpected keyword argument 'verb'",
        ),
    ] {
        let result = run(code).await;
        let error = result.error.unwrap_or_else(|| panic!("{code} ran"));
        assert!(error.message.contains(says), "{code}: {error:?}");
        assert!(result.trace.is_empty(), "{code}: nothing left the sandbox");
    }
    // Without the grant, no fetch either.
    let none = py(&sandbox, "await fetch('https://example.com')").await;
    assert!(
        none.error
            .expect("an error")
            .message
            .contains("name 'fetch' is not defined")
    );
}

#[tokio::test]
async fn asyncio_sleep_parks_the_run_on_a_timer_and_the_clock_reads() {
    let sandbox = python_sandbox(1).await;
    let started = Instant::now();
    let slept = py(
        &sandbox,
        "import asyncio\nawait asyncio.gather(asyncio.sleep(0.3), asyncio.sleep(0.3), asyncio.sleep(0.3))\nawait asyncio.sleep(0)\n'woke'",
    )
    .await;
    assert_eq!(value(&slept), json!("woke"));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300),
        "the timers were waited for: {took:?}"
    );
    // While one run sleeps, another on the same worker runs.
    let sleeping = {
        let sandbox = sandbox.clone();
        tokio::spawn(
            async move { py(&sandbox, "import asyncio\nawait asyncio.sleep(0.5)\n1").await },
        )
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(value(&py(&sandbox, "2").await), json!(2));
    assert_eq!(value(&sleeping.await.expect("joined")), json!(1));
    // A sleep past the wall time ends as a timeout, at the wall time.
    let limits = Limits {
        wall_ms: 300,
        ..Limits::default()
    };
    let long = py_with(
        &sandbox,
        "import asyncio\nawait asyncio.sleep(60)",
        limits,
        Arc::new(TestBridge::default()),
    )
    .await;
    assert_eq!(long.error.expect("an error").kind, ErrorKind::Timeout);
    let timers = py_with(
        &sandbox,
        "import asyncio\nawait asyncio.gather(*[asyncio.sleep(0.01) for _ in range(20)])",
        Limits {
            max_timers: 5,
            ..Limits::default()
        },
        Arc::new(TestBridge::default()),
    )
    .await;
    assert!(
        timers
            .error
            .expect("an error")
            .message
            .contains("max_timers")
    );
    // The clock: datetime.now() and date.today() read the same time TypeScript's Date does.
    let now = py(&sandbox, "from datetime import datetime, date, timezone\n[datetime.now(timezone.utc).year, date.today().year >= 2026]").await;
    let year = value(&now)[0].as_i64().expect("a year");
    assert!(year >= 2026, "{year}");
}
