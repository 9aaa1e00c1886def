//! Learned return shapes on PostgreSQL: the same rows as the SQLite engine (`tool_shapes`);
//! a merge holds the row's lock, so replicas that learn at once each add what they saw.

use super::PgStore;
use crate::error::StoreError;
use crate::ids::now_ms;
use crate::shapes::{ShapeMerge, StoredShape, check_shape};

impl PgStore {
    /// Every stored shape written after `since_ms` (0: every one).
    pub async fn shapes(&self, since_ms: i64) -> Result<Vec<StoredShape>, StoreError> {
        let client = self.client().await?;
        client
            .query(
                "SELECT backend, tool, shape FROM tool_shapes WHERE updated_at_ms > $1 ORDER BY backend, tool",
                &[&since_ms],
            )
            .await?
            .iter()
            .map(|row| {
                Ok(StoredShape {
                    backend: row.try_get(0)?,
                    tool: row.try_get(1)?,
                    shape: row.try_get(2)?,
                })
            })
            .collect()
    }

    /// Writes `merge`'s answer for the stored shape of `backend`'s `tool`, and returns it.
    pub async fn merge_shape(
        &self,
        backend: &str,
        tool: &str,
        merge: ShapeMerge,
    ) -> Result<String, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('shape:' || $1 || '.' || $2, 0))",
            &[&backend, &tool],
        )
        .await?;
        let stored: Option<String> = match tx
            .query_opt(
                "SELECT shape FROM tool_shapes WHERE backend = $1 AND tool = $2",
                &[&backend, &tool],
            )
            .await?
        {
            Some(row) => Some(row.try_get(0)?),
            None => None,
        };
        let shape = merge(stored.as_deref());
        check_shape(&shape)?;
        tx.execute(
            "INSERT INTO tool_shapes (backend, tool, shape, updated_at_ms) VALUES ($1, $2, $3, $4)
             ON CONFLICT (backend, tool) DO UPDATE SET shape = excluded.shape, updated_at_ms = excluded.updated_at_ms",
            &[&backend, &tool, &shape, &now_ms()],
        )
        .await?;
        tx.commit().await?;
        Ok(shape)
    }
}
