//! What a caller is shown: the catalog and the sandbox's tool list, cut down to the tools its
//! access may reach. Lists, search, declarations, resources and the guest's globals are all
//! made from a view, so a tool outside a profile is not merely refused: it is absent.
//!
//! A profile's view is built once per catalog and kept; a view narrowed by `allow_tools` is
//! built for its one execution.

use std::sync::Arc;

use sandgate_catalog::{Catalog, Entry};
use sandgate_policy::{Access, ToolCall, ToolName};
use sandgate_sandbox::ToolBinding;

use crate::Gateway;
use crate::bridge::tool_bindings;

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
    fn narrowed(&self, access: &Access) -> View {
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
    match catalog.resolve(&format!("{backend}.{tool}")) {
        Ok(entry) if entry.spec.backend == backend && entry.spec.name == tool => {
            access.sees_tool(&name_of(entry))
        }
        _ => access.sees_tool(&ToolName::plain(backend, tool)),
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
    from: Arc<Catalog>,
    view: View,
}

impl Gateway {
    /// What `access` may see of the current catalog.
    pub fn view(&self, access: &Access) -> View {
        self.view_of(access, &self.current_view())
    }

    /// What `access` may see of `full`.
    pub(crate) fn view_of(&self, access: &Access, full: &View) -> View {
        if access.sees_every_tool() {
            return full.clone();
        }
        if access.is_narrowed() {
            return full.narrowed(access);
        }
        let name = &access.profile().name;
        let mut cache = self.profile_views();
        if let Some(cached) = cache.get(name)
            && Arc::ptr_eq(&cached.from, &full.catalog)
        {
            return cached.view.clone();
        }
        let view = full.narrowed(access);
        cache.insert(
            name.clone(),
            CachedView {
                from: full.catalog.clone(),
                view: view.clone(),
            },
        );
        view
    }

    /// [`Gateway::settled_catalog`], as `access` sees it.
    pub async fn settled_view(self: &Arc<Self>, access: &Access) -> View {
        self.settled_view_for(access, |_| true).await
    }

    /// [`Gateway::settled_catalog_for`], as `access` sees it.
    pub async fn settled_view_for(
        self: &Arc<Self>,
        access: &Access,
        needed: impl Fn(&str) -> bool,
    ) -> View {
        let full = self.settled_full_view_for(needed).await;
        self.view_of(access, &full)
    }
}
