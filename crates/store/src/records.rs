//! Execution records: one row per `call_tool_chain`, with its calls, and the statistics built
//! from them (per-tier counts and latency percentiles, per-backend latency, bytes saved).

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use crate::error::StoreError;
use crate::sqlite::Store;

/// One execution, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExecutionRecord {
    /// The execution id (see [`crate::new_execution_id`]).
    pub id: String,
    /// When it started, in Unix milliseconds.
    pub started_at_ms: i64,
    /// `json`, `single_call`, `introspection` or `sandbox`.
    pub tier: String,
    /// A hash of the code; the code is kept once per hash (see [`ExecutionRecord::code`]).
    pub code_hash: String,
    /// The code, when known: sent with a new record, read back by [`Store::get`]. Kept once
    /// per hash, for as long as a record points at it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// How long it took.
    pub duration_ms: f64,
    /// `ok`, `error` or `cancelled`; [`RUNNING`] while it runs (a replica that died leaves it so).
    pub status: String,
    /// Tool calls made.
    pub calls: u32,
    /// Bytes of the full output.
    pub output_bytes: u64,
    /// Bytes returned to the model after shaping.
    pub returned_bytes: u64,
    /// The error kind, for failed executions.
    pub error_kind: Option<String>,
    /// The profile it ran under.
    pub profile: String,
    /// The user an identity provider proved that ran it (128 bits of its digest, in hex):
    /// such a user sees only its own records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The calls, in order.
    pub call_rows: Vec<CallRow>,
    /// The response's text as the model was shown it (the shaped result, logs and error), cut
    /// to [`MAX_SHOWN_BYTES`]; kept for the most recent [`KEEP_SHOWN`] executions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shown: Option<String>,
    /// The line of the code an error points at.
    pub error_line: Option<u32>,
}

/// The status of a record written as its execution starts, on a shared store: finished, it
/// is written again. A record left `running` long after its start is evidence that the
/// replica that ran it died.
pub const RUNNING: &str = "running";

/// The most bytes of a response's text a record keeps.
pub const MAX_SHOWN_BYTES: usize = 16 * 1024;
/// How many of the most recent records keep what the model was shown.
pub const KEEP_SHOWN: u64 = 1000;

/// Which records [`Store::list_matching`] returns; `None` matches any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordFilter {
    /// Only this profile's.
    pub profile: Option<String>,
    /// Only this user's (see [`ExecutionRecord::user`]): `Some(None)` for records no user
    /// of an identity provider ran.
    pub user: Option<Option<String>>,
    /// Only with this status (`ok`, `error`, `cancelled`).
    pub status: Option<String>,
    /// Only of this tier.
    pub tier: Option<String>,
    /// Only those started at or after this Unix millisecond.
    pub since_ms: Option<i64>,
}

/// One tool call of an execution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallRow {
    /// The backend.
    pub backend: String,
    /// The tool (original name).
    pub tool: String,
    /// How long it took; `None` if it never finished.
    pub duration_ms: Option<f64>,
    /// Whether it succeeded.
    pub ok: bool,
    /// Whether it may have changed state (`None`: the tool did not say).
    pub changed_state: Option<bool>,
    /// Bytes of its arguments (JSON).
    pub args_bytes: u64,
    /// Bytes of its result (the raw MCP result's JSON).
    pub result_bytes: u64,
    /// When it started, in milliseconds from the start of the execution (`None` on records
    /// written before sandgate kept it).
    pub started_ms: Option<f64>,
    /// Why it failed, cut to [`MAX_CALL_ERROR_CHARS`].
    pub error: Option<String>,
    /// Its arguments, when `[store] record_arguments` keeps them (cut, and marked so).
    pub arguments: Option<String>,
}

/// The longest failure text kept per call.
pub const MAX_CALL_ERROR_CHARS: usize = 1000;

/// Latency and volume of one tier.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TierStats {
    /// The tier.
    pub tier: String,
    /// Executions.
    pub count: u64,
    /// Of which failed.
    pub errors: u64,
    /// Median duration.
    pub p50_ms: f64,
    /// 95th percentile duration.
    pub p95_ms: f64,
}

