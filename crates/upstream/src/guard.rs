//! Where the supply-chain guard (issue 49) meets a backend's listing. The gateway decides what a
//! listing becomes against the pins it keeps in the store ([`ListingGuard`]); this applies the
//! decision before anything of the listing is visible: the catalog, the tool cache and the
//! call path get the definitions shown (the pinned one for a tool whose definition changed),
//! and a call to a held tool is refused here, in the one crate that talks to backends, whatever
//! route it came by.

use std::fmt::Debug;
use std::sync::Arc;

use futures::future::BoxFuture;
use sandgate_config::{BackendConfig, PinMode};
use sandgate_pins::{Decision, Definition, HeldKind};

use crate::listing::{Listing, ToolProblem, spec_of};

/// Decides what a backend's listing becomes against its pins (the gateway keeps them).
pub trait ListingGuard: Send + Sync + Debug {
    /// The decision for `listing`, `config`'s tools as served (within the bounds, hidden text
    /// kept). Never fails: a guard that cannot reach its pins decides against the last it read.
    fn decide<'a>(
        &'a self,
        config: &'a BackendConfig,
        listing: Vec<Definition>,
    ) -> BoxFuture<'a, Decision>;
}

/// `listing` as the guard decided it: the tools shown, the tools held, and a problem for each
/// held one (so `sandgate status` and `sandgate://backend/NAME` say it). Unchanged when there
/// is no guard or the backend is not pinned (`pin = false`).
pub(crate) async fn guarded(
    guard: Option<&Arc<dyn ListingGuard>>,
    config: &BackendConfig,
    mut listing: Listing,
) -> Listing {
    let Some(guard) = guard else {
        return listing;
    };
    if config.pin == PinMode::Off {
        return listing;
    }
    // The definitions are not needed past the decision.
    let definitions = std::mem::take(&mut listing.definitions);
    let decision = guard.decide(config, definitions).await;
    listing.tools = decision
        .shown
        .iter()
        .map(|definition| spec_of(&config.name, definition).0)
        .collect();
    for (tool, held) in &decision.held {
        listing.problems.push(ToolProblem {
            tool: sandgate_pins::escaped(tool).into_owned(),
            problem: format!(
                "is held for review: {}; `sandgate pins diff {}.{}` shows it, `sandgate pins accept` or `reject` decides",
                held_reason(held.kind),
                config.name,
                tool
            ),
        });
    }
    listing.held = decision
        .held
        .into_iter()
        .map(|(name, held)| (name, held.kind))
        .collect();
    listing
}

/// The error a call to `backend`'s held `tool` fails with.
pub fn held_error(backend: &str, tool: &str, kind: HeldKind) -> crate::error::UpstreamError {
    crate::error::UpstreamError::Held {
        backend: backend.to_string(),
        tool: tool.to_string(),
        reason: held_reason(kind),
        changed: kind == HeldKind::Changed,
    }
}

/// Why a tool of `kind` is held, in words for a person or a model.
pub(crate) fn held_reason(kind: HeldKind) -> &'static str {
    match kind {
        HeldKind::Changed => {
            "its definition changed since it was pinned, and the change waits for a person's review"
        }
        HeldKind::New => {
            "it is new (not pinned yet), and waits for a person's review before any agent may use it"
        }
    }
}
