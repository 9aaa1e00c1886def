//! The gateway crate's one error type.

/// Why the gateway could not serve.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The HTTP listener could not bind.
    #[error("cannot listen on {addr}: {cause}. Pick a free port with --http 127.0.0.1:PORT.")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The OS error (in the message, not chained, so it is said once).
        cause: std::io::Error,
    },
    /// The audit log could not be opened.
    #[error(
        "cannot write the audit log {path}: {cause}. Fix [audit] path, or its directory's permissions."
    )]
    Audit {
        /// The file.
        path: std::path::PathBuf,
        /// The OS error (in the message, not chained, so it is said once).
        cause: std::io::Error,
    },
    /// A review of pinned tool definitions could not be done (`sandgate pins`, the console).
    #[error("{0}")]
    Pins(String),
    /// A stored tool's file failed a check: nothing was written.
    #[error("user.{name} is not registered (nothing was written):\n- {}", problems.join("\n- "))]
    NotRegistered {
        /// The tool's name.
        name: String,
        /// Every problem, each naming its line or its path in `meta`.
        problems: Vec<String>,
    },
    /// The store refused a stored tool's change.
    #[error("{0}")]
    StoredTools(String),
    /// The MCP session failed to start or ended with an error.
    #[error("MCP session failed: {0}")]
    Serve(String),
}
