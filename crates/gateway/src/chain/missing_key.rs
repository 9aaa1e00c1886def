//! A Python script that read a key its tool's result does not have: `r = await
//! user.summarize(...)` then `r["items"]`, where the tool answers `{ok, data}`. The hint names
//! the keys that result has, from the tool's declared output type or the type learned from its
//! results, as the TypeScript note does (`missing_property`) for a property read that gave
//! nothing.

use sandgate_catalog::{Catalog, Entry, Observed};
use serde_json::Value;

/// The hint for a `KeyError` on `key` in `code`, when a variable assigned from one tool call is
/// read with that key and the tool's declared or learned type has no such key at its top level.
pub(super) fn hint(
    code: &str,
    key: &str,
    catalog: &Catalog,
    observed: &dyn Fn(&Entry) -> Option<Observed>,
) -> Option<String> {
    let variable = reader_of(code, key)?;
    let tool = assigned_call(code, variable)?;
    let entry = catalog.resolve(tool).ok()?;
    let (schema, source) = super::missing_property::result_type(entry, observed)?;
    let properties = schema.get("properties").and_then(Value::as_object)?;
    if properties.is_empty() || properties.contains_key(key) {
        return None;
    }
    let keys: Vec<String> = properties
        .keys()
        .take(20)
        .map(|k| format!("\"{k}\""))
        .collect();
    Some(format!(
        "`{variable}` holds what {} returned, and {source} has no \"{key}\": its keys are {}.",
        entry.qualified,
        keys.join(", ")
    ))
}

/// The variable read with `key` (`name["key"]`, `name['key']` or `name.get("key")`).
fn reader_of<'c>(code: &'c str, key: &str) -> Option<&'c str> {
    for pattern in [
        format!("[\"{key}\"]"),
        format!("['{key}']"),
        format!(".get(\"{key}\""),
        format!(".get('{key}'"),
    ] {
        for (at, _) in code.match_indices(&pattern) {
            let before = &code[..at];
            let start = before
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = &before[start..];
            if is_identifier(name) {
                return Some(name);
            }
        }
    }
    None
}

/// The tool `variable` was last assigned the result of: `variable = await backend.tool(`.
fn assigned_call<'c>(code: &'c str, variable: &str) -> Option<&'c str> {
    code.lines().rev().find_map(|line| {
        let rest = line.trim_start().strip_prefix(variable)?;
        let rest = rest.trim_start().strip_prefix('=')?;
        let call = rest.trim_start().strip_prefix("await")?.trim_start();
        let end = call.find('(')?;
        let callee = &call[..end];
        callee.contains('.').then_some(callee.trim())
    })
}

fn is_identifier(text: &str) -> bool {
    !text.is_empty()
        && !text.starts_with(|c: char| c.is_ascii_digit())
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_and_its_call_are_found() {
        let code = "import asyncio\nr = await user.summarize(text='x')\nprint(r['items'])";
        assert_eq!(reader_of(code, "items"), Some("r"));
        assert_eq!(assigned_call(code, "r"), Some("user.summarize"));
        assert_eq!(reader_of("x = d.get(\"k\", 1)", "k"), Some("d"));
        assert_eq!(reader_of("r[\"other\"]", "items"), None);
    }
}
