//! The PostgreSQL schema and its migrations. Each entry moves the schema one version forward
//! and never changes once released; `sandgate_schema.version` says how far a database has
//! come. Replicas that start together take turns under an advisory lock, so two never run the
//! same step; a database from a newer sandgate is refused rather than guessed at.
//!
//! Version 1 is the SQLite store's version 8 in PostgreSQL's words, plus what replicas need:
//! outputs are `bytea` stored uncompressed out of line (`STORAGE EXTERNAL`), so a byte range
//! reads only the chunks it covers, and a change counter for stored tools.

use tokio_postgres::Client;

use crate::error::StoreError;

/// The key of the advisory lock migrations hold ("sandgate" in ASCII, as a number).
const MIGRATION_LOCK: i64 = 0x73_61_6e_64_67_61_74_65;

/// Migrations in order; the version after applying `MIGRATIONS[i]` is `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    // 1: records and their calls, outputs, codes, stored tools, and the stored-tool change mark.
    "CREATE TABLE executions (
        id TEXT PRIMARY KEY,
        seq BIGSERIAL NOT NULL,
        started_at_ms BIGINT NOT NULL,
        tier TEXT NOT NULL,
        code_hash TEXT NOT NULL,
        duration_ms DOUBLE PRECISION NOT NULL,
        status TEXT NOT NULL,
        calls BIGINT NOT NULL,
        output_bytes BIGINT NOT NULL,
        returned_bytes BIGINT NOT NULL,
        error_kind TEXT,
        profile TEXT NOT NULL,
        shown TEXT,
        error_line BIGINT
    );
    CREATE INDEX executions_by_time ON executions(started_at_ms, seq);
    CREATE INDEX executions_by_profile ON executions(profile, started_at_ms);
    CREATE INDEX executions_by_code ON executions(code_hash);
    CREATE UNIQUE INDEX executions_by_seq ON executions(seq);
    CREATE INDEX executions_showing ON executions(started_at_ms) WHERE shown IS NOT NULL;
    CREATE TABLE execution_calls (
        execution_id TEXT NOT NULL REFERENCES executions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        backend TEXT NOT NULL,
        tool TEXT NOT NULL,
        duration_ms DOUBLE PRECISION,
        ok BOOLEAN NOT NULL,
        changed_state BOOLEAN,
        args_bytes BIGINT NOT NULL,
        result_bytes BIGINT NOT NULL,
        started_ms DOUBLE PRECISION,
        error TEXT,
        arguments TEXT,
        PRIMARY KEY (execution_id, seq)
    );
    CREATE TABLE codes (
        hash TEXT PRIMARY KEY,
        code TEXT NOT NULL
    );
    CREATE TABLE outputs (
        execution_id TEXT PRIMARY KEY,
        created_at_ms BIGINT NOT NULL,
        body BYTEA NOT NULL
    );
    ALTER TABLE outputs ALTER COLUMN body SET STORAGE EXTERNAL;
    CREATE INDEX outputs_by_time ON outputs(created_at_ms);
    CREATE TABLE stored_tool_versions (
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        code TEXT NOT NULL,
        meta TEXT NOT NULL,
        owner TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        PRIMARY KEY (name, version)
    );
    CREATE TABLE stored_tools (
        name TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        FOREIGN KEY (name, version) REFERENCES stored_tool_versions(name, version)
    );
    CREATE TABLE stored_tool_changes (
        only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
        mark BIGINT NOT NULL
    );
    INSERT INTO stored_tool_changes (mark) VALUES (0);",
    // 2: shared rate limits: each key's theoretical arrival time (GCRA), in seconds of the
    // database's clock.
    "CREATE TABLE rate_limits (
        key TEXT PRIMARY KEY,
        tat DOUBLE PRECISION NOT NULL
    );",
    // 3: sessions any replica may continue (MCP 2025-11-25 sessions and console logins), each
    // bound to the SHA-256 of the token that opened it, and gone at `expires_at` (the
    // database's clock).
    "CREATE TABLE shared_sessions (
        kind TEXT NOT NULL,
        id TEXT NOT NULL,
        owner BYTEA,
        profile TEXT,
        token_id TEXT,
        state TEXT,
        expires_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (kind, id)
    );
    CREATE INDEX shared_sessions_by_expiry ON shared_sessions(expires_at);",
    // 4: users' own backend secrets, sealed, one per owner and backend; and the user an
    // identity provider proved, on each record it ran (as the SQLite store's version 9).
    "CREATE TABLE credentials (
        owner TEXT NOT NULL,
        backend TEXT NOT NULL,
        sealed BYTEA NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (owner, backend)
    );
    ALTER TABLE executions ADD COLUMN user_id TEXT;
    CREATE INDEX executions_by_user ON executions(user_id, started_at_ms);",
    // 5: learned return shapes and script state (as the SQLite store's version 10).
    "CREATE TABLE tool_shapes (
        backend TEXT NOT NULL,
        tool TEXT NOT NULL,
        shape TEXT NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (backend, tool)
    );
    CREATE TABLE script_state (
        owner TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        expires_at_ms BIGINT NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (owner, key)
    );
    CREATE INDEX script_state_by_expiry ON script_state(expires_at_ms);",
    // 6: pins of backends' tool definitions, and the changes held for review (as the SQLite
    // store's version 11).
    "CREATE TABLE tool_pins (
        backend TEXT NOT NULL,
        tool TEXT NOT NULL,
        digest TEXT NOT NULL,
        definition TEXT NOT NULL,
        decided_by TEXT NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (backend, tool)
    );
    CREATE TABLE tool_pins_held (
        backend TEXT NOT NULL,
        tool TEXT NOT NULL,
        kind TEXT NOT NULL,
        digest TEXT NOT NULL,
        definition TEXT NOT NULL,
        findings TEXT NOT NULL,
        rejected_by TEXT,
        seen_at_ms BIGINT NOT NULL,
        PRIMARY KEY (backend, tool)
    );",
];

/// The schema version this build writes.
pub fn latest() -> i64 {
    MIGRATIONS.len() as i64
}

/// Brings the database to the latest version: every step in one transaction that holds the
/// advisory lock, so a replica that starts meanwhile waits and then finds nothing to do.
/// Refuses a database newer than this build.
pub async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS sandgate_schema (
                only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
                version BIGINT NOT NULL
            )",
        )
        .await
        .or_else(already_created)?;
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    let found: i64 = tx
        .query_opt("SELECT version FROM sandgate_schema", &[])
        .await?
        .map_or(0, |row| row.get(0));
    if found > latest() {
        return Err(StoreError::TooNew {
            found,
            known: latest(),
        });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let version = index as i64 + 1;
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO sandgate_schema (version) VALUES ($1)
             ON CONFLICT (only_row) DO UPDATE SET version = excluded.version",
            &[&version],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Two replicas creating the version table at once: one of them gets a unique violation on
/// the catalog (or a duplicate table, or a duplicate row type), and the table is there all the
/// same.
fn already_created(error: tokio_postgres::Error) -> Result<(), StoreError> {
    match error.code() {
        Some(code) if *code == tokio_postgres::error::SqlState::UNIQUE_VIOLATION => Ok(()),
        Some(code) if *code == tokio_postgres::error::SqlState::DUPLICATE_TABLE => Ok(()),
        // The table's row type, created with it, can be the one that collides.
        Some(code) if *code == tokio_postgres::error::SqlState::DUPLICATE_OBJECT => Ok(()),
        _ => Err(error.into()),
    }
}
