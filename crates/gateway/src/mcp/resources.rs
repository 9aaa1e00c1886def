//! The `sandgate://` resources: how to use the gateway, backend status, usage stats and the
//! TypeScript declarations of every tool. Status resources never include backend stderr.
//! Each is cut to the caller's view: a backend none of whose tools the caller may reach is
//! not listed, and a listed one shows only the caller's tools.

use rmcp::model::ResourceTemplate;
use sandgate_upstream::BackendStatus;
use serde_json::json;
use std::sync::Arc;

use super::meta_tools::META_TOOLS;
use crate::caller::Caller;
use crate::chain::read;
use crate::gateway::Gateway;
use crate::views::sees;

/// Prefix of per-backend resources.
pub(crate) const BACKEND_PREFIX: &str = "sandgate://backend/";

/// The backends `caller` can see, each with only the tools it may reach.
pub(crate) fn visible_statuses(gateway: &Gateway, caller: &Caller) -> Vec<BackendStatus> {
    let access = &caller.access;
    let statuses = gateway.backends().statuses();
    if access.sees_every_tool() {
        return statuses;
    }
    let catalog = gateway.catalog();
    statuses
        .into_iter()
        .filter_map(|mut status| {
            let name = status.name.clone();
            status
                .tools
                .retain(|tool| sees(&catalog, access, &name, tool));
            status
                .tool_problems
                .retain(|p| sees(&catalog, access, &name, &p.tool));
            (!status.tools.is_empty()).then_some(status)
        })
        .collect()
}

/// Templates for parameterized resources.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(format!("{BACKEND_PREFIX}{{name}}"), "backend")
            .with_description("Status of one backend: state, tool names, restarts, last error")
            .with_mime_type("application/json"),
        ResourceTemplate::new(
            format!("{}{{id}}/output", read::EXECUTIONS_PREFIX),
            "execution output",
        )
        .with_description(
            "The full result of a call_tool_chain execution whose response was shortened",
        )
        .with_mime_type("text/plain"),
        ResourceTemplate::new(
            format!("{}{{id}}/logs", read::EXECUTIONS_PREFIX),
            "execution logs",
        )
        .with_description("The full logs of an execution whose response showed only part of them")
        .with_mime_type("text/plain"),
    ]
}

/// Names of every backend the caller can see, for "did you mean" on a bad resource URI.
pub fn backend_names(gateway: &Gateway, caller: &Caller) -> Vec<String> {
    visible_statuses(gateway, caller)
        .into_iter()
        .map(|s| s.name)
        .collect()
}

