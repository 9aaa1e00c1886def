//! What rmcp needs to continue a 2025-11-25 session on a replica that did not open it: the
//! session's `initialize` parameters, kept in the shared store (PostgreSQL) when the session
//! opens and read back when its id arrives somewhere else, so rmcp replays the handshake and
//! the client goes on as if nothing moved. Who may continue it is not decided here: `bound`
//! checks the token before rmcp ever asks.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::store::{
    SessionState, SessionStore, SessionStoreError,
};
use sandgate_store::SessionKind;
use sandgate_store::postgres::PgStore;

/// The largest `initialize` parameters kept for a restore. A client's name, version and
/// capabilities take a few hundred bytes; a session whose parameters are larger still works on
/// the replica that opened it, and is refused elsewhere (as an unknown session).
const MAX_STATE_BYTES: usize = 64 * 1024;

/// The shared store as rmcp's session store.
pub(crate) struct SharedSessionStore {
    pub store: Arc<PgStore>,
    /// How long an unused session lives (`http.session_idle_timeout`).
    pub ttl: Duration,
}

#[async_trait::async_trait]
impl SessionStore for SharedSessionStore {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(session) = self.store.session(SessionKind::Mcp, session_id).await? else {
            return Ok(None);
        };
        match session.state {
            Some(state) => Ok(Some(serde_json::from_str(&state)?)),
            None => Ok(None),
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let state = serde_json::to_string(state)?;
        if state.len() > MAX_STATE_BYTES {
            return Err(format!(
                "its initialize parameters take {} bytes, over the {MAX_STATE_BYTES} kept for other replicas",
                state.len()
            )
            .into());
        }
        self.store
            .set_session_state(SessionKind::Mcp, session_id, &state, self.ttl)
            .await?;
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        self.store.end_session(SessionKind::Mcp, session_id).await?;
        Ok(())
    }
}
