//! The tools an execution may call, as the worker keeps them: grouped by backend once, so an
//! execution binds only the backends its code touches.
//!
//! A gateway in front of twenty servers hands every execution hundreds of tools, and a script
//! uses a handful. Parsing all of them into JavaScript and defining a function per tool cost
//! about 3 ms per execution at 400 tools; the preamble now defines one lazy global per backend
//! and asks for a backend's tools (and, for `__interfaces`, their declarations) through a
//! native the first time code touches it. The worker keeps the last set it was sent, outside the
//! template region, so the host sends a set only when it changes (see `protocol::HostFrame::Run`).

use crate::wire::protocol::ToolBinding;

/// An execution's tools and their grouping by backend.
#[derive(Debug, Default)]
pub struct ToolSet {
    /// Every tool, in the host's order: calls name a tool by its index here.
    pub bindings: Vec<ToolBinding>,
    /// The backends, in order of first appearance.
    pub backends: Vec<BackendTools>,
}

/// One backend and the indexes of its tools in [`ToolSet::bindings`].
#[derive(Debug)]
pub struct BackendTools {
    /// The backend's name as configured.
    pub name: String,
    /// Its JavaScript identifier.
    pub js: String,
    /// Indexes into [`ToolSet::bindings`].
    pub tools: Vec<u32>,
}

impl ToolSet {
    /// Groups `bindings` by backend.
    pub fn new(bindings: Vec<ToolBinding>) -> ToolSet {
        let mut backends: Vec<BackendTools> = Vec::new();
        let mut by_name: std::collections::HashMap<&str, usize> = Default::default();
        for (index, tool) in bindings.iter().enumerate() {
            let at = *by_name.entry(tool.backend.as_str()).or_insert_with(|| {
                backends.push(BackendTools {
                    name: tool.backend.clone(),
                    js: tool.js_backend.clone(),
                    tools: Vec::new(),
                });
                backends.len() - 1
            });
            backends[at].tools.push(index as u32);
        }
        ToolSet { bindings, backends }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(backend: &str, name: &str) -> ToolBinding {
        ToolBinding {
            backend: backend.into(),
            name: name.into(),
            js_backend: backend.replace('-', "_"),
            js_tool: name.replace('-', "_"),
            declaration: String::new(),
        }
    }

    #[test]
    fn groups_tools_by_backend_in_order_of_first_appearance() {
        let set = ToolSet::new(vec![tool("b-one", "x"), tool("a", "y"), tool("b-one", "z")]);
        let grouped: Vec<(&str, &str, &[u32])> = set
            .backends
            .iter()
            .map(|b| (b.name.as_str(), b.js.as_str(), b.tools.as_slice()))
            .collect();
        assert_eq!(
            grouped,
            vec![("b-one", "b_one", &[0, 2][..]), ("a", "a", &[1][..])]
        );
        assert_eq!(set.bindings.len(), 3);
    }
}
