//! The worker pool: warm, locked-down worker processes, one execution each at a time.
//!
//! Workers are spawned ahead of time. An execution takes an idle worker (waiting in a bounded
//! FIFO queue when all are busy, answering `busy` when the queue is full), sends it the run,
//! and serves its calls through the [`Bridge`] concurrently while logs and finished calls
//! stream back. The host kills a worker that passes the wall deadline plus a grace period, so
//! even a worker stuck in native code cannot hold an execution. A worker is recycled after a
//! number of runs and replaced at once after any fault.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::SandboxError;
use crate::limits::LOG_LINE_OVERHEAD_BYTES;
use crate::lockdown::Protections;
use crate::protocol::{
    CallFailure, Callee, GuestError, HostFrame, RunStats, ToolBinding, WorkerFrame, encode_frame,
    write_frame,
};
use crate::result::{CallRecord, ErrorKind, ExecError, LogLine};
use crate::worker_output::{Next, WorkerOutput};

/// How long a new worker has to lock down and report ready.
const SPAWN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the host polls a computing worker's output before it sleeps, when a core is spare
/// (see `worker_output`). Long enough for a short script or the stretch between two tool calls.
const HOST_SPIN: Duration = Duration::from_micros(100);

/// How long a worker polls for a tool call's reply before it sleeps, when a core is spare. An
/// in-process tool answers well within it; a remote one costs the worker this much extra CPU.
const WORKER_SPIN: Duration = Duration::from_micros(30);

/// Log lines and bytes the host holds beyond an execution's log limits: the worker's marker and
/// the tail it keeps of what it dropped.
const LOG_SLACK_LINES: usize = 64;
const LOG_SLACK_BYTES: usize = 64 * 1024;

/// Where calls from the guest go. The gateway implements it over its backends; an embedding
/// service implements it over its own functions.
pub trait Bridge: Send + Sync + 'static {
    /// Calls a tool; `args` is JSON text. Returns the raw MCP result as JSON text.
    fn call_tool(
        &self,
        tool: &ToolBinding,
        args: String,
    ) -> BoxFuture<'static, Result<String, CallFailure>>;
    /// Calls a named host function; `args` is a JSON array. Returns JSON text.
    fn call_host(
        &self,
        name: &str,
        _args: String,
    ) -> BoxFuture<'static, Result<String, CallFailure>> {
        let message = format!("host function `{name}` is not implemented");
        Box::pin(async move {
            Err(CallFailure {
                kind: "internal".into(),
                message,
            })
        })
    }
}

/// How the pool runs workers.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// The worker executable.
    pub program: PathBuf,
    /// Its arguments (e.g. a hidden subcommand when the gateway binary re-executes itself;
    /// add [`crate::worker::NO_TEMPLATE_ARG`] to build a runtime per execution).
    pub args: Vec<String>,
    /// Warm workers (and the most executions at once).
    pub workers: usize,
    /// Executions that may wait for a worker before callers get `busy`.
    pub max_queue: usize,
    /// Runs after which a worker is replaced.
    pub recycle_after: u32,
    /// Time past the wall deadline before the host kills the worker.
    pub kill_grace: Duration,
    /// Refuse to start unless every lockdown protection is active.
    pub require_lockdown: bool,
}

impl PoolConfig {
    /// Defaults for a worker program: one worker per core, a queue of 1024, recycling after
    /// 500 runs, 100 ms grace.
    pub fn new(program: impl Into<PathBuf>) -> PoolConfig {
        PoolConfig {
            program: program.into(),
            args: vec![],
            workers: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            max_queue: 1024,
            recycle_after: 500,
            kill_grace: Duration::from_millis(100),
            require_lockdown: false,
        }
    }
}

/// A worker process and the frames it sends (read in place: no extra task or channel hop).
struct Worker {
    child: Child,
    stdin: ChildStdin,
    output: WorkerOutput,
    runs: u32,
    /// The tools last sent to this worker, which it keeps for the next run.
    tools: Option<Arc<Vec<ToolBinding>>>,
}

/// A pool of worker processes.
pub struct Pool {
    config: PoolConfig,
    /// Idle workers, longest idle first: a worker prepares its next fresh runtime right after a
    /// run, so the one that has waited longest is the most likely to have it ready.
    idle: Mutex<VecDeque<Worker>>,
    slots: Semaphore,
    admitted: AtomicUsize,
    protections: Protections,
    template_bytes: Option<u64>,
    /// CPUs this process may use.
    cores: usize,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("config", &self.config)
            .field("protections", &self.protections)
            .field("template_bytes", &self.template_bytes)
            .finish()
    }
}

