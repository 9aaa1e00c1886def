//! `call_tool_chain`: the product's main tool. It takes JSON or TypeScript, runs it on the
//! cheapest path that gives exactly what the sandbox would (`route`), shapes the result for
//! the model without losing any of it ([`response`]), and records the execution in the store.
//!
//! Every tier calls tools through the same `ExecutionBridge` and the door, so every call passes the policy
//! exactly once, and every tier honours the caller's timeout and the output limits.

pub(crate) mod bounds;
pub(crate) mod detach;
mod engine_advice;
mod missing_property;
pub(crate) mod read;
pub mod response;
pub mod route;
pub(crate) mod ungranted;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use sandgate_sandbox::direct::{self, call_failure, check_output_limit, map_tool_result};
use sandgate_sandbox::{
    Bridge, CallRecord, Engine, ErrorKind, ExecError, Execution, LimitRequest, Limits, LogLine,
};
use serde::Deserialize;
use serde_json::Value;

use crate::approvals::Asking;
use crate::bridge::ExecutionBridge;
use crate::caller::Caller;
use crate::door::{Knock, granted};
use crate::gateway::{FinishedExecution, Gateway};
pub use crate::progress::ProgressSink;
pub use crate::runtime::{Cancellation, ChainRuntime};
use crate::telemetry::traces;
pub use bounds::{RESPONSE_SLACK, may_change_state};
pub use route::Tier;
use route::{Route, route};

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
}

/// The sandbox's name for an engine the policy decided on.
pub fn sandbox_engine(engine: sandgate_policy::Engine) -> Engine {
    match engine {
        sandgate_policy::Engine::Quickjs => Engine::Quickjs,
        sandgate_policy::Engine::V8 => Engine::V8,
    }
}

/// The engine an execution runs on: what the call asked for, where its profile lets it
/// choose, else the profile's, else the sandbox's default; a clear error for a name that is no
/// engine, a choice the profile does not allow, or an engine this gateway did not start.
fn engine_for(
    args: &ChainArgs,
    profile: &sandgate_policy::Profile,
    runtime: &ChainRuntime,
) -> Result<Engine, String> {
    let asked = match args.engine.as_deref() {
        None => None,
        Some(name) => Some(sandgate_policy::Engine::named(name).ok_or_else(|| {
            format!("`engine` is \"{name}\": write \"quickjs\" or \"v8\", or leave it out")
        })?),
    };
    let engine = sandbox_engine(profile.engine.decide(
        runtime.default_engine,
        asked,
        &profile.key,
    )?);
    if !runtime.sandbox.has(engine) {
        return Err(format!(
            "the {} engine is not running in this gateway: the operator starts it with [sandbox] engine, or a profile's engine (docs/config.md)",
            engine.as_str()
        ));
    }
    Ok(engine)
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

/// What an execution produced, whichever tier ran it.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The path taken.
    pub tier: Tier,
    /// The result, when it succeeded.
    pub value: Option<Value>,
    /// The failure, if any.
    pub error: Option<ExecError>,
    /// Console output.
    pub logs: Vec<LogLine>,
    /// Every call, finished or not.
    pub calls: Vec<CallRecord>,
    /// Wall time.
    pub duration_ms: f64,
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
            let start = starter(gateway, caller, args, Questions::AsReached);
            detach::yielding(gateway, caller, after, cancel, start).await
        }
        None => {
            let id = sandgate_store::new_execution_id();
            let asking = match &caller.reach {
                crate::caller::Reach::Session(peer, declared) => {
                    Asking::Session(peer.clone(), *declared)
                }
                _ => Asking::Nobody,
            };
            let seat = Seat {
                id,
                detached: None,
                asking,
            };
            run(gateway, caller, args, progress, cancel, seat).await
        }
    }
}

/// Where a detached execution's questions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Questions {
    /// As the request's client can be reached: a session's `elicitation/create`, else through
    /// whoever waits on it (`wait_execution`, the console).
    AsReached,
    /// Through whoever waits on it: a task's `tasks/get`, or a 2026-07-28 client's retry.
    ThroughWaiter,
}

/// Starts `call_tool_chain` for `caller` detached from the request (a task, or a call whose
/// questions a 2026-07-28 client answers by retrying): its entry, already running.
pub(crate) fn launch(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: ChainArgs,
) -> Result<Arc<crate::detached::Detached>, String> {
    let start = starter(gateway, caller, args, Questions::ThroughWaiter);
    detach::launch(gateway, caller, start)
}

