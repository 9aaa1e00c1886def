//! Reloading the backends of a changed config while serving.
//!
//! Only what changed is touched: a backend whose entry is the same keeps its connection (and
//! its calls in flight); one whose entry changed is stopped and started again with the new
//! entry; one that is gone is stopped and forgotten; a new one is started. Calls that arrive
//! meanwhile wait for the new connection as they wait for any starting backend.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use sandgate_config::Config;

use crate::backend::Backend;
use crate::manager::{BackendManager, Supervised};

/// How long a reload waits for the backends it stops to end before starting their
/// replacements (their process groups are killed as their supervisors end).
const STOP_WAIT: Duration = Duration::from_secs(3);

/// What a reload did, by backend name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// Backends the new config added.
    pub added: Vec<String>,
    /// Backends the new config no longer has.
    pub removed: Vec<String>,
    /// Backends whose entries changed, started again.
    pub restarted: Vec<String>,
    /// How many backends were left as they were.
    pub unchanged: usize,
}

impl Reloaded {
    /// Whether the reload changed any backend.
    pub fn changed_anything(&self) -> bool {
        !(self.added.is_empty() && self.removed.is_empty() && self.restarted.is_empty())
    }
}

impl std::fmt::Display for Reloaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |names: &[String]| {
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        };
        write!(
            f,
            "added: {}; removed: {}; restarted: {}; unchanged: {}",
            list(&self.added),
            list(&self.removed),
            list(&self.restarted),
            self.unchanged
        )
    }
}

impl BackendManager {
    /// Brings the backends in line with `config`'s (see the module docs).
    pub async fn reload(&self, config: &Config) -> Reloaded {
        let _one_at_a_time = self.reloading.lock().await;
        let before = self.backends();
        let mut report = Reloaded::default();
        let mut next = (*before).clone();
        let mut started = Vec::new();
        for entry in &config.backends {
            match before.get(&entry.name) {
                Some(old) if old.config == *entry => report.unchanged += 1,
                found => {
                    let backend = Arc::new(Backend::new(entry.clone()));
                    next.insert(entry.name.clone(), backend.clone());
                    started.push(backend);
                    match found {
                        Some(_) => report.restarted.push(entry.name.clone()),
                        None => report.added.push(entry.name.clone()),
                    }
                }
            }
        }
        for name in before.keys() {
            if config.backend(name).is_none() {
                next.remove(name);
                report.removed.push(name.clone());
            }
        }
        // The new map first: from here on calls reach the new entries (waiting while they
        // start); then the old connections are stopped, then the new ones started.
        *self
            .backends
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        let stopping: Vec<Supervised> = {
            let mut running = self
                .supervisors
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            report
                .removed
                .iter()
                .chain(&report.restarted)
                .filter_map(|name| running.remove(name))
                .collect()
        };
        // Calls the stop cuts off say why, not that a restart follows.
        for name in &report.removed {
            if let Some(old) = before.get(name) {
                old.ended_by("a reload took it out of the config, so it is not restarted");
            }
        }
        for name in &report.restarted {
            if let Some(old) = before.get(name) {
                old.ended_by("a reload changed its entry, so sandgate started it anew");
            }
        }
        for supervised in &stopping {
            supervised.stop.cancel();
        }
        let tasks = stopping.into_iter().map(|s| s.task);
        if tokio::time::timeout(STOP_WAIT, futures::future::join_all(tasks))
            .await
            .is_err()
        {
            tracing::warn!("backends stopped by the reload did not end within {STOP_WAIT:?}");
        }
        for name in &report.removed {
            self.shared.backend_removed(name);
        }
        let mut running = self
            .supervisors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for backend in started {
            let name = backend.config.name.clone();
            if backend.config.enabled {
                running.insert(
                    name.clone(),
                    Supervised::start(&backend, &self.shared, &self.shutdown),
                );
            }
            self.shared.status_changed(&name);
        }
        report
    }
}
