//! Stored tools: every add and update makes a new immutable version, and a name points at one
//! of its versions. Each change is one transaction, so a reader (or a crash) sees a name at a
//! whole, committed version, never a half-written one. Removing a name keeps its versions, so
//! a later add continues their numbering and history is never rewritten.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use crate::error::StoreError;
use crate::ids::now_ms;
use crate::sqlite::Store;

/// One version of a stored tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredTool {
    /// Its name (callable as `user.<name>`).
    pub name: String,
    /// The version.
    pub version: u32,
    /// The TypeScript file, as registered.
    pub code: String,
    /// Its `meta`, as JSON text.
    pub meta: String,
    /// The profile that registered this version (its capabilities never exceed that
    /// profile's grants at call time).
    pub owner: String,
    /// When this version was made, in Unix milliseconds.
    pub created_at_ms: i64,
}

/// One line of a tool's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolVersion {
    /// The version.
    pub version: u32,
    /// The profile that registered it.
    pub owner: String,
    /// When it was made.
    pub created_at_ms: i64,
    /// Whether the name points at it now.
    pub current: bool,
}

/// Who may change a stored tool's name: anyone (the operator's CLI), or only the profile that
/// registered the version it points at (and an admin, for a removal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changer<'a> {
    /// The operator, at the machine.
    Operator,
    /// A profile through MCP.
    Profile {
        /// Its name.
        name: &'a str,
        /// Whether it is an admin profile (which may remove any tool).
        admin: bool,
    },
}

impl Changer<'_> {
    /// Profile `name`, an admin or not.
    pub fn by(name: &str, admin: bool) -> Changer<'_> {
        Changer::Profile { name, admin }
    }
}

impl Store {
    /// Adds a new version of `name` and points the name at it; returns the version.
    pub fn put_tool(
        &mut self,
        name: &str,
        code: &str,
        meta: &str,
        owner: &str,
    ) -> Result<u32, StoreError> {
        self.put_tool_by(name, code, meta, owner, Changer::Operator)
    }

