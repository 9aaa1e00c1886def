//! `sandgate run FILE.ts`: run a script in the sandbox against the configured backends and
//! print its result, logs, calls and any error. The first thing a new user tries.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use futures::FutureExt;
use sandgate_gateway::{Caller, ExecutionBridge, Knock};
use sandgate_sandbox::{Execution, ExecutionResult, Limits};

use super::args::ConfigArg;
use crate::setup;

/// Options of `sandgate run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The TypeScript (or JavaScript) file to run; `-` reads standard input.
    file: PathBuf,
    #[command(flatten)]
    config: ConfigArg,
    /// Print the whole result as JSON (result, logs, trace, stats, error).
    #[arg(long)]
    json: bool,
    /// Wall-time limit in milliseconds (at most the default of 30000).
    #[arg(long, value_name = "MS")]
    timeout: Option<u64>,
}

pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let code = if args.file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
            .context("cannot read the script from standard input")?
    } else {
        std::fs::read_to_string(&args.file)
            .with_context(|| format!("cannot read {}", args.file.display()))?
    };
    let config = setup::load_config(args.config.config.as_deref())?;
    let base = setup::open_base(&config).await?;
    let (manager, calls) = setup::start_backends(&config, &base);
    // The local user runs under the default profile, as a stdio client would, with the same
    // runtime as `serve` (the sandbox, the store and the stored tools it holds, so
    // `user.<name>` is there as it is for any client).
    let (runtime, ()) = tokio::join!(
        setup::chain_runtime(&config, base.store.clone()),
        setup::wait_for_backends(&config, &manager).map(|_| ())
    );
    let gateway = setup::build_gateway(&config, manager.clone(), calls, runtime?, &base).await?;
    let sandbox = gateway
        .chain_sandbox()
        .context("the sandbox did not start")?;
    let caller = Caller::local(gateway.profiles());
    let view = gateway.settled_view(&caller.access).await;
    let defaults = Limits::default();
    let limits = Limits {
        wall_ms: args
            .timeout
            .map_or(defaults.wall_ms, |t| t.min(defaults.wall_ms)),
        max_recorded_argument_bytes: setup::recorded_argument_bytes(&config),
        ..defaults
    };
    let id = sandgate_store::new_execution_id();
    let knock = Knock::new(caller, id.clone());
    let env = gateway.door().env_values(&knock, &code);
    // The local profile's engine, else the sandbox's default (no call chooses here).
    let profile = knock.caller.access.profile();
    let engine = profile
        .engine
        .decide(config.sandbox.engine, None, &profile.key)
        .map_or(Default::default(), sandgate_gateway::sandbox_engine);
    let execution = Execution {
        code,
        tools: view.bindings.clone(),
        host_functions: Arc::new(sandgate_gateway::granted_capabilities(&knock.caller.access)),
        env: Arc::new(env),
        context: None,
        limits,
        mode: Default::default(),
        engine,
    };
    let started_at_ms = sandgate_store::now_ms();
    let code = execution.code.clone();
    let result = sandbox
        .run(
            execution,
            Arc::new(ExecutionBridge::new(
                gateway.door().clone(),
                view.catalog.clone(),
                knock,
                None,
            )),
        )
        .await;
    manager.stop(std::time::Duration::from_secs(5)).await;
    if let Some(store) = gateway.chain_store() {
        record(&store, &id, started_at_ms, &code, &result, &view.catalog).await;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", render(&result));
    }
    Ok(if result.error.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Records the run like a `call_tool_chain` execution (`sandgate executions list` shows it);
/// a run is never failed for its record.
async fn record(
    store: &sandgate_store::StoreHandle,
    id: &str,
    started_at_ms: i64,
    code: &str,
    result: &ExecutionResult,
    catalog: &sandgate_catalog::Catalog,
) {
    let output_bytes = result
        .value
        .as_ref()
        .map_or(0, |v| serde_json::to_string(v).map_or(0, |s| s.len()))
        as u64;
    let record = sandgate_store::ExecutionRecord {
        id: id.to_string(),
        started_at_ms,
        tier: "sandbox".into(),
        code_hash: sandgate_gateway::chain::response::code_hash(code),
        code: Some(code.to_string()),
        duration_ms: result.stats.wall_ms,
        status: if result.error.is_some() {
            "error"
        } else {
            "ok"
        }
        .into(),
        calls: result.trace.len() as u32,
        output_bytes,
        returned_bytes: output_bytes,
        error_kind: result.error.as_ref().map(|e| e.kind.as_str().to_string()),
        profile: "default".into(),
        user: None,
        call_rows: sandgate_gateway::chain::response::call_rows(&result.trace, catalog),
        shown: Some(render(result)),
        error_line: result.error.as_ref().and_then(|e| e.line),
    };
    store.record(record);
    if let Err(e) = store.flush().await {
        tracing::warn!("the run was not recorded: {e}");
    }
}

/// The human-readable form: result, logs, calls, error.
pub fn render(result: &ExecutionResult) -> String {
    let mut out = String::new();
    if let Some(value) = &result.value {
        let _ = writeln!(
            out,
            "result:\n{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        );
    }
    if !result.logs.is_empty() {
        let _ = writeln!(out, "\nlogs:");
        for log in &result.logs {
            let _ = writeln!(out, "  [{}] {}", log.level, log.message);
        }
    }
    if !result.trace.is_empty() {
        let _ = writeln!(out, "\ncalls:");
        for call in &result.trace {
            let status = match (&call.error, call.duration_ms) {
                (None, Some(ms)) => format!("ok in {ms:.1} ms"),
                (Some(e), _) => format!("failed: {e}"),
                (None, None) => "unfinished".into(),
            };
            let _ = writeln!(
                out,
                "  {} ({} bytes in, {} bytes out): {status}",
                call.name, call.args_bytes, call.result_bytes
            );
        }
    }
    if let Some(error) = &result.error {
        let at = match (error.line, error.column) {
            (Some(l), Some(c)) => format!(" at line {l}, column {c}"),
            (Some(l), None) => format!(" at line {l}"),
            _ => String::new(),
        };
        let kind = error.kind.as_str();
        let _ = writeln!(out, "\nerror ({kind}){at}: {}", error.message);
        if let Some(hint) = &error.hint {
            let _ = writeln!(out, "  hint: {hint}");
        }
    }
    let _ = writeln!(
        out,
        "\n{:.1} ms, {} call(s), {} KiB heap",
        result.stats.wall_ms,
        result.stats.calls,
        result.stats.memory_bytes / 1024
    );
    out
}
