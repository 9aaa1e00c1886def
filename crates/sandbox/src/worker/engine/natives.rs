//! The native functions the preamble receives: the bridge to the host (calls, logs), timers,
//! randomness and URL parsing. They are handed to the preamble as arguments, never put on the
//! global object, so guest code can reach them only through the functions the preamble built.
//! Every one enforces its limit here, in Rust, not in JavaScript the guest could tamper with.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rquickjs::prelude::Opt;
use rquickjs::{Array, Ctx, Exception, Function, Object, Persistent, Promise, Value};

use super::{RunRequest, Shared};
use crate::wire::limits::LOG_LINE_OVERHEAD_BYTES;
use crate::wire::protocol::{Callee, FailureKind, WorkerFrame};

/// Runs the first, ahead-of-time step of the preamble with every native, in a fresh context.
/// Returns the preamble's `bind` function for the execution to call.
pub(crate) fn prepare<'js>(
    ctx: &Ctx<'js>,
    state: &Shared,
    preamble: Function<'js>,
) -> rquickjs::Result<Function<'js>> {
    let natives = Object::new(ctx.clone())?;
    natives.set("call", bridge(ctx, state, Callee::Tool)?)?;
    natives.set("callHost", bridge(ctx, state, Callee::Host)?)?;
    let s = state.clone();
    natives.set(
        "lastCallId",
        Function::new(ctx.clone(), move || s.borrow().last_call_id as f64)?,
    )?;
    let s = state.clone();
    natives.set(
        "cancelCall",
        Function::new(ctx.clone(), move |id: f64| cancel_call(&s, id as u64))?,
    )?;
    let s = state.clone();
    natives.set(
        "toolsOf",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, backend: u32| {
            tools_of(&ctx, &s, backend)
        })?,
    )?;
    let s = state.clone();
    natives.set(
        "declarationOf",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, index: u32| {
            declaration_of(&ctx, &s, index)
        })?,
    )?;
    let s = state.clone();
    natives.set(
        "log",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, level: Value<'js>, message: Value<'js>| {
                log(&ctx, &s, level, message)
            },
        )?,
    )?;
    let s = state.clone();
    natives.set(
        "setTimer",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, ms: f64, callback: Function<'js>| {
                set_timer(&ctx, &s, ms, callback)
            },
        )?,
    )?;
    let s = state.clone();
    natives.set(
        "clearTimer",
        Function::new(ctx.clone(), move |id: f64| clear_timer(&s, id as u64))?,
    )?;
    natives.set(
        "randomBytes",
        Function::new(ctx.clone(), |ctx: Ctx<'js>, n: usize| random_bytes(&ctx, n))?,
    )?;
    natives.set(
        "loadWeb",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, natives: Object<'js>| -> rquickjs::Result<Value<'js>> {
                super::bytecode::web(&ctx)?.call((natives,))
            },
        )?,
    )?;
    natives.set(
        "loadLocale",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>| -> rquickjs::Result<Value<'js>> {
                super::bytecode::locale(&ctx)?.call(())
            },
        )?,
    )?;
    natives.set(
        "monotonic",
        Function::new(ctx.clone(), monotonic_ms)?,
    )?;
    natives.set(
        "parseUrl",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, href: String, base: Option<String>| {
                parse_url(&ctx, &href, base.as_deref())
            },
        )?,
    )?;
    let s = state.clone();
    let random = Function::new(ctx.clone(), move || next_random(&s))?.with_name("random")?;
    // An assignment keeps the builtin's attributes (writable, configurable, not enumerable).
    ctx.globals()
        .get::<_, Object>("Math")?
        .set("random", random)?;
    preamble.call((natives,))
}

/// Milliseconds on a clock that only goes forward (from when this worker first asked): what
/// `performance.now()` counts from.
fn monotonic_ms() -> f64 {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN
        .get_or_init(Instant::now)
        .elapsed()
        .as_secs_f64()
        * 1000.0
}

