//! One table routes the MCP surface: each meta-tool by name to the function that answers it,
//! and each fixed `sandgate://` resource by URI to its reader, with what `resources/list`
//! says of it. Listing, dispatch, the names the sandbox is told are not tools of its own, and
//! the counters all read this table, so a route cannot be listed and not served, or served
//! and not counted.

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, ReadResourceResult, Resource, ResourceContents, Tool,
};
use serde_json::Value;

use super::meta_tools::{self, META_TOOLS};
use super::resources::{self, BACKEND_PREFIX, visible_statuses};
use super::stored_tools;
use crate::caller::Caller;
use crate::gateway::Gateway;
use crate::progress::ProgressSink;
use crate::runtime::Cancellation;

/// What a meta-tool answers: a result, or a message for an `isError` result.
type ToolAnswer<'a> = BoxFuture<'a, Result<CallToolResult, String>>;

/// How one meta-tool is answered.
pub(crate) struct ToolRoute {
    /// Its name.
    pub name: &'static str,
    /// Answers a call with its arguments (an object), progress sink and cancellation.
    pub call: for<'a> fn(
        &'a Arc<Gateway>,
        &'a Caller,
        Value,
        Option<ProgressSink>,
        &'a Cancellation,
    ) -> ToolAnswer<'a>,
}

/// Defines a route's answering function: the async work, boxed, with the route's signature.
macro_rules! answer {
    ($name:ident, |$g:ident, $c:ident, $a:ident, $p:pat_param, $cancel:pat_param| $work:expr) => {
        fn $name<'a>(
            $g: &'a Arc<Gateway>,
            $c: &'a Caller,
            $a: Value,
            $p: Option<ProgressSink>,
            $cancel: &'a Cancellation,
        ) -> ToolAnswer<'a> {
            Box::pin($work)
        }
    };
}

answer!(search, |g, c, a, _, _| meta_tools::search(g, c, a));
answer!(info, |g, c, a, _, _| meta_tools::info(g, c, a));
answer!(list, |g, c, a, _, _| meta_tools::list(g, c, a));
answer!(chain, |g, c, a, p, cancel| meta_tools::run_chain(
    g, c, a, p, cancel
));
answer!(read_output, |g, c, a, _, _| meta_tools::read_output(
    g, c, a
));
answer!(wait, |g, c, a, _, cancel| meta_tools::wait_execution(
    g, c, a, cancel
));

/// Every meta-tool, in listing order.
pub(crate) const TOOLS: [ToolRoute; 6] = [
    ToolRoute {
        name: "search_tools",
        call: search,
    },
    ToolRoute {
        name: "tool_info",
        call: info,
    },
    ToolRoute {
        name: "list_tools_meta",
        call: list,
    },
    ToolRoute {
        name: "call_tool_chain",
        call: chain,
    },
    ToolRoute {
        name: "read_output",
        call: read_output,
    },
    ToolRoute {
        name: "wait_execution",
        call: wait,
    },
];

// The table routes exactly the meta-tools, in their listing order: checked when it compiles.
const _: () = {
    assert!(TOOLS.len() == META_TOOLS.len());
    let mut at = 0;
    while at < TOOLS.len() {
        assert!(same(TOOLS[at].name, META_TOOLS[at]));
        at += 1;
    }
};

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut at = 0;
    while at < a.len() {
        if a[at] != b[at] {
            return false;
        }
        at += 1;
    }
    true
}

/// Tool definitions for `tools/list`, as `caller` sees them: the meta-tools, then the stored
/// tools' own (see `stored_tools`).
pub fn definitions(gateway: &Gateway, caller: &Caller) -> Vec<Tool> {
    let mut tools = meta_tools::definitions(gateway, caller);
    tools.extend(stored_tools::definitions(gateway, caller));
    tools
}

/// Runs a meta-tool (or a stored tool's), or returns `None` when `name` is none for `caller`.
pub async fn call(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    name: &str,
    arguments: Option<JsonObject>,
    progress: Option<ProgressSink>,
    cancel: &Cancellation,
) -> Option<CallToolResult> {
    if let Some(result) = stored_tools::call(gateway, caller, name, arguments.clone()).await {
        return Some(result);
    }
    let route = tool(name)?;
    let args = Value::Object(arguments.unwrap_or_default());
    let result = (route.call)(gateway, caller, args, progress, cancel).await;
    // The counter key is the table's ('static), never the request's.
    gateway.count(route.name);
    Some(result.unwrap_or_else(|message| CallToolResult::error(vec![ContentBlock::text(message)])))
}

/// The route of meta-tool `name`.
pub(crate) fn tool(name: &str) -> Option<&'static ToolRoute> {
    TOOLS.iter().find(|route| route.name == name)
}

