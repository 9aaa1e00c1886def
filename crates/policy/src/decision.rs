//! A decision of the policy: the proof it allowed something ([`Authorized`], which only this
//! crate can make) or why it refused ([`PolicyError`]). A file of its own, so every module
//! that decides reaches them without going through the crate root.

/// Proof that the policy allowed `T`, with the rule that allowed it. Only this crate can make
/// one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorized<T> {
    inner: T,
    rule: String,
}

impl<T> Authorized<T> {
    pub(crate) fn new(inner: T, rule: String) -> Self {
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
