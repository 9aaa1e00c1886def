//! The `call_tool_chain` executions the gateway holds: how many run, the ones detached from
//! their request, who hears each one finish, and the two steps of shutting down (cancel every
//! execution; drain, answering while a balancer notices). One part, so the gateway itself only
//! hands it out.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::detached::DetachedExecutions;

/// An execution that just finished, as the console's live list shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FinishedExecution {
    /// Its id.
    pub id: String,
    /// The profile it ran under.
    pub profile: String,
    /// The user an identity provider proved that ran it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The tier it took.
    pub tier: &'static str,
    /// `ok`, `error` or `cancelled`.
    pub status: &'static str,
    /// How long it took.
    pub duration_ms: f64,
    /// When it started, in Unix milliseconds.
    pub started_at_ms: i64,
    /// Its calls.
    pub calls: usize,
}

/// One execution in progress, counted in [`Executions`] while it lives.
pub(crate) struct Running<'a>(&'a AtomicU64);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The executions in progress, detached and finished, and whether the gateway stops.
#[derive(Debug)]
pub(crate) struct Executions {
    /// Each finished execution, for the console's live list.
    finished: broadcast::Sender<FinishedExecution>,
    /// Cancelled when the gateway shuts down: every execution still running is cancelled.
    stopping: CancellationToken,
    /// Executions in progress, so shutting down can wait for their records.
    running: AtomicU64,
    /// Shutting down, but still serving until a balancer has noticed.
    draining: AtomicBool,
    /// Executions that run on after their first answer (`yield_after_ms`).
    detached: DetachedExecutions,
}

impl Default for Executions {
    fn default() -> Self {
        Executions {
            finished: broadcast::channel(64).0,
            stopping: CancellationToken::new(),
            running: AtomicU64::new(0),
            draining: AtomicBool::new(false),
            detached: DetachedExecutions::default(),
        }
    }
}

impl Executions {
    /// Executions that run on after their first answer.
    pub(crate) fn detached(&self) -> &DetachedExecutions {
        &self.detached
    }

    /// Counts one execution as running until the guard is dropped.
    pub(crate) fn started(&self) -> Running<'_> {
        self.running.fetch_add(1, Ordering::SeqCst);
        Running(&self.running)
    }

    /// Executions in progress.
    pub(crate) fn running(&self) -> u64 {
        self.running.load(Ordering::SeqCst)
    }

    /// Tells whoever listens that an execution finished.
    pub(crate) fn finished(&self, done: FinishedExecution) {
        let _ = self.finished.send(done);
    }

    /// Hears each execution as it finishes.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<FinishedExecution> {
        self.finished.subscribe()
    }

    /// Cancels every execution in progress, and any that starts from now on.
    pub(crate) fn cancel_all(&self) {
        self.stopping.cancel();
    }

    /// What is cancelled when the gateway shuts down, for tasks that end then.
    pub(crate) fn stop_signal(&self) -> CancellationToken {
        self.stopping.clone()
    }

    /// Completes when the gateway starts shutting down.
    pub(crate) async fn stopping(&self) {
        self.stopping.cancelled().await;
    }

    /// From now on the gateway drains (see `Gateway::begin_drain`).
    pub(crate) fn begin_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether a drained shutdown has begun.
    pub(crate) fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}
