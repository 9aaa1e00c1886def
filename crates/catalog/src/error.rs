//! The catalog's one error type: failed name lookups, with what to try instead.

/// Why a tool name could not be resolved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CatalogError {
    /// No tool by that name; `suggestions` are the closest qualified names.
    #[error("no tool named `{name}`{}. Use search_tools to find tools by what they do.", did_you_mean(.suggestions))]
    NotFound {
        /// The name as given.
        name: String,
        /// Closest qualified names, best first.
        suggestions: Vec<String>,
    },
    /// A bare tool name that several backends have.
    #[error("`{name}` is ambiguous: {} all have it. Qualify it as backend.tool.", .candidates.join(", "))]
    Ambiguous {
        /// The name as given.
        name: String,
        /// The qualified names it could mean.
        candidates: Vec<String>,
    },
}

fn did_you_mean(suggestions: &[String]) -> String {
    match suggestions {
        [] => String::new(),
        [one] => format!(" (did you mean `{one}`?)"),
        many => format!(" (did you mean one of: {}?)", many.join(", ")),
    }
}
