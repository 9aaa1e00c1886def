//! MCP sessions bound to the token that opened them.
//!
//! A 2025-11-25 session id is a bearer of its own: whoever presents it continues the session.
//! The MCP security practices say to bind it to its user, so the session id is kept with the
//! SHA-256 of the token whose `initialize` opened it, and every later request of the session
//! (POST, GET, DELETE) must carry that same token. Another token, even a valid one of another
//! profile, gets the answer an unknown session gets (404), so a leaked session id is worth
//! nothing without its token. A token taken out of the config, or rotated, ends its sessions:
//! they are closed at the next sweep, and no one can use them meanwhile.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::guard::{SESSION_HEADER, no_session};
use crate::caller::Authenticated;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

/// The identity of a request without a token (auth is off): all such callers are one.
const NO_TOKEN: [u8; 32] = [0; 32];

/// Which token opened each open session.
pub(crate) struct SessionOwners {
    owners: Mutex<HashMap<String, [u8; 32]>>,
    sessions: Arc<LocalSessionManager>,
}

impl SessionOwners {
    pub(crate) fn new(sessions: Arc<LocalSessionManager>) -> Arc<SessionOwners> {
        Arc::new(SessionOwners {
            owners: Mutex::default(),
            sessions,
        })
    }

    /// Forgets sessions that closed, and closes those whose token the gateway no longer
    /// accepts (`still_accepted` says which digests it does).
    pub(crate) async fn sweep(&self, still_accepted: impl Fn(&[u8; 32]) -> bool) {
        let open: std::collections::HashSet<String> = self
            .sessions
            .sessions
            .read()
            .await
            .keys()
            .map(|id| id.to_string())
            .collect();
        let mut ended = Vec::new();
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|id, owner| {
                let keep = open.contains(id) && (*owner == NO_TOKEN || still_accepted(owner));
                if !keep && open.contains(id) {
                    ended.push(id.clone());
                }
                keep
            });
        for id in ended {
            let _ = self.sessions.close_session(&id.into()).await;
        }
    }
}

/// The middleware (see the module docs). It runs after the token check, which put the
/// request's [`Authenticated`] in place.
pub(crate) async fn bind(
    State(owners): State<Arc<SessionOwners>>,
    request: Request,
    next: Next,
) -> Response {
    let identity = request
        .extensions()
        .get::<Authenticated>()
        .map_or(NO_TOKEN, |a| a.digest);
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(id) = &session {
        let owner = owners
            .owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .copied();
        // Another token's session, or none at all: the same answer, so it tells nothing.
        if owner != Some(identity) {
            return no_session(id);
        }
    }
    let response = next.run(request).await;
    if session.is_none()
        && let Some(opened) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
    {
        owners
            .owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(opened.to_string(), identity);
    }
    response
}