/// What runs a detached execution, given its entry and id.
fn starter(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: ChainArgs,
    questions: Questions,
) -> impl FnOnce(
    Arc<crate::detached::Detached>,
    String,
) -> futures::future::BoxFuture<'static, CallToolResult>
+ use<> {
    let (gateway, caller) = (gateway.clone(), caller.clone());
    move |detached, id| {
        Box::pin(async move {
            let cancellation = detached.cancellation();
            let asking = match (&caller.reach, questions) {
                (crate::caller::Reach::Nobody, _) => Asking::Nobody,
                (crate::caller::Reach::Session(peer, declared), Questions::AsReached) => {
                    Asking::Session(peer.clone(), *declared)
                }
                (reach, _) => Asking::Waiter(detached.inbox().clone(), reach.declared()),
            };
            let seat = Seat {
                id,
                detached: Some(detached),
                asking,
            };
            run(&gateway, &caller, args, None, &cancellation, seat).await
        })
    }
}

/// Where one execution sits: its id, its detached entry when it outlives its request, and how
/// its calls ask a person for approval.
struct Seat {
    id: String,
    detached: Option<Arc<crate::detached::Detached>>,
    asking: Asking,
}

/// Runs execution `seat.id` of `call_tool_chain`; a detached one also shows what it does to
/// its entry as it goes.
async fn run(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: ChainArgs,
    progress: Option<ProgressSink>,
    cancel: &Cancellation,
    seat: Seat,
) -> CallToolResult {
    let Seat {
        id,
        detached,
        asking,
    } = seat;
    let _running = gateway.execution_started();
    let cancelled = async {
        tokio::select! {
            () = cancel.cancelled() => {}
            () = gateway.stopping() => {}
        }
    };
    let started = Instant::now();
    let started_at_ms = sandgate_store::now_ms();
    if let Some(Err(message)) = args
        .intent
        .as_deref()
        .map(|intent| bounds::short_text("intent", intent))
    {
        return CallToolResult::error(vec![rmcp::model::ContentBlock::text(message)]);
    }
    let Some(runtime) = gateway.chain() else {
        return CallToolResult::error(vec![rmcp::model::ContentBlock::text(
            "call_tool_chain is not available: this gateway was started without a sandbox.",
        )]);
    };
    let mut caller = caller.clone();
    if let Some(allow) = args.allow_tools.clone() {
        if let Err(message) = check_allow_tools(&allow) {
            return CallToolResult::error(vec![rmcp::model::ContentBlock::text(message)]);
        }
        caller.access = caller.access.narrowed_to(allow);
    }
    if let Err(message) = gateway
        .admission()
        .admit_execution(
            caller.access.profile(),
            caller.user.as_deref(),
            runtime.store.as_ref(),
        )
        .await
    {
        return CallToolResult::error(vec![rmcp::model::ContentBlock::text(message)]);
    }
    let engine = match engine_for(&args, caller.access.profile(), runtime) {
        Ok(engine) => engine,
        Err(message) => {
            return CallToolResult::error(vec![rmcp::model::ContentBlock::text(message)]);
        }
    };
    let profile_limits = caller.access.profile().limits;
    let mut limits = runtime.execution_limits(
        &LimitRequest {
            wall_ms: lowest(
                args.timeout_ms.filter(|&ms| ms > 0),
                profile_limits.timeout_ms,
            ),
            max_tool_calls: profile_limits.max_calls,
            ..LimitRequest::default()
        },
        gateway.backends().as_ref(),
    );
    // Where approvals may be asked, each call says which line of the code makes it.
    limits.report_call_sites =
        !caller.access.profile().approve.is_empty() || gateway.backends().approves_any();
    // Behind a balancer, a stored tool may have been registered through another replica a
    // moment ago: code that could call one reads the store's change mark first (one query).
    if let Some(store) = runtime.store.as_ref().filter(|s| s.is_shared())
        && args.code.contains("user")
    {
        gateway.catch_up_stored_tools(store).await;
    }
    // Wait only for the cold backends the code could be calling: a backend's tools are reached
    // through its name (or the identifier made from it), so code that never mentions it cannot.
    let view = gateway
        .settled_view_for(&caller.access, |backend| {
            args.code.contains(backend)
                || args
                    .code
                    .contains(&sandgate_catalog::sanitize_ident(backend))
        })
        .await;
    let (catalog, bindings) = (view.catalog, view.bindings);
    let route = if args.force_sandbox == Some(true) {
        Route::Sandbox
    } else {
        route(&args.code, &catalog, &bindings)
    };
    let host_functions = Arc::new(granted(&caller.access));
    // The execution's span: the tool calls' parent, under the trace the request came in.
    caller.trace = traces::start_execution(&caller.trace, &id, caller.profile());
    let mut knock = Knock::new(caller.clone(), id.clone());
    knock.asking = asking;
    let caller = &caller;
    let progress = match route {
        Route::Call { .. } => progress.map(ProgressSink::for_single_call),
        _ => progress,
    };
    let bridge = ExecutionBridge::new(gateway.clone(), knock.clone(), None)
        .with_progress(progress)
        .with_detached(detached);
    // On a shared store the execution is on record from its start: a replica that dies
    // leaves a `running` record behind, not silence.
    if let Some(store) = runtime.store.as_ref().filter(|s| s.is_shared()) {
        let tier = match &route {
            Route::Call { tier, .. } => Some(*tier),
            Route::Sandbox => Some(Tier::Sandbox),
            Route::Interface { .. } | Route::BadJson(_) | Route::UnknownTool(_) => None,
        };
        if let Some(tier) = tier {
            store.record(response::running_record(
                &id,
                started_at_ms,
                tier,
                &args.code,
                caller,
            ));
        }
    }
    let mut outcome = match route {
        Route::Call {
            tier,
            index,
            arguments,
            raw,
        } => {
            let Some(binding) = bindings.get(index) else {
                return CallToolResult::error(vec![rmcp::model::ContentBlock::text(
                    "the tool set changed during the call; retry",
                )]);
            };
            direct_call(&bridge, binding, arguments, raw, tier, &limits, cancelled).await
        }
        Route::Interface { index } => Outcome {
            tier: Tier::Introspection,
            value: bindings
                .get(index)
                .map(|b| Value::String(b.declaration.clone())),
            error: None,
            logs: vec![],
            calls: vec![],
            duration_ms: 0.0,
        },
        Route::BadJson(message) => json_error(ErrorKind::Syntax, message),
        Route::UnknownTool(message) => {
            // A tool held as new is in no list; a JSON call to it is answered as held.
            let named = serde_json::from_str::<Value>(args.code.trim())
                .ok()
                .and_then(|v| v.get("tool").and_then(Value::as_str).map(str::to_string));
            match named.and_then(|name| {
                crate::pins::held_by_name(gateway.backends().as_ref(), &knock.caller.access, &name)
            }) {
                Some(held) => json_error(ErrorKind::ToolHeld, held),
                None => json_error(ErrorKind::Runtime, message),
            }
        }
        Route::Sandbox => {
            let execution = Execution {
                code: args.code.clone(),
                tools: bindings.clone(),
                host_functions,
                env: Arc::new(gateway.door().env_values(&knock, &args.code)),
                context: None,
                limits,
                mode: Default::default(),
                engine,
            };
            let result = runtime
                .sandbox
                .run_until(execution, Arc::new(bridge), cancelled)
                .await;
            Outcome {
                tier: Tier::Sandbox,
                value: result.value,
                error: result.error,
                logs: result.logs,
                calls: result.trace,
                duration_ms: 0.0,
            }
        }
    };
    outcome.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    if let Some(error) = outcome.error.as_mut() {
        explain_absent_backend(gateway, &caller.access, error);
        ungranted::explain(gateway, &knock, &gateway.catalog(), &args.code, error);
        if outcome.tier == Tier::Sandbox {
            engine_advice::advise(
                error,
                engine,
                caller.access.profile(),
                runtime.sandbox.has(Engine::V8),
            );
        }
    }
    let status = response::status(&outcome);
    gateway
        .metrics()
        .execution_finished(outcome.tier.as_str(), status, started.elapsed());
    traces::end_execution(
        &caller.trace,
        outcome.tier.as_str(),
        status,
        outcome.error.as_ref().map(|e| e.kind.as_str()),
    );
    let max_chars = args
        .max_output_size
        .filter(|&n| n > 0)
        .unwrap_or(runtime.output.max_chars);
    let observed = gateway.observed();
    let request = response::Request {
        id: &id,
        code: &args.code,
        intent: args.intent.as_deref(),
        max_chars,
        started_at_ms,
        caller,
        observed: &observed,
    };
    let response = response::respond(
        &outcome,
        &request,
        &catalog,
        runtime.store.as_ref(),
        &runtime.output,
    )
    .committed()
    .await;
    gateway.after_large_work(bytes_moved(&outcome), LARGE_WORK_BYTES);
    gateway.execution_finished(FinishedExecution {
        id: id.clone(),
        profile: caller.profile().to_string(),
        user: caller.user.clone(),
        tier: outcome.tier.as_str(),
        status,
        duration_ms: outcome.duration_ms,
        started_at_ms,
        calls: outcome.calls.len(),
    });
    response
}

