//! Checking a call's arguments against the tool's declared `inputSchema` before it goes out.
//!
//! A server answers bad arguments in its own words: a TypeScript server with a JSON-RPC
//! "invalid params", a Python (FastMCP) server with an `isError` result holding Pydantic's
//! validation text, another with a stack trace. The model then cannot tell a wrong argument
//! from a failing tool. The gateway checks what the declaration says plainly, the same way for
//! every server: required keys, the JSON type of each declared key (and its `enum`), and keys
//! the declaration does not have, when it forbids others (`additionalProperties: false`) or
//! when the key reads as a misspelling of a declared one the call left out.
//!
//! Only the top level is checked, with the schema's own words, and nothing that is not certain:
//! a key whose schema has no `type` (an `anyOf`, a `$ref`) is left to the server. What a hostile
//! schema can cost is bounded by the arguments' keys and [`MAX_ENUM`].

use serde_json::{Map, Value};

/// Most problems one refusal lists.
const MAX_PROBLEMS: usize = 5;
/// An `enum` longer than this is left to the server (it would not be quoted anyway).
const MAX_ENUM: usize = 64;
/// How close an unknown key must read to a declared one to be taken for its misspelling.
const MISSPELLING: f64 = 0.88;
/// Most unknown keys of one call compared with the declared ones, and most declared keys
/// each is compared with: what a call of a hundred thousand keys against a schema of as many
/// can cost.
const MAX_COMPARED: usize = 64;
const MAX_DECLARED_COMPARED: usize = 256;
/// Longest name a problem quotes.
const MAX_NAME_CHARS: usize = 64;

/// What is wrong with `arguments` for a tool whose input schema is `schema`, in words a model
/// can act on; empty when nothing certain is.
pub fn argument_problems(schema: &Value, arguments: &Map<String, Value>) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(schema) = schema.as_object() else {
        return problems;
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !arguments.contains_key(name) {
                problems.push(format!("missing required argument `{}`", shown(name)));
                if problems.len() > MAX_PROBLEMS {
                    break;
                }
            }
        }
    }
    if let Some(properties) = properties {
        let mut unknown_seen = 0;
        for (name, value) in arguments {
            match properties.get(name) {
                Some(declared) => {
                    if let Some(problem) = mismatch(name, declared, value) {
                        problems.push(problem);
                    }
                }
                None if unknown_seen < MAX_COMPARED => {
                    unknown_seen += 1;
                    if let Some(problem) = unknown(name, schema, properties, arguments) {
                        problems.push(problem);
                    }
                }
                None => {}
            }
            if problems.len() > MAX_PROBLEMS {
                break;
            }
        }
    }
    problems.truncate(MAX_PROBLEMS);
    problems
}

/// A key the declaration does not have: a problem when the schema forbids other keys, or when
/// it reads as a misspelling of a declared key the call left out.
fn unknown(
    name: &str,
    schema: &Map<String, Value>,
    properties: &Map<String, Value>,
    arguments: &Map<String, Value>,
) -> Option<String> {
    if schema.contains_key("patternProperties") {
        return None;
    }
    let lower = name.to_lowercase();
    let meant = properties
        .keys()
        .take(MAX_DECLARED_COMPARED)
        .filter(|declared| !arguments.contains_key(*declared))
        .map(|declared| {
            (
                strsim::jaro_winkler(&lower, &declared.to_lowercase()),
                declared,
            )
        })
        .filter(|(score, _)| *score >= MISSPELLING)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, declared)| declared);
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    match (meant, closed) {
        (Some(meant), _) => Some(format!(
            "unknown argument `{}` (did you mean `{}`?)",
            shown(name),
            shown(meant)
        )),
        (None, true) => {
            let known: Vec<String> = properties.keys().take(12).map(|k| shown(k)).collect();
            Some(format!(
                "unknown argument `{}` (it takes {})",
                shown(name),
                if known.is_empty() {
                    "no arguments".to_string()
                } else {
                    known
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ))
        }
        (None, false) => None,
    }
}

/// What is wrong with `value` for the declared key `name`, when its schema says so plainly.
fn mismatch(name: &str, declared: &Value, value: &Value) -> Option<String> {
    let declared = declared.as_object()?;
    if let Some(types) = declared.get("type") {
        let allowed: Vec<&str> = match types {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => return None,
        };
        if !allowed.is_empty() && !allowed.iter().any(|t| is_of_type(value, t)) {
            return Some(format!(
                "`{}` must be {}, not {}",
                shown(name),
                allowed
                    .iter()
                    .map(|t| a_type(t))
                    .collect::<Vec<_>>()
                    .join(" or "),
                kind_of(value)
            ));
        }
    }
    if let Some(Value::Array(options)) = declared.get("enum")
        && options.len() <= MAX_ENUM
        && !options.contains(value)
    {
        let listed: Vec<String> = options.iter().take(12).map(Value::to_string).collect();
        return Some(format!(
            "`{}` must be one of {}{}, not {}",
            shown(name),
            listed.join(", "),
            if options.len() > listed.len() {
                ", …"
            } else {
                ""
            },
            short_json(value)
        ));
    }
    None
}

