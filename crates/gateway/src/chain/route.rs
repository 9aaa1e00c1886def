//! Choosing the cheapest tier that gives exactly what the sandbox would.
//!
//! - **json**: `{"tool": "backend.tool", "arguments": {...}}`, any name form the catalog
//!   resolves (qualified, bare, sanitized);
//! - **single_call**: code that is one call of one tool with literal arguments, recognised on
//!   the oxc AST by [`sandgate_sandbox::single_call`];
//! - **introspection**: `__getToolInterface("x")` or `__interfaces.backend.tool` alone;
//! - **sandbox**: everything else, and anything the shortcuts are not sure of.

use sandgate_catalog::Catalog;
use sandgate_sandbox::ToolBinding;
use sandgate_sandbox::direct::js_json;
use sandgate_sandbox::single_call::{self, Shortcut};
use serde_json::{Map, Value};

/// The path an execution takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Tier 1: a JSON call.
    Json,
    /// Tier 2: code that is a single call.
    SingleCall,
    /// Answered from the catalog.
    Introspection,
    /// Tier 3: the sandbox.
    Sandbox,
}

impl Tier {
    /// The name used in responses, records and stats.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Json => "json",
            Tier::SingleCall => "single_call",
            Tier::Introspection => "introspection",
            Tier::Sandbox => "sandbox",
        }
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// Call the tool at `index` of the bindings.
    Call {
        /// Tier 1 or 2.
        tier: Tier,
        /// Index into the bindings (and the catalog's entries).
        index: usize,
        /// The arguments as the guest would have sent them.
        arguments: Map<String, Value>,
        /// `.raw()`: the whole MCP result.
        raw: bool,
    },
    /// The declaration of the tool at `index`.
    Interface {
        /// Index into the bindings.
        index: usize,
    },
    /// Run the code in the sandbox.
    Sandbox,
    /// JSON input that is not a valid call; the message says how to fix it.
    BadJson(String),
    /// JSON input naming a tool that is not available: the message says why (with "did you
    /// mean"); `absent` is the fault when no tool in the caller's view has the name.
    UnknownTool {
        /// What to tell the caller.
        message: String,
        /// `NoSuchTool` when the name is in no tool of the view.
        absent: Option<sandgate_sandbox::Fault>,
    },
}

/// Picks the route for `code`.
pub fn route(sent: &str, catalog: &Catalog, bindings: &[ToolBinding]) -> Route {
    // Every tier reads the code the model meant: a markdown fence and the prose around it
    // are dropped here as in the sandbox.
    let model = sandgate_sandbox::normalize::model_code(sent);
    let code: &str = &model.code;
    if code.trim_start().starts_with('{')
        && let Ok(Value::Object(call)) = serde_json::from_str::<Value>(code)
    {
        return json_call(call, catalog, bindings);
    }
    match single_call::recognise(code) {
        Some(Shortcut::Call(call)) => {
            match single_call::resolve(bindings, &call.backend, &call.tool) {
                Some(index) => Route::Call {
                    tier: Tier::SingleCall,
                    index,
                    arguments: call.arguments,
                    raw: call.raw,
                },
                None => Route::Sandbox,
            }
        }
        Some(Shortcut::ToolInterface(name)) => {
            match single_call::tool_interface(bindings, &name)
                .and_then(|found| bindings.iter().position(|b| std::ptr::eq(b, found)))
            {
                Some(index) => Route::Interface { index },
                None => Route::Sandbox,
            }
        }
        Some(Shortcut::InterfaceOf { backend, tool }) => {
            match single_call::resolve_interface(bindings, &backend, &tool) {
                Some(index) => Route::Interface { index },
                None => Route::Sandbox,
            }
        }
        None => Route::Sandbox,
    }
}

const JSON_SHAPE: &str = r#"JSON input is a single call: {"tool": "backend.tool", "arguments": {...}}. For anything more, send TypeScript"#;

fn json_call(mut call: Map<String, Value>, catalog: &Catalog, bindings: &[ToolBinding]) -> Route {
    if let Some(unknown) = call.keys().find(|k| *k != "tool" && *k != "arguments") {
        return Route::BadJson(format!("unknown key {unknown:?}. {JSON_SHAPE}"));
    }
    let Some(Value::String(name)) = call.remove("tool") else {
        return Route::BadJson(format!("\"tool\" is missing or not a string. {JSON_SHAPE}"));
    };
    let arguments = match call.remove("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => {
            return Route::BadJson(format!(
                "\"arguments\" must be an object of named arguments. {JSON_SHAPE}"
            ));
        }
    };
    let entry = match catalog.resolve(&name) {
        Ok(entry) => entry,
        Err(e) => {
            let absent = matches!(e, sandgate_catalog::CatalogError::NotFound { .. })
                .then(|| sandgate_sandbox::Fault::NoSuchTool { name: name.clone() });
            return Route::UnknownTool {
                message: e.to_string(),
                absent,
            };
        }
    };
    let Some(index) = bindings
        .iter()
        .position(|b| b.backend == entry.spec.backend && b.name == entry.spec.name)
    else {
        return Route::UnknownTool {
            message: format!("{name} is not available right now; retry in a moment"),
            absent: None,
        };
    };
    let Value::Object(arguments) = js_json(Value::Object(arguments)) else {
        return Route::BadJson(JSON_SHAPE.into());
    };
    Route::Call {
        tier: Tier::Json,
        index,
        arguments,
        raw: false,
    }
}
