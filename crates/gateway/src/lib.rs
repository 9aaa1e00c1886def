//! The MCP front of sandgate: what an agent's MCP client talks to.
//!
//! It serves the meta-tools (`search_tools`, `tool_info`, `list_tools_meta`) and the
//! `sandgate://` resources over stdio and streamable HTTP (2025-11-25 sessions and stateless
//! 2026-07-28), keeps the catalog snapshot current as backends come and go, and tells clients
//! when the tool set changed. Every caller acts under a profile, sees only what it may reach
//! (`views`), and every backend tool call and host capability goes through one door (`door`),
//! which asks the policy first and writes the decision to the audit log. Executions and calls
//! are counted for `/metrics` and traced as OpenTelemetry spans (`telemetry`).

mod admission;
mod audit;
mod bridge;
mod caller;
mod capability;
pub mod chain;
mod console;
mod door;
mod error;
mod handler;
mod http;
mod meta_tools;
mod notice;
mod resources;
mod state;
pub mod stored;
pub mod telemetry;
mod views;

pub use audit::AuditLog;
pub use bridge::{UpstreamBridge, tool_bindings};
pub use caller::{Authenticated, Caller, Owner};
pub use capability::granted as granted_capabilities;
pub use chain::{Cancellation, ChainArgs, ChainRuntime, call_tool_chain};
pub use door::Knock;
pub use error::GatewayError;
pub use handler::SandgateServer;
pub use http::{HttpAuthOptions, HttpOptions, KnownToken, serve_http, sha256};
pub use meta_tools::META_TOOLS;
pub use state::Gateway;
pub use views::View;

/// Serves one MCP client over stdin/stdout until it disconnects.
pub async fn serve_stdio(gateway: std::sync::Arc<Gateway>) -> Result<(), GatewayError> {
    use rmcp::ServiceExt;
    let running = SandgateServer::new(gateway)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| GatewayError::Serve(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| GatewayError::Serve(e.to_string()))?;
    Ok(())
}
