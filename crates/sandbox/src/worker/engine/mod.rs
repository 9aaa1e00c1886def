//! The engine: one execution in a fresh QuickJS runtime, inside the worker process.
//!
//! Each run gets a new `Runtime` and `Context` (limits apply per runtime), the preamble, and the
//! user's wrapped script. A small synchronous event loop then drives it: run pending jobs, send
//! calls the guest made, and block on the host link until a reply arrives or a timer is due.
//! The wall deadline is enforced twice: by the QuickJS interrupt handler (which stops CPU-bound
//! code, even after `await` and inside `try`/`catch`) and by the loop's waits.

mod bytecode;
mod fault;
mod heap;
mod natives;
pub mod snapshot;
pub(crate) mod sources;
pub mod steps;
mod strings;
mod tool_set;

pub use bytecode::warm_up;
pub use tool_set::{BackendTools, ToolSet};

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rquickjs::{
    CatchResultExt, CaughtError, Context, Ctx, Function, Object, Persistent, Promise, Runtime,
    Value,
};

use crate::wire::limits::Limits;
use crate::wire::protocol::{
    CallFailure, Callee, ErrorKind, FailureKind, GuestError, HostFrame, RunStats, WorkerFrame,
};

/// Bytes an execution may allocate before QuickJS first collects garbage (a quarter of a
/// smaller heap limit).
const GC_HEADROOM_BYTES: usize = 1024 * 1024;

/// Filename QuickJS reports for the user's code in stack traces.
pub const USER_FILE: &str = "code.js";

/// The worker's connection to the host, shared by the loop and the natives (logs are sent the
/// moment they are written, so a run that is killed still reports them).
pub type SharedLink = Rc<RefCell<dyn Link>>;

/// The worker's connection to the host.
pub trait Link {
    /// Sends a frame.
    fn send(&mut self, frame: &WorkerFrame) -> std::io::Result<()>;
    /// Sends several frames; a link may write them in one go.
    fn send_all(&mut self, frames: &[WorkerFrame]) -> std::io::Result<()> {
        frames.iter().try_for_each(|frame| self.send(frame))
    }
    /// Waits up to `timeout` for a frame; `Ok(None)` on timeout.
    fn recv(&mut self, timeout: Duration) -> std::io::Result<Option<HostFrame>>;
    /// How long to poll for input before sleeping (a link that cannot poll ignores it).
    fn set_reply_spin(&mut self, _spin: Duration) {}
}

/// One run's request.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// Wrapped JavaScript.
    pub js: String,
    /// Callable tools (shared: the worker keeps the set for the runs after this one).
    pub tools: Arc<ToolSet>,
    /// Host function names.
    pub host_functions: Vec<String>,
    /// Granted environment variables' values.
    pub env: Vec<(String, Option<String>)>,
    /// The `context` global.
    pub context: Option<serde_json::Value>,
    /// Limits.
    pub limits: Limits,
    /// Script or stored tool (how the preamble binds tools and capabilities).
    pub mode: crate::wire::protocol::RunMode,
}

/// A call waiting for a concurrency slot: its id, what it calls, its arguments' JSON, and where
/// in the wrapped script it was made (when the run reports call sites).
pub(crate) type QueuedCall = (u64, Callee, String, Option<(u32, u32)>);

