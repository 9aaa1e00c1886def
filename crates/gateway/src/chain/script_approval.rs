//! A script a person approves before any of its code runs (`approve_scripts`, else
//! `[approvals] scripts`). The execution parks here, after its route is known and before
//! anything runs, on the same question a gated call asks (elicitation, an input-required
//! result, a task's `input_required`, the console by another principal). Under `writes`, a
//! script whose parsed tools all only read, and that reaches no tool another way, runs at
//! once, and the door refuses any call it makes to a tool that may write. A JSON call is one
//! call, not a script: the per-call `approve` rules decide it.

use sandgate_sandbox::named_tools::named_tools;
use sandgate_sandbox::{ErrorKind, ExecError, ToolBinding};

use super::outcome::Outcome;
use super::route::{Route, Tier};
use crate::approvals::{NamedTool, ScriptShown};
use crate::audit::{Decision, Subject};
use crate::door::{Knock, ScriptPass};
use crate::gateway::Gateway;
use sandgate_policy::ScriptApproval;

/// The script an execution would run: its code, and whether it is Python.
pub(super) struct Script<'a> {
    pub(super) code: &'a str,
    pub(super) python: bool,
}

/// Asks a person about `script` when a rule says to, and waits: `Ok` runs it (with what the
/// person said in `knock.script`); `Err` is the execution's answer, nothing having run.
pub(super) async fn approve_script(
    gateway: &Gateway,
    knock: &mut Knock,
    script: Script<'_>,
    route: &Route,
    catalog: &sandgate_catalog::Catalog,
    bindings: &[ToolBinding],
    max_code_bytes: usize,
) -> Result<(), Outcome> {
    let approvals = gateway.door().approvals();
    let profile = knock.caller.access.profile();
    let (mode, rule) = match profile.approve_scripts {
        Some(mode) => (
            mode,
            format!("{}.approve_scripts = \"{}\"", profile.key, mode.as_str()),
        ),
        None => {
            let mode = approvals.settings().scripts;
            (mode, format!("[approvals] scripts = \"{}\"", mode.as_str()))
        }
    };
    let is_script = match route {
        Route::Call { tier, .. } => *tier != Tier::Json,
        Route::Sandbox => true,
        Route::Interface { .. } | Route::BadJson(_) | Route::UnknownTool { .. } => false,
    };
    // Code past the size limit is refused by the sandbox before any of it runs.
    let Script { code, python } = script;
    if mode == ScriptApproval::Never || !is_script || code.len() > max_code_bytes {
        return Ok(());
    }
    let named = named_tools(code, python, bindings, max_code_bytes);
    let tools: Vec<NamedTool> = named
        .tools
        .iter()
        .filter_map(|&index| bindings.get(index))
        .filter_map(|b| catalog.entry(&sandgate_catalog::ToolRef::new(&b.backend, &b.name)))
        .map(|entry| NamedTool {
            tool: entry.qualified.clone(),
            why: why_it_asks(gateway, &knock.caller, entry),
        })
        .collect();
    if mode == ScriptApproval::Writes && !named.unsure && tools.iter().all(|t| t.why.is_none()) {
        knock.script = ScriptPass::ReadOnly { rule };
        return Ok(());
    }
    let language = if python { "python" } else { "typescript" };
    let shown = ScriptShown::new(code, language, tools, named.unsure, rule.clone());
    let names = shown.tool_names();
    audit(gateway, knock, false, &format!("asked: {rule}"), true);
    let answer = approvals
        .ask_script(&knock.asking, &knock.caller, &knock.execution_id, shown)
        .await;
    match answer {
        Ok(by) => {
            audit(
                gateway,
                knock,
                true,
                &format!("approved by {by}: {rule}"),
                false,
            );
            knock.script = ScriptPass::Approved {
                by,
                tools: names,
                rule,
            };
            Ok(())
        }
        Err(failure) => {
            audit(gateway, knock, false, &failure.message, false);
            Err(Outcome::failed(
                Tier::Sandbox,
                ExecError {
                    kind: ErrorKind::ApprovalDenied,
                    message: failure.message,
                    line: None,
                    column: None,
                    hint: Some("None of the script ran. Ask the person who approves scripts, or send what needs no approval: a script that names no tool that may write (where the rule is \"writes\"), or one JSON call.".into()),
                    fault: None,
                },
            ))
        }
    }
}

/// Why a script that names `entry` asks: the `approve` rule that gates it, or that it may
/// write; `None` when it only reads.
fn why_it_asks(
    gateway: &Gateway,
    caller: &crate::caller::Caller,
    entry: &sandgate_catalog::Entry,
) -> Option<String> {
    let call = crate::views::call_of(entry);
    let backend_rules = gateway.backends().approval_patterns(&entry.spec.backend);
    if let Some(rule) = caller.access.approval_rule(&call, &backend_rules) {
        return Some(format!("gated: {rule}"));
    }
    (!entry.spec.says_read_only()).then(|| "may write".to_string())
}

/// One audit line about the script: asked, approved, or not.
fn audit(gateway: &Gateway, knock: &Knock, allowed: bool, rule: &str, asked: bool) {
    gateway.door().audit().record(&Decision {
        profile: Some(knock.caller.profile()),
        token_id: knock.caller.name.as_deref(),
        execution_id: Some(knock.execution_id.as_str()),
        subject: Subject::Approval,
        target: "script",
        allowed,
        rule,
        arguments: None,
        asked,
    });
}
