//! Shared gateway state: the backend manager, the current catalog snapshot, usage counters,
//! and the fan-out of "the tool set changed" to connected clients.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::Instant;

use rmcp::service::{Peer, RoleServer};
use sandgate_catalog::Catalog;
use sandgate_policy::Profile;
use sandgate_sandbox::ToolBinding;
use sandgate_upstream::BackendManager;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::audit::AuditLog;
use crate::chain::ChainRuntime;
use crate::views::{CachedView, View};

/// How long after large work its memory is handed back (see `Gateway::after_large_work`).
const TRIM_AFTER: [std::time::Duration; 2] = [
    std::time::Duration::from_millis(250),
    std::time::Duration::from_millis(1500),
];

/// Longest a meta-tool waits for backends that are still starting and have nothing cached.
pub const STARTUP_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// [`STARTUP_WAIT`] in milliseconds, as the gateway keeps it (`[gateway] startup_wait`).
const STARTUP_WAIT_MS: u64 = STARTUP_WAIT.as_millis() as u64;

/// How long a caller waits for a catalog refresh already under way before it builds one.
const CATCH_UP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Everything the MCP front shares across sessions.
#[derive(Debug)]
pub struct Gateway {
    manager: Arc<BackendManager>,
    /// The catalog of every tool, and the sandbox's view of it (with TypeScript declarations),
    /// built together.
    current: RwLock<View>,
    chain: OnceLock<ChainRuntime>,
    /// The profiles, by name; `default` is always there. A reload swaps in a new map.
    profiles: RwLock<Arc<BTreeMap<String, Arc<Profile>>>>,
    /// Who may use the HTTP front (`None` until `serve_http` sets it: then nobody may). A
    /// reload swaps in new tokens.
    http_auth: RwLock<Option<Arc<crate::http::HttpAuthOptions>>>,
    /// Each profile's view of the current catalog (see `views`).
    profile_views: Mutex<BTreeMap<String, CachedView>>,
    /// Where decisions are written.
    audit: AuditLog,
    /// Executions started per profile in the last minute.
    rates: Mutex<crate::admission::Rates>,
    /// Runs the host-side `fetch`.
    fetcher: sandgate_capabilities::Fetcher,
    /// Every stored tool's current version (see `stored`).
    pub(crate) stored: RwLock<crate::stored::Tools>,
    /// Whether stored tools are also listed as plain MCP tools.
    expose_stored: AtomicBool,
    /// How long a first answer waits for backends on their first connection, in ms.
    startup_wait_ms: AtomicU64,
    /// `tools/list` waits for cold backends too (`[gateway] startup_wait` is configured).
    list_waits: AtomicBool,
    started: Instant,
    counters: Mutex<BTreeMap<&'static str, u64>>,
    /// What `/metrics` counts (see `telemetry`).
    pub(crate) metrics: crate::telemetry::Metrics,
    /// Each finished `call_tool_chain` execution, for the console's live list.
    finished: broadcast::Sender<FinishedExecution>,
    catalog_builds: AtomicU64,
    changes: broadcast::Sender<()>,
    legacy_peers: Mutex<Vec<Peer<RoleServer>>>,
    /// Why the served config's latest change did not load, while it does not (see `notice`).
    pub(crate) config_problem: std::sync::RwLock<Option<crate::notice::ConfigProblem>>,
    /// Cancelled when the gateway shuts down: every execution still running is cancelled.
    stopping: CancellationToken,
    /// `call_tool_chain` executions in progress, so shutting down can wait for their records.
    running: AtomicU64,
    /// Whether free memory is being handed back right now (see `after_large_work`).
    trimming: AtomicBool,
    /// Held while a catalog is rebuilt (see `rebuild`).
    rebuilding: Mutex<()>,
    /// The manager's generation the current catalog was built from; watched by callers that
    /// wait for a rebuild already under way.
    catalog_generation: tokio::sync::watch::Sender<u64>,
}

/// The profiles by name, with `default` always there.
fn profiles_by_name(profiles: Vec<Profile>) -> BTreeMap<String, Arc<Profile>> {
    let mut profiles: BTreeMap<String, Arc<Profile>> = profiles
        .into_iter()
        .map(|p| (p.name.clone(), Arc::new(p)))
        .collect();
    profiles
        .entry("default".into())
        .or_insert_with(|| Arc::new(Profile::implicit_default("the config")));
    profiles
}

