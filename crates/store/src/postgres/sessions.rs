//! Sessions any replica can continue: an MCP 2025-11-25 session opened on one replica, or a
//! console login, is found by every other. Each row is bound to the SHA-256 of the token that
//! opened it (the caller compares it; the store only keeps it), and lives until `expires_at` on
//! the database's clock, which use moves on. Ending one is announced (see `listen`), so every
//! replica drops its copy at once; the replicas' periodic look (`keep_sessions`) is the
//! backstop for a notice lost while a listener reconnected.

use std::collections::HashSet;
use std::time::Duration;

use super::PgStore;
use super::notice::{EVENTS, SessionKind};
use crate::error::StoreError;

/// A session as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedSession {
    /// The SHA-256 of the token that opened it; `None` until its opener said (a session whose
    /// owner is not known yet belongs to no one).
    pub owner: Option<[u8; 32]>,
    /// The profile it acts as.
    pub profile: Option<String>,
    /// The id of the token that opened it.
    pub token_id: Option<String>,
    /// What the transport keeps to restore it (for MCP, the `initialize` parameters as JSON).
    pub state: Option<String>,
}

/// Seconds of a `ttl`, as PostgreSQL's interval arithmetic takes them.
fn seconds(ttl: Duration) -> f64 {
    ttl.as_secs_f64()
}

impl PgStore {
    /// Binds session `id` to the token `owner` (and its profile), for `ttl` from now; the
    /// transport's state, if already kept, stays.
    pub async fn open_session(
        &self,
        kind: SessionKind,
        id: &str,
        owner: [u8; 32],
        profile: &str,
        token_id: Option<&str>,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO shared_sessions (kind, id, owner, profile, token_id, expires_at)
                 VALUES ($1, $2, $3, $4, $5, clock_timestamp() + make_interval(secs => $6))
                 ON CONFLICT (kind, id) DO UPDATE SET owner = excluded.owner, profile = excluded.profile,
                   token_id = excluded.token_id, expires_at = excluded.expires_at",
                &[&kind.as_str(), &id, &owner.as_slice(), &profile, &token_id, &seconds(ttl)],
            )
            .await?;
        Ok(())
    }

    /// Keeps the transport's `state` of session `id` (JSON), for `ttl` from now.
    pub async fn set_session_state(
        &self,
        kind: SessionKind,
        id: &str,
        state: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO shared_sessions (kind, id, state, expires_at)
                 VALUES ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))
                 ON CONFLICT (kind, id) DO UPDATE SET state = excluded.state",
                &[&kind.as_str(), &id, &state, &seconds(ttl)],
            )
            .await?;
        Ok(())
    }

    /// Session `id`, unless it ended or expired.
    pub async fn session(
        &self,
        kind: SessionKind,
        id: &str,
    ) -> Result<Option<SharedSession>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT owner, profile, token_id, state FROM shared_sessions
                 WHERE kind = $1 AND id = $2 AND expires_at > clock_timestamp()",
                &[&kind.as_str(), &id],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let owner: Option<Vec<u8>> = row.try_get(0)?;
        let owner =
            match owner {
                None => None,
                Some(bytes) => Some(<[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
                    StoreError::Corrupt {
                        what: "a session owner that is not a SHA-256",
                    }
                })?),
            };
        Ok(Some(SharedSession {
            owner,
            profile: row.try_get(1)?,
            token_id: row.try_get(2)?,
            state: row.try_get(3)?,
        }))
    }

    /// Moves the expiry of the sessions in `used` to `ttl` from now, drops every expired
    /// session, and says which of `held` (the sessions this replica has open) still live: the
    /// others ended elsewhere, or expired, and the replica closes its copy.
    pub async fn keep_sessions(
        &self,
        kind: SessionKind,
        used: &[String],
        held: &[String],
        ttl: Duration,
    ) -> Result<HashSet<String>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        if !used.is_empty() {
            tx.execute(
                "UPDATE shared_sessions SET expires_at = clock_timestamp() + make_interval(secs => $3)
                 WHERE kind = $1 AND id = ANY($2) AND expires_at > clock_timestamp()",
                &[&kind.as_str(), &used, &seconds(ttl)],
            )
            .await?;
        }
        tx.execute(
            "DELETE FROM shared_sessions WHERE expires_at <= clock_timestamp()",
            &[],
        )
        .await?;
        let alive = if held.is_empty() {
            HashSet::new()
        } else {
            tx.query(
                "SELECT id FROM shared_sessions WHERE kind = $1 AND id = ANY($2)",
                &[&kind.as_str(), &held],
            )
            .await?
            .iter()
            .map(|row| row.try_get::<_, String>(0))
            .collect::<Result<HashSet<_>, _>>()?
        };
        tx.commit().await?;
        Ok(alive)
    }

    /// Ends session `id` everywhere: the row goes, and every replica hears of it.
    pub async fn end_session(&self, kind: SessionKind, id: &str) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute(
            "DELETE FROM shared_sessions WHERE kind = $1 AND id = $2",
            &[&kind.as_str(), &id],
        )
        .await?;
        let notice = format!("session:{}:{id}", kind.as_str());
        tx.execute("SELECT pg_notify($1, $2)", &[&EVENTS, &notice])
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
