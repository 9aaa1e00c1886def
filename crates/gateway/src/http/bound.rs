//! MCP sessions bound to the token that opened them.
//!
//! A 2025-11-25 session id is a bearer of its own: whoever presents it continues the session.
//! The MCP security practices say to bind it to its user, so the session id is kept with the
//! SHA-256 of the token whose `initialize` opened it, and every later request of the session
//! (POST, GET, DELETE) must carry that same token. Another token, even a valid one of another
//! profile, gets the answer an unknown session gets (404), so a leaked session id is worth
//! nothing without its token. A token taken out of the config, or rotated, ends its sessions:
//! they are closed at the next sweep, and no one can use them meanwhile.
//!
//! On a shared store the binding is kept there too, so any replica can continue the session
//! (`restore` gives rmcp what it needs) and checks the same token first. Each replica tells the
//! store which sessions it saw used (that keeps them alive) and learns which of its copies
//! ended elsewhere; a session ended on one replica is closed on every other at once, by its
//! notice, or at the next sweep if the notice was lost.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::guard::{SESSION_HEADER, no_session};
use crate::caller::Authenticated;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use sandgate_store::postgres::PgStore;
use sandgate_store::{Notice, SessionKind};

/// The identity of a request without a token (auth is off): all such callers are one.
const NO_TOKEN: [u8; 32] = [0; 32];

/// Which token opened each open session.
pub(crate) struct SessionOwners {
    owners: Mutex<HashMap<String, [u8; 32]>>,
    sessions: Arc<LocalSessionManager>,
    /// The store replicas share, when there is one.
    shared: Option<Shared>,
}

/// Sessions in the shared store.
struct Shared {
    store: Arc<PgStore>,
    /// How long an unused session lives.
    ttl: Duration,
    /// Sessions used since the last sweep.
    used: Mutex<HashSet<String>>,
}

impl SessionOwners {
    pub(crate) fn new(
        sessions: Arc<LocalSessionManager>,
        shared: Option<(Arc<PgStore>, Duration)>,
    ) -> Arc<SessionOwners> {
        Arc::new(SessionOwners {
            owners: Mutex::default(),
            sessions,
            shared: shared.map(|(store, ttl)| Shared {
                store,
                ttl,
                used: Mutex::default(),
            }),
        })
    }

    /// The owner of session `id`: this replica's record of it, or else the shared store's
    /// (which this replica then keeps). `Err` when the shared store cannot be asked.
    async fn owner(&self, id: &str) -> Result<Option<[u8; 32]>, sandgate_store::StoreError> {
        let known = self
            .owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .copied();
        let Some(shared) = &self.shared else {
            return Ok(known);
        };
        shared
            .used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.to_string());
        if known.is_some() {
            return Ok(known);
        }
        let owner = shared
            .store
            .session(SessionKind::Mcp, id)
            .await?
            .and_then(|s| s.owner);
        if let Some(owner) = owner {
            self.owners
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id.to_string(), owner);
        }
        Ok(owner)
    }

    /// Keeps the new session `id` as `identity`'s, here and in the shared store.
    async fn opened(&self, id: &str, identity: [u8; 32], profile: &str, token_id: Option<&str>) {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.to_string(), identity);
        if let Some(shared) = &self.shared
            && let Err(e) = shared
                .store
                .open_session(
                    SessionKind::Mcp,
                    id,
                    identity,
                    profile,
                    token_id,
                    shared.ttl,
                )
                .await
        {
            tracing::warn!(
                "session {id} works on this replica only: the shared store did not keep it: {e}"
            );
        }
    }

    /// The sessions this replica holds a binding for.
    fn bound_ids(&self) -> Vec<String> {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// Closes this replica's copy of session `id` (it ended on another).
    async fn close_here(&self, id: &str) {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        let _ = self.sessions.close_session(&id.to_string().into()).await;
    }

    /// Closes, as each notice arrives, the copies of sessions ended on another replica; until
    /// `stop`.
    pub(crate) async fn follow_notices(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let Some(shared) = &self.shared else {
            return;
        };
        let mut notices = shared.store.notices();
        loop {
            let notice = tokio::select! {
                () = stop.cancelled() => return,
                notice = notices.recv() => notice,
            };
            match notice {
                Ok(Notice::SessionEnded {
                    kind: SessionKind::Mcp,
                    id,
                }) => self.close_here(&id).await,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    /// Forgets sessions that closed, and closes those whose token the gateway no longer
    /// accepts (`still_accepted` says which digests it does).
    pub(crate) async fn sweep(&self, still_accepted: impl Fn(&[u8; 32]) -> bool) {
        // The bindings first, then the open sessions: a session is open before its binding
        // is kept, so one bound after this look is newer than the look at the open sessions,
        // and is left alone (taken the other way round, a session opened in between lost its
        // binding, and its next request got 404).
        let bound: HashSet<String> = self.bound_ids().into_iter().collect();
        let open: HashSet<String> = self
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
                if !bound.contains(id) {
                    return true;
                }
                let keep = open.contains(id) && (*owner == NO_TOKEN || still_accepted(owner));
                if !keep && open.contains(id) {
                    ended.push(id.clone());
                }
                keep
            });
        for id in ended {
            if let Some(shared) = &self.shared
                && let Err(e) = shared.store.end_session(SessionKind::Mcp, &id).await
            {
                tracing::warn!(
                    "session {id} lost its token but could not be ended on the other replicas: {e}"
                );
            }
            let _ = self.sessions.close_session(&id.into()).await;
        }
        if let Some(shared) = &self.shared {
            self.keep_shared(shared).await;
        }
    }

    /// Tells the shared store which sessions were used (so they live on), and closes the
    /// copies of those that ended or expired there.
    async fn keep_shared(&self, shared: &Shared) {
        let used: Vec<String> = shared
            .used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .collect();
        let held = self.bound_ids();
        match shared
            .store
            .keep_sessions(SessionKind::Mcp, &used, &held, shared.ttl)
            .await
        {
            Ok(alive) => {
                for id in held.iter().filter(|id| !alive.contains(*id)) {
                    self.close_here(id).await;
                }
            }
            Err(e) => {
                // Kept for the next sweep, so no session expires for a missed touch.
                shared
                    .used
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend(used);
                tracing::warn!("could not keep the shared sessions alive: {e}");
            }
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
    let authenticated = request.extensions().get::<Authenticated>().cloned();
    let identity = authenticated.as_ref().map_or(NO_TOKEN, |a| a.digest);
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(id) = &session {
        let owner = match owners.owner(id).await {
            Ok(owner) => owner,
            Err(e) => return store_away(&e),
        };
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
        let (profile, token_id) = match &authenticated {
            Some(a) => (a.profile.as_str(), Some(a.name.as_str())),
            None => ("default", None),
        };
        owners.opened(opened, identity, profile, token_id).await;
    }
    response
}

/// What a session request gets while the shared store cannot say whose session it is.
fn store_away(error: &sandgate_store::StoreError) -> Response {
    super::guard::rpc_error(
        http::StatusCode::SERVICE_UNAVAILABLE,
        serde_json::Value::Null,
        -32603,
        format!("this session cannot be continued now: {error}"),
    )
}
