//! The two halves the gateway sees of the backends, as traits, so the gateway can be tested
//! over backends that run no process.
//!
//! [`Backends`] is everything but calling a tool: tool lists, states, events, waiting for
//! start-up, the argument bounds, stopping. [`BackendCalls`] is calling a tool, and nothing
//! else. [`BackendManager::start`] hands out the calls half once, as a [`ManagerCalls`] that is
//! not `Clone`; the binary gives it to the gateway's door, which keeps it in a private field.
//! So the only code that can call a backend is the code that holds that value.

use std::fmt::Debug;
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, JsonObject};
use sandgate_catalog::ToolSpec;
use sandgate_policy::{Authorized, ToolCall};
use tokio::sync::broadcast;

use crate::backend::BackendStatus;
use crate::context::CallContext;
use crate::error::UpstreamError;
use crate::manager::{BackendManager, ManagerCalls, UpstreamEvent};

/// What the gateway reads of its backends, and how it stops them: everything but a call.
pub trait Backends: Send + Sync + Debug {
    /// Events about tool and status changes.
    fn subscribe(&self) -> broadcast::Receiver<UpstreamEvent>;
    /// How many times a live tool list has changed (read it before [`Backends::tools`]).
    fn generation(&self) -> u64;
    /// Whether the live tools of a backend `needed` names changed after generation `since`.
    fn tools_changed_since(&self, since: u64, needed: &dyn Fn(&str) -> bool) -> bool;
    /// Every exposed tool (live, or cached for backends not connected yet).
    fn tools(&self) -> Vec<ToolSpec>;
    /// Every backend's status, in name order.
    fn statuses(&self) -> Vec<BackendStatus>;
    /// The backends still on their first connection attempt with nothing cached.
    fn cold_backends(&self) -> Vec<String>;
    /// The last lines a backend wrote to stderr (operators only).
    fn stderr_tail(&self, backend: &str) -> Vec<String>;
    /// Waits until none of `names` is on its first connection attempt, or `max` passes.
    fn wait_settled_for<'a>(&'a self, names: &'a [String], max: Duration) -> BoxFuture<'a, ()>;
    /// The most JSON bytes one call's arguments may have for `backend`; `None` for a backend
    /// there is none of.
    fn max_argument_bytes(&self, backend: &str) -> Option<usize>;
    /// The largest `max_argument_bytes` of any backend.
    fn largest_argument_bytes(&self) -> usize;
    /// Stops every backend, waiting at most `within`; whether all ended in time.
    fn stop(&self, within: Duration) -> BoxFuture<'_, bool>;
    /// How `backend` serves each user on a connection of its own, if it does (`per_user`).
    fn per_user(&self, _backend: &str) -> Option<sandgate_config::PerUser> {
        None
    }
    /// How many users' own connections each per-user backend has open, by name.
    fn user_connections(&self) -> Vec<(String, usize)> {
        Vec::new()
    }
    /// The backend's `approve` patterns (`backend.tool`): its tools a person must approve
    /// before a call runs.
    fn approval_patterns(&self, _backend: &str) -> Vec<String> {
        Vec::new()
    }
    /// Whether any backend has `approve` patterns.
    fn approves_any(&self) -> bool {
        false
    }
    /// Every tool the supply-chain guard holds, as `(backend, tool, kind)`.
    fn held_tools(&self) -> Vec<(String, String, sandgate_pins::HeldKind)> {
        Vec::new()
    }
    /// Lists `backend`'s tools again (its pins changed).
    fn relist(&self, _backend: &str) {}
    /// Whether the shapes of the backend's results are learned (`learn_shapes`).
    fn learns_shapes(&self, _backend: &str) -> bool {
        true
    }
}

/// Calling a backend tool: the one thing [`Backends`] cannot do.
pub trait BackendCalls: Send + Sync + Debug {
    /// Calls the tool `call` names, with a proof that the policy allowed it, in `context`.
    fn call<'a>(
        &'a self,
        call: &'a Authorized<ToolCall>,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> BoxFuture<'a, Result<CallToolResult, UpstreamError>>;
}

impl BackendCalls for ManagerCalls {
    fn call<'a>(
        &'a self,
        call: &'a Authorized<ToolCall>,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> BoxFuture<'a, Result<CallToolResult, UpstreamError>> {
        Box::pin(self.manager().call(call, arguments, context))
    }
}

impl Backends for BackendManager {
    fn subscribe(&self) -> broadcast::Receiver<UpstreamEvent> {
        BackendManager::subscribe(self)
    }

    fn generation(&self) -> u64 {
        BackendManager::generation(self)
    }

    fn tools_changed_since(&self, since: u64, needed: &dyn Fn(&str) -> bool) -> bool {
        BackendManager::tools_changed_since(self, since, needed)
    }

    fn tools(&self) -> Vec<ToolSpec> {
        BackendManager::tools(self)
    }

    fn statuses(&self) -> Vec<BackendStatus> {
        BackendManager::statuses(self)
    }

    fn cold_backends(&self) -> Vec<String> {
        BackendManager::cold_backends(self)
    }

    fn stderr_tail(&self, backend: &str) -> Vec<String> {
        BackendManager::stderr_tail(self, backend)
    }

    fn wait_settled_for<'a>(&'a self, names: &'a [String], max: Duration) -> BoxFuture<'a, ()> {
        Box::pin(BackendManager::wait_settled_for(self, names, max))
    }

    fn max_argument_bytes(&self, backend: &str) -> Option<usize> {
        BackendManager::max_argument_bytes(self, backend)
    }

    fn largest_argument_bytes(&self) -> usize {
        BackendManager::largest_argument_bytes(self)
    }

    fn stop(&self, within: Duration) -> BoxFuture<'_, bool> {
        Box::pin(BackendManager::stop(self, within))
    }

    fn per_user(&self, backend: &str) -> Option<sandgate_config::PerUser> {
        self.backends()
            .get(backend)
            .and_then(|b| b.config.per_user.clone())
    }

    fn user_connections(&self) -> Vec<(String, usize)> {
        BackendManager::user_connections(self)
    }

    fn approval_patterns(&self, backend: &str) -> Vec<String> {
        self.backends()
            .get(backend)
            .map(|b| b.config.approve.clone())
            .unwrap_or_default()
    }

    fn approves_any(&self) -> bool {
        self.backends()
            .values()
            .any(|b| !b.config.approve.is_empty())
    }

    fn held_tools(&self) -> Vec<(String, String, sandgate_pins::HeldKind)> {
        BackendManager::held_tools(self)
    }
    fn relist(&self, backend: &str) {
        BackendManager::relist(self, backend)
    }
    fn learns_shapes(&self, backend: &str) -> bool {
        self.backends()
            .get(backend)
            .is_some_and(|b| b.config.learn_shapes)
    }
}
