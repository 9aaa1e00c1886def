//! Users' sealed backend secrets on PostgreSQL: the same rows as the SQLite engine
//! (`credentials`), so any replica opens what another kept.

use super::PgStore;
use crate::credentials::{CredentialEntry, MAX_CREDENTIALS_PER_OWNER, check_sealed, too_many};
use crate::error::StoreError;
use crate::ids::now_ms;

impl PgStore {
    /// Keeps `sealed` as `owner`'s credential for `backend`, in place of any before.
    pub async fn put_credential(
        &self,
        owner: &str,
        backend: &str,
        sealed: &[u8],
    ) -> Result<(), StoreError> {
        check_sealed(sealed)?;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // One owner's changes take turns, so two replicas cannot both pass the count.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('credentials:' || $1, 0))",
            &[&owner],
        )
        .await?;
        let row = tx
            .query_one(
                "SELECT count(*), coalesce(bool_or(backend = $2), false) FROM credentials WHERE owner = $1",
                &[&owner, &backend],
            )
            .await?;
        let (count, exists): (i64, bool) = (row.try_get(0)?, row.try_get(1)?);
        if !exists && count >= MAX_CREDENTIALS_PER_OWNER {
            return Err(too_many());
        }
        tx.execute(
            "INSERT INTO credentials (owner, backend, sealed, updated_at_ms) VALUES ($1, $2, $3, $4)
             ON CONFLICT (owner, backend) DO UPDATE SET sealed = excluded.sealed, updated_at_ms = excluded.updated_at_ms",
            &[&owner, &backend, &sealed, &now_ms()],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// `owner`'s sealed credential for `backend`, if it has one.
    pub async fn credential(
        &self,
        owner: &str,
        backend: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT sealed FROM credentials WHERE owner = $1 AND backend = $2",
                &[&owner, &backend],
            )
            .await?;
        Ok(match row {
            Some(row) => Some(row.try_get(0)?),
            None => None,
        })
    }

    /// Removes `owner`'s credential for `backend`; whether there was one.
    pub async fn remove_credential(&self, owner: &str, backend: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        Ok(client
            .execute(
                "DELETE FROM credentials WHERE owner = $1 AND backend = $2",
                &[&owner, &backend],
            )
            .await?
            > 0)
    }

    /// The backends `owner` has a credential for, by name.
    pub async fn credentials_of(&self, owner: &str) -> Result<Vec<CredentialEntry>, StoreError> {
        let client = self.client().await?;
        client
            .query(
                "SELECT backend, updated_at_ms FROM credentials WHERE owner = $1 ORDER BY backend",
                &[&owner],
            )
            .await?
            .iter()
            .map(|row| {
                Ok(CredentialEntry {
                    backend: row.try_get(0)?,
                    updated_at_ms: row.try_get(1)?,
                })
            })
            .collect()
    }
}