    /// As [`Store::put_tool`], refused when `changer` is a profile and the name points at
    /// another profile's tool. The check and the write are one transaction, so two
    /// registrations at once cannot both pass it.
    pub fn put_tool_by(
        &mut self,
        name: &str,
        code: &str,
        meta: &str,
        owner: &str,
        changer: Changer,
    ) -> Result<u32, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        if let Changer::Profile { name: profile, .. } = changer
            && let Some(current) = current_owner(&tx, name)?.filter(|current| current != profile)
        {
            return Err(StoreError::OwnedByOther {
                name: name.to_string(),
                owner: current,
            });
        }
        let version: u32 = tx.query_row(
            "SELECT COALESCE(MAX(version), 0) + 1 FROM stored_tool_versions WHERE name = ?1",
            [name],
            |row| row.get(0),
        )?;
        let now = now_ms();
        tx.execute(
            "INSERT INTO stored_tool_versions (name, version, code, meta, owner, created_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![name, version, code, meta, owner, now],
        )?;
        tx.execute(
            "INSERT INTO stored_tools (name, version, updated_at_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT(name) DO UPDATE SET version = excluded.version, updated_at_ms = excluded.updated_at_ms",
            params![name, version, now],
        )?;
        tx.commit()?;
        Ok(version)
    }

    /// The version `name` points at.
    pub fn tool(&self, name: &str) -> Result<StoredTool, StoreError> {
        self.conn
            .query_row(
                "SELECT v.name, v.version, v.code, v.meta, v.owner, v.created_at_ms
                 FROM stored_tools t JOIN stored_tool_versions v ON v.name = t.name AND v.version = t.version
                 WHERE t.name = ?1",
                [name],
                row_to_tool,
            )
            .optional()?
            .ok_or_else(|| StoreError::NoTool {
                name: name.to_string(),
            })
    }

    /// Version `version` of `name`, current or not (a removed tool's versions included).
    pub fn tool_version(&self, name: &str, version: u32) -> Result<StoredTool, StoreError> {
        self.conn
            .query_row(
                "SELECT name, version, code, meta, owner, created_at_ms FROM stored_tool_versions
                 WHERE name = ?1 AND version = ?2",
                params![name, version],
                row_to_tool,
            )
            .optional()?
            .ok_or_else(|| StoreError::NoToolVersion {
                name: name.to_string(),
                version,
            })
    }

    /// Every tool a name points at, by name.
    pub fn tools(&self) -> Result<Vec<StoredTool>, StoreError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT v.name, v.version, v.code, v.meta, v.owner, v.created_at_ms
             FROM stored_tools t JOIN stored_tool_versions v ON v.name = t.name AND v.version = t.version
             ORDER BY t.name",
        )?;
        let rows = statement.query_map([], row_to_tool)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// The history of `name`, oldest first.
    pub fn tool_versions(&self, name: &str) -> Result<Vec<ToolVersion>, StoreError> {
        let current: Option<u32> = self
            .conn
            .query_row(
                "SELECT version FROM stored_tools WHERE name = ?1",
                [name],
                |row| row.get(0),
            )
            .optional()?;
        let mut statement = self.conn.prepare_cached(
            "SELECT version, owner, created_at_ms FROM stored_tool_versions WHERE name = ?1 ORDER BY version",
        )?;
        let versions = statement
            .query_map([name], |row| {
                let version: u32 = row.get(0)?;
                Ok(ToolVersion {
                    version,
                    owner: row.get(1)?,
                    created_at_ms: row.get(2)?,
                    current: Some(version) == current,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        if versions.is_empty() {
            return Err(StoreError::NoTool {
                name: name.to_string(),
            });
        }
        Ok(versions)
    }

    /// Points `name` at an earlier `version` (which must exist).
    pub fn rollback_tool(&mut self, name: &str, version: u32) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let exists: bool = tx.query_row(
            "SELECT EXISTS(SELECT 1 FROM stored_tool_versions WHERE name = ?1 AND version = ?2)",
            params![name, version],
            |row| row.get(0),
        )?;
        if !exists {
            return Err(StoreError::NoToolVersion {
                name: name.to_string(),
                version,
            });
        }
        tx.execute(
            "INSERT INTO stored_tools (name, version, updated_at_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT(name) DO UPDATE SET version = excluded.version, updated_at_ms = excluded.updated_at_ms",
            params![name, version, now_ms()],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Removes the name (its versions stay, for history and numbering).
    pub fn remove_tool(&mut self, name: &str) -> Result<(), StoreError> {
        self.remove_tool_by(name, Changer::Operator)
    }

    /// As [`Store::remove_tool`], refused when `changer` is a profile other than the one that
    /// registered the current version, and not an admin. The check and the removal are one
    /// transaction.
    pub fn remove_tool_by(&mut self, name: &str, changer: Changer) -> Result<(), StoreError> {
        let (profile, admin) = match changer {
            Changer::Operator => (None, true),
            Changer::Profile { name, admin } => (Some(name), admin),
        };
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let Some(current) = current_owner(&tx, name)? else {
            return Err(StoreError::NoTool {
                name: name.to_string(),
            });
        };
        if !admin && profile.is_some_and(|p| p != current) {
            return Err(StoreError::OwnedByOther {
                name: name.to_string(),
                owner: current,
            });
        }
        tx.execute("DELETE FROM stored_tools WHERE name = ?1", [name])?;
        tx.commit()?;
        Ok(())
    }

    /// A number that changes whenever another connection commits to the file (SQLite's
    /// `data_version`): the gateway polls it to see tools changed by the CLI.
    pub fn data_version(&self) -> Result<i64, StoreError> {
        Ok(self
            .conn
            .pragma_query_value(None, "data_version", |row| row.get(0))?)
    }
}

/// The profile that registered the version `name` points at, if it points at one.
fn current_owner(tx: &rusqlite::Transaction, name: &str) -> Result<Option<String>, StoreError> {
    Ok(tx
        .query_row(
            "SELECT v.owner FROM stored_tools t JOIN stored_tool_versions v ON v.name = t.name AND v.version = t.version WHERE t.name = ?1",
            [name],
            |row| row.get(0),
        )
        .optional()?)
}

fn row_to_tool(row: &rusqlite::Row) -> rusqlite::Result<StoredTool> {
    Ok(StoredTool {
        name: row.get(0)?,
        version: row.get(1)?,
        code: row.get(2)?,
        meta: row.get(3)?,
        owner: row.get(4)?,
        created_at_ms: row.get(5)?,
    })
}
