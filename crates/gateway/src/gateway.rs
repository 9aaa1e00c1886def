//! The gateway, built from its parts: the backends (read through [`Backends`], called only
//! through the [`Door`]), the catalog and its views, the profiles, the runtime executions run
//! on, the connected clients, and what operators read about it. [`GatewayBuilder`] takes the
//! parts and returns a finished gateway; nothing is attached later.
//!
//! The MCP surface (`mcp`), `call_tool_chain` (`chain`), the HTTP front and the console are
//! built on top of it and hold it; it knows none of them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandgate_catalog::Catalog;
use sandgate_policy::{Access, Profile};
use sandgate_sandbox::ToolBinding;
use sandgate_store::StoreHandle;
use sandgate_upstream::{BackendCalls, BackendState, Backends};
use tokio::sync::broadcast;

use crate::admission::Admission;
use crate::audit::AuditLog;
use crate::catalogs::Catalogs;
use crate::clients::Clients;
use crate::door::Door;
pub use crate::executions::FinishedExecution;
use crate::executions::{Executions, Running};
use crate::notice::{ConfigProblem, Notice};
use crate::profiles::Profiles;
use crate::runtime::ChainRuntime;
use crate::stored::loaded::Tools;
use crate::stored::run::StoredRuns;
use crate::stored::watch::StoredWatch;
use crate::telemetry::{self, Gauges, Metrics};
use crate::upkeep::Upkeep;
use crate::views::View;

/// What a gateway is built from; see [`Gateway::builder`].
#[derive(Debug)]
pub struct GatewayBuilder {
    backends: Arc<dyn Backends>,
    calls: Box<dyn BackendCalls>,
    profiles: Vec<Profile>,
    audit: AuditLog,
    chain: Option<ChainRuntime>,
    startup_wait: Option<Duration>,
    expose_stored: bool,
    rate_limit_fallback: sandgate_config::RateLimitFallback,
    credentials: Option<Arc<crate::credentials::Credentials>>,
    approvals: sandgate_config::ApprovalsConfig,
    pins: Option<Arc<crate::pins::PinGuard>>,
}

impl GatewayBuilder {
    /// The supply-chain guard the backends' listings pass: the gateway follows the pins other
    /// replicas and `sandgate pins` change, and its console reviews what is held.
    pub fn pins(mut self, guard: Arc<crate::pins::PinGuard>) -> Self {
        self.pins = Some(guard);
        self
    }

    /// How calls that need a person's approval wait (`[approvals]`; defaults without it).
    pub fn approvals(mut self, approvals: sandgate_config::ApprovalsConfig) -> Self {
        self.approvals = approvals;
        self
    }

    /// Where users' own backend credentials are kept (`[credentials]`): without it, a backend
    /// that takes a user's stored secret tells its callers none can be kept here.
    pub fn credentials(mut self, credentials: crate::credentials::Credentials) -> Self {
        self.credentials = Some(Arc::new(credentials));
        self
    }

    /// The profiles callers act under (see `Config::access_profiles`); `default` is added
    /// when they have none. Without this call, only `default`.
    pub fn profiles(mut self, profiles: Vec<Profile>) -> Self {
        self.profiles = profiles;
        self
    }

    /// Where decisions are written (off by default).
    pub fn audit(mut self, audit: AuditLog) -> Self {
        self.audit = audit;
        self
    }

    /// What `call_tool_chain` and stored tools run on. Without it, both answer that the
    /// sandbox is not running.
    pub fn chain(mut self, runtime: ChainRuntime) -> Self {
        self.chain = Some(runtime);
        self
    }

    /// How long a `call_tool_chain` and the overview resources wait for backends still on their
    /// first connection attempt (`[gateway] startup_wait`); written in the config, it also holds
    /// `tools/list` and the meta-tools, which otherwise answer at once (`mcp::starting`).
    pub fn startup_wait(mut self, wait: Option<Duration>) -> Self {
        self.startup_wait = wait;
        self
    }

    /// What rate limits shared through the store do while it cannot be reached
    /// (`[store] rate_limit_when_unreachable`).
    pub fn rate_limit_fallback(mut self, fallback: sandgate_config::RateLimitFallback) -> Self {
        self.rate_limit_fallback = fallback;
        self
    }

    /// Also lists each stored tool as a plain MCP tool (`[stored_tools] expose_as_mcp_tools`).
    pub fn expose_stored_tools(mut self, expose: bool) -> Self {
        self.expose_stored = expose;
        self
    }

