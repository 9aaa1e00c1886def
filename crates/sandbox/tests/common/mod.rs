//! Shared test fixtures: a sandbox over the real worker binary, and an in-process bridge with
//! a few tools whose behaviour the tests control.

#![allow(dead_code, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use sandgate_sandbox::{
    BackendCondition, Bridge, CallFailure, Execution, ExecutionResult, FailureKind, Limits,
    PoolConfig, Sandbox, ToolAnswer, ToolBinding,
};
use serde_json::{Value, json};

/// The worker binary cargo built for these tests.
pub fn worker_program() -> &'static str {
    env!("CARGO_BIN_EXE_sandgate-worker")
}

/// The engine these tests run on: QuickJS, or V8 when `SANDGATE_TEST_ENGINE=v8` (with
/// `SANDGATE_DENO`, the `deno` executable; `scripts/test` runs the suites on both).
pub fn engine_config() -> PoolConfig {
    let mut config = PoolConfig::new(worker_program());
    #[expect(clippy::disallowed_methods, reason = "the tests choose their engine")]
    if std::env::var("SANDGATE_TEST_ENGINE").as_deref() == Ok("v8") {
        #[expect(clippy::disallowed_methods, reason = "the tests find deno")]
        let deno = std::env::var("SANDGATE_DENO").expect("SANDGATE_DENO names the deno executable");
        config.args = vec!["--v8".into(), deno];
        config.kill_grace = sandgate_sandbox::V8_KILL_GRACE;
    }
    config
}

/// Whether these tests run on the V8 engine.
pub fn on_v8() -> bool {
    engine_config().args.iter().any(|a| a == "--v8")
}

pub async fn sandbox(workers: usize) -> Sandbox {
    let mut config = engine_config();
    config.workers = workers;
    Sandbox::start(config).await.expect("sandbox starts")
}

/// A sandbox of exactly `workers` workers: no extra ones, so executions share them.
pub async fn sandbox_of_exactly(workers: usize) -> Sandbox {
    let mut config = engine_config();
    config.workers = workers;
    config.max_workers = workers;
    Sandbox::start(config).await.expect("sandbox starts")
}

pub fn tool(backend: &str, name: &str) -> ToolBinding {
    ToolBinding {
        backend: backend.into(),
        name: name.into(),
        js_backend: sandgate_catalog_ident(backend),
        js_tool: sandgate_catalog_ident(name),
        declaration: format!(
            "function {}(args: object): Promise<unknown>",
            sandgate_catalog_ident(name)
        ),
    }
}

/// The catalog's rule, restated for tests (the sandbox crate does not depend on the catalog).
fn sandgate_catalog_ident(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// Tools: `test.echo` (structuredContent echo), `test.text` (one text item), `test.json_text`
/// (text that is JSON), `test.multi` (two items), `test.fail` (isError), `test.slow` (sleeps
/// `ms`), `my-server.get-sum` (hyphenated), `test.strict` (rejects a `count` that is not a
/// number), and host function `addNumbers`.
pub fn tools() -> Arc<Vec<ToolBinding>> {
    Arc::new(vec![
        tool("test", "echo"),
        tool("test", "text"),
        tool("test", "json_text"),
        tool("test", "multi"),
        tool("test", "fail"),
        tool("test", "slow"),
        tool("my-server", "get-sum"),
        tool("test", "starting"),
        tool("test", "garbage"),
        ToolBinding {
            declaration: "strict(args: { count: number }): Promise<unknown>".into(),
            ..tool("test", "strict")
        },
    ])
}

#[derive(Default)]
pub struct TestBridge {
    pub calls: AtomicU32,
    pub in_flight: Arc<AtomicU32>,
    pub max_in_flight: AtomicU32,
}

impl Bridge for TestBridge {
    fn call_tool(
        &self,
        tool: &ToolBinding,
        args: String,
    ) -> BoxFuture<'static, Result<ToolAnswer, CallFailure>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let args: Value = serde_json::from_str(&args).unwrap_or(Value::Null);
        let name = format!("{}.{}", tool.backend, tool.name);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let in_flight = self.in_flight.clone();
        Box::pin(async move {
            let result = respond(&name, &args).await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
            result
        })
    }

    fn call_host(
        &self,
        name: &str,
        args: String,
    ) -> BoxFuture<'static, Result<String, CallFailure>> {
        let name = name.to_string();
        Box::pin(async move {
            let args: Vec<Value> = serde_json::from_str(&args).unwrap_or_default();
            match name.as_str() {
                "addNumbers" => {
                    Ok(json!(args.iter().filter_map(Value::as_f64).sum::<f64>()).to_string())
                }
                // A response after 5 s (a slow host), or at once with a text body.
                "fetch" => {
                    let request = args.first().cloned().unwrap_or_default();
                    let url = request["url"].as_str().unwrap_or_default().to_string();
                    if url.contains("slow") {
                        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                    }
                    Ok(json!({"url": url, "status": 200, "statusText": "OK", "redirected": false,
                        "headers": [["content-type", "text/html"]], "body": "<!doctype html><p>not json</p>"})
                    .to_string())
                }
                "fs.stat" => Ok(json!({"size": 11, "isFile": true, "isDirectory": false,
                    "isSymbolicLink": false, "modifiedMs": 1_700_000_000_000_u64})
                .to_string()),
                // What a write was sent: its data and encoding.
                "fs.writeFile" => Ok(json!([args.get(1), args.get(2)]).to_string()),
                // A file's text, as the granted `fs` gives it (Node's habits with it).
                "fs.readFile" => Ok(json!(format!(
                    "read {}",
                    args.first().and_then(Value::as_str).unwrap_or_default()
                ))
                .to_string()),
                _ => Err(CallFailure::new(
                    FailureKind::Internal,
                    format!("no host function {name}"),
                )),
            }
        })
    }
}

