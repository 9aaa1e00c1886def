//! MCP progress notifications for a running execution, when the client sent a progress token:
//! each finished tool call is reported as it completes, and a backend's own progress for a
//! call is passed on while the call runs, so neither a long chain nor one long call looks
//! dead.
//!
//! Progress must grow with every notification. An execution's progress counts what happened
//! (calls finished, backend notices) with no total, since the code decides how many calls it
//! makes; the backend's own numbers go in the message. When the execution is a single call
//! (tiers 1 and 2), the backend's progress and total are the execution's.
//!
//! Notices for one execution come from many tasks at once (each call's finish, each call's
//! backend notices). A notice's number is picked and the notice written under one lock, so
//! they reach the wire in the order of their numbers: rmcp writes each notification in a task
//! of its own, and two written side by side may cross.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use sandgate_upstream::BackendProgress;

/// The shortest time between two backend notices passed on for one execution; those between
/// are dropped (a backend that floods progress does not flood the client).
const MIN_FORWARD_INTERVAL: Duration = Duration::from_millis(50);

/// Where progress goes for one execution.
#[derive(Debug, Clone)]
pub struct ProgressSink {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    finished: Arc<AtomicU32>,
    /// The last progress sent, the last total a backend gave, and when a notice was last
    /// passed on. Held while a notice is written.
    sent: Arc<tokio::sync::Mutex<Sent>>,
    /// The execution is one call: the backend's numbers are the execution's.
    single_call: bool,
}

#[derive(Debug, Default)]
struct Sent {
    progress: f64,
    total: Option<f64>,
    forwarded_at: Option<Instant>,
}

impl ProgressSink {
    /// Progress for the request that carried `token`.
    pub fn new(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        ProgressSink {
            peer,
            token,
            finished: Arc::default(),
            sent: Arc::default(),
            single_call: false,
        }
    }

    /// The same sink, for an execution that is a single call.
    pub fn for_single_call(mut self) -> Self {
        self.single_call = true;
        self
    }

    /// Reports one finished call. A client that went away is not an error.
    pub async fn call_finished(&self, tool: &str, ok: bool, millis: f64) {
        let count = self.finished.fetch_add(1, Ordering::Relaxed) + 1;
        let message = format!(
            "{tool} {} in {millis:.1} ms ({count} call{} done)",
            if ok { "finished" } else { "failed" },
            if count == 1 { "" } else { "s" }
        );
        self.emit(message, |sent| match (self.single_call, sent.total) {
            (true, Some(total)) => Some((total, Some(total))),
            _ => Some((sent.progress + 1.0, sent.total.filter(|_| self.single_call))),
        })
        .await;
    }

    /// Passes on a backend's progress notice for a call to `tool`.
    pub async fn backend_progress(&self, tool: &str, notice: BackendProgress) {
        let said = notice.message.as_deref().unwrap_or("working");
        let of = notice
            .total
            .map(|total| format!("{}/{}", notice.progress, total))
            .unwrap_or_else(|| notice.progress.to_string());
        let message = format!("{tool}: {said} ({of})");
        let done = notice.total.is_some_and(|t| notice.progress >= t);
        self.emit(message, |sent| {
            let recent = sent
                .forwarded_at
                .is_some_and(|at| at.elapsed() < MIN_FORWARD_INTERVAL);
            if recent && !done {
                return None;
            }
            sent.forwarded_at = Some(Instant::now());
            if self.single_call {
                sent.total = notice.total.or(sent.total);
                Some((notice.progress, sent.total))
            } else {
                Some((sent.progress + 1.0, None))
            }
        })
        .await;
    }

    /// Sends `message` with `pick`'s (progress, total), the progress raised above the last one
    /// sent so it always grows; nothing when `pick` skips this one. The lock is held until the
    /// notice is written, so no later number is written before it.
    async fn emit(
        &self,
        message: String,
        pick: impl FnOnce(&mut Sent) -> Option<(f64, Option<f64>)>,
    ) {
        let mut sent = self.sent.lock().await;
        let Some((wanted, total)) = pick(&mut sent) else {
            return;
        };
        let progress = if wanted > sent.progress {
            wanted
        } else {
            sent.progress + 1.0
        };
        sent.progress = progress;
        let mut param = ProgressNotificationParam::new(self.token.clone(), progress);
        param.total = total.filter(|t| *t >= progress);
        param.message = Some(message);
        let _ = self.peer.notify_progress(param).await;
    }
}

/// The progress token and the client to send notifications to.
pub fn progress_sink(peer: Peer<RoleServer>, token: Option<ProgressToken>) -> Option<ProgressSink> {
    token.map(|token| ProgressSink::new(peer, token))
}
