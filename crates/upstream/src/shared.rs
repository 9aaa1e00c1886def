//! What the supervisors of one manager share ([`Shared`]: the options, the event channel, the
//! last known tools and the tool cache's writer) and a running supervisor ([`Supervised`]). A
//! file of its own, so the manager, the supervisors and users' own connections each reach it
//! without importing one another.

use std::sync::{Arc, Mutex, PoisonError};

use sandgate_catalog::ToolSpec;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::cache::ToolCache;
use crate::cache::{CacheWriter, KnownTools};
use crate::supervisor::RestartPolicy;

/// Something about the backends changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamEvent {
    /// A backend's tool list changed (connected, reconnected, or `list_changed`).
    ToolsChanged {
        /// The backend.
        backend: String,
    },
    /// A backend's state changed without a new tool list (went down, failed).
    StatusChanged {
        /// The backend.
        backend: String,
    },
}

/// How the manager runs backends.
#[derive(Debug, Clone, Default)]
pub struct ManagerOptions {
    /// Variables every stdio child gets besides its own `env` (the binary passes `PATH` and
    /// `HOME`; nothing else of the gateway's environment reaches a backend).
    pub inherited_env: Vec<(String, String)>,
    /// Where to keep the tool cache; `None` disables it.
    pub cache: Option<ToolCache>,
    /// Restart pacing.
    pub restart: RestartPolicy,
    /// The supply-chain guard every listing of a backend's shared connection passes; `None`
    /// shows listings as served.
    pub guard: Option<Arc<dyn crate::guard::ListingGuard>>,
}

/// State the supervisors report into.
#[derive(Debug)]
pub(crate) struct Shared {
    pub options: ManagerOptions,
    pub(crate) events: broadcast::Sender<UpstreamEvent>,
    /// Last known tools per backend: the cache file's content, updated as backends connect.
    pub(crate) known_tools: Mutex<KnownTools>,
    /// Writes `known_tools` to the cache file, newest last; `None` when the cache is off.
    pub(crate) cache_writer: Option<Arc<CacheWriter>>,
    /// Counts changes of live tool lists; bumped before a new list becomes visible.
    pub(crate) generation: std::sync::atomic::AtomicU64,
}

/// A copy of the known tools on its way to the cache file, with its ticket.
struct PendingWrite {
    writer: Arc<CacheWriter>,
    ticket: u64,
    tools: KnownTools,
}

impl PendingWrite {
    /// Writes the copy unless a newer one is already on disk. Blocking.
    fn write(self) {
        self.writer.write(self.ticket, &self.tools);
    }
}

impl Shared {
    /// A `Shared` whose reports go nowhere, with the same options but no tool cache: what
    /// users' own connections (`per_user`) report into, so nothing of them reaches the catalog.
    pub(crate) fn silent(options: &ManagerOptions) -> Arc<Shared> {
        let (events, _) = broadcast::channel(1);
        Arc::new(Shared {
            // A user's own connection lists its tools only to know what it may be sent; what
            // is held is decided by the shared connection's listing, which the catalog shows.
            options: ManagerOptions {
                cache: None,
                guard: None,
                ..options.clone()
            },
            events,
            known_tools: Mutex::default(),
            cache_writer: None,
            generation: Default::default(),
        })
    }

    /// Marks that `backend`'s live tools are about to change: call before publishing them, so
    /// that whoever sees the new tools also sees a newer generation.
    pub(crate) fn tools_changing(&self, backend: &crate::backend::Backend) {
        let generation = self
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        backend
            .tools_generation
            .store(generation, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn tools_changed(&self, backend: &str, tools: Arc<Vec<ToolSpec>>) {
        self.change_known(|known| {
            known.insert(backend.to_string(), tools);
        });
        let _ = self.events.send(UpstreamEvent::ToolsChanged {
            backend: backend.to_string(),
        });
    }

    /// Forgets a backend the config no longer has: its cached tools go (from the cache file
    /// too), and the catalog is rebuilt without it.
    pub(crate) fn backend_removed(&self, backend: &str) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.change_known(|known| {
            known.remove(backend);
        });
        let _ = self.events.send(UpstreamEvent::ToolsChanged {
            backend: backend.to_string(),
        });
    }

    /// Changes the last known tools and writes them to the cache file, off the async threads.
    fn change_known(&self, change: impl FnOnce(&mut KnownTools)) {
        if let Some(pending) = self.snapshot_known(change) {
            tokio::task::spawn_blocking(move || pending.write());
        }
    }

    /// Writes the last known tools to the cache file now and waits for the write. Writes
    /// handed off before are then either done or skipped as older: none is lost when the
    /// process ends, which cancels the ones not yet started.
    pub(crate) async fn save_known(&self) {
        if let Some(pending) = self.snapshot_known(|_| {}) {
            let _ = tokio::task::spawn_blocking(move || pending.write()).await;
        }
    }

    /// Applies `change` to the last known tools and, when the cache is on, takes a copy with
    /// its ticket under the same lock, so tickets and copies agree on which is newer.
    fn snapshot_known(&self, change: impl FnOnce(&mut KnownTools)) -> Option<PendingWrite> {
        let mut known = self
            .known_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        change(&mut known);
        self.cache_writer.as_ref().map(|writer| PendingWrite {
            writer: writer.clone(),
            ticket: writer.ticket(),
            tools: known.clone(),
        })
    }

    /// A copy of the last known tools per backend (the lists themselves are shared, not copied).
    pub(crate) fn known_tools(&self) -> KnownTools {
        self.known_tools
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default()
    }

    pub(crate) fn status_changed(&self, backend: &str) {
        let _ = self.events.send(UpstreamEvent::StatusChanged {
            backend: backend.to_string(),
        });
    }
}

/// A running supervisor and how to stop just it.
#[derive(Debug)]
pub(crate) struct Supervised {
    pub stop: CancellationToken,
    pub task: tokio::task::JoinHandle<()>,
}

impl Supervised {
    /// Starts the supervisor of `backend` under `parent`.
    pub(crate) fn start(
        backend: &Arc<Backend>,
        shared: &Arc<Shared>,
        parent: &CancellationToken,
    ) -> Supervised {
        let stop = parent.child_token();
        let task = tokio::spawn(crate::supervisor::supervise(
            backend.clone(),
            shared.clone(),
            stop.clone(),
        ));
        Supervised { stop, task }
    }
}
