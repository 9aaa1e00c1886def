//! What the gateway keeps about itself: when it started, how often each meta-tool and
//! resource was used, and handing freed memory back to the kernel after large work (one
//! hand-back at a time, off the async threads).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long after large work its memory is handed back (see [`Upkeep::return_memory_soon`]).
const TRIM_AFTER: [Duration; 2] = [Duration::from_millis(250), Duration::from_millis(1500)];

/// Uptime, use counters and memory hand-back.
#[derive(Debug)]
pub(crate) struct Upkeep {
    started: Instant,
    counters: Mutex<BTreeMap<&'static str, u64>>,
    /// Whether free memory is being handed back right now.
    trimming: Arc<AtomicBool>,
}

impl Default for Upkeep {
    fn default() -> Self {
        Upkeep {
            started: Instant::now(),
            counters: Mutex::default(),
            trimming: Arc::default(),
        }
    }
}

impl Upkeep {
    /// Seconds since start.
    pub(crate) fn uptime_secs(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// Counts one use of `what` (a meta-tool or resource).
    pub(crate) fn count(&self, what: &'static str) {
        if let Ok(mut counters) = self.counters.lock() {
            *counters.entry(what).or_default() += 1;
        }
    }

    /// Every use counted so far.
    pub(crate) fn counters(&self) -> BTreeMap<&'static str, u64> {
        self.counters.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Hands the memory the gateway freed back to the kernel, shortly and off the async
    /// threads (one hand-back at a time).
    pub(crate) fn return_memory_soon(&self) {
        if self.trimming.swap(true, Ordering::AcqRel) {
            return;
        }
        let trimming = self.trimming.clone();
        tokio::task::spawn_blocking(move || {
            // The caller still holds the response it is about to send, and the store may still
            // be writing the full output: hand back what is free once each is likely done.
            for delay in TRIM_AFTER {
                std::thread::sleep(delay);
                sandgate_sandbox::region::return_free_memory();
            }
            trimming.store(false, Ordering::Release);
        });
    }
}
