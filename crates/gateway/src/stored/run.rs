//! Calling a stored tool. The input is validated against `meta.input` first (every violation
//! listed with its JSON path, and the sandbox never entered); then the tool's module runs in
//! the sandbox in tool mode with the access it declares; its result is normalised and checked
//! against `meta.output`. Stored tools may call stored tools they declare, to a depth of
//! [`MAX_DEPTH`], never in a cycle.

use std::sync::Arc;

use futures::future::BoxFuture;
use sandgate_sandbox::{CallFailure, Execution, FailureKind, RunMode, ToolAnswer};
use sandgate_upstream::Backends;
use serde_json::{Map, Value, json};

use super::loaded::{Loaded, MAX_DEPTH};
use crate::bridge::ExecutionBridge;
use crate::catalogs::Catalogs;
use crate::door::{Door, Knock, RunStored, granted};
use crate::profiles::Profiles;
use crate::runtime::ChainRuntime;

/// What runs stored tools for the door: the stored tools (in the catalogs), their owners'
/// profiles, the sandbox, and the backends' limits. The gateway hands it to the door once.
#[derive(Debug)]
pub(crate) struct StoredRuns {
    pub(crate) catalogs: Arc<Catalogs>,
    pub(crate) profiles: Arc<Profiles>,
    pub(crate) runtime: ChainRuntime,
    pub(crate) backends: Arc<dyn Backends>,
}

impl RunStored for StoredRuns {
    fn run_stored<'a>(
        &'a self,
        door: &'a Arc<Door>,
        knock: &'a Knock,
        name: &'a str,
        arguments: Map<String, Value>,
    ) -> BoxFuture<'a, Result<ToolAnswer, CallFailure>> {
        Box::pin(async move {
            let prepared = prepare(self, knock, name, arguments).await?;
            let bridge = ExecutionBridge::new(door.clone(), prepared.catalog, prepared.knock, None);
            let result = self
                .runtime
                .sandbox
                .run(prepared.execution, Arc::new(bridge))
                .await;
            Ok(answer(&prepared.tool, result))
        })
    }
}

/// A stored tool's run, ready for the sandbox: run `execution` with `knock` over `catalog`,
/// and read the result with [`answer`].
struct Prepared {
    /// The tool.
    pub tool: Arc<Loaded>,
    /// Its code, input and the access it declares, as one execution.
    pub execution: Execution,
    /// Who knocks for the calls it makes: the owner's grant cut to what the tool declares.
    pub knock: Knock,
    /// The view its tools were bound from.
    pub catalog: Arc<sandgate_catalog::Catalog>,
}

