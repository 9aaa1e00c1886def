//! The backend manager: all backends of one config, their events, and the tool cache.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use rmcp::model::{CallToolResult, JsonObject};
use sandgate_catalog::ToolSpec;
use sandgate_config::Config;
use sandgate_policy::{Authorized, ToolCall};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::backend::{Backend, BackendState, BackendStatus, Conn};
use crate::cache::ToolCache;
use crate::cache::{CacheWriter, KnownTools};
use crate::error::UpstreamError;
pub use crate::shared::{ManagerOptions, UpstreamEvent};
pub(crate) use crate::shared::{Shared, Supervised};
pub use crate::supervisor::RestartPolicy;

/// The variables of sandgate's own environment a backend child inherits (besides what its
/// entry sets): written once here, read by whoever fills [`ManagerOptions::inherited_env`].
pub const INHERITED_ENV: [&str; 2] = ["PATH", "HOME"];

/// The calls half of a [`BackendManager`]: made once, by [`BackendManager::start`], and not
/// `Clone`, so whoever it is handed to is the only caller of the manager's backends.
#[derive(Debug)]
pub struct ManagerCalls {
    manager: Arc<BackendManager>,
}

impl ManagerCalls {
    fn of(manager: Arc<BackendManager>) -> ManagerCalls {
        ManagerCalls { manager }
    }

    pub(crate) fn manager(&self) -> &BackendManager {
        &self.manager
    }
}

/// All backends of one config.
#[derive(Debug)]
pub struct BackendManager {
    /// The backends by name. A reload swaps in a new map; readers take a snapshot.
    pub(crate) backends: RwLock<Arc<BTreeMap<String, Arc<Backend>>>>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) shutdown: CancellationToken,
    /// One supervisor per enabled backend, stopped one by one on reload and all at once by
    /// [`BackendManager::stop`].
    pub(crate) supervisors: Mutex<BTreeMap<String, Supervised>>,
    /// Held while a reload runs, so two reloads never interleave.
    pub(crate) reloading: tokio::sync::Mutex<()>,
    /// Each user's own connection to each per-user backend.
    users: crate::per_user::UserConnections,
}

impl BackendManager {
    /// Starts every enabled backend concurrently and returns at once; backends connect in the
    /// background. Must be called inside a tokio runtime.
    ///
    /// Returns the manager and its calls half ([`ManagerCalls`]), made this once: whoever holds
    /// it is the only code that can call these backends (the gateway's door).
    pub fn start(config: &Config, options: ManagerOptions) -> (Arc<BackendManager>, ManagerCalls) {
        let mut known = options
            .cache
            .as_ref()
            .map(ToolCache::load)
            .unwrap_or_default()
            .into_iter()
            .map(|(name, tools)| (name, Arc::new(tools)))
            .collect::<KnownTools>();
        known.retain(|name, _| config.backend(name).is_some_and(|b| b.enabled));
        let (events, _) = broadcast::channel(256);
        let cache_writer = options
            .cache
            .clone()
            .map(|cache| Arc::new(CacheWriter::new(cache)));
        let silent = Shared::silent(&options);
        let shared = Arc::new(Shared {
            options,
            events,
            known_tools: Mutex::new(known),
            cache_writer,
            generation: Default::default(),
        });
        let shutdown = CancellationToken::new();
        let mut backends = BTreeMap::new();
        let mut supervisors = BTreeMap::new();
        for cfg in &config.backends {
            let backend = Arc::new(Backend::new(cfg.clone()));
            if cfg.enabled {
                supervisors.insert(
                    cfg.name.clone(),
                    Supervised::start(&backend, &shared, &shutdown),
                );
            }
            backends.insert(cfg.name.clone(), backend);
        }
        let manager = Arc::new(BackendManager {
            backends: RwLock::new(Arc::new(backends)),
            shared,
            supervisors: Mutex::new(supervisors),
            reloading: tokio::sync::Mutex::new(()),
            users: crate::per_user::UserConnections::new(silent, shutdown.clone()),
            shutdown,
        });
        tokio::spawn(close_idle_user_connections(Arc::downgrade(&manager)));
        (manager.clone(), ManagerCalls::of(manager))
    }

