//! What a single tool call gives the guest, computed on the host without a sandbox.
//!
//! The gateway answers `{"tool": ..., "arguments": ...}` and `return await b.t({...})` without
//! starting an execution (tiers 1 and 2), and it promises the *same bytes* the sandbox would
//! have produced. That promise lives here, next to the preamble it mirrors:
//!
//! - [`js_json`] gives a value the shape it has after a trip through the guest's
//!   `JSON.parse` and `JSON.stringify`: numbers are doubles (so `1.0` is `1` and integers past
//!   2^53 lose their low digits), and integer-like keys come first, in ascending order;
//! - [`map_tool_result`] is the preamble's result mapping (DESIGN.md section 5);
//! - [`tool_error`] and [`call_failure`] build the error an uncaught failure ends in.
//!
//! A test in `tests/direct.rs` runs the same inputs through real workers and compares.

use serde_json::{Map, Number, Value};

use crate::host::hints::{self, HintContext};
use crate::wire::protocol::{BackendCondition, CallFailure, GuestError, ToolBinding};
use crate::host::result::ExecError;
use crate::host::transpile::PositionMap;
pub use crate::wire::errors::{
    CANCELLED_MESSAGE, arguments_too_large, cancelled_guest_error, output_limit_guest_error,
    timeout_guest_error,
};

/// Largest integer a double holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// `value` as the guest's `JSON.stringify(JSON.parse(text))` would give it back.
pub fn js_json(value: Value) -> Value {
    match value {
        Value::Number(n) => js_number(&n),
        Value::Array(items) => Value::Array(items.into_iter().map(js_json).collect()),
        Value::Object(map) => js_object(map),
        other => other,
    }
}

