//! Code that reached for a tool outside its grant.
//!
//! A caller's view holds only the tools its access may reach, so in the sandbox a tool outside
//! the grant is simply absent: `memory.create_entities` is not a function, `__interfaces` has
//! no entry for it, a JSON call names no tool. When an execution fails that way and its code
//! names a tool that exists but is outside the grant, the failure is reported as what it is: a
//! denial by the policy, with the rule and where to change it, and the decision goes to the
//! audit log through the door like any other call.

use sandgate_catalog::{Catalog, sanitize_ident};
use sandgate_policy::{Capability, ToolCall};
use sandgate_sandbox::{ErrorKind, ExecError};

use crate::audit::Subject;
use crate::door::Knock;
use crate::{Caller, Gateway};

/// Most denials reported for one execution (its code may name many hidden tools).
const MAX_REPORTED: usize = 1;

/// Turns a failure that came from reaching for a tool outside the grant into that denial.
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
    if let Some(global) = undefined_name(&error.message)
        && let Some(capability) = Capability::of_global(global)
        && !access.grants(capability)
    {
        let refusal = access.refuse_absent(global, capability);
        let subject = match capability {
            Capability::Net => Subject::Net,
            Capability::Fs => Subject::Fs,
            Capability::Env => Subject::Env,
        };
        gateway.record_line(knock, subject, global, false, refusal.reason(), None);
        // The hint already says what to do instead (a backend tool that fetches, ...).
        error.kind = ErrorKind::ToolDenied;
        error.message = refusal.to_string();
        return;
    }
    if access.sees_every_tool() {
        return;
    }
    // A JSON call names its tool in any form a catalog resolves (`create_entities` alone).
    let json_tool = serde_json::from_str::<serde_json::Value>(code.trim())
        .ok()
        .and_then(|v| v.get("tool").and_then(|t| t.as_str()).map(str::to_string));
    if let Some(entry) = json_tool.and_then(|name| full.resolve(&name).ok())
        && !access.sees_tool(&format!("{}.{}", entry.spec.backend, entry.spec.name))
    {
        let call = ToolCall::new(entry.spec.backend.clone(), entry.spec.name.clone());
        if let Err(denied) = gateway.authorize_tool(knock, call, "") {
            error.kind = ErrorKind::ToolDenied;
            error.message = denied.message;
            error.hint = None;
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
                && !access.sees_tool(&format!("{}.{}", e.spec.backend, e.spec.name))
        })
        .take(MAX_REPORTED);
    for entry in hidden {
        let call = ToolCall::new(entry.spec.backend.clone(), entry.spec.name.clone());
        if let Err(denied) = gateway.authorize_tool(knock, call, "") {
            error.kind = ErrorKind::ToolDenied;
            error.message = denied.message;
            error.hint = Some(format!(
                "Tools outside your grant are not in this execution at all (so `{}` was not there to call). search_tools and tool_info show the tools you can reach.",
                sanitize_ident(&entry.spec.backend) + "." + &entry.js_tool
            ));
        }
    }
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
        && !access.sees_tool(&format!("{}.{}", entry.spec.backend, entry.spec.name))
    {
        let knock = Knock::new(caller.clone(), String::new());
        let call = ToolCall::new(entry.spec.backend.clone(), entry.spec.name.clone());
        let _ = gateway.authorize_tool(&knock, call, "");
    }
    let profile = access.profile();
    format!(
        "{message} Profile `{}` reaches only the tools {}.tools in {} allows{}.",
        profile.name,
        profile.key,
        profile.file,
        if access.is_narrowed() {
            ", narrowed by allow_tools"
        } else {
            ""
        }
    )
}

/// `x` of "ReferenceError: x is not defined".
fn undefined_name(message: &str) -> Option<&str> {
    let message = message.strip_prefix("ReferenceError: ").unwrap_or(message);
    message
        .strip_suffix(" is not defined")
        .map(|m| m.trim_matches('`'))
}

/// Whether the failure is what code gets when it reaches for a tool that is not there.
fn reached_for_something_absent(error: &ExecError) -> bool {
    if error.kind != ErrorKind::Runtime {
        return false;
    }
    let message = &error.message;
    message.ends_with("is not a function")
        || message.ends_with("is not defined")
        || message.contains("cannot read property")
        || message.contains("no tool named")
        || message.contains("no tool is named")
        || message.contains("is not a tool")
}