/// `Math.random`: xorshift64* over the execution's OS-seeded state, 53 bits per number.
fn next_random(state: &Shared) -> f64 {
    let mut s = state.borrow_mut();
    let mut x = s.random;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s.random = x;
    (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
}

/// The second step: gives the guest the execution's backends (as `[name, identifier]`
/// pairs; their tools are bound when code first touches them), host functions and context.
pub(crate) fn bind<'js>(
    ctx: &Ctx<'js>,
    request: &RunRequest,
    bind: Function<'js>,
) -> rquickjs::Result<()> {
    let backends = Array::new(ctx.clone())?;
    for (i, backend) in request.tools.backends.iter().enumerate() {
        let pair = Array::new(ctx.clone())?;
        pair.set(0, backend.name.as_str())?;
        pair.set(1, backend.js.as_str())?;
        backends.set(i, pair)?;
    }
    let host_functions = ctx.json_parse(
        serde_json::to_string(&request.host_functions).unwrap_or_else(|_| "[]".into()),
    )?;
    let context: Value = match &request.context {
        Some(value) => ctx.json_parse(value.to_string())?,
        None => Value::new_undefined(ctx.clone()),
    };
    let tool_mode = request.mode == crate::wire::protocol::RunMode::Tool;
    let env: Value = if request.env.is_empty() {
        Value::new_undefined(ctx.clone())
    } else {
        let values = rquickjs::Object::new(ctx.clone())?;
        for (name, value) in &request.env {
            match value {
                Some(value) => values.set(name.as_str(), value.as_str())?,
                None => values.set(name.as_str(), Value::new_null(ctx.clone()))?,
            }
        }
        values.into_value()
    };
    bind.call::<_, ()>((backends, host_functions, context, tool_mode, env))
}

/// `toolsOf(backend)`: the backend's tools as `[index, name, identifier]` triples, for the
/// preamble to build the backend's object the first time code touches it.
fn tools_of<'js>(ctx: &Ctx<'js>, state: &Shared, backend: u32) -> rquickjs::Result<Array<'js>> {
    let list = Array::new(ctx.clone())?;
    let set = state.borrow().tools.clone();
    let Some(set) = set else { return Ok(list) };
    let Some(backend) = set.backends.get(backend as usize) else {
        return Ok(list);
    };
    for (i, &index) in backend.tools.iter().enumerate() {
        let Some(tool) = set.bindings.get(index as usize) else {
            continue;
        };
        let triple = Array::new(ctx.clone())?;
        triple.set(0, index)?;
        triple.set(1, tool.name.as_str())?;
        triple.set(2, tool.js_tool.as_str())?;
        list.set(i, triple)?;
    }
    Ok(list)
}

/// `declarationOf(index)`: a tool's TypeScript declaration, for `__interfaces`.
fn declaration_of<'js>(
    ctx: &Ctx<'js>,
    state: &Shared,
    index: u32,
) -> rquickjs::Result<rquickjs::String<'js>> {
    let set = state.borrow().tools.clone();
    let text = set
        .as_ref()
        .and_then(|set| set.bindings.get(index as usize))
        .map_or("", |tool| tool.declaration.as_str());
    rquickjs::String::from_str(ctx.clone(), text)
}