/// Mutable state shared between the loop and the native functions.
#[derive(Default)]
pub(crate) struct LoopState {
    /// The run this runtime serves, as the host numbered it (every frame names it).
    pub run: u64,
    /// When the run's wall time is up.
    pub deadline: Option<Instant>,
    /// The promise of the user's code: settled, the run is done.
    pub promise: Option<Persistent<Promise<'static>>>,
    pub calls_made: u32,
    /// The id of the call started last (for the preamble to abort it by its signal).
    pub last_call_id: u64,
    /// How many tools and host functions this execution may call (by index).
    pub tool_count: usize,
    pub host_count: usize,
    /// The execution's tools, for the natives that bind a backend when code first touches it.
    /// Held only during a run: it lives outside the template region.
    pub tools: Option<Arc<ToolSet>>,
    pub in_flight: u32,
    /// JSON bytes of the arguments of calls queued or in flight (see `natives::refusal`).
    pub pending_args_bytes: usize,
    /// Calls waiting for a concurrency slot.
    pub queued: VecDeque<QueuedCall>,
    /// Frames to send once control returns to the loop.
    pub outbox: Vec<WorkerFrame>,
    /// Where logs go, at once.
    pub link: Option<SharedLink>,
    /// Promise settlers by call id.
    pub pending: HashMap<u64, Settlers>,
    /// Timers: due time → (id, callback).
    pub timers: BTreeMap<(Instant, u64), Persistent<Function<'static>>>,
    pub timer_ids: HashMap<u64, Instant>,
    /// Timers this execution has made: the last timer id handed out.
    pub timers_made: u64,
    /// Log lines and bytes sent so far (each line costs its text plus
    /// `LOG_LINE_OVERHEAD_BYTES`).
    pub log_lines: u32,
    pub log_bytes: usize,
    /// Past the log limits: what was dropped, and the last few lines, sent when the run ends.
    pub dropped_logs: natives::DroppedLogs,
    pub limits: Limits,
    /// Bytes the runtime's allocator holds.
    pub heap: heap::HeapCounter,
    /// `Math.random`'s state, seeded from the OS for every execution (a runtime restored from
    /// a snapshot would otherwise repeat the template's sequence).
    pub random: u64,
}

pub(crate) type Shared = Rc<RefCell<LoopState>>;

/// How to settle one pending call's promise.
pub(crate) struct Settlers {
    /// The call's argument bytes, counted in `pending_args_bytes` until the reply.
    pub args_bytes: usize,
    pub resolve: Persistent<Function<'static>>,
    pub reject: Persistent<Function<'static>>,
    /// An Error made where the call started (see `natives::error_object`).
    pub site: Option<Persistent<Value<'static>>>,
    /// Maps the parsed reply to the promise's value; what it throws rejects the promise.
    pub map: Option<Persistent<Function<'static>>>,
}

impl LoopState {
    /// Drops every JavaScript value held from Rust.
    fn release(&mut self) {
        self.promise = None;
        self.pending.clear();
        self.timers.clear();
        self.timer_ids.clear();
        self.queued.clear();
        self.link = None;
        self.tools = None;
    }
}

/// Ids of calls and timers, unique for the life of the worker process.
pub(crate) fn next_call_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A fresh runtime and context, made ahead of time so an execution does not wait for them.
/// Nothing has run in it yet: it is exactly as fresh as one made on demand.
///
/// The preamble's first step has run too (console, timers, `ToolError`, web basics); its
/// second step, `bind`, waits for an execution's tools. No user code has run in it.
pub struct Fresh {
    bind: Persistent<Function<'static>>,
    state: Shared,
    context: Context,
    runtime: Runtime,
}

/// A used runtime, to be dropped after the result is sent: tearing a QuickJS runtime down
/// takes a while, and the caller should not wait for it.
pub struct Spent {
    _context: Context,
    _runtime: Runtime,
}

/// The module resolver and loader of every runtime: there are no modules to import.
struct NoModules;

/// What ends a run early: its deadline, and the host's request to stop it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ends {
    pub deadline: Instant,
    pub run: u64,
}

impl Ends {
    /// Whether the run must stop now.
    pub(crate) fn reached(&self) -> bool {
        crate::wire::control::stop_requested(self.run) || Instant::now() >= self.deadline
    }
}

/// What `import()` answers, on both engines.
pub(crate) const NO_MODULES: &str = "import() is not available in the sandbox: there are no modules. Backends are already globals (e.g. `await github.create_issue({...})`)";

