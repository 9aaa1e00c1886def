//! One Python execution: Monty driven from pause to pause.
//!
//! Between frames a run is either finished or waiting on its tools, and a waiting run is
//! Monty's `ResolveFutures` value: the whole interpreter, owned, holding no thread. Every other
//! pause is answered at once: a name the code reaches for (a backend becomes a host object), a
//! tool call (it leaves as a frame, and the code goes on with a pending future), an OS call
//! (refused: files, the network and the clock are the gateway's to give).

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use monty::{FunctionCall, MontyRun, NameLookup, ResolveFutures, RunProgress};
use monty_types::{
    CompileOptions, ExcType, ExtFunctionResult, MontyException, MontyObject, NameLookupResult, PrintWriter, PrintWriterCallback,
    ResourceLimits, ResourceTracker,
};
use serde_json::Value;

use super::capabilities::{self, Answer};
use super::objects::{self, Objects, Target};
use super::values;
use crate::wire::limits::{LOG_LINE_OVERHEAD_BYTES, Limits};
use crate::wire::protocol::{
    CallFailure, Callee, ErrorKind, GuestError, RunStats, WorkerFrame,
};
use crate::worker::engine::ToolSet;
use crate::worker::heap_count;

/// The file name tracebacks give the user's code.
pub const SCRIPT_NAME: &str = "script.py";

/// What a step left the run as.
pub enum Outcome {
    /// Waiting on calls (or its deadline).
    Waiting,
    /// Finished: the result as JSON text, or the error.
    Done(Result<String, GuestError>),
}

/// One Python execution.
pub struct PyRun {
    run: u64,
    tools: Arc<ToolSet>,
    limits: Limits,
    deadline: Instant,
    /// The interpreter, while it waits on calls.
    waiting: Option<ResolveFutures>,
    /// The host functions this run may call (its capabilities), by name.
    host_functions: Vec<String>,
    /// Calls out, by wire id: Monty's id for the future each resolves, and how to read it.
    pending: HashMap<u64, (u32, Answer)>,
    /// The responses `fetch` gave, for their `json()` and `text()`.
    responses: Vec<Value>,
    /// `asyncio.sleep` timers: when each is due, and the future it resolves.
    timers: Vec<(Instant, u32)>,
    /// Calls made but held back by `max_concurrent_calls`, in order.
    queued: VecDeque<WorkerFrame>,
    calls: u32,
    /// Failed calls' messages and kinds, so an uncaught one ends the run with its kind.
    failures: Vec<(String, ErrorKind)>,
    logs: Logs,
    /// Heap bytes the run held when its last step ended (see `heap_count`).
    held: usize,
    /// Lines the worker put before the user's code (see `source::with_aliases`).
    lines_before: u32,
    /// Names the code reached for that are not defined (for the fault of its `NameError`).
    undefined: Vec<String>,
}

impl PyRun {
    /// A run that has not started.
    pub fn new(run: u64, tools: Arc<ToolSet>, host_functions: Vec<String>, limits: Limits) -> PyRun {
        PyRun {
            run,
            tools,
            host_functions,
            responses: Vec::new(),
            timers: Vec::new(),
            limits,
            deadline: Instant::now() + limits.wall_time(),
            waiting: None,
            pending: HashMap::new(),
            queued: VecDeque::new(),
            calls: 0,
            failures: Vec::new(),
            logs: Logs::new(run, limits),
            held: 0,
            lines_before: 0,
            undefined: Vec::new(),
        }
    }

    /// When the run's wall time ends.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// When the run next needs the worker: its first timer, or its deadline.
    pub fn next_wake(&self) -> Instant {
        self.timers
            .iter()
            .map(|(due, _)| *due)
            .min()
            .map_or(self.deadline, |due| due.min(self.deadline))
    }

