//! The worker pool: warm, locked-down worker processes, each holding many executions at once.
//!
//! | piece | what it does |
//! |---|---|
//! | [`Pool::run`] | admits an execution (or answers `busy`, naming the limit), picks a worker, and drives the run |
//! | `handle` | one worker process: its input, its output, its routes from runs to executions, its control page |
//! | `drive` | serving one execution: its calls through the [`Bridge`], its logs, its end |
//! | `stderr` | a worker's standard error: a pipe of its own, drained into the gateway's log |
//! | the watchdog | kills a worker stuck in one turn past every deadline on it, notices exits, keeps the base count, ends retired workers |
//!
//! **Dispatch.** An execution goes to the worker with the fewest executions in flight among
//! those that are not computing (in one turn for [`COMPUTING_SLICE`] or more). When every worker
//! is computing, the pool starts an extra worker, up to `max_workers`, so that new executions
//! do not queue behind CPU-bound ones; an extra worker ends once it has no executions. Past
//! `max_workers`, the least-loaded worker takes it anyway. Runs already sent to a worker that
//! then computes, and not yet started there, are moved: the watchdog tells their drivers to
//! go elsewhere and the worker to skip them (a run whose frames the host has seen never
//! moves, so no call is made twice).
//!
//! **Admission** is about executions in flight (`max_executions`) and memory (each worker
//! refuses a run when its parked executions hold too much, see `scheduler`), never about the
//! number of workers: a waiting execution holds no worker.
//!
//! **Blast radius.** Killing a worker (its deadline backstop, or a crash) fails the executions
//! that were on it, and only those, each with an `internal` error that lists the calls it had
//! completed. Nothing is retried. A cancelled or timed-out execution is stopped inside its
//! worker (through the control page if it is computing), and the worker lives on.

mod bridge;
mod drive;
mod handle;
pub(crate) mod raw_run;
pub(crate) mod output;
mod stderr;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::error::SandboxError;
use crate::worker::lockdown::Protections;
use crate::wire::protocol::HostFrame;
use crate::host::result::{ErrorKind, ExecError};
pub use bridge::Bridge;
use drive::{Callees, Driven, Job, drive};
pub(crate) use handle::lock;
use raw_run::{RawRun, internal};
use handle::{Reported, WorkerHandle, spawn};

/// A worker in one turn for this long is computing: new executions go elsewhere.
pub const COMPUTING_SLICE: Duration = Duration::from_millis(20);

/// How many times an execution may be moved off a computing worker before it starts; after
/// that it waits where it is.
const MAX_MOVES: u32 = 3;

/// How often the watchdog looks at the workers.
const WATCH_INTERVAL: Duration = Duration::from_millis(25);

/// How much longer than the host's give-up grace a turn may outlive every deadline on its
/// worker before the worker is killed. The answer does not wait for it (the host has already
/// given up on the run); it keeps a worker that a loaded machine merely did not schedule for a
/// moment past a deadline from being killed as if it were stuck in native code.
const WATCHDOG_SLACK: Duration = Duration::from_millis(400);

/// How long a worker polls for a tool call's reply before it sleeps, when a core is spare. An
/// in-process tool answers well within it; a remote one costs the worker this much extra CPU.
const WORKER_SPIN: Duration = Duration::from_micros(30);

/// How the pool runs workers.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// The worker executable.
    pub program: PathBuf,
    /// Its arguments (e.g. a hidden subcommand when the gateway binary re-executes itself;
    /// add [`crate::worker::NO_TEMPLATE_ARG`] to build a runtime per execution).
    pub args: Vec<String>,
    /// Warm workers, kept running.
    pub workers: usize,
    /// Workers at most, extra ones included (started while every worker computes).
    pub max_workers: usize,
    /// Executions in flight at once, waiting ones included, before callers get `busy`.
    pub max_executions: usize,
    /// Runs after which a worker is retired (it ends once its runs have) and replaced.
    pub recycle_after: u32,
    /// Time past an execution's wall time before the host gives up on it; a turn that has not
    /// ended this long (plus 400 ms of slack) past the longest wall time on its worker gets the
    /// worker killed.
    pub kill_grace: Duration,
    /// Refuse to start unless every lockdown protection is active.
    pub require_lockdown: bool,
}