    /// The finished gateway. It keeps its catalog in step with the backends and, with a
    /// store, its stored tools in step with the store (loaded before this returns, so the
    /// first caller already sees them). Must be called inside a tokio runtime.
    pub async fn build(self) -> Arc<Gateway> {
        let metrics = Arc::new(Metrics::default());
        let host =
            sandgate_capabilities::Host::new(Arc::new(sandgate_capabilities::SystemResolver));
        let catalogs = Arc::new(Catalogs::new(self.backends.clone()));
        if let Some(guard) = &self.pins {
            guard.follow(Arc::downgrade(&self.backends));
        }
        let store = self.chain.as_ref().and_then(|c| c.store.clone());
        let shapes = crate::shapes::Shapes::start(store.clone(), self.backends.clone()).await;
        if let Some(wait) = self.startup_wait {
            catalogs.set_startup_wait(wait);
        }
        let profiles = Arc::new(Profiles::new(self.profiles));
        let mut door = Door::new(
            self.calls,
            self.backends.clone(),
            host,
            self.audit,
            metrics.clone(),
            self.credentials,
            crate::approvals::Approvals::new(self.approvals),
        )
        .with_memory(store, shapes);
        if let Some(runtime) = &self.chain {
            door = door.with_stored(Arc::new(StoredRuns {
                catalogs: catalogs.clone(),
                profiles: profiles.clone(),
                runtime: runtime.clone(),
                backends: self.backends.clone(),
            }));
        }
        let gateway = Arc::new(Gateway {
            door: Arc::new(door),
            backends: self.backends,
            catalogs,
            profiles,
            chain: self.chain,
            clients: Clients::default(),
            notice: Notice::default(),
            admission: Admission::new(self.rate_limit_fallback),
            metrics,
            executions: Executions::default(),
            stored: StoredWatch::new(self.expose_stored),
            upkeep: Upkeep::default(),
        });
        gateway.follow_backends();
        gateway.watch_stored_tools().await;
        gateway
    }
}

/// Everything the MCP front shares across sessions.
#[derive(Debug)]
pub struct Gateway {
    backends: Arc<dyn Backends>,
    door: Arc<Door>,
    catalogs: Arc<Catalogs>,
    profiles: Arc<Profiles>,
    chain: Option<ChainRuntime>,
    clients: Clients,
    notice: Notice,
    admission: Admission,
    metrics: Arc<Metrics>,
    /// The executions running, detached and finished, and the steps of shutting down.
    executions: Executions,
    /// What the stored tools were at the last read, and how they are listed.
    stored: StoredWatch,
    /// Uptime, use counters and memory hand-back.
    upkeep: Upkeep,
}

impl Gateway {
    /// A gateway over `backends`, whose tools are called through `calls` (the calls half the
    /// backends handed out when they started: the gateway's door keeps it, and nothing else
    /// can call them).
    pub fn builder(backends: Arc<dyn Backends>, calls: Box<dyn BackendCalls>) -> GatewayBuilder {
        GatewayBuilder {
            backends,
            calls,
            profiles: Vec::new(),
            audit: AuditLog::disabled(),
            chain: None,
            startup_wait: None,
            expose_stored: false,
            rate_limit_fallback: Default::default(),
            credentials: None,
            approvals: Default::default(),
            pins: None,
        }
    }