    /// Resolves the timers that are due and runs on.
    pub fn wake(&mut self, next_call: &mut u64, out: &mut Vec<WorkerFrame>) -> Outcome {
        let now = Instant::now();
        let due: Vec<(u32, ExtFunctionResult)> = self
            .timers
            .iter()
            .filter(|(at, _)| *at <= now)
            .map(|(_, future)| (*future, ExtFunctionResult::Return(MontyObject::None)))
            .collect();
        if due.is_empty() {
            return Outcome::Waiting;
        }
        self.timers.retain(|(at, _)| *at > now);
        let Some(waiting) = self.waiting.take() else {
            return Outcome::Done(Err(internal("a timer fired for a run that was not waiting")));
        };
        let step = heap_count::Step::begin(self.held);
        let resumed = waiting.resume(due, PrintWriter::Callback(&mut self.logs));
        let outcome = self.drive(resumed, next_call, out);
        self.held = step.end();
        outcome
    }

    /// Compiles and starts `code`.
    pub fn start(&mut self, code: String, next_call: &mut u64, out: &mut Vec<WorkerFrame>) -> Outcome {
        let step = heap_count::Step::begin(self.held);
        let outcome = self.start_step(code, next_call, out);
        self.held = step.end();
        outcome
    }

    fn start_step(&mut self, code: String, next_call: &mut u64, out: &mut Vec<WorkerFrame>) -> Outcome {
        // A script that ends by assigning a name returns its value (see `source`).
        let code = super::source::with_final_value(code);
        let (code, lines_before) = super::source::with_aliases(code);
        self.lines_before = lines_before;
        let runner = match MontyRun::new(code, SCRIPT_NAME, Vec::new(), CompileOptions::default()) {
            Ok(runner) => runner,
            Err(e) => return Outcome::Done(Err(self.error(e))),
        };
        // `asyncio.sleep` becomes the worker's timer, once Monty has bounded the code's nesting.
        let runner = match super::source::with_sleep(runner.code()) {
            Some(slept) => MontyRun::new(slept, SCRIPT_NAME, Vec::new(), CompileOptions::default())
                .unwrap_or(runner),
            None => runner,
        };
        let tracker = ResourceTracker::new(ResourceLimits {
            max_duration: Some(self.limits.wall_time()),
            max_memory: Some(self.limits.memory_bytes),
            max_recursion_depth: MAX_RECURSION_DEPTH,
            max_suspensions: (self.limits.max_tool_calls as usize).saturating_mul(2).max(16),
            ..ResourceLimits::default()
        });
        let step = runner.start(Vec::new(), tracker, PrintWriter::Callback(&mut self.logs));
        self.drive(step, next_call, out)
    }

    /// Resolves the call `id` with the host's answer and runs on.
    pub fn reply(
        &mut self,
        id: u64,
        result: Result<String, CallFailure>,
        next_call: &mut u64,
        out: &mut Vec<WorkerFrame>,
    ) -> Outcome {
        let Some((future, answer)) = self.pending.remove(&id) else {
            return Outcome::Waiting;
        };
        let step = heap_count::Step::begin(self.held);
        let outcome = self.resolve(future, answer, result, next_call, out);
        self.held = step.end();
        outcome
    }

    fn resolve(
        &mut self,
        future: u32,
        answer: Answer,
        result: Result<String, CallFailure>,
        next_call: &mut u64,
        out: &mut Vec<WorkerFrame>,
    ) -> Outcome {
        // A slot is free: the oldest held-back call goes (it was registered when made).
        if let Some(frame) = self.queued.pop_front() {
            out.push(frame);
        }
        let answer = self.answer(answer, result);
        let Some(waiting) = self.waiting.take() else {
            return Outcome::Done(Err(internal("a reply came for a run that was not waiting")));
        };
        let step = waiting.resume(vec![(future, answer)], PrintWriter::Callback(&mut self.logs));
        self.drive(step, next_call, out)
    }

    /// Sends what a finished run printed last, then its `Done` frame.
    pub fn finish(mut self, result: Result<String, GuestError>, out: &mut Vec<WorkerFrame>) {
        self.logs.flush();
        out.extend(self.logs.take());
        out.push(WorkerFrame::Done {
            run: self.run,
            outcome: result,
            stats: RunStats {
                memory_bytes: self.held as u64,
                calls: self.calls,
            },
        });
    }

