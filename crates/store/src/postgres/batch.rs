//! A batch of execution records in one transaction of four statements, whatever its size:
//! each column goes as an array and `unnest` turns the arrays back into rows. Written a
//! statement per record, a batch of ten took forty round trips to PostgreSQL, and the
//! gateway's CPU per request on PostgreSQL was a third above SQLite's.

use std::collections::HashMap;

use super::PgStore;
use crate::error::StoreError;
use crate::records::ExecutionRecord;
use crate::records::{cut_error, cut_shown};

impl PgStore {
    /// Records several executions in one transaction. Of two records of one execution (its
    /// start, then its end) the later wins.
    pub async fn record_all(&self, records: &[ExecutionRecord]) -> Result<(), StoreError> {
        let mut last = HashMap::with_capacity(records.len());
        for (index, record) in records.iter().enumerate() {
            last.insert(record.id.as_str(), index);
        }
        let records: Vec<&ExecutionRecord> = records
            .iter()
            .enumerate()
            .filter(|(index, r)| last.get(r.id.as_str()) == Some(index))
            .map(|(_, r)| r)
            .collect();
        if records.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let insert = tx
            .prepare_cached(
                "INSERT INTO executions (id, started_at_ms, tier, code_hash, duration_ms, status, calls, output_bytes, returned_bytes, error_kind, profile, shown, error_line, user_id)
                 SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[], $5::float8[], $6::text[], $7::int8[], $8::int8[], $9::int8[], $10::text[], $11::text[], $12::text[], $13::int8[], $14::text[])
                 ON CONFLICT (id) DO UPDATE SET started_at_ms = excluded.started_at_ms, tier = excluded.tier,
                   code_hash = excluded.code_hash, duration_ms = excluded.duration_ms, status = excluded.status,
                   calls = excluded.calls, output_bytes = excluded.output_bytes, returned_bytes = excluded.returned_bytes,
                   error_kind = excluded.error_kind, profile = excluded.profile, shown = excluded.shown,
                   error_line = excluded.error_line, user_id = excluded.user_id",
            )
            .await?;
        let ids: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
        let started: Vec<i64> = records.iter().map(|r| r.started_at_ms).collect();
        let tiers: Vec<&str> = records.iter().map(|r| r.tier.as_str()).collect();
        let hashes: Vec<&str> = records.iter().map(|r| r.code_hash.as_str()).collect();
        let durations: Vec<f64> = records.iter().map(|r| r.duration_ms).collect();
        let statuses: Vec<&str> = records.iter().map(|r| r.status.as_str()).collect();
        let calls: Vec<i64> = records.iter().map(|r| i64::from(r.calls)).collect();
        let output_bytes: Vec<i64> = records.iter().map(|r| r.output_bytes as i64).collect();
        let returned_bytes: Vec<i64> = records.iter().map(|r| r.returned_bytes as i64).collect();
        let error_kinds: Vec<Option<&str>> =
            records.iter().map(|r| r.error_kind.as_deref()).collect();
        let profiles: Vec<&str> = records.iter().map(|r| r.profile.as_str()).collect();
        let shown: Vec<Option<String>> = records
            .iter()
            .map(|r| r.shown.as_deref().map(cut_shown))
            .collect();
        let error_lines: Vec<Option<i64>> = records
            .iter()
            .map(|r| r.error_line.map(i64::from))
            .collect();
        let users: Vec<Option<&str>> = records.iter().map(|r| r.user.as_deref()).collect();
        tx.execute(
            &insert,
            &[
                &ids,
                &started,
                &tiers,
                &hashes,
                &durations,
                &statuses,
                &calls,
                &output_bytes,
                &returned_bytes,
                &error_kinds,
                &profiles,
                &shown,
                &error_lines,
                &users,
            ],
        )
        .await?;
        let mut codes: HashMap<&str, &str> = HashMap::new();
        for record in &records {
            if let Some(code) = &record.code {
                codes.insert(record.code_hash.as_str(), code.as_str());
            }
        }
        if !codes.is_empty() {
            let (code_hashes, texts): (Vec<&str>, Vec<&str>) = codes.into_iter().unzip();
            let code = tx
                .prepare_cached(
                    "INSERT INTO codes (hash, code) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING",
                )
                .await?;
            tx.execute(&code, &[&code_hashes, &texts]).await?;
        }
        let forget_calls = tx
            .prepare_cached("DELETE FROM execution_calls WHERE execution_id = ANY($1)")
            .await?;
        tx.execute(&forget_calls, &[&ids]).await?;
        let rows: Vec<(&str, usize, &crate::records::CallRow)> = records
            .iter()
            .flat_map(|r| {
                r.call_rows
                    .iter()
                    .enumerate()
                    .map(move |(seq, row)| (r.id.as_str(), seq, row))
            })
            .collect();
        if !rows.is_empty() {
            let call = tx
                .prepare_cached(
                    "INSERT INTO execution_calls (execution_id, seq, backend, tool, duration_ms, ok, changed_state, args_bytes, result_bytes, started_ms, error, arguments)
                     SELECT * FROM unnest($1::text[], $2::int4[], $3::text[], $4::text[], $5::float8[], $6::bool[], $7::bool[], $8::int8[], $9::int8[], $10::float8[], $11::text[], $12::text[])",
                )
                .await?;
            let call_ids: Vec<&str> = rows.iter().map(|(id, _, _)| *id).collect();
            let seqs: Vec<i32> = rows.iter().map(|(_, seq, _)| *seq as i32).collect();
            let backends: Vec<&str> = rows.iter().map(|(_, _, c)| c.backend.as_str()).collect();
            let tools: Vec<&str> = rows.iter().map(|(_, _, c)| c.tool.as_str()).collect();
            let call_durations: Vec<Option<f64>> =
                rows.iter().map(|(_, _, c)| c.duration_ms).collect();
            let oks: Vec<bool> = rows.iter().map(|(_, _, c)| c.ok).collect();
            let changed: Vec<Option<bool>> = rows.iter().map(|(_, _, c)| c.changed_state).collect();
            let args_bytes: Vec<i64> = rows.iter().map(|(_, _, c)| c.args_bytes as i64).collect();
            let result_bytes: Vec<i64> =
                rows.iter().map(|(_, _, c)| c.result_bytes as i64).collect();
            let started_ms: Vec<Option<f64>> = rows.iter().map(|(_, _, c)| c.started_ms).collect();
            let errors: Vec<Option<String>> = rows
                .iter()
                .map(|(_, _, c)| c.error.as_deref().map(cut_error))
                .collect();
            let arguments: Vec<Option<&str>> = rows
                .iter()
                .map(|(_, _, c)| c.arguments.as_deref())
                .collect();
            tx.execute(
                &call,
                &[
                    &call_ids,
                    &seqs,
                    &backends,
                    &tools,
                    &call_durations,
                    &oks,
                    &changed,
                    &args_bytes,
                    &result_bytes,
                    &started_ms,
                    &errors,
                    &arguments,
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