fn is_of_type(value: &Value, name: &str) -> bool {
    match name {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        // A type this check does not know is the server's to judge.
        _ => true,
    }
}

fn a_type(name: &str) -> String {
    match name {
        "string" => "a string".into(),
        "number" => "a number".into(),
        "integer" => "a whole number".into(),
        "boolean" => "true or false".into(),
        "object" => "an object".into(),
        "array" => "an array".into(),
        "null" => "null".into(),
        other => format!("of type {}", shown(other)),
    }
}

fn kind_of(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => format!("{value}"),
        Value::Number(_) => format!("the number {}", short_json(value)),
        Value::String(_) => format!("the string {}", short_json(value)),
        Value::Array(items) => format!("an array of {} items", items.len()),
        Value::Object(_) => "an object".into(),
    }
}

/// A value as JSON, cut to a few dozen characters.
fn short_json(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 40 {
        return text;
    }
    let head: String = text.chars().take(37).collect();
    format!("{head}…")
}

/// A name as a problem quotes it: cut, and without backticks or line breaks of its own.
fn shown(name: &str) -> String {
    name.chars()
        .take(MAX_NAME_CHARS)
        .map(|c| if c == '`' || c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(schema: Value, arguments: Value) -> Vec<String> {
        argument_problems(&schema, arguments.as_object().unwrap_or(&Map::new()))
    }

    fn sum() -> Value {
        json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
               "required": ["a", "b"], "additionalProperties": false})
    }

    #[test]
    fn missing_keys_wrong_types_and_unknown_keys_are_named() {
        assert!(problems(sum(), json!({"a": 1, "b": 2.5})).is_empty());
        assert_eq!(
            problems(sum(), json!({"a": "x"})),
            [
                "missing required argument `b`",
                "`a` must be a number, not the string \"x\""
            ]
        );
        assert_eq!(
            problems(sum(), json!({"a": 1, "b": 2, "c": 3})),
            ["unknown argument `c` (it takes `a`, `b`)"]
        );
    }

    #[test]
    fn an_open_schema_refuses_only_a_misspelling_of_a_key_left_out() {
        let time = json!({"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]});
        assert_eq!(
            problems(time.clone(), json!({"timezon": "Europe/Paris"})),
            [
                "missing required argument `timezone`",
                "unknown argument `timezon` (did you mean `timezone`?)"
            ]
        );
        assert!(problems(time, json!({"timezone": "UTC", "verbose": true})).is_empty());
    }

    #[test]
    fn integers_enums_nulls_and_unknown_forms_are_judged_only_when_certain() {
        let schema = json!({"properties": {
            "n": {"type": "integer"}, "mode": {"enum": ["fast", "slow"]},
            "maybe": {"type": ["string", "null"]}, "any": {"anyOf": [{"type": "string"}]},
            "odd": {"type": "decimal"}}});
        assert!(
            problems(
                schema.clone(),
                json!({"n": 3.0, "mode": "fast", "maybe": null, "any": 5, "odd": "x"})
            )
            .is_empty()
        );
        assert_eq!(
            problems(schema, json!({"n": 3.5, "mode": "quick"})),
            [
                "`n` must be a whole number, not the number 3.5",
                "`mode` must be one of \"fast\", \"slow\", not \"quick\""
            ]
        );
    }

    #[test]
    fn a_hostile_schema_or_call_costs_little_and_says_little() {
        let many: Map<String, Value> = (0..10_000).map(|i| (format!("k{i}"), json!(i))).collect();
        let schema =
            json!({"properties": {}, "additionalProperties": false, "required": ["`evil`\nname"]});
        let found = argument_problems(&schema, &many);
        assert_eq!(found.len(), MAX_PROBLEMS);
        assert_eq!(found[0], "missing required argument `?evil??name`");
        assert!(problems(json!("not a schema"), json!({"a": 1})).is_empty());
        assert!(
            problems(
                json!({"properties": {"a": {"enum": (0..1000).collect::<Vec<_>>()}}}),
                json!({"a": -1})
            )
            .is_empty()
        );
    }
}