/// How one fixed resource is listed and read.
pub(crate) struct ResourceRoute {
    /// Its URI.
    pub uri: &'static str,
    /// Its name in `resources/list`.
    pub name: &'static str,
    /// What `resources/list` says of it.
    pub description: &'static str,
    /// Its MIME type.
    pub mime: &'static str,
    /// Reads it as `caller` sees it.
    pub read: for<'a> fn(&'a Arc<Gateway>, &'a Caller) -> BoxFuture<'a, String>,
}

fn overview<'a>(g: &'a Arc<Gateway>, c: &'a Caller) -> BoxFuture<'a, String> {
    Box::pin(resources::overview(g, c))
}

fn backends<'a>(g: &'a Arc<Gateway>, c: &'a Caller) -> BoxFuture<'a, String> {
    Box::pin(resources::backends(g, c))
}

fn stats<'a>(g: &'a Arc<Gateway>, c: &'a Caller) -> BoxFuture<'a, String> {
    Box::pin(resources::stats(g, c))
}

fn types<'a>(g: &'a Arc<Gateway>, c: &'a Caller) -> BoxFuture<'a, String> {
    Box::pin(resources::types(g, c))
}

fn types_pyi<'a>(g: &'a Arc<Gateway>, c: &'a Caller) -> BoxFuture<'a, String> {
    Box::pin(resources::types_pyi(g, c))
}

/// Every fixed resource, in listing order (per-backend and per-execution resources follow
/// them, by prefix).
pub(crate) const RESOURCES: [ResourceRoute; 5] = [
    ResourceRoute {
        uri: "sandgate://overview",
        name: "overview",
        description: "How to use this gateway, and its backends with tool counts",
        mime: "text/markdown",
        read: overview,
    },
    ResourceRoute {
        uri: "sandgate://backends",
        name: "backends",
        description: "Status of every backend",
        mime: "application/json",
        read: backends,
    },
    ResourceRoute {
        uri: "sandgate://stats",
        name: "stats",
        description: "Usage counters, catalog size, and executions per tier with latency and bytes saved",
        mime: "application/json",
        read: stats,
    },
    ResourceRoute {
        uri: "sandgate://types.d.ts",
        name: "types.d.ts",
        description: "TypeScript declarations for every reachable tool",
        mime: "text/plain",
        read: types,
    },
    ResourceRoute {
        uri: "sandgate://types.pyi",
        name: "types.pyi",
        description: "Python declarations for every reachable tool (for call_tool_chain with language: \"python\")",
        mime: "text/plain",
        read: types_pyi,
    },
];

/// The route of fixed resource `uri`.
pub(crate) fn resource(uri: &str) -> Option<&'static ResourceRoute> {
    RESOURCES.iter().find(|route| route.uri == uri)
}

/// The fixed resources plus one per backend the caller can see.
pub fn list_resources(gateway: &Gateway, caller: &Caller) -> Vec<Resource> {
    let mut resources: Vec<Resource> = RESOURCES
        .iter()
        .map(|route| {
            Resource::new(route.uri, route.name)
                .with_description(route.description)
                .with_mime_type(route.mime)
        })
        .collect();
    for status in visible_statuses(gateway, caller) {
        resources.push(
            Resource::new(
                format!("{BACKEND_PREFIX}{}", status.name),
                format!("backend {}", status.name),
            )
            .with_description(format!("Status of backend `{}`", status.name))
            .with_mime_type("application/json"),
        );
    }
    resources
}

/// Reads a resource, or `None` for an unknown URI. `Err` is a known kind of URI with nothing
/// behind it (an expired output), with the reason.
pub async fn read_resource(
    gateway: &std::sync::Arc<Gateway>,
    caller: &Caller,
    uri: &str,
) -> Option<Result<ReadResourceResult, String>> {
    if let Some(stored) = crate::chain::read::read_resource(gateway, caller, uri).await {
        gateway.count("resources/read");
        return Some(stored.map(|text| {
            ReadResourceResult::new(vec![
                ResourceContents::text(text, uri).with_mime_type("text/plain"),
            ])
        }));
    }
    let (text, mime) = match resource(uri) {
        Some(route) => ((route.read)(gateway, caller).await, route.mime),
        None => {
            let name = uri.strip_prefix(BACKEND_PREFIX)?;
            (
                resources::backend(gateway, caller, name).await?,
                "application/json",
            )
        }
    };
    gateway.count("resources/read");
    Some(Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type(mime),
    ])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_has_its_own_name() {
        let tools: std::collections::BTreeSet<_> = TOOLS.iter().map(|r| r.name).collect();
        assert_eq!(tools.len(), TOOLS.len(), "a meta-tool is routed twice");
        let uris: std::collections::BTreeSet<_> = RESOURCES.iter().map(|r| r.uri).collect();
        assert_eq!(uris.len(), RESOURCES.len(), "a resource is routed twice");
    }
}