/// An execution that just finished, as the console's live list shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FinishedExecution {
    /// Its id.
    pub id: String,
    /// The profile it ran under.
    pub profile: String,
    /// The tier it took.
    pub tier: &'static str,
    /// `ok`, `error` or `cancelled`.
    pub status: &'static str,
    /// How long it took.
    pub duration_ms: f64,
    /// When it started, in Unix milliseconds.
    pub started_at_ms: i64,
    /// Its calls.
    pub calls: usize,
}

/// One execution in progress, counted in `Gateway::running` while it lives.
pub(crate) struct Running<'a>(&'a AtomicU64);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Gateway {
    /// Cancels every execution in progress (and any that starts from now on): the first step
    /// of shutting down.
    pub fn cancel_all(&self) {
        self.stopping.cancel();
    }

    /// Shuts down within about `within`: cancels every execution, stops the sandbox's workers
    /// and every backend (each backend's whole process group is killed). Returns whether
    /// everything ended in time.
    pub async fn shut_down(&self, within: std::time::Duration) -> bool {
        let started = std::time::Instant::now();
        self.cancel_all();
        // Cancelled executions answer at once; wait for them to record what they did.
        while self.running.load(Ordering::SeqCst) > 0 && started.elapsed() < within / 3 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        if let Some(chain) = self.chain() {
            if let Some(store) = &chain.store {
                let _ = tokio::time::timeout(within / 6, store.flush()).await;
            }
            let _ = tokio::time::timeout(within / 6, chain.sandbox.shutdown()).await;
        }
        self.manager.stop(within / 3).await
    }

    /// After an execution that made the gateway hold `bytes` (arguments, results, logs): past a
    /// mebibyte, the memory it freed is handed back to the kernel, off the async threads, one
    /// hand-back at a time. So the gateway's RSS returns near its baseline after load.
    pub(crate) fn after_large_work(self: &Arc<Self>, bytes: usize, large: usize) {
        if bytes >= large {
            self.return_memory_soon();
        }
    }

    /// Hands the memory the gateway freed back to the kernel, shortly and off the async
    /// threads (one hand-back at a time).
    pub(crate) fn return_memory_soon(self: &Arc<Self>) {
        if self.trimming.swap(true, Ordering::AcqRel) {
            return;
        }
        let gateway = self.clone();
        tokio::task::spawn_blocking(move || {
            // The caller still holds the response it is about to send, and the store may still
            // be writing the full output: hand back what is free once each is likely done.
            for delay in TRIM_AFTER {
                std::thread::sleep(delay);
                sandgate_sandbox::region::return_free_memory();
            }
            gateway.trimming.store(false, Ordering::Release);
        });
    }

    /// Hears each execution as it finishes.
    pub fn finished_executions(&self) -> broadcast::Receiver<FinishedExecution> {
        self.finished.subscribe()
    }

    /// Tells whoever listens that an execution finished.
    pub(crate) fn execution_finished(&self, done: FinishedExecution) {
        let _ = self.finished.send(done);
    }

    /// How many `call_tool_chain` executions are running.
    pub(crate) fn running_executions(&self) -> u64 {
        self.running.load(Ordering::SeqCst)
    }

