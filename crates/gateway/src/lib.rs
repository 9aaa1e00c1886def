//! The MCP front of sandgate: what an agent's MCP client talks to.
//!
//! It serves the meta-tools (`search_tools`, `tool_info`, `list_tools_meta`) and the
//! `sandgate://` resources over stdio and streamable HTTP (2025-11-25 sessions and stateless
//! 2026-07-28), keeps the catalog snapshot current as backends come and go, and tells clients
//! when the tool set changed. Every backend tool call the gateway makes goes through the
//! policy first (see [`Gateway::authorize`]).

mod bridge;
mod caller;
pub mod chain;
mod error;
mod handler;
mod http;
mod meta_tools;
mod resources;
mod state;

pub use bridge::{UpstreamBridge, tool_bindings};
pub use caller::Caller;
pub use chain::{Cancellation, ChainArgs, ChainRuntime, call_tool_chain};
pub use error::GatewayError;
pub use handler::SandgateServer;
pub use http::{HttpOptions, serve_http};
pub use state::Gateway;

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
