//! A tool named by its backend and its own name, and where it comes from. The name travels as
//! this pair from the catalog to the call record: `"backend.tool"` is written in one place
//! (`Display`) and read in one place ([`ToolRef::parse`], for names a person or a stored
//! tool's declaration writes), so no layer splits or formats the text itself.

use std::fmt;

/// A tool by its configured backend name and the name its backend gives it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolRef {
    /// The backend's configured name (the stored tools' backend for a stored tool).
    pub backend: String,
    /// The tool's name as its backend gives it.
    pub tool: String,
}

impl ToolRef {
    /// The tool `tool` of `backend`.
    pub fn new(backend: impl Into<String>, tool: impl Into<String>) -> ToolRef {
        ToolRef {
            backend: backend.into(),
            tool: tool.into(),
        }
    }

    /// `backend.tool` as written: split at the first dot (a backend's name has none; a tool's
    /// may), both parts non-empty; `None` for anything else.
    pub fn parse(written: &str) -> Option<ToolRef> {
        let (backend, tool) = written.split_once('.')?;
        (!backend.is_empty() && !tool.is_empty()).then(|| ToolRef::new(backend, tool))
    }
}

impl fmt::Display for ToolRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.backend, self.tool)
    }
}

/// Where a catalog entry comes from, which decides where a call to it goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Origin {
    /// A backend's listing: called through the backends.
    #[default]
    Backend,
    /// A stored tool: run in the sandbox.
    Stored,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_name_splits_at_its_first_dot() {
        assert_eq!(
            ToolRef::parse("github.repos.get"),
            Some(ToolRef::new("github", "repos.get"))
        );
        assert_eq!(ToolRef::parse("github."), None);
        assert_eq!(ToolRef::parse(".get"), None);
        assert_eq!(ToolRef::parse("plain"), None);
        assert_eq!(ToolRef::new("a", "b.c").to_string(), "a.b.c");
    }
}
