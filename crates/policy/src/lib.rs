//! Grants and decisions: which tools a caller may reach, and why a call was refused.
//!
//! This crate is pure. It is also the only place that can construct [`Authorized`]: the
//! upstream crate's call API takes an `Authorized<ToolCall>`, so the type system guarantees
//! that no path reaches a backend without a policy decision. Deny always beats allow.

mod glob;

pub use glob::glob_match;

/// A request to call one backend tool, named by its original backend and tool names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ToolCall {
    /// Backend name as configured.
    pub backend: String,
    /// Tool name as the backend gives it.
    pub tool: String,
}

impl ToolCall {
    /// Makes a call request.
    pub fn new(backend: impl Into<String>, tool: impl Into<String>) -> Self {
        ToolCall {
            backend: backend.into(),
            tool: tool.into(),
        }
    }

    /// `backend.tool`.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.backend, self.tool)
    }
}

/// Proof that the policy allowed `T`. Only this crate can make one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorized<T> {
    inner: T,
}

impl<T> Authorized<T> {
    /// The authorized request.
    pub fn get(&self) -> &T {
        &self.inner
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A tool call outside the caller's grant.
    #[error("calling `{tool}` is not allowed: {reason}")]
    Denied {
        /// `backend.tool`.
        tool: String,
        /// Which rule refused it.
        reason: String,
    },
}

/// Which tools may be reached: `backend.tool` patterns with `*` wildcards.
/// An empty allow list allows nothing; deny patterns win over allow patterns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grant {
    allow: Vec<String>,
    deny: Vec<String>,
}

impl Grant {
    /// A grant for every tool (the local single-user default).
    pub fn all_tools() -> Grant {
        Grant {
            allow: vec!["*".into()],
            deny: vec![],
        }
    }

    /// A grant from allow and deny patterns.
    pub fn new(allow: Vec<String>, deny: Vec<String>) -> Grant {
        Grant { allow, deny }
    }

    /// The decision for one qualified tool name, with the rule that made it.
    pub fn decide(&self, qualified: &str) -> Result<(), String> {
        if let Some(rule) = self.deny.iter().find(|p| glob_match(p, qualified)) {
            return Err(format!("it matches the deny rule `{rule}`"));
        }
        if self.allow.iter().any(|p| glob_match(p, qualified)) {
            Ok(())
        } else if self.allow.is_empty() {
            Err("the grant allows no tools".into())
        } else {
            Err(format!(
                "it matches none of the allowed patterns ({})",
                self.allow.join(", ")
            ))
        }
    }

    /// A grant that allows only what both `self` and `narrower` allow. Callers can narrow
    /// their grant this way but can never widen it.
    pub fn narrowed(&self, narrower: &Grant) -> NarrowedGrant<'_> {
        NarrowedGrant {
            outer: self,
            inner: narrower.clone(),
        }
    }
}

/// Two grants that must both allow a call.
#[derive(Debug, Clone)]
pub struct NarrowedGrant<'a> {
    outer: &'a Grant,
    inner: Grant,
}

/// The policy decision point.
pub trait Decide {
    /// The decision for one qualified tool name.
    fn decide(&self, qualified: &str) -> Result<(), String>;

    /// Authorizes a call, or says why not.
    fn authorize(&self, call: ToolCall) -> Result<Authorized<ToolCall>, PolicyError> {
        let qualified = call.qualified();
        match self.decide(&qualified) {
            Ok(()) => Ok(Authorized { inner: call }),
            Err(reason) => Err(PolicyError::Denied {
                tool: qualified,
                reason,
            }),
        }
    }
}

impl Decide for Grant {
    fn decide(&self, qualified: &str) -> Result<(), String> {
        Grant::decide(self, qualified)
    }
}

impl Decide for NarrowedGrant<'_> {
    fn decide(&self, qualified: &str) -> Result<(), String> {
        self.outer.decide(qualified)?;
        self.inner.decide(qualified)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_beats_allow() {
        let grant = Grant::new(vec!["github.*".into()], vec!["github.delete_*".into()]);
        assert!(
            grant
                .authorize(ToolCall::new("github", "create_issue"))
                .is_ok()
        );
        let err = grant
            .authorize(ToolCall::new("github", "delete_repo"))
            .expect_err("denied");
        assert!(
            err.to_string().contains("deny rule `github.delete_*`"),
            "{err}"
        );
        assert!(grant.authorize(ToolCall::new("slack", "post")).is_err());
    }

    #[test]
    fn empty_grant_allows_nothing() {
        assert!(Grant::default().authorize(ToolCall::new("a", "b")).is_err());
        assert!(
            Grant::all_tools()
                .authorize(ToolCall::new("a", "b"))
                .is_ok()
        );
    }

    #[test]
    fn narrowing_never_widens() {
        let server = Grant::new(vec!["github.*".into()], vec![]);
        let caller = Grant::all_tools();
        let narrowed = server.narrowed(&caller);
        assert!(narrowed.authorize(ToolCall::new("slack", "post")).is_err());
        let caller = Grant::new(vec!["github.get_*".into()], vec![]);
        let narrowed = server.narrowed(&caller);
        assert!(
            narrowed
                .authorize(ToolCall::new("github", "get_issue"))
                .is_ok()
        );
        assert!(
            narrowed
                .authorize(ToolCall::new("github", "create_issue"))
                .is_err()
        );
    }
}
