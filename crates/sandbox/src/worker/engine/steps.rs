//! One execution as a series of steps, so that a worker can hold many at once.
//!
//! [`Fresh::start`] configures the runtime for the run (its limits, deadline and interrupt
//! handler), binds its tools and evaluates the code; [`Fresh::reply`] settles one of its calls
//! and [`Fresh::wake`] fires its due timers. Each step then runs every pending job, sends the
//! calls the code made, and answers either [`Step::Done`] with the run's `Done` frame (the run
//! is over and its runtime released of every JavaScript value held from Rust) or
//! [`Step::Waiting`] with the moment the run next needs attention if no reply comes first (its
//! next timer, or its deadline). Between steps nothing of the run is on the stack, so the worker
//! may park the runtime and run another.
//!
//! The wall deadline is enforced twice: by the QuickJS interrupt handler (which stops CPU-bound
//! code, even after `await` and inside `try`/`catch`), and by the step itself, which ends a run
//! whose deadline has passed. The interrupt handler also ends a run the host asked to stop
//! through the control page (see `control`).

use std::time::Instant;

use rquickjs::promise::PromiseState;
use rquickjs::{CatchResultExt, CaughtError, Ctx, Persistent, Promise, Value};

use super::{
    Ends, Fresh, GC_HEADROOM_BYTES, RunRequest, Shared, SharedLink, Spent, USER_FILE, clock_seed,
    fire_due_timers, flush, guest_error, internal, natives, serialize, settle, stats,
    timeout_error,
};
use crate::wire::control;
use crate::wire::protocol::{CallFailure, ErrorKind, GuestError, HostFrame, WorkerFrame};

/// What a run needs after a step.
#[derive(Debug)]
pub enum Step {
    /// The run is over: send this `Done` frame. The runtime holds nothing of the run that
    /// needs it any more.
    Done(WorkerFrame),
    /// The run waits for a reply, or until `wake` (its next timer or its deadline).
    Waiting {
        /// When to call [`Fresh::wake`] if nothing else happened first.
        wake: Instant,
    },
}

impl Fresh {
    /// Starts run `run` in this never-used runtime.
    pub fn start(&self, run: u64, request: RunRequest, link: &SharedLink) -> Step {
        let limits = request.limits;
        let deadline = Instant::now() + limits.wall_time();
        let ends = Ends { deadline, run };
        let runtime = &self.runtime;
        runtime.set_memory_limit(limits.memory_bytes);
        runtime.set_max_stack_size(limits.stack_bytes);
        // The first collection only after the run has allocated this much, whatever the
        // template left of QuickJS's own threshold: a short execution then never pays for a GC
        // of the template's heap, which it otherwise did whenever the template sat just under
        // it.
        let heap_now = self.state.borrow().heap.get();
        runtime.set_gc_threshold(heap_now + GC_HEADROOM_BYTES.min(limits.memory_bytes / 4));
        runtime.set_interrupt_handler(Some(Box::new(move || ends.reached())));
        {
            let mut s = self.state.borrow_mut();
            s.run = run;
            s.deadline = Some(deadline);
            s.limits = limits;
            s.link = Some(link.clone());
            s.tool_count = request.tools.bindings.len();
            s.tools = Some(request.tools.clone());
            s.host_count = request.host_functions.len();
            s.random = getrandom::u64().unwrap_or_else(|_| clock_seed()) | 1;
        }
        let started = self
            .context
            .with(|ctx| evaluate(&ctx, &self.bind, &request, ends));
        match started {
            Ok(promise) => {
                self.state.borrow_mut().promise = Some(promise);
                self.advance()
            }
            Err(error) => Step::Done(self.finish(Err(error))),
        }
    }

    /// Settles call `id` of the resident run with `result`, then runs what that unblocks.
    pub fn reply(&self, id: u64, result: Result<String, CallFailure>) -> Step {
        self.resume();
        self.context
            .with(|ctx| settle(&ctx, &self.state, id, result));
        self.advance()
    }

    /// Fires the run's due timers (and ends it if its deadline has passed).
    pub fn wake(&self) -> Step {
        self.resume();
        self.context.with(|ctx| fire_due_timers(&ctx, &self.state));
        self.advance()
    }

    /// Ends the run at once, as cancelled.
    pub fn cancel(&self) -> WorkerFrame {
        self.abort(crate::wire::errors::cancelled_guest_error())
    }

