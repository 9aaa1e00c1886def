//! The capabilities crate's one error type. Messages are read by the model that wrote the
//! guest code, so each says what happened and, where it can, what to do.

use sandgate_policy::PolicyError;

/// Why a capability call failed.
#[derive(Debug, thiserror::Error)]
pub enum CapabilityError {
    /// The policy refused (an address, a redirect).
    #[error(transparent)]
    Denied(#[from] PolicyError),
    /// A path that the policy allowed as written, but that leads out of its root through a
    /// symbolic link: refused like a denial.
    #[error("{0}")]
    Escape(String),
    /// The request itself is wrong (a URL, a method, a header, an option).
    #[error("{0}")]
    BadRequest(String),
    /// A limit was reached (size, time, redirects).
    #[error("{0}")]
    Limit(String),
    /// The I/O failed (connection refused, file missing, ...).
    #[error("{0}")]
    Io(String),
}
