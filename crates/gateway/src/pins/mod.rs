//! The supply-chain guard's memory (issue 49): pins of backends' tool definitions and the
//! changes held for review, kept in the store so every replica shares them and they outlive a
//! restart. [`PinGuard`] is what the backends' listings pass (`sandgate_upstream::ListingGuard`):
//! each listing is decided against the pins (`sandgate_pins::decide`) off the async threads,
//! what it pins and holds is recorded, and a pin another replica recorded first wins. A person
//! decides held changes with `sandgate pins` or the console (`review`); every replica follows
//! those decisions by polling the pins' digests ([`PinGuard::follow`]).

mod held;
pub mod review;

pub(crate) use held::{held_by_name, held_in_code};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use sandgate_config::{BackendConfig, PinMode};
use sandgate_pins::{Decision, Definition, Names, Pin, Trust};
use sandgate_store::{MAX_PIN_BYTES, StoreHandle, StoredHeld, StoredPin};
use sandgate_upstream::{Backends, ListingGuard};

use crate::audit::{AuditLog, Decision as AuditDecision, Subject};

/// How often a replica looks for pins another one (or `sandgate pins`) changed.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(2);

/// Who decided a pin made on first sight.
pub const FIRST_USE: &str = "first use";

/// The guard of every backend's listing: see the module's documentation.
#[derive(Debug)]
pub struct PinGuard {
    /// Where pins are kept; `None` keeps them in this process only.
    store: Option<StoreHandle>,
    /// The pins as last read or written, by backend and tool: what a listing is decided
    /// against when the store cannot be read.
    pins: Mutex<BTreeMap<String, BTreeMap<String, Pin>>>,
    /// Each backend's tool names as last listed: the other backends' names a description may
    /// shadow.
    names: Mutex<BTreeMap<String, Vec<String>>>,
    /// The digests of the tools held, by backend: a hold is audited once, when it begins.
    held: Mutex<BTreeMap<String, BTreeMap<String, String>>>,
    /// Backends whose listing is being decided now: what the store holds of them may be ahead
    /// of `pins` until the decision is done, and that is not a change made elsewhere.
    deciding: Mutex<std::collections::BTreeSet<String>>,
    audit: AuditLog,
}

impl PinGuard {
    /// A guard keeping its pins in `store` (or in memory), auditing what it holds to `audit`.
    pub fn new(store: Option<StoreHandle>, audit: AuditLog) -> Arc<PinGuard> {
        // The scan's patterns compile while the backends start, not in their first listing.
        let _ = std::thread::Builder::new()
            .name("sandgate-pins-warm".into())
            .spawn(sandgate_pins::warm);
        Arc::new(PinGuard {
            store,
            pins: Mutex::default(),
            names: Mutex::default(),
            held: Mutex::default(),
            deciding: Mutex::default(),
            audit,
        })
    }

    /// The pins of `backend`: from the store, else as last known.
    async fn pins_of(&self, backend: &str) -> BTreeMap<String, Pin> {
        if let Some(store) = &self.store {
            match store.pins(Some(backend)).await {
                Ok(stored) => {
                    let pins: BTreeMap<String, Pin> = stored
                        .into_iter()
                        .filter_map(|p| {
                            let definition = serde_json::from_str(&p.definition).ok()?;
                            Some((
                                p.tool,
                                Pin {
                                    digest: p.digest,
                                    definition,
                                },
                            ))
                        })
                        .collect();
                    lock(&self.pins).insert(backend.to_string(), pins.clone());
                    return pins;
                }
                Err(e) => tracing::warn!(
                    backend,
                    "reading the pins failed ({e}); the listing is decided against the pins last read"
                ),
            }
        }
        lock(&self.pins).get(backend).cloned().unwrap_or_default()
    }

    /// Where the pins are kept, when in a store.
    pub fn store(&self) -> Option<&StoreHandle> {
        self.store.as_ref()
    }

    /// Every backend's tool names but with `backend`'s as `listing` has them.
    fn names_with(&self, backend: &str, listing: &[Definition]) -> Vec<(String, String)> {
        let mut names = lock(&self.names);
        names.insert(
            backend.to_string(),
            listing.iter().map(|d| d.name.clone()).collect(),
        );
        names
            .iter()
            .flat_map(|(b, tools)| tools.iter().map(move |t| (b.clone(), t.clone())))
            .collect()
    }

    async fn decide_listing(&self, config: &BackendConfig, listing: Vec<Definition>) -> Decision {
        let backend = config.name.clone();
        lock(&self.deciding).insert(backend.clone());
        let decision = self.decide_listing_of(&backend, config, listing).await;
        lock(&self.deciding).remove(&backend);
        decision
    }