impl PoolConfig {
    /// Defaults for a worker program: one worker per core, up to four times as many while
    /// they compute (measured: docs/BENCHMARKS.md, the mixed load), 2,048 executions in
    /// flight, recycling after 500 runs, 100 ms grace.
    pub fn new(program: impl Into<PathBuf>) -> PoolConfig {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        PoolConfig {
            program: program.into(),
            args: vec![],
            workers: cores,
            max_workers: cores * 4,
            max_executions: 2048,
            recycle_after: 500,
            kill_grace: Duration::from_millis(100),
            require_lockdown: false,
        }
    }
}

/// A pool of worker processes.
pub struct Pool {
    config: PoolConfig,
    workers: Mutex<Vec<Arc<WorkerHandle>>>,
    /// Executions in flight.
    admitted: AtomicUsize,
    /// Workers being started (extra or replacement).
    starting: AtomicUsize,
    /// Workers the watchdog killed because one step outlived every deadline on them.
    backstop_kills: AtomicUsize,
    closed: AtomicBool,
    protections: Protections,
    template_bytes: Option<u64>,
    /// Every run gets a runtime no run used before, so a stopped or failed run leaves its
    /// worker fit for the next.
    fresh_per_run: bool,
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

/// One worker, as [`Pool::workers`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInfo {
    /// Its process id.
    pub pid: Option<u32>,
    /// Executions on it now.
    pub executions: usize,
    /// Whether it was started beyond the base count.
    pub extra: bool,
}

impl Pool {
    /// Starts the pool with all its workers warm, and its watchdog.
    pub async fn start(config: PoolConfig) -> Result<Arc<Pool>, SandboxError> {
        let base = config.workers.max(1);
        let mut workers = Vec::with_capacity(base);
        let mut reported = Reported::default();
        for _ in 0..base {
            let (worker, report) = spawn(&config.program, &config.args, false).await?;
            reported = report;
            workers.push(worker);
        }
        let Reported {
            protections,
            template_bytes,
            fresh_per_run,
        } = reported;
        if config.require_lockdown && !protections.all_active() {
            for worker in &workers {
                worker.stop();
            }
            return Err(SandboxError::LockdownUnavailable {
                missing: protections.missing(),
            });
        }
        let pool = Arc::new(Pool {
            workers: Mutex::new(workers),
            admitted: AtomicUsize::new(0),
            starting: AtomicUsize::new(0),
            backstop_kills: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            config,
            protections,
            template_bytes,
            fresh_per_run,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        });
        tokio::spawn(watch(Arc::downgrade(&pool)));
        Ok(pool)
    }

    /// Stops every worker and waits for each to exit. For shutting down (after the executions
    /// were cancelled): the pool takes no new executions and starts no workers after.
    pub async fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let workers: Vec<Arc<WorkerHandle>> = std::mem::take(&mut *lock(&self.workers));
        for worker in &workers {
            worker.fail("the sandbox is shutting down".into());
        }
        let until = tokio::time::Instant::now() + Duration::from_secs(2);
        for worker in workers {
            while !worker.check_exited() && tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }

