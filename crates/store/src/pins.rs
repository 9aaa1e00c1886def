//! Pins of backends' tool definitions and the changes held for review (issue 49), as text the
//! gateway wrote (the store never reads a definition). Shared by every replica, so a tool
//! pinned or held on one is pinned or held on all, and kept across restarts.
//!
//! A listing's pins are recorded only where none is (the first sight wins, whichever replica
//! saw it); its held changes replace the backend's held rows, keeping a person's rejection of
//! the same definition. Accepting moves a held definition into the pin in one transaction.

use rusqlite::{OptionalExtension, params};

use crate::error::StoreError;
use crate::ids::now_ms;
use crate::sqlite::Store;

/// The most bytes of one stored definition or findings text.
pub const MAX_PIN_BYTES: usize = 512 * 1024;

/// One pin: the definition accepted for a backend's tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPin {
    /// The backend.
    pub backend: String,
    /// The tool, as the backend names it.
    pub tool: String,
    /// The accepted definition's digest.
    pub digest: String,
    /// The accepted definition, as the gateway wrote it.
    pub definition: String,
    /// Who accepted it: `first use`, or the person who accepted a held change.
    pub decided_by: String,
}

/// A definition held for review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredHeld {
    /// The backend.
    pub backend: String,
    /// The tool, as the backend names it.
    pub tool: String,
    /// `changed` or `new`, as the gateway wrote it.
    pub kind: String,
    /// The held definition's digest.
    pub digest: String,
    /// The held definition, as the gateway wrote it.
    pub definition: String,
    /// What the scan found in it, as the gateway wrote it.
    pub findings: String,
    /// Who rejected it, if someone did (it stays held).
    pub rejected_by: Option<String>,
}

/// Refuses text larger than any the gateway writes.
fn check_pin_text(what: &str, text: &str) -> Result<(), StoreError> {
    if text.len() > MAX_PIN_BYTES {
        return Err(StoreError::Invalid(format!(
            "a pinned {what} may be at most {MAX_PIN_BYTES} bytes; this one is {}",
            text.len()
        )));
    }
    Ok(())
}

/// Refuses a listing's record holding text larger than any the gateway writes (both engines).
pub(crate) fn check_listing(pinned: &[StoredPin], held: &[StoredHeld]) -> Result<(), StoreError> {
    for pin in pinned {
        check_pin_text("definition", &pin.definition)?;
    }
    for change in held {
        check_pin_text("definition", &change.definition)?;
        check_pin_text("finding list", &change.findings)?;
    }
    Ok(())
}

/// The columns a held change is read by, in [`held_row`]'s order.
pub(crate) const HELD_COLUMNS: &str =
    "backend, tool, kind, digest, definition, findings, rejected_by";

fn held_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredHeld> {
    Ok(StoredHeld {
        backend: row.get(0)?,
        tool: row.get(1)?,
        kind: row.get(2)?,
        digest: row.get(3)?,
        definition: row.get(4)?,
        findings: row.get(5)?,
        rejected_by: row.get(6)?,
    })
}