    /// A snapshot of the backends by name.
    pub(crate) fn backends(&self) -> Arc<BTreeMap<String, Arc<Backend>>> {
        self.backends
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Events about tool and status changes.
    pub fn subscribe(&self) -> broadcast::Receiver<UpstreamEvent> {
        self.shared.events.subscribe()
    }

    /// How many times a backend's live tool list has changed. Read it before [`tools`]: a
    /// catalog built from those tools is current until the generation moves on.
    ///
    /// [`tools`]: BackendManager::tools
    pub fn generation(&self) -> u64 {
        self.shared
            .generation
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether the live tools of a backend `needed` names changed after [`generation`]
    /// `since`.
    ///
    /// [`generation`]: BackendManager::generation
    pub fn tools_changed_since(&self, since: u64, needed: &dyn Fn(&str) -> bool) -> bool {
        self.backends().iter().any(|(name, backend)| {
            needed(name)
                && backend
                    .tools_generation
                    .load(std::sync::atomic::Ordering::SeqCst)
                    > since
        })
    }

    /// Every exposed tool: from live connections, or from the cache for backends that have
    /// not connected yet.
    pub fn tools(&self) -> Vec<ToolSpec> {
        let known = self.shared.known_tools();
        let mut all = Vec::new();
        for (name, backend) in self.backends().iter() {
            match backend.live_tools() {
                Some(tools) => all.extend(tools.iter().cloned()),
                None if backend.config.enabled => {
                    all.extend(known.get(name).into_iter().flat_map(|t| t.iter().cloned()))
                }
                None => {}
            }
        }
        all
    }

    /// Status of every backend, in name order.
    pub fn statuses(&self) -> Vec<BackendStatus> {
        let known = self.shared.known_tools();
        self.backends()
            .iter()
            .map(|(name, b)| b.status(known.get(name).map(|t| t.as_slice())))
            .collect()
    }

    /// The backends still on their first connection attempt with no tool list to offer (none
    /// cached). Cheap when there are none: callers may ask on every request.
    pub fn cold_backends(&self) -> Vec<String> {
        let Ok(known) = self.shared.known_tools.lock() else {
            return vec![];
        };
        self.backends()
            .iter()
            .filter(|(name, b)| {
                matches!(*b.conn.borrow(), Conn::Starting)
                    && known.get(*name).is_none_or(|tools| tools.is_empty())
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The last lines a backend wrote to stderr, for operators only (never the model).
    pub fn stderr_tail(&self, backend: &str) -> Vec<String> {
        self.backends()
            .get(backend)
            .map(|b| b.stderr.snapshot())
            .unwrap_or_default()
    }

    /// Waits until no backend is starting or restarting for the first time, or `max` passes.
    pub async fn wait_settled(&self, max: Duration) {
        let all: Vec<String> = self.backends().keys().cloned().collect();
        self.wait_settled_for(&all, max).await;
    }

    /// Waits until none of `names` is on its first connection attempt, or `max` passes.
    pub async fn wait_settled_for(&self, names: &[String], max: Duration) {
        let backends = self.backends();
        let waits = names.iter().filter_map(|n| backends.get(n)).map(|b| {
            let mut rx = b.conn.subscribe();
            async move {
                let _ = rx.wait_for(|c| !matches!(c, Conn::Starting)).await;
            }
        });
        let _ = tokio::time::timeout(max, futures::future::join_all(waits)).await;
    }

    /// Whether any backend is in the given state.
    pub fn any_in(&self, state: BackendState) -> bool {
        self.statuses().iter().any(|s| s.state == state)
    }

    /// Calls a tool, in `context` (a limit that may shorten the backend's configured timeout,
    /// a trace, where progress goes).
    pub(crate) async fn call(
        &self,
        call: &Authorized<ToolCall>,
        arguments: Option<JsonObject>,
        context: crate::context::CallContext,
    ) -> Result<CallToolResult, UpstreamError> {
        let ToolCall { backend, tool, .. } = call.get();
        let backends = self.backends();
        let Some(target) = backends.get(backend) else {
            return Err(UpstreamError::UnknownBackend {
                backend: backend.clone(),
                known: backends.keys().cloned().collect::<Vec<_>>().join(", "),
            });
        };
        match &target.config.per_user {
            // The backend checks what is held on the listing the call waited for.
            None => target.call(tool, arguments, context).await,
            Some(per_user) => {
                // A user's own connection is not guarded: the shared connection's listing says
                // what is held.
                if let Some(kind) = target.held(tool) {
                    return Err(crate::guard::held_error(backend, tool, kind));
                }
                let Some(user) = context.user.clone() else {
                    return Err(UpstreamError::Unavailable {
                        backend: backend.clone(),
                        reason: "it serves each user on a connection of their own, and this call names no user".into(),
                        retrying: false,
                    });
                };
                self.users
                    .call(target, per_user, &user, tool, arguments, context)
                    .await
            }
        }
    }

    /// The tools the supply-chain guard holds now, as `(backend, tool, kind)`.
    pub fn held_tools(&self) -> Vec<(String, String, sandgate_pins::HeldKind)> {
        let mut held = Vec::new();
        for (name, backend) in self.backends().iter() {
            if let crate::backend::Conn::Ready(live) = &*backend.conn.borrow() {
                held.extend(
                    live.held
                        .iter()
                        .map(|(tool, kind)| (name.clone(), tool.clone(), *kind)),
                );
            }
        }
        held
    }

    /// Lists `backend`'s tools again (its pins changed): they are decided against the pins
    /// as they are now. Does nothing for a backend this manager does not have.
    pub fn relist(&self, backend: &str) {
        if let Some(backend) = self.backends().get(backend) {
            backend.relist.notify_one();
        }
    }

    /// How many users' own connections each per-user backend has open.
    pub fn user_connections(&self) -> Vec<(String, usize)> {
        self.users.counts()
    }

    /// The most JSON bytes one call's arguments may have for `backend` (its
    /// `max_argument_bytes`), or `None` for a backend this manager does not have.
    pub fn max_argument_bytes(&self, backend: &str) -> Option<usize> {
        self.backends()
            .get(backend)
            .map(|b| b.config.max_argument_bytes)
    }

    /// The largest `max_argument_bytes` of any backend: what a sandbox worker may let leave.
    pub fn largest_argument_bytes(&self) -> usize {
        self.backends()
            .values()
            .map(|b| b.config.max_argument_bytes)
            .max()
            .unwrap_or(sandgate_config::DEFAULT_MAX_ARGUMENT_BYTES)
    }

    /// Stops every backend (children are killed).
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Stops every backend and waits, at most `within`, until each supervisor has ended and
    /// killed its backend's process group, and then until the tool cache file holds the last
    /// known tools. Returns whether the supervisors ended in time.
    pub async fn stop(&self, within: Duration) -> bool {
        self.shutdown.cancel();
        let supervisors = std::mem::take(
            &mut *self
                .supervisors
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let tasks = supervisors
            .into_values()
            .map(|s| s.task)
            .chain(self.users.stop_all());
        let ended = tokio::time::timeout(within * 2 / 3, futures::future::join_all(tasks))
            .await
            .is_ok();
        // Ended supervisors change the known tools no more: this write is the last.
        let _ = tokio::time::timeout(within / 3, self.shared.save_known()).await;
        ended
    }
}

/// Closes users' idle connections every second, until the manager is gone.
async fn close_idle_user_connections(manager: std::sync::Weak<BackendManager>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(manager) = manager.upgrade() else {
            return;
        };
        if manager.shutdown.is_cancelled() {
            return;
        }
        let backends = manager.backends();
        manager.users.close_idle(&|name| {
            backends
                .get(name)
                .filter(|b| b.config.enabled)
                .and_then(|b| b.config.per_user.as_ref())
                .map(|p| p.idle_timeout)
        });
    }
}

impl Drop for BackendManager {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