    /// Counts one execution as running until the guard is dropped.
    pub(crate) fn execution_started(&self) -> Running<'_> {
        self.running.fetch_add(1, Ordering::SeqCst);
        Running(&self.running)
    }

    /// Completes when the caller cancels the request or the gateway shuts down.
    pub async fn cancelled(&self, request: &crate::chain::Cancellation) {
        tokio::select! {
            () = request.cancelled() => {}
            () = self.stopping.cancelled() => {}
        }
    }

    /// Wraps a running manager and keeps the catalog in step with it; callers act under
    /// `profiles` (see `Config::access_profiles`), and decisions go to `audit`. Must be called
    /// inside a tokio runtime.
    pub fn new(
        manager: Arc<BackendManager>,
        profiles: Vec<Profile>,
        audit: AuditLog,
    ) -> Arc<Gateway> {
        let (changes, _) = broadcast::channel(16);
        let generation = manager.generation();
        let current = View::of(Catalog::new(manager.tools()));
        let profiles = profiles_by_name(profiles);
        let gateway = Arc::new(Gateway {
            current: RwLock::new(current),
            chain: OnceLock::new(),
            manager,
            profiles: RwLock::new(Arc::new(profiles)),
            http_auth: RwLock::new(None),
            profile_views: Mutex::default(),
            audit,
            rates: Mutex::default(),
            fetcher: sandgate_capabilities::Fetcher::new(Arc::new(
                sandgate_capabilities::SystemResolver,
            )),
            stored: RwLock::default(),
            expose_stored: AtomicBool::new(false),
            startup_wait_ms: AtomicU64::new(STARTUP_WAIT_MS),
            list_waits: AtomicBool::new(false),
            started: Instant::now(),
            counters: Mutex::default(),
            metrics: Default::default(),
            finished: broadcast::channel(64).0,
            catalog_builds: AtomicU64::new(1),
            changes,
            legacy_peers: Mutex::default(),
            config_problem: std::sync::RwLock::default(),
            stopping: CancellationToken::new(),
            running: AtomicU64::new(0),
            trimming: AtomicBool::new(false),
            rebuilding: Mutex::new(()),
            catalog_generation: tokio::sync::watch::Sender::new(generation),
        });
        let weak = Arc::downgrade(&gateway);
        let mut events = gateway.manager.subscribe();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
                // Events that arrived together make one rebuild.
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
        gateway
    }

    /// The backend manager.
    pub fn manager(&self) -> &Arc<BackendManager> {
        &self.manager
    }

    /// Gives the gateway what `call_tool_chain` runs on. Until then the tool answers that the
    /// sandbox is not running. A second call is ignored.
    pub fn attach_chain(&self, runtime: ChainRuntime) {
        let _ = self.chain.set(runtime);
    }

    pub(crate) fn chain(&self) -> Option<&ChainRuntime> {
        self.chain.get()
    }

    /// The attached store, if any (for tools that manage stored tools beside the gateway).
    pub fn chain_store(&self) -> Option<sandgate_store::StoreHandle> {
        self.chain().and_then(|c| c.store.clone())
    }

    /// The attached sandbox, if any.
    pub fn chain_sandbox(&self) -> Option<sandgate_sandbox::Sandbox> {
        self.chain().map(|c| c.sandbox.clone())
    }

    /// Every tool as the sandbox sees it, in step with [`Gateway::catalog`].
    pub fn bindings(&self) -> Arc<Vec<ToolBinding>> {
        self.current_view().bindings
    }

    /// The current snapshot of every tool (what callers see is cut from it: see
    /// [`Gateway::view`]).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.current_view().catalog
    }

    /// The current catalog of every tool with its bindings.
    pub(crate) fn current_view(&self) -> View {
        self.current.read().map(|v| v.clone()).unwrap_or_default()
    }

    /// The profile named `name`; an unknown name gets a profile that grants nothing (token
    /// profiles are checked at load, so this is a backstop).
    pub fn profile(&self, name: &str) -> Arc<Profile> {
        let profiles = self
            .profiles
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        profiles.get(name).cloned().unwrap_or_else(|| {
            Arc::new(Profile::granting_nothing(
                name,
                &format!("profiles.{name}"),
                "the config",
            ))
        })
    }

    /// Puts `profiles` in place of the running ones (a reload): every request from now on
    /// acts under them, each profile's view is built again, and clients hear that the tool set
    /// may have changed.
    pub async fn replace_profiles(self: &Arc<Self>, profiles: Vec<Profile>) {
        let profiles = Arc::new(profiles_by_name(profiles));
        *self
            .profiles
            .write()
            .unwrap_or_else(PoisonError::into_inner) = profiles;
        self.profile_views().clear();
        self.clone().refresh().await;
    }

    /// Who may use the HTTP front now; `None` before `serve_http` set it, when nobody may.
    pub(crate) fn http_auth(&self) -> Option<Arc<crate::http::HttpAuthOptions>> {
        self.http_auth
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Puts `auth` in place for the HTTP front (at start, and on a reload that changed the
    /// tokens: a token taken out is refused from the next request on).
    pub fn set_http_auth(&self, auth: crate::http::HttpAuthOptions) {
        let auth = Some(Arc::new(auth));
        *self
            .http_auth
            .write()
            .unwrap_or_else(PoisonError::into_inner) = auth;
    }

    /// Where decisions are written.
    pub(crate) fn audit(&self) -> &AuditLog {
        &self.audit
    }

    pub(crate) fn fetcher(&self) -> &sandgate_capabilities::Fetcher {
        &self.fetcher
    }

    pub(crate) fn rates(&self) -> std::sync::MutexGuard<'_, crate::admission::Rates> {
        self.rates.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn profile_views(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, CachedView>> {
        self.profile_views
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The full view, after giving the cold backends `needed` names (those still on their first
    /// connection attempt, with no cached tool list) up to [`STARTUP_WAIT`] to connect: a call
    /// waits for its own backends, never for another one that is slow to start. Without this,
    /// a client that searches right after start-up would be told there are no tools.
    pub(crate) async fn settled_full_view_for(
        self: &Arc<Self>,
        needed: impl Fn(&str) -> bool,
    ) -> View {
        let cold: Vec<String> = self
            .manager
            .cold_backends()
            .into_iter()
            .filter(|name| needed(name))
            .collect();
        if !cold.is_empty() {
            let wait =
                std::time::Duration::from_millis(self.startup_wait_ms.load(Ordering::Relaxed));
            self.manager.wait_settled_for(&cold, wait).await;
            return self.rebuilt().await;
        }
        // A backend the caller needs that became ready or changed a moment ago may not be in the
        // snapshot yet: its generation says so. The refresh that change set off is under way;
        // wait for it rather than build the same catalog twice (a second build of a large
        // catalog slowed every other caller). Changes of other backends never hold this caller up.
        let stale = |built: u64| self.manager.tools_changed_since(built, &needed);
        let built_from = *self.catalog_generation.borrow();
        if stale(built_from) {
            let mut built = self.catalog_generation.subscribe();
            let caught_up = matches!(
                tokio::time::timeout(CATCH_UP_WAIT, built.wait_for(|g| !stale(*g))).await,
                Ok(Ok(_))
            );
            if !caught_up {
                return self.rebuilt().await;
            }
        }
        self.current_view()
    }

    /// A catalog rebuilt now, off the async threads (a catalog of many tools takes a while).
    async fn rebuilt(self: &Arc<Self>) -> View {
        let building = self.clone();
        match tokio::task::spawn_blocking(move || building.rebuild()).await {
            Ok(view) => view,
            Err(_) => self.current_view(),
        }
    }

    /// Seconds since start.
    pub fn uptime_secs(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// Counts one use of a meta-tool or resource.
    pub(crate) fn count(&self, what: &'static str) {
        if let Ok(mut counters) = self.counters.lock() {
            *counters.entry(what).or_default() += 1;
        }
    }

    pub(crate) fn counters(&self) -> BTreeMap<&'static str, u64> {
        self.counters.lock().map(|c| c.clone()).unwrap_or_default()
    }

    pub(crate) fn catalog_builds(&self) -> u64 {
        self.catalog_builds.load(Ordering::Relaxed)
    }

    /// Change notifications for 2026-07-28 `subscriptions/listen` streams.
    pub(crate) fn subscribe_changes(&self) -> broadcast::Receiver<()> {
        self.changes.subscribe()
    }

    /// Remembers a 2025-11-25 session so it hears about tool-set changes. Closed sessions are
    /// forgotten by [`Gateway::forget_closed_peers`] (every refresh, and every 2 s over HTTP),
    /// not here: a burst of sessions would make each new one walk all the others.
    pub(crate) fn add_legacy_peer(&self, peer: Peer<RoleServer>) {
        if let Ok(mut peers) = self.legacy_peers.lock() {
            peers.push(peer);
        }
    }

    /// The 2025-11-25 sessions still open.
    pub(crate) fn open_peers(&self) -> Vec<Peer<RoleServer>> {
        self.legacy_peers
            .lock()
            .map(|p| {
                p.iter()
                    .filter(|p| !p.is_transport_closed())
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Forgets the sessions that have closed (expired, deleted, disconnected); each peer kept
    /// holds its session's channels.
    pub(crate) fn forget_closed_peers(&self) {
        if let Ok(mut peers) = self.legacy_peers.lock() {
            peers.retain(|p| !p.is_transport_closed());
        }
    }

    /// Builds a catalog from the manager's current tools and makes it the current snapshot.
    /// Rebuilds take turns, so one that read the tools earlier can never replace the snapshot
    /// of one that read them later (a background refresh used to overwrite the catalog a
    /// search had just settled, dropping a backend that had become ready in between).
    fn rebuild(&self) -> View {
        let _turn = self
            .rebuilding
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let generation = self.manager.generation();
        let mut specs = self.manager.tools();
        specs.extend(self.stored_tools().values().map(|tool| tool.spec()));
        let view = View::of(Catalog::new(specs));
        if let Ok(mut slot) = self.current.write() {
            *slot = view.clone();
        }
        // Each profile's view is cut again from the new catalog when next asked for.
        self.profile_views().clear();
        self.catalog_generation.send_replace(generation);
        self.catalog_builds.fetch_add(1, Ordering::Relaxed);
        view
    }

    /// How long first answers wait for backends still on their first connection attempt
    /// (`[gateway] startup_wait`; [`STARTUP_WAIT`] by default).
    /// Written in the config, it also holds the first `tools/list` (which otherwise answers at
    /// once with the backends that are ready, and `tools/list_changed` follows).
    pub fn set_startup_wait(&self, wait: std::time::Duration) {
        let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        self.startup_wait_ms.store(ms, Ordering::Relaxed);
        self.list_waits.store(true, Ordering::Relaxed);
    }

    /// Whether `tools/list` waits for cold backends (only when `startup_wait` is configured).
    pub(crate) fn list_waits(&self) -> bool {
        self.list_waits.load(Ordering::Relaxed)
    }

    /// Also lists each stored tool as a plain MCP tool (`[stored_tools] expose_as_mcp_tools`).
    pub fn expose_stored_tools(&self, expose: bool) {
        self.expose_stored.store(expose, Ordering::Relaxed);
    }

    pub(crate) fn exposes_stored_tools(&self) -> bool {
        self.expose_stored.load(Ordering::Relaxed)
    }

    /// Installs `tools` as the stored tools' current versions, rebuilds the catalog and tells
    /// clients the tool set changed.
    pub async fn install_stored_tools(self: &Arc<Self>, tools: crate::stored::Tools) {
        if let Ok(mut slot) = self.stored.write() {
            *slot = tools;
        }
        self.clone().refresh().await;
    }

    /// Keeps the stored tools in step with the store: loads them before returning (so the
    /// first caller already sees them), then every second checks whether any connection (the
    /// CLI's included) changed them, and reloads them if so.
    pub async fn watch_stored_tools(self: &Arc<Self>) {
        let Some(store) = self.chain().and_then(|c| c.store.clone()) else {
            return;
        };
        let mut seen: Option<(i64, Vec<(String, u32)>)> = None;
        if let Ok(tools) = store.run(|s| s.tools()).await {
            seen = Some((
                0,
                tools.iter().map(|t| (t.name.clone(), t.version)).collect(),
            ));
            self.install_stored_tools(crate::stored::load(tools)).await;
        }
        let weak = Arc::downgrade(self);
        let stopping = self.stopping.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                    () = stopping.cancelled() => return,
                }
                let read = store.run(|s| Ok((s.data_version()?, s.tools()?))).await;
                let Some(gateway) = weak.upgrade() else {
                    return;
                };
                if let Ok((version, tools)) = read {
                    let names: Vec<(String, u32)> =
                        tools.iter().map(|t| (t.name.clone(), t.version)).collect();
                    let changed = seen.as_ref().is_none_or(|(_, before)| *before != names);
                    seen = Some((version, names));
                    if changed {
                        gateway
                            .install_stored_tools(crate::stored::load(tools))
                            .await;
                    }
                }
            }
        });
    }

    async fn refresh(self: Arc<Self>) {
        // A catalog of many tools takes a while to build: off the async threads, so calls in
        // flight never wait for it (they keep the snapshot they have).
        let catalog = self.rebuilt().await.catalog;
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
        let _ = self.changes.send(());
        // A new tool list was read (and the old catalog dropped): what the listing held, up to
        // max_list_bytes of pages for a backend whose list never ends, goes back to the kernel.
        self.return_memory_soon();
        let peers: Vec<Peer<RoleServer>> = self
            .legacy_peers
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default();
        for peer in peers {
            if peer.is_transport_closed() {
                continue;
            }
            let _ = peer.notify_tool_list_changed().await;
            let _ = peer.notify_resource_list_changed().await;
        }
        self.forget_closed_peers();
    }
}
