//! One `call_tool_chain` execution from start to answer, in three steps: `admit` (what the
//! request asks for, the caller's rate, the engine and limits), `execute` (the route in the
//! caller's view: a direct call, a declaration, or the sandbox) and `finish` (the failure
//! explained, the execution counted, recorded and shaped for the model).

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::CallToolResult;
use sandgate_sandbox::{Engine, ErrorKind, ExecError, Execution, Fault, LimitRequest, Limits};
use serde_json::Value;

use super::route::{Route, route};
use super::{
    ChainArgs, Outcome, Tier, bounds, direct_call, engine_advice, sandbox_engine, ungranted,
};
use crate::approvals::Asking;
use crate::bridge::ExecutionBridge;
use crate::caller::Caller;
use crate::chain::response;
use crate::door::{Knock, granted};
use crate::gateway::{FinishedExecution, Gateway};
use crate::progress::ProgressSink;
use crate::runtime::{Cancellation, ChainRuntime};
use crate::telemetry::traces;

/// The engine an execution runs on: what the call asked for, where its profile lets it
/// choose, else the profile's, else the sandbox's default; a clear error for a name that is no
/// engine, a choice the profile does not allow, or an engine this gateway did not start.
fn engine_for(
    args: &ChainArgs,
    profile: &sandgate_policy::Profile,
    runtime: &ChainRuntime,
) -> Result<Engine, String> {
    let python = args.language()? == super::Language::Python;
    profile.languages.allow(python, &profile.key)?;
    if python {
        if args.engine.is_some() {
            return Err(
                "`engine` chooses a JavaScript engine; Python runs on Monty: leave `engine` out"
                    .into(),
            );
        }
        if !runtime.sandbox.has(Engine::Monty) {
            return Err("Python is not running in this gateway: send the code as TypeScript, or ask the operator to turn it on ([sandbox] python, docs/config.md)".into());
        }
        return Ok(Engine::Monty);
    }
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

/// Where one execution sits: its id, its detached entry when it outlives its request, and how
/// its calls ask a person for approval.
pub(super) struct Seat {
    pub(super) id: String,
    pub(super) detached: Option<Arc<crate::detached::Detached>>,
    pub(super) asking: Asking,
}

/// Runs execution `seat.id` of `call_tool_chain`: admitted, executed on its route, and
/// finished (explained, counted, recorded and answered); a detached one also shows what it
/// does to its entry as it goes.
pub(super) async fn run(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: ChainArgs,
    progress: Option<ProgressSink>,
    cancel: &Cancellation,
    seat: Seat,
) -> CallToolResult {
    let _running = gateway.execution_started();
    let started = Started {
        at: Instant::now(),
        at_ms: sandgate_store::now_ms(),
    };
    let admitted = match admit(gateway, caller, &args).await {
        Ok(admitted) => admitted,
        Err(message) => return refused(message),
    };
    let cancelled = async {
        tokio::select! {
            () = cancel.cancelled() => {}
            () = gateway.stopping() => {}
        }
    };
    let executed = match execute(
        gateway, &args, admitted, progress, cancelled, seat, &started,
    )
    .await
    {
        Ok(executed) => executed,
        Err(message) => return refused(message),
    };
    finish(gateway, &args, executed, &started).await
}

/// A `call_tool_chain` answer that refuses the execution before any of its code ran.
fn refused(message: String) -> CallToolResult {
    CallToolResult::error(vec![rmcp::model::ContentBlock::text(message)])
}

/// When an execution started.
struct Started {
    at: Instant,
    at_ms: i64,
}

/// An execution the gateway agreed to run: who runs it (narrowed by `allow_tools`), on what
/// engine, with what limits.
struct Admitted<'g> {
    runtime: &'g ChainRuntime,
    caller: Caller,
    engine: Engine,
    limits: Limits,
}

/// Checks what the request asks for and the caller's execution rate: the execution as it will
/// run, or what to tell the caller instead.
async fn admit<'g>(
    gateway: &'g Gateway,
    caller: &Caller,
    args: &ChainArgs,
) -> Result<Admitted<'g>, String> {
    if let Some(intent) = args.intent.as_deref() {
        bounds::short_text("intent", intent)?;
    }
    let Some(runtime) = gateway.chain() else {
        return Err(
            "call_tool_chain is not available: this gateway was started without a sandbox.".into(),
        );
    };
    let mut caller = caller.clone();
    if let Some(allow) = args.allow_tools.clone() {
        check_allow_tools(&allow)?;
        caller.access = caller.access.narrowed_to(allow);
    }
    gateway
        .admission()
        .admit_execution(
            caller.access.profile(),
            caller.user(),
            runtime.store.as_ref(),
        )
        .await?;
    let engine = engine_for(args, caller.access.profile(), runtime)?;
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
    Ok(Admitted {
        runtime,
        caller,
        engine,
        limits,
    })
}