    /// Ends the run at once with `error`.
    pub fn abort(&self, error: GuestError) -> WorkerFrame {
        self.finish(Err(error))
    }

    /// The run's bounds, as its state holds them.
    fn ends(&self) -> Ends {
        let s = self.state.borrow();
        Ends {
            deadline: s.deadline.unwrap_or_else(Instant::now),
            run: s.run,
        }
    }

    /// Before a step of a run that may have been parked: the stack limit is measured from the
    /// stack's current top, which differs from call to call.
    fn resume(&self) {
        let stack = self.state.borrow().limits.stack_bytes;
        self.runtime.set_max_stack_size(stack);
    }

    /// Runs pending jobs and sends the calls they made; then the run is done or waits.
    fn advance(&self) -> Step {
        match self.advance_inner() {
            Ok(Some(outcome)) => Step::Done(self.finish(outcome)),
            Ok(None) => {
                let s = self.state.borrow();
                let deadline = s.deadline.unwrap_or_else(Instant::now);
                let next_timer = s.timers.keys().next().map(|(due, _)| *due);
                Step::Waiting {
                    wake: next_timer.map_or(deadline, |t| t.min(deadline)),
                }
            }
            Err(message) => Step::Done(self.finish(Err(internal(message)))),
        }
    }

    fn advance_inner(&self) -> Result<Option<Result<String, GuestError>>, String> {
        let ends = self.ends();
        let state = &self.state;
        let limits = state.borrow().limits;
        let link = state
            .borrow()
            .link
            .clone()
            .ok_or("the run has no link to the host")?;
        let promise = state.borrow().promise.clone();
        let Some(promise) = promise else {
            return Err("the run has no promise".into());
        };
        // Run every pending job (promise reactions), stopping on an uncaught job error.
        let mut jobs = 0u32;
        loop {
            // A chain of microtasks never returns to the worker's wait, so check the deadline
            // here too: each job is short, but an endless chain of them is not. Nor does such
            // a chain hold back a result that has settled (code left running after `return`):
            // the run answers with it below, as it does on V8, and the rest is dropped with the
            // runtime.
            jobs = jobs.wrapping_add(1);
            if jobs.is_multiple_of(256) {
                if ends.reached() {
                    return Ok(Some(Err(self.ended_early(ends))));
                }
                if !self.context.with(|ctx| pending(&ctx, &promise)) {
                    break;
                }
            }
            match self.runtime.execute_pending_job() {
                Ok(true) => {}
                Ok(false) => break,
                Err(job) => {
                    let err = job.0.with(|ctx| {
                        let caught = CaughtError::from_error(&ctx, rquickjs::Error::Exception);
                        guest_error(&ctx, caught, ends)
                    });
                    return Ok(Some(Err(err)));
                }
            }
        }
        flush(state, &link)?;

        let settled = self
            .context
            .with(|ctx| settled(&ctx, promise, limits, ends));
        if settled.is_some() {
            return Ok(settled);
        }
        if ends.reached() {
            return Ok(Some(Err(self.ended_early(ends))));
        }
        let (waiting_calls, timers) = {
            let s = state.borrow();
            (s.in_flight > 0, !s.timers.is_empty())
        };
        if !waiting_calls && !timers {
            return Ok(Some(Err(stalled(state, limits))));
        }
        Ok(None)
    }

    /// The error of a run stopped by its deadline or by the host.
    fn ended_early(&self, ends: Ends) -> GuestError {
        if control::stop_requested(ends.run) {
            crate::wire::errors::cancelled_guest_error()
        } else {
            timeout_error(&self.state, self.state.borrow().limits)
        }
    }

    /// Ends the run with `outcome`: sends what its logs dropped, releases every JavaScript
    /// value held from Rust (QuickJS aborts if a runtime is freed with values still
    /// referenced), and makes the `Done` frame.
    fn finish(&self, outcome: Result<String, GuestError>) -> WorkerFrame {
        let stats = stats(&self.state);
        let run = self.state.borrow().run;
        let link = self.state.borrow().link.clone();
        if let Some(link) = &link {
            natives::send_dropped_logs(&self.state, link);
        }
        self.state.borrow_mut().release();
        WorkerFrame::Done {
            run,
            outcome,
            stats,
        }
    }
}

