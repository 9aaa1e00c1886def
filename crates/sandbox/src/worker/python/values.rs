//! Values across the Python boundary: JSON (what tools take and give, and what a run returns)
//! to Monty's objects and back.
//!
//! A tool's value is what TypeScript gets (the same unwrapping of an MCP result, see
//! [`tool_value`]); JSON numbers without a fraction arrive as `int`. Going out, Python's
//! containers become JSON the way `json.dumps` writes them (tuples and sets as arrays, keys as
//! strings), and what JSON cannot hold is refused with the type's name, never guessed.

use monty_types::{DictPairs, MontyObject};
use serde_json::{Map, Number, Value};

/// Deepest value read either way: the host reads results at most 128 levels deep.
pub const MAX_DEPTH: usize = 128;

/// A JSON value as a Python object.
pub fn to_python(value: &Value) -> MontyObject {
    match value {
        Value::Null => MontyObject::None,
        Value::Bool(b) => MontyObject::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => MontyObject::Int(i),
            (None, Some(u)) => MontyObject::BigInt(u.into()),
            _ => MontyObject::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => MontyObject::String(s.clone()),
        Value::Array(items) => MontyObject::List(items.iter().map(to_python).collect()),
        Value::Object(map) => MontyObject::Dict(DictPairs::from(
            map.iter()
                .map(|(k, v)| (MontyObject::String(k.clone()), to_python(v)))
                .collect::<Vec<_>>(),
        )),
    }
}

/// A Python object as JSON, or why it cannot be (naming the type and where it was).
pub fn to_json(object: &MontyObject) -> Result<Value, String> {
    to_json_at(object, 0)
}