/// What an execution did, with what it ran against.
struct Executed<'g> {
    runtime: &'g ChainRuntime,
    id: String,
    knock: Knock,
    engine: Engine,
    catalog: Arc<sandgate_catalog::Catalog>,
    outcome: Outcome,
}

/// Runs an admitted execution on its route (a direct call, a declaration, the sandbox) in the
/// caller's view: what it did, or what to tell the caller when the tool set changed under it.
async fn execute<'g>(
    gateway: &Arc<Gateway>,
    args: &ChainArgs,
    admitted: Admitted<'g>,
    progress: Option<ProgressSink>,
    cancelled: impl Future<Output = ()> + Send,
    seat: Seat,
    started: &Started,
) -> Result<Executed<'g>, String> {
    let Admitted {
        runtime,
        mut caller,
        engine,
        limits,
    } = admitted;
    let Seat {
        id,
        detached,
        asking,
    } = seat;
    // Behind a balancer, a stored tool may have been registered through another replica a
    // moment ago: code that could call one reads the store's change mark first (one query).
    if let Some(store) = runtime.store.as_ref().filter(|s| s.is_shared())
        && args.code.contains(crate::stored::BACKEND)
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
    let route = route_for(args, engine, &catalog, &bindings);
    // The execution's span: the tool calls' parent, under the trace the request came in.
    caller.trace = traces::start_execution(&caller.trace, &id, caller.profile());
    let mut knock = Knock::new(caller.clone(), id.clone());
    knock.asking = asking;
    record_start(runtime, &route, &id, started, &args.code, &caller);
    // A script a person must approve waits here, before any of its code runs.
    let max_code = limits.max_code_bytes;
    let script = super::script_approval::Script {
        code: &args.code,
        python: engine == Engine::Monty,
    };
    let approved = super::script_approval::approve_script(
        gateway, &mut knock, script, &route, &catalog, &bindings, max_code,
    );
    let mut cancelled = std::pin::pin!(cancelled);
    let approved = tokio::select! {
        approved = approved => approved,
        () = &mut cancelled => Err(Outcome::failed(Tier::Sandbox, sandgate_sandbox::direct::cancelled_error())),
    };
    let outcome = match approved {
        Err(denied) => denied,
        Ok(()) => {
            let ran = Ran {
                knock: &knock,
                catalog: &catalog,
                bindings: &bindings,
                limits,
                engine,
                detached,
            };
            run_route(gateway, runtime, args, route, ran, progress, &mut cancelled).await?
        }
    };
    Ok(Executed {
        runtime,
        id,
        knock,
        engine,
        catalog,
        outcome,
    })
}

/// What an approved execution runs with.
struct Ran<'a> {
    knock: &'a Knock,
    catalog: &'a Arc<sandgate_catalog::Catalog>,
    bindings: &'a Arc<Vec<sandgate_sandbox::ToolBinding>>,
    limits: Limits,
    engine: Engine,
    detached: Option<Arc<crate::detached::Detached>>,
}

