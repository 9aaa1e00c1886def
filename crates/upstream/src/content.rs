//! Content items of types MCP does not define, in a backend's tool result.
//!
//! rmcp reads a tool result only when every content item is of a type MCP defines; one
//! `{"type": "video"}` made the whole result unreadable, and the call failed though its text
//! was fine. Such a result reaches the gateway as a result of no known kind. Here its unknown
//! items become text saying they were not passed on, and the rest is read again as a tool
//! result: on stdio in the stdout inspector (`frames`), over HTTP where the call's answer is
//! matched (`backend.rs`).

use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

/// The content types MCP defines.
pub(crate) const CONTENT_TYPES: [&str; 5] = ["text", "image", "audio", "resource", "resource_link"];

/// `result` with each content item of a type MCP does not define replaced by a note, when it
/// holds any; `None` when it holds none (or no `content` list).
pub(crate) fn with_known_content(result: &Map<String, Value>) -> Option<Map<String, Value>> {
    let Some(Value::Array(items)) = result.get("content") else {
        return None;
    };
    let mut replaced = false;
    let kept: Vec<Value> = items
        .iter()
        .map(|item| {
            let kind = item.get("type").and_then(Value::as_str);
            if kind.is_some_and(|k| CONTENT_TYPES.contains(&k)) {
                return item.clone();
            }
            replaced = true;
            let shown: String = kind.unwrap_or("(none)").chars().take(40).collect();
            json!({
                "type": "text",
                "text": format!(
                    "[sandgate: a content item of type {shown:?} was not passed on; MCP defines only {}]",
                    CONTENT_TYPES.join(", ")
                ),
            })
        })
        .collect();
    if !replaced {
        return None;
    }
    let mut result = result.clone();
    result.insert("content".into(), Value::Array(kept));
    Some(result)
}

/// A result of no known kind read as a tool result once its unknown content items are
/// replaced, if it then reads as one.
pub(crate) fn tool_result_of(result: &Value) -> Option<CallToolResult> {
    let repaired = with_known_content(result.as_object()?)?;
    serde_json::from_value(Value::Object(repaired)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_items_become_notes_and_known_ones_are_kept() {
        let result = json!({"content": [{"type": "text", "text": "kept"}, {"type": "video", "data": "AAAA"}, {"no": "type"}]});
        let read = tool_result_of(&result).map(|r| serde_json::to_value(r).unwrap_or_default());
        let read = read.unwrap_or_default();
        assert_eq!(read["content"][0]["text"], "kept");
        assert!(
            read["content"][1]["text"]
                .as_str()
                .unwrap_or("")
                .contains("\"video\" was not passed on")
        );
        assert!(
            read["content"][2]["text"]
                .as_str()
                .unwrap_or("")
                .contains("\"(none)\" was not passed on")
        );
        assert!(
            tool_result_of(&json!({"content": [{"type": "text", "text": "fine"}]})).is_none(),
            "nothing to repair"
        );
        assert!(tool_result_of(&json!(5)).is_none());
    }
}