    /// Whether a core is free for spinning instead of sleeping: each execution running needs
    /// one for its worker and, while it waits, one for the host.
    fn has_spare_core(&self) -> bool {
        self.admitted.load(Ordering::Relaxed) * 2 <= self.cores
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

    /// How many workers the watchdog has killed because one step of an execution outlived
    /// every deadline on them (the backstop behind the interrupt handler; expected: never).
    pub fn backstop_kills(&self) -> usize {
        self.backstop_kills.load(Ordering::Relaxed)
    }

    /// The live workers.
    pub fn workers(&self) -> Vec<WorkerInfo> {
        lock(&self.workers)
            .iter()
            .filter(|w| w.gone().is_none())
            .map(|w| WorkerInfo {
                pid: w.pid(),
                executions: w.in_flight.load(Ordering::Relaxed),
                extra: w.elastic,
            })
            .collect()
    }

    /// Runs wrapped JavaScript on a worker; `positions` map its positions to the user's code.
    pub(crate) async fn run(
        self: &Arc<Self>,
        js: String,
        positions: &crate::host::transpile::PositionMap,
        execution: &crate::host::sandbox::Execution,
        bridge: Arc<dyn Bridge>,
        cancelled: impl Future<Output = ()> + Send,
    ) -> Result<RawRun, ExecError> {
        let (tools, host_functions) = (&execution.tools, &execution.host_functions);
        let (context, limits) = (execution.context.clone(), execution.limits);
        let mut cancelled = std::pin::pin!(cancelled);
        // Executions in flight; the guard gives the place back however this function ends.
        let admitted = Admission::enter(&self.admitted);
        if admitted.count > self.config.max_executions {
            return Err(ExecError {
                kind: ErrorKind::Busy,
                message: format!(
                    "the sandbox is busy: {} executions are in flight, its limit (sandbox.max_executions)",
                    self.config.max_executions
                ),
                line: None,
                column: None,
                hint: Some("Retry shortly.".into()),
                fault: None,
            });
        }
        if self.closed.load(Ordering::SeqCst) {
            return Err(internal("the sandbox pool is shut down"));
        }
        let reply_spin_micros = if self.has_spare_core() {
            WORKER_SPIN.as_micros() as u32
        } else {
            0
        };
        let frame = |run: u64, known: bool| HostFrame::Run {
            run,
            js: js.clone(),
            // A gateway gives every execution the same tool set (one `Arc` until the catalog
            // changes), so it crosses to a worker once, not with every run.
            tools: (!known).then(|| tools.as_ref().clone()),
            host_functions: host_functions.as_ref().clone(),
            env: execution.env.as_ref().clone(),
            context: context.clone(),
            limits,
            reply_spin_micros,
            mode: execution.mode,
        };
        let mut job = Job {
            frame: &frame,
            callees: Callees {
                tools,
                host_functions,
                bridge,
                positions,
            },
            wall: limits.wall_time(),
            max_log_lines: limits.max_log_lines as usize,
            max_log_bytes: limits.max_log_bytes,
            recorded_argument_bytes: limits.max_recorded_argument_bytes,
            movable: true,
        };
        let mut moves = 0;
        loop {
            let worker = tokio::select! {
                worker = self.worker_for_run() => worker?,
                () = &mut cancelled => return Err(crate::host::direct::cancelled_error()),
            };
            // Moved a few times already: it stays where it lands next.
            job.movable = moves < MAX_MOVES;
            let on_worker = OnWorker::enter(&worker);
            worker.runs.fetch_add(1, Ordering::Relaxed);
            let outcome = drive(
                &worker,
                &job,
                self.config.kill_grace,
                || self.has_spare_core(),
                cancelled.as_mut(),
            )
            .await;
            // A worker that builds a runtime per run keeps what a run that ran out of memory
            // left of its heap: retire it. (From the template, or in a V8 isolate of its own,
            // every run leaves nothing behind.)
            let healthy = match &outcome {
                Ok(Driven::Ran(run)) => run.worker_ok || self.fresh_per_run,
                Ok(Driven::Moved) => true,
                Err(_) => self.fresh_per_run,
            };
            if !healthy || worker.runs.load(Ordering::Relaxed) >= self.config.recycle_after {
                worker.retiring.store(true, Ordering::Relaxed);
            }
            // An extra worker ends once it is empty.
            if worker.elastic && worker.in_flight.load(Ordering::SeqCst) == 1 {
                worker.retiring.store(true, Ordering::Relaxed);
            }
            drop(on_worker);
            match outcome? {
                Driven::Ran(run) => return Ok(run),
                // Moved off a computing worker before it started: at most `MAX_MOVES` times,
                // then it stays where it lands.
                Driven::Moved => moves += 1,
            }
        }
    }

    /// The worker for a new run (see the module docs).
    async fn worker_for_run(self: &Arc<Self>) -> Result<Arc<WorkerHandle>, ExecError> {
        let (ready, busiest_fallback, total) = {
            let workers = lock(&self.workers);
            let available = workers.iter().filter(|w| w.available());
            let ready = available
                .clone()
                .filter(|w| !w.computing_for(COMPUTING_SLICE))
                .min_by_key(|w| w.in_flight.load(Ordering::Relaxed))
                .cloned();
            let fallback = available
                .min_by_key(|w| w.in_flight.load(Ordering::Relaxed))
                .cloned();
            let total = workers.iter().filter(|w| w.gone().is_none()).count();
            (ready, fallback, total)
        };
        if let Some(worker) = ready {
            return Ok(worker);
        }
        let room = total + self.starting.load(Ordering::Relaxed) < self.config.max_workers.max(1);
        if (room || busiest_fallback.is_none()) && !self.closed.load(Ordering::SeqCst) {
            let elastic = busiest_fallback.is_some();
            match self.add_worker(elastic).await {
                Ok(worker) => return Ok(worker),
                Err(e) if busiest_fallback.is_none() => return Err(internal(&e.to_string())),
                Err(_) => {}
            }
        }
        busiest_fallback.ok_or_else(|| internal("no sandbox worker is available"))
    }

    /// Whether a run moved off `busy` could start elsewhere now: another worker that takes
    /// runs and is not computing, or room for an extra one.
    fn has_room_elsewhere(&self, busy: &Arc<WorkerHandle>) -> bool {
        let workers = lock(&self.workers);
        let free = workers
            .iter()
            .any(|w| !Arc::ptr_eq(w, busy) && w.available() && !w.computing_for(COMPUTING_SLICE));
        let live = workers.iter().filter(|w| w.gone().is_none()).count();
        free || live + self.starting.load(Ordering::Relaxed) < self.config.max_workers
    }

    /// Starts a worker and adds it to the pool.
    async fn add_worker(&self, elastic: bool) -> Result<Arc<WorkerHandle>, SandboxError> {
        self.starting.fetch_add(1, Ordering::SeqCst);
        let spawned = spawn(&self.config.program, &self.config.args, elastic).await;
        self.starting.fetch_sub(1, Ordering::SeqCst);
        let (worker, _) = spawned?;
        if self.closed.load(Ordering::SeqCst) {
            worker.stop();
            return Err(SandboxError::WorkerStart(
                "the sandbox is shutting down".into(),
            ));
        }
        lock(&self.workers).push(worker.clone());
        Ok(worker)
    }
}

/// The watchdog: every [`WATCH_INTERVAL`], for as long as the pool lives.
async fn watch(pool: Weak<Pool>) {
    let mut ticks = tokio::time::interval(WATCH_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(pool) = pool.upgrade() else { return };
        if pool.closed.load(Ordering::SeqCst) {
            return;
        }
        let workers: Vec<Arc<WorkerHandle>> = lock(&pool.workers).clone();
        for worker in &workers {
            if worker.gone().is_some() {
                continue;
            }
            if worker.check_exited() {
                continue;
            }
            // A turn belongs to one execution, which its interrupt handler stops at its
            // deadline: a turn older than every deadline on the worker is stuck in native code.
            // Runs waiting in the pipe of a worker that computes go where they can start now.
            if worker.computing_for(COMPUTING_SLICE) && pool.has_room_elsewhere(worker) {
                worker.move_unstarted();
            }
            let limit = worker.longest_wall() + pool.config.kill_grace + WATCHDOG_SLACK;
            if worker.computing_for(limit) {
                pool.backstop_kills.fetch_add(1, Ordering::Relaxed);
                worker.fail(format!(
                    "the sandbox worker was killed: one step of an execution on it ran past every deadline there ({limit:?})"
                ));
            }
        }
        // Workers that are gone or retired, and hold no executions, leave the pool.
        lock(&pool.workers).retain(|worker| {
            let idle = worker.in_flight.load(Ordering::Relaxed) == 0;
            let leaving = worker.gone().is_some() || worker.retiring.load(Ordering::Relaxed);
            if leaving && idle {
                worker.stop();
                return false;
            }
            true
        });
        // Keep the base count of workers that take runs.
        let serving = lock(&pool.workers)
            .iter()
            .filter(|w| w.available() && !w.elastic)
            .count();
        let missing = pool.config.workers.max(1).saturating_sub(serving);
        if missing > 0 && pool.starting.load(Ordering::SeqCst) == 0 {
            let pool = pool.clone();
            tokio::spawn(async move {
                let _ = pool.add_worker(false).await;
            });
        }
    }
}

/// A place among the executions in flight, given back on drop.
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

/// An execution on a worker, counted there until drop.
struct OnWorker<'a> {
    worker: &'a WorkerHandle,
}

impl<'a> OnWorker<'a> {
    fn enter(worker: &'a WorkerHandle) -> Self {
        worker.in_flight.fetch_add(1, Ordering::SeqCst);
        OnWorker { worker }
    }
}

impl Drop for OnWorker<'_> {
    fn drop(&mut self) {
        self.worker.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

