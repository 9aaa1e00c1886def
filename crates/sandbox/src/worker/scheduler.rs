//! The worker's scheduler: many executions in flight on one thread, each in its own runtime,
//! and whichever has work runs.
//!
//! An execution that awaits a tool or a timer holds nothing of the worker: it is a runtime that
//! waits. The scheduler reads the host's frames (a new run, a reply, a cancel) and the clock,
//! and gives each event to the execution it belongs to, as one step (see `engine::steps`).
//!
//! Where each execution's runtime lives depends on how the worker makes runtimes:
//! - **From the template** (the default): every execution runs in the one heap region, from the
//!   same never-used image. The region holds one execution at a time, the *resident* one; an
//!   execution that must make room for another is parked (its changed pages copied out, the
//!   template's copied back, see `parking`) and unparked when it has work again. A resident
//!   execution that keeps the region (say, three sequential tool calls with nothing else going
//!   on) is never copied at all.
//! - **Built per execution** (`--no-template`, or a worker without a region): each execution
//!   owns its runtime, made with the C allocator.
//!
//! Limits stay per execution: each runtime has its own heap limit, stack limit, deadline,
//! interrupt handler, timers, call counters and log counters. A CPU-bound turn of one execution
//! delays the others on its worker (QuickJS cannot be preempted and resumed), which is why the
//! host gives new executions to workers that are not computing (see `pool`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::wire::control;
use crate::wire::protocol::{CallFailure, ErrorKind, GuestError, HostFrame, WorkerFrame};
use crate::worker::engine::snapshot::Snapshot;
use crate::worker::engine::steps::Step;
use crate::worker::engine::{self, Fresh, RunRequest, SharedLink, ToolSet};
use crate::worker::parking::{self, Parked};
use crate::worker::region;

/// Bytes of parked images and big blocks a worker holds for its waiting executions before it
/// refuses new ones as `busy`.
pub const PARKED_BUDGET_BYTES: usize = 1 << 30;

/// How long the worker waits for input when nothing is due (it wakes at once for any frame).
const IDLE_WAIT: Duration = Duration::from_secs(3600);

/// Where an execution's runtime is.
enum Place {
    /// In the region, now.
    Resident,
    /// Out of the region while it waits.
    Parked(Parked),
    /// A runtime of its own (no template).
    Own(Box<Fresh>),
}

/// One execution in flight.
struct InFlight {
    /// When it next needs attention if no reply comes first.
    wake: Instant,
    place: Place,
}

/// How the worker makes runtimes.
pub enum Runtimes {
    /// Every execution from the template image in the region.
    Snapshot(Snapshot),
    /// A runtime per execution; the next one made ahead of time.
    Fresh(Option<Fresh>),
}

/// What ended the worker: the exit code.
pub type Exit = i32;

/// The executions of one worker.
pub struct Scheduler {
    runtimes: Runtimes,
    link: SharedLink,
    in_flight: HashMap<u64, InFlight>,
    /// The execution whose image is in the region (template mode).
    resident: Option<u64>,
    /// Bytes held by parked executions.
    held_bytes: usize,
    /// The tools of the last run that brought some; later runs without tools use them.
    tool_set: Option<Arc<ToolSet>>,
}

impl Scheduler {
    /// A scheduler over `runtimes`, talking over `link`.
    pub fn new(runtimes: Runtimes, link: SharedLink) -> Scheduler {
        Scheduler {
            runtimes,
            link,
            in_flight: HashMap::new(),
            resident: None,
            held_bytes: 0,
            tool_set: None,
        }
    }

    /// Serves frames until the host closes the link. Returns the exit code: 0 when the host
    /// closed the link, another code when the worker cannot go on.
    pub fn serve(mut self) -> Exit {
        loop {
            self.report(false);
            let now = Instant::now();
            let due = self.in_flight.values().map(|f| f.wake).min();
            let wait = due.map_or(IDLE_WAIT, |due| due.saturating_duration_since(now));
            let received = self.link.borrow_mut().recv(wait);
            let frame = match received {
                Ok(frame) => frame,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return 0,
                Err(_) => return 72,
            };
            // Each step marks its own turn (see `start` and `step`).
            if let Some(frame) = frame
                && let Err(code) = self.on_frame(frame)
            {
                return code;
            }
            if let Err(code) = self.wake_due() {
                return code;
            }
        }
    }

