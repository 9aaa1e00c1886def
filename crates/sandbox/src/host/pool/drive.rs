//! Serving one execution on a shared worker: send its run, answer its calls through the
//! [`Bridge`], collect its logs, until its `Done` frame, its deadline, its cancellation or the
//! loss of its worker.
//!
//! Frames reach an execution two ways: over its route (another execution read them), or
//! straight from the worker's output while this execution holds the output's lock and so
//! reads for every run on the worker (see `handle`). The execution takes the lock whenever it is
//! free, so some execution is always reading while any waits.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::handle::{Route, Routed, WorkerHandle, run_of};
use super::output::Next;
use super::bridge::Bridge;
use super::raw_run::{RawRun, internal};
use crate::wire::limits::LOG_LINE_OVERHEAD_BYTES;
use crate::wire::protocol::{
    CallFailure, Callee, FailureKind, HostFrame, ToolAnswer, ToolBinding, WorkerFrame,
    encode_frame, write_frame,
};
use crate::host::result::{CallRecord, ErrorKind, ExecError, LogLine, kept_arguments};

/// How long the host polls a computing worker's output before it sleeps, when a core is spare
/// (see `output`). Long enough for a short script or the stretch between two tool calls.
const HOST_SPIN: Duration = Duration::from_micros(100);

/// Log lines and bytes the host holds beyond an execution's log limits: the worker's marker and
/// the tail it keeps of what it dropped.
const LOG_SLACK_LINES: usize = 64;
const LOG_SLACK_BYTES: usize = 64 * 1024;

type CallDone = (
    u64,
    usize,
    String,
    f64,
    f64,
    Result<ToolAnswer, CallFailure>,
);

/// What a run's calls go to: the execution's tools and host functions, by index, and the
/// bridge that serves them.
pub(crate) struct Callees<'a> {
    pub tools: &'a Arc<Vec<ToolBinding>>,
    pub host_functions: &'a [String],
    pub bridge: Arc<dyn Bridge>,
    /// The wrapped script's positions in the user's code, for a call's site.
    pub positions: &'a crate::host::transpile::PositionMap,
}

/// One run to serve.
pub(crate) struct Job<'a> {
    /// Builds the `Run` frame for a run number, given whether the worker already has the
    /// execution's tools.
    pub frame: &'a (dyn Fn(u64, bool) -> HostFrame + Send + Sync),
    pub callees: Callees<'a>,
    /// The execution's wall time (its deadline in the worker).
    pub wall: Duration,
    pub max_log_lines: usize,
    pub max_log_bytes: usize,
    /// Bytes of the calls' arguments the call list may keep (0: none).
    pub recorded_argument_bytes: usize,
    /// Whether the run may move to another worker before it starts.
    pub movable: bool,
}

/// What the driver reacts to.
enum Event {
    /// A frame read from the worker's output (possibly another run's).
    Read(Next),
    /// A frame of this run (or a move), handed over by the reader or the watchdog.
    Mine(Option<Routed>),
    /// The output's lock: this execution now reads for the worker.
    Lead(OutputGuard),
    CallDone(CallDone),
    Deadline,
    Cancelled,
}

/// How serving a run on a worker ended.
pub(crate) enum Driven {
    /// It ran (or failed, or was stopped) there.
    Ran(RawRun),
    /// The worker was computing and had not started it: run it on another.
    Moved,
}

