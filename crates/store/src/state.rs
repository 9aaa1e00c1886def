//! Script state: the small key-value store a script reaches as `state`, kept per owner (one
//! caller: a user, a token or the local user, under one profile) so that what one execution
//! keeps the next can read. Values are JSON text, bounded per value and per owner, and every
//! one expires; an expired value is never read and is deleted by pruning or the owner's next
//! write.

use rusqlite::{OptionalExtension, params};

use crate::error::StoreError;
use crate::ids::now_ms;
use crate::sqlite::Store;

/// The most bytes one value may take, as JSON.
pub const MAX_STATE_VALUE_BYTES: usize = 64 * 1024;
/// The most keys one owner may keep.
pub const MAX_STATE_KEYS: i64 = 1_000;
/// The most bytes of values one owner may keep.
pub const MAX_STATE_BYTES: i64 = 4 * 1024 * 1024;
/// The longest key, in bytes.
pub const MAX_STATE_KEY_BYTES: usize = 256;

/// Refuses a key or value no owner may keep.
pub(crate) fn check_entry(key: &str, value: &str) -> Result<(), StoreError> {
    if key.is_empty() || key.len() > MAX_STATE_KEY_BYTES {
        return Err(StoreError::Invalid(format!(
            "state: a key is 1 to {MAX_STATE_KEY_BYTES} bytes; this one is {}",
            key.len()
        )));
    }
    if value.len() > MAX_STATE_VALUE_BYTES {
        return Err(StoreError::Invalid(format!(
            "state: a value may be at most {MAX_STATE_VALUE_BYTES} bytes as JSON; the one for {key:?} is {}. Keep less (ids rather than whole records), or split it over several keys",
            value.len()
        )));
    }
    Ok(())
}

/// Refuses a write that would take an owner past its bounds, given what it keeps now (`keys`
/// and `bytes`, not counting the value the write replaces).
pub(crate) fn check_room(keys: i64, bytes: i64, value: &str) -> Result<(), StoreError> {
    if keys >= MAX_STATE_KEYS {
        return Err(StoreError::Invalid(format!(
            "state: a caller may keep at most {MAX_STATE_KEYS} keys; delete some first (state.keys() lists them, state.delete(key) removes one)"
        )));
    }
    let total = bytes + value.len() as i64;
    if total > MAX_STATE_BYTES {
        return Err(StoreError::Invalid(format!(
            "state: a caller may keep at most {MAX_STATE_BYTES} bytes of values; this write would make {total}. Delete some first (state.delete(key))"
        )));
    }
    Ok(())
}

impl Store {
    /// `owner`'s value under `key`, unless it expired.
    pub fn state_get(&self, owner: &str, key: &str) -> Result<Option<String>, StoreError> {
        // Cached: a script may read many keys, and parsing the statement is most of a read.
        Ok(self
            .conn
            .prepare_cached(
                "SELECT value FROM script_state WHERE owner = ?1 AND key = ?2 AND expires_at_ms > ?3",
            )?
            .query_row(params![owner, key, now_ms()], |row| row.get(0))
            .optional()?)
    }

    /// Keeps `value` (JSON text) as `owner`'s `key` for `ttl_ms`, in place of any before.
    pub fn state_set(
        &mut self,
        owner: &str,
        key: &str,
        value: &str,
        ttl_ms: i64,
    ) -> Result<(), StoreError> {
        check_entry(key, value)?;
        let now = now_ms();
        let tx = self.conn.transaction()?;
        tx.execute(
            "DELETE FROM script_state WHERE owner = ?1 AND expires_at_ms <= ?2",
            params![owner, now],
        )?;
        let (keys, bytes): (i64, i64) = tx.query_row(
            "SELECT count(*), coalesce(sum(length(CAST(value AS BLOB))), 0) FROM script_state WHERE owner = ?1 AND key <> ?2",
            params![owner, key],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        check_room(keys, bytes, value)?;
        tx.execute(
            "INSERT INTO script_state (owner, key, value, expires_at_ms, updated_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (owner, key) DO UPDATE SET value = excluded.value, expires_at_ms = excluded.expires_at_ms, updated_at_ms = excluded.updated_at_ms",
            params![owner, key, value, now.saturating_add(ttl_ms), now],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Removes `owner`'s `key`; whether it held a value that had not expired.
    pub fn state_delete(&mut self, owner: &str, key: &str) -> Result<bool, StoreError> {
        let live = self.state_get(owner, key)?.is_some();
        self.conn.execute(
            "DELETE FROM script_state WHERE owner = ?1 AND key = ?2",
            params![owner, key],
        )?;
        Ok(live)
    }

    /// `owner`'s keys that have not expired, in order.
    pub fn state_keys(&self, owner: &str) -> Result<Vec<String>, StoreError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT key FROM script_state WHERE owner = ?1 AND expires_at_ms > ?2 ORDER BY key",
        )?;
        let rows = statement.query_map(params![owner, now_ms()], |row| row.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Deletes every expired value.
    pub(crate) fn prune_state(&mut self) -> Result<(), StoreError> {
        self.conn.execute(
            "DELETE FROM script_state WHERE expires_at_ms <= ?1",
            [now_ms()],
        )?;
        Ok(())
    }
}
