//! Script state on PostgreSQL: the same rows and bounds as the SQLite engine
//! (`script_state`), so an execution on any replica reads what one on another kept.

use super::PgStore;
use crate::error::StoreError;
use crate::ids::now_ms;
use crate::state::{check_entry, check_room};

impl PgStore {
    /// `owner`'s value under `key`, unless it expired.
    pub async fn state_get(&self, owner: &str, key: &str) -> Result<Option<String>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT value FROM script_state WHERE owner = $1 AND key = $2 AND expires_at_ms > $3",
                &[&owner, &key, &now_ms()],
            )
            .await?;
        Ok(match row {
            Some(row) => Some(row.try_get(0)?),
            None => None,
        })
    }

    /// Keeps `value` as `owner`'s `key` for `ttl_ms`, in place of any before.
    pub async fn state_set(
        &self,
        owner: &str,
        key: &str,
        value: &str,
        ttl_ms: i64,
    ) -> Result<(), StoreError> {
        check_entry(key, value)?;
        let now = now_ms();
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // One owner's writes take turns, so two replicas cannot both pass the bounds.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('state:' || $1, 0))",
            &[&owner],
        )
        .await?;
        tx.execute(
            "DELETE FROM script_state WHERE owner = $1 AND expires_at_ms <= $2",
            &[&owner, &now],
        )
        .await?;
        let row = tx
            .query_one(
                "SELECT count(*), coalesce(sum(octet_length(value)), 0)::BIGINT FROM script_state WHERE owner = $1 AND key <> $2",
                &[&owner, &key],
            )
            .await?;
        let (keys, bytes): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        check_room(keys, bytes, value)?;
        tx.execute(
            "INSERT INTO script_state (owner, key, value, expires_at_ms, updated_at_ms) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (owner, key) DO UPDATE SET value = excluded.value, expires_at_ms = excluded.expires_at_ms, updated_at_ms = excluded.updated_at_ms",
            &[&owner, &key, &value, &now.saturating_add(ttl_ms), &now],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes `owner`'s `key`; whether it held a value that had not expired.
    pub async fn state_delete(&self, owner: &str, key: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "DELETE FROM script_state WHERE owner = $1 AND key = $2 RETURNING expires_at_ms",
                &[&owner, &key],
            )
            .await?;
        let now = now_ms();
        Ok(rows
            .iter()
            .any(|row| row.try_get::<_, i64>(0).is_ok_and(|at| at > now)))
    }

    /// `owner`'s keys that have not expired, in order.
    pub async fn state_keys(&self, owner: &str) -> Result<Vec<String>, StoreError> {
        let client = self.client().await?;
        client
            .query(
                "SELECT key FROM script_state WHERE owner = $1 AND expires_at_ms > $2 ORDER BY key",
                &[&owner, &now_ms()],
            )
            .await?
            .iter()
            .map(|row| Ok(row.try_get(0)?))
            .collect()
    }
}