/// "`x` is not defined", where `x` is a configured backend whose tools are not in the catalog
/// (starting, restarting, failed, disabled): the error is `unavailable`, and says so with its
/// state and when it is tried again, instead of "no backend is named `x`". Only for a backend
/// the caller's grant could reach: to anyone else it is a name that does not exist.
fn explain_absent_backend(
    gateway: &Gateway,
    access: &sandgate_policy::Access,
    error: &mut sandgate_sandbox::ExecError,
) {
    let message = error.message.as_str();
    let message = message.strip_prefix("ReferenceError: ").unwrap_or(message);
    let Some(name) = message.strip_suffix(" is not defined") else {
        return;
    };
    let name = name.trim_matches('`');
    let absent = gateway
        .backends()
        .statuses()
        .into_iter()
        .find(|s| s.name == name || sandgate_catalog::sanitize_ident(&s.name) == name)
        .filter(|s| access.may_reach_backend(&s.name, &sandgate_catalog::sanitize_ident(&s.name)));
    if let Some((message, retry)) =
        absent.and_then(|s| s.unavailability().map(|m| (m, s.retry_in_ms)))
    {
        error.kind = sandgate_sandbox::ErrorKind::Unavailable;
        error.message = message;
        error.hint = Some(match retry {
            Some(ms) => format!(
                "Call call_tool_chain again in {:.1} s, when sandgate tries the backend again; its other backends can be used meanwhile.",
                ms as f64 / 1000.0
            ),
            None => "Call call_tool_chain again in a few seconds; its other backends can be used meanwhile.".into(),
        });
    }
}