pub(crate) fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// `sandgate://overview`.
pub(crate) async fn overview(gateway: &std::sync::Arc<Gateway>, caller: &Caller) -> String {
    let catalog = gateway.settled_view(&caller.access).await.catalog;
    let mut text = String::from(
        "# sandgate\n\nOne MCP endpoint for many MCP servers (\"backends\"). Their tools are not listed one by one; find them on demand:\n\n\
         1. `search_tools({query})` finds tools by what they do and shows TypeScript call signatures.\n\
         2. `tool_info({name})` shows one tool's full TypeScript declaration and an example call.\n\
         3. `list_tools_meta({cursor?})` pages through every tool.\n\n\
         Tools are named `backend.tool`. In code, each backend is an object and each tool an async function: \
         `await memory.create_entities({entities: [...]})`. Names that are not JavaScript identifiers are sanitized \
         (`my-server` → `my_server`, `get-sum` → `get_sum`); the originals stay reachable as `globalThis[\"my-server\"][\"get-sum\"]`.\n\n",
    );
    if caller.access.profile().admin
        && let Some(problem) = gateway.config_problem()
    {
        text.push_str(&format!(
            "## The config did not load\n\n{}\n\nFix the file; sandgate loads it again when it changes.\n\n",
            problem.message
        ));
    }
    if let Some(problem) = gateway.http_problem() {
        text.push_str(&format!("## HTTP is not served\n\n{problem}\n\n"));
    }
    text.push_str("## Backends\n\n| backend | state | tools |\n|---|---|---|\n");
    for status in visible_statuses(gateway, caller) {
        let tools = catalog.backend_tools(&status.name).count();
        let state = serde_json::to_value(status.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let cached = if status.tools_from_cache {
            " (cached list)"
        } else {
            ""
        };
        text.push_str(&format!(
            "| {} | {state} | {tools}{cached} |\n",
            status.name
        ));
    }
    text.push_str(&format!(
        "\n{} tools in all. Meta-tools: {}.\n",
        catalog.len(),
        META_TOOLS.join(", ")
    ));
    text
}

/// Writes a resource on the blocking pool. A backend of 20,000 tools has a status of a
/// quarter of a megabyte and declarations of megabytes: written on an async thread, they held
/// up other callers' calls by tens of milliseconds.
async fn written_off_async(write: impl FnOnce() -> String + Send + 'static) -> String {
    tokio::task::spawn_blocking(write).await.unwrap_or_default()
}

/// `sandgate://backends`.
pub(crate) async fn backends(gateway: &Arc<Gateway>, caller: &Caller) -> String {
    let (gateway, caller) = (gateway.clone(), caller.clone());
    written_off_async(move || pretty(&json!({"backends": visible_statuses(&gateway, &caller)})))
        .await
}

/// `sandgate://backend/{name}`, or `None` when the caller sees no backend of that name.
pub(crate) async fn backend(gateway: &Arc<Gateway>, caller: &Caller, name: &str) -> Option<String> {
    let (gateway, caller, name) = (gateway.clone(), caller.clone(), name.to_string());
    let text = written_off_async(move || {
        visible_statuses(&gateway, &caller)
            .into_iter()
            .find(|s| s.name == name)
            .map(|status| pretty(&json!(status)))
            .unwrap_or_default()
    })
    .await;
    (!text.is_empty()).then_some(text)
}

/// The `state` global, as `types.d.ts` declares it where the profile keeps state.
const STATE_DECLARATION: &str = "/** Values kept between executions: this caller's own, JSON, each expiring (default 1 day). */\ndeclare const state: {\n  /** The value kept under `key`, or undefined when there is none or it expired. */\n  get<T = any>(key: string): Promise<T | undefined>;\n  /** Keeps `value` (JSON) under `key` for `ttl` seconds (at most 30 days). */\n  set(key: string, value: unknown, options?: { ttl?: number }): Promise<void>;\n  /** Removes `key`; whether it held a value. */\n  delete(key: string): Promise<boolean>;\n  /** The keys kept, in order. */\n  keys(): Promise<string[]>;\n};\n\n";

/// `sandgate://types.d.ts`: like search_tools, it waits for backends still on their first
/// connection.
pub(crate) async fn types(gateway: &Gateway, caller: &Caller) -> String {
    let catalog = gateway.settled_view(&caller.access).await.catalog;
    let observed = gateway.observed();
    let globals = if caller.access.grants(sandgate_policy::Capability::State) {
        STATE_DECLARATION
    } else {
        ""
    };
    written_off_async(move || format!("{globals}{}", catalog.declarations_observed(&observed)))
        .await
}

/// The `state` object, as `types.pyi` declares it where the profile keeps state.
const STATE_PYTHON: &str = "class state:\n    \"\"\"Values kept between executions: this caller's own, JSON, each expiring (default 1 day).\"\"\"\n\n    async def get(self, key: str) -> Any:\n        \"\"\"The value kept under `key`, or None when there is none or it expired.\"\"\"\n    async def set(self, key: str, value: Any, *, ttl: int | None = None) -> None:\n        \"\"\"Keeps `value` (JSON) under `key` for `ttl` seconds (at most 30 days).\"\"\"\n    async def delete(self, key: str) -> bool:\n        \"\"\"Removes `key`; whether it held a value.\"\"\"\n    async def keys(self) -> list[str]:\n        \"\"\"The keys kept, in order.\"\"\"\n\n";

/// `sandgate://types.pyi`: the same tools for Python code, with the same output types.
pub(crate) async fn types_pyi(gateway: &Gateway, caller: &Caller) -> String {
    let catalog = gateway.settled_view(&caller.access).await.catalog;
    let observed = gateway.observed();
    let state = if caller.access.grants(sandgate_policy::Capability::State) {
        STATE_PYTHON
    } else {
        ""
    };
    written_off_async(move || {
        let tools = catalog.python_declarations_observed(&observed);
        match tools.split_once("\n\n") {
            Some((head, rest)) => format!("{head}\n\n{state}{rest}"),
            None => tools,
        }
    })
    .await
}

/// `sandgate://stats`.
pub(crate) async fn stats(gateway: &Gateway, caller: &Caller) -> String {
    let executions = read::stats(gateway, caller).await;
    let catalog = gateway.view(&caller.access).catalog;
    let statuses = visible_statuses(gateway, caller);
    if !caller.access.profile().admin {
        // A profile sees its own executions and the backends it reaches; the gateway's own
        // counters and workers are for admins.
        return pretty(&json!({
            "profile": caller.profile(),
            "tools": catalog.len(),
            "backends": {
                "visible": statuses.len(),
                "ready": statuses.iter().filter(|s| s.state == sandgate_upstream::BackendState::Ready).count(),
            },
            "executions": executions,
        }));
    }
    let ready = statuses
        .iter()
        .filter(|s| s.state == sandgate_upstream::BackendState::Ready)
        .count();
    pretty(&json!({
        "uptime_secs": gateway.uptime_secs(),
        "tools": catalog.len(),
        "backends": {"configured": statuses.len(), "ready": ready},
        "restarts": statuses.iter().map(|s| s.restarts as u64).sum::<u64>(),
        "identifier_collisions": catalog.collisions(),
        "catalog_builds": gateway.catalogs().builds(),
        "requests": gateway.counters(),
        "executions": executions,
        "sandbox": gateway.chain().map(|chain| {
            let workers = chain.sandbox.workers();
            json!({
                "workers": workers.len(),
                "extra_workers": workers.iter().filter(|w| w.extra).count(),
                "executions_in_flight": workers.iter().map(|w| w.executions).sum::<usize>(),
                // Workers killed because one step outlived every deadline on them; the
                // interrupt handler should make this stay 0.
                "backstop_kills": chain.sandbox.backstop_kills(),
            })
        }),
    }))
}