/// What a run on a worker produced, before hints.
pub(crate) struct RawRun {
    pub outcome: Result<String, GuestError>,
    pub logs: Vec<LogLine>,
    pub trace: Vec<CallRecord>,
    pub stats: RunStats,
    /// Whether the worker can take another run.
    pub worker_ok: bool,
}

impl RawRun {
    /// A run whose worker is gone (killed or failed): what it reported so far, and why.
    fn lost(
        kind: &str,
        name: &str,
        message: String,
        logs: Vec<LogLine>,
        trace: Vec<CallRecord>,
    ) -> RawRun {
        let error = GuestError {
            kind: Some(kind.into()),
            name: name.into(),
            message,
            stack: String::new(),
        };
        RawRun {
            outcome: Err(error),
            logs,
            trace,
            stats: RunStats::default(),
            worker_ok: false,
        }
    }
}

impl Pool {
    /// Starts the pool with all its workers warm.
    pub async fn start(config: PoolConfig) -> Result<Arc<Pool>, SandboxError> {
        let mut workers = Vec::with_capacity(config.workers);
        let mut reported = Reported::default();
        for _ in 0..config.workers.max(1) {
            let (worker, report) = spawn(&config).await?;
            reported = report;
            workers.push(worker);
        }
        let Reported {
            protections,
            template_bytes,
        } = reported;
        if config.require_lockdown && !protections.all_active() {
            return Err(SandboxError::LockdownUnavailable {
                missing: protections.missing(),
            });
        }
        Ok(Arc::new(Pool {
            slots: Semaphore::new(config.workers.max(1)),
            idle: Mutex::new(workers.into()),
            admitted: AtomicUsize::new(0),
            config,
            protections,
            template_bytes,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }))
    }

    /// Kills every idle worker and waits for each to exit (workers running an execution are
    /// killed by its cancellation). For shutting down: the pool makes no new workers after.
    pub async fn shutdown(&self) {
        self.slots.close();
        let idle: Vec<Worker> = match self.idle.lock() {
            Ok(mut idle) => idle.drain(..).collect(),
            Err(poisoned) => poisoned.into_inner().drain(..).collect(),
        };
        for mut worker in idle {
            let _ = worker.child.start_kill();
            let _ = worker.child.wait().await;
        }
    }

    /// Whether a core is free for spinning instead of sleeping: each execution running needs
    /// one for its worker and, while it waits, one for the host.
    fn has_spare_core(&self) -> bool {
        let running = self.config.workers.max(1) - self.slots.available_permits();
        running * 2 <= self.cores
    }

    /// Which protections the workers run with.
    pub fn protections(&self) -> &Protections {
        &self.protections
    }

    /// Size of the template image workers copy each execution's runtime from, or `None` if
    /// they build a runtime per execution.
    pub fn template_bytes(&self) -> Option<u64> {
        self.template_bytes
    }

