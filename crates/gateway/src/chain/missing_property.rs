//! A script that returned nothing because it read a property its tool's result does not have:
//! `const r = await user.summarize({...}); return r.items;` where the stored tool answers
//! `{ ok, data }`. The note names the property and the keys the result has, from the tool's
//! declared output type, so the fix (`r.data.items`) is one read away.

use sandgate_catalog::Catalog;
use serde_json::Value;

/// The note for `code` when its last `return` reads `variable.property` of a tool's result
/// whose declared type has no such key; `None` when that is not what happened.
pub(super) fn note(code: &str, catalog: &Catalog) -> Option<String> {
    let (variable, property) = returned_member(code)?;
    let tool = assigned_call(code, variable)?;
    let entry = catalog.resolve(tool).ok()?;
    let schema = entry.spec.output_schema.as_ref()?;
    let keys: Vec<&str> = schema
        .get("properties")
        .and_then(Value::as_object)?
        .keys()
        .map(String::as_str)
        .collect();
    if keys.is_empty() || keys.contains(&property) {
        return None;
    }
    let nested = keys
        .iter()
        .find(|key| {
            schema["properties"][**key]
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|inner| inner.contains_key(property))
        })
        .map(|key| format!(" It is under `{key}`: write `{variable}.{key}.{property}`."))
        .unwrap_or_default();
    Some(format!(
        "`{variable}.{property}` is undefined: the result of `{}` has the keys {} (its declared output type), and no `{property}`.{nested}",
        entry.js_qualified(),
        keys.iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// `("r", "items")` for a script whose last `return` is `return r.items;`.
fn returned_member(code: &str) -> Option<(&str, &str)> {
    let at = code.rfind("return ")?;
    let expression = code[at + "return ".len()..]
        .split([';', '\n'])
        .next()?
        .trim();
    let (variable, property) = expression.split_once('.')?;
    (is_identifier(variable) && is_identifier(property)).then_some((variable, property))
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
    use sandgate_catalog::{Catalog, ToolSpec};
    use serde_json::json;

    use super::note;

    fn catalog() -> Catalog {
        let spec: ToolSpec = serde_json::from_value(json!({
            "backend": "user", "name": "summarize",
            "input_schema": {"type": "object"},
            "output_schema": {"type": "object", "properties": {"ok": {"const": true}, "data": {"type": "object", "properties": {"items": {"type": "array"}}}}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        Catalog::new(vec![spec])
    }

    #[test]
    fn a_property_the_result_does_not_have_is_named_with_the_keys_it_has() {
        let code = "const r = await user.summarize({ text: \"x\" });\nreturn r.items;";
        let found = note(code, &catalog()).unwrap_or_default();
        assert!(
            found.contains("`r.items` is undefined")
                && found.contains("`ok`, `data`")
                && found.contains("write `r.data.items`"),
            "{found}"
        );
        assert_eq!(
            note(
                "const r = await user.summarize({});\nreturn r.data;",
                &catalog()
            ),
            None
        );
        assert_eq!(note("const r = 1;\nreturn r.items;", &catalog()), None);
    }
}
