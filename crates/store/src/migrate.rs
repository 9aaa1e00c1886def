//! Schema migrations. Each entry moves the schema one version forward and never changes once
//! released; `PRAGMA user_version` says how far a file has come. A file from a newer sandgate
//! is refused rather than guessed at.

use rusqlite::Connection;

use crate::error::StoreError;

/// Migrations in order; the version after applying `MIGRATIONS[i]` is `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    // 1: execution records, their calls, and stored outputs.
    "CREATE TABLE executions (
        id TEXT PRIMARY KEY,
        started_at_ms INTEGER NOT NULL,
        tier TEXT NOT NULL,
        code_hash TEXT NOT NULL,
        duration_ms REAL NOT NULL,
        status TEXT NOT NULL,
        calls INTEGER NOT NULL,
        output_bytes INTEGER NOT NULL,
        returned_bytes INTEGER NOT NULL,
        error_kind TEXT
    );
    CREATE INDEX executions_by_time ON executions(started_at_ms);
    CREATE TABLE execution_calls (
        execution_id TEXT NOT NULL REFERENCES executions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        backend TEXT NOT NULL,
        tool TEXT NOT NULL,
        duration_ms REAL,
        ok INTEGER NOT NULL,
        changed_state INTEGER,
        PRIMARY KEY (execution_id, seq)
    );
    CREATE TABLE outputs (
        execution_id TEXT PRIMARY KEY,
        created_at_ms INTEGER NOT NULL,
        body TEXT NOT NULL
    );
    CREATE INDEX outputs_by_time ON outputs(created_at_ms);",
    // 2: the profile each execution ran under (records and stats are per profile).
    "ALTER TABLE executions ADD COLUMN profile TEXT NOT NULL DEFAULT 'default';
    CREATE INDEX executions_by_profile ON executions(profile, started_at_ms);",
    // 3: stored tools: immutable versions, and the version each name points at.
    "CREATE TABLE stored_tool_versions (
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        code TEXT NOT NULL,
        meta TEXT NOT NULL,
        owner TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        PRIMARY KEY (name, version)
    );
    CREATE TABLE stored_tools (
        name TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        FOREIGN KEY (name, version) REFERENCES stored_tool_versions(name, version)
    );",
    // 4: the code of executions, once per distinct code (records point at it by hash), kept
    // while a record points at it.
    "CREATE TABLE codes (
        hash TEXT PRIMARY KEY,
        code TEXT NOT NULL
    );",
    // 5: each call's argument and result sizes.
    "ALTER TABLE execution_calls ADD COLUMN args_bytes INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE execution_calls ADD COLUMN result_bytes INTEGER NOT NULL DEFAULT 0;",
    // 6: when each call started (ms into the execution), why it failed, and its arguments
    // (only with `[store] record_arguments`).
    "ALTER TABLE execution_calls ADD COLUMN started_ms REAL;
    ALTER TABLE execution_calls ADD COLUMN error TEXT;
    ALTER TABLE execution_calls ADD COLUMN arguments TEXT;",
    // 7: what the model was shown (kept for the most recent executions, for the console), and
    // the line an error points at.
    "ALTER TABLE executions ADD COLUMN shown TEXT;
    ALTER TABLE executions ADD COLUMN error_line INTEGER;",
    // 8: records by their code, so pruning asks only about the codes of the records it drops.
    "CREATE INDEX executions_by_code ON executions(code_hash);",
    // 9: users' own backend secrets, sealed (the store never holds a key), one per owner and
    // backend; and the user an identity provider proved, on each record it ran.
    "CREATE TABLE credentials (
        owner TEXT NOT NULL,
        backend TEXT NOT NULL,
        sealed BLOB NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (owner, backend)
    );
    ALTER TABLE executions ADD COLUMN user_id TEXT;
    CREATE INDEX executions_by_user ON executions(user_id, started_at_ms);",
    // 10: the return shapes learned for tools that declare none, and the state scripts keep
    // between executions (per owner, each value expiring).
    "CREATE TABLE tool_shapes (
        backend TEXT NOT NULL,
        tool TEXT NOT NULL,
        shape TEXT NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (backend, tool)
    );
    CREATE TABLE script_state (
        owner TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (owner, key)
    );
    CREATE INDEX script_state_by_expiry ON script_state(expires_at_ms);",
    // 11: pins of backends' tool definitions, and the changes held for review (issue 49).
    "CREATE TABLE tool_pins (
        backend TEXT NOT NULL,
        tool TEXT NOT NULL,
        digest TEXT NOT NULL,
        definition TEXT NOT NULL,
        decided_by TEXT NOT NULL,
        updated_at_ms INTEGER NOT NULL,
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
        seen_at_ms INTEGER NOT NULL,
        PRIMARY KEY (backend, tool)
    );",
];

/// The schema version this build writes.
pub fn latest() -> i64 {
    MIGRATIONS.len() as i64
}

/// Brings `conn` to the latest version, each step in its own transaction.
///
/// Several processes may open one file at once (`sandgate run` beside a gateway, or two runs
/// on a store an older sandgate left behind). Each step therefore takes the write lock first
/// (`BEGIN IMMEDIATE`, which waits out the busy timeout) and reads the version again under
/// it, so a step another process applied meanwhile is never applied twice.
pub fn migrate(conn: &Connection) -> Result<(), StoreError> {
    loop {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        match apply_next_step(conn) {
            Ok(more) => {
                conn.execute_batch("COMMIT")?;
                if !more {
                    return Ok(());
                }
            }
            Err(e) => {
                // The rollback can only fail if the transaction is gone already.
                let _ = conn.execute_batch("ROLLBACK");
                return Err(e);
            }
        }
    }
}

/// Applies the step after the file's version, inside the caller's transaction; false when
/// there was none left.
fn apply_next_step(conn: &Connection) -> Result<bool, StoreError> {
    let found: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if found > latest() {
        return Err(StoreError::TooNew {
            found,
            known: latest(),
        });
    }
    let Some(sql) = usize::try_from(found).ok().and_then(|i| MIGRATIONS.get(i)) else {
        return Ok(false);
    };
    conn.execute_batch(sql)?;
    conn.pragma_update(None, "user_version", found + 1)?;
    Ok(true)
}
