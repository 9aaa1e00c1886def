//! `call_tool_chain`: the product's main tool. It takes JSON or TypeScript, runs it on the
//! cheapest path that gives exactly what the sandbox would (`route`), shapes the result for
//! the model without losing any of it ([`response`]), and records the execution in the store.
//!
//! Every tier calls tools through the same `ExecutionBridge` and the door, so every call passes the policy
//! exactly once, and every tier honours the caller's timeout and the output limits.

pub(crate) mod bounds;
pub(crate) mod detach;
mod engine_advice;
mod execute;
mod missing_key;
mod missing_property;
mod outcome;
pub(crate) mod read;
pub mod response;
pub mod route;
mod script_approval;
pub(crate) mod ungranted;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use sandgate_sandbox::direct::{self, call_failure, check_output_limit, map_tool_result};
use sandgate_sandbox::{Bridge, CallRecord, Engine, Limits};
use serde::Deserialize;
use serde_json::Value;

use crate::approvals::Asking;
use crate::bridge::ExecutionBridge;
use crate::caller::Caller;
use crate::gateway::Gateway;
pub use crate::progress::ProgressSink;
pub use crate::runtime::{Cancellation, ChainRuntime};
pub use bounds::{RESPONSE_SLACK, may_change_state};
use execute::{Seat, run};
pub use outcome::Outcome;
pub use route::Tier;

/// The tool's arguments.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainArgs {
    /// JSON (`{"tool": ..., "arguments": ...}`) or TypeScript. The JSON call may also come as
    /// an object rather than text (the MCP Inspector CLI sends it so): it is read as its text.
    #[serde(deserialize_with = "code_text")]
    pub code: String,
    /// Lower the time limit, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Characters of result the response may hold.
    pub max_output_size: Option<usize>,
    /// What the caller is looking for; large text outputs keep the paragraphs that match.
    pub intent: Option<String>,
    /// Skip the shortcuts and run in the sandbox (for debugging and equivalence checks).
    pub force_sandbox: Option<bool>,
    /// Narrow the caller's profile to these tool patterns for this execution (never widens).
    pub allow_tools: Option<Vec<String>>,
    /// Answer after this many milliseconds even if the code still runs: with its id and what
    /// it did so far; it runs on, and `wait_execution` waits for it (see `detach`).
    pub yield_after_ms: Option<u64>,
    /// The JavaScript engine (`quickjs`, `v8`), where the caller's profile allows both.
    pub engine: Option<String>,
    /// The code's language: `typescript` (the default) or `python`. Code fenced as
    /// ```` ```python ```` is Python without it.
    pub language: Option<String>,
}

/// The languages `call_tool_chain` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// TypeScript (or JavaScript), on QuickJS or V8.
    TypeScript,
    /// Python, on Monty.
    Python,
}

impl ChainArgs {
    /// The language the code is in: what `language` says, else Python for code fenced as
    /// Python, else TypeScript; a clear error for a name that is no language.
    pub fn language(&self) -> Result<Language, String> {
        match self
            .language
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("python" | "py") => Ok(Language::Python),
            Some("typescript" | "ts" | "javascript" | "js") => Ok(Language::TypeScript),
            Some(other) => Err(format!(
                "`language` is \"{other}\": write \"typescript\" or \"python\", or leave it out"
            )),
            None => {
                let code = self.code.trim_start();
                let fenced = code
                    .strip_prefix("```python")
                    .or_else(|| code.strip_prefix("```py"));
                Ok(match fenced {
                    Some(rest) if rest.starts_with(['\n', '\r', ' ']) => Language::Python,
                    _ => Language::TypeScript,
                })
            }
        }
    }
}

/// The sandbox's name for an engine the policy decided on.
pub fn sandbox_engine(engine: sandgate_policy::Engine) -> Engine {
    match engine {
        sandgate_policy::Engine::Quickjs => Engine::Quickjs,
        sandgate_policy::Engine::V8 => Engine::V8,
    }
}

/// `code` as text: a string as it is, a JSON object (a tier-1 call) as its JSON text.
fn code_text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::String(code) => Ok(code),
        call @ Value::Object(_) => Ok(call.to_string()),
        other => Err(serde::de::Error::custom(format!(
            "`code` must be TypeScript text or a JSON call object {{\"tool\": ..., \"arguments\": {{...}}}}, not {}",
            match other {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                _ => "an array",
            }
        ))),
    }
}