fn js_number(n: &Number) -> Value {
    let exact = n
        .as_i64()
        .map(|i| i.unsigned_abs() as f64 <= MAX_SAFE_INTEGER)
        .or_else(|| n.as_u64().map(|u| u as f64 <= MAX_SAFE_INTEGER))
        .unwrap_or(false);
    if exact {
        return Value::Number(n.clone());
    }
    let Some(x) = n.as_f64() else {
        return Value::Null;
    };
    if x == 0.0 {
        return Value::from(0u64);
    }
    if x.fract() == 0.0 && x.abs() < 1e21 {
        // JavaScript prints the shortest round-trip digits, padded with zeros.
        let printed = format!("{x:e}");
        if let Some((mantissa, exponent)) = printed.split_once('e')
            && let Ok(exponent) = exponent.parse::<usize>()
        {
            let negative = mantissa.starts_with('-');
            let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
            let mut text = String::with_capacity(exponent + 2);
            if negative {
                text.push('-');
            }
            text.push_str(&digits);
            text.extend(std::iter::repeat_n(
                '0',
                (exponent + 1).saturating_sub(digits.len()),
            ));
            if let Ok(parsed) = serde_json::from_str::<Value>(&text) {
                return parsed;
            }
        }
    }
    Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// JavaScript orders integer-like keys (array indices) first, ascending, then the rest in
/// insertion order.
fn js_object(map: Map<String, Value>) -> Value {
    let mut indices: Vec<(u32, String, Value)> = Vec::new();
    let mut rest: Vec<(String, Value)> = Vec::new();
    for (key, value) in map {
        match array_index(&key) {
            Some(i) => indices.push((i, key, js_json(value))),
            None => rest.push((key, js_json(value))),
        }
    }
    if indices.is_empty() {
        return Value::Object(rest.into_iter().collect());
    }
    indices.sort_by_key(|(i, _, _)| *i);
    let mut out = Map::with_capacity(indices.len() + rest.len());
    for (_, key, value) in indices {
        out.insert(key, value);
    }
    out.extend(rest);
    Value::Object(out)
}

/// The key as an array index (`"0"`, `"12"`, below 2^32 − 1, no leading zeros).
fn array_index(key: &str) -> Option<u32> {
    if key.is_empty() || (key.len() > 1 && key.starts_with('0')) {
        return None;
    }
    if !key.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    key.parse::<u32>().ok().filter(|&i| i != u32::MAX)
}

/// The whitespace JavaScript's `trimStart` removes.
fn js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{B}' | '\u{C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// The preamble's mapping of an MCP tool result (as JSON) to what `await backend.tool()`
/// gives: `structuredContent`, a single text item parsed as JSON when it is an object or
/// array, that text otherwise, or the content array. A result with `isError` is the
/// uncaught `ToolError` it would throw.
pub fn map_tool_result(tool: &ToolBinding, raw: &Value) -> Result<Value, ExecError> {
    let empty = Vec::new();
    let content = raw
        .get("content")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    if raw.get("isError").is_some_and(truthy) {
        let text = content
            .iter()
            .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
            .map(|c| c.get("text").and_then(Value::as_str).unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let message = if text.is_empty() {
            format!("{}.{} failed", tool.backend, tool.name)
        } else {
            text
        };
        return Err(guest_failure("ToolError", message, Some(tool)));
    }
    if let Some(structured) = raw.get("structuredContent").filter(|v| !v.is_null()) {
        return Ok(js_json(structured.clone()));
    }
    if let [only] = content.as_slice()
        && only.get("type").and_then(Value::as_str) == Some("text")
        && let Some(text) = only.get("text").and_then(Value::as_str)
    {
        let first = text.trim_start_matches(js_whitespace).chars().next();
        if matches!(first, Some('{' | '['))
            && let Ok(parsed) = serde_json::from_str::<Value>(text)
        {
            return Ok(js_json(parsed));
        }
        return Ok(Value::String(text.to_string()));
    }
    Ok(js_json(Value::Array(content.clone())))
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// The error an execution ends in when a tool result with `isError` is not caught.
pub fn tool_error(message: String) -> ExecError {
    guest_failure("ToolError", message, None)
}

/// The error an execution ends in when a call fails (denied, backend down, timed out) and the
/// rejection is not caught.
pub fn call_failure(failure: &CallFailure, tool: &ToolBinding) -> ExecError {
    let error = GuestError {
        at: None,
        kind: Some(failure.kind.error_kind()),
        name: failure.kind.error_name().to_string(),
        message: failure.message.clone(),
        stack: String::new(),
        fault: None,
    };
    explain(&error, Some(tool), failure.condition)
}

/// The error of an execution the caller cancelled.
pub fn cancelled_error() -> ExecError {
    explain(&cancelled_guest_error(), None, None)
}

/// The error of an execution that ran out of time with `in_flight` calls unfinished.
pub fn timeout_error(wall_ms: u64, in_flight: u32) -> ExecError {
    explain(&timeout_guest_error(wall_ms, in_flight), None, None)
}

/// The error of a result over the output limit, if `value` is over it: the check the worker
/// makes on what the code returns.
pub fn check_output_limit(value: &Value, max_bytes: usize) -> Result<(), ExecError> {
    let bytes = serde_json::to_string(value).map_or(0, |s| s.len());
    if bytes > max_bytes {
        return Err(explain(
            &output_limit_guest_error(bytes, max_bytes),
            None,
            None,
        ));
    }
    Ok(())
}

fn guest_failure(name: &str, message: String, tool: Option<&ToolBinding>) -> ExecError {
    let error = GuestError {
        at: None,
        kind: None,
        name: name.to_string(),
        message,
        stack: String::new(),
        fault: None,
    };
    explain(&error, tool, None)
}

fn explain(
    error: &GuestError,
    failed_tool: Option<&ToolBinding>,
    failed_condition: Option<BackendCondition>,
) -> ExecError {
    let positions = PositionMap::default();
    let cx = HintContext {
        source: "",
        tools: &[],
        host_functions: &[],
        positions: &positions,
        failed_tool,
        failed_condition,
        outside_tools: &[],
    };
    hints::explain(error, &cx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_become_doubles() {
        assert_eq!(js_json(json!(1.0)), json!(1));
        assert_eq!(js_json(json!(-0.0)), json!(0));
        assert_eq!(js_json(json!(1.5)), json!(1.5));
        assert_eq!(
            js_json(json!(9007199254740993u64)),
            json!(9007199254740992u64)
        );
        assert_eq!(
            js_json(json!(12345678901234567890u64)),
            json!(12345678901234567000u64)
        );
        assert_eq!(
            js_json(json!(-9007199254740993i64)),
            json!(-9007199254740992i64)
        );
    }

    #[test]
    fn integer_keys_come_first() {
        let value: Value = serde_json::from_str(r#"{"b":1,"10":2,"a":3,"2":4,"01":5}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&js_json(value)).unwrap(),
            r#"{"2":4,"10":2,"b":1,"a":3,"01":5}"#
        );
    }

    fn b_t() -> ToolBinding {
        ToolBinding {
            backend: "b".into(),
            name: "t".into(),
            js_backend: "b".into(),
            js_tool: "t".into(),
            declaration: String::new(),
        }
    }

    #[test]
    fn maps_results_like_the_preamble() {
        let structured =
            json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"a": 1.0}});
        assert_eq!(
            map_tool_result(&b_t(), &structured).unwrap(),
            json!({"a": 1})
        );
        let parsed = json!({"content": [{"type": "text", "text": "\n [1, 2]"}]});
        assert_eq!(map_tool_result(&b_t(), &parsed).unwrap(), json!([1, 2]));
        // trimStart removes a BOM but JSON.parse refuses it: the text stays a string.
        let bom = json!({"content": [{"type": "text", "text": "\u{feff}[1]"}]});
        assert_eq!(map_tool_result(&b_t(), &bom).unwrap(), json!("\u{feff}[1]"));
        let text = json!({"content": [{"type": "text", "text": "{not json"}]});
        assert_eq!(map_tool_result(&b_t(), &text).unwrap(), json!("{not json"));
        let two =
            json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]});
        assert_eq!(
            map_tool_result(&b_t(), &two).unwrap(),
            json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
        );
        let failed = json!({"isError": true, "content": [{"type": "text", "text": "boom"}]});
        let error = map_tool_result(&b_t(), &failed).unwrap_err();
        assert_eq!(error.message, "ToolError: boom");
        let silent = json!({"isError": true, "content": []});
        assert_eq!(
            map_tool_result(&b_t(), &silent).unwrap_err().message,
            "ToolError: b.t failed"
        );
    }
}
