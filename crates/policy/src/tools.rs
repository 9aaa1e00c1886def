//! Tool grants: `backend.tool` patterns to allow and to deny.
//!
//! A tool can be called by more than one name: `everything.get-env` as its backend gives it,
//! and `everything.get_env` as the declarations, `tool_info` and the sandbox's objects show
//! it (also `globalThis["my-server"].get_env`, so each half in either spelling). A pattern
//! matches a tool when it matches *any* of those names, for deny and allow alike: a
//! `deny_tools` entry written the way the model calls the tool must deny it.

use crate::glob::glob_match;

/// A request to call one backend tool, named by its original backend and tool names, and by
/// the identifiers code calls it by when they differ.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ToolCall {
    /// Backend name as configured.
    pub backend: String,
    /// Tool name as the backend gives it.
    pub tool: String,
    /// The backend's and the tool's identifiers in code, when either differs from the name.
    idents: Option<Box<(String, String)>>,
}

impl ToolCall {
    /// Makes a call request.
    pub fn new(backend: impl Into<String>, tool: impl Into<String>) -> Self {
        ToolCall {
            backend: backend.into(),
            tool: tool.into(),
            idents: None,
        }
    }

    /// The same request, also known by the identifiers code calls it by (`my_server`,
    /// `get_sum`); patterns are matched against every spelling.
    pub fn called_in_code(mut self, js_backend: &str, js_tool: &str) -> Self {
        self.idents = (js_backend != self.backend || js_tool != self.tool)
            .then(|| Box::new((js_backend.to_string(), js_tool.to_string())));
        self
    }

    /// `backend.tool`.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.backend, self.tool)
    }

    /// The tool by every name it can be called by.
    pub fn name(&self) -> ToolName<'_> {
        let (js_backend, js_tool) = match &self.idents {
            Some(idents) => (idents.0.as_str(), idents.1.as_str()),
            None => (self.backend.as_str(), self.tool.as_str()),
        };
        ToolName {
            backend: &self.backend,
            tool: &self.tool,
            js_backend,
            js_tool,
        }
    }
}

/// A tool by every name it can be called by: its backend and tool names as given, and as
/// identifiers in code (the same strings when they need no sanitizing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolName<'a> {
    /// Backend name as configured.
    pub backend: &'a str,
    /// Tool name as the backend gives it.
    pub tool: &'a str,
    /// The backend's identifier in code.
    pub js_backend: &'a str,
    /// The tool's identifier in code.
    pub js_tool: &'a str,
}

impl<'a> ToolName<'a> {
    /// A name that is the same in code as written (stored tools, tests).
    pub fn plain(backend: &'a str, tool: &'a str) -> ToolName<'a> {
        ToolName {
            backend,
            tool,
            js_backend: backend,
            js_tool: tool,
        }
    }

    /// Every spelling as `backend.tool`: the name as given, then the others when they differ
    /// (built only then, so a tool whose names need no sanitizing costs one string, as one
    /// name always did).
    pub(crate) fn spellings(&self) -> Spellings {
        let join = |b: &str, t: &str| {
            let mut joined = String::with_capacity(b.len() + 1 + t.len());
            joined.push_str(b);
            joined.push('.');
            joined.push_str(t);
            joined
        };
        let (backend_differs, tool_differs) =
            (self.js_backend != self.backend, self.js_tool != self.tool);
        let mut more = Vec::new();
        if backend_differs || tool_differs {
            more.push(join(self.js_backend, self.js_tool));
        }
        if backend_differs && tool_differs {
            more.push(join(self.backend, self.js_tool));
            more.push(join(self.js_backend, self.tool));
        }
        Spellings {
            first: join(self.backend, self.tool),
            more,
        }
    }
}

/// A tool's names as `backend.tool` strings (see [`ToolName::spellings`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spellings {
    /// The name as its backend gives it.
    pub first: String,
    /// The other spellings (empty when the names need no sanitizing).
    more: Vec<String>,
}

