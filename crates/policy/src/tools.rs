//! Tool grants: `backend.tool` patterns to allow and to deny.

use crate::glob_match;

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

/// Which tools may be reached: `backend.tool` patterns with `*` wildcards.
/// An empty allow list allows nothing; deny patterns win over allow patterns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grant {
    allow: Vec<String>,
    deny: Vec<String>,
}

/// Why a grant refused a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The name matches this deny pattern.
    Denied(String),
    /// The name matches no allow pattern (the list may be empty).
    NotAllowed,
}

impl Grant {
    /// A grant for every tool (the default profile when no profiles are configured).
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

    /// The allow patterns.
    pub fn allowed(&self) -> &[String] {
        &self.allow
    }

    /// The deny patterns.
    pub fn denied(&self) -> &[String] {
        &self.deny
    }

    /// Whether this grant allows every name (`*` and no denials): its views need no filtering.
    pub fn allows_everything(&self) -> bool {
        self.deny.is_empty() && self.allow.iter().any(|p| p == "*")
    }

    /// The allow pattern that lets `qualified` through, or why none does.
    pub(crate) fn check(&self, qualified: &str) -> Result<&str, Refusal> {
        if let Some(rule) = self.deny.iter().find(|p| glob_match(p, qualified)) {
            return Err(Refusal::Denied(rule.clone()));
        }
        self.allow
            .iter()
            .find(|p| glob_match(p, qualified))
            .map(String::as_str)
            .ok_or(Refusal::NotAllowed)
    }

    /// Whether `qualified` is allowed.
    pub fn permits(&self, qualified: &str) -> bool {
        self.check(qualified).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_beats_allow() {
        let grant = Grant::new(vec!["github.*".into()], vec!["github.delete_*".into()]);
        assert_eq!(grant.check("github.create_issue"), Ok("github.*"));
        assert_eq!(
            grant.check("github.delete_repo"),
            Err(Refusal::Denied("github.delete_*".into()))
        );
        assert_eq!(grant.check("slack.post"), Err(Refusal::NotAllowed));
        assert!(!Grant::default().permits("a.b"));
        assert!(Grant::all_tools().permits("a.b"));
        assert!(Grant::all_tools().allows_everything());
        assert!(!grant.allows_everything());
    }
}
