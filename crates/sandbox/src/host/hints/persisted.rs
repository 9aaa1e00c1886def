//! Code that expects something to outlive its execution: a `globalThis` cache or a
//! module-level variable an earlier run filled, or a `Date` stored with `state.set` and read
//! back. Each execution starts fresh, and `state` keeps JSON; models write such code from
//! habits of long-lived processes and browsers (issue 47, item 6). The hint says what happened
//! and what to write instead.

use super::{HintContext, expressions, has_state, undefined_holder};
use crate::wire::protocol::{Fault, GuestError};

/// Methods of `Date` that a value read back from `state` (an ISO string) lacks.
const DATE_METHODS: &[&str] = &[
    "getTime",
    "toISOString",
    "getFullYear",
    "getMonth",
    "getDate",
    "getDay",
    "getHours",
    "getMinutes",
    "toLocaleDateString",
    "toLocaleString",
    "valueOf",
];

/// The hint for `error` (a property read from nothing, or something that is not a function)
/// when the code expected a value from an earlier execution; `None` otherwise.
pub(super) fn hint(error: &GuestError, cx: &HintContext, at: Option<(u32, u32)>) -> Option<String> {
    let keep = if has_state(cx) {
        "Keep values between executions with `await state.set(key, value, { ttl: seconds })` and read them with `await state.get(key)` in a later one."
    } else {
        "This caller's profile keeps no state between executions (`state = false`): pass what the next execution needs through your reply."
    };
    if let Some((holder, _, _)) = undefined_holder(error, cx, at) {
        let root = holder.split(['.', '[', '?']).next().unwrap_or(holder);
        if ["globalThis", "window", "self", "global"].contains(&root) && holder != root {
            return Some(format!(
                "`{holder}` is undefined: each execution starts with fresh globals, so nothing an earlier one put on `{root}` is there. {keep}"
            ));
        }
        if declared_without_value(cx.source, root) {
            return Some(format!(
                "`{root}` is declared here without a value, and each execution runs the code afresh: a module-level variable keeps nothing from an earlier execution. {keep}"
            ));
        }
    }
    if error.fault == Some(Fault::NotAFunction)
        && let Some((line, column)) = at
        && let Some(callee) = expressions::callee_at(cx.source, line, column)
        && let Some((variable, method)) = callee.rsplit_once('.')
        && DATE_METHODS.contains(&method)
        && read_from_state(cx.source, variable)
    {
        return Some(format!(
            "`{variable}` came from `state.get`, which gives back JSON: a `Date` stored with `state.set` comes back as its ISO text, which has no `{method}`. Write `new Date({variable}).{method}()`."
        ));
    }
    None
}

/// Whether `name` is declared with `let` or `var` and no value (`let cache;`).
fn declared_without_value(source: &str, name: &str) -> bool {
    source.lines().any(|line| {
        let line = line.trim();
        ["let ", "var "].iter().any(|keyword| {
            line.strip_prefix(keyword)
                .and_then(|rest| rest.trim_end().strip_suffix(';').or(Some(rest.trim_end())))
                .is_some_and(|declared| declared.trim() == name)
        })
    })
}

/// Whether `variable` is assigned from `state.get(...)` somewhere in `source`.
fn read_from_state(source: &str, variable: &str) -> bool {
    source.match_indices(variable).any(|(at, _)| {
        let rest = source[at + variable.len()..].trim_start();
        rest.strip_prefix('=').is_some_and(|value| {
            let value = value.trim_start();
            let value = value.strip_prefix("await").map_or(value, str::trim_start);
            value.starts_with("state.get(")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::{declared_without_value, read_from_state};

    #[test]
    fn finds_bare_declarations_and_reads_from_state() {
        assert!(declared_without_value("let cache;\nreturn cache.items;", "cache"));
        assert!(declared_without_value("var seen\n", "seen"));
        assert!(!declared_without_value("let cache = {};", "cache"));
        assert!(read_from_state("const last = await state.get('last');", "last"));
        assert!(!read_from_state("const last = await fs.readFile('x');", "last"));
    }
}