    /// Publishes the worker's state on the control page: whether it is in a turn, how many
    /// executions it holds and what their parked images take.
    fn report(&self, turn: bool) {
        if let Some(page) = control::worker_page() {
            let started = if turn { control::now_ns().max(1) } else { 0 };
            page.turn_started_ns.store(started, Ordering::Relaxed);
            page.executions
                .store(self.in_flight.len() as u64, Ordering::Relaxed);
            page.held_bytes
                .store(self.held_bytes as u64, Ordering::Relaxed);
        }
    }

    fn on_frame(&mut self, frame: HostFrame) -> Result<(), Exit> {
        match frame {
            HostFrame::Run {
                run,
                js,
                tools,
                host_functions,
                env,
                context,
                limits,
                reply_spin_micros,
                mode,
            } => {
                self.link_spin(reply_spin_micros);
                if let Some(tools) = tools {
                    self.tool_set = Some(Arc::new(ToolSet::new(tools)));
                }
                // The host sends the tools with a worker's first run; without them it broke the
                // protocol.
                let Some(tools) = self.tool_set.clone() else {
                    return Err(76);
                };
                let request = RunRequest {
                    js,
                    tools,
                    host_functions,
                    env,
                    context,
                    limits,
                    mode,
                };
                self.start(run, request)
            }
            HostFrame::Reply { run, id, result } => self.reply(run, id, result),
            HostFrame::Cancel { run } => self.cancel(run),
            #[cfg(any(test, feature = "test-probes"))]
            HostFrame::Probe { what } => self
                .link
                .borrow_mut()
                .send(&WorkerFrame::ProbeResult {
                    outcome: crate::worker::probe::probe(&what),
                })
                .map_err(|_| 73),
        }
    }

    fn link_spin(&self, micros: u32) {
        self.link
            .borrow_mut()
            .set_reply_spin(Duration::from_micros(micros.into()));
    }

    /// Starts a new run, making room for it in the region if another execution is resident.
    fn start(&mut self, run: u64, request: RunRequest) -> Result<(), Exit> {
        // Each step is a turn of its own for the host's watchdog: a turn then belongs to one
        // execution, which its deadline bounds.
        self.report(true);
        // Moved to another worker while this one was computing: it runs there, not here.
        let skipped = control::skip_requested(run);
        control::started(run);
        if skipped {
            return Ok(());
        }
        if self.held_bytes > PARKED_BUDGET_BYTES {
            return self.send(&busy(run, self.held_bytes));
        }
        match &mut self.runtimes {
            Runtimes::Snapshot(_) => {
                if let Err(held) = self.vacate() {
                    return self.send(&busy(run, held));
                }
                self.in_flight.insert(
                    run,
                    InFlight {
                        wake: Instant::now(),
                        place: Place::Resident,
                    },
                );
                self.resident = Some(run);
                let step = self.in_region(|fresh, link| fresh.start(run, request, link))?;
                self.after(run, step)
            }
            Runtimes::Fresh(ready) => {
                let fresh = match ready.take().map_or_else(engine::fresh, Ok) {
                    Ok(fresh) => fresh,
                    Err(_) => return Err(75),
                };
                let step = fresh.start(run, request, &self.link);
                self.in_flight.insert(
                    run,
                    InFlight {
                        wake: Instant::now(),
                        place: Place::Own(Box::new(fresh)),
                    },
                );
                self.after(run, step)
            }
        }
    }

    fn reply(
        &mut self,
        run: u64,
        id: u64,
        result: Result<String, CallFailure>,
    ) -> Result<(), Exit> {
        // A late reply to a call of a finished run is ignored.
        if !self.in_flight.contains_key(&run) {
            return Ok(());
        }
        let step = self.step(run, |fresh, _| fresh.reply(id, result))?;
        self.after(run, step)
    }

    fn cancel(&mut self, run: u64) -> Result<(), Exit> {
        if !self.in_flight.contains_key(&run) {
            return Ok(());
        }
        let step = self.step(run, |fresh, _| Step::Done(fresh.cancel()))?;
        self.after(run, step)
    }

