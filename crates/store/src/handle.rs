//! The one door to the store: [`StoreHandle`], whichever engine is behind it. The embedded
//! SQLite engine (one machine) or PostgreSQL (replicas that share one store) answer the same
//! typed methods, and one test suite runs against both (`tests/engines.rs`), so the gateway
//! never knows which it has.
//!
//! Records are sent and forgotten by default, so recording never slows an execution
//! (`[store] records = "before_response"` makes a response wait for its record), and a read
//! of records sees every record sent before it through the same handle. An output comes back as
//! a [`Commit`] to wait for: a response names an output only once it is written.

use std::path::Path;
use std::sync::Arc;

use tokio::sync::oneshot;

pub use crate::commit::Commit;
use crate::credentials::CredentialEntry;
use crate::error::StoreError;
use crate::outputs::OutputSlice;
use crate::pins::{StoredHeld, StoredPin};
use crate::postgres::PgStore;
use crate::postgres::rates::Admitted;
use crate::records::{ExecutionRecord, RecordFilter, Stats};
use crate::shapes::{ShapeMerge, StoredShape};
use crate::sqlite::{Retention, Store};
use crate::sqlite_queue::SqliteQueue;
use crate::tools::Changer;
use crate::tools::{StoredTool, ToolVersion};

/// A cheap, cloneable handle to the store.
#[derive(Debug, Clone)]
pub struct StoreHandle {
    engine: Engine,
    /// Whether a response waits for its execution's record (`[store] records`).
    records_before_response: bool,
}

#[derive(Debug, Clone)]
enum Engine {
    Sqlite(SqliteQueue),
    Postgres(Arc<PgStore>),
}

/// Runs `$work` on the SQLite thread with the store as `$s`, or `$pg` on PostgreSQL with the
/// engine as `$p`.
macro_rules! dispatch {
    ($self:ident, |$s:ident| $work:expr, |$p:ident| $pg:expr) => {
        match &$self.engine {
            Engine::Sqlite(queue) => queue.run(move |$s| $work).await,
            Engine::Postgres($p) => $pg.await,
        }
    };
}

impl StoreHandle {
    /// Moves the SQLite `store` to its own thread and returns the handle to it.
    pub fn spawn(store: Store) -> Result<StoreHandle, StoreError> {
        Ok(StoreHandle {
            engine: Engine::Sqlite(SqliteQueue::spawn(store)?),
            records_before_response: false,
        })
    }

    /// Connects to PostgreSQL at `url` (see [`PgStore::connect`]) and migrates it.
    pub async fn postgres(
        url: &str,
        ca_file: Option<&Path>,
        retention: Retention,
    ) -> Result<StoreHandle, StoreError> {
        Ok(StoreHandle {
            engine: Engine::Postgres(PgStore::connect(url, ca_file, retention).await?),
            records_before_response: false,
        })
    }

    /// Whether other processes share this store (PostgreSQL): what must hold across replicas,
    /// as a rate limit, is then kept here rather than in the process.
    pub fn is_shared(&self) -> bool {
        matches!(self.engine, Engine::Postgres(_))
    }

    /// The shared engine, for what only replicas need (sessions any replica continues, the
    /// notices replicas send each other); `None` when the store is not shared.
    pub fn shared(&self) -> Option<Arc<PgStore>> {
        match &self.engine {
            Engine::Sqlite(_) => None,
            Engine::Postgres(pg) => Some(pg.clone()),
        }
    }

    /// Admits one event of `key` at `per_minute` a minute across every replica (see
    /// `postgres::rates`); `None` when the store is not shared, and the process counts alone.
    pub async fn admit_shared(
        &self,
        key: &str,
        per_minute: u32,
    ) -> Option<Result<Admitted, StoreError>> {
        match &self.engine {
            Engine::Sqlite(_) => None,
            Engine::Postgres(pg) => Some(pg.admit(key, per_minute).await),
        }
    }