fn to_json_at(object: &MontyObject, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "the value nests more than {MAX_DEPTH} levels deep"
        ));
    }
    let list = |items: &[MontyObject]| -> Result<Value, String> {
        items
            .iter()
            .map(|item| to_json_at(item, depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    };
    Ok(match object {
        MontyObject::None => Value::Null,
        MontyObject::Bool(b) => Value::Bool(*b),
        MontyObject::Int(i) => Value::from(*i),
        MontyObject::BigInt(big) => match big.to_string().parse::<Number>() {
            // Within u64: an exact JSON integer; beyond it, a float, as JSON readers take it.
            Ok(n) if n.is_u64() || n.is_i64() => Value::Number(n),
            _ => big
                .to_string()
                .parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map_or(Value::Null, Value::Number),
        },
        // NaN and the infinities are not JSON: `null`, as JSON.stringify writes them.
        MontyObject::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        MontyObject::String(s) | MontyObject::Path(s) => Value::String(s.clone()),
        MontyObject::List(items)
        | MontyObject::Tuple(items)
        | MontyObject::Set(items)
        | MontyObject::FrozenSet(items) => list(items)?,
        MontyObject::NamedTuple {
            field_names,
            values,
            ..
        } => {
            let mut map = Map::new();
            for (name, value) in field_names.iter().zip(values) {
                map.insert(name.clone(), to_json_at(value, depth + 1)?);
            }
            Value::Object(map)
        }
        MontyObject::Dict(pairs) => {
            let mut map = Map::new();
            for (key, value) in pairs {
                map.insert(key_text(key)?, to_json_at(value, depth + 1)?);
            }
            Value::Object(map)
        }
        MontyObject::ClassInstance(instance) if instance.class_type.is_dataclass => {
            let mut map = Map::new();
            for (key, value) in &instance.attrs {
                map.insert(key_text(key)?, to_json_at(value, depth + 1)?);
            }
            Value::Object(map)
        }
        MontyObject::Date(_)
        | MontyObject::DateTime(_)
        | MontyObject::Time(_)
        | MontyObject::TimeDelta(_)
        | MontyObject::TimeZone(_) => Value::String(object.py_repr()),
        other => {
            return Err(format!(
                "a value of type `{}` cannot travel as JSON; return or pass lists, dicts, strings, numbers, booleans or None",
                other.type_name()
            ));
        }
    })
}

/// A dict key as JSON writes it: strings as they are, numbers, booleans and None as `json.dumps`
/// writes them.
fn key_text(key: &MontyObject) -> Result<String, String> {
    match key {
        MontyObject::String(s) => Ok(s.clone()),
        MontyObject::Int(i) => Ok(i.to_string()),
        MontyObject::BigInt(i) => Ok(i.to_string()),
        MontyObject::Float(f) => Ok(f.to_string()),
        MontyObject::Bool(b) => Ok(if *b { "true" } else { "false" }.into()),
        MontyObject::None => Ok("null".into()),
        other => Err(format!(
            "a dict key of type `{}` cannot travel as JSON; keys must be strings or numbers",
            other.type_name()
        )),
    }
}

/// What a tool's raw MCP result is to the code, exactly as the TypeScript preamble's
/// `mapResult` makes it: `structuredContent` when present; else one text block, parsed when it
/// is a JSON object or array; else the content blocks.
pub fn tool_value(raw: &Value) -> Value {
    if let Some(structured) = raw.get("structuredContent").filter(|v| !v.is_null()) {
        return structured.clone();
    }
    let content = match raw.get("content") {
        Some(Value::Array(content)) => content,
        _ => return Value::Array(Vec::new()),
    };
    if let [only] = content.as_slice()
        && only.get("type").and_then(Value::as_str) == Some("text")
        && let Some(text) = only.get("text").and_then(Value::as_str)
    {
        let first = text.trim_start().chars().next();
        if matches!(first, Some('{' | '['))
            && let Ok(parsed) = serde_json::from_str::<Value>(text)
        {
            return parsed;
        }
        return Value::String(text.to_string());
    }
    Value::Array(content.clone())
}

/// The text of a result's text blocks, one per line (a failed call's message).
pub fn text_of(raw: &Value) -> String {
    let mut text = Vec::new();
    if let Some(Value::Array(content)) = raw.get("content") {
        for block in content {
            if block.get("type").and_then(Value::as_str) == Some("text")
                && let Some(t) = block.get("text").and_then(Value::as_str)
            {
                text.push(t);
            }
        }
    }
    text.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trips_and_integers_stay_integers() {
        let value = json!({"a": [1, 2.5, "x", null, true], "big": 18446744073709551615u64, "n": -3});
        let back = to_json(&to_python(&value)).expect("JSON");
        assert_eq!(back, value);
        assert_eq!(to_python(&json!(3)), MontyObject::Int(3));
    }

    #[test]
    fn what_json_cannot_hold_is_refused_with_its_type() {
        let f = MontyObject::Function {
            name: "f".into(),
            docstring: None,
        };
        let error = to_json(&MontyObject::List(vec![f])).expect_err("a function is not JSON");
        assert!(error.contains("`function`"), "{error}");
        let nan = to_json(&MontyObject::Float(f64::NAN)).expect("NaN is null");
        assert_eq!(nan, Value::Null);
    }

    #[test]
    fn a_deep_value_is_refused_not_recursed_without_end() {
        let mut deep = MontyObject::None;
        for _ in 0..(MAX_DEPTH + 5) {
            deep = MontyObject::List(vec![deep]);
        }
        assert!(to_json(&deep).is_err());
    }

    #[test]
    fn a_tool_result_unwraps_as_typescript_unwraps_it() {
        assert_eq!(tool_value(&json!({"structuredContent": {"a": 1}, "content": []})), json!({"a": 1}));
        assert_eq!(tool_value(&json!({"content": [{"type": "text", "text": " [1,2]"}]})), json!([1, 2]));
        assert_eq!(tool_value(&json!({"content": [{"type": "text", "text": "{not json"}]})), json!("{not json"));
        let two = json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]});
        assert_eq!(tool_value(&two), two["content"]);
        assert_eq!(text_of(&two), "a\nb");
    }
}