    /// Runs wrapped JavaScript on a worker.
    pub(crate) async fn run(
        self: &Arc<Self>,
        js: String,
        execution: &crate::Execution,
        bridge: Arc<dyn Bridge>,
        cancelled: impl Future<Output = ()> + Send,
    ) -> Result<RawRun, ExecError> {
        let (tools, host_functions) = (&execution.tools, &execution.host_functions);
        let (context, limits) = (execution.context.clone(), execution.limits);
        let mut cancelled = std::pin::pin!(cancelled);
        // Executions admitted (running or queued); the guard gives the place back however this
        // function ends.
        let admitted = Admission::enter(&self.admitted);
        if admitted.count > self.config.max_queue + self.config.workers {
            return Err(ExecError {
                kind: ErrorKind::Busy,
                message: format!(
                    "the sandbox is busy: {} executions are running and {} waiting",
                    self.config.workers, self.config.max_queue
                ),
                line: None,
                column: None,
                hint: Some("Retry shortly.".into()),
            });
        }
        let permit = tokio::select! {
            permit = self.slots.acquire() => permit,
            () = &mut cancelled => return Err(crate::direct::cancelled_error()),
        };
        let _permit = permit.map_err(|_| internal("the sandbox pool is shut down"))?;
        let idle = self.idle.lock().ok().and_then(|mut idle| idle.pop_front());
        let mut worker = match idle {
            Some(worker) => worker,
            None => spawn(&self.config)
                .await
                .map(|(w, _)| w)
                .map_err(|e| internal(&e.to_string()))?,
        };
        // A gateway gives every execution the same tool set (one `Arc` until the catalog
        // changes), so it crosses to a worker once, not with every run.
        let known = worker
            .tools
            .as_ref()
            .is_some_and(|sent| Arc::ptr_eq(sent, tools) || sent == tools);
        if !known {
            worker.tools = Some(tools.clone());
        }
        let run = HostFrame::Run {
            js,
            tools: (!known).then(|| tools.as_ref().clone()),
            host_functions: host_functions.as_ref().clone(),
            context,
            limits,
            reply_spin_micros: if self.has_spare_core() {
                WORKER_SPIN.as_micros() as u32
            } else {
                0
            },
        };
        let callees = Callees {
            tools,
            host_functions,
            bridge,
        };
        let outcome = drive(
            &mut worker,
            &run,
            callees,
            limits.wall_time() + self.config.kill_grace,
            || self.has_spare_core(),
            cancelled,
        )
        .await;
        worker.runs += 1;
        let healthy = outcome.as_ref().is_ok_and(|r| r.worker_ok);
        if healthy && worker.runs < self.config.recycle_after {
            if let Ok(mut idle) = self.idle.lock() {
                idle.push_back(worker);
            }
        } else {
            let _ = worker.child.start_kill();
            if self.slots.is_closed() {
                return outcome;
            }
            let pool = self.clone();
            tokio::spawn(async move {
                if let Ok((fresh, _)) = spawn(&pool.config).await
                    && let Ok(mut idle) = pool.idle.lock()
                {
                    idle.push_back(fresh);
                }
            });
        }
        outcome
    }
}

/// A place among the admitted executions, given back on drop.
struct Admission<'a> {
    counter: &'a AtomicUsize,
    /// How many are admitted, this one included.
    count: usize,
}

impl<'a> Admission<'a> {
    fn enter(counter: &'a AtomicUsize) -> Self {
        let count = counter.fetch_add(1, Ordering::SeqCst) + 1;
        Admission { counter, count }
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, Ordering::SeqCst);
    }
}

fn internal(message: &str) -> ExecError {
    ExecError {
        kind: ErrorKind::Internal,
        message: message.to_string(),
        line: None,
        column: None,
        hint: None,
    }
}

/// What a worker reports when it is ready.
#[derive(Default)]
struct Reported {
    protections: Protections,
    template_bytes: Option<u64>,
}

/// Starts one worker and waits for it to report ready.
async fn spawn(config: &PoolConfig) -> Result<(Worker, Reported), SandboxError> {
    let mut child = Command::new(&config.program)
        .args(&config.args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        // A group of its own: a Ctrl-C in the gateway's terminal reaches the gateway, which
        // cancels and stops its workers, rather than killing them under running executions.
        .process_group(0)
        .spawn()
        .map_err(|source| SandboxError::Spawn {
            program: config.program.clone(),
            source,
        })?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(SandboxError::Spawn {
            program: config.program.clone(),
            source: std::io::Error::other("no pipes"),
        });
    };
    let output = WorkerOutput::new(stdout).map_err(|source| SandboxError::Spawn {
        program: config.program.clone(),
        source,
    })?;
    let mut worker = Worker {
        child,
        stdin,
        output,
        runs: 0,
        tools: None,
    };
    let ready = tokio::time::timeout(SPAWN_TIMEOUT, worker.output.next()).await;
    match ready {
        Ok(Some(Ok(WorkerFrame::Ready {
            protections,
            template_bytes,
        }))) => Ok((
            worker,
            Reported {
                protections: Protections {
                    active: protections,
                },
                template_bytes,
            },
        )),
        Ok(other) => Err(SandboxError::WorkerStart(format!(
            "expected a Ready frame, got {other:?}"
        ))),
        Err(_) => Err(SandboxError::WorkerStart(format!(
            "no Ready frame within {SPAWN_TIMEOUT:?}"
        ))),
    }
}

type CallDone = (u64, usize, String, f64, f64, Result<String, CallFailure>);