    /// Sends what the run printed so far (before the calls it makes next, in order).
    pub fn send_logs(&mut self, out: &mut Vec<WorkerFrame>) {
        out.extend(self.logs.take());
    }

    /// The error of a run whose wall time passed while it waited: TypeScript's words.
    pub fn timed_out(&self) -> GuestError {
        crate::wire::errors::timeout_guest_error(self.limits.wall_ms, self.pending.len() as u32)
    }

    /// Runs the interpreter from `step` until it finishes or waits on calls.
    fn drive(
        &mut self,
        mut step: Result<RunProgress, MontyException>,
        next_call: &mut u64,
        out: &mut Vec<WorkerFrame>,
    ) -> Outcome {
        loop {
            let progress = match step {
                Ok(progress) => progress,
                Err(e) => return Outcome::Done(Err(self.error(e))),
            };
            step = match progress {
                RunProgress::Complete(value) => return Outcome::Done(self.result(&value)),
                RunProgress::FunctionCall(call) => self.call(call, next_call, out),
                RunProgress::NameLookup(lookup) => {
                    let answer = self.lookup(&lookup);
                    lookup.resume(answer, PrintWriter::Callback(&mut self.logs))
                }
                RunProgress::OsCall(call) => {
                    if let Some(now) = super::clock::answer(&call.function_call) {
                        step = call.resume(now, PrintWriter::Callback(&mut self.logs));
                        continue;
                    }
                    let what = call.function_call.to_string();
                    let refusal = MontyException::new(
                        ExcType::PermissionError,
                        Some(format!(
                            "`{what}` {}: the code has no files, network or environment of its own; use the granted fs, fetch and env",
                            super::faults::OS_REFUSED
                        )),
                    );
                    call.resume(ExtFunctionResult::Error(refusal), PrintWriter::Callback(&mut self.logs))
                }
                RunProgress::ResolveFutures(waiting) => {
                    if self.pending.is_empty() && self.queued.is_empty() && self.timers.is_empty() {
                        return Outcome::Done(Err(internal(
                            "the code waits for something no call will answer",
                        )));
                    }
                    self.waiting = Some(waiting);
                    return Outcome::Waiting;
                }
            };
        }
    }