/// Serves `job` on `worker` until it ends. `grace` is how long past the wall time the host
/// waits for the worker before it gives up on the run.
pub(crate) async fn drive(
    worker: &Arc<WorkerHandle>,
    job: &Job<'_>,
    grace: Duration,
    spare_core: impl Fn() -> bool,
    mut cancelled: std::pin::Pin<&mut impl Future<Output = ()>>,
) -> Result<Driven, ExecError> {
    let Job {
        frame,
        callees,
        wall,
        max_log_lines,
        max_log_bytes,
        recorded_argument_bytes,
        movable,
    } = job;
    let (wall, max_log_lines, max_log_bytes) = (*wall, *max_log_lines, *max_log_bytes);
    let Callees {
        tools,
        host_functions,
        bridge,
        positions,
    } = callees;
    let started = Instant::now();
    let (sender, mut mine) = mpsc::unbounded_channel();
    let route = Route {
        frames: sender,
        wall,
        movable: *movable,
    };
    let sent = worker.start_run(route, tools, |run, known| encode_frame(&frame(run, known)));
    let run = match sent {
        Ok(Some(run)) => run,
        Ok(None) => {
            return Ok(Driven::Ran(lost_worker(
                worker,
                Vec::new(),
                Served::default(),
            )));
        }
        Err(e) => return Err(internal(&format!("cannot reach the sandbox worker: {e}"))),
    };
    let mut route = RouteGuard { worker, run };
    // Whether anything of the run has been seen: from then on it cannot move.
    let mut seen = false;
    let (log_lines_held, log_bytes_held) = (
        max_log_lines + LOG_SLACK_LINES,
        max_log_bytes + LOG_SLACK_BYTES,
    );
    let mut logs = Vec::new();
    let mut held_log_bytes = 0usize;
    let mut served = Served {
        argument_budget: *recorded_argument_bytes,
        ..Served::default()
    };
    let mut calls: FuturesUnordered<BoxFuture<'static, CallDone>> = FuturesUnordered::new();
    // How to drop each call still out, when the guest aborts it (its `AbortSignal`).
    let mut aborts: std::collections::HashMap<u64, tokio::sync::oneshot::Sender<()>> =
        std::collections::HashMap::new();
    let elapsed_ms = |at: Instant| at.duration_since(started).as_secs_f64() * 1000.0;
    let deadline_passed = tokio::time::sleep_until(started + wall + grace);
    tokio::pin!(deadline_passed);
    let mut reader: Option<OutputGuard> = None;
    loop {
        // Answers ready to go leave in one write once no more frames are waiting to be read.
        if !served.replies.is_empty() && !reader.as_ref().is_some_and(|r| r.has_frame()) {
            let replies = std::mem::take(&mut served.replies);
            // A failed write means the worker is gone; reading says why.
            let _ = worker.input.send(&replies);
        }
        let event = if let Ok(routed) = mine.try_recv() {
            Event::Mine(Some(routed))
        } else {
            // While no call is out, the worker is computing: its next frame is close.
            let spun = match reader.as_mut() {
                Some(output) if calls.is_empty() && spare_core() => output.spin(HOST_SPIN),
                _ => None,
            };
            match spun {
                Some(next) => Event::Read(next),
                None => tokio::select! {
                    biased;
                    Some(first) = calls.next(), if !calls.is_empty() => Event::CallDone(first),
                    frame = mine.recv() => Event::Mine(frame),
                    next = read(&mut reader) => Event::Read(next),
                    guard = worker.output.clone().lock_owned(), if reader.is_none() => Event::Lead(guard),
                    _ = &mut deadline_passed => Event::Deadline,
                    () = &mut cancelled => Event::Cancelled,
                },
            }
        };
        let frame = match event {
            Event::Lead(guard) => {
                reader = Some(guard);
                continue;
            }
            Event::Read(Some(Ok(frame))) => {
                if run_of(&frame) != Some(run) {
                    worker.route(frame);
                    continue;
                }
                frame
            }
            Event::Read(other) => {
                let problem = match other {
                    Some(Err(e)) => e,
                    _ => "its output closed".to_string(),
                };
                worker.fail(format!("the sandbox worker failed: {problem}"));
                drop(reader);
                return Ok(Driven::Ran(lost_worker(worker, logs, served)));
            }
            Event::Mine(Some(Routed::Frame(frame))) => frame,
            Event::Mine(Some(Routed::Moved)) => {
                if seen {
                    continue;
                }
                // Nothing of it ran that anyone will see: the worker skips it, or stops it if
                // it started it meanwhile, and its frames are no longer read.
                route.stop();
                return Ok(Driven::Moved);
            }
            Event::Mine(None) => {
                drop(reader);
                return Ok(Driven::Ran(lost_worker(worker, logs, served)));
            }
            Event::CallDone(first) => {
                // Answer every call that is already done together.
                let mut done = Some(first);
                while let Some(call) = done {
                    aborts.remove(&call.0);
                    served.answer(run, call)?;
                    done = calls.next().now_or_never().flatten();
                }
                continue;
            }
            Event::Cancelled => {
                // The run stops at once if it waits, or at its next interrupt check if it
                // computes; no frame of it is read after this, so no further call leaves it. The
                // calls still out are dropped with this function, which cancels them upstream.
                route.stop();
                return Ok(Driven::Ran(RawRun::lost(
                    ErrorKind::Cancelled,
                    "CancelledError",
                    crate::host::direct::CANCELLED_MESSAGE.into(),
                    logs,
                    served.unfinished(),
                )));
            }
            Event::Deadline => {
                route.stop();
                let message = format!(
                    "the execution did not finish within its time limit ({wall:?}, and {grace:?} of grace) and was stopped"
                );
                return Ok(Driven::Ran(RawRun::lost(
                    ErrorKind::Timeout,
                    "TimeoutError",
                    message,
                    logs,
                    served.unfinished(),
                )));
            }
        };
        seen = true;
        match frame {
            WorkerFrame::Call {
                id,
                callee,
                args,
                site,
                ..
            } => {
                let args_bytes = args.len();
                let kept = kept_arguments(&args, &mut served.argument_budget);
                let (name, future) = match callee {
                    Callee::Tool(i) => match tools.get(i as usize) {
                        Some(tool) => {
                            // The line in the user's own code, when the run asked for it.
                            let line = site
                                .and_then(|(line, column)| positions.to_source(line, column))
                                .map(|(line, _)| line);
                            (
                                format!("{}.{}", tool.backend, tool.name),
                                bridge.call_tool_at(tool, args, line),
                            )
                        }
                        None => (
                            format!("tool #{i}"),
                            refused(format!("no tool #{i} in this execution")),
                        ),
                    },
                    Callee::Host(i) => match host_functions.get(i as usize) {
                        Some(name) => (name.clone(), host_answer(bridge.call_host(name, args))),
                        None => (
                            format!("host function #{i}"),
                            refused(format!("no host function #{i} in this execution")),
                        ),
                    },
                };
                let at = elapsed_ms(Instant::now());
                served.in_flight.push(InFlight {
                    id,
                    name: name.clone(),
                    args_bytes,
                    at,
                    arguments: kept,
                });
                let (abort, aborted) = tokio::sync::oneshot::channel::<()>();
                aborts.insert(id, abort);
                let mut call: BoxFuture<'static, CallDone> = Box::pin(async move {
                    // Dropping the call's future (on an abort) cancels it upstream.
                    let result = tokio::select! {
                        biased;
                        Ok(()) = aborted => Err(CallFailure::new(
                            FailureKind::Cancelled,
                            "aborted by its AbortSignal",
                        )),
                        result = future => result,
                    };
                    let end = Instant::now();
                    (
                        id,
                        args_bytes,
                        name,
                        at,
                        end.duration_since(started).as_secs_f64() * 1000.0,
                        result,
                    )
                });
                match call.as_mut().now_or_never() {
                    Some(done) => {
                        aborts.remove(&done.0);
                        served.answer(run, done)?;
                    }
                    None => calls.push(call),
                }
            }
            WorkerFrame::CancelCall { id, .. } => {
                if let Some(abort) = aborts.remove(&id) {
                    let _ = abort.send(());
                }
            }
            WorkerFrame::Log { level, message, .. } => {
                // The worker enforces the log limits; the host holds no more than they allow
                // even from a worker that does not (the tail and markers aside).
                held_log_bytes += message.len() + LOG_LINE_OVERHEAD_BYTES;
                if logs.len() < log_lines_held && held_log_bytes <= log_bytes_held {
                    let line = LogLine { level, message };
                    bridge.logged(&line);
                    logs.push(line);
                }
            }
            WorkerFrame::Done { outcome, stats, .. } => {
                route.done();
                let trace = served.unfinished();
                // A run that hit the memory limit may have left the worker's heap fragmented
                // (a runtime of its own, without the template): retire the worker.
                let worker_ok =
                    outcome.as_ref().err().and_then(|e| e.kind) != Some(ErrorKind::Memory);
                return Ok(Driven::Ran(RawRun {
                    outcome,
                    logs,
                    trace,
                    stats,
                    worker_ok,
                }));
            }
            other => {
                worker.fail(format!(
                    "the sandbox worker failed: it sent an unexpected frame {other:?}"
                ));
                drop(reader);
                return Ok(Driven::Ran(lost_worker(worker, logs, served)));
            }
        }
    }
}