    /// A counter that moves when another replica announces a change to the stored tools (and
    /// after the announcements could not be heard for a while); `None` for SQLite, whose
    /// changes are seen by looking at [`StoreHandle::change_mark`].
    pub fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        match &self.engine {
            Engine::Sqlite(_) => None,
            Engine::Postgres(pg) => Some(pg.changes()),
        }
    }

    /// Which engine this is: `sqlite` or `postgres`.
    pub fn engine(&self) -> &'static str {
        match self.engine {
            Engine::Sqlite(_) => "sqlite",
            Engine::Postgres(_) => "postgres",
        }
    }

    /// Records an execution, without waiting.
    pub fn record(&self, record: ExecutionRecord) {
        match &self.engine {
            Engine::Sqlite(queue) => queue.record(record),
            Engine::Postgres(pg) => pg.record(record),
        }
    }

    /// Records an execution; the [`Commit`] says when it is written, or that its first attempt
    /// failed (it is then held and tried again, as a record sent with [`StoreHandle::record`]).
    pub fn record_waited(&self, record: ExecutionRecord) -> Commit {
        match &self.engine {
            Engine::Sqlite(queue) => queue.record_waited(record),
            Engine::Postgres(pg) => pg.record_waited(record),
        }
    }

    /// This handle, with responses that wait for their record (`true`) or not.
    pub fn with_records_before_response(mut self, wait: bool) -> StoreHandle {
        self.records_before_response = wait;
        self
    }

    /// Whether a response waits until its execution's record is written.
    pub fn records_before_response(&self) -> bool {
        self.records_before_response
    }

    /// Keeps a full output. A read sent afterwards sees it; the [`Commit`] says when it is
    /// written.
    pub fn save_output(&self, id: String, body: String) -> Commit {
        match &self.engine {
            Engine::Sqlite(queue) => queue.save_output(id, body),
            Engine::Postgres(pg) => {
                let (reply, answer) = oneshot::channel();
                let pg = pg.clone();
                tokio::spawn(async move {
                    let _ = reply.send(pg.save_output(&id, &body).await);
                });
                Commit(answer)
            }
        }
    }

    /// The whole stored output `id`.
    pub async fn output(&self, id: &str) -> Result<String, StoreError> {
        let id = id.to_string();
        dispatch!(self, |s| s.output(&id), |p| p.output(&id))
    }

    /// The whole stored output `id`, whoever's it is: for the operator and admin profiles.
    pub async fn output_any_owner(&self, id: &str) -> Result<String, StoreError> {
        let id = id.to_string();
        dispatch!(self, |s| s.output_for_operator(&id), |p| p
            .output_for_operator(&id))
    }

    /// A byte range of a stored output, on character boundaries.
    pub async fn output_range(
        &self,
        id: &str,
        offset: usize,
        length: Option<usize>,
    ) -> Result<OutputSlice, StoreError> {
        let id = id.to_string();
        dispatch!(self, |s| s.output_range(&id, offset, length), |p| p
            .output_range(&id, offset, length))
    }

    /// The most recent executions.
    pub async fn list(&self, limit: usize) -> Result<Vec<ExecutionRecord>, StoreError> {
        dispatch!(self, |s| s.list(limit), |p| p.list(limit))
    }

    /// The most recent executions that match `filter`.
    pub async fn list_matching(
        &self,
        filter: RecordFilter,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>, StoreError> {
        dispatch!(self, |s| s.list_matching(&filter, limit), |p| p
            .list_matching(&filter, limit))
    }

    /// The ids of executions that start with `prefix`, newest first.
    pub async fn ids_starting_with(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let prefix = prefix.to_string();
        dispatch!(self, |s| s.ids_starting_with(&prefix, limit), |p| p
            .ids_starting_with(&prefix, limit))
    }

    /// One execution with its calls.
    pub async fn get(&self, id: &str) -> Result<ExecutionRecord, StoreError> {
        let id = id.to_string();
        dispatch!(self, |s| s.get(&id), |p| p.get(&id))
    }

    /// Execution statistics: of every profile (`None`), or of one.
    pub async fn stats(&self, profile: Option<&str>) -> Result<Stats, StoreError> {
        let profile = profile.map(str::to_string);
        dispatch!(self, |s| s.stats(profile.as_deref()), |p| p
            .stats(profile.as_deref()))
    }

    /// How many distinct codes are kept.
    pub async fn code_count(&self) -> Result<u64, StoreError> {
        dispatch!(self, |s| s.code_count(), |p| p.code_count())
    }

    /// Deletes expired outputs and the records past the cap now.
    pub async fn prune(&self) -> Result<(), StoreError> {
        dispatch!(self, |s| s.prune(), |p| p.prune())
    }

    /// Waits until every record sent before this call is written.
    pub async fn flush(&self) -> Result<(), StoreError> {
        match &self.engine {
            Engine::Sqlite(queue) => queue.flush().await,
            Engine::Postgres(pg) => pg.flush().await,
        }
    }

    /// Every stored tool a name points at, by name.
    pub async fn tools(&self) -> Result<Vec<StoredTool>, StoreError> {
        dispatch!(self, |s| s.tools(), |p| p.tools())
    }

    /// The version stored tool `name` points at.
    pub async fn tool(&self, name: &str) -> Result<StoredTool, StoreError> {
        let name = name.to_string();
        dispatch!(self, |s| s.tool(&name), |p| p.tool(&name))
    }

    /// Version `version` of stored tool `name`, current or not.
    pub async fn tool_version(&self, name: &str, version: u32) -> Result<StoredTool, StoreError> {
        let name = name.to_string();
        dispatch!(self, |s| s.tool_version(&name, version), |p| p
            .tool_version(&name, version))
    }

    /// The history of stored tool `name`, oldest first.
    pub async fn tool_versions(&self, name: &str) -> Result<Vec<ToolVersion>, StoreError> {
        let name = name.to_string();
        dispatch!(self, |s| s.tool_versions(&name), |p| p.tool_versions(&name))
    }

    /// Adds a new version of stored tool `name` for profile `owner` and points the name at
    /// it; refused when the name points at another profile's tool. Returns the version.
    pub async fn put_tool(
        &self,
        name: &str,
        code: &str,
        meta: &str,
        owner: &str,
    ) -> Result<u32, StoreError> {
        self.put(name, code, meta, owner, true).await
    }

    /// As [`StoreHandle::put_tool`], for the operator at the machine: never refused for who
    /// registered the name before.
    pub async fn put_tool_as_operator(
        &self,
        name: &str,
        code: &str,
        meta: &str,
        owner: &str,
    ) -> Result<u32, StoreError> {
        self.put(name, code, meta, owner, false).await
    }

    async fn put(
        &self,
        name: &str,
        code: &str,
        meta: &str,
        owner: &str,
        as_profile: bool,
    ) -> Result<u32, StoreError> {
        let (name, code, meta, owner) = (
            name.to_string(),
            code.to_string(),
            meta.to_string(),
            owner.to_string(),
        );
        dispatch!(
            self,
            |s| s.put_tool_by(&name, &code, &meta, &owner, changer(&owner, as_profile)),
            |p| p.put_tool_by(&name, &code, &meta, &owner, changer(&owner, as_profile))
        )
    }

    /// Removes stored tool `name` (its versions stay), for the operator.
    pub async fn remove_tool_as_operator(&self, name: &str) -> Result<(), StoreError> {
        let name = name.to_string();
        dispatch!(self, |s| s.remove_tool_by(&name, Changer::Operator), |p| p
            .remove_tool_by(&name, Changer::Operator))
    }

    /// Points stored tool `name` at an earlier `version`.
    pub async fn rollback_tool(&self, name: &str, version: u32) -> Result<(), StoreError> {
        let name = name.to_string();
        dispatch!(self, |s| s.rollback_tool(&name, version), |p| p
            .rollback_tool(&name, version))
    }

    /// Removes stored tool `name` (its versions stay), for `profile`: refused when another
    /// profile registered it, unless `admin`.
    pub async fn remove_tool(
        &self,
        name: &str,
        profile: &str,
        admin: bool,
    ) -> Result<(), StoreError> {
        let (name, profile) = (name.to_string(), profile.to_string());
        dispatch!(
            self,
            |s| s.remove_tool_by(&name, Changer::by(&profile, admin)),
            |p| p.remove_tool_by(&name, Changer::by(&profile, admin))
        )
    }

    /// A number that moves when the stored tools change, by this process or another (the
    /// CLI, another replica): read it, and read the stored tools again only when it moved.
    pub async fn change_mark(&self) -> Result<i64, StoreError> {
        dispatch!(self, |s| s.data_version(), |p| p.change_mark())
    }
}