impl rquickjs::loader::Resolver for NoModules {
    fn resolve<'js>(
        &mut self,
        _ctx: &Ctx<'js>,
        base: &str,
        name: &str,
        _attributes: Option<rquickjs::loader::ImportAttributes<'js>>,
    ) -> rquickjs::Result<String> {
        Err(rquickjs::Error::new_resolving_message(
            base, name, NO_MODULES,
        ))
    }
}

impl rquickjs::loader::Loader for NoModules {
    fn load<'js>(
        &mut self,
        _ctx: &Ctx<'js>,
        name: &str,
        _attributes: Option<rquickjs::loader::ImportAttributes<'js>>,
    ) -> rquickjs::Result<rquickjs::Module<'js, rquickjs::module::Declared>> {
        Err(rquickjs::Error::new_loading_message(name, NO_MODULES))
    }
}

/// Makes a fresh runtime and context with the preamble loaded.
pub fn fresh() -> Result<Fresh, String> {
    let (allocator, heap) = heap::CountingAllocator::new();
    let runtime = Runtime::new_with_alloc(allocator)
        .map_err(|e| format!("cannot create a JavaScript runtime: {e}"))?;
    // `import()` would otherwise find the modules the worker itself loaded (the preamble, by
    // its name): every specifier is refused, those included.
    runtime.set_loader(NoModules, NoModules);
    let context =
        Context::full(&runtime).map_err(|e| format!("cannot create a JavaScript context: {e}"))?;
    let state: Shared = Rc::default();
    let bind = context
        .with(|ctx| {
            let preamble = bytecode::preamble(&ctx)?;
            natives::prepare(&ctx, &state, preamble).map(|f| Persistent::save(&ctx, f))
        })
        .map_err(|e| format!("cannot load the preamble: {e}"))?;
    state.borrow_mut().heap = heap;
    Ok(Fresh {
        bind,
        state,
        context,
        runtime,
    })
}

fn internal(message: String) -> GuestError {
    GuestError {
        at: None,
        kind: Some(ErrorKind::Internal),
        name: "InternalError".into(),
        message,
        stack: String::new(),
        fault: None,
    }
}

/// A seed for `Math.random` when the OS has no randomness to give (never expected).
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

fn stats(state: &Shared) -> RunStats {
    RunStats {
        memory_bytes: state.borrow().heap.get() as u64,
        calls: state.borrow().calls_made,
    }
}

fn timeout_error(state: &Shared, limits: Limits) -> GuestError {
    crate::wire::errors::timeout_guest_error(limits.wall_ms, state.borrow().in_flight)
}

/// Sends queued frames, first promoting queued calls into free concurrency slots.
fn flush(state: &Shared, link: &SharedLink) -> Result<(), String> {
    let frames = {
        let mut s = state.borrow_mut();
        while s.in_flight < s.limits.max_concurrent_calls {
            let Some((id, callee, args, site)) = s.queued.pop_front() else {
                break;
            };
            s.in_flight += 1;
            let run = s.run;
            s.outbox.push(WorkerFrame::Call {
                run,
                id,
                callee,
                args,
                site,
            });
        }
        std::mem::take(&mut s.outbox)
    };
    if frames.is_empty() {
        return Ok(());
    }
    link.borrow_mut()
        .send_all(&frames)
        .map_err(|e| format!("host link failed: {e}"))
}

