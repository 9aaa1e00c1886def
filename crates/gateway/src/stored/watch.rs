//! What the gateway last read of the stored tools, so it reads them again only when the
//! store's change mark moved (another connection, gateway or replica committed a change), and
//! whether they are also listed as plain MCP tools.

use std::sync::atomic::{AtomicBool, Ordering};

use sandgate_store::StoreHandle;

use super::loaded::{Tools, load};

/// The stored tools as last read, and how they are listed.
#[derive(Debug, Default)]
pub(crate) struct StoredWatch {
    /// Whether stored tools are also listed as plain MCP tools.
    expose: AtomicBool,
    /// The store's change mark at the last read, and each tool's version then.
    seen: tokio::sync::Mutex<Seen>,
    /// Held by a catch-up from its read to the end of its install: a caller that catches up
    /// while the watcher installs what it read waits for the new catalog, rather than finding
    /// the mark already read and going on with the old one.
    catching_up: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct Seen {
    read_at: Option<i64>,
    tools: Option<Vec<(String, u32)>>,
}

impl StoredWatch {
    /// A watch that lists stored tools as plain MCP tools when `expose` says so.
    pub(crate) fn new(expose: bool) -> StoredWatch {
        StoredWatch {
            expose: AtomicBool::new(expose),
            seen: Default::default(),
            catching_up: Default::default(),
        }
    }

    /// Whether stored tools are also listed as plain MCP tools.
    pub(crate) fn exposed(&self) -> bool {
        self.expose.load(Ordering::Relaxed)
    }

    /// Lists stored tools as plain MCP tools, or stops (a reload may change it).
    pub(crate) fn set_exposed(&self, expose: bool) {
        self.expose.store(expose, Ordering::Relaxed);
    }

    /// One catch-up at a time, its install included (see `catching_up`).
    pub(crate) async fn catching_up(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.catching_up.lock().await
    }

    /// The stored tools to install, when the store's change mark moved since the last read
    /// and they changed; `None` when nothing changed (or the store could not be read).
    pub(crate) async fn changes(&self, store: &StoreHandle) -> Option<Tools> {
        let mut seen = self.seen.lock().await;
        let version = store.change_mark().await.ok();
        if version.is_some() && version == seen.read_at && seen.tools.is_some() {
            return None;
        }
        // Taken before the read: a commit after it is seen at the next look.
        seen.read_at = version;
        let tools = store.tools().await.ok()?;
        let names: Vec<(String, u32)> = tools.iter().map(|t| (t.name.clone(), t.version)).collect();
        let changed = seen.tools.as_ref().is_none_or(|before| *before != names);
        seen.tools = Some(names);
        changed.then(|| load(tools))
    }
}
