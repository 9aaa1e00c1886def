//! The catalog as it stands: every tool of the backends and the stored tools, the sandbox's
//! view of the same tools, and each profile's view cut from them. Rebuilt when the backends'
//! tools change (the gateway asks), kept per profile until the next rebuild, and waited for
//! when a caller needs a backend that is still starting.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use sandgate_catalog::Catalog;
use sandgate_policy::Access;
use sandgate_upstream::Backends;

use crate::stored::loaded::Tools;
use crate::views::{CachedView, View};

/// Longest a `call_tool_chain` or an overview resource waits for backends that are still
/// starting and have nothing cached (the meta-tools wait only when `startup_wait` is written).
pub const STARTUP_WAIT: Duration = Duration::from_secs(10);

/// How long a caller waits for a catalog refresh already under way before it builds one.
const CATCH_UP_WAIT: Duration = Duration::from_secs(2);

/// The current catalog, its views, and the stored tools listed in it.
#[derive(Debug)]
pub struct Catalogs {
    backends: Arc<dyn Backends>,
    /// The catalog of every tool, and the sandbox's view of it, built together.
    current: RwLock<View>,
    /// Each profile's view of the current catalog (see `views`).
    profile_views: Mutex<BTreeMap<String, CachedView>>,
    /// Every stored tool's current version (see `stored`).
    stored: RwLock<Tools>,
    /// How long a first answer waits for backends on their first connection, in ms.
    startup_wait_ms: AtomicU64,
    /// `tools/list` and the meta-tools wait for cold backends too (`[gateway] startup_wait` is
    /// configured).
    list_waits: AtomicBool,
    builds: AtomicU64,
    /// Held while a catalog is rebuilt (see `rebuild`).
    rebuilding: Mutex<()>,
    /// The backends' generation the current catalog was built from; watched by callers that
    /// wait for a rebuild already under way.
    generation: tokio::sync::watch::Sender<u64>,
}

impl Catalogs {
    /// The catalog of `backends`' tools as they are now.
    pub(crate) fn new(backends: Arc<dyn Backends>) -> Catalogs {
        let generation = backends.generation();
        let current = View::of(Catalog::new(backends.tools()));
        Catalogs {
            backends,
            current: RwLock::new(current),
            profile_views: Mutex::default(),
            stored: RwLock::default(),
            startup_wait_ms: AtomicU64::new(millis(STARTUP_WAIT)),
            list_waits: AtomicBool::new(false),
            builds: AtomicU64::new(1),
            rebuilding: Mutex::new(()),
            generation: tokio::sync::watch::Sender::new(generation),
        }
    }

