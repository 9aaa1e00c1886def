//! Where console logins are kept: in this process, or, on a shared store, in PostgreSQL, so a
//! browser that logged in through one replica is logged in on all of them, and a logout on
//! one ends the login everywhere. Logins are capped (in the process) and expire.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandgate_identity::Admission;
use sandgate_store::SessionKind;
use sandgate_store::postgres::PgStore;

use super::session::ConsoleUser;

/// How long a console login lasts.
pub(crate) const LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// The most logins kept in the process; past it the oldest goes.
const MAX_LOGINS: usize = 1000;

/// The user of a login through the identity provider, as the shared store keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
struct SharedUser {
    user: String,
    admission: Admission,
}

/// A login in the process.
struct Login {
    user: ConsoleUser,
    /// The SHA-256 of the token that opened it: the login lives only while that very token
    /// is accepted (a token rotated under the same name, or an unnamed one whose index passed
    /// to another, is another token).
    digest: [u8; 32],
    started: Instant,
    /// How long it lasts (a login through the identity provider: no longer than its token).
    lifetime: Duration,
}

/// The open console logins.
pub(crate) struct Logins {
    local: Mutex<HashMap<String, Login>>,
    shared: Option<Arc<PgStore>>,
}

impl Logins {
    /// Logins kept in the process, or in `shared` when replicas share a store.
    pub(crate) fn new(shared: Option<Arc<PgStore>>) -> Logins {
        Logins {
            local: Mutex::default(),
            shared,
        }
    }

    /// A new login for `profile`'s token `token_id` (by its `digest`), of the user an
    /// identity provider admitted (with what admitted it), for `lifetime` at most: its random
    /// id, or why there is none.
    pub(crate) async fn start(
        &self,
        profile: String,
        token_id: String,
        digest: [u8; 32],
        user: Option<(String, Arc<Admission>)>,
        lifetime: Duration,
    ) -> Result<String, String> {
        let lifetime = lifetime.min(LIFETIME);
        let mut id_bytes = [0u8; 32];
        // No randomness: refuse rather than hand out a guessable id.
        getrandom::fill(&mut id_bytes).map_err(|_| "no randomness for a session id".to_string())?;
        let id: String = id_bytes.iter().map(|b| format!("{b:02x}")).collect();
        if let Some(store) = &self.shared {
            store
                .open_session(
                    SessionKind::Console,
                    &id,
                    digest,
                    &profile,
                    Some(&token_id),
                    lifetime,
                )
                .await
                .map_err(|e| e.to_string())?;
            // The user a login through the identity provider is for, and what admitted it,
            // ride in its state.
            if let Some((user, admission)) = &user {
                let state = serde_json::to_string(&SharedUser {
                    user: user.clone(),
                    admission: (**admission).clone(),
                })
                .map_err(|e| e.to_string())?;
                store
                    .set_session_state(SessionKind::Console, &id, &state, lifetime)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            return Ok(id);
        }
        let mut open = self
            .local
            .lock()
            .map_err(|_| "the logins are unusable".to_string())?;
        open.retain(|_, s| s.started.elapsed() < s.lifetime);
        if open.len() >= MAX_LOGINS
            && let Some(oldest) = open
                .iter()
                .min_by_key(|(_, s)| s.started)
                .map(|(k, _)| k.clone())
        {
            open.remove(&oldest);
        }
        open.insert(
            id.clone(),
            Login {
                user: ConsoleUser {
                    profile,
                    token_id: Some(token_id),
                    session: id.clone(),
                    user: user.as_ref().map(|(user, _)| user.clone()),
                    admission: user.map(|(_, admission)| admission),
                },
                digest,
                started: Instant::now(),
                lifetime,
            },
        );
        Ok(id)
    }

    /// The user of login `id` and its token's digest, while it lives.
    pub(crate) async fn find(&self, id: &str) -> Option<(ConsoleUser, [u8; 32])> {
        if let Some(store) = &self.shared {
            let found = match store.session(SessionKind::Console, id).await {
                Ok(found) => found?,
                Err(e) => {
                    tracing::warn!("a console login could not be checked: {e}");
                    return None;
                }
            };
            // A login through the identity provider whose state does not read (one kept by an
            // older sandgate, which kept no admission) is not found: it logs in again.
            let shared = match &found.state {
                Some(state) => Some(serde_json::from_str::<SharedUser>(state).ok()?),
                None => None,
            };
            let user = ConsoleUser {
                profile: found.profile?,
                token_id: found.token_id,
                session: id.to_string(),
                user: shared.as_ref().map(|s| s.user.clone()),
                admission: shared.map(|s| Arc::new(s.admission)),
            };
            return Some((user, found.owner?));
        }
        let open = self.local.lock().ok()?;
        let login = open.get(id)?;
        (login.started.elapsed() < login.lifetime).then(|| (login.user.clone(), login.digest))
    }

    /// Ends login `id` (everywhere, on a shared store).
    pub(crate) async fn end(&self, id: &str) {
        if let Some(store) = &self.shared {
            if let Err(e) = store.end_session(SessionKind::Console, id).await {
                tracing::warn!("a console logout could not reach the shared store: {e}");
            }
            return;
        }
        if let Ok(mut open) = self.local.lock() {
            open.remove(id);
        }
    }
}