/// Binds the run's tools and evaluates its code: the promise of its result, or the error that
/// stopped it before it started.
fn evaluate<'js>(
    ctx: &Ctx<'js>,
    bind: &Persistent<rquickjs::Function<'static>>,
    request: &RunRequest,
    ends: Ends,
) -> Result<Persistent<Promise<'static>>, GuestError> {
    let bind = bind
        .clone()
        .restore(ctx)
        .map_err(|e| internal(format!("preamble failed: {e}")))?;
    natives::bind(ctx, request, bind).map_err(|e| internal(format!("preamble failed: {e}")))?;
    let mut options = rquickjs::context::EvalOptions::default();
    options.global = true;
    options.strict = true;
    options.filename = Some(USER_FILE.to_string());
    // Evaluating the wrapped script only starts it (its body is an async function), so what
    // this step throws is QuickJS refusing to compile the code.
    let value: Value = ctx
        .eval_with_options(request.js.as_bytes().to_vec(), options)
        .catch(ctx)
        .map_err(|e| {
            let mut error = guest_error(ctx, e, ends);
            if error.kind.is_none() && error.name == "SyntaxError" {
                error.kind = Some(ErrorKind::Syntax);
            }
            error
        })?;
    let promise = value
        .into_promise()
        .ok_or_else(|| internal("the wrapped script did not produce a promise".into()))?;
    Ok(Persistent::save(ctx, promise))
}

/// Whether the run's result is still to come.
fn pending(ctx: &Ctx<'_>, promise: &Persistent<Promise<'static>>) -> bool {
    promise
        .clone()
        .restore(ctx)
        .is_ok_and(|promise| matches!(promise.state(), PromiseState::Pending))
}

/// The run's outcome if its promise has settled.
fn settled(
    ctx: &Ctx<'_>,
    promise: Persistent<Promise<'static>>,
    limits: crate::wire::limits::Limits,
    ends: Ends,
) -> Option<Result<String, GuestError>> {
    let promise = promise.restore(ctx).ok()?;
    match promise.state() {
        PromiseState::Pending => None,
        PromiseState::Resolved => Some(serialize(
            ctx,
            promise.result::<Value>(),
            limits.max_result_bytes,
            ends,
        )),
        PromiseState::Rejected => Some(Err(match promise.result::<Value>() {
            Some(Err(e)) => guest_error(ctx, CaughtError::from_error(ctx, e), ends),
            _ => internal("the promise was rejected without a reason".into()),
        })),
    }
}

/// The error of a run that waits for nothing: no call is out and no timer is set, yet its
/// promise is pending.
fn stalled(state: &Shared, limits: crate::wire::limits::Limits) -> GuestError {
    let used = stats(state);
    // A promise chain can also stall because an allocation inside a job failed and took the
    // rejection with it; a nearly full heap says that is what happened.
    if used.memory_bytes as f64 >= 0.75 * limits.memory_bytes as f64 {
        GuestError {
            at: None,
            kind: Some(ErrorKind::Memory),
            name: "InternalError".into(),
            message: format!(
                "out of memory: the execution used up its {} MiB heap",
                limits.memory_bytes >> 20
            ),
            stack: String::new(),
            fault: None,
        }
    } else {
        GuestError {
            at: None,
            kind: None,
            name: "Error".into(),
            message: "the script is waiting for something that can never happen: no tool call or timer is pending, but the result is not settled (an await on a promise nobody resolves, or a promise chain broken by running out of memory?)".into(),
            stack: String::new(),
            fault: None,
        }
    }
}

/// Runs one execution to its end in `fresh`, waiting on `link` for replies: a worker (or a
/// benchmark) that holds one execution at a time. Returns the `Done` frame, and the spent
/// runtime to drop once it is sent.
pub fn execute(
    fresh: Fresh,
    run: u64,
    request: RunRequest,
    link: &SharedLink,
) -> (WorkerFrame, Spent) {
    let mut step = fresh.start(run, request, link);
    let done = loop {
        let wake = match step {
            Step::Done(done) => break done,
            Step::Waiting { wake } => wake,
        };
        let received = link
            .borrow_mut()
            .recv(wake.saturating_duration_since(Instant::now()));
        step = match received {
            Ok(Some(HostFrame::Reply { id, result, .. })) => fresh.reply(id, result),
            Ok(Some(HostFrame::Cancel { .. })) => Step::Done(fresh.cancel()),
            Ok(Some(_)) | Ok(None) => fresh.wake(),
            Err(e) => Step::Done(fresh.finish(Err(internal(format!("host link failed: {e}"))))),
        };
    };
    let spent = Spent {
        _context: fresh.context,
        _runtime: fresh.runtime,
    };
    (done, spent)
}