    /// The current catalog of every tool with its bindings.
    pub(crate) fn current(&self) -> View {
        self.current
            .read()
            .map(|v| v.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// What `access` may see of the current catalog.
    pub(crate) fn view(&self, access: &Access) -> View {
        self.view_of(access, &self.current())
    }

    /// What `access` may see of `full`.
    pub(crate) fn view_of(&self, access: &Access, full: &View) -> View {
        if access.sees_every_tool() {
            return full.clone();
        }
        if access.is_narrowed() {
            return full.narrowed(access);
        }
        let name = &access.profile().name;
        let mut cache = self.profile_views();
        if let Some(cached) = cache.get(name)
            && Arc::ptr_eq(&cached.from, &full.catalog)
        {
            return cached.view.clone();
        }
        let view = full.narrowed(access);
        cache.insert(
            name.clone(),
            CachedView {
                from: full.catalog.clone(),
                view: view.clone(),
            },
        );
        view
    }

    /// Forgets every profile's view (the profiles changed).
    pub(crate) fn forget_profile_views(&self) {
        self.profile_views().clear();
    }

    fn profile_views(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, CachedView>> {
        self.profile_views
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The full view, after giving the cold backends `needed` names (those still on their first
    /// connection attempt, with no cached tool list) up to the startup wait to connect: a call
    /// waits for its own backends, never for another one that is slow to start. Without this,
    /// a client that searches right after start-up would be told there are no tools.
    pub(crate) async fn settled_full_view_for(
        self: &Arc<Self>,
        needed: impl Fn(&str) -> bool,
    ) -> View {
        let cold: Vec<String> = self
            .backends
            .cold_backends()
            .into_iter()
            .filter(|name| needed(name))
            .collect();
        if !cold.is_empty() {
            let wait = Duration::from_millis(self.startup_wait_ms.load(Ordering::Relaxed));
            self.backends.wait_settled_for(&cold, wait).await;
            return self.rebuilt().await;
        }
        self.caught_up_full_view_for(needed).await
    }

    /// The full view as it stands, waiting for no backend that is still starting: only for a
    /// refresh already under way that adds what a backend `needed` names just gained.
    pub(crate) async fn caught_up_full_view_for(
        self: &Arc<Self>,
        needed: impl Fn(&str) -> bool,
    ) -> View {
        // A backend the caller needs that became ready or changed a moment ago may not be in the
        // snapshot yet: its generation says so. The refresh that change set off is under way;
        // wait for it rather than build the same catalog twice (a second build of a large
        // catalog slowed every other caller). Changes of other backends never hold this caller up.
        let stale = |built: u64| self.backends.tools_changed_since(built, &needed);
        let built_from = *self.generation.borrow();
        if stale(built_from) {
            let mut built = self.generation.subscribe();
            let caught_up = matches!(
                tokio::time::timeout(CATCH_UP_WAIT, built.wait_for(|g| !stale(*g))).await,
                Ok(Ok(_))
            );
            if !caught_up {
                return self.rebuilt().await;
            }
        }
        self.current()
    }

    /// A catalog rebuilt now, off the async threads (a catalog of many tools takes a while).
    pub(crate) async fn rebuilt(self: &Arc<Self>) -> View {
        let building = self.clone();
        match tokio::task::spawn_blocking(move || building.rebuild()).await {
            Ok(view) => view,
            Err(_) => self.current(),
        }
    }

    /// Builds a catalog from the backends' current tools and the stored tools, and makes it the
    /// current one. Rebuilds take turns, so one that read the tools earlier can never replace
    /// the catalog of one that read them later (a background refresh used to overwrite the
    /// catalog a search had just settled, dropping a backend that had become ready in between).
    fn rebuild(&self) -> View {
        let _turn = self
            .rebuilding
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let generation = self.backends.generation();
        let mut specs = self.backends.tools();
        specs.extend(self.stored_tools().values().map(|tool| tool.spec()));
        let view = View::of(Catalog::new(specs));
        if let Ok(mut slot) = self.current.write() {
            *slot = view.clone();
        }
        // Each profile's view is cut again from the new catalog when next asked for.
        self.profile_views().clear();
        self.generation.send_replace(generation);
        self.builds.fetch_add(1, Ordering::Relaxed);
        view
    }

    /// How many catalogs have been built.
    pub(crate) fn builds(&self) -> u64 {
        self.builds.load(Ordering::Relaxed)
    }

    /// Every stored tool's current version.
    pub(crate) fn stored_tools(&self) -> Tools {
        self.stored.read().map(|t| t.clone()).unwrap_or_default()
    }

    /// Puts `tools` in place as the stored tools' current versions (listed from the next
    /// rebuild on).
    pub(crate) fn set_stored_tools(&self, tools: Tools) {
        if let Ok(mut slot) = self.stored.write() {
            *slot = tools;
        }
    }

    /// How long first answers wait for backends still on their first connection attempt; once
    /// set, the first `tools/list` waits too.
    pub(crate) fn set_startup_wait(&self, wait: Duration) {
        self.startup_wait_ms.store(millis(wait), Ordering::Relaxed);
        self.list_waits.store(true, Ordering::Relaxed);
    }

    /// Whether `tools/list` and the meta-tools wait for cold backends (only when `startup_wait`
    /// is configured).
    pub(crate) fn list_waits(&self) -> bool {
        self.list_waits.load(Ordering::Relaxed)
    }
}

fn millis(wait: Duration) -> u64 {
    u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)
}
