//! Pool behaviour: executions past the limit answer `busy`, a killed run still reports what ran, names that
//! are awkward in JavaScript work, and `require_lockdown` refuses a worker without protections.

#![allow(clippy::expect_used)]
#![expect(clippy::disallowed_methods, reason = "the test finds programs on PATH")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use sandgate_sandbox::{
    ErrorKind, Execution, Limits, PoolConfig, Sandbox, SandboxError, ToolBinding,
};
use serde_json::json;

#[tokio::test]
async fn executions_past_the_limit_answer_busy_naming_it() {
    let mut config = PoolConfig::new(worker_program());
    config.workers = 1;
    config.max_executions = 1;
    let sb = Sandbox::start(config).await.expect("sandbox");
    let slow = run(&sb, "await test.slow({ ms: 300 }); return 'slow';");
    let quick = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        run(&sb, "return 'quick';").await
    };
    let (slow, quick) = tokio::join!(slow, quick);
    assert_eq!(slow.value, Some(json!("slow")));
    let error = quick.error.expect("busy");
    assert_eq!(error.kind, ErrorKind::Busy, "{error:?}");
    assert!(
        error.message.contains("sandbox.max_executions"),
        "the message names the limit: {error:?}"
    );
    assert_eq!(
        run(&sb, "return 'after';").await.value,
        Some(json!("after")),
        "the pool serves again"
    );
}

