//! The Python engine: a worker process that runs model-written Python on Monty (pydantic's
//! interpreter for a Python subset, written in Rust), behind the same lockdown, frames and pool
//! as the JavaScript engines.
//!
//! Monty pauses at every call to the outside and hands the host the whole interpreter state as
//! an owned value. A run that waits on tools is that value in a map here: no thread, no stack,
//! no region (which is why this worker needs neither QuickJS's template nor its parking). A
//! backend is a host object whose tools are methods; a tool call leaves as the same
//! [`WorkerFrame::Call`] a JavaScript one does, the run goes on with a pending future (so
//! `asyncio.gather` sends several at once), and the reply resolves it.
//!
//! The worker locks itself down ([`crate::worker::lockdown`]) before it reads any code; Monty's
//! own refusals (no imports beyond its few modules, no file or network access of its own) are a
//! second line behind that.

mod capabilities;
mod clock;
mod faults;
mod objects;
mod run;
mod source;
mod values;

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use crate::wire::control;
use crate::wire::protocol::{ErrorKind, GuestError, HostFrame, WorkerFrame};
use crate::worker::engine::{Link, ToolSet};
use run::{Outcome, PyRun};

/// The worker argument that selects this engine.
pub const PYTHON_ARG: &str = "--python";

/// How long the worker waits for input when nothing is due.
const IDLE_WAIT: Duration = Duration::from_secs(3600);

/// The Python worker's `main`: lock down, say ready, serve runs until the host closes stdin.
pub fn main() -> i32 {
    let Some(link) = crate::worker::link::stdio_link() else {
        return 70;
    };
    // The control page, for the host's view of this worker's turns (see `control`).
    let _ = control::attach();
    crate::worker::heap_count::start();
    let protections = crate::worker::lockdown::apply();
    let _ = std::thread::current();
    let ready = WorkerFrame::Ready {
        protections: protections.active,
        template_bytes: None,
        fresh_per_run: false,
    };
    if link.borrow_mut().send(&ready).is_err() {
        return 71;
    }
    let mut link = link.borrow_mut();
    Workers::default().serve(&mut *link)
}

/// The runs of one worker.
#[derive(Default)]
struct Workers {
    runs: HashMap<u64, PyRun>,
    /// The tools of the last run that brought some.
    tools: Option<std::sync::Arc<ToolSet>>,
    /// The next call id (unique within the worker).
    next_call: u64,
}

impl Workers {
    fn serve(mut self, link: &mut dyn Link) -> i32 {
        loop {
            report(false, self.runs.len());
            let due = self.runs.values().map(PyRun::next_wake).min();
            let wait = due.map_or(IDLE_WAIT, |due| due.saturating_duration_since(Instant::now()));
            let frame = match link.recv(wait) {
                Ok(frame) => frame,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return 0,
                Err(_) => return 72,
            };
            let mut out = Vec::new();
            if let Some(frame) = frame
                && let Err(code) = self.on_frame(frame, &mut out)
            {
                return code;
            }
            self.wake(&mut out);
            self.expire(&mut out);
            if !out.is_empty() && link.send_all(&out).is_err() {
                return 73;
            }
        }
    }

    fn on_frame(&mut self, frame: HostFrame, out: &mut Vec<WorkerFrame>) -> Result<(), i32> {
        match frame {
            HostFrame::Run {
                run,
                js,
                tools,
                host_functions,
                limits,
                reply_spin_micros: _,
                ..
            } => {
                report(true, self.runs.len());
                let skipped = control::skip_requested(run);
                control::started(run);
                if skipped {
                    return Ok(());
                }
                if let Some(tools) = tools {
                    self.tools = Some(std::sync::Arc::new(ToolSet::new(tools)));
                }
                let Some(tools) = self.tools.clone() else {
                    return Err(76);
                };
                let mut py = PyRun::new(run, tools, host_functions, limits);
                let outcome = guarded(|| py.start(js, &mut self.next_call, out));
                self.settle(run, py, outcome, out);
            }
            HostFrame::Reply { run, id, result } => {
                if let Some(mut py) = self.runs.remove(&run) {
                    report(true, self.runs.len());
                    let outcome = guarded(|| py.reply(id, result, &mut self.next_call, out));
                    self.settle(run, py, outcome, out);
                }
            }
            HostFrame::Cancel { run } => {
                if let Some(py) = self.runs.remove(&run) {
                    py.finish(Err(run::cancelled()), out);
                }
            }
            #[cfg(any(test, feature = "test-probes"))]
            HostFrame::Probe { what } => out.push(WorkerFrame::ProbeResult {
                outcome: crate::worker::probe::probe(&what),
            }),
        }
        Ok(())
    }

    /// Keeps a waiting run, or sends a finished one's `Done`.
    fn settle(&mut self, run: u64, py: PyRun, outcome: Outcome, out: &mut Vec<WorkerFrame>) {
        match outcome {
            Outcome::Waiting => {
                let mut py = py;
                py.send_logs(out);
                self.runs.insert(run, py);
            }
            Outcome::Done(result) => py.finish(result, out),
        }
    }

    /// Fires the timers that are due.
    fn wake(&mut self, out: &mut Vec<WorkerFrame>) {
        let now = Instant::now();
        let due: Vec<u64> = self
            .runs
            .iter()
            .filter(|(_, py)| py.next_wake() <= now && py.deadline() > now)
            .map(|(run, _)| *run)
            .collect();
        for run in due {
            if let Some(mut py) = self.runs.remove(&run) {
                report(true, self.runs.len());
                let outcome = guarded(|| py.wake(&mut self.next_call, out));
                self.settle(run, py, outcome, out);
            }
        }
    }

    /// Ends every run whose wall time has passed while it waited.
    fn expire(&mut self, out: &mut Vec<WorkerFrame>) {
        let now = Instant::now();
        let late: Vec<u64> = self
            .runs
            .iter()
            .filter(|(_, py)| py.deadline() <= now)
            .map(|(run, _)| *run)
            .collect();
        for run in late {
            if let Some(py) = self.runs.remove(&run) {
                let error = py.timed_out();
                py.finish(Err(error), out);
            }
        }
    }
}

/// Runs one step of the interpreter; a panic in it ends that run alone, as an internal fault.
fn guarded(step: impl FnOnce() -> Outcome) -> Outcome {
    catch_unwind(AssertUnwindSafe(step)).unwrap_or_else(|_| {
        Outcome::Done(Err(GuestError {
            at: None,
            kind: Some(ErrorKind::Internal),
            name: "InternalError".into(),
            message: "the Python interpreter failed on this code (an internal fault of Monty); the worker and other executions go on".into(),
            stack: String::new(),
            fault: None,
        }))
    })
}

/// Publishes whether the worker is in a turn and how many runs it holds.
fn report(turn: bool, runs: usize) {
    if let Some(page) = control::worker_page() {
        let started = if turn { control::now_ns().max(1) } else { 0 };
        page.turn_started_ns
            .store(started, std::sync::atomic::Ordering::Relaxed);
        page.executions
            .store(runs as u64, std::sync::atomic::Ordering::Relaxed);
    }
}
