//! The MCP surface: the rmcp handler (`handler`), the meta-tools (`meta_tools`), the
//! `sandgate://` resources (`resources`), stored tools over MCP (`stored_tools`), the one
//! table that routes tools and resources (`routes`), and stateless tool calls answered without
//! rmcp's per-request service (`direct`). It sits on the gateway and
//! `call_tool_chain`; the HTTP front and stdio serve it.

mod asking;
pub(crate) mod direct;
mod handler;
pub(crate) mod meta_tools;
pub(crate) mod resources;
pub(crate) mod routes;
mod starting;
mod stored_tools;
mod tasks;

pub use handler::SandgateServer;
pub use meta_tools::META_TOOLS;