/// A native that starts a call: counts it against the limit, queues it, returns a promise.
/// `site` is an Error made where the call started; `map`, if given, turns the parsed reply
/// into the promise's value (or throws to reject it) when the reply comes, so mapping a
/// result costs no promise reaction of its own.
fn bridge<'js>(
    ctx: &Ctx<'js>,
    state: &Shared,
    callee: fn(u32) -> Callee,
) -> rquickjs::Result<Function<'js>> {
    let s = state.clone();
    Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>,
              index: u32,
              args: String,
              site: Opt<Value<'js>>,
              map: Opt<Value<'js>>|
              -> rquickjs::Result<Promise<'js>> {
            let count = match callee(0) {
                Callee::Tool(_) => s.borrow().tool_count,
                Callee::Host(_) => s.borrow().host_count,
            };
            if index as usize >= count {
                return Err(Exception::throw_range(&ctx, "no such callable"));
            }
            // Read before the state is borrowed: reading the site's stack is a property get.
            let at = match callee(index) {
                Callee::Tool(_) if s.borrow().limits.report_call_sites => {
                    site.0.as_ref().and_then(call_site)
                }
                _ => None,
            };
            let mut st = s.borrow_mut();
            if st.calls_made >= st.limits.max_tool_calls {
                let limit = st.limits.max_tool_calls;
                drop(st);
                return Err(Exception::throw_range(
                    &ctx,
                    &format!(
                        "tool call limit reached: an execution may make at most {limit} calls"
                    ),
                ));
            }
            st.calls_made += 1;
            // JSON.stringify escaped any lone surrogate; every tier sends U+FFFD instead.
            let args = crate::wire::encoding::into_well_formed_json(args);
            if let Some((kind, message)) = refusal(&st, callee(index), args.len()) {
                drop(st);
                let (promise, _, reject) = Promise::new(&ctx)?;
                let error = error_object(&ctx, kind, &message, site.0)?;
                reject.call::<_, ()>((error,))?;
                return Ok(promise);
            }
            let args_bytes = args.len();
            st.pending_args_bytes += args_bytes;
            // Unique across every run of this worker, so a late reply to a finished run can
            // never settle a call of the next one.
            let id = super::next_call_id();
            let (promise, resolve, reject) = Promise::new(&ctx)?;
            st.pending.insert(
                id,
                super::Settlers {
                    args_bytes,
                    resolve: Persistent::save(&ctx, resolve),
                    reject: Persistent::save(&ctx, reject),
                    site: site.0.map(|site| Persistent::save(&ctx, site)),
                    map: map
                        .0
                        .and_then(|map| map.into_function())
                        .map(|map| Persistent::save(&ctx, map)),
                },
            );
            st.queued.push_back((id, callee(index), args, at));
            st.last_call_id = id;
            Ok(promise)
        },
    )
}

/// Where in the wrapped script a call was made: the first frame of the user's file in the
/// stack of `site`, the Error made where the call started.
fn call_site(site: &Value<'_>) -> Option<(u32, u32)> {
    let stack: String = site.as_object()?.get("stack").ok()?;
    let marker = format!("({}:", super::USER_FILE);
    stack.lines().find_map(|frame| {
        let at = frame.find(&marker)? + marker.len();
        let (line, column) = frame[at..].trim_end().strip_suffix(')')?.split_once(':')?;
        Some((line.parse().ok()?, column.parse().ok()?))
    })
}

/// `cancelCall(id)`: the guest's `AbortSignal` aborted call `id`. Its promise is never settled
/// (the preamble rejects the caller's with the signal's reason); a call that waits for a slot
/// never leaves, and one in flight is dropped by the host, which cancels it upstream.
fn cancel_call(state: &Shared, id: u64) {
    let mut s = state.borrow_mut();
    let Some(settlers) = s.pending.remove(&id) else {
        return;
    };
    s.pending_args_bytes = s.pending_args_bytes.saturating_sub(settlers.args_bytes);
    if let Some(at) = s.queued.iter().position(|(queued, ..)| *queued == id) {
        s.queued.remove(at);
    } else {
        s.in_flight = s.in_flight.saturating_sub(1);
        let run = s.run;
        s.outbox.push(WorkerFrame::CancelCall { run, id });
    }
}

/// Why a call must not leave the worker, if it must not: its arguments are over the per-call
/// limit, or they would take the execution past its memory limit. Arguments of calls that wait
/// for a slot or for their reply live outside the JavaScript heap (here and on the host), so
/// they count against the same budget as the heap.
fn refusal(
    state: &super::LoopState,
    callee: Callee,
    bytes: usize,
) -> Option<(FailureKind, String)> {
    let limits = &state.limits;
    if bytes > limits.max_call_args_bytes {
        let name = match callee {
            Callee::Tool(i) => state
                .tools
                .as_ref()
                .and_then(|set| set.bindings.get(i as usize))
                .map_or_else(
                    || "this call".to_string(),
                    |t| format!("{}.{}", t.backend, t.name),
                ),
            Callee::Host(_) => "this host function".to_string(),
        };
        let message =
            crate::wire::errors::arguments_too_large(&name, bytes, limits.max_call_args_bytes);
        return Some((FailureKind::Failed, message));
    }
    let held = state.pending_args_bytes + bytes + state.heap.get();
    if held > limits.memory_bytes {
        return Some((
            FailureKind::Memory,
            format!(
                "out of memory: the arguments of this execution's waiting calls ({} bytes, this one included) and its heap would pass its {} MiB limit",
                state.pending_args_bytes + bytes,
                limits.memory_bytes >> 20
            ),
        ));
    }
    None
}