/// What the host reacts to while it serves a run.
enum Event {
    Frame(Next),
    CallDone(CallDone),
    Deadline,
    Cancelled,
}

/// Sends a run and serves it until the worker says it is done or the deadline passes.
/// `spare_core` says whether the host may poll the worker's output instead of sleeping.
/// What a run's calls go to: the execution's tools and host functions, by index, and the
/// bridge that serves them.
struct Callees<'a> {
    tools: &'a [ToolBinding],
    host_functions: &'a [String],
    bridge: Arc<dyn Bridge>,
}

async fn drive(
    worker: &mut Worker,
    run: &HostFrame,
    callees: Callees<'_>,
    hard_limit: Duration,
    spare_core: impl Fn() -> bool,
    mut cancelled: std::pin::Pin<&mut impl Future<Output = ()>>,
) -> Result<RawRun, ExecError> {
    let Callees {
        tools,
        host_functions,
        bridge,
    } = callees;
    let started = Instant::now();
    let deadline = started + hard_limit;
    let body = encode_frame(run).map_err(|e| internal(&e.to_string()))?;
    worker
        .stdin
        .write_all(&body)
        .await
        .map_err(|e| internal(&format!("cannot reach the sandbox worker: {e}")))?;
    let mut logs = Vec::new();
    let (log_lines_held, log_bytes_held) = match run {
        HostFrame::Run { limits, .. } => (
            limits.max_log_lines as usize + LOG_SLACK_LINES,
            limits.max_log_bytes + LOG_SLACK_BYTES,
        ),
        _ => (LOG_SLACK_LINES, LOG_SLACK_BYTES),
    };
    let mut held_log_bytes = 0usize;
    let mut served = Served::default();
    // Calls whose answer is not ready yet (a tool that answers at once is answered in place).
    let mut calls: FuturesUnordered<BoxFuture<'static, CallDone>> = FuturesUnordered::new();
    let elapsed_ms = |at: Instant| at.duration_since(started).as_secs_f64() * 1000.0;
    let deadline_passed = tokio::time::sleep_until(deadline);
    tokio::pin!(deadline_passed);
    loop {
        // Answers ready to go leave in one write once no more frames are waiting to be read.
        if !served.replies.is_empty() && !worker.output.has_frame() {
            let replies = std::mem::take(&mut served.replies);
            if worker.stdin.write_all(&replies).await.is_err() {
                // The worker is gone; the frame reader reports why on the next turn.
            }
        }
        // While no call is out, the worker is computing: its next frame is close.
        let spun = if calls.is_empty() && served.replies.is_empty() && spare_core() {
            worker.output.spin(HOST_SPIN).map(Event::Frame)
        } else {
            None
        };
        let event = match spun {
            Some(event) => event,
            None => tokio::select! {
                biased;
                Some(first) = calls.next(), if !calls.is_empty() => Event::CallDone(first),
                frame = worker.output.next() => Event::Frame(frame),
                _ = &mut deadline_passed => Event::Deadline,
                () = &mut cancelled => Event::Cancelled,
            },
        };
        match event {
            Event::Frame(frame) => match frame {
                Some(Ok(WorkerFrame::Call { id, callee, args })) => {
                    let args_bytes = args.len();
                    let (name, future) = match callee {
                        Callee::Tool(i) => match tools.get(i as usize) {
                            Some(tool) => (
                                format!("{}.{}", tool.backend, tool.name),
                                bridge.call_tool(tool, args),
                            ),
                            None => (
                                format!("tool #{i}"),
                                refused(format!("no tool #{i} in this execution")),
                            ),
                        },
                        Callee::Host(i) => match host_functions.get(i as usize) {
                            Some(name) => (name.clone(), bridge.call_host(name, args)),
                            None => (
                                format!("host function #{i}"),
                                refused(format!("no host function #{i} in this execution")),
                            ),
                        },
                    };
                    let at = elapsed_ms(Instant::now());
                    served.in_flight.push((id, name.clone(), args_bytes, at));
                    let mut call: BoxFuture<'static, CallDone> = Box::pin(async move {
                        let result = future.await;
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
                        Some(done) => served.answer(done)?,
                        None => calls.push(call),
                    }
                }
                Some(Ok(WorkerFrame::Log { level, message })) => {
                    // The worker enforces the log limits; the host holds no more than they
                    // allow even from a worker that does not (the tail and markers aside).
                    held_log_bytes += message.len() + LOG_LINE_OVERHEAD_BYTES;
                    if logs.len() < log_lines_held && held_log_bytes <= log_bytes_held {
                        logs.push(LogLine { level, message });
                    }
                }
                Some(Ok(WorkerFrame::Done { outcome, stats })) => {
                    let trace = served.unfinished();
                    // A run that hit the memory limit leaves a fragmented heap: replace the worker.
                    let worker_ok =
                        outcome.as_ref().err().and_then(|e| e.kind.as_deref()) != Some("memory");
                    return Ok(RawRun {
                        outcome,
                        logs,
                        trace,
                        stats,
                        worker_ok,
                    });
                }
                other => {
                    let problem = match other {
                        Some(Ok(frame)) => format!("it sent an unexpected frame {frame:?}"),
                        Some(Err(e)) => e,
                        None => "its output closed".to_string(),
                    };
                    let _ = worker.child.start_kill();
                    let status = worker
                        .child
                        .wait()
                        .await
                        .map(|s| format!(" ({s})"))
                        .unwrap_or_default();
                    let message = format!("the sandbox worker failed{status}: {problem}");
                    return Ok(RawRun::lost(
                        "internal",
                        "InternalError",
                        message,
                        logs,
                        served.unfinished(),
                    ));
                }
            },
            Event::CallDone(first) => {
                // Answer every call that is already done together.
                let mut done = Some(first);
                while let Some(call) = done {
                    served.answer(call)?;
                    done = calls.next().now_or_never().flatten();
                }
            }
            Event::Cancelled => {
                // Killed, not asked: a worker running code reads no frames. The calls still
                // out are dropped with this function, which cancels them upstream.
                let _ = worker.child.start_kill();
                return Ok(RawRun::lost(
                    "cancelled",
                    "CancelledError",
                    crate::direct::CANCELLED_MESSAGE.into(),
                    logs,
                    served.unfinished(),
                ));
            }
            Event::Deadline => {
                let _ = worker.child.start_kill();
                let message = format!(
                    "the execution did not finish within its time limit and was stopped (worker killed after {hard_limit:?})"
                );
                return Ok(RawRun::lost(
                    "timeout",
                    "TimeoutError",
                    message,
                    logs,
                    served.unfinished(),
                ));
            }
        }
    }
}

