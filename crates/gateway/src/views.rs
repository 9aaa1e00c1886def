//! What a caller is shown: the catalog and the sandbox's tool list, cut down to the tools its
//! access may reach. Lists, search, declarations, resources and the guest's globals are all
//! made from a view, so a tool outside a profile is not merely refused: it is absent.
//!
//! A profile's view is built once per catalog and kept (`catalogs`); a view narrowed by
//! `allow_tools` is built for its one execution.

use std::sync::Arc;

use sandgate_catalog::{Catalog, Entry, TsDecl};
use sandgate_policy::{Access, ToolCall, ToolName};
use sandgate_sandbox::ToolBinding;

/// A catalog and the sandbox's view of the same tools, index for index.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// The tools, searchable.
    pub catalog: Arc<Catalog>,
    /// The same tools as the sandbox binds them.
    pub bindings: Arc<Vec<ToolBinding>>,
}

impl View {
    /// The view of every tool in `catalog`.
    pub fn of(catalog: Catalog) -> View {
        let bindings = Arc::new(tool_bindings(&catalog));
        View {
            catalog: Arc::new(catalog),
            bindings,
        }
    }

    /// The part of this view `access` may see.
    pub(crate) fn narrowed(&self, access: &Access) -> View {
        let specs = self
            .catalog
            .entries()
            .iter()
            .filter(|e| access.sees_tool(&name_of(e)))
            .map(|e| e.spec.clone())
            .collect();
        View::of(Catalog::new(specs))
    }
}

/// A catalog entry by every name it can be called by (a grant's patterns match any).
pub(crate) fn name_of(entry: &Entry) -> ToolName<'_> {
    ToolName {
        backend: &entry.spec.backend,
        tool: &entry.spec.name,
        js_backend: &entry.js_backend,
        js_tool: &entry.js_tool,
    }
}

/// Whether `access` sees `backend.tool`, asked by every name `catalog` knows it by.
pub(crate) fn sees(catalog: &Catalog, access: &Access, backend: &str, tool: &str) -> bool {
    match catalog.entry(&sandgate_catalog::ToolRef::new(backend, tool)) {
        Some(entry) => access.sees_tool(&name_of(entry)),
        None => access.sees_tool(&ToolName::plain(backend, tool)),
    }
}

/// A call to `entry`, known to the policy by every name it can be called by.
pub(crate) fn call_of(entry: &Entry) -> ToolCall {
    ToolCall::new(entry.spec.backend.clone(), entry.spec.name.clone())
        .called_in_code(&entry.js_backend, &entry.js_tool)
}

/// A profile's view and the full view it was cut from.
#[derive(Debug, Clone)]
pub(crate) struct CachedView {
    pub(crate) from: Arc<Catalog>,
    pub(crate) view: View,
}

/// The sandbox's view of every tool in a catalog, with TypeScript declarations.
pub fn tool_bindings(catalog: &Catalog) -> Vec<ToolBinding> {
    catalog
        .entries()
        .iter()
        .map(|entry| ToolBinding {
            backend: entry.spec.backend.clone(),
            name: entry.spec.name.clone(),
            js_backend: entry.js_backend.clone(),
            js_tool: entry.js_tool.clone(),
            declaration: TsDecl::for_entry(entry).declaration,
        })
        .collect()
}
