//! A script that returned nothing because it read a property its tool's result does not have:
//! `const r = await user.summarize({...}); return r.items;` where the stored tool answers
//! `{ ok, data }`, or `return t.assignee.name` where the learned type of `t.assignee` has
//! `login` and `team`. The note names the property and the keys that level of the result has,
//! from the tool's declared output type or, for a tool that declares none, the type learned
//! from its results (issue 47, item 7), so the fix is one read away.

use sandgate_catalog::{Catalog, Entry, Observed};
use serde_json::Value;

/// A tool's result type, and where it comes from in words: its declared output schema, else
/// the type learned from its results; `None` when it has neither.
pub(super) fn result_type(
    entry: &Entry,
    observed: &dyn Fn(&Entry) -> Option<Observed>,
) -> Option<(Value, String)> {
    match &entry.spec.output_schema {
        Some(schema) => Some((schema.clone(), "its declared output type".to_string())),
        None => observed(entry).map(|seen| {
            let source = format!("its type learned from {} call(s)", seen.calls);
            (seen.schema, source)
        }),
    }
}

/// The note for `code` when its last `return` reads `variable.a.b…` of a tool's result whose
/// declared or learned type has no such key at some level; `None` when that is not what
/// happened. `observed` gives a tool's learned type.
pub(super) fn note(
    code: &str,
    catalog: &Catalog,
    observed: &dyn Fn(&Entry) -> Option<Observed>,
) -> Option<String> {
    let (variable, path) = returned_member(code)?;
    let tool = assigned_call(code, variable)?;
    let entry = catalog.resolve(tool).ok()?;
    let (schema, source) = result_type(entry, observed)?;
    let schema = &schema;
    // Down the path while each key is declared; the first that is not is the one to name.
    let mut level = schema;
    let mut walked = variable.to_string();
    for (depth, property) in path.iter().enumerate() {
        let properties = level.get("properties").and_then(Value::as_object)?;
        let keys: Vec<&str> = properties.keys().map(String::as_str).collect();
        if let Some(next) = properties.get(*property) {
            level = next;
            walked = format!("{walked}.{property}");
            continue;
        }
        if keys.is_empty() {
            return None;
        }
        let nested = (depth + 1 == path.len())
            .then(|| {
                keys.iter().find(|key| {
                    properties[**key]
                        .get("properties")
                        .and_then(Value::as_object)
                        .is_some_and(|inner| inner.contains_key(*property))
                })
            })
            .flatten()
            .map(|key| format!(" It is under `{key}`: write `{walked}.{key}.{property}`."))
            .unwrap_or_default();
        let holder = if depth == 0 {
            format!("the result of `{}`", entry.js_qualified())
        } else {
            format!("`{walked}` (in the result of `{}`)", entry.js_qualified())
        };
        return Some(format!(
            "`{walked}.{property}` is undefined: {holder} has the keys {} ({source}), and no `{property}`.{nested}",
            keys.iter()
                .take(24)
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    None
}

/// `("t", ["assignee", "name"])` for a script whose last `return` is `return t.assignee.name;`.
fn returned_member(code: &str) -> Option<(&str, Vec<&str>)> {
    let at = code.rfind("return ")?;
    let expression = code[at + "return ".len()..]
        .split([';', '\n'])
        .next()?
        .trim();
    let mut parts = expression.split('.');
    let variable = parts.next()?;
    let path: Vec<&str> = parts.collect();
    (is_identifier(variable)
        && !path.is_empty()
        && path.len() <= 8
        && path.iter().all(|p| is_identifier(p)))
    .then_some((variable, path))
}

/// `"user.summarize"` for `const r = await user.summarize(...)` (also `mcp.` and `tools.`).
fn assigned_call<'c>(code: &'c str, variable: &str) -> Option<&'c str> {
    let mut from = 0;
    while let Some(found) = code[from..].find(variable) {
        let start = from + found;
        from = start + variable.len();
        let before = code[..start].trim_end();
        if !(before.ends_with("const") || before.ends_with("let") || before.ends_with("var")) {
            continue;
        }
        let rest = code[from..].trim_start().strip_prefix('=')?.trim_start();
        let rest = rest.strip_prefix("await")?.trim_start();
        let rest = rest
            .strip_prefix("mcp.")
            .or_else(|| rest.strip_prefix("tools."))
            .unwrap_or(rest);
        let end = rest.find('(')?;
        let call = rest[..end].trim();
        return (call.split('.').count() == 2 && call.split('.').all(is_identifier))
            .then_some(call);
    }
    None
}

/// A name code can write after a dot: one the catalog's sanitizing leaves as it is.
fn is_identifier(text: &str) -> bool {
    !text.is_empty() && sandgate_catalog::sanitize_ident(text) == text
}

#[cfg(test)]
mod tests {
    use sandgate_catalog::{Catalog, Entry, Observed, ToolSpec};
    use serde_json::json;

    use super::note;

    fn catalog() -> Catalog {
        let declared: ToolSpec = serde_json::from_value(json!({
            "backend": "user", "name": "summarize",
            "input_schema": {"type": "object"},
            "output_schema": {"type": "object", "properties": {"ok": {"const": true}, "data": {"type": "object", "properties": {"items": {"type": "array"}}}}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let learned: ToolSpec = serde_json::from_value(json!({
            "backend": "desk", "name": "get_ticket", "input_schema": {"type": "object"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        Catalog::new(vec![declared, learned])
    }

    fn none(_: &Entry) -> Option<Observed> {
        None
    }

    fn learned(entry: &Entry) -> Option<Observed> {
        (entry.spec.name == "get_ticket").then(|| Observed {
            schema: json!({"type": "object", "properties": {
                "id": {"type": "string"}, "status": {"type": "string"},
                "assignee": {"type": "object", "properties": {"login": {"type": "string"}, "team": {"type": "string"}}}}}),
            calls: 12,
            since: "2026-11-28".into(),
        })
    }

    #[test]
    fn a_property_the_result_does_not_have_is_named_with_the_keys_it_has() {
        let code = "const r = await user.summarize({ text: \"x\" });\nreturn r.items;";
        let found = note(code, &catalog(), &none).unwrap_or_default();
        assert!(
            found.contains("`r.items` is undefined")
                && found.contains("`ok`, `data`")
                && found.contains("write `r.data.items`"),
            "{found}"
        );
        assert_eq!(
            note(
                "const r = await user.summarize({});\nreturn r.data;",
                &catalog(),
                &none
            ),
            None
        );
        assert_eq!(
            note("const r = 1;\nreturn r.items;", &catalog(), &none),
            None
        );
    }

    #[test]
    fn a_learned_type_names_the_keys_at_the_level_that_lacks_one() {
        let state = "const t = await desk.get_ticket({ id: \"T-1\" });\nreturn t.state;";
        let found = note(state, &catalog(), &learned).unwrap_or_default();
        assert!(
            found.contains("`t.state` is undefined")
                && found.contains("`id`, `status`, `assignee`")
                && found.contains("learned from 12 call(s)"),
            "{found}"
        );
        let name = "const t = await desk.get_ticket({ id: \"T-1\" });\nreturn t.assignee.name;";
        let found = note(name, &catalog(), &learned).unwrap_or_default();
        assert!(
            found.contains("`t.assignee.name` is undefined: `t.assignee`")
                && found.contains("`login`, `team`"),
            "{found}"
        );
        // Without a learned type there is nothing certain to say.
        assert_eq!(note(state, &catalog(), &none), None);
    }
}