    fn objects(&self) -> Objects<'_> {
        Objects {
            tools: &self.tools,
            host_functions: &self.host_functions,
        }
    }

    /// A name the code reached for (see `objects`).
    fn lookup(&mut self, lookup: &NameLookup) -> NameLookupResult {
        let answer = self.objects().lookup(lookup);
        if matches!(answer, NameLookupResult::Undefined)
            && lookup.object_id().is_none()
            && self.undefined.len() < MAX_REMEMBERED_FAILURES
        {
            self.undefined.push(lookup.name.clone());
        }
        answer
    }

    /// A call: a tool's or a capability's is checked, sent (or queued), and the code goes on
    /// with a pending future; a response's method is answered at once.
    fn call(
        &mut self,
        call: FunctionCall,
        next_call: &mut u64,
        out: &mut Vec<WorkerFrame>,
    ) -> Result<RunProgress, MontyException> {
        let sent = match self.objects().target(&call) {
            Target::Missing(refusal) => Err(refusal),
            Target::Sleep => {
                return match self.timer(&call) {
                    Ok(()) => call.resume_pending(PrintWriter::Callback(&mut self.logs)),
                    Err(e) => call.resume(ExtFunctionResult::Error(e), PrintWriter::Callback(&mut self.logs)),
                };
            }
            Target::Response(n) => {
                let answer = match self.responses.get(n) {
                    Some(raw) => capabilities::response_method(raw, &call.function_name),
                    None => Err(MontyException::new(ExcType::RuntimeError, Some("no such response".into()))),
                };
                return match answer {
                    Ok(value) => call.resume(value, PrintWriter::Callback(&mut self.logs)),
                    Err(e) => call.resume(ExtFunctionResult::Error(e), PrintWriter::Callback(&mut self.logs)),
                };
            }
            Target::Tool(tool) => {
                let qualified = self.objects().qualified(tool);
                self.arguments(&qualified, &call)
                    .map(|args| (Callee::Tool(tool), args, Answer::Tool))
            }
            Target::Host(index, function) => self.counted(function).and_then(|()| {
                capabilities::arguments(function, &call.args, &call.kwargs)
                    .map(|(args, answer)| (Callee::Host(index), args, answer))
            }),
        };
        let (callee, args, answer) = match sent {
            Ok(sent) => sent,
            Err(refusal) => {
                return call.resume(ExtFunctionResult::Error(refusal), PrintWriter::Callback(&mut self.logs));
            }
        };
        self.calls += 1;
        self.send_logs(out);
        let id = *next_call;
        *next_call += 1;
        let frame = WorkerFrame::Call {
            run: self.run,
            id,
            callee,
            args,
            site: None,
        };
        if self.pending.len() < self.limits.max_concurrent_calls.max(1) as usize {
            out.push(frame);
        } else {
            self.queued.push_back(frame);
        }
        self.pending.insert(id, (call.call_id, answer));
        call.resume_pending(PrintWriter::Callback(&mut self.logs))
    }

    /// Sets the timer an `asyncio.sleep(seconds)` awaits.
    fn timer(&mut self, call: &FunctionCall) -> Result<(), MontyException> {
        let seconds = match (call.args.first(), call.kwargs.is_empty(), call.args.len()) {
            (Some(MontyObject::Int(n)), true, 1) => *n as f64,
            (Some(MontyObject::Float(f)), true, 1) => *f,
            _ => return Err(type_error("asyncio.sleep(seconds) takes one number of seconds")),
        };
        if self.timers.len() >= self.limits.max_timers as usize {
            return Err(MontyException::new(
                ExcType::RuntimeError,
                Some(format!(
                    "too many timers: an execution may have {} pending (max_timers)",
                    self.limits.max_timers
                )),
            ));
        }
        // Past the deadline a sleep would only end in a timeout: it ends there instead.
        let wait = std::time::Duration::try_from_secs_f64(seconds.max(0.0))
            .unwrap_or(std::time::Duration::MAX);
        let due = Instant::now().checked_add(wait).unwrap_or(self.deadline).min(self.deadline);
        self.timers.push((due, call.call_id));
        Ok(())
    }

    /// Whether the run may make one more call (`max_tool_calls`).
    fn counted(&self, what: &str) -> Result<(), MontyException> {
        if self.calls >= self.limits.max_tool_calls {
            return Err(MontyException::new(
                ExcType::RuntimeError,
                Some(format!(
                    "too many calls: {what}() would be call {} of an execution that may make {} (max_tool_calls)",
                    self.calls + 1,
                    self.limits.max_tool_calls
                )),
            ));
        }
        Ok(())
    }

    /// A call's keyword arguments as a JSON object, or why not.
    fn arguments(&self, qualified: &str, call: &FunctionCall) -> Result<String, MontyException> {
        if !call.args.is_empty() {
            return Err(MontyException::new(
                ExcType::TypeError,
                Some(format!(
                    "{qualified}() takes keyword arguments only, e.g. {qualified}(name=value); got {} positional",
                    call.args.len()
                )),
            ));
        }
        self.counted(qualified)?;
        let mut map = serde_json::Map::new();
        for (key, value) in &call.kwargs {
            let MontyObject::String(key) = key else {
                return Err(type_error("keyword names must be strings"));
            };
            let value = values::to_json(value)
                .map_err(|why| type_error(&format!("argument `{key}` of {qualified}(): {why}")))?;
            map.insert(key.clone(), value);
        }
        let text = Value::Object(map).to_string();
        if text.len() > self.limits.max_call_args_bytes {
            return Err(MontyException::new(
                ExcType::MemoryError,
                Some(format!(
                    "the arguments of {qualified}() take {} bytes, more than one call may carry ({} bytes)",
                    text.len(),
                    self.limits.max_call_args_bytes
                )),
            ));
        }
        Ok(text)
    }

    /// The host's answer as what the code's `await` gives: the tool's value, or an exception.
    fn answer(&mut self, answer: Answer, result: Result<String, CallFailure>) -> ExtFunctionResult {
        match result {
            Ok(json) if answer != Answer::Tool => match serde_json::from_str::<Value>(&json) {
                Ok(value) => ExtFunctionResult::Return(self.capability_value(answer, value)),
                Err(e) => self.raise(format!("the host's answer is not JSON: {e}"), ErrorKind::Internal),
            },
            Ok(json) => match serde_json::from_str::<Value>(&json) {
                Ok(raw) if raw.get("isError").and_then(Value::as_bool) == Some(true) => {
                    let text = values::text_of(&raw);
                    let message = if text.is_empty() { "the tool failed".to_string() } else { text };
                    self.raise(message, ErrorKind::ToolFailed)
                }
                Ok(raw) => ExtFunctionResult::Return(values::to_python(&values::tool_value(&raw))),
                Err(e) => self.raise(format!("the tool's answer is not JSON: {e}"), ErrorKind::ToolFailed),
            },
            Err(failure) => {
                let kind = failure.kind.error_kind();
                self.raise(failure.message, kind)
            }
        }
    }

    /// A capability's answer as Python sees it.
    fn capability_value(&mut self, answer: Answer, value: Value) -> MontyObject {
        match answer {
            Answer::StateValue => match value {
                Value::Object(mut map) => values::to_python(&map.remove("value").unwrap_or(Value::Null)),
                _ => MontyObject::None,
            },
            Answer::Response => {
                let object = objects::response(&value, self.responses.len());
                self.responses.push(value);
                object
            }
            Answer::Plain | Answer::Tool => values::to_python(&value),
        }
    }

    /// A failed call as the exception its `await` raises, remembered so that, uncaught, it
    /// ends the run with `kind`.
    fn raise(&mut self, message: String, kind: ErrorKind) -> ExtFunctionResult {
        if self.failures.len() < MAX_REMEMBERED_FAILURES {
            self.failures.push((message.clone(), kind));
        }
        // Refusals (the policy, a person, the supply-chain guard) are `PermissionError`, which
        // `ApprovalDenied` names; a call out of time `TimeoutError`; every other failure
        // `RuntimeError`, which `ToolError` names.
        let exc = match kind {
            ErrorKind::ToolDenied | ErrorKind::ToolHeld | ErrorKind::SignInRequired => {
                ExcType::PermissionError
            }
            ErrorKind::Timeout => ExcType::TimeoutError,
            _ => ExcType::RuntimeError,
        };
        ExtFunctionResult::Error(MontyException::new(exc, Some(message)))
    }

    /// The run's value as JSON text, within the result limit.
    fn result(&self, value: &MontyObject) -> Result<String, GuestError> {
        let json = values::to_json(value).map_err(|why| GuestError {
            at: None,
            kind: Some(ErrorKind::Runtime),
            name: "TypeError".into(),
            message: format!("the result cannot be returned: {why}"),
            stack: String::new(),
            fault: None,
        })?;
        let text = json.to_string();
        if text.len() > self.limits.max_result_bytes {
            return Err(crate::wire::errors::output_limit_guest_error(
                text.len(),
                self.limits.max_result_bytes,
            ));
        }
        Ok(text)
    }

    /// An exception that ended the run, as the host reads it.
    fn error(&self, e: MontyException) -> GuestError {
        let message = e.message().unwrap_or_default().to_string();
        let kind = match e.exc_type() {
            ExcType::SyntaxError => ErrorKind::Syntax,
            ExcType::MemoryError => ErrorKind::Memory,
            ExcType::TimeoutError => ErrorKind::Timeout,
            ExcType::RecursionError => ErrorKind::Stack,
            _ => self
                .failures
                .iter()
                .find(|(failed, _)| *failed == message)
                .map_or(ErrorKind::Runtime, |(_, kind)| *kind),
        };
        let e = self.in_user_lines(e);
        // The innermost frame in the user's code.
        let at = e
            .traceback()
            .iter()
            .rev()
            .find(|frame| frame.filename == SCRIPT_NAME)
            .map(|frame| (frame.start.line, frame.start.column));
        let fault = super::faults::classify(e.exc_type(), &message, &self.undefined);
        // Monty's own limits, in the words TypeScript's limits use.
        let message = match super::faults::limit(e.exc_type(), &message) {
            Some(super::faults::Limit::Memory) => format!(
                "out of memory: the execution's heap passed its limit of {} MiB",
                self.limits.memory_bytes >> 20
            ),
            Some(super::faults::Limit::Time) => format!(
                "the execution ran out of time ({} ms) {}",
                self.limits.wall_ms,
                crate::wire::errors::TIMED_OUT_COMPUTING
            ),
            None => message,
        };
        GuestError {
            at,
            kind: Some(kind),
            name: e.exc_type().to_string(),
            message,
            stack: e.to_string(),
            fault,
        }
    }

    /// `e` with its traceback in the user's lines: without the lines the worker put first.
    fn in_user_lines(&self, e: MontyException) -> MontyException {
        if self.lines_before == 0 {
            return e;
        }
        let frames = e
            .traceback()
            .iter()
            .cloned()
            .map(|mut frame| {
                frame.start.line = frame.start.line.saturating_sub(self.lines_before).max(1);
                frame.end.line = frame.end.line.saturating_sub(self.lines_before).max(1);
                frame
            })
            .collect();
        MontyException::with_traceback(e.exc_type(), e.message().map(str::to_string), frames)
    }
}