impl Store {
    /// Every pin (of `backend`, or of all backends).
    pub fn pins(&self, backend: Option<&str>) -> Result<Vec<StoredPin>, StoreError> {
        let mut statement = self.conn.prepare(
            "SELECT backend, tool, digest, definition, decided_by FROM tool_pins
             WHERE ?1 IS NULL OR backend = ?1 ORDER BY backend, tool",
        )?;
        let rows = statement.query_map([backend], |row| {
            Ok(StoredPin {
                backend: row.get(0)?,
                tool: row.get(1)?,
                digest: row.get(2)?,
                definition: row.get(3)?,
                decided_by: row.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The digest of every pin, as `(backend, tool, digest)`: what a replica compares to see
    /// that a pin changed elsewhere, without reading definitions.
    pub fn pin_digests(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        let mut statement = self
            .conn
            .prepare("SELECT backend, tool, digest FROM tool_pins ORDER BY backend, tool")?;
        let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every held change (of `backend`, or of all backends).
    pub fn held(&self, backend: Option<&str>) -> Result<Vec<StoredHeld>, StoreError> {
        let mut statement = self.conn.prepare(&format!(
            "SELECT {HELD_COLUMNS} FROM tool_pins_held WHERE ?1 IS NULL OR backend = ?1 ORDER BY backend, tool"
        ))?;
        let rows = statement.query_map([backend], held_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records what `backend`'s listing decided: `pinned` where no pin is yet, and `held` as the
    /// backend's held changes (a rejection of the same definition is kept; a tool no longer
    /// held loses its row).
    pub fn record_listing(
        &mut self,
        backend: &str,
        pinned: &[StoredPin],
        held: &[StoredHeld],
    ) -> Result<(), StoreError> {
        check_listing(pinned, held)?;
        let tx = self.conn.transaction()?;
        let now = now_ms();
        for pin in pinned {
            tx.execute(
                "INSERT INTO tool_pins (backend, tool, digest, definition, decided_by, updated_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (backend, tool) DO NOTHING",
                params![backend, pin.tool, pin.digest, pin.definition, pin.decided_by, now],
            )?;
        }
        // A person's rejection stays with the definition it rejected.
        let rejections: Vec<(String, String, Option<String>)> = {
            let mut statement = tx.prepare(
                "SELECT tool, digest, rejected_by FROM tool_pins_held WHERE backend = ?1 AND rejected_by IS NOT NULL",
            )?;
            let rows = statement
                .query_map([backend], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        tx.execute("DELETE FROM tool_pins_held WHERE backend = ?1", [backend])?;
        for change in held {
            let rejected_by = rejections
                .iter()
                .find(|(tool, digest, _)| *tool == change.tool && *digest == change.digest)
                .and_then(|(_, _, by)| by.clone());
            tx.execute(
                "INSERT INTO tool_pins_held (backend, tool, kind, digest, definition, findings, rejected_by, seen_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![backend, change.tool, change.kind, change.digest, change.definition, change.findings, rejected_by, now],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Accepts the held change of `backend`'s `tool`: its definition becomes the pin, decided
    /// by `by`. Returns the change accepted, or `None` when none was held.
    pub fn accept_held(
        &mut self,
        backend: &str,
        tool: &str,
        by: &str,
    ) -> Result<Option<StoredHeld>, StoreError> {
        let tx = self.conn.transaction()?;
        let held: Option<StoredHeld> = tx
            .query_row(
                &format!(
                    "SELECT {HELD_COLUMNS} FROM tool_pins_held WHERE backend = ?1 AND tool = ?2"
                ),
                params![backend, tool],
                held_row,
            )
            .optional()?;
        let Some(held) = held else {
            return Ok(None);
        };
        tx.execute(
            "INSERT INTO tool_pins (backend, tool, digest, definition, decided_by, updated_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (backend, tool) DO UPDATE SET digest = excluded.digest, definition = excluded.definition,
               decided_by = excluded.decided_by, updated_at_ms = excluded.updated_at_ms",
            params![backend, tool, held.digest, held.definition, by, now_ms()],
        )?;
        tx.execute(
            "DELETE FROM tool_pins_held WHERE backend = ?1 AND tool = ?2",
            params![backend, tool],
        )?;
        tx.commit()?;
        Ok(Some(held))
    }

    /// Rejects the held change of `backend`'s `tool` (it stays held, marked rejected by `by`).
    /// Returns whether one was held.
    pub fn reject_held(&mut self, backend: &str, tool: &str, by: &str) -> Result<bool, StoreError> {
        let changed = self.conn.execute(
            "UPDATE tool_pins_held SET rejected_by = ?3 WHERE backend = ?1 AND tool = ?2",
            params![backend, tool, by],
        )?;
        Ok(changed > 0)
    }
}