async fn respond(name: &str, args: &Value) -> Result<ToolAnswer, CallFailure> {
    let result = match name {
        "test.echo" => {
            json!({"content": [{"type": "text", "text": "ignored"}], "structuredContent": {"echo": args}})
        }
        "test.text" => json!({"content": [{"type": "text", "text": "plain text"}]}),
        "test.json_text" => json!({"content": [{"type": "text", "text": "{\"parsed\": true}"}]}),
        "test.multi" => {
            json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
        }
        "test.fail" => json!({"content": [{"type": "text", "text": "it broke"}], "isError": true}),
        "test.slow" => {
            let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(100);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            json!({"content": [{"type": "text", "text": "slept"}]})
        }
        "my-server.get-sum" => {
            let sum = args.get("a").and_then(Value::as_f64).unwrap_or(0.0)
                + args.get("b").and_then(Value::as_f64).unwrap_or(0.0);
            json!({"content": [{"type": "text", "text": format!("The sum is {sum}")}]})
        }
        // Checks its arguments like an MCP server with an input schema.
        "test.strict" if !args.get("count").is_some_and(Value::is_number) => {
            json!({"content": [{"type": "text", "text": "MCP error -32602: Input validation error: Invalid arguments for tool strict: expected number, received string at count"}], "isError": true})
        }
        "test.strict" => json!({"content": [{"type": "text", "text": "counted"}]}),
        // A backend bug: the result is not JSON at all.
        "test.garbage" => {
            return Ok(ToolAnswer {
                json: "{not json".into(),
                is_error: false,
            });
        }
        "test.starting" => {
            return Err(CallFailure::new(
                FailureKind::Failed,
                "backend `test` is still starting (waited 1s). Retry in a few seconds; sandgate://backend/test shows its status.",
            )
            .because(BackendCondition::Starting));
        }
        _ => {
            return Err(
                CallFailure::new(FailureKind::Failed, format!("unknown tool {name}"))
                    .because(BackendCondition::Unknown),
            );
        }
    };
    Ok(ToolAnswer {
        is_error: result.get("isError") == Some(&Value::Bool(true)),
        json: result.to_string(),
    })
}

pub fn execution(code: &str) -> Execution {
    Execution {
        code: code.to_string(),
        tools: tools(),
        host_functions: Arc::new(vec!["addNumbers".into()]),
        env: Default::default(),
        context: Some(json!({"user": "ada"})),
        limits: Limits::default(),
        mode: Default::default(),
        engine: Default::default(),
    }
}

pub async fn run(sandbox: &Sandbox, code: &str) -> ExecutionResult {
    sandbox
        .run(execution(code), Arc::new(TestBridge::default()))
        .await
}

pub async fn run_with(sandbox: &Sandbox, code: &str, limits: Limits) -> ExecutionResult {
    let mut e = execution(code);
    e.limits = limits;
    sandbox.run(e, Arc::new(TestBridge::default())).await
}

pub fn value(result: &ExecutionResult) -> Value {
    assert!(
        result.error.is_none(),
        "unexpected error: {:?}\nlogs: {:?}",
        result.error,
        result.logs
    );
    result.value.clone().expect("a value")
}