/// Roughly how many bytes an execution made the gateway hold: its calls' arguments and
/// results, its logs, and its result.
fn bytes_moved(outcome: &Outcome) -> usize {
    let calls: usize = outcome
        .calls
        .iter()
        .map(|c| c.args_bytes + c.result_bytes)
        .sum();
    let logs: usize = outcome.logs.iter().map(|l| l.message.len()).sum();
    let result = outcome
        .value
        .as_ref()
        .map_or(0, |v| size_up_to(v, LARGE_WORK_BYTES));
    calls + logs + result
}

/// What counts as large work (see `Gateway::after_large_work`).
const LARGE_WORK_BYTES: usize = 1024 * 1024;

/// About how many bytes `value` takes as JSON, counting no further than `limit` (so a large
/// value costs no more to measure than a small one).
fn size_up_to(value: &Value, limit: usize) -> usize {
    let mut size = 0;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        if size >= limit {
            break;
        }
        size += match value {
            Value::String(s) => s.len() + 2,
            Value::Array(items) => {
                pending.extend(items);
                items.len() + 2
            }
            Value::Object(map) => {
                pending.extend(map.values());
                map.keys().map(|k| k.len() + 4).sum::<usize>() + 2
            }
            _ => 8,
        };
    }
    size
}

/// The lower of two optional limits.
fn lowest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `allow_tools` must be patterns over `backend.tool`; they can only narrow.
fn check_allow_tools(patterns: &[String]) -> Result<(), String> {
    match patterns
        .iter()
        .find(|p| !p.contains('.') && p.as_str() != "*")
    {
        Some(bad) => Err(format!(
            "allow_tools has `{bad}`, which names no backend. Write patterns over backend.tool, e.g. [\"memory.read_*\", \"github.get_*\"]; they narrow your profile for this execution and never widen it."
        )),
        None => Ok(()),
    }
}

/// A JSON input that names no callable tool.
fn json_error(kind: ErrorKind, message: String) -> Outcome {
    Outcome {
        tier: Tier::Json,
        value: None,
        error: Some(ExecError {
            kind,
            message,
            line: None,
            column: None,
            hint: Some("Use search_tools to find the tool's qualified name, or write TypeScript: `return await backend.tool({...})`.".into()),
        }),
        logs: vec![],
        calls: vec![],
        duration_ms: 0.0,
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
    let qualified = format!("{}.{}", binding.backend, binding.name);
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
