//! Learned return shapes, one per backend and tool, as text the gateway wrote (the store never
//! reads a shape). A shape changes by merging: the caller's merge runs on what is stored, in
//! the same transaction as the write, so replicas that learn at once lose nothing.

use rusqlite::{OptionalExtension, params};

use crate::error::StoreError;
use crate::ids::now_ms;
use crate::sqlite::Store;

/// The most bytes of one stored shape; a merge that returns more is not written.
pub const MAX_SHAPE_BYTES: usize = 256 * 1024;

/// A shape's new text from the stored one (`None` when none is stored).
pub type ShapeMerge = Box<dyn FnOnce(Option<&str>) -> String + Send>;

/// One stored shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredShape {
    /// The backend.
    pub backend: String,
    /// The tool, as the backend names it.
    pub tool: String,
    /// The shape, as the gateway wrote it.
    pub shape: String,
}

/// Refuses a shape larger than any the gateway writes.
pub(crate) fn check_shape(shape: &str) -> Result<(), StoreError> {
    if shape.len() > MAX_SHAPE_BYTES {
        return Err(StoreError::Invalid(format!(
            "a learned shape may be at most {MAX_SHAPE_BYTES} bytes; this one is {}",
            shape.len()
        )));
    }
    Ok(())
}

impl Store {
    /// Every stored shape written after `since_ms` (0: every one).
    pub fn shapes(&self, since_ms: i64) -> Result<Vec<StoredShape>, StoreError> {
        let mut statement = self.conn.prepare(
            "SELECT backend, tool, shape FROM tool_shapes WHERE updated_at_ms > ?1 ORDER BY backend, tool",
        )?;
        let rows = statement.query_map([since_ms], |row| {
            Ok(StoredShape {
                backend: row.get(0)?,
                tool: row.get(1)?,
                shape: row.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Writes `merge`'s answer for the stored shape of `backend`'s `tool`, and returns it.
    pub fn merge_shape(
        &mut self,
        backend: &str,
        tool: &str,
        merge: ShapeMerge,
    ) -> Result<String, StoreError> {
        let tx = self.conn.transaction()?;
        let stored: Option<String> = tx
            .query_row(
                "SELECT shape FROM tool_shapes WHERE backend = ?1 AND tool = ?2",
                params![backend, tool],
                |row| row.get(0),
            )
            .optional()?;
        let shape = merge(stored.as_deref());
        check_shape(&shape)?;
        tx.execute(
            "INSERT INTO tool_shapes (backend, tool, shape, updated_at_ms) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (backend, tool) DO UPDATE SET shape = excluded.shape, updated_at_ms = excluded.updated_at_ms",
            params![backend, tool, shape, now_ms()],
        )?;
        tx.commit()?;
        Ok(shape)
    }
}
