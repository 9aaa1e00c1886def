//! JSON summaries: a large JSON value becomes an outline a model can act on.
//!
//! The outline of last resort (see `fit` for what is tried first). A uniform array (objects
//! sharing their keys) is described by its length, its keys, the first few items in full, and
//! the identities of (at most 100 of) the rest (`id`, `name`, `title`, `slug`,
//! `key` or `label`, whichever the items have). Any other value becomes a key-path outline:
//! each path with its type and size. Both are valid JSON, so code can still parse them.

use serde_json::{Map, Value, json};

/// Fields that identify an item, in order of preference.
pub(crate) const IDENTITY_FIELDS: &[&str] = &["id", "name", "title", "slug", "key", "label"];
/// Deepest level the outline descends to.
const OUTLINE_DEPTH: usize = 4;
/// Strings up to this many characters appear whole in the outline.
const SHORT_STRING: usize = 80;
/// Characters of a longer string the outline shows.
const PREVIEW_CHARS: usize = 200;
/// Most entries the outline lists per object or array.
const OUTLINE_WIDTH: usize = 50;

/// A summary of `value` as pretty JSON text.
pub fn summarize_json(value: &Value, sample_items: usize) -> String {
    let summary = match value {
        Value::Array(items) if uniform_keys(items).is_some() => uniform_array(items, sample_items),
        _ => {
            json!({"summary": "JSON outline: each path with its type and size in bytes", "outline": outline(value, 0)})
        }
    };
    let mut out = String::new();
    write_pretty(&summary, 0, &mut out);
    out
}

/// Indented JSON like `serde_json::to_string_pretty`, except that arrays holding only
/// scalars stay on one line (a list of 500 ids is one line, not 500), and an array of flat
/// objects (rows) has one compact row per line.
pub(crate) fn write_pretty(value: &Value, indent: usize, out: &mut String) {
    let pad = |n: usize| "  ".repeat(n);
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push_str("{\n");
            for (i, (key, child)) in map.iter().enumerate() {
                out.push_str(&pad(indent + 1));
                out.push_str(&Value::String(key.clone()).to_string());
                out.push_str(": ");
                write_pretty(child, indent + 1, out);
                out.push_str(if i + 1 < map.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push('}');
        }
        Value::Array(items) if !items.is_empty() && items.iter().all(is_flat_object) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&pad(indent + 1));
                out.push_str(&item.to_string());
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push(']');
        }
        Value::Array(items) if items.iter().any(|v| v.is_object() || v.is_array()) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&pad(indent + 1));
                write_pretty(item, indent + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push(']');
        }
        Value::Array(items) => {
            let inline: Vec<String> = items.iter().map(Value::to_string).collect();
            out.push('[');
            out.push_str(&inline.join(", "));
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// An object whose values are scalars or lists of scalars: a row.
fn is_flat_object(value: &Value) -> bool {
    value.as_object().is_some_and(|map| {
        map.values().all(|v| match v {
            Value::Object(_) => false,
            Value::Array(items) => items.iter().all(|i| !i.is_object() && !i.is_array()),
            _ => true,
        })
    })
}

/// The shared key set of an array of objects, if every item is an object with the same keys.
pub(crate) fn uniform_keys(items: &[Value]) -> Option<Vec<String>> {
    let first = items.first()?.as_object()?;
    let keys: Vec<String> = first.keys().cloned().collect();
    items
        .iter()
        .all(|item| {
            item.as_object()
                .is_some_and(|o| o.len() == keys.len() && keys.iter().all(|k| o.contains_key(k)))
        })
        .then_some(keys)
}

fn uniform_array(items: &[Value], sample_items: usize) -> Value {
    let keys = uniform_keys(items).unwrap_or_default();
    let identity = IDENTITY_FIELDS
        .iter()
        .find(|f| keys.iter().any(|k| k == *f));
    // Bounded like every list a summary holds: 50,000 ids would be a summary of 300 KB.
    let rest: Vec<Value> = match identity {
        Some(field) => items
            .iter()
            .skip(sample_items)
            .take(crate::fit::REST_IDS)
            .map(|item| item[*field].clone())
            .collect(),
        None => vec![],
    };
    let unlisted = items.len().saturating_sub(sample_items + rest.len());
    let mut summary = Map::new();
    summary.insert(
        "summary".into(),
        json!(format!(
            "array of {} objects with the same keys; the first {} in full",
            items.len(),
            sample_items.min(items.len())
        )),
    );
    summary.insert("count".into(), json!(items.len()));
    summary.insert("keys".into(), json!(keys));
    summary.insert(
        "first".into(),
        Value::Array(items.iter().take(sample_items).cloned().collect()),
    );
    if let Some(field) = identity {
        summary.insert(format!("rest_by_{field}"), Value::Array(rest));
        if unlisted > 0 {
            summary.insert("rest_not_listed".into(), json!(unlisted));
        }
    }
    Value::Object(summary)
}

fn outline(value: &Value, depth: usize) -> Value {
    let size = value.to_string().len();
    match value {
        Value::Object(map) if depth < OUTLINE_DEPTH => {
            let mut out = Map::new();
            for (key, child) in map.iter().take(OUTLINE_WIDTH) {
                out.insert(key.clone(), outline(child, depth + 1));
            }
            if map.len() > OUTLINE_WIDTH {
                out.insert(
                    "…".into(),
                    json!(format!("{} more keys", map.len() - OUTLINE_WIDTH)),
                );
            }
            json!({"type": "object", "bytes": size, "keys": out})
        }
        Value::Array(items) if depth < OUTLINE_DEPTH => {
            json!({"type": "array", "bytes": size, "length": items.len(), "first": items.first().map(|f| outline(f, depth + 1))})
        }
        Value::Object(map) => json!({"type": "object", "bytes": size, "key_count": map.len()}),
        Value::Array(items) => json!({"type": "array", "bytes": size, "length": items.len()}),
        Value::String(s) if s.chars().count() <= SHORT_STRING => {
            json!({"type": "string", "value": s})
        }
        Value::String(s) => {
            let preview: String = s.chars().take(PREVIEW_CHARS).collect();
            json!({"type": "string", "bytes": size, "chars": s.chars().count(), "preview": preview})
        }
        Value::Number(_) | Value::Bool(_) => json!({"value": value}),
        Value::Null => json!({"type": "null"}),
    }
}
