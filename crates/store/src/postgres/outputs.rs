//! Full outputs on PostgreSQL. The body is `bytea` stored out of line and uncompressed, so a
//! byte range reads only the chunks it covers: `substring` of a window a few bytes wider than
//! the range, cut on character boundaries as the SQLite engine cuts the whole.

use super::PgStore;
use crate::error::StoreError;
use crate::ids::now_ms;
use crate::outputs::OutputSlice;
use crate::outputs::{slice_window, window_for};

impl PgStore {
    /// Keeps `body` as the full output `id`; returns once it is committed.
    pub async fn save_output(&self, id: &str, body: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO outputs (execution_id, created_at_ms, body) VALUES ($1, $2, $3)
                 ON CONFLICT (execution_id) DO UPDATE SET created_at_ms = excluded.created_at_ms, body = excluded.body",
                &[&id, &now_ms(), &body.as_bytes()],
            )
            .await?;
        Ok(())
    }

    /// The whole stored output `id`.
    pub async fn output(&self, id: &str) -> Result<String, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt("SELECT body FROM outputs WHERE execution_id = $1", &[&id])
            .await?
            .ok_or_else(|| StoreError::NoOutput { id: id.to_string() })?;
        text(row.try_get(0)?)
    }

    /// The whole stored output `id` for the operator, whoever's it is: `id` itself, else the
    /// same id stored for an HTTP caller (`id@owner`).
    pub async fn output_for_operator(&self, id: &str) -> Result<String, StoreError> {
        if let Ok(body) = self.output(id).await {
            return Ok(body);
        }
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT body FROM outputs WHERE execution_id > $1 AND execution_id < $2
                 ORDER BY execution_id LIMIT 1",
                &[&format!("{id}@"), &format!("{id}A")],
            )
            .await?
            .ok_or_else(|| StoreError::NoOutput { id: id.to_string() })?;
        text(row.try_get(0)?)
    }

    /// Bytes `offset..offset + length` of output `id` (to the end when `length` is `None`),
    /// with both ends moved back to the nearest character boundary.
    pub async fn output_range(
        &self,
        id: &str,
        offset: usize,
        length: Option<usize>,
    ) -> Result<OutputSlice, StoreError> {
        let (start, window_length) = window_for(offset, length);
        let client = self.client().await?;
        // substring counts from 1.
        // substring takes 32-bit positions; a bytea holds at most 1 GB.
        let from = i64::try_from(start)
            .unwrap_or(i64::MAX)
            .min(i64::from(i32::MAX) - 1)
            + 1;
        let row = match window_length {
            Some(length) => {
                let length = i64::try_from(length).unwrap_or(i64::MAX).min(i64::from(i32::MAX));
                client
                    .query_opt(
                        "SELECT octet_length(body), substring(body FROM ($2::bigint)::int FOR ($3::bigint)::int) FROM outputs WHERE execution_id = $1",
                        &[&id, &from, &length],
                    )
                    .await?
            }
            None => {
                client
                    .query_opt(
                        "SELECT octet_length(body), substring(body FROM ($2::bigint)::int) FROM outputs WHERE execution_id = $1",
                        &[&id, &from],
                    )
                    .await?
            }
        }
        .ok_or_else(|| StoreError::NoOutput { id: id.to_string() })?;
        let total = usize::try_from(row.try_get::<_, i32>(0)?).unwrap_or(0);
        let window: Vec<u8> = row.try_get(1)?;
        slice_window(&window, start, total, offset, length)
    }
}

fn text(bytes: Vec<u8>) -> Result<String, StoreError> {
    String::from_utf8(bytes).map_err(|_| StoreError::Corrupt {
        what: "a stored output is not UTF-8 text",
    })
}
