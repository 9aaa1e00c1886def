//! MCP progress notifications for a running execution: when the client sent a progress
//! token, each finished tool call is reported as it completes, so a long chain shows life.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};

/// Where progress goes for one execution.
#[derive(Debug, Clone)]
pub struct ProgressSink {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    finished: Arc<AtomicU32>,
}

impl ProgressSink {
    /// Progress for the request that carried `token`.
    pub fn new(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        ProgressSink {
            peer,
            token,
            finished: Arc::default(),
        }
    }

    /// Reports one finished call. A client that went away is not an error.
    pub async fn call_finished(&self, tool: &str, ok: bool, millis: f64) {
        let count = self.finished.fetch_add(1, Ordering::Relaxed) + 1;
        let mut param = ProgressNotificationParam::new(self.token.clone(), f64::from(count));
        param.message = Some(format!(
            "{tool} {} in {millis:.1} ms ({count} call{} done)",
            if ok { "finished" } else { "failed" },
            if count == 1 { "" } else { "s" }
        ));
        let _ = self.peer.notify_progress(param).await;
    }
}