/// Log lines kept from the end once the limits are reached, sent after a marker when the run
/// ends: the last lines are often the ones that explain a failure.
const TAIL_LINES: usize = 20;
/// Bytes of those lines kept at most, and of any one of them.
const TAIL_BYTES: usize = 8 * 1024;
const TAIL_LINE_BYTES: usize = 2 * 1024;

/// What the log limits dropped, and the last lines, kept for the end of the run.
#[derive(Default)]
pub(crate) struct DroppedLogs {
    lines: u64,
    bytes: u64,
    tail: VecDeque<(String, String)>,
    tail_bytes: usize,
}

/// `console.*`: each line costs its bytes plus `LOG_LINE_OVERHEAD_BYTES` (so empty lines count)
/// against the byte limit, and one against the line limit. Past either limit, lines are
/// counted and only the last few are kept.
fn log<'js>(ctx: &Ctx<'js>, state: &Shared, level: Value<'js>, message: Value<'js>) {
    let level = match super::strings::lossy(ctx, &level).as_deref() {
        Some(level @ ("log" | "info" | "warn" | "error" | "debug")) => level.to_string(),
        _ => "log".to_string(),
    };
    let message = super::strings::lossy(ctx, &message).unwrap_or_default();
    let mut s = state.borrow_mut();
    let cost = message.len() + LOG_LINE_OVERHEAD_BYTES;
    let within = s.dropped_logs.lines == 0
        && s.log_lines < s.limits.max_log_lines
        && s.log_bytes + cost <= s.limits.max_log_bytes;
    if within {
        s.log_lines += 1;
        s.log_bytes += cost;
        let run = s.run;
        send_now(
            &s,
            WorkerFrame::Log {
                run,
                level,
                message,
            },
        );
        return;
    }
    let dropped = &mut s.dropped_logs;
    dropped.lines += 1;
    dropped.bytes += message.len() as u64;
    let kept = crate::wire::encoding::head_and_tail(&message, TAIL_LINE_BYTES).into_owned();
    dropped.tail_bytes += kept.len();
    dropped.tail.push_back((level, kept));
    while dropped.tail.len() > TAIL_LINES || dropped.tail_bytes > TAIL_BYTES {
        match dropped.tail.pop_front() {
            Some((_, line)) => dropped.tail_bytes -= line.len(),
            None => break,
        }
    }
}

/// At the end of a run whose logs passed a limit: a marker saying what was dropped, then the
/// last lines.
pub(crate) fn send_dropped_logs(state: &Shared, link: &super::SharedLink) {
    let (dropped, limits, run) = {
        let mut s = state.borrow_mut();
        (std::mem::take(&mut s.dropped_logs), s.limits, s.run)
    };
    if dropped.lines == 0 {
        return;
    }
    let shown = dropped.tail.len() as u64;
    let mut frames = vec![WorkerFrame::Log {
        run,
        level: "warn".into(),
        message: format!(
            "[{} log lines ({} bytes) past the log limits ({} lines, {} bytes) were dropped; the last {shown} follow]",
            dropped.lines - shown,
            dropped.bytes,
            limits.max_log_lines,
            limits.max_log_bytes
        ),
    }];
    frames.extend(
        dropped
            .tail
            .into_iter()
            .map(|(level, message)| WorkerFrame::Log {
                run,
                level,
                message,
            }),
    );
    let _ = link.borrow_mut().send_all(&frames);
}

/// Sends a frame immediately, so the host has it even if the run is killed later.
fn send_now(state: &super::LoopState, frame: WorkerFrame) {
    if let Some(link) = &state.link
        && let Ok(mut link) = link.try_borrow_mut()
    {
        let _ = link.send(&frame);
    }
}

