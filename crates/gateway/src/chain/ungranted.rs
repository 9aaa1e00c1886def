//! Code that reached for a tool outside its grant.
//!
//! A caller's view holds only the tools its access may reach, so in the sandbox a tool outside
//! the grant is simply absent: `memory.create_entities` is not a function, `__interfaces` has
//! no entry for it, a JSON call names no tool. The answer is exactly the one a tool that does
//! not exist gets, so errors do not tell a profile which hidden tools exist; both get the same
//! note naming the grant. The operator still learns of it: when the code names a tool that
//! exists outside the grant, the decision goes to the audit log through the door, as a denial.
//! A host capability the profile does not grant (`fetch`, `fs`, `env`) is not hidden (every
//! gateway has them), so its absence is reported as the denial it is.

use sandgate_catalog::Catalog;
use sandgate_policy::Capability;
use sandgate_sandbox::{ErrorKind, ExecError, Fault};

use crate::audit::Subject;
use crate::caller::Caller;
use crate::door::Knock;
use crate::gateway::Gateway;
use crate::views::{call_of, name_of};

/// What code that reached for a held tool is told to do.
const HELD_HINT: &str = "Retrying will not help until an operator decides; use another tool, or tell the user which tool is held.";

/// Most hidden tools audited for one execution (its code may name many).
const MAX_AUDITED: usize = 1;

/// Explains a failure that came from reaching for something absent: a capability outside the
/// grant is reported as that denial; a tool outside it is audited, and answered like a tool
/// that does not exist.
pub(crate) fn explain(
    gateway: &Gateway,
    knock: &Knock,
    full: &Catalog,
    code: &str,
    error: &mut ExecError,
) {
    let access = &knock.caller.access;
    if !reached_for_something_absent(error) {
        return;
    }
    // A tool held as new is absent from the sandbox too; code that names it is told it is held.
    if let Some(held) = crate::pins::held_in_code(gateway.backends().as_ref(), access, code) {
        error.kind = ErrorKind::ToolHeld;
        error.message = held;
        error.hint = Some(HELD_HINT.into());
        return;
    }
    if let Some(global) = error.fault.as_ref().and_then(Fault::undefined_name)
        && let Some(capability) = Capability::of_global(global)
        && !access.grants(capability)
    {
        let refusal = access.refuse_absent(global, capability);
        let subject = match capability {
            Capability::Net => Subject::Net,
            Capability::Fs => Subject::Fs,
            Capability::Env => Subject::Env,
            Capability::State => Subject::State,
        };
        gateway
            .door()
            .record_line(knock, subject, global, false, refusal.reason(), None);
        // The hint already says what to do instead (a backend tool that fetches, ...).
        error.kind = ErrorKind::ToolDenied;
        error.message = refusal.to_string();
        return;
    }
    if access.sees_every_tool() {
        return;
    }
    audit_hidden(gateway, knock, full, code);
    let note = grant_note(&knock.caller);
    error.hint = Some(match error.hint.take() {
        Some(hint) => format!("{hint} {note}"),
        None => note,
    });
}

/// Writes a denial for a tool outside the grant that `code` names, if it names one.
fn audit_hidden(gateway: &Gateway, knock: &Knock, full: &Catalog, code: &str) {
    let access = &knock.caller.access;
    // A JSON call names its tool in any form a catalog resolves (`create_entities` alone).
    let json_tool = serde_json::from_str::<serde_json::Value>(code.trim())
        .ok()
        .and_then(|v| v.get("tool").and_then(|t| t.as_str()).map(str::to_string));
    if let Some(entry) = json_tool.and_then(|name| full.resolve(&name).ok()) {
        if !access.sees_tool(&name_of(entry)) {
            let _ = gateway.door().authorize_tool(knock, call_of(entry), "");
        }
        return;
    }
    let words: std::collections::HashSet<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$' || c == '-'))
        .filter(|w| !w.is_empty())
        .collect();
    let named = |original: &str, js: &str| words.contains(original) || words.contains(js);
    let hidden = full
        .entries()
        .iter()
        .filter(|e| {
            named(&e.spec.backend, &e.js_backend)
                && named(&e.spec.name, &e.js_tool)
                && !access.sees_tool(&name_of(e))
        })
        .take(MAX_AUDITED);
    for entry in hidden {
        let _ = gateway.door().authorize_tool(knock, call_of(entry), "");
    }
}

/// What a caller whose view is cut is told when code reaches for a tool it does not have: the
/// same whether the tool exists outside the grant or nowhere.
fn grant_note(caller: &Caller) -> String {
    let profile = caller.access.profile();
    format!(
        "Profile `{}` reaches only the tools {}.tools in {} allows{}; search_tools and tool_info show them.",
        profile.name,
        profile.key,
        profile.file,
        if caller.access.is_narrowed() {
            ", narrowed by allow_tools"
        } else {
            ""
        }
    )
}

/// A meta-tool's "no tool named" for a caller whose view is cut: the message also names the
/// grant, the same for a tool outside it as for one that does not exist (so the answer does
/// not tell which), and a tool that exists outside the grant is recorded as a denial.
pub(crate) fn outside_view(
    gateway: &Gateway,
    caller: &Caller,
    asked: &str,
    message: String,
) -> String {
    let access = &caller.access;
    if access.sees_every_tool() {
        return message;
    }
    if let Ok(entry) = gateway.catalog().resolve(asked)
        && !access.sees_tool(&name_of(entry))
    {
        let knock = Knock::new(caller.clone(), String::new());
        let _ = gateway.door().authorize_tool(&knock, call_of(entry), "");
    }
    format!("{message} {}", grant_note(caller))
}

/// Whether the failure is what code gets when it reaches for a tool, backend or global that
/// is not there (the engine's fault says so).
fn reached_for_something_absent(error: &ExecError) -> bool {
    error.kind == ErrorKind::Runtime
        && error
            .fault
            .as_ref()
            .is_some_and(Fault::reaches_for_something_absent)
}