    async fn decide_listing_of(
        &self,
        backend: &str,
        config: &BackendConfig,
        listing: Vec<Definition>,
    ) -> Decision {
        let backend = backend.to_string();
        let trust = match config.pin {
            PinMode::Review => Trust::AfterReview,
            PinMode::FirstUse | PinMode::Off => Trust::OnFirstUse,
        };
        let names = Arc::new(Names::new(&self.names_with(&backend, &listing)));
        // A definition larger than the store keeps for review can be neither pinned nor shown
        // to a person: it is held, in this process only, and never recorded.
        let (listing, oversize): (Vec<Definition>, Vec<Definition>) = listing
            .into_iter()
            .partition(|d| serde_json::to_vec(d).map_or(usize::MAX, |b| b.len()) <= MAX_PIN_BYTES);
        let listing = Arc::new(listing);
        let pins = self.pins_of(&backend).await;
        let oversize_held = oversize_holds(&oversize, &pins);
        let mut decision = decided(&backend, &listing, pins.clone(), trust, &names).await;
        if let Some(store) = &self.store {
            let (pinned, held) = stored_listing(&backend, &decision);
            if let Err(e) = store.record_listing(&backend, pinned, held).await {
                tracing::warn!(backend, "recording the listing's pins failed: {e}");
            } else if !decision.pinned.is_empty() {
                // Another replica may have pinned one of these first, with another definition:
                // its pin wins, and this listing is decided again against it.
                let now = self.pins_of(&backend).await;
                let lost = decision
                    .pinned
                    .iter()
                    .any(|(tool, pin)| now.get(tool).is_some_and(|p| p.digest != pin.digest));
                if lost {
                    decision = decided(&backend, &listing, now, trust, &names).await;
                }
            }
        }
        // Added after the record: they are never stored.
        for (definition, held) in oversize_held {
            if let Some(pin) = pins.get(&definition.name) {
                decision.shown.push(pin.definition.clone());
            }
            decision.held.insert(definition.name.clone(), held);
        }
        {
            let mut pins = lock(&self.pins);
            let known = pins.entry(backend.clone()).or_default();
            for (tool, pin) in &decision.pinned {
                known.entry(tool.clone()).or_insert_with(|| pin.clone());
            }
        }
        self.audit_holds(&backend, &decision);
        decision
    }

    /// Writes an audit line for each tool held now that was not held (with this digest) before.
    fn audit_holds(&self, backend: &str, decision: &Decision) {
        let mut held = lock(&self.held);
        let before = held.remove(backend).unwrap_or_default();
        let now: BTreeMap<String, String> = decision
            .held
            .iter()
            .map(|(tool, h)| (tool.clone(), h.digest.clone()))
            .collect();
        for (tool, h) in &decision.held {
            if before.get(tool) == Some(&h.digest) {
                continue;
            }
            let findings: Vec<String> = h
                .findings
                .iter()
                .map(|f| format!("{:?} in {}", f.kind, f.place))
                .collect();
            let rule = format!(
                "held ({}): {}{}",
                kind_name(h.kind),
                h.digest,
                if findings.is_empty() {
                    String::new()
                } else {
                    format!("; findings: {}", findings.join(", "))
                }
            );
            self.audit.record(&AuditDecision {
                profile: None,
                token_id: None,
                execution_id: None,
                subject: Subject::Pin,
                target: &format!("{backend}.{tool}"),
                allowed: false,
                rule: &rule,
                arguments: None,
                asked: false,
            });
        }
        held.insert(backend.to_string(), now);
    }

    /// The backends whose pins in the store (`now`, as `(backend, tool, digest)`) differ from
    /// the pins their last listing was decided against: changed elsewhere. A backend never
    /// listed here, or being decided now, is not one.
    fn stale_backends(&self, now: &[(String, String, String)]) -> Vec<String> {
        let mut stored: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
        for (backend, tool, digest) in now {
            stored
                .entry(backend)
                .or_default()
                .push((tool.as_str(), digest.as_str()));
        }
        let deciding = lock(&self.deciding).clone();
        let pins = lock(&self.pins);
        pins.iter()
            .filter(|(backend, _)| !deciding.contains(*backend))
            .filter(|(backend, known)| {
                let known: Vec<(&str, &str)> = known
                    .iter()
                    .map(|(tool, pin)| (tool.as_str(), pin.digest.as_str()))
                    .collect();
                stored
                    .get(backend.as_str())
                    .map_or(!known.is_empty(), |s| *s != known)
            })
            .map(|(backend, _)| backend.clone())
            .collect()
    }

    /// Follows pins changed elsewhere (another replica, `sandgate pins`, the console): every
    /// [`FOLLOW_EVERY`], the pins' digests in the store are compared with the pins each
    /// backend's last listing was decided against, and a backend whose pins changed lists its
    /// tools again. Ends when the manager is gone.
    pub fn follow(self: &Arc<Self>, manager: Weak<dyn Backends>) {
        let Some(store) = self.store.clone() else {
            return;
        };
        let guard = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(FOLLOW_EVERY).await;
                let (Some(manager), Some(guard)) = (manager.upgrade(), guard.upgrade()) else {
                    return;
                };
                let Ok(now) = store.pin_digests().await else {
                    continue;
                };
                for backend in guard.stale_backends(&now) {
                    manager.relist(&backend);
                }
            }
        });
    }
}