impl StoreHandle {
    /// Keeps `sealed` as `owner`'s credential for `backend`, in place of any before.
    pub async fn put_credential(
        &self,
        owner: &str,
        backend: &str,
        sealed: Vec<u8>,
    ) -> Result<(), StoreError> {
        let (owner, backend) = (owner.to_string(), backend.to_string());
        dispatch!(self, |s| s.put_credential(&owner, &backend, &sealed), |p| p
            .put_credential(&owner, &backend, &sealed))
    }

    /// `owner`'s sealed credential for `backend`, if it has one.
    pub async fn credential(
        &self,
        owner: &str,
        backend: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let (owner, backend) = (owner.to_string(), backend.to_string());
        dispatch!(self, |s| s.credential(&owner, &backend), |p| p
            .credential(&owner, &backend))
    }

    /// Removes `owner`'s credential for `backend`; whether there was one.
    pub async fn remove_credential(&self, owner: &str, backend: &str) -> Result<bool, StoreError> {
        let (owner, backend) = (owner.to_string(), backend.to_string());
        dispatch!(self, |s| s.remove_credential(&owner, &backend), |p| p
            .remove_credential(&owner, &backend))
    }

    /// The backends `owner` has a credential for.
    pub async fn credentials_of(&self, owner: &str) -> Result<Vec<CredentialEntry>, StoreError> {
        let owner = owner.to_string();
        dispatch!(self, |s| s.credentials_of(&owner), |p| p
            .credentials_of(&owner))
    }
}

impl StoreHandle {
    /// `owner`'s script state under `key` (JSON text), unless it expired.
    pub async fn state_get(&self, owner: &str, key: &str) -> Result<Option<String>, StoreError> {
        let (owner, key) = (owner.to_string(), key.to_string());
        dispatch!(self, |s| s.state_get(&owner, &key), |p| p
            .state_get(&owner, &key))
    }