/// Runs `call_tool_chain`. Problems with the code are in the result (`isError`), never a
/// protocol error: the model reads them and fixes its code.
pub async fn call_tool_chain(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: ChainArgs,
    progress: Option<ProgressSink>,
    cancel: &Cancellation,
) -> CallToolResult {
    match args.yield_after_ms {
        Some(after) => {
            let after = Duration::from_millis(after);
            let start = starter(gateway, caller, args);
            detach::yielding(gateway, caller, after, cancel, start).await
        }
        None => {
            let id = sandgate_store::new_execution_id();
            let asking = Asking::of(&caller.reach, None);
            let seat = Seat {
                id,
                detached: None,
                asking,
            };
            run(gateway, caller, args, progress, cancel, seat).await
        }
    }
}

/// Starts `call_tool_chain` for `caller` detached from the request (a task, or a call whose
/// questions a 2026-07-28 client answers by retrying): its entry, already running.
pub(crate) fn launch(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: ChainArgs,
) -> Result<Arc<crate::detached::Detached>, String> {
    // Its questions go through whoever waits on it (a task's `tasks/get`, a 2026-07-28
    // client's retry), never through the session of the request that started it.
    let caller = caller.asked_through_waiter();
    let start = starter(gateway, &caller, args);
    detach::launch(gateway, &caller, start)
}

/// What runs a detached execution, given its entry and id.
fn starter(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: ChainArgs,
) -> impl FnOnce(
    Arc<crate::detached::Detached>,
    String,
) -> futures::future::BoxFuture<'static, CallToolResult>
+ use<> {
    let (gateway, caller) = (gateway.clone(), caller.clone());
    move |detached, id| {
        Box::pin(async move {
            let cancellation = detached.cancellation();
            let asking = Asking::of(&caller.reach, Some(detached.inbox()));
            let seat = Seat {
                id,
                detached: Some(detached),
                asking,
            };
            run(&gateway, &caller, args, None, &cancellation, seat).await
        })
    }
}

/// Tiers 1 and 2: one call through the bridge, mapped exactly as the preamble maps it.
async fn direct_call(
    bridge: &ExecutionBridge,
    binding: &sandgate_sandbox::ToolBinding,
    arguments: serde_json::Map<String, Value>,
    raw: bool,
    tier: Tier,
    limits: &Limits,
    cancelled: impl Future<Output = ()>,
) -> Outcome {
    let args = Value::Object(arguments).to_string();
    let args_bytes = args.len();
    let qualified = sandgate_catalog::ToolRef::new(&binding.backend, &binding.name).to_string();
    let call_started = Instant::now();
    let mut record = CallRecord {
        name: qualified.clone(),
        args_bytes,
        started_ms: 0.0,
        duration_ms: None,
        ok: false,
        result_bytes: 0,
        error: None,
        arguments: sandgate_sandbox::kept_arguments(
            &args,
            &mut limits.max_recorded_argument_bytes.clone(),
        ),
        condition: None,
    };
    // A cancel drops the call, which sends the backend `notifications/cancelled`.
    let call = tokio::time::timeout(limits.wall_time(), bridge.call_tool(binding, args));
    let answer = tokio::select! {
        answer = call => answer,
        () = cancelled => {
            record.duration_ms = None;
            record.error = Some("unfinished when the execution was cancelled".into());
            return Outcome {
                tier,
                value: None,
                error: Some(direct::cancelled_error()),
                logs: vec![],
                calls: vec![record],
                duration_ms: 0.0,
            };
        }
    };
    record.duration_ms = Some(call_started.elapsed().as_secs_f64() * 1000.0);
    let (value, error) = match answer {
        Err(_) => {
            record.duration_ms = None;
            (None, Some(direct::timeout_error(limits.wall_ms, 1)))
        }
        Ok(Err(failure)) => {
            record.error = Some(failure.message.clone());
            record.condition = failure.condition;
            (None, Some(call_failure(&failure, binding)))
        }
        Ok(Ok(answer)) => {
            record.result_bytes = answer.json.len();
            let parsed: Value = serde_json::from_str(&answer.json).unwrap_or(Value::Null);
            record.ok = !answer.is_error;
            let mapped = if raw {
                Ok(direct::js_json(parsed))
            } else {
                map_tool_result(binding, &parsed)
            };
            if let Err(e) = &mapped {
                record.error = Some(e.message.clone());
            }
            match mapped.and_then(|v| check_output_limit(&v, limits.max_result_bytes).map(|()| v)) {
                Ok(v) => (Some(v), None),
                Err(e) => (None, Some(e)),
            }
        }
    };
    Outcome {
        tier,
        value,
        error,
        logs: vec![],
        calls: vec![record],
        duration_ms: 0.0,
    }
}