/// Runs an execution on `route`: a direct call, a declaration, or the sandbox.
async fn run_route(
    gateway: &Arc<Gateway>,
    runtime: &ChainRuntime,
    args: &ChainArgs,
    route: Route,
    ran: Ran<'_>,
    progress: Option<ProgressSink>,
    cancelled: impl Future<Output = ()> + Send,
) -> Result<Outcome, String> {
    let Ran {
        knock,
        catalog,
        bindings,
        limits,
        engine,
        detached,
    } = ran;
    let caller = &knock.caller;
    let progress = match route {
        Route::Call { .. } => progress.map(ProgressSink::for_single_call),
        _ => progress,
    };
    let bridge = ExecutionBridge::new(gateway.door().clone(), catalog.clone(), knock.clone(), None)
        .with_progress(progress)
        .with_detached(detached);
    Ok(match route {
        Route::Call {
            tier,
            index,
            arguments,
            raw,
        } => {
            let Some(binding) = bindings.get(index) else {
                return Err("the tool set changed during the call; retry".into());
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
        Route::BadJson(message) => json_error(ErrorKind::Syntax, message, None),
        Route::UnknownTool { message, absent } => {
            unknown_tool(gateway, knock, args, message, absent)
        }
        Route::Sandbox => {
            let execution = Execution {
                code: args.code.clone(),
                tools: bindings.clone(),
                host_functions: Arc::new(granted(&caller.access)),
                env: Arc::new(gateway.door().env_values(knock, &args.code)),
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
    })
}

/// The route of `args`' code: the sandbox when the call forces it; for Python, a JSON call's
/// tier (answered as for TypeScript, whatever the language) and else the sandbox, since Python
/// has no other shortcut yet; for TypeScript, the cheapest route that gives the same answer.
fn route_for(
    args: &ChainArgs,
    engine: Engine,
    catalog: &sandgate_catalog::Catalog,
    bindings: &[sandgate_sandbox::ToolBinding],
) -> Route {
    let json_call = || {
        serde_json::from_str::<Value>(args.code.trim())
            .is_ok_and(|v| v.as_object().is_some_and(|o| o.contains_key("tool")))
    };
    if args.force_sandbox == Some(true) || (engine == Engine::Monty && !json_call()) {
        Route::Sandbox
    } else {
        route(&args.code, catalog, bindings)
    }
}

/// On a shared store the execution is on record from its start: a replica that dies leaves a
/// `running` record behind, not silence.
fn record_start(
    runtime: &ChainRuntime,
    route: &Route,
    id: &str,
    started: &Started,
    code: &str,
    caller: &Caller,
) {
    let Some(store) = runtime.store.as_ref().filter(|s| s.is_shared()) else {
        return;
    };
    let tier = match route {
        Route::Call { tier, .. } => *tier,
        Route::Sandbox => Tier::Sandbox,
        Route::Interface { .. } | Route::BadJson(_) | Route::UnknownTool { .. } => return,
    };
    store.record(response::running_record(
        id,
        started.at_ms,
        tier,
        code,
        caller,
    ));
}

/// A JSON call to a tool that is not in the caller's view: a tool held as new is in no list,
/// and is answered as held; any other, with what the catalog said.
fn unknown_tool(
    gateway: &Gateway,
    knock: &Knock,
    args: &ChainArgs,
    message: String,
    absent: Option<Fault>,
) -> Outcome {
    let named = serde_json::from_str::<Value>(args.code.trim())
        .ok()
        .and_then(|v| v.get("tool").and_then(Value::as_str).map(str::to_string));
    match named.and_then(|name| {
        crate::pins::held_by_name(gateway.backends().as_ref(), &knock.caller.access, &name)
    }) {
        Some(held) => json_error(ErrorKind::ToolHeld, held, None),
        None => json_error(ErrorKind::Runtime, message, absent),
    }
}

/// Explains the failure, counts and traces the execution, records it, and shapes the answer.
async fn finish(
    gateway: &Arc<Gateway>,
    args: &ChainArgs,
    executed: Executed<'_>,
    started: &Started,
) -> CallToolResult {
    let Executed {
        runtime,
        id,
        knock,
        engine,
        catalog,
        mut outcome,
    } = executed;
    let caller = &knock.caller;
    outcome.duration_ms = started.at.elapsed().as_secs_f64() * 1000.0;
    if let Some(error) = outcome.error.as_mut() {
        explain_absent_backend(gateway, &caller.access, error);
        ungranted::explain(gateway, &knock, &gateway.catalog(), &args.code, error);
        // A Python `KeyError` on a tool's result names the keys its type has.
        if let Some(sandgate_sandbox::Fault::MissingKey { key }) = &error.fault
            && let Some(hint) =
                super::missing_key::hint(&args.code, key, &catalog, &gateway.observed())
        {
            error.hint = Some(hint);
        }
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
        .execution_finished(outcome.tier.as_str(), status, started.at.elapsed());
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
        started_at_ms: started.at_ms,
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
        user: caller.user().map(str::to_string),
        tier: outcome.tier.as_str(),
        status,
        duration_ms: outcome.duration_ms,
        started_at_ms: started.at_ms,
        calls: outcome.calls.len(),
    });
    response
}

/// A `NotDefined` fault for `x`, where `x` is a configured backend whose tools are not in the catalog
/// (starting, restarting, failed, disabled): the error is `unavailable`, and says so with its
/// state and when it is tried again, instead of "no backend is named `x`". Only for a backend
/// the caller's grant could reach: to anyone else it is a name that does not exist.
fn explain_absent_backend(
    gateway: &Gateway,
    access: &sandgate_policy::Access,
    error: &mut sandgate_sandbox::ExecError,
) {
    let Some(name) = error
        .fault
        .as_ref()
        .and_then(sandgate_sandbox::Fault::undefined_name)
    else {
        return;
    };
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
fn json_error(kind: ErrorKind, message: String, fault: Option<Fault>) -> Outcome {
    Outcome::failed(
        Tier::Json,
        ExecError {
            kind,
            message,
            line: None,
            column: None,
            hint: Some("Use search_tools to find the tool's qualified name, or write TypeScript: `return await backend.tool({...})`.".into()),
            fault,
        },
    )
}