fn settle(ctx: &Ctx, state: &Shared, id: u64, result: Result<String, CallFailure>) {
    let settlers = {
        let mut s = state.borrow_mut();
        let found = s.pending.remove(&id);
        if let Some(settlers) = &found {
            s.in_flight = s.in_flight.saturating_sub(1);
            s.pending_args_bytes = s.pending_args_bytes.saturating_sub(settlers.args_bytes);
        }
        found
    };
    // A reply to a call of an earlier run is ignored.
    let Some(Settlers {
        args_bytes: _,
        resolve,
        reject,
        site,
        map,
    }) = settlers
    else {
        return;
    };
    let site = site.and_then(|site| site.restore(ctx).ok());
    // The guest receives the reply parsed (and mapped); a reply that is not JSON fails the call.
    let failure = match result {
        Ok(json) => match ctx.json_parse(json) {
            Ok(value) => {
                let mapped = match map.map(|map| map.restore(ctx)) {
                    None => Ok(value),
                    Some(map) => map.and_then(|map| map.call::<_, Value>((value,))),
                };
                let settled = match mapped {
                    Ok(value) => resolve.restore(ctx).and_then(|f| f.call::<_, ()>((value,))),
                    // What the mapping threw (a `ToolError` for an `isError` result).
                    Err(_) => {
                        let thrown = ctx.catch();
                        reject.restore(ctx).and_then(|f| f.call::<_, ()>((thrown,)))
                    }
                };
                drop(settled);
                return;
            }
            Err(_) => {
                let reason = ctx
                    .catch()
                    .into_exception()
                    .and_then(|e| e.message())
                    .unwrap_or_default();
                CallFailure::new(
                    FailureKind::Failed,
                    format!("the call's result is not valid JSON: {reason}"),
                )
            }
        },
        Err(failure) => failure,
    };
    let outcome = reject.restore(ctx).and_then(|f| {
        let error = natives::error_object(ctx, failure.kind, &failure.message, site)?;
        f.call::<_, ()>((error,))
    });
    drop(outcome);
}

fn fire_due_timers(ctx: &Ctx, state: &Shared) {
    let now = Instant::now();
    loop {
        let due = {
            let mut s = state.borrow_mut();
            match s.timers.keys().next().copied() {
                Some(key) if key.0 <= now => {
                    s.timer_ids.remove(&key.1);
                    s.timers.remove(&key)
                }
                _ => None,
            }
        };
        let Some(callback) = due else { return };
        if let Ok(f) = callback.restore(ctx) {
            // An exception in a timer callback is reported like an unhandled rejection would be.
            if let Err(e) = f.call::<_, ()>(()).catch(ctx) {
                let message = e.to_string();
                let mut s = state.borrow_mut();
                let run = s.run;
                s.outbox.push(WorkerFrame::Log {
                    run,
                    level: "error".into(),
                    message: format!("uncaught error in a setTimeout callback: {message}"),
                });
            }
        }
    }
}

/// Where a result holds a Promise, at its top or one level in (`[2]`, `.items`): JSON would
/// show it as `{}`, silently, while the call it stands for is abandoned.
fn promise_in(value: &Value<'_>) -> Option<String> {
    if value.is_promise() {
        return Some("at its top".into());
    }
    if let Some(array) = value.as_array() {
        for (i, item) in array.iter::<Value>().enumerate().take(10_000) {
            if item.is_ok_and(|item| item.is_promise()) {
                return Some(format!("at [{i}]"));
            }
        }
        return None;
    }
    let object = value.as_object()?;
    for entry in object.props::<String, Value>().take(10_000) {
        if let Ok((key, item)) = entry
            && item.is_promise()
        {
            return Some(format!("at .{key}"));
        }
    }
    None
}

/// JSON-serializes the result, enforcing the output limit and naming unserializable values.
fn serialize<'js>(
    ctx: &Ctx<'js>,
    result: Option<rquickjs::Result<Value<'js>>>,
    max_bytes: usize,
    ends: Ends,
) -> Result<String, GuestError> {
    let value = match result {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(guest_error(ctx, CaughtError::from_error(ctx, e), ends)),
        None => return Err(internal("the result was read before it settled".into())),
    };
    if let Some(path) = promise_in(&value) {
        return Err(GuestError {
            at: None,
            kind: None,
            name: "TypeError".into(),
            message: format!(
                "{} {path}: a call (or other async work) that was not awaited, so its value is not there yet",
                crate::wire::errors::PROMISE_IN_RESULT
            ),
            stack: String::new(),
            fault: None,
        });
    }
    if value.is_undefined() {
        return Ok("null".into());
    }
    let json = match ctx.json_stringify(value).catch(ctx) {
        // JSON.stringify escapes lone surrogates, so the text converts; the escapes are then
        // made well-formed, so the host (and every tier) reads the same value.
        Ok(Some(s)) => crate::wire::encoding::into_well_formed_json(
            s.to_string().map_err(|e| internal(e.to_string()))?,
        ),
        Ok(None) => "null".to_string(),
        Err(e) => {
            let mut err = guest_error(ctx, e, ends);
            err.message = format!("the result cannot be turned into JSON: {}", err.message);
            return Err(err);
        }
    };
    if json.len() > max_bytes {
        return Err(crate::wire::errors::output_limit_guest_error(
            json.len(),
            max_bytes,
        ));
    }
    Ok(json)
}