impl Spellings {
    pub(crate) fn matched_by(&self, pattern: &str) -> bool {
        glob_match(pattern, &self.first) || self.more.iter().any(|s| glob_match(pattern, s))
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

    /// The grant of one backend's `allow_tools` and `deny_tools` (patterns of its tool names):
    /// as a grant over `backend.tool`, so a pattern matches a tool by every name it is called
    /// by, as a profile's does. An empty allow list allows every tool of the backend.
    pub fn for_backend(backend: &str, allow: &[String], deny: &[String]) -> Grant {
        let qualified = |pattern: &String| format!("{backend}.{pattern}");
        Grant {
            allow: if allow.is_empty() {
                vec![format!("{backend}.*")]
            } else {
                allow.iter().map(qualified).collect()
            },
            deny: deny.iter().map(qualified).collect(),
        }
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

    /// The allow pattern that lets `name` through (by any of its spellings), or why none
    /// does.
    pub(crate) fn check(&self, name: &Spellings) -> Result<&str, Refusal> {
        if let Some(rule) = self.deny.iter().find(|p| name.matched_by(p)) {
            return Err(Refusal::Denied(rule.clone()));
        }
        self.allow
            .iter()
            .find(|p| name.matched_by(p))
            .map(String::as_str)
            .ok_or(Refusal::NotAllowed)
    }

    /// Whether `name` is allowed.
    pub fn permits(&self, name: &ToolName<'_>) -> bool {
        self.check(&name.spellings()).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(qualified: &str) -> Spellings {
        let (backend, tool) = qualified.split_once('.').unwrap_or((qualified, ""));
        ToolName::plain(backend, tool).spellings()
    }

    #[test]
    fn deny_beats_allow() {
        let grant = Grant::new(vec!["github.*".into()], vec!["github.delete_*".into()]);
        assert_eq!(grant.check(&plain("github.create_issue")), Ok("github.*"));
        assert_eq!(
            grant.check(&plain("github.delete_repo")),
            Err(Refusal::Denied("github.delete_*".into()))
        );
        assert_eq!(grant.check(&plain("slack.post")), Err(Refusal::NotAllowed));
        assert!(!Grant::default().permits(&ToolName::plain("a", "b")));
        assert!(Grant::all_tools().permits(&ToolName::plain("a", "b")));
        assert!(Grant::all_tools().allows_everything());
        assert!(!grant.allows_everything());
    }

    #[test]
    fn a_pattern_matches_a_tool_by_every_name_it_is_called_by() {
        let call = ToolCall::new("my-server", "get-env").called_in_code("my_server", "get_env");
        let name = call.name().spellings();
        for pattern in [
            "my-server.get-env",
            "my_server.get_env",
            "my-server.get_env",
            "my_server.get-env",
            "my_server.*",
            "*.get_env",
        ] {
            let deny = Grant::new(vec!["*".into()], vec![pattern.into()]);
            assert_eq!(
                deny.check(&name),
                Err(Refusal::Denied(pattern.into())),
                "deny {pattern}"
            );
            let allow = Grant::new(vec![pattern.into()], vec![]);
            assert!(allow.check(&name).is_ok(), "allow {pattern}");
        }
        let other = Grant::new(vec!["my_server.get_sum".into()], vec![]);
        assert!(other.check(&name).is_err());
        // A backend's own filter is a grant too, over its tools by every spelling.
        let filter = Grant::for_backend("my-server", &["get-*".into()], &["get_env".into()]);
        assert!(filter.check(&name).is_err(), "deny by the sanitized name");
        let sum = ToolCall::new("my-server", "get-sum").called_in_code("my_server", "get_sum");
        assert!(filter.check(&sum.name().spellings()).is_ok());
        assert!(
            Grant::for_backend("my-server", &[], &[])
                .check(&sum.name().spellings())
                .is_ok()
        );
        let echo = ToolCall::new("my-server", "echo");
        assert!(filter.check(&echo.name().spellings()).is_err());
        // A name that needs no sanitizing carries no second spelling.
        let same = ToolCall::new("everything", "echo").called_in_code("everything", "echo");
        assert_eq!(same, ToolCall::new("everything", "echo"));
    }
}