/// The calls of one run: what finished, what is still out, and answers not yet written.
#[derive(Default)]
struct Served {
    /// (call id, record): ids grow in the order the code made the calls.
    trace: Vec<(u64, CallRecord)>,
    /// (call id, name, argument bytes, start in ms).
    in_flight: Vec<(u64, String, usize, f64)>,
    /// Encoded `Reply` frames to send.
    replies: Vec<u8>,
}

impl Served {
    /// Records a finished call and queues its answer.
    fn answer(&mut self, done: CallDone) -> Result<(), ExecError> {
        let (id, args_bytes, name, at, end, result) = done;
        self.in_flight.retain(|c| c.0 != id);
        let (ok, result_bytes, error) = match &result {
            // A tool that answered with `isError` failed, even though the call went through.
            Ok(json) if json.contains("\"isError\":true") => (
                false,
                json.len(),
                Some("the tool returned an error result".to_string()),
            ),
            Ok(json) => (true, json.len(), None),
            Err(f) => (false, 0, Some(f.message.clone())),
        };
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
            },
        ));
        write_frame(&mut self.replies, &HostFrame::Reply { id, result })
            .map_err(|e| internal(&e.to_string()))?;
        Ok(())
    }

    /// The trace in the order the code made the calls, with the calls still out marked
    /// unfinished.
    fn unfinished(self) -> Vec<CallRecord> {
        let mut trace = self.trace;
        for (id, name, args_bytes, at) in self.in_flight {
            let error = Some("unfinished when the execution ended".to_string());
            trace.push((
                id,
                CallRecord {
                    name,
                    args_bytes,
                    started_ms: at,
                    duration_ms: None,
                    ok: false,
                    result_bytes: 0,
                    error,
                },
            ));
        }
        trace.sort_by_key(|(id, _)| *id);
        trace.into_iter().map(|(_, record)| record).collect()
    }
}

fn refused(message: String) -> BoxFuture<'static, Result<String, CallFailure>> {
    Box::pin(async move {
        Err(CallFailure {
            kind: "tool_denied".into(),
            message,
        })
    })
}
