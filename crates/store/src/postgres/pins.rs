//! Pins and held changes on PostgreSQL: the same rows as the SQLite engine (`tool_pins`,
//! `tool_pins_held`). A listing's record and an acceptance each hold the backend's advisory
//! lock, so replicas that see one listing at once record it once.

use tokio_postgres::Row;

use super::PgStore;
use crate::error::StoreError;
use crate::ids::now_ms;
use crate::pins::{HELD_COLUMNS, StoredHeld, StoredPin, check_listing};

fn pin(row: &Row) -> Result<StoredPin, StoreError> {
    Ok(StoredPin {
        backend: row.try_get(0)?,
        tool: row.try_get(1)?,
        digest: row.try_get(2)?,
        definition: row.try_get(3)?,
        decided_by: row.try_get(4)?,
    })
}

fn held(row: &Row) -> Result<StoredHeld, StoreError> {
    Ok(StoredHeld {
        backend: row.try_get(0)?,
        tool: row.try_get(1)?,
        kind: row.try_get(2)?,
        digest: row.try_get(3)?,
        definition: row.try_get(4)?,
        findings: row.try_get(5)?,
        rejected_by: row.try_get(6)?,
    })
}

const LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended('pins:' || $1, 0))";

impl PgStore {
    /// Every pin (of `backend`, or of all backends).
    pub async fn pins(&self, backend: Option<&str>) -> Result<Vec<StoredPin>, StoreError> {
        let client = self.client().await?;
        client
            .query(
                "SELECT backend, tool, digest, definition, decided_by FROM tool_pins
                 WHERE $1::TEXT IS NULL OR backend = $1 ORDER BY backend, tool",
                &[&backend],
            )
            .await?
            .iter()
            .map(pin)
            .collect()
    }

    /// The digest of every pin, as `(backend, tool, digest)`.
    pub async fn pin_digests(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        let client = self.client().await?;
        Ok(client
            .query(
                "SELECT backend, tool, digest FROM tool_pins ORDER BY backend, tool",
                &[],
            )
            .await?
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect())
    }

    /// Every held change (of `backend`, or of all backends).
    pub async fn held(&self, backend: Option<&str>) -> Result<Vec<StoredHeld>, StoreError> {
        let client = self.client().await?;
        client
            .query(
                &format!("SELECT {HELD_COLUMNS} FROM tool_pins_held WHERE $1::TEXT IS NULL OR backend = $1 ORDER BY backend, tool"),
                &[&backend],
            )
            .await?
            .iter()
            .map(held)
            .collect()
    }

    /// Records what `backend`'s listing decided (see `Store::record_listing`).
    pub async fn record_listing(
        &self,
        backend: &str,
        pinned: &[StoredPin],
        changes: &[StoredHeld],
    ) -> Result<(), StoreError> {
        check_listing(pinned, changes)?;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute(LOCK, &[&backend]).await?;
        let now = now_ms();
        for pin in pinned {
            tx.execute(
                "INSERT INTO tool_pins (backend, tool, digest, definition, decided_by, updated_at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (backend, tool) DO NOTHING",
                &[&backend, &pin.tool, &pin.digest, &pin.definition, &pin.decided_by, &now],
            )
            .await?;
        }
        // A person's rejection stays with the definition it rejected.
        let rejections: Vec<(String, String, Option<String>)> = tx
            .query(
                "SELECT tool, digest, rejected_by FROM tool_pins_held WHERE backend = $1 AND rejected_by IS NOT NULL",
                &[&backend],
            )
            .await?
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
            .collect::<Result<_, StoreError>>()?;
        tx.execute("DELETE FROM tool_pins_held WHERE backend = $1", &[&backend])
            .await?;
        for change in changes {
            let rejected_by = rejections
                .iter()
                .find(|(tool, digest, _)| *tool == change.tool && *digest == change.digest)
                .and_then(|(_, _, by)| by.clone());
            tx.execute(
                "INSERT INTO tool_pins_held (backend, tool, kind, digest, definition, findings, rejected_by, seen_at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[&backend, &change.tool, &change.kind, &change.digest, &change.definition, &change.findings, &rejected_by, &now],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Accepts the held change of `backend`'s `tool` (see `Store::accept_held`).
    pub async fn accept_held(
        &self,
        backend: &str,
        tool: &str,
        by: &str,
    ) -> Result<Option<StoredHeld>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute(LOCK, &[&backend]).await?;
        let Some(row) = tx
            .query_opt(
                &format!(
                    "SELECT {HELD_COLUMNS} FROM tool_pins_held WHERE backend = $1 AND tool = $2"
                ),
                &[&backend, &tool],
            )
            .await?
        else {
            return Ok(None);
        };
        let change = held(&row)?;
        tx.execute(
            "INSERT INTO tool_pins (backend, tool, digest, definition, decided_by, updated_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (backend, tool) DO UPDATE SET digest = excluded.digest, definition = excluded.definition,
               decided_by = excluded.decided_by, updated_at_ms = excluded.updated_at_ms",
            &[&backend, &tool, &change.digest, &change.definition, &by, &now_ms()],
        )
        .await?;
        tx.execute(
            "DELETE FROM tool_pins_held WHERE backend = $1 AND tool = $2",
            &[&backend, &tool],
        )
        .await?;
        tx.commit().await?;
        Ok(Some(change))
    }

    /// Rejects the held change of `backend`'s `tool` (it stays held). Whether one was held.
    pub async fn reject_held(
        &self,
        backend: &str,
        tool: &str,
        by: &str,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let changed = client
            .execute(
                "UPDATE tool_pins_held SET rejected_by = $3 WHERE backend = $1 AND tool = $2",
                &[&backend, &tool, &by],
            )
            .await?;
        Ok(changed > 0)
    }
}