/// Latency of one backend's calls.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackendStats {
    /// The backend.
    pub backend: String,
    /// Finished calls.
    pub calls: u64,
    /// Of which failed.
    pub failures: u64,
    /// Median call duration.
    pub p50_ms: f64,
    /// 95th percentile call duration.
    pub p95_ms: f64,
}

/// What `sandgate://stats` shows about executions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    /// Executions on record.
    pub executions: u64,
    /// Per tier.
    pub tiers: Vec<TierStats>,
    /// Per backend.
    pub backends: Vec<BackendStats>,
    /// Bytes shaping kept out of responses (all of them are stored).
    pub bytes_saved: u64,
    /// Full outputs currently stored (in the gateway-wide statistics only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outputs_stored: Option<u64>,
}

impl Store {
    /// Records one execution and its calls.
    pub fn record(&mut self, record: &ExecutionRecord) -> Result<(), StoreError> {
        self.record_all(std::slice::from_ref(record))
    }

    /// Records several executions in one transaction (the handle batches what queued up).
    pub fn record_all(&mut self, records: &[ExecutionRecord]) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for record in records {
            insert_record(&tx, record)?;
        }
        tx.commit()?;
        for _ in records {
            self.wrote()?;
        }
        Ok(())
    }

    /// How many distinct codes are kept (each is kept while a record points at it).
    pub fn code_count(&self) -> Result<u64, StoreError> {
        let count: i64 = self
            .conn
            .query_row("SELECT count(*) FROM codes", [], |row| row.get(0))?;
        Ok(count as u64)
    }

    /// The most recent executions, newest first.
    pub fn list(&self, limit: usize) -> Result<Vec<ExecutionRecord>, StoreError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT id, started_at_ms, tier, code_hash, duration_ms, status, calls, output_bytes, returned_bytes, error_kind, profile, user_id
             FROM executions ORDER BY started_at_ms DESC, rowid DESC LIMIT ?1",
        )?;
        let rows = statement.query_map([limit as i64], row_to_record)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// The most recent executions that match `filter`, newest first.
    pub fn list_matching(
        &self,
        filter: &RecordFilter,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>, StoreError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT id, started_at_ms, tier, code_hash, duration_ms, status, calls, output_bytes, returned_bytes, error_kind, profile, user_id
             FROM executions
             WHERE (?1 IS NULL OR profile = ?1) AND (?2 IS NULL OR status = ?2)
               AND (?3 IS NULL OR tier = ?3) AND (?4 IS NULL OR started_at_ms >= ?4)
               AND (?6 = 0 OR user_id IS ?7)
             ORDER BY started_at_ms DESC, rowid DESC LIMIT ?5",
        )?;
        let rows = statement.query_map(
            params![
                filter.profile,
                filter.status,
                filter.tier,
                filter.since_ms,
                limit as i64,
                filter.user.is_some(),
                filter.user.clone().flatten()
            ],
            row_to_record,
        )?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// The ids of executions that start with `prefix` (at most `limit`), newest first: a
    /// person may type an id short.
    pub fn ids_starting_with(&self, prefix: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        // `substr` rather than LIKE: an id's characters are never wildcards here.
        let mut statement = self.conn.prepare_cached(
            "SELECT id FROM executions WHERE substr(id, 1, length(?1)) = ?1
             ORDER BY started_at_ms DESC, rowid DESC LIMIT ?2",
        )?;
        let rows =
            statement.query_map(rusqlite::params![prefix, limit as i64], |row| row.get(0))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// One execution with its calls.
    pub fn get(&self, id: &str) -> Result<ExecutionRecord, StoreError> {
        let mut record = self
            .conn
            .query_row(
                "SELECT id, started_at_ms, tier, code_hash, duration_ms, status, calls, output_bytes, returned_bytes, error_kind, profile, user_id
                 FROM executions WHERE id = ?1",
                [id],
                row_to_record,
            )
            .optional()?
            .ok_or_else(|| StoreError::NoExecution { id: id.to_string() })?;
        (record.shown, record.error_line) = self.conn.query_row(
            "SELECT shown, error_line FROM executions WHERE id = ?1",
            [id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        record.code = self
            .conn
            .query_row(
                "SELECT code FROM codes WHERE hash = ?1",
                [&record.code_hash],
                |row| row.get(0),
            )
            .optional()?;
        let mut statement = self.conn.prepare_cached(
            "SELECT backend, tool, duration_ms, ok, changed_state, args_bytes, result_bytes, started_ms, error, arguments FROM execution_calls WHERE execution_id = ?1 ORDER BY seq",
        )?;
        record.call_rows = statement
            .query_map([id], |row| {
                Ok(CallRow {
                    backend: row.get(0)?,
                    tool: row.get(1)?,
                    duration_ms: row.get(2)?,
                    ok: row.get(3)?,
                    changed_state: row.get(4)?,
                    args_bytes: row.get::<_, i64>(5)? as u64,
                    result_bytes: row.get::<_, i64>(6)? as u64,
                    started_ms: row.get(7)?,
                    error: row.get(8)?,
                    arguments: row.get(9)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(record)
    }

    /// Statistics over every execution on record (`profile: None`), or over one profile's.
    pub fn stats(&self, profile: Option<&str>) -> Result<Stats, StoreError> {
        let tiers = tier_stats(self.grouped_durations(
            "SELECT tier, duration_ms, status != 'ok' FROM executions
                 WHERE status != 'running' AND (?1 IS NULL OR profile = ?1) ORDER BY tier, duration_ms",
            profile,
        )?);
        let backends = backend_stats(self.grouped_durations(
            "SELECT c.backend, c.duration_ms, NOT c.ok FROM execution_calls c
                 JOIN executions e ON e.id = c.execution_id
                 WHERE c.duration_ms IS NOT NULL AND (?1 IS NULL OR e.profile = ?1)
                 ORDER BY c.backend, c.duration_ms",
            profile,
        )?);
        let (executions, bytes_saved): (i64, i64) = self.conn.query_row(
            "SELECT COUNT(*), COALESCE(SUM(MAX(output_bytes - returned_bytes, 0)), 0) FROM executions
             WHERE status != 'running' AND (?1 IS NULL OR profile = ?1)",
            [profile],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        let outputs_stored = match profile {
            Some(_) => None,
            None => Some(
                self.conn
                    .query_row("SELECT COUNT(*) FROM outputs", [], |row| {
                        row.get::<_, i64>(0)
                    })? as u64,
            ),
        };
        Ok(Stats {
            executions: executions as u64,
            tiers,
            backends,
            bytes_saved: bytes_saved as u64,
            outputs_stored,
        })
    }
}

fn insert_record(tx: &rusqlite::Transaction, record: &ExecutionRecord) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO executions (id, started_at_ms, tier, code_hash, duration_ms, status, calls, output_bytes, returned_bytes, error_kind, profile, shown, error_line, user_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?
    .execute(params![
            record.id,
            record.started_at_ms,
            record.tier,
            record.code_hash,
            record.duration_ms,
            record.status,
            record.calls,
            record.output_bytes as i64,
            record.returned_bytes as i64,
            record.error_kind,
            record.profile,
            record.shown.as_deref().map(cut_shown),
            record.error_line,
            record.user,
        ])?;
    if let Some(code) = &record.code {
        tx.prepare_cached("INSERT OR IGNORE INTO codes (hash, code) VALUES (?1, ?2)")?
            .execute(params![record.code_hash, code])?;
    }
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO execution_calls (execution_id, seq, backend, tool, duration_ms, ok, changed_state, args_bytes, result_bytes, started_ms, error, arguments) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        )?;
        for (seq, call) in record.call_rows.iter().enumerate() {
            insert.execute(params![
                record.id,
                seq as i64,
                call.backend,
                call.tool,
                call.duration_ms,
                call.ok,
                call.changed_state,
                call.args_bytes as i64,
                call.result_bytes as i64,
                call.started_ms,
                call.error.as_deref().map(cut_error),
                call.arguments
            ])?;
        }
    }
    Ok(())
}

impl Store {
    /// Runs `sql`, which selects (group, duration, failed) ordered by group then duration,
    /// and gathers each group's sorted durations and its failure count.
    fn grouped_durations(
        &self,
        sql: &str,
        profile: Option<&str>,
    ) -> Result<Vec<(String, Vec<f64>, u64)>, StoreError> {
        let mut statement = self.conn.prepare_cached(sql)?;
        let rows = statement.query_map([profile], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, f64>(1)?,
                row.get::<_, bool>(2)?,
            ))
        })?;
        Ok(grouped(rows.collect::<Result<Vec<_>, _>>()?))
    }
}

/// Rows of (group, duration, failed), ordered by group then duration, as each group's sorted
/// durations and failure count. Both engines build their statistics with it.
pub(crate) fn grouped(rows: Vec<(String, f64, bool)>) -> Vec<(String, Vec<f64>, u64)> {
    let mut groups: Vec<(String, Vec<f64>, u64)> = Vec::new();
    for (group, ms, failed) in rows {
        match groups.last_mut() {
            Some((name, durations, failures)) if *name == group => {
                durations.push(ms);
                *failures += u64::from(failed);
            }
            _ => groups.push((group, vec![ms], u64::from(failed))),
        }
    }
    groups
}

/// Per-tier statistics from each tier's sorted durations and error count.
pub(crate) fn tier_stats(groups: Vec<(String, Vec<f64>, u64)>) -> Vec<TierStats> {
    groups
        .into_iter()
        .map(|(tier, durations, errors)| TierStats {
            tier,
            count: durations.len() as u64,
            errors,
            p50_ms: percentile(&durations, 0.5),
            p95_ms: percentile(&durations, 0.95),
        })
        .collect()
}

/// Per-backend statistics from each backend's sorted call durations and failure count.
pub(crate) fn backend_stats(groups: Vec<(String, Vec<f64>, u64)>) -> Vec<BackendStats> {
    groups
        .into_iter()
        .map(|(backend, durations, failures)| BackendStats {
            backend,
            calls: durations.len() as u64,
            failures,
            p50_ms: percentile(&durations, 0.5),
            p95_ms: percentile(&durations, 0.95),
        })
        .collect()
}

fn row_to_record(row: &rusqlite::Row) -> rusqlite::Result<ExecutionRecord> {
    Ok(ExecutionRecord {
        id: row.get(0)?,
        started_at_ms: row.get(1)?,
        tier: row.get(2)?,
        code_hash: row.get(3)?,
        duration_ms: row.get(4)?,
        status: row.get(5)?,
        calls: row.get(6)?,
        output_bytes: row.get::<_, i64>(7)? as u64,
        returned_bytes: row.get::<_, i64>(8)? as u64,
        error_kind: row.get(9)?,
        profile: row.get(10)?,
        user: row.get(11)?,
        code: None,
        call_rows: Vec::new(),
        shown: None,
        error_line: None,
    })
}

/// A response's text within [`MAX_SHOWN_BYTES`], cut on a character boundary.
pub(crate) fn cut_shown(text: &str) -> String {
    if text.len() <= MAX_SHOWN_BYTES {
        return text.to_string();
    }
    let end = text.floor_char_boundary(MAX_SHOWN_BYTES);
    format!("{}\n… (cut: {} bytes in all)", &text[..end], text.len())
}

/// The value below which `p` of the sorted `values` fall (nearest rank).
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// A failure text within [`MAX_CALL_ERROR_CHARS`].
pub(crate) fn cut_error(error: &str) -> String {
    match error.char_indices().nth(MAX_CALL_ERROR_CHARS) {
        Some((end, _)) => format!("{}…", &error[..end]),
        None => error.to_string(),
    }
}
