//! The gateway crate's one error type.

/// Why the gateway could not serve.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The HTTP listener could not bind.
    #[error("cannot listen on {addr}: {source}. Pick a free port with --http 127.0.0.1:PORT.")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The MCP session failed to start or ended with an error.
    #[error("MCP session failed: {0}")]
    Serve(String),
}
