//! A digest of what a tool definition means, for pinning it. Two listings of one tool give the
//! same digest when they differ only in what means nothing: the order of object keys, the order
//! of a schema's `required` names, `_meta`, icons and the server's version (the last three are
//! not part of the [`Definition`] at all). Anything else (a word of the description, a schema's
//! type, an annotation) gives another digest.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The parts of a tool definition a pin covers, as the backend sent them (serialized with MCP's
/// names: `inputSchema`, `outputSchema`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Definition {
    /// The tool's name.
    pub name: String,
    /// Its title, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its description, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    #[serde(default)]
    pub input_schema: Value,
    /// The JSON Schema of its structured result, if declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Its annotations (`readOnlyHint`, …), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

impl Definition {
    /// `sha256:` and the hex SHA-256 of the definition's canonical JSON.
    pub fn digest(&self) -> String {
        let mut text = String::with_capacity(256);
        text.push_str("{\"name\":");
        canonical(&Value::String(self.name.clone()), &mut text, None);
        for (key, value) in [
            (
                "title",
                self.title.as_ref().map(|t| Value::String(t.clone())),
            ),
            (
                "description",
                self.description.as_ref().map(|d| Value::String(d.clone())),
            ),
            ("inputSchema", Some(self.input_schema.clone())),
            ("outputSchema", self.output_schema.clone()),
            ("annotations", self.annotations.clone()),
        ] {
            if let Some(value) = value.filter(|v| !v.is_null()) {
                text.push_str(",\"");
                text.push_str(key);
                text.push_str("\":");
                canonical(&value, &mut text, None);
            }
        }
        text.push('}');
        let hash = Sha256::digest(text.as_bytes());
        let mut out = String::with_capacity(7 + 64);
        out.push_str("sha256:");
        for byte in hash.iter() {
            out.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
            out.push(char::from_digit(u32::from(byte & 15), 16).unwrap_or('0'));
        }
        out
    }
}

/// `value` as JSON with every object's keys sorted, `_meta` dropped, and a `required` list's
/// names sorted (a set in JSON Schema). `parent_key` is the key `value` stands under.
fn canonical(value: &Value, out: &mut String, parent_key: Option<&str>) {
    match value {
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().filter(|k| k.as_str() != "_meta").collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(inner) = fields.get(key) {
                    canonical(inner, out, Some(key));
                }
            }
            out.push('}');
        }
        Value::Array(items)
            if parent_key == Some("required") && items.iter().all(Value::is_string) =>
        {
            let mut names: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            names.sort_unstable();
            out.push('[');
            for (i, name) in names.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(name.to_string()).to_string());
            }
            out.push(']');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out, None);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn definition(schema: Value) -> Definition {
        Definition {
            name: "get_sum".into(),
            title: None,
            description: Some("Adds two numbers".into()),
            input_schema: schema,
            output_schema: None,
            annotations: Some(json!({"readOnlyHint": true})),
        }
    }

    #[test]
    fn what_means_nothing_changes_nothing() {
        let one = definition(
            json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
        );
        let other = definition(
            json!({"required": ["b", "a"], "_meta": {"x": 1}, "properties": {"b": {"type": "number"}, "a": {"type": "number"}}, "type": "object"}),
        );
        assert_eq!(one.digest(), other.digest());
        assert!(one.digest().starts_with("sha256:") && one.digest().len() == 71);
    }

    #[test]
    fn what_means_something_changes_the_digest() {
        let base = definition(json!({"type": "object", "properties": {"a": {"type": "number"}}}));
        let mut changes = Vec::new();
        let mut d = base.clone();
        d.description = Some("Adds two numbers.".into());
        changes.push(d);
        let mut d = base.clone();
        d.input_schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        changes.push(d);
        let mut d = base.clone();
        d.annotations = Some(json!({"readOnlyHint": false}));
        changes.push(d);
        let mut d = base.clone();
        d.title = Some("Sum".into());
        changes.push(d);
        let mut d = base.clone();
        d.output_schema = Some(json!({"type": "object"}));
        changes.push(d);
        let mut d = base.clone();
        d.name = "get_sum2".into();
        changes.push(d);
        let mut d = base.clone();
        d.description = Some("Adds two numbers\u{200B}".into());
        changes.push(d);
        for changed in changes {
            assert_ne!(base.digest(), changed.digest(), "{changed:?}");
        }
    }
}