/// Checks a call of stored tool `name` for `knock` with `arguments` (the cycle and depth guard,
/// the input against `meta.input`) and makes its execution.
async fn prepare(
    runs: &StoredRuns,
    knock: &Knock,
    name: &str,
    arguments: Map<String, Value>,
) -> Result<Prepared, CallFailure> {
    let failed = |message: String| CallFailure::new(FailureKind::Failed, message);
    let Some(tool) = runs.catalogs.stored_tools().get(name).cloned() else {
        return Err(failed(format!(
            "no stored tool named `{name}`; `sandgate tools stored` lists them"
        )));
    };
    if knock.within.iter().any(|n| n == name) {
        let chain: Vec<&str> = knock
            .within
            .iter()
            .map(String::as_str)
            .chain([name])
            .collect();
        return Err(failed(format!(
            "a cycle of stored tools: user.{}. A stored tool may not call itself, directly or through others",
            chain.join(" → user.")
        )));
    }
    if knock.within.len() >= MAX_DEPTH {
        return Err(failed(format!(
            "stored tools nest {MAX_DEPTH} deep here (user.{} → user.{name}), the limit",
            knock.within.join(" → user.")
        )));
    }
    let input = Value::Object(arguments);
    let violations = violations(&tool.input, &input);
    if !violations.is_empty() {
        return Err(failed(format!(
            "user.{name}: the input does not match meta.input: {}",
            violations.join("; ")
        )));
    }
    let runtime = &runs.runtime;
    let owner = sandgate_policy::Access::new(
        runs.profiles
            .get(super::profile_of_owner(&tool.stored.owner)),
    );
    // Wait for the cold backends the tool declares (a call that arrives first thing, as a
    // plain MCP tool, would otherwise find them absent).
    let declared = &tool.meta.capabilities.tools;
    let full = runs
        .catalogs
        .settled_full_view_for(|backend| {
            declared.iter().any(|t| {
                t.split('.')
                    .next()
                    .is_some_and(|b| b == backend || sandgate_catalog::sanitize_ident(backend) == b)
            })
        })
        .await;
    let access = super::register::tool_access(name, &tool.meta, &owner, &full.catalog);
    // The caller's own approvals hold inside the tool as well as its owner's.
    let access = with_approvals_of(access, knock.caller.access.profile());
    let view = runs.catalogs.view_of(&access, &full);
    let mut inner = Knock::new(
        knock.caller.acting_under(access.clone()),
        knock.execution_id.clone(),
    );
    inner.within = knock
        .within
        .iter()
        .cloned()
        .chain([name.to_string()])
        .collect();
    let profile_limits = owner.profile().limits;
    let limits = runtime.execution_limits(
        &sandgate_sandbox::LimitRequest {
            wall_ms: profile_limits.timeout_ms,
            max_tool_calls: profile_limits.max_calls,
            ..Default::default()
        },
        runs.backends.as_ref(),
    );
    let execution = Execution {
        code: tool.stored.code.clone(),
        tools: view.bindings,
        host_functions: Arc::new(granted(&access)),
        env: Default::default(),
        context: Some(json!({
            "input": input,
            "caller": {"profile": knock.caller.profile(), "execution_id": knock.execution_id},
        })),
        limits,
        mode: RunMode::Tool,
        engine: Default::default(),
    };
    Ok(Prepared {
        tool,
        execution,
        knock: inner,
        catalog: view.catalog,
    })
}

/// The MCP result of a run: `{ok: true, data}`, or an error result with the message and line.
pub(crate) fn answer(tool: &Loaded, result: sandgate_sandbox::ExecutionResult) -> ToolAnswer {
    let name = &tool.stored.name;
    let error = |text: String| ToolAnswer {
        json: json!({"content": [{"type": "text", "text": text}], "isError": true}).to_string(),
        is_error: true,
    };
    if let Some(e) = result.error {
        let at = e.line.map(|l| format!(" at line {l}")).unwrap_or_default();
        return error(format!(
            "user.{name} v{} failed{at}: {}",
            tool.stored.version, e.message
        ));
    }
    let value = result.value.unwrap_or(Value::Null);
    if value.get("ok") == Some(&Value::Bool(false)) {
        let errors = value.get("errors").cloned().unwrap_or(Value::Null);
        return error(format!(
            "user.{name} v{} answered ok: false: {errors}",
            tool.stored.version
        ));
    }
    if let Some(output) = &tool.output {
        let violations = violations(output, &value);
        if !violations.is_empty() {
            return error(format!(
                "user.{name} v{} returned a result that does not match meta.output: {}",
                tool.stored.version,
                violations.join("; ")
            ));
        }
    }
    let text = match &value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    ToolAnswer {
        json: json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"ok": true, "data": value},
        })
        .to_string(),
        is_error: false,
    }
}

/// Every way `value` fails `schema`, each with its JSON path (`$` for the whole), at most 20.
fn violations(schema: &jsonschema::Validator, value: &Value) -> Vec<String> {
    schema
        .iter_errors(value)
        .take(20)
        .map(|e| {
            let path = e.instance_path().to_string();
            let path = if path.is_empty() {
                "$".to_string()
            } else {
                format!("${}", path.replace('/', "."))
            };
            format!("at {path}: {e}")
        })
        .collect()
}

/// `access` with `caller`'s `approve` patterns added to its own: a stored tool is no way around
/// its caller's approvals.
fn with_approvals_of(
    access: sandgate_policy::Access,
    caller: &sandgate_policy::Profile,
) -> sandgate_policy::Access {
    if caller.approve.is_empty() {
        return access;
    }
    let mut profile = (**access.profile()).clone();
    profile.approve.extend(caller.approve.iter().cloned());
    sandgate_policy::Access::new(Arc::new(profile))
}