/// The next frame from the worker's output, if this execution reads for the worker; else
/// never.
async fn read(reader: &mut Option<OutputGuard>) -> Next {
    match reader.as_mut() {
        Some(output) => output.next().await,
        None => std::future::pending().await,
    }
}

/// The worker's output, held by the execution that reads for the worker.
type OutputGuard = tokio::sync::OwnedMutexGuard<super::output::WorkerOutput>;

/// Closes the run's route however the driver ends; stops the run in the worker if it did not
/// end there.
struct RouteGuard<'a> {
    worker: &'a Arc<WorkerHandle>,
    run: u64,
}

impl RouteGuard<'_> {
    /// The run ended in the worker: its route goes, nothing more to stop.
    fn done(&mut self) {
        self.worker.close_route(self.run);
        self.run = 0;
    }

    /// Asks the worker to end the run (through the control page if it computes, and a
    /// `Cancel` frame if it waits).
    fn stop(&mut self) {
        if self.run == 0 {
            return;
        }
        self.worker.request_stop(self.run);
        if let Ok(frame) = encode_frame(&HostFrame::Cancel { run: self.run }) {
            let _ = self.worker.input.send(&frame);
        }
        self.worker.close_route(self.run);
        self.run = 0;
    }
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a run reports when its worker is gone: the reason, the calls that completed (any of
/// which may have changed state) and those that were still out.
fn lost_worker(worker: &WorkerHandle, logs: Vec<LogLine>, served: Served) -> RawRun {
    let why = worker
        .gone()
        .unwrap_or_else(|| "the sandbox worker was lost".into());
    let trace = served.unfinished();
    let completed: Vec<&str> = trace
        .iter()
        .filter(|c| c.duration_ms.is_some())
        .map(|c| c.name.as_str())
        .collect();
    let calls = if completed.is_empty() {
        "no call had completed".to_string()
    } else {
        format!(
            "{} call(s) had completed and may have changed state: {}",
            completed.len(),
            completed.join(", ")
        )
    };
    let message = format!("{why}; this execution was on it and was stopped, not retried ({calls})");
    RawRun::lost(ErrorKind::Internal, "InternalError", message, logs, trace)
}

/// The calls of one run: what finished, what is still out, and answers not yet written.
#[derive(Default)]
struct Served {
    /// (call id, record): ids grow in the order the code made the calls.
    trace: Vec<(u64, CallRecord)>,
    in_flight: Vec<InFlight>,
    /// Encoded `Reply` frames to send.
    replies: Vec<u8>,
    /// What is left of the bytes of arguments the call list may keep.
    argument_budget: usize,
}

/// A call made and not yet answered.
struct InFlight {
    id: u64,
    name: String,
    args_bytes: usize,
    /// Milliseconds from the start of the execution.
    at: f64,
    /// Its arguments, when the call list keeps them.
    arguments: Option<String>,
}

impl Served {
    /// Records a finished call and queues its answer.
    fn answer(&mut self, run: u64, done: CallDone) -> Result<(), ExecError> {
        let (id, args_bytes, name, at, end, result) = done;
        let arguments = self
            .in_flight
            .iter()
            .position(|c| c.id == id)
            .and_then(|i| self.in_flight.swap_remove(i).arguments);
        let (ok, result_bytes, error) = match &result {
            // A tool that answered with `isError` failed, even though the call went through.
            Ok(answer) if answer.is_error => (
                false,
                answer.json.len(),
                Some(error_result_text(&answer.json)),
            ),
            Ok(answer) => (true, answer.json.len(), None),
            Err(f) => (false, 0, Some(f.message.clone())),
        };
        let condition = result.as_ref().err().and_then(|f| f.condition);
        let result = result.map(|answer| answer.json);
        self.trace.push((
            id,
            CallRecord {
                name,
                args_bytes,
                started_ms: at,
                duration_ms: Some(end - at),
                ok,
                result_bytes,
                error,
                arguments,
                condition,
            },
        ));
        write_frame(&mut self.replies, &HostFrame::Reply { run, id, result })
            .map_err(|e| internal(&e.to_string()))?;
        Ok(())
    }

    /// The trace in the order the code made the calls, with the calls still out marked
    /// unfinished.
    fn unfinished(self) -> Vec<CallRecord> {
        let mut trace = self.trace;
        for call in self.in_flight {
            let error = Some("unfinished when the execution ended".to_string());
            trace.push((
                call.id,
                CallRecord {
                    name: call.name,
                    args_bytes: call.args_bytes,
                    started_ms: call.at,
                    duration_ms: None,
                    ok: false,
                    result_bytes: 0,
                    error,
                    arguments: call.arguments,
                    condition: None,
                },
            ));
        }
        trace.sort_by_key(|(id, _)| *id);
        trace.into_iter().map(|(_, record)| record).collect()
    }
}

fn refused(message: String) -> BoxFuture<'static, Result<ToolAnswer, CallFailure>> {
    Box::pin(async move { Err(CallFailure::new(FailureKind::Denied, message)) })
}

/// What an error result says: the text of its content, cut to 500 characters (a call list
/// that said only "the tool returned an error result" hid why).
fn error_result_text(json: &str) -> String {
    const SHOWN: usize = 500;
    let said = serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|result| {
            let texts: Vec<String> = result
                .get("content")?
                .as_array()?
                .iter()
                .filter_map(|c| c.get("text").and_then(serde_json::Value::as_str))
                .map(str::to_string)
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        });
    match said {
        Some(text) if text.chars().count() > SHOWN => {
            let cut: String = text.chars().take(SHOWN).collect();
            format!("the tool returned an error: {cut}…")
        }
        Some(text) => format!("the tool returned an error: {text}"),
        None => "the tool returned an error result".to_string(),
    }
}

/// A host function's answer as a call's: host functions have no error results.
fn host_answer(
    call: BoxFuture<'static, Result<String, CallFailure>>,
) -> BoxFuture<'static, Result<ToolAnswer, CallFailure>> {
    Box::pin(async move {
        call.await.map(|json| ToolAnswer {
            json,
            is_error: false,
        })
    })
}
