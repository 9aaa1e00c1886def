//! The sandbox crate's one error type: failures to set the sandbox up. Failures of an
//! execution are not errors of this kind; they are part of its [`crate::host::result::ExecutionResult`].

use std::path::PathBuf;

/// Why the sandbox could not start.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The worker program could not be started.
    #[error("cannot start the sandbox worker {program}: {source}")]
    Spawn {
        /// The worker executable.
        program: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A worker started but did not report ready.
    #[error("the sandbox worker did not start properly: {0}")]
    WorkerStart(String),
    /// Lockdown was required but some protection is unavailable on this host.
    #[error("sandbox lockdown is required (sandbox.require_lockdown) but this host does not support: {}. Run `sandgate doctor` for details, or turn the requirement off.", .missing.join(", "))]
    LockdownUnavailable {
        /// Protections that are not active.
        missing: Vec<String>,
    },
}