impl ListingGuard for PinGuard {
    fn decide<'a>(
        &'a self,
        config: &'a BackendConfig,
        listing: Vec<Definition>,
    ) -> BoxFuture<'a, Decision> {
        Box::pin(self.decide_listing(config, listing))
    }
}

/// `listing` decided against `pins`, scanned off the async threads (a listing of thousands of
/// tools takes a while).
async fn decided(
    backend: &str,
    listing: &Arc<Vec<Definition>>,
    pins: BTreeMap<String, Pin>,
    trust: Trust,
    names: &Arc<Names>,
) -> Decision {
    let (backend, listing, names) = (backend.to_string(), listing.clone(), names.clone());
    tokio::task::spawn_blocking(move || {
        let context = names.context(&backend);
        sandgate_pins::decide(&listing, &pins, trust, |d| sandgate_pins::scan(d, &context))
    })
    .await
    .unwrap_or_default()
}

/// The holds of definitions too large to keep for review: changed if the tool is pinned, else
/// new, with the finding that says why.
fn oversize_holds(
    oversize: &[Definition],
    pins: &BTreeMap<String, Pin>,
) -> Vec<(Definition, sandgate_pins::Held)> {
    oversize
        .iter()
        .map(|definition| {
            let size = serde_json::to_vec(definition).map_or(usize::MAX, |b| b.len());
            let held = sandgate_pins::Held {
                kind: if pins.contains_key(&definition.name) {
                    sandgate_pins::HeldKind::Changed
                } else {
                    sandgate_pins::HeldKind::New
                },
                definition: Definition {
                    description: None,
                    input_schema: serde_json::Value::Null,
                    output_schema: None,
                    annotations: None,
                    ..definition.clone()
                },
                digest: definition.digest(),
                findings: vec![sandgate_pins::Finding {
                    kind: sandgate_pins::FindingKind::Oversize,
                    severity: sandgate_pins::Severity::High,
                    place: "definition".into(),
                    excerpt: format!(
                        "a definition of {} KiB, more than the {} KiB sandgate keeps for review",
                        size / 1024,
                        MAX_PIN_BYTES / 1024
                    ),
                }],
            };
            (definition.clone(), held)
        })
        .collect()
}

/// What the store keeps of `decision`.
fn stored_listing(backend: &str, decision: &Decision) -> (Vec<StoredPin>, Vec<StoredHeld>) {
    let pinned = decision
        .pinned
        .iter()
        .map(|(tool, pin)| StoredPin {
            backend: backend.to_string(),
            tool: tool.clone(),
            digest: pin.digest.clone(),
            definition: json(&pin.definition),
            decided_by: FIRST_USE.into(),
        })
        .collect();
    let held = decision
        .held
        .iter()
        .map(|(tool, held)| StoredHeld {
            backend: backend.to_string(),
            tool: tool.clone(),
            kind: kind_name(held.kind).into(),
            digest: held.digest.clone(),
            definition: json(&held.definition),
            findings: json(&held.findings),
            rejected_by: None,
        })
        .collect();
    (pinned, held)
}

/// A held change's kind as the store and the CLI write it.
pub fn kind_name(kind: sandgate_pins::HeldKind) -> &'static str {
    match kind {
        sandgate_pins::HeldKind::Changed => "changed",
        sandgate_pins::HeldKind::New => "new",
    }
}

/// `value` as JSON text (`null` if it cannot be: never for the types written here).
fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(b: &str, t: &str, d: &str) -> (String, String, String) {
        (b.into(), t.into(), d.into())
    }

    fn pin(digest: &str) -> Pin {
        Pin {
            digest: digest.into(),
            definition: serde_json::from_value(serde_json::json!({"name": "x"})).expect("def"),
        }
    }

    #[test]
    fn only_backends_whose_pins_changed_elsewhere_list_again() {
        let guard = PinGuard::new(None, AuditLog::disabled());
        lock(&guard.pins).insert("a".into(), [("x".to_string(), pin("1"))].into());
        lock(&guard.pins).insert("b".into(), [("y".to_string(), pin("2"))].into());
        lock(&guard.pins).insert("c".into(), [("z".to_string(), pin("3"))].into());
        let now = vec![row("a", "x", "1"), row("b", "y", "9"), row("d", "w", "4")];
        assert_eq!(
            guard.stale_backends(&now),
            vec!["b".to_string(), "c".to_string()],
            "b changed, c's pins are gone; d was never listed here"
        );
        lock(&guard.deciding).insert("b".into());
        assert_eq!(guard.stale_backends(&now), vec!["c".to_string()]);
    }
}
