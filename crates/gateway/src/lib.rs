//! The MCP front of sandgate: what an agent's MCP client talks to.
//!
//! It serves the meta-tools (`search_tools`, `tool_info`, `list_tools_meta`) and the
//! `sandgate://` resources over stdio and streamable HTTP (2025-11-25 sessions and stateless
//! 2026-07-28), keeps the catalog snapshot current as backends come and go, and tells clients
//! when the tool set changed. Every caller acts under a profile, sees only what it may reach
//! (`views`), and every backend tool call and host capability goes through one door (`door`),
//! which asks the policy first and writes the decision to the audit log. Executions and calls
//! are counted for `/metrics` and traced as OpenTelemetry spans (`telemetry`).

// The layers, from the ground up (each uses only those below it; `tests/layout.rs` holds it):
// 1. the parts: who calls, what is audited, admitted, counted and told, the profiles, the
//    views of the catalog, what executions run on, progress, the shapes learned from results;
mod admission;
pub mod approvals;
mod audit;
mod caller;
mod clients;
pub mod credentials;
mod detached;
mod error;
mod executions;
mod notice;
pub mod pins;
mod profiles;
mod progress;
mod runtime;
pub mod shapes;
pub mod signin;
pub mod telemetry;
mod upkeep;
mod views;
// 2. the stored tools as listed, and the catalog with its views;
mod catalogs;
pub mod stored;
// 3. the one door to backends and host capabilities;
mod door;
// 4. the gateway, built from the parts, and the sandbox's way to the door;
mod bridge;
mod gateway;
// 5. `call_tool_chain`;
pub mod chain;
// 6. the MCP surface;
mod mcp;
// 7. the HTTP and stdio fronts, and the console.
mod console;
mod http;
mod stdio;

pub use audit::AuditLog;
pub use bridge::ExecutionBridge;
pub use caller::{Authenticated, Caller, Owner, Part, Principal};
pub use catalogs::STARTUP_WAIT;
pub use chain::call_tool_chain;
pub use door::{Door, HostFunction, Knock, granted as granted_capabilities};
pub use error::GatewayError;
pub use executions::FinishedExecution;
pub use gateway::{Gateway, GatewayBuilder};
pub use http::{HttpAuthOptions, HttpOptions, HttpTokens, KnownToken, serve_http, sha256};
pub use mcp::{META_TOOLS, SandgateServer};
pub use profiles::Profiles;
pub use progress::ProgressSink;
pub use runtime::{Cancellation, ChainRuntime};
pub use stdio::serve_stdio;
pub use views::{View, tool_bindings};

pub use chain::{ChainArgs, sandbox_engine};
