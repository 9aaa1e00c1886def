//! Stored tools over MCP. Profiles with `register_tools = true` get two more meta-tools,
//! `register_tool` and `remove_tool` (off by default: registering code through MCP lets a
//! model add tools). With `[stored_tools] expose_as_mcp_tools = true`, every stored tool a
//! caller may reach is also listed as a plain MCP tool, `user.<name>`, called through the door.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use sandgate_policy::ToolName;
use serde_json::{Value, json};

use crate::caller::Caller;
use crate::gateway::Gateway;
use crate::stored::{BACKEND, Registered, Registrant, load, register};

/// The extra tools `caller` is shown.
pub(crate) fn definitions(gateway: &Gateway, caller: &Caller) -> Vec<Tool> {
    let mut tools = Vec::new();
    if caller.access.profile().register_tools {
        tools.push(super::meta_tools::tool(
            "register_tool",
            "Register (or update) a stored tool from a TypeScript file: `export const meta = { description, input, output?, capabilities }` and `export default async function (input, ctx) {...}`. It becomes callable as user.<name> in call_tool_chain. Every capability it declares must be one your profile holds.",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "description": "lowercase letters, digits and _; called as user.<name>"},
                "code": {"type": "string", "description": "the tool file"}
            }, "required": ["name", "code"], "additionalProperties": false}),
        ));
        tools.push(super::meta_tools::tool(
            "remove_tool",
            "Remove a stored tool your profile registered (its versions are kept).",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}),
        ));
    }
    if gateway.exposes_stored_tools() {
        for loaded in gateway.catalogs().stored_tools().values() {
            let qualified =
                sandgate_catalog::ToolRef::new(BACKEND, &loaded.stored.name).to_string();
            let name = ToolName::plain(BACKEND, &loaded.stored.name);
            if !caller.access.sees_tool(&name) {
                continue;
            }
            let schema = match &loaded.meta.input {
                Value::Object(map) => map.clone(),
                _ => JsonObject::new(),
            };
            tools.push(Tool::new(
                qualified,
                loaded.meta.description.clone(),
                Arc::new(schema),
            ));
        }
    }
    tools
}

/// Runs one of those tools, or `None` when `name` is none of them for `caller`.
pub(crate) async fn call(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    name: &str,
    arguments: Option<JsonObject>,
) -> Option<CallToolResult> {
    let arguments = arguments.unwrap_or_default();
    let text = |s: &str| arguments.get(s).and_then(Value::as_str).map(str::to_string);
    let result = match name {
        "register_tool" if caller.access.profile().register_tools => {
            match (text("name"), text("code")) {
                (Some(tool), Some(code)) => register_tool(gateway, caller, &tool, &code).await,
                _ => Err("register_tool takes { name, code }".to_string()),
            }
        }
        "remove_tool" if caller.access.profile().register_tools => match text("name") {
            Some(tool) => remove(gateway, caller, &tool).await,
            None => Err("remove_tool takes { name }".to_string()),
        },
        _ => {
            let tool = name.strip_prefix(BACKEND)?.strip_prefix('.')?;
            if !gateway.exposes_stored_tools()
                || !gateway.catalogs().stored_tools().contains_key(tool)
                || !caller.access.sees_tool(&ToolName::plain(BACKEND, tool))
            {
                return None;
            }
            return Some(run(gateway, caller, tool, arguments).await);
        }
    };
    Some(match result {
        Ok(message) => CallToolResult::success(vec![ContentBlock::text(message)]),
        Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
    })
}

async fn register_tool(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    name: &str,
    code: &str,
) -> Result<String, String> {
    // Declared tools are judged against every backend, cold ones given their start-up wait.
    let catalog = gateway
        .catalogs()
        .settled_full_view_for(|_| true)
        .await
        .catalog;
    let store = store_of(gateway)?;
    let Registered { version, warnings } = register(
        &store,
        Registrant::Caller(caller),
        name,
        code,
        &caller.access,
        &catalog,
    )
    .await
    .map_err(|e| e.to_string())?;
    reload(gateway, &store).await;
    let mut answer = format!("user.{name} is at version {version}");
    for warning in warnings {
        answer.push_str(&format!("\nwarning: {warning}"));
    }
    Ok(answer)
}

async fn remove(gateway: &Arc<Gateway>, caller: &Caller, name: &str) -> Result<String, String> {
    let store = store_of(gateway)?;
    store
        .remove_tool(
            name,
            &crate::stored::owner_of(caller),
            caller.access.profile().admin,
        )
        .await
        .map_err(|e| e.to_string())?;
    reload(gateway, &store).await;
    Ok(format!("user.{name} is removed (its versions are kept)"))
}

async fn run(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    tool: &str,
    arguments: JsonObject,
) -> CallToolResult {
    let tool = sandgate_catalog::ToolRef::new(BACKEND, tool);
    match gateway.call_as(caller, &tool, arguments).await {
        Ok(answer) => serde_json::from_str::<CallToolResult>(&answer.json)
            .unwrap_or_else(|e| CallToolResult::error(vec![ContentBlock::text(e.to_string())])),
        Err(failure) => CallToolResult::error(vec![ContentBlock::text(failure.message)]),
    }
}

fn store_of(gateway: &Gateway) -> Result<sandgate_store::StoreHandle, String> {
    gateway
        .chain()
        .and_then(|c| c.store.clone())
        .ok_or_else(|| "this gateway has no store to keep stored tools in".to_string())
}

async fn reload(gateway: &Arc<Gateway>, store: &sandgate_store::StoreHandle) {
    if let Ok(tools) = store.tools().await {
        gateway.install_stored_tools(load(tools)).await;
    }
}
