//! The clients connected now, as the gateway tells them things: 2025-11-25 sessions hear
//! notifications on their peer; stateless 2026-07-28 clients hear changes on their
//! `subscriptions/listen` stream, fed by a broadcast.

use std::sync::Mutex;

// Logging is deprecated by SEP-2577 for the 2026 era, but 2025-11-25 sessions (the ones a
// desktop client holds) still show it; it is the one channel to the user there is.
#[allow(deprecated)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{Peer, RoleServer};
use tokio::sync::broadcast;

/// Who hears that the tool set changed, and the gateway's log messages.
#[derive(Debug)]
pub struct Clients {
    changes: broadcast::Sender<()>,
    legacy_peers: Mutex<Vec<Peer<RoleServer>>>,
}

impl Default for Clients {
    fn default() -> Self {
        Clients {
            changes: broadcast::channel(16).0,
            legacy_peers: Mutex::default(),
        }
    }
}

impl Clients {
    /// Change notifications for 2026-07-28 `subscriptions/listen` streams.
    pub(crate) fn subscribe_changes(&self) -> broadcast::Receiver<()> {
        self.changes.subscribe()
    }

    /// Remembers a 2025-11-25 session so it hears about tool-set changes. Closed sessions are
    /// forgotten by [`Clients::forget_closed`] (every refresh, and every 2 s over HTTP), not
    /// here: a burst of sessions would make each new one walk all the others.
    pub(crate) fn add_legacy_peer(&self, peer: Peer<RoleServer>) {
        if let Ok(mut peers) = self.legacy_peers.lock() {
            peers.push(peer);
        }
    }

    /// The 2025-11-25 sessions still open.
    fn open_peers(&self) -> Vec<Peer<RoleServer>> {
        self.legacy_peers
            .lock()
            .map(|p| {
                p.iter()
                    .filter(|p| !p.is_transport_closed())
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Forgets the sessions that have closed (expired, deleted, disconnected); each peer kept
    /// holds its session's channels.
    pub(crate) fn forget_closed(&self) {
        if let Ok(mut peers) = self.legacy_peers.lock() {
            peers.retain(|p| !p.is_transport_closed());
        }
    }

    /// Tells every client that the tool set (and the resources) may have changed.
    pub(crate) async fn tools_changed(&self) {
        let _ = self.changes.send(());
        for peer in self.open_peers() {
            let _ = peer.notify_tool_list_changed().await;
            let _ = peer.notify_resource_list_changed().await;
        }
        self.forget_closed();
    }

    /// Sends `text` to every open session as an error log message.
    #[allow(deprecated)]
    pub(crate) async fn log_error(&self, text: &str) {
        for peer in self.open_peers() {
            let _ = peer
                .notify_logging_message(
                    LoggingMessageNotificationParam::new(
                        LoggingLevel::Error,
                        serde_json::Value::String(text.to_string()),
                    )
                    .with_logger("sandgate"),
                )
                .await;
        }
    }
}
