//! Grants and decisions: what a caller's code may reach, and why a request was refused.
//!
//! This crate is pure: no I/O, no clock. It is also the only place that can construct
//! [`Authorized`]: the upstream crate's call API takes an `Authorized<ToolCall>`, and the host
//! capabilities take an `Authorized<NetTarget>`, `Authorized<FsAccess>` or `Authorized<EnvRead>`,
//! so the type system guarantees that nothing is reached without a policy decision.
//!
//! A [`Profile`] is a named set of grants from the config (tools, network hosts, file roots,
//! environment names, limits). An [`Access`] is one execution's view of it: the profile,
//! narrowed by what the caller asked to drop (`allow_tools`). Deny always beats allow, and
//! every denial names the rule that refused it and where to change it.

mod fs;
mod glob;
mod net;
mod profile;
mod tools;

pub use fs::{FsAccess, FsRoot, deciding_root};
pub use glob::glob_match;
pub use net::{AddressClass, HostPattern, NetGrant, NetLookup, NetTarget, classify};
pub use profile::{Access, Capability, Engine, EngineGrant, EnvRead, Profile, ProfileLimits};
pub use tools::{Grant, ToolCall, ToolName};

/// Proof that the policy allowed `T`, with the rule that allowed it. Only this crate can make
/// one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorized<T> {
    inner: T,
    rule: String,
}

impl<T> Authorized<T> {
    fn new(inner: T, rule: String) -> Self {
        Authorized { inner, rule }
    }

    /// The authorized request.
    pub fn get(&self) -> &T {
        &self.inner
    }

    /// The rule that allowed it, e.g. `profiles.reader.tools: memory.read_*`.
    pub fn rule(&self) -> &str {
        &self.rule
    }
}

/// Why a request was refused: what was asked, the rule that refused it, and where to change it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A request outside the caller's grants.
    #[error("{what} is not allowed: {reason}. {fix}")]
    Denied {
        /// What was asked, e.g. "calling `fs.write_file`" or "fetch to `10.0.0.1:80`".
        what: String,
        /// The rule that refused it.
        reason: String,
        /// Who can change it and where, e.g. "Only the operator can allow it (ask them): they
        /// would add a pattern to profiles.reader.tools in sandgate.toml."
        fix: String,
    },
}

impl PolicyError {
    /// The rule that refused the request (for the audit log).
    pub fn reason(&self) -> &str {
        match self {
            PolicyError::Denied { reason, .. } => reason,
        }
    }
}
