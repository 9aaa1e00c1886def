//! Counting the heap for Monty, in a Python worker only.
//!
//! Monty checks its memory limit against `monty_types::LIVE_MEMORY`, which only a counting
//! global allocator keeps. sandgate's global allocator ([`crate::region::RegionAllocator`])
//! tells this module of every jemalloc block it makes and frees; nothing is counted until a
//! Python worker turns counting on, so other processes pay one relaxed load per allocation.
//!
//! Many runs wait in one worker and one computes at a time, so a run's own use is measured
//! against a baseline the worker moves before each of its steps (see [`Step`]): Monty then
//! sees exactly the bytes that run holds plus what it allocates now, and a memory bomb ends
//! only its own run, with a `MemoryError`, instead of the allocator aborting the worker.

use std::sync::atomic::{AtomicBool, Ordering};

use monty_types::{BASELINE_MEMORY, LIVE_MEMORY};

static COUNTING: AtomicBool = AtomicBool::new(false);

/// Where the count starts: far from zero, so blocks made before counting began and freed after
/// it never wrap the count below zero.
const ORIGIN: usize = 1 << 44;

/// Turns counting on (once, in a Python worker, before any run).
pub fn start() {
    LIVE_MEMORY.store(ORIGIN, Ordering::Relaxed);
    BASELINE_MEMORY.store(ORIGIN, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Release);
}

/// `bytes` were allocated.
#[inline]
pub(crate) fn grew(bytes: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE_MEMORY.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// `bytes` were freed.
#[inline]
pub(crate) fn shrank(bytes: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE_MEMORY.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// One step of one run: while it lasts, Monty's count is that run's bytes.
pub struct Step {
    live_at_start: usize,
    held: usize,
}

impl Step {
    /// Starts a step of a run that held `held` bytes when its last step ended.
    pub fn begin(held: usize) -> Step {
        let live = LIVE_MEMORY.load(Ordering::Relaxed);
        BASELINE_MEMORY.store(live.saturating_sub(held), Ordering::Relaxed);
        Step {
            live_at_start: live,
            held,
        }
    }

    /// Ends the step: the bytes the run holds now (what it held, plus what the step added).
    pub fn end(self) -> usize {
        let live = LIVE_MEMORY.load(Ordering::Relaxed);
        (self.held + live).saturating_sub(self.live_at_start)
    }
}
