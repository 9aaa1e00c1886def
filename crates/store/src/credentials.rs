//! Users' own backend secrets, as the store keeps them: sealed. The store never sees a key or
//! a secret; it keeps what the identity crate sealed, by owner (a user's id, or a static
//! token's) and backend, and hands it back to be opened. One row per owner and backend: a new
//! secret replaces the old.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use crate::error::StoreError;
use crate::ids::now_ms;
use crate::sqlite::Store;

/// The most credentials one owner may keep (one per backend; a config has far fewer).
pub const MAX_CREDENTIALS_PER_OWNER: i64 = 256;
/// The most bytes of one sealed credential.
pub const MAX_SEALED_BYTES: usize = 16 * 1024;

/// That an owner has a credential for a backend, without the credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CredentialEntry {
    /// The backend it is for.
    pub backend: String,
    /// When it was last set, in Unix milliseconds.
    pub updated_at_ms: i64,
}

/// Refuses what no owner may keep: an oversized secret.
pub(crate) fn check_sealed(sealed: &[u8]) -> Result<(), StoreError> {
    if sealed.len() > MAX_SEALED_BYTES {
        return Err(StoreError::Invalid(format!(
            "a credential may be at most {MAX_SEALED_BYTES} bytes sealed; this one is {}",
            sealed.len()
        )));
    }
    Ok(())
}

/// The refusal for an owner with too many credentials.
pub(crate) fn too_many() -> StoreError {
    StoreError::Invalid(format!(
        "an owner may keep at most {MAX_CREDENTIALS_PER_OWNER} credentials; remove one first"
    ))
}

impl Store {
    /// Keeps `sealed` as `owner`'s credential for `backend`, in place of any before.
    pub fn put_credential(
        &mut self,
        owner: &str,
        backend: &str,
        sealed: &[u8],
    ) -> Result<(), StoreError> {
        check_sealed(sealed)?;
        let tx = self.conn.transaction()?;
        let (count, exists): (i64, bool) = tx.query_row(
            "SELECT count(*), coalesce(sum(backend = ?2), 0) > 0 FROM credentials WHERE owner = ?1",
            params![owner, backend],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        if !exists && count >= MAX_CREDENTIALS_PER_OWNER {
            return Err(too_many());
        }
        tx.execute(
            "INSERT INTO credentials (owner, backend, sealed, updated_at_ms) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (owner, backend) DO UPDATE SET sealed = excluded.sealed, updated_at_ms = excluded.updated_at_ms",
            params![owner, backend, sealed, now_ms()],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// `owner`'s sealed credential for `backend`, if it has one.
    pub fn credential(&self, owner: &str, backend: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT sealed FROM credentials WHERE owner = ?1 AND backend = ?2",
                params![owner, backend],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Removes `owner`'s credential for `backend`; whether there was one.
    pub fn remove_credential(&mut self, owner: &str, backend: &str) -> Result<bool, StoreError> {
        Ok(self.conn.execute(
            "DELETE FROM credentials WHERE owner = ?1 AND backend = ?2",
            params![owner, backend],
        )? > 0)
    }

    /// The backends `owner` has a credential for, by name.
    pub fn credentials_of(&self, owner: &str) -> Result<Vec<CredentialEntry>, StoreError> {
        let mut statement = self.conn.prepare(
            "SELECT backend, updated_at_ms FROM credentials WHERE owner = ?1 ORDER BY backend",
        )?;
        let rows = statement.query_map(params![owner], |row| {
            Ok(CredentialEntry {
                backend: row.get(0)?,
                updated_at_ms: row.get(1)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
