//! Stored tools on PostgreSQL: the same immutable versions and current pointers as the SQLite
//! engine. Each change takes an advisory lock on the name for its transaction, so replicas
//! that change one name at once take turns (two would otherwise pick the same next version),
//! moves the change mark every replica watches, and is announced to the listening replicas
//! when it commits.

use tokio_postgres::{Row, Transaction};

use super::PgStore;
use crate::error::StoreError;
use crate::ids::now_ms;
use crate::tools::Changer;
use crate::tools::{StoredTool, ToolVersion};

const CURRENT: &str = "SELECT v.name, v.version, v.code, v.meta, v.owner, v.created_at_ms
     FROM stored_tools t JOIN stored_tool_versions v ON v.name = t.name AND v.version = t.version";

impl PgStore {
    /// Adds a new version of `name` and points the name at it, refused as
    /// [`crate::sqlite::Store::put_tool_by`] refuses; returns the version.
    pub async fn put_tool_by(
        &self,
        name: &str,
        code: &str,
        meta: &str,
        owner: &str,
        changer: Changer<'_>,
    ) -> Result<u32, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        lock_name(&tx, name).await?;
        if let Changer::Profile { name: profile, .. } = changer
            && let Some(current) = current_owner(&tx, name).await?
            && current != profile
        {
            return Err(StoreError::OwnedByOther {
                name: name.to_string(),
                owner: current,
            });
        }
        let version: i32 = tx
            .query_one(
                "SELECT COALESCE(max(version), 0) + 1 FROM stored_tool_versions WHERE name = $1",
                &[&name],
            )
            .await?
            .try_get(0)?;
        let now = now_ms();
        tx.execute(
            "INSERT INTO stored_tool_versions (name, version, code, meta, owner, created_at_ms) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&name, &version, &code, &meta, &owner, &now],
        )
        .await?;
        point(&tx, name, version).await?;
        tx.commit().await?;
        Ok(version.max(0) as u32)
    }

    /// The version `name` points at.
    pub async fn tool(&self, name: &str) -> Result<StoredTool, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(&format!("{CURRENT} WHERE t.name = $1"), &[&name])
            .await?
            .ok_or_else(|| StoreError::NoTool {
                name: name.to_string(),
            })?;
        row_to_tool(&row)
    }

    /// Version `version` of `name`, current or not.
    pub async fn tool_version(&self, name: &str, version: u32) -> Result<StoredTool, StoreError> {
        let client = self.client().await?;
        let wanted = i32::try_from(version).unwrap_or(i32::MAX);
        let row = client
            .query_opt(
                "SELECT name, version, code, meta, owner, created_at_ms FROM stored_tool_versions
                 WHERE name = $1 AND version = $2",
                &[&name, &wanted],
            )
            .await?
            .ok_or_else(|| StoreError::NoToolVersion {
                name: name.to_string(),
                version,
            })?;
        row_to_tool(&row)
    }

    /// Every tool a name points at, by name.
    pub async fn tools(&self) -> Result<Vec<StoredTool>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(&format!("{CURRENT} ORDER BY t.name"), &[])
            .await?;
        rows.iter().map(row_to_tool).collect()
    }

    /// The history of `name`, oldest first.
    pub async fn tool_versions(&self, name: &str) -> Result<Vec<ToolVersion>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT v.version, v.owner, v.created_at_ms, t.version IS NOT NULL
                 FROM stored_tool_versions v
                 LEFT JOIN stored_tools t ON t.name = v.name AND t.version = v.version
                 WHERE v.name = $1 ORDER BY v.version",
                &[&name],
            )
            .await?;
        if rows.is_empty() {
            return Err(StoreError::NoTool {
                name: name.to_string(),
            });
        }
        rows.iter()
            .map(|row| {
                Ok(ToolVersion {
                    version: row.try_get::<_, i32>(0)?.max(0) as u32,
                    owner: row.try_get(1)?,
                    created_at_ms: row.try_get(2)?,
                    current: row.try_get(3)?,
                })
            })
            .collect()
    }

    /// Points `name` at an earlier `version` (which must exist).
    pub async fn rollback_tool(&self, name: &str, version: u32) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        lock_name(&tx, name).await?;
        let wanted = i32::try_from(version).unwrap_or(i32::MAX);
        let exists = tx
            .query_opt(
                "SELECT 1 FROM stored_tool_versions WHERE name = $1 AND version = $2",
                &[&name, &wanted],
            )
            .await?
            .is_some();
        if !exists {
            return Err(StoreError::NoToolVersion {
                name: name.to_string(),
                version,
            });
        }
        point(&tx, name, wanted).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes the name (its versions stay), refused as [`crate::sqlite::Store::remove_tool_by`]
    /// refuses.
    pub async fn remove_tool_by(&self, name: &str, changer: Changer<'_>) -> Result<(), StoreError> {
        let (profile, admin) = match changer {
            Changer::Operator => (None, true),
            Changer::Profile { name, admin } => (Some(name), admin),
        };
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        lock_name(&tx, name).await?;
        let Some(current) = current_owner(&tx, name).await? else {
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
        tx.execute("DELETE FROM stored_tools WHERE name = $1", &[&name])
            .await?;
        changed(&tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// A number that moves with every committed change to the stored tools, on any replica.
    pub async fn change_mark(&self) -> Result<i64, StoreError> {
        let client = self.client().await?;
        Ok(client
            .query_one("SELECT mark FROM stored_tool_changes", &[])
            .await?
            .try_get(0)?)
    }
}

/// Holds the name for the rest of the transaction.
async fn lock_name(tx: &Transaction<'_>, name: &str) -> Result<(), StoreError> {
    tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&name])
        .await?;
    Ok(())
}

async fn current_owner(tx: &Transaction<'_>, name: &str) -> Result<Option<String>, StoreError> {
    Ok(tx
        .query_opt(
            "SELECT v.owner FROM stored_tools t JOIN stored_tool_versions v ON v.name = t.name AND v.version = t.version WHERE t.name = $1",
            &[&name],
        )
        .await?
        .map(|row| row.try_get(0))
        .transpose()?)
}

/// Points `name` at `version` and moves the change mark.
async fn point(tx: &Transaction<'_>, name: &str, version: i32) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO stored_tools (name, version, updated_at_ms) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO UPDATE SET version = excluded.version, updated_at_ms = excluded.updated_at_ms",
        &[&name, &version, &now_ms()],
    )
    .await?;
    changed(tx).await
}

/// Moves the change mark, and tells every listening replica at commit.
async fn changed(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.execute("UPDATE stored_tool_changes SET mark = mark + 1", &[])
        .await?;
    tx.execute(
        "SELECT pg_notify($1, 'stored_tools')",
        &[&super::notice::CHANNEL],
    )
    .await?;
    Ok(())
}

fn row_to_tool(row: &Row) -> Result<StoredTool, StoreError> {
    Ok(StoredTool {
        name: row.try_get(0)?,
        version: row.try_get::<_, i32>(1)?.max(0) as u32,
        code: row.try_get(2)?,
        meta: row.try_get(3)?,
        owner: row.try_get(4)?,
        created_at_ms: row.try_get(5)?,
    })
}