fn python() -> std::path::PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("python3"))
                .find(|p| p.exists())
        })
        .expect("python3 on PATH")
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test]
async fn a_stuck_worker_is_killed_at_the_deadline_and_what_ran_is_reported() {
    // A stand-in worker that logs, makes one call, then hangs where no interrupt reaches it,
    // in what it reports as one turn: the host gives up on the run at its deadline plus grace,
    // and kills the worker once that turn outlives every deadline on it.
    let mut config = PoolConfig::new(python());
    config.args = vec![fixture("stuck_worker.py")];
    config.workers = 1;
    config.max_workers = 1;
    config.kill_grace = Duration::from_millis(100);
    let sb = Sandbox::start(config).await.expect("sandbox");
    let stuck = sb.workers()[0].pid;
    let started = std::time::Instant::now();
    let result = run_with(
        &sb,
        "return 'whatever the worker ignores';",
        Limits {
            wall_ms: 300,
            ..Limits::default()
        },
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_millis(300 + 250),
        "killed in time: {:?}",
        started.elapsed()
    );
    let error = result.error.as_ref().expect("stopped");
    assert_eq!(error.kind, ErrorKind::Timeout, "{error:?}");
    let logs: Vec<&str> = result.logs.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(logs, ["started", "called"]);
    assert_eq!(result.trace.len(), 1);
    assert!(
        result.trace[0].ok && result.trace[0].name == "test.echo",
        "{:?}",
        result.trace
    );
    // The stuck worker is killed and replaced.
    let replaced = async {
        loop {
            let pids: Vec<_> = sb.workers().iter().map(|w| w.pid).collect();
            if !pids.is_empty() && !pids.contains(&stuck) {
                return pids;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(3), replaced)
        .await
        .expect("the stuck worker is killed and replaced");
}

#[tokio::test]
async fn a_timed_out_run_still_reports_its_logs_and_finished_calls() {
    let sb = sandbox(1).await;
    let code = "console.log('started');\nconst r = await test.echo({ step: 1 });\nconsole.log('called', r);\nwhile (true) {}";
    // Time enough for a V8 isolate to start on a loaded machine (250-400 ms, more under the
    // suite's load) before the loop uses up the rest: the test is about what a timeout keeps.
    let result = run_with(
        &sb,
        code,
        Limits {
            wall_ms: 2000,
            ..Limits::default()
        },
    )
    .await;
    assert_eq!(
        result.error.as_ref().map(|e| e.kind),
        Some(ErrorKind::Timeout)
    );
    let logs: Vec<&str> = result.logs.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(logs, ["started", "called {\"echo\":{\"step\":1}}"]);
    assert_eq!(result.trace.len(), 1);
    assert!(result.trace[0].ok);
}

#[tokio::test]
async fn awkward_names_work_and_cannot_inject_code() {
    let sb = sandbox(1).await;
    let weird = |backend: &str, name: &str, js_backend: &str, js_tool: &str| ToolBinding {
        backend: backend.into(),
        name: name.into(),
        js_backend: js_backend.into(),
        js_tool: js_tool.into(),
        declaration: String::new(),
    };
    let tools = Arc::new(vec![
        weird("constructor", "__proto__", "constructor_", "__proto___"),
        weird("process", "delete", "process_", "delete_"),
        weird(
            "quote\"s",
            "new\nline');globalThis.pwned=1;('",
            "quote_s",
            "new_line____globalThis_pwned_1___",
        ),
        weird("test", "echo", "test", "echo"),
    ]);
    let code = r#"
        const a = await constructor_.__proto___({ x: 1 });
        const b = await globalThis["process"]["delete"]({ y: 2 });
        const c = await globalThis['quote"s']["new\nline');globalThis.pwned=1;('"]({ z: 3 });
        return { a, b, c, pwned: typeof pwned, protoIntact: Object.getPrototypeOf({}) === Object.prototype };
    "#;
    let execution = Execution {
        code: code.into(),
        tools,
        host_functions: Arc::new(vec![]),
        env: Default::default(),
        context: None,
        limits: Limits::default(),
        mode: Default::default(),
        engine: Default::default(),
    };
    let result = sb.run(execution, Arc::new(NamedBridge)).await;
    assert!(result.error.is_none(), "{:?}", result.error);
    assert_eq!(
        result.value,
        Some(
            json!({"a": "constructor.__proto__", "b": "process.delete", "c": "quote\"s.new\nline');globalThis.pwned=1;('", "pwned": "undefined", "protoIntact": true})
        )
    );
}

/// Answers every call with the qualified name it was routed to.
struct NamedBridge;

impl sandgate_sandbox::Bridge for NamedBridge {
    fn call_tool(
        &self,
        tool: &ToolBinding,
        _args: String,
    ) -> futures::future::BoxFuture<
        'static,
        Result<sandgate_sandbox::ToolAnswer, sandgate_sandbox::CallFailure>,
    > {
        let name = format!("{}.{}", tool.backend, tool.name);
        Box::pin(async move {
            Ok(sandgate_sandbox::ToolAnswer {
                json: json!({"content": [{"type": "text", "text": name}]}).to_string(),
                is_error: false,
            })
        })
    }
}

#[tokio::test]
async fn require_lockdown_refuses_a_worker_without_every_protection() {
    // A stand-in worker that reports seccomp as unavailable, as on a host without it.
    let fake = format!(
        "{}/tests/fixtures/unprotected_worker.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let python = std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("python3"))
                .find(|p| p.exists())
        })
        .expect("python3 on PATH");
    let mut config = PoolConfig::new(python);
    config.args = vec![fake];
    config.workers = 1;
    config.require_lockdown = true;
    match Sandbox::start(config.clone()).await {
        Err(SandboxError::LockdownUnavailable { missing }) => assert_eq!(missing, ["seccomp"]),
        other => panic!("expected LockdownUnavailable, got {other:?}"),
    }
    config.require_lockdown = false;
    let sb = Sandbox::start(config)
        .await
        .expect("allowed when not required");
    assert!(!sb.protections().all_active());
}

#[tokio::test]
async fn a_worker_writes_to_a_pipe_of_its_own_that_the_host_drains() {
    // A worker may create no file (`RLIMIT_FSIZE` 0), so writing to the gateway's standard
    // error, when that is a regular file, would get it killed: each worker's goes to a pipe the
    // host reads. The stand-in writes 1 MiB there before it reports ready, which only a
    // drained pipe takes.
    use std::os::unix::fs::MetadataExt;
    let host = std::fs::metadata("/proc/self/fd/2").expect("the test's standard error");
    let mut config = PoolConfig::new(python());
    config.args = vec![
        fixture("noisy_worker.py"),
        format!("{}:{}", host.dev(), host.ino()),
    ];
    config.workers = 1;
    config.max_workers = 1;
    let sb = tokio::time::timeout(Duration::from_secs(10), Sandbox::start(config))
        .await
        .expect("the worker was not left blocked on a full pipe")
        .expect("sandbox");
    assert!(
        sb.protections().all_active(),
        "the worker's standard error is not the host's: {:?}",
        sb.protections()
    );
}
