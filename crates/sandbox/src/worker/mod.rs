//! The worker process: lock down, say ready, then serve executions, many at once.
//!
//! The worker talks only over the stdin and stdout it was started with, plus the control page
//! the host shares with it ([`crate::wire::control`]). It duplicates its pipes into plain files,
//! reserves its heap region ([`crate::worker::region`]) and maps the control page before locking down
//! (so no later syscall needs to open or map anything), applies [`crate::worker::lockdown`], builds its
//! template runtime ([`engine::snapshot::Snapshot`]), and only then reads its first frame. The
//! [`Scheduler`] then runs every execution the host sends. A clean end of stdin ends it.

pub mod engine;
pub(crate) mod heap_count;
pub mod lockdown;
mod link;
mod parking;
#[cfg(any(test, feature = "test-probes"))]
pub(crate) mod probe;
pub mod python;
pub mod region;
mod scheduler;
pub mod v8;

use crate::wire::protocol::WorkerFrame;
use engine::{Link, SharedLink};
use scheduler::{Runtimes, Scheduler};

/// A worker argument that makes it build a runtime for every execution instead of copying
/// one back from a template image (slower; for comparison and as a fallback).
pub const NO_TEMPLATE_ARG: &str = "--no-template";

/// The worker's `main`. Returns the process exit code.
pub fn main() -> i32 {
    // The V8 engine: lock down and become Deno (see `v8`).
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == v8::V8_ARG) {
        return v8::launch(&args);
    }
    // Python on Monty (see `python`).
    if args.iter().any(|a| a == python::PYTHON_ARG) {
        return python::main();
    }
    let Some(link) = link::stdio_link() else {
        return 70;
    };
    // The heap region is reserved before the address-space limit applies; a worker without one
    // still runs, making a fresh runtime for each execution instead of copying one back.
    let _ = crate::worker::region::map();
    // The control page, if the host shared one (a worker without it still runs; the host then
    // cannot stop a computing execution without killing the worker).
    let _ = crate::wire::control::attach();
    let protections = crate::worker::lockdown::apply();
    // Compile the preamble once.
    if engine::warm_up().is_err() {
        return 74;
    }
    // The thread handle is made lazily and kept for the process's life; make it now, outside
    // the region, so no execution can be the one that makes it.
    let _ = std::thread::current();
    let snapshot = if std::env::args_os().any(|a| a == NO_TEMPLATE_ARG) {
        Ok(None)
    } else {
        engine::snapshot::Snapshot::take()
    };
    // A template that cannot be built leaves the worker building a runtime per execution.
    let runtimes = match snapshot {
        Ok(Some(snapshot)) => Runtimes::Snapshot(snapshot),
        Ok(None) | Err(_) => Runtimes::Fresh(engine::fresh().ok()),
    };
    let template_bytes = match &runtimes {
        Runtimes::Snapshot(snapshot) => Some(snapshot.image_bytes() as u64),
        Runtimes::Fresh(_) => None,
    };
    if link
        .borrow_mut()
        .send(&WorkerFrame::Ready {
            protections: protections.active,
            template_bytes,
            fresh_per_run: false,
        })
        .is_err()
    {
        return 71;
    }
    let shared: SharedLink = link;
    Scheduler::new(runtimes, shared).serve()
}