    /// Keeps `value` (JSON text) as `owner`'s `key` for `ttl_ms`; refused past the bounds
    /// (`MAX_STATE_*`).
    pub async fn state_set(
        &self,
        owner: &str,
        key: &str,
        value: String,
        ttl_ms: i64,
    ) -> Result<(), StoreError> {
        let (owner, key) = (owner.to_string(), key.to_string());
        dispatch!(self, |s| s.state_set(&owner, &key, &value, ttl_ms), |p| p
            .state_set(&owner, &key, &value, ttl_ms))
    }

    /// Removes `owner`'s `key`; whether it held a live value.
    pub async fn state_delete(&self, owner: &str, key: &str) -> Result<bool, StoreError> {
        let (owner, key) = (owner.to_string(), key.to_string());
        dispatch!(self, |s| s.state_delete(&owner, &key), |p| p
            .state_delete(&owner, &key))
    }

    /// `owner`'s live keys, in order.
    pub async fn state_keys(&self, owner: &str) -> Result<Vec<String>, StoreError> {
        let owner = owner.to_string();
        dispatch!(self, |s| s.state_keys(&owner), |p| p.state_keys(&owner))
    }

    /// Every learned shape written after `since_ms` (0: every one).
    pub async fn shapes(&self, since_ms: i64) -> Result<Vec<StoredShape>, StoreError> {
        dispatch!(self, |s| s.shapes(since_ms), |p| p.shapes(since_ms))
    }

    /// Writes `merge`'s answer for the stored shape of `backend`'s `tool` (given the stored
    /// one, in one transaction), and returns it.
    pub async fn merge_shape(
        &self,
        backend: &str,
        tool: &str,
        merge: ShapeMerge,
    ) -> Result<String, StoreError> {
        let (backend, tool) = (backend.to_string(), tool.to_string());
        dispatch!(self, |s| s.merge_shape(&backend, &tool, merge), |p| p
            .merge_shape(&backend, &tool, merge))
    }

    /// Every pin of a tool definition (of `backend`, or of all backends).
    pub async fn pins(&self, backend: Option<&str>) -> Result<Vec<StoredPin>, StoreError> {
        let backend = backend.map(str::to_string);
        dispatch!(self, |s| s.pins(backend.as_deref()), |p| p
            .pins(backend.as_deref()))
    }

    /// The digest of every pin, as `(backend, tool, digest)`: cheap to poll.
    pub async fn pin_digests(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        dispatch!(self, |s| s.pin_digests(), |p| p.pin_digests())
    }

    /// Every definition held for review (of `backend`, or of all backends).
    pub async fn held(&self, backend: Option<&str>) -> Result<Vec<StoredHeld>, StoreError> {
        let backend = backend.map(str::to_string);
        dispatch!(self, |s| s.held(backend.as_deref()), |p| p
            .held(backend.as_deref()))
    }

    /// Records what `backend`'s listing decided: `pinned` where no pin is yet, `held` as the
    /// backend's held changes (a rejection of the same definition is kept).
    pub async fn record_listing(
        &self,
        backend: &str,
        pinned: Vec<StoredPin>,
        held: Vec<StoredHeld>,
    ) -> Result<(), StoreError> {
        let backend = backend.to_string();
        dispatch!(self, |s| s.record_listing(&backend, &pinned, &held), |p| p
            .record_listing(&backend, &pinned, &held))
    }

    /// Accepts the held change of `backend`'s `tool`: it becomes the pin, decided by `by`.
    /// The change accepted, or `None` when none was held.
    pub async fn accept_held(
        &self,
        backend: &str,
        tool: &str,
        by: &str,
    ) -> Result<Option<StoredHeld>, StoreError> {
        let (backend, tool, by) = (backend.to_string(), tool.to_string(), by.to_string());
        dispatch!(self, |s| s.accept_held(&backend, &tool, &by), |p| p
            .accept_held(&backend, &tool, &by))
    }

    /// Rejects the held change of `backend`'s `tool` (it stays held, marked rejected by `by`).
    /// Whether one was held.
    pub async fn reject_held(
        &self,
        backend: &str,
        tool: &str,
        by: &str,
    ) -> Result<bool, StoreError> {
        let (backend, tool, by) = (backend.to_string(), tool.to_string(), by.to_string());
        dispatch!(self, |s| s.reject_held(&backend, &tool, &by), |p| p
            .reject_held(&backend, &tool, &by))
    }
}

/// Who changes a stored tool: profile `owner`, or the operator.
fn changer(owner: &str, as_profile: bool) -> Changer<'_> {
    if as_profile {
        Changer::by(owner, false)
    } else {
        Changer::Operator
    }
}