fn set_timer<'js>(
    ctx: &Ctx<'js>,
    state: &Shared,
    ms: f64,
    callback: Function<'js>,
) -> rquickjs::Result<f64> {
    let mut s = state.borrow_mut();
    if s.timers.len() as u32 >= s.limits.max_timers {
        let limit = s.limits.max_timers;
        drop(s);
        return Err(Exception::throw_range(
            ctx,
            &format!("too many pending timers (limit {limit})"),
        ));
    }
    // Numbered per run (the state is fresh for every execution), so a run cannot learn from
    // its timer ids how many timers earlier runs on this worker made.
    s.timers_made += 1;
    let id = s.timers_made;
    let delay = if ms.is_finite() {
        Duration::from_secs_f64((ms / 1000.0).clamp(0.0, 86_400.0))
    } else {
        Duration::ZERO
    };
    let due = Instant::now() + delay;
    s.timers.insert((due, id), Persistent::save(ctx, callback));
    s.timer_ids.insert(id, due);
    Ok(id as f64)
}

fn clear_timer(state: &Shared, id: u64) {
    let mut s = state.borrow_mut();
    if let Some(due) = s.timer_ids.remove(&id) {
        s.timers.remove(&(due, id));
    }
}

fn random_bytes<'js>(ctx: &Ctx<'js>, n: usize) -> rquickjs::Result<Vec<u8>> {
    let mut bytes = vec![0u8; n.min(65_536)];
    getrandom::fill(&mut bytes)
        .map_err(|e| Exception::throw_internal(ctx, &format!("no randomness available: {e}")))?;
    Ok(bytes)
}

fn parse_url<'js>(ctx: &Ctx<'js>, href: &str, base: Option<&str>) -> rquickjs::Result<Object<'js>> {
    let parsed = match base {
        Some(base) => url::Url::parse(base).and_then(|b| b.join(href)),
        None => url::Url::parse(href),
    }
    .map_err(|e| Exception::throw_type(ctx, &format!("Invalid URL {href:?}: {e}")))?;
    let parts = Object::new(ctx.clone())?;
    let port = parsed.port().map(|p| p.to_string()).unwrap_or_default();
    let hostname = parsed.host_str().unwrap_or("").to_string();
    let host = if port.is_empty() {
        hostname.clone()
    } else {
        format!("{hostname}:{port}")
    };
    parts.set("href", parsed.as_str())?;
    parts.set("origin", parsed.origin().ascii_serialization())?;
    parts.set("protocol", format!("{}:", parsed.scheme()))?;
    parts.set("username", parsed.username())?;
    parts.set("password", parsed.password().unwrap_or(""))?;
    parts.set("host", host)?;
    parts.set("hostname", hostname)?;
    parts.set("port", port)?;
    parts.set("pathname", parsed.path())?;
    parts.set(
        "search",
        parsed.query().map(|q| format!("?{q}")).unwrap_or_default(),
    )?;
    parts.set(
        "hash",
        parsed
            .fragment()
            .map(|f| format!("#{f}"))
            .unwrap_or_default(),
    )?;
    Ok(parts)
}

/// The Error a failed call rejects with. `site` is an Error made where the call started: its
/// stack becomes the non-enumerable `callerStack`, so the host can point at the user's line
/// even though the rejection arrives after an `await` has lost the caller's frames.
pub(crate) fn error_object<'js>(
    ctx: &Ctx<'js>,
    kind: FailureKind,
    message: &str,
    site: Option<Value<'js>>,
) -> rquickjs::Result<Value<'js>> {
    let error = Exception::from_message(ctx.clone(), message)?;
    let error: &Object = error.as_object();
    error.set("name", kind.error_name())?;
    error.set("kind", kind.as_str())?;
    if kind == FailureKind::ApprovalDenied {
        // An instance of the guest's own class, so `e instanceof ApprovalDenied` holds.
        let class: Option<Object> = ctx.globals().get("ApprovalDenied").ok();
        if let Some(prototype) = class.and_then(|c| c.get::<_, Object>("prototype").ok()) {
            error.set_prototype(Some(&prototype))?;
        }
    }
    let site_stack = site
        .and_then(|site| site.into_object())
        .and_then(|site| site.get::<_, Option<String>>("stack").ok().flatten());
    if let Some(stack) = site_stack {
        error.prop(
            "callerStack",
            rquickjs::object::Property::from(stack).configurable(),
        )?;
    }
    Ok(error.clone().into_value())
}