    /// Gives every execution whose wake time has come its step.
    fn wake_due(&mut self) -> Result<(), Exit> {
        let now = Instant::now();
        let due: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, f)| f.wake <= now)
            .map(|(run, _)| *run)
            .collect();
        for run in due {
            // An earlier step may have ended it (see `step`).
            if !self.in_flight.contains_key(&run) {
                continue;
            }
            let step = self.step(run, |fresh, _| fresh.wake())?;
            self.after(run, step)?;
        }
        Ok(())
    }

    /// Runs one step of `run` in its runtime, bringing it into the region first if it is
    /// parked.
    fn step(
        &mut self,
        run: u64,
        f: impl FnOnce(&Fresh, &SharedLink) -> Step,
    ) -> Result<Step, Exit> {
        self.report(true);
        match &self.runtimes {
            Runtimes::Snapshot(_) => {
                if self.resident != Some(run) {
                    if let Err(held) = self.vacate() {
                        // No room to park the resident execution: it ends instead of the
                        // worker failing, and says why.
                        let resident = self.resident;
                        if let Some(resident) = resident {
                            let step = self
                                .in_region(|fresh, _| Step::Done(fresh.abort(out_of_room(held))))?;
                            self.after(resident, step)?;
                        }
                    }
                    let parked = match self.in_flight.get_mut(&run) {
                        Some(entry) => std::mem::replace(&mut entry.place, Place::Resident),
                        None => return Err(77),
                    };
                    if let Place::Parked(parked) = parked {
                        self.held_bytes = self.held_bytes.saturating_sub(parked.held_bytes());
                        parking::unpark(parked);
                    }
                    self.resident = Some(run);
                }
                self.in_region(f)
            }
            Runtimes::Fresh(_) => match self.in_flight.get(&run).map(|e| &e.place) {
                Some(Place::Own(fresh)) => Ok(f(fresh, &self.link)),
                _ => Err(77),
            },
        }
    }

    /// Parks the resident execution, if any, so the region holds the template. `Err` with the
    /// bytes held when there is no memory to park it.
    fn vacate(&mut self) -> Result<(), usize> {
        let (Runtimes::Snapshot(snapshot), Some(resident)) = (&self.runtimes, self.resident) else {
            return Ok(());
        };
        let parked = parking::park(snapshot.image()).map_err(|_| self.held_bytes)?;
        self.held_bytes += parked.held_bytes();
        if let Some(entry) = self.in_flight.get_mut(&resident) {
            entry.place = Place::Parked(parked);
        }
        self.resident = None;
        Ok(())
    }

    /// Runs `f` on the template runtime with the region active (template mode only).
    fn in_region<T>(&self, f: impl FnOnce(&Fresh, &SharedLink) -> T) -> Result<T, Exit> {
        let Runtimes::Snapshot(snapshot) = &self.runtimes else {
            return Err(77);
        };
        let _region = region::enter();
        Ok(f(snapshot.runtime(), &self.link))
    }

    /// Acts on what a step answered: a finished run's `Done` goes to the host and its runtime
    /// is made fresh again; a waiting run's wake time is kept.
    fn after(&mut self, run: u64, step: Step) -> Result<(), Exit> {
        match step {
            Step::Waiting { wake } => {
                if let Some(entry) = self.in_flight.get_mut(&run) {
                    entry.wake = wake;
                }
                Ok(())
            }
            Step::Done(done) => {
                let sent = self.send(&done);
                // The frame's blocks may be in the region: free them before it is reset.
                drop(done);
                let ended = self.in_flight.remove(&run);
                match (&mut self.runtimes, ended) {
                    (Runtimes::Snapshot(snapshot), _) => {
                        snapshot.reset();
                        self.resident = None;
                    }
                    (
                        Runtimes::Fresh(ready),
                        Some(InFlight {
                            place: Place::Own(fresh),
                            ..
                        }),
                    ) => {
                        // Only now, with the result on its way, tear the used runtime down
                        // and make the next one.
                        drop(fresh);
                        if ready.is_none() {
                            *ready = engine::fresh().ok();
                        }
                    }
                    _ => {}
                }
                sent
            }
        }
    }

    fn send(&self, frame: &WorkerFrame) -> Result<(), Exit> {
        self.link.borrow_mut().send(frame).map_err(|_| 73)
    }
}

/// The answer to a run the worker has no memory to hold.
fn busy(run: u64, held: usize) -> WorkerFrame {
    WorkerFrame::Done {
        run,
        outcome: Err(GuestError {
            at: None,
            kind: Some(ErrorKind::Busy),
            name: "BusyError".into(),
            message: format!(
                "the sandbox is busy: this worker's waiting executions hold {} MiB, its limit for parked executions is {} MiB",
                held >> 20,
                PARKED_BUDGET_BYTES >> 20
            ),
            stack: String::new(),
            fault: None,
        }),
        stats: Default::default(),
    }
}

/// The error of an execution ended because the worker had no memory to park it.
fn out_of_room(held: usize) -> GuestError {
    GuestError {
        at: None,
        kind: Some(ErrorKind::Memory),
        name: "InternalError".into(),
        message: format!(
            "out of memory: the worker could not set this execution aside while it waited (its waiting executions hold {} MiB)",
            held >> 20
        ),
        stack: String::new(),
        fault: None,
    }
}
