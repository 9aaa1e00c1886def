//! What a model is told when it reaches for a tool the supply-chain guard holds. A held tool
//! that changed is still listed (with its pinned definition) and a call to it fails at the one
//! door with the held error; a held tool that is new is in no list, so code that names it finds
//! nothing there, and is told here that it is held (not that it does not exist), in the words
//! of the held error. Only a tool the caller's profile may reach is named.

use sandgate_catalog::sanitize_ident;
use sandgate_policy::{Access, ToolName};
use sandgate_upstream::{Backends, held_error};

/// The held error for `name` (`backend.tool`, as written or as identifiers), if it names a
/// held tool `access` may reach.
pub(crate) fn held_by_name(backends: &dyn Backends, access: &Access, name: &str) -> Option<String> {
    let (backend, tool) = name.split_once('.')?;
    backends
        .held_tools()
        .into_iter()
        .find(|(b, t, _)| {
            (b == backend || sanitize_ident(b) == backend)
                && (t == tool || sanitize_ident(t) == tool)
        })
        .filter(|(b, t, _)| reachable(access, b, t))
        .map(|(b, t, kind)| held_error(&b, &t, kind).to_string())
}

/// The held error for the first held tool `access` may reach that `code` names (its backend
/// and its tool both appear in it, as written or as identifiers).
pub(crate) fn held_in_code(backends: &dyn Backends, access: &Access, code: &str) -> Option<String> {
    let held = backends.held_tools();
    if held.is_empty() {
        return None;
    }
    let words: std::collections::HashSet<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$' || c == '-'))
        .filter(|w| !w.is_empty())
        .collect();
    let named = |name: &str| words.contains(name) || words.contains(sanitize_ident(name).as_str());
    held.into_iter()
        .find(|(b, t, _)| named(b) && named(t) && reachable(access, b, t))
        .map(|(b, t, kind)| held_error(&b, &t, kind).to_string())
}

fn reachable(access: &Access, backend: &str, tool: &str) -> bool {
    let (js_backend, js_tool) = (sanitize_ident(backend), sanitize_ident(tool));
    access.sees_tool(&ToolName {
        backend,
        tool,
        js_backend: &js_backend,
        js_tool: &js_tool,
    })
}
