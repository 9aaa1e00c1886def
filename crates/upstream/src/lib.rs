//! Connections to backend MCP servers.
//!
//! This is the only crate that talks to backends. It starts every configured backend
//! concurrently (stdio child processes with a clean environment, or streamable HTTP), keeps
//! each one alive with a supervisor that restarts it with capped exponential backoff, follows
//! `tools/list_changed`, and keeps the last known tool lists in a cache file so the gateway can
//! answer before the backends are up. Calls take an [`sandgate_policy::Authorized`] proof, so
//! nothing reaches a backend without a policy decision.

mod asks;
mod backend;
mod cache;
mod content;
mod context;
mod direct_call;
mod era;
mod error;
mod escapees;
mod frames;
mod guard;
mod listing;
mod manager;
mod per_user;
mod reload;
mod seam;
mod shared;
mod stderr;
mod supervisor;
mod transport;

pub use asks::AskClient;
pub use backend::{BackendState, BackendStatus};
pub use cache::ToolCache;
pub use context::{BackendProgress, CallContext, UserConnection};
pub use error::UpstreamError;
pub use escapees::{BACKEND_RUN_VAR, SELF_AS_BACKEND, kill_every_backend_process};
pub use guard::{ListingGuard, held_error};
pub use listing::ToolProblem;
pub use manager::{
    BackendManager, INHERITED_ENV, ManagerCalls, ManagerOptions, RestartPolicy, UpstreamEvent,
};
pub use reload::Reloaded;
pub use rmcp::model::CallToolResult;
pub use seam::{BackendCalls, Backends};