/// Recursion depth of Python code (Monty's default; CPython's is the same).
const MAX_RECURSION_DEPTH: usize = 1000;
/// Failed calls a run remembers to classify its end.
const MAX_REMEMBERED_FAILURES: usize = 64;

fn type_error(message: &str) -> MontyException {
    MontyException::new(ExcType::TypeError, Some(message.to_string()))
}

fn internal(message: &str) -> GuestError {
    GuestError {
        at: None,
        kind: Some(ErrorKind::Internal),
        name: "InternalError".into(),
        message: message.into(),
        stack: String::new(),
        fault: None,
    }
}

/// The error of a cancelled run: TypeScript's words.
pub fn cancelled() -> GuestError {
    crate::wire::errors::cancelled_guest_error()
}

/// `print()` output: whole lines go to the host as `Log` frames, within the run's log limits.
struct Logs {
    run: u64,
    line: String,
    lines: Vec<WorkerFrame>,
    bytes: usize,
    count: u32,
    max_bytes: usize,
    max_lines: u32,
}

impl Logs {
    fn new(run: u64, limits: Limits) -> Logs {
        Logs {
            run,
            line: String::new(),
            lines: Vec::new(),
            bytes: 0,
            count: 0,
            max_bytes: limits.max_log_bytes,
            max_lines: limits.max_log_lines,
        }
    }

    fn flush(&mut self) {
        if !self.line.is_empty() {
            self.end_line();
        }
    }

    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        let cost = line.len() + LOG_LINE_OVERHEAD_BYTES;
        if self.count < self.max_lines && self.bytes + cost <= self.max_bytes {
            self.count += 1;
            self.bytes += cost;
            self.lines.push(WorkerFrame::Log {
                run: self.run,
                level: "log".into(),
                message: line,
            });
        }
    }

    /// The lines written since the last take.
    fn take(&mut self) -> Vec<WorkerFrame> {
        std::mem::take(&mut self.lines)
    }
}

impl PrintWriterCallback for Logs {
    fn stdout_write(&mut self, output: Cow<'_, str>) -> Result<(), MontyException> {
        // A line longer than the whole log budget is cut where the budget ends.
        if self.line.len() + output.len() <= self.max_bytes {
            self.line.push_str(&output);
        }
        Ok(())
    }

    fn stdout_push(&mut self, end: char) -> Result<(), MontyException> {
        if end == '\n' {
            self.end_line();
        } else if self.line.len() < self.max_bytes {
            self.line.push(end);
        }
        Ok(())
    }
}
