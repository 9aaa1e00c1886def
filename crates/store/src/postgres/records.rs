//! Execution records on PostgreSQL: written in batches by one task, read with the records
//! queued before the read already written, pruned as the SQLite engine prunes.

use std::sync::Weak;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_postgres::Row;

use super::{PgStore, Queued};
use crate::error::StoreError;
use crate::ids::now_ms;
use crate::records::{CallRow, ExecutionRecord, RecordFilter, Stats};
use crate::records::{KEEP_SHOWN, backend_stats, grouped, tier_stats};

/// Most records written in one transaction when they queue up.
const MAX_BATCH: usize = 256;
/// After a record arrives, how long the writer waits for more before writing them together.
const COALESCE: Duration = Duration::from_millis(5);
/// Records written between two prunes.
const PRUNE_EVERY: u64 = 100;

const RECORD_COLUMNS: &str = "id, started_at_ms, tier, code_hash, duration_ms, status, calls, output_bytes, returned_bytes, error_kind, profile, user_id";

/// Records kept for a later attempt while PostgreSQL cannot be reached; past it the oldest
/// go, and the loss is logged.
const MAX_HELD: usize = 10_000;
/// The longest wait between two attempts to write held records.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(5);

/// Writes queued records until the store is dropped, a batch per transaction; answers a flush
/// once everything queued before it is written, or has been tried. Records that could not be
/// written (PostgreSQL down or restarting) are held and tried again, with a growing wait, so
/// a restart of the database loses none.
pub(super) async fn write_queued(store: Weak<PgStore>, mut queue: mpsc::UnboundedReceiver<Queued>) {
    let mut written = 0u64;
    let mut held: Vec<ExecutionRecord> = Vec::new();
    let mut wait = Duration::from_millis(100);
    loop {
        let first = if held.is_empty() {
            match queue.recv().await {
                Some(first) => Some(first),
                None => return,
            }
        } else {
            // Held records: try again after the wait, or sooner with new work.
            match tokio::time::timeout(wait, queue.recv()).await {
                Ok(None) => return,
                Ok(Some(first)) => Some(first),
                Err(_) => None,
            }
        };
        // A record nobody waits for waits a little for others to go with it; one that is
        // waited for (or a flush) ends that wait.
        let mut gathered: Vec<Queued> = first.into_iter().collect();
        if matches!(gathered.first(), Some(Queued::Record(_, None))) {
            let until = tokio::time::Instant::now() + COALESCE;
            while let Ok(Some(queued)) = tokio::time::timeout_at(until, queue.recv()).await {
                let urgent = !matches!(queued, Queued::Record(_, None));
                gathered.push(queued);
                if urgent {
                    break;
                }
            }
        }
        let Some(store) = store.upgrade() else {
            return;
        };
        // Everything queued now, behind what is held: the queue never grows while the
        // database is away, the held records do (up to MAX_HELD).
        let mut pending = std::mem::take(&mut held);
        let in_outage = !pending.is_empty();
        let mut flushes = Vec::new();
        let mut waiting = Vec::new();
        let mut gathered = gathered.into_iter();
        let mut next = gathered.next();
        while let Some(queued) = next.take() {
            match queued {
                Queued::Record(record, waiter) => {
                    pending.push(*record);
                    waiting.extend(waiter);
                }
                Queued::Flush(done) => flushes.push(done),
            }
            next = gathered.next().or_else(|| queue.try_recv().ok());
        }
        let mut failure = None;
        if in_outage && pending.len() > MAX_HELD {
            let lost = pending.len() - MAX_HELD;
            tracing::error!(
                lost,
                "PostgreSQL has been unreachable too long: the oldest {lost} records are dropped"
            );
            pending.drain(..lost);
        }
        while !pending.is_empty() {
            let batch: Vec<ExecutionRecord> =
                pending.drain(..pending.len().min(MAX_BATCH)).collect();
            match store.record_all(&batch).await {
                Ok(()) => {
                    wait = Duration::from_millis(100);
                    let before = written;
                    written += batch.len() as u64;
                    if before / PRUNE_EVERY != written / PRUNE_EVERY
                        && let Err(e) = store.prune().await
                    {
                        tracing::warn!("could not prune the store: {e}");
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        records = batch.len() + pending.len(),
                        "could not record executions; trying again in {wait:?}: {e}"
                    );
                    failure = Some(e.to_string());
                    held = batch;
                    held.append(&mut pending);
                    wait = (wait * 2).min(MAX_RETRY_WAIT);
                }
            }
        }
        for waiter in waiting {
            let _ = waiter.send(match &failure {
                None => Ok(()),
                Some(message) => Err(StoreError::Unavailable(message.clone())),
            });
        }
        for done in flushes {
            let _ = done.send(());
        }
    }
}