/// Turns a caught JavaScript error into a [`GuestError`], classifying limit hits.
fn guest_error<'js>(ctx: &Ctx<'js>, error: CaughtError<'js>, ends: Ends) -> GuestError {
    let (name, message, stack, call_kind) = match &error {
        CaughtError::Exception(e) => {
            let obj: &Object = e.as_object();
            let text = |key: &str, max: usize| {
                obj.get::<_, Value>(key)
                    .ok()
                    .and_then(|v| strings::lossy_bounded(ctx, &v, max))
            };
            let name = text("name", 256).unwrap_or_else(|| "Error".into());
            let mut stack = text("stack", strings::MAX_ERROR_STACK_BYTES).unwrap_or_default();
            if let Some(caller) = text("callerStack", strings::MAX_ERROR_STACK_BYTES) {
                stack.push_str(&caller);
            }
            let message = text("message", strings::MAX_ERROR_MESSAGE_BYTES).unwrap_or_default();
            // A failed call's Error says what kind of failure it was (see `error_object`).
            let call_kind = text("kind", 32).and_then(|k| FailureKind::named(&k));
            (name, message, stack, call_kind)
        }
        CaughtError::Value(v) => {
            let text = ctx
                .json_stringify(v.clone())
                .ok()
                .flatten()
                .and_then(|s| {
                    strings::lossy_bounded(ctx, &s.into_value(), strings::MAX_ERROR_MESSAGE_BYTES)
                })
                .unwrap_or_else(|| "a non-Error value".into());
            (
                "Error".to_string(),
                format!("uncaught {text}"),
                String::new(),
                None,
            )
        }
        CaughtError::Error(e) => (
            "InternalError".to_string(),
            e.to_string(),
            String::new(),
            None,
        ),
    };
    let lower = message.to_lowercase();
    let interrupted = lower.contains("interrupted") || name == "InternalError";
    let kind = if interrupted && crate::wire::control::stop_requested(ends.run) {
        return crate::wire::errors::cancelled_guest_error();
    } else if interrupted && Instant::now() >= ends.deadline {
        Some(ErrorKind::Timeout)
    } else if lower.contains("out of memory")
        || matches!(error, CaughtError::Error(rquickjs::Error::Allocation))
    {
        Some(ErrorKind::Memory)
    } else if lower.contains("stack overflow") || lower.contains("maximum call stack") {
        Some(ErrorKind::Stack)
    } else {
        // A call that failed, uncaught: the execution failed because of that call.
        call_kind.map(|kind| match kind {
            FailureKind::Denied | FailureKind::ApprovalDenied => ErrorKind::ToolDenied,
            FailureKind::Memory => ErrorKind::Memory,
            FailureKind::Held => ErrorKind::ToolHeld,
            FailureKind::SignInRequired => ErrorKind::SignInRequired,
            _ => ErrorKind::ToolFailed,
        })
    };
    // A fault of the code's own (not a limit, not a failed call), in QuickJS's words.
    let fault = kind
        .is_none()
        .then(|| fault::classify(&name, &message))
        .flatten();
    GuestError {
        at: None,
        kind,
        name,
        message,
        stack,
        fault,
    }
}
