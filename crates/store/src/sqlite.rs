//! The embedded SQLite store: one database file, private to its owner, in WAL mode, pruned as
//! it is written. Each concern's SQLite queries live beside its types (`records`, `tools`,
//! `state`, ...), as methods of [`Store`]; the handle runs them on one thread.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension};

use crate::error::StoreError;
use crate::ids::now_ms;
use crate::{migrate, records};

/// How long things are kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Retention {
    /// How long a full output stays readable.
    pub outputs: Duration,
    /// Execution records kept; the oldest go first.
    pub max_records: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            outputs: Duration::from_secs(168 * 3600),
            max_records: 100_000,
        }
    }
}

/// Puts the file in WAL mode (a setting the file keeps). On a new file another process may be
/// doing the same: SQLite then answers busy at once, without waiting out the busy timeout,
/// so the switch is tried again for as long as that timeout.
fn enter_wal_mode(conn: &Connection) -> Result<(), StoreError> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            done => return Ok(done?),
        }
    }
}

/// A synchronous connection to the store. The gateway uses it through [`StoreHandle`](crate::StoreHandle); the
/// CLI uses it directly.
#[derive(Debug)]
pub struct Store {
    pub(crate) conn: Connection,
    pub(crate) retention: Retention,
    writes: u64,
    /// Records that started before this Unix millisecond keep no `shown` text any more: each
    /// prune clears only the records that fell out of the most recent since the last one.
    shown_cleared_below: i64,
}

/// Writes between two prunes of expired outputs and surplus records.
const PRUNE_EVERY: u64 = 100;

/// How many records a prune keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cap {
    /// At most `max_records`.
    Exact,
    /// 95% of `max_records` once past it (so the next count is many writes away).
    WithSlack,
}

impl Store {
    /// Opens (creating if needed) the database at `path`, in WAL mode, and migrates it.
    pub fn open(path: &Path, retention: Retention) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
        }
        let conn = Connection::open(path).map_err(|e| StoreError::Open {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        restrict_to_owner(path)?;
        Store::with_connection(conn, retention)
    }

    /// A store in memory (tests, and a gateway with no writable place for a file).
    pub fn open_in_memory(retention: Retention) -> Result<Store, StoreError> {
        Store::with_connection(Connection::open_in_memory()?, retention)
    }

    fn with_connection(conn: Connection, retention: Retention) -> Result<Store, StoreError> {
        conn.busy_timeout(Duration::from_secs(5))?;
        enter_wal_mode(&conn)?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        migrate::migrate(&conn)?;
        let mut store = Store {
            conn,
            retention,
            writes: 0,
            shown_cleared_below: 0,
        };
        store.prune()?;
        Ok(store)
    }

    /// Deletes expired outputs and the records past the cap, exactly.
    pub fn prune(&mut self) -> Result<(), StoreError> {
        self.prune_outputs()?;
        self.cap_records(Cap::Exact)?;
        self.clear_shown()
    }

    /// What every [`PRUNE_EVERY`] writes does: the same, but it looks at the records only
    /// when a bound it reads in O(log n) says they may be past the cap, and then drops the
    /// oldest down to 95% of it, so the count is paid once in many writes (it used to walk
    /// every record, and every code, on each prune: a fifth of the gateway's CPU under load).
    fn prune_often(&mut self) -> Result<(), StoreError> {
        self.prune_outputs()?;
        self.cap_records(Cap::WithSlack)?;
        self.clear_shown()
    }

    fn prune_outputs(&mut self) -> Result<(), StoreError> {
        let cutoff = now_ms() - self.retention.outputs.as_millis() as i64;
        self.conn
            .execute("DELETE FROM outputs WHERE created_at_ms < ?1", [cutoff])?;
        self.prune_state()
    }

    /// Drops the oldest records past the cap, and the codes only they pointed at.
    fn cap_records(&mut self, cap: Cap) -> Result<(), StoreError> {
        let max = i64::try_from(self.retention.max_records).unwrap_or(i64::MAX);
        if cap == Cap::WithSlack {
            // Row ids only grow, and a record's row is gone when it is: the span of the ids
            // bounds the count from above.
            // Two subqueries: SQLite reads one min() or max() from the b-tree's end, but a
            // query that asks for both scans the table.
            let (low, high): (Option<i64>, Option<i64>) = self.conn.query_row(
                "SELECT (SELECT min(rowid) FROM executions), (SELECT max(rowid) FROM executions)",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?;
            let span = high.zip(low).map_or(0, |(h, l)| h - l + 1);
            if span <= max {
                return Ok(());
            }
        }
        let count: i64 = self
            .conn
            .query_row("SELECT count(*) FROM executions", [], |row| row.get(0))?;
        let keep = match cap {
            Cap::Exact => max,
            Cap::WithSlack => max - max / 20,
        };
        let surplus = count - keep;
        if surplus <= 0 {
            return Ok(());
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let hashes: Vec<String> = {
            let mut statement = tx.prepare(
                "SELECT DISTINCT code_hash FROM (SELECT code_hash FROM executions ORDER BY started_at_ms LIMIT ?1)",
            )?;
            let rows = statement.query_map([surplus], |row| row.get(0))?;
            rows.collect::<Result<_, _>>()?
        };
        tx.execute(
            "DELETE FROM executions WHERE id IN (SELECT id FROM executions ORDER BY started_at_ms LIMIT ?1)",
            [surplus],
        )?;
        for hash in &hashes {
            tx.execute(
                "DELETE FROM codes WHERE hash = ?1 AND NOT EXISTS (SELECT 1 FROM executions WHERE code_hash = ?1)",
                [hash],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Lets the records that fell out of the most recent [`records::KEEP_SHOWN`] since the
    /// last prune forget what the model was shown. Both steps walk the time index.
    fn clear_shown(&mut self) -> Result<(), StoreError> {
        let keep_from: Option<i64> = self
            .conn
            .query_row(
                "SELECT started_at_ms FROM executions ORDER BY started_at_ms DESC LIMIT 1 OFFSET ?1",
                [records::KEEP_SHOWN as i64 - 1],
                |row| row.get(0),
            )
            .optional()?;
        if let Some(keep_from) = keep_from.filter(|&k| k > self.shown_cleared_below) {
            self.conn.execute(
                "UPDATE executions SET shown = NULL WHERE started_at_ms >= ?1 AND started_at_ms < ?2 AND shown IS NOT NULL",
                [self.shown_cleared_below, keep_from],
            )?;
            self.shown_cleared_below = keep_from;
        }
        Ok(())
    }

    pub(crate) fn wrote(&mut self) -> Result<(), StoreError> {
        self.writes += 1;
        if self.writes.is_multiple_of(PRUNE_EVERY) {
            self.prune_often()?;
        }
        Ok(())
    }
}

/// Stored outputs hold whatever tools returned: only the owner may read the file.
fn restrict_to_owner(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|e| {
        StoreError::Open {
            path: path.display().to_string(),
            message: format!("cannot make it private (mode 0600): {e}"),
        }
    })
}