impl PgStore {
    /// The most recent executions, newest first.
    pub async fn list(&self, limit: usize) -> Result<Vec<ExecutionRecord>, StoreError> {
        self.list_matching(&RecordFilter::default(), limit).await
    }

    /// The most recent executions that match `filter`, newest first.
    pub async fn list_matching(
        &self,
        filter: &RecordFilter,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>, StoreError> {
        self.flush().await?;
        let client = self.client().await?;
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM executions
             WHERE ($1::text IS NULL OR profile = $1) AND ($2::text IS NULL OR status = $2)
               AND ($3::text IS NULL OR tier = $3) AND ($4::bigint IS NULL OR started_at_ms >= $4)
               AND (NOT $6::bool OR user_id IS NOT DISTINCT FROM $7::text)
             ORDER BY started_at_ms DESC, seq DESC LIMIT $5"
        );
        let rows = client
            .query(
                &sql,
                &[
                    &filter.profile,
                    &filter.status,
                    &filter.tier,
                    &filter.since_ms,
                    &(limit as i64),
                    &filter.user.is_some(),
                    &filter.user.clone().flatten(),
                ],
            )
            .await?;
        rows.iter().map(row_to_record).collect()
    }

    /// The ids of executions that start with `prefix` (at most `limit`), newest first.
    pub async fn ids_starting_with(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.flush().await?;
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id FROM executions WHERE left(id, length($1)) = $1
                 ORDER BY started_at_ms DESC, seq DESC LIMIT $2",
                &[&prefix, &(limit as i64)],
            )
            .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    /// One execution with its calls.
    pub async fn get(&self, id: &str) -> Result<ExecutionRecord, StoreError> {
        self.flush().await?;
        let client = self.client().await?;
        let sql = format!(
            "SELECT {RECORD_COLUMNS}, shown, error_line, (SELECT code FROM codes WHERE hash = code_hash)
             FROM executions WHERE id = $1"
        );
        let row = client
            .query_opt(&sql, &[&id])
            .await?
            .ok_or_else(|| StoreError::NoExecution { id: id.to_string() })?;
        let mut record = row_to_record(&row)?;
        record.shown = row.try_get(12)?;
        record.error_line = row
            .try_get::<_, Option<i64>>(13)?
            .and_then(|line| u32::try_from(line).ok());
        record.code = row.try_get(14)?;
        let calls = client
            .query(
                "SELECT backend, tool, duration_ms, ok, changed_state, args_bytes, result_bytes, started_ms, error, arguments
                 FROM execution_calls WHERE execution_id = $1 ORDER BY seq",
                &[&id],
            )
            .await?;
        record.call_rows = calls
            .iter()
            .map(|row| {
                Ok(CallRow {
                    backend: row.try_get(0)?,
                    tool: row.try_get(1)?,
                    duration_ms: row.try_get(2)?,
                    ok: row.try_get(3)?,
                    changed_state: row.try_get(4)?,
                    args_bytes: row.try_get::<_, i64>(5)?.max(0) as u64,
                    result_bytes: row.try_get::<_, i64>(6)?.max(0) as u64,
                    started_ms: row.try_get(7)?,
                    error: row.try_get(8)?,
                    arguments: row.try_get(9)?,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(record)
    }

    /// How many distinct codes are kept.
    pub async fn code_count(&self) -> Result<u64, StoreError> {
        self.flush().await?;
        let client = self.client().await?;
        let row = client.query_one("SELECT count(*) FROM codes", &[]).await?;
        Ok(row.try_get::<_, i64>(0)?.max(0) as u64)
    }

    /// Statistics over every execution on record (`profile: None`), or over one profile's.
    pub async fn stats(&self, profile: Option<&str>) -> Result<Stats, StoreError> {
        self.flush().await?;
        let client = self.client().await?;
        let tiers = tier_stats(grouped(rows_of(
            &client
                .query(
                    "SELECT tier, duration_ms, status <> 'ok' FROM executions
                     WHERE status <> 'running' AND ($1::text IS NULL OR profile = $1) ORDER BY tier, duration_ms",
                    &[&profile],
                )
                .await?,
        )?));
        let backends = backend_stats(grouped(rows_of(
            &client
                .query(
                    "SELECT c.backend, c.duration_ms, NOT c.ok FROM execution_calls c
                     JOIN executions e ON e.id = c.execution_id
                     WHERE c.duration_ms IS NOT NULL AND ($1::text IS NULL OR e.profile = $1)
                     ORDER BY c.backend, c.duration_ms",
                    &[&profile],
                )
                .await?,
        )?));
        let totals = client
            .query_one(
                "SELECT count(*), COALESCE(sum(GREATEST(output_bytes - returned_bytes, 0)), 0)::bigint
                 FROM executions WHERE status <> 'running' AND ($1::text IS NULL OR profile = $1)",
                &[&profile],
            )
            .await?;
        let outputs_stored = match profile {
            Some(_) => None,
            None => Some(
                client
                    .query_one("SELECT count(*) FROM outputs", &[])
                    .await?
                    .try_get::<_, i64>(0)?
                    .max(0) as u64,
            ),
        };
        Ok(Stats {
            executions: totals.try_get::<_, i64>(0)?.max(0) as u64,
            tiers,
            backends,
            bytes_saved: totals.try_get::<_, i64>(1)?.max(0) as u64,
            outputs_stored,
        })
    }

    /// Deletes expired outputs, drops the oldest records past the cap (and the codes only
    /// they held), and lets records past the most recent [`KEEP_SHOWN`] forget what the model
    /// was shown.
    pub async fn prune(&self) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let cutoff = now_ms() - self.retention.outputs.as_millis() as i64;
        client
            .execute("DELETE FROM outputs WHERE created_at_ms < $1", &[&cutoff])
            .await?;
        client
            .execute(
                "DELETE FROM script_state WHERE expires_at_ms <= $1",
                &[&now_ms()],
            )
            .await?;
        let max = i64::try_from(self.retention.max_records).unwrap_or(i64::MAX);
        let tx = client.transaction().await?;
        // Sequence numbers only grow and a record's number goes with it: their span bounds
        // the count from above, read from the index's two ends.
        let span: i64 = tx
            .query_one(
                "SELECT COALESCE((SELECT max(seq) FROM executions) - (SELECT min(seq) FROM executions) + 1, 0)",
                &[],
            )
            .await?
            .try_get(0)?;
        if span > max {
            let dropped = tx
                .query(
                    "DELETE FROM executions WHERE id IN (
                        SELECT id FROM executions ORDER BY started_at_ms DESC, seq DESC OFFSET $1)
                     RETURNING code_hash",
                    &[&max],
                )
                .await?;
            let mut hashes: Vec<String> = dropped
                .iter()
                .map(|row| row.try_get(0))
                .collect::<Result<_, _>>()?;
            hashes.sort_unstable();
            hashes.dedup();
            tx.execute(
                "DELETE FROM codes WHERE hash = ANY($1)
                 AND NOT EXISTS (SELECT 1 FROM executions WHERE code_hash = codes.hash)",
                &[&hashes],
            )
            .await?;
        }
        tx.execute(
            "UPDATE executions SET shown = NULL WHERE shown IS NOT NULL AND started_at_ms < (
                SELECT started_at_ms FROM executions ORDER BY started_at_ms DESC, seq DESC
                LIMIT 1 OFFSET $1)",
            &[&(KEEP_SHOWN as i64 - 1)],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

fn row_to_record(row: &Row) -> Result<ExecutionRecord, StoreError> {
    Ok(ExecutionRecord {
        id: row.try_get(0)?,
        started_at_ms: row.try_get(1)?,
        tier: row.try_get(2)?,
        code_hash: row.try_get(3)?,
        duration_ms: row.try_get(4)?,
        status: row.try_get(5)?,
        calls: u32::try_from(row.try_get::<_, i64>(6)?).unwrap_or(u32::MAX),
        output_bytes: row.try_get::<_, i64>(7)?.max(0) as u64,
        returned_bytes: row.try_get::<_, i64>(8)?.max(0) as u64,
        error_kind: row.try_get(9)?,
        profile: row.try_get(10)?,
        user: row.try_get(11)?,
        code: None,
        call_rows: Vec::new(),
        shown: None,
        error_line: None,
    })
}

/// Rows of (group, duration, failed) as the statistics take them.
fn rows_of(rows: &[Row]) -> Result<Vec<(String, f64, bool)>, StoreError> {
    rows.iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
        .collect()
}