    /// Rebuilds the catalog whenever the backends' tools change (events that arrive together
    /// make one rebuild), until the gateway is dropped.
    fn follow_backends(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let mut events = self.backends.subscribe();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
                while !matches!(
                    events.try_recv(),
                    Err(broadcast::error::TryRecvError::Empty
                        | broadcast::error::TryRecvError::Closed)
                ) {}
                let Some(gateway) = weak.upgrade() else {
                    return;
                };
                gateway.refresh().await;
            }
        });
    }

    /// The backends, to read (their tools, states and events); calling them is the door's.
    pub fn backends(&self) -> &Arc<dyn Backends> {
        &self.backends
    }

    /// Executions that run on after their first answer.
    pub(crate) fn detached(&self) -> &crate::detached::DetachedExecutions {
        self.executions.detached()
    }

    /// Calls `tool` as `caller`, outside any execution: through the door like every call
    /// (authorized, audited). For stored tools exposed as plain MCP tools, embedding and
    /// benchmarks; MCP clients otherwise reach tools through `call_tool_chain`.
    pub async fn call_as(
        &self,
        caller: &crate::caller::Caller,
        tool: &sandgate_catalog::ToolRef,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<sandgate_sandbox::ToolAnswer, sandgate_sandbox::CallFailure> {
        let knock = crate::door::Knock::new(caller.clone(), sandgate_store::new_execution_id());
        let catalog = self.catalog();
        let Some(entry) = catalog.entry(tool) else {
            return Err(sandgate_sandbox::CallFailure::new(
                sandgate_sandbox::FailureKind::Failed,
                format!("no tool named `{tool}`; search_tools lists the tools"),
            ));
        };
        let arguments = serde_json::Value::Object(arguments).to_string();
        self.door.call_tool(&knock, entry, arguments, None).await
    }

    /// The one door to backends and host capabilities.
    pub fn door(&self) -> &Arc<Door> {
        &self.door
    }

    /// The catalog and its views.
    pub(crate) fn catalogs(&self) -> &Arc<Catalogs> {
        &self.catalogs
    }

    /// The connected clients.
    pub(crate) fn clients(&self) -> &Clients {
        &self.clients
    }

    /// Per-profile execution rates.
    pub(crate) fn admission(&self) -> &Admission {
        &self.admission
    }

    /// What `/metrics` counts.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// What executions run on, when the gateway was built with it.
    pub(crate) fn chain(&self) -> Option<&ChainRuntime> {
        self.chain.as_ref()
    }

    /// The store, if any (for tools that manage stored tools beside the gateway).
    pub fn chain_store(&self) -> Option<sandgate_store::StoreHandle> {
        self.chain().and_then(|c| c.store.clone())
    }

    /// The sandbox, if any.
    pub fn chain_sandbox(&self) -> Option<sandgate_sandbox::Sandbox> {
        self.chain().map(|c| c.sandbox.clone())
    }

    /// Every tool as the sandbox sees it, in step with [`Gateway::catalog`].
    pub fn bindings(&self) -> Arc<Vec<ToolBinding>> {
        self.catalogs.current().bindings
    }

    /// The current snapshot of every tool (what callers see is cut from it: see
    /// [`Gateway::view`]).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalogs.current().catalog
    }

    /// What `access` may see of the current catalog.
    pub fn view(&self, access: &Access) -> View {
        self.catalogs.view(access)
    }

    /// The current catalog once the backends have settled, as `access` sees it.
    pub async fn settled_view(&self, access: &Access) -> View {
        self.settled_view_for(access, |_| true).await
    }

    /// The current catalog once the backends `needed` names have settled, as `access` sees it.
    pub async fn settled_view_for(&self, access: &Access, needed: impl Fn(&str) -> bool) -> View {
        let full = self.catalogs.settled_full_view_for(needed).await;
        self.catalogs.view_of(access, &full)
    }

    /// The current catalog as `access` sees it, waiting for no backend that is still starting
    /// (the meta-tools answer at once, and name those: see `starting_backends`).
    pub async fn known_view(&self, access: &Access) -> View {
        let full = self.catalogs.caught_up_full_view_for(|_| true).await;
        self.catalogs.view_of(access, &full)
    }

    /// The backends `access` may reach that are still on their first connection attempt with
    /// no cached tool list: their tools are in no view yet.
    pub fn starting_backends(&self, access: &Access) -> Vec<String> {
        self.backends
            .cold_backends()
            .into_iter()
            .filter(|name| access.may_reach_backend(name, &sandgate_catalog::sanitize_ident(name)))
            .collect()
    }

    /// The return shapes learned for tools that declare none, as a lookup by entry (for
    /// declarations and for notes on what a result lacks).
    pub(crate) fn observed(
        &self,
    ) -> impl Fn(&sandgate_catalog::Entry) -> Option<sandgate_catalog::Observed> + use<> {
        let shapes = self.door().shapes().cloned();
        move |entry| shapes.as_ref().and_then(|s| s.observed(entry))
    }

    /// The profiles callers act under.
    pub fn profiles(&self) -> &Profiles {
        &self.profiles
    }

    /// The profile named `name` (one that grants nothing, for a name there is none of).
    pub fn profile(&self, name: &str) -> Arc<Profile> {
        self.profiles.get(name)
    }

    /// Puts `profiles` in place of the running ones (a reload): every request from now on
    /// acts under them, each profile's view is built again, and clients hear that the tool set
    /// may have changed.
    pub async fn replace_profiles(self: &Arc<Self>, profiles: Vec<Profile>) {
        self.profiles.replace(profiles);
        self.catalogs.forget_profile_views();
        self.refresh().await;
    }

    /// How long first answers wait for backends still on their first connection attempt (a
    /// reload may change it).
    pub fn set_startup_wait(&self, wait: Duration) {
        self.catalogs.set_startup_wait(wait);
    }

    /// Whether stored tools are also listed as plain MCP tools (a reload may change it).
    pub fn expose_stored_tools(&self, expose: bool) {
        self.stored.set_exposed(expose);
    }

    pub(crate) fn exposes_stored_tools(&self) -> bool {
        self.stored.exposed()
    }

    /// Records that the served config's latest change did not load (`Some`), or that it loads
    /// again (`None`); a new problem is sent to every connected client as a log message.
    pub async fn config_did_not_load(&self, problem: Option<String>) {
        self.notice
            .config_did_not_load(problem, &self.clients)
            .await;
    }

    /// Why the served config's latest change did not load, if it did not.
    pub(crate) fn config_problem(&self) -> Option<ConfigProblem> {
        self.notice.config_problem()
    }

    /// Records why this process serves its stdio client without the config's HTTP (another
    /// process holds the port): the client's `initialize` answer and the overview say so.
    pub fn http_not_served(&self, message: String) {
        self.notice.http_not_served(message);
    }

    /// Why this process does not serve the config's HTTP, if it does not.
    pub(crate) fn http_problem(&self) -> Option<String> {
        self.notice.http_problem()
    }

    /// Cancels every execution in progress (and any that starts from now on): the first step
    /// of shutting down.
    pub fn cancel_all(&self) {
        self.executions.cancel_all();
    }

    /// Completes when the gateway starts shutting down.
    pub(crate) async fn stopping(&self) {
        self.executions.stopping().await;
    }

    /// Shuts down within about `within`: cancels every execution, stops the sandbox's workers
    /// and every backend (each backend's whole process group is killed). Returns whether
    /// everything ended in time.
    pub async fn shut_down(&self, within: Duration) -> bool {
        let started = Instant::now();
        self.cancel_all();
        // Cancelled executions answer at once; wait for them to record what they did.
        while self.executions.running() > 0 && started.elapsed() < within / 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // What was learned of results since the last write goes to the store before it flushes.
        if let Some(shapes) = self.door().shapes() {
            let _ = tokio::time::timeout(within / 6, shapes.flush()).await;
        }
        if let Some(chain) = self.chain() {
            if let Some(store) = &chain.store {
                let _ = tokio::time::timeout(within / 6, store.flush()).await;
            }
            let _ = tokio::time::timeout(within / 6, chain.sandbox.shutdown()).await;
        }
        self.backends.stop(within / 3).await
    }

    /// After an execution that made the gateway hold `bytes` (arguments, results, logs): past
    /// `large`, the memory it freed is handed back to the kernel, off the async threads, one
    /// hand-back at a time. So the gateway's RSS returns near its baseline after load.
    pub(crate) fn after_large_work(self: &Arc<Self>, bytes: usize, large: usize) {
        if bytes >= large {
            self.return_memory_soon();
        }
    }

    /// Hands the memory the gateway freed back to the kernel, shortly and off the async
    /// threads (one hand-back at a time).
    pub(crate) fn return_memory_soon(&self) {
        self.upkeep.return_memory_soon();
    }

    /// Hears each execution as it finishes.
    pub fn finished_executions(&self) -> broadcast::Receiver<FinishedExecution> {
        self.executions.subscribe()
    }

    /// Tells whoever listens that an execution finished.
    pub(crate) fn execution_finished(&self, done: FinishedExecution) {
        self.executions.finished(done);
    }

    /// Counts one execution as running until the guard is dropped.
    pub(crate) fn execution_started(&self) -> Running<'_> {
        self.executions.started()
    }

    /// Seconds since start.
    pub fn uptime_secs(&self) -> u64 {
        self.upkeep.uptime_secs()
    }

    /// Counts one use of a meta-tool or resource.
    pub(crate) fn count(&self, what: &'static str) {
        self.upkeep.count(what);
    }

    /// Every use of a meta-tool or resource counted so far.
    pub(crate) fn counters(&self) -> BTreeMap<&'static str, u64> {
        self.upkeep.counters()
    }

    /// The metrics in the Prometheus text format.
    pub fn metrics_text(&self) -> String {
        let statuses = self.backends.statuses();
        let open = self.backends.user_connections();
        let user_connections = statuses
            .iter()
            .filter(|s| self.backends.per_user(&s.name).is_some())
            .map(|s| {
                let n = open
                    .iter()
                    .find(|(b, _)| *b == s.name)
                    .map_or(0, |(_, n)| *n);
                (s.name.clone(), n)
            })
            .collect();
        telemetry::render(
            &self.metrics,
            &Gauges {
                user_connections,
                statuses,
                questions_waiting: self.door.approvals().waiting_count(),
                detached: self.executions.detached().held(),
                running: self.executions.running(),
                sandbox: self.chain().map(|c| &c.sandbox),
                uptime_secs: self.uptime_secs(),
            },
        )
    }

    /// The first step of a drained shutdown: from now on `/readyz` answers 503 and every HTTP
    /// response closes its connection, while requests are served as before.
    pub fn begin_drain(&self) {
        self.executions.begin_drain();
    }

    /// Whether a drained shutdown has begun.
    pub fn draining(&self) -> bool {
        self.executions.draining()
    }

    /// `call_tool_chain` executions in progress.
    pub fn executions_running(&self) -> u64 {
        self.executions.running()
    }

    /// Whether every enabled backend has had its first connection attempt (`/readyz`), and
    /// how many have not.
    pub fn readiness(&self) -> (bool, usize) {
        let starting = self
            .backends
            .statuses()
            .iter()
            .filter(|s| s.state == BackendState::Starting)
            .count();
        (starting == 0, starting)
    }

    /// Installs `tools` as the stored tools' current versions, rebuilds the catalog and tells
    /// clients the tool set changed.
    pub async fn install_stored_tools(self: &Arc<Self>, tools: Tools) {
        self.catalogs.set_stored_tools(tools);
        self.refresh().await;
    }

    /// Keeps the stored tools in step with the store: loads them before returning (so the
    /// first caller already sees them), then every second, and at once when a shared store
    /// announces a change (PostgreSQL's LISTEN/NOTIFY), asks whether another connection (the
    /// CLI's, another gateway's or replica's) committed a change since the last read (SQLite's
    /// `data_version`, one page read; PostgreSQL's change mark), and only then reads the tools
    /// and reloads them if they changed. This gateway's own changes (`register_tool`, `remove_tool`) reload at once and
    /// never wait for the watch; its own records do not wake it.
    async fn watch_stored_tools(self: &Arc<Self>) {
        let Some(store) = self.chain_store() else {
            return;
        };
        self.catch_up_stored_tools(&store).await;
        let weak = Arc::downgrade(self);
        let stopping = self.executions.stop_signal();
        let mut announced = store.changes();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    () = next_announcement(&mut announced) => {}
                    () = stopping.cancelled() => return,
                }
                let Some(gateway) = weak.upgrade() else {
                    return;
                };
                gateway.catch_up_stored_tools(&store).await;
            }
        });
    }

    /// Reads the stored tools again if the store's change mark moved since the last read, and
    /// installs them if they changed. Behind a balancer, code that calls a stored tool just
    /// registered through another replica runs this first (`chain`), so it never waits for the
    /// watch.
    pub(crate) async fn catch_up_stored_tools(self: &Arc<Self>, store: &StoreHandle) {
        let _one_at_a_time = self.stored.catching_up().await;
        if let Some(tools) = self.stored.changes(store).await {
            self.install_stored_tools(tools).await;
        }
    }

    /// Builds the catalog again and tells every client the tool set may have changed.
    async fn refresh(self: &Arc<Self>) {
        // A catalog of many tools takes a while to build: off the async threads, so calls in
        // flight never wait for it (they keep the snapshot they have).
        let catalog = self.catalogs.rebuilt().await.catalog;
        for collision in catalog.collisions() {
            tracing::warn!(
                backend = collision.backend.as_deref().unwrap_or("<backends>"),
                "names {:?} all sanitize to `{}`; `{}` was given `{}`. Both stay reachable by their original names",
                collision.names,
                collision.identifier,
                collision.names.last().map(String::as_str).unwrap_or(""),
                collision.assigned
            );
        }
        // A new tool list was read (and the old catalog dropped): what the listing held, up to
        // max_list_bytes of pages for a backend whose list never ends, goes back to the kernel.
        self.return_memory_soon();
        self.clients.tools_changed().await;
    }
}

/// Waits for the next change a shared store announces; forever when it announces none.
async fn next_announcement(announced: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    if let Some(changes) = announced {
        if changes.changed().await.is_ok() {
            return;
        }
        *announced = None;
    }
    std::future::pending::<()>().await
}
