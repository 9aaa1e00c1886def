//! A tool call's answer, read straight as one.
//!
//! rmcp reads a backend's answer as its `ServerResult`, an untagged union: serde buffers the
//! whole result, then tries each kind of result in turn, and a tool result comes sixteenth,
//! after fifteen attempts that each fail with a formatted error. For a tier-1 call that was
//! about 5% of the gateway's CPU. A response whose result holds only the keys a tool result
//! has (`content`, `structuredContent`, `isError`, `resultType`, `_meta`) can be no other kind
//! of result (every kind before it in the union needs a key of its own), so it is read here
//! directly, with the rules of rmcp's own `CallToolResult` reader. Anything else, or anything
//! this reader refuses, is left to rmcp's.

use rmcp::model::{
    CallToolResult, ContentBlock, JsonRpcMessage, JsonRpcVersion2_0, MetaObject, RequestId,
    ResultType, ServerResult,
};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::Incoming;

/// A response whose result has only a tool result's keys.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolResponse {
    #[allow(dead_code)]
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    result: ToolResult,
}

/// A tool result's keys, as rmcp's `CallToolResult` reads them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ToolResult {
    #[serde(default)]
    result_type: Option<ResultType>,
    content: Option<Vec<ContentBlock>>,
    #[serde(default, deserialize_with = "present")]
    structured_content: Option<Value>,
    is_error: Option<bool>,
    #[serde(rename = "_meta")]
    meta: Option<MetaObject>,
}

/// A field that is present, even as `null`, is `Some` (structured content may be any value).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// `bytes` as a tool call's answer, when it plainly is one (see the module docs).
pub(super) fn tool_answer(bytes: &[u8]) -> Option<Incoming> {
    let response: ToolResponse = serde_json::from_slice(bytes).ok()?;
    let result = response.result;
    // rmcp's reader: a result type other than "complete" is another kind of result, and a
    // result needs one of the three fields to be a tool result at all.
    if result
        .result_type
        .as_ref()
        .is_some_and(|kind| !kind.is_complete())
        || (result.content.is_none()
            && result.structured_content.is_none()
            && result.is_error.is_none())
    {
        return None;
    }
    let mut answer = CallToolResult::default();
    answer.result_type = result.result_type;
    answer.content = result.content.unwrap_or_default();
    answer.structured_content = result.structured_content;
    answer.is_error = result.is_error;
    answer.meta = result.meta;
    Some(JsonRpcMessage::response(
        ServerResult::CallToolResult(answer),
        response.id,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id and tool result in `message`, if it is a tool call's answer.
    fn tool_result(message: Incoming) -> Option<(RequestId, CallToolResult)> {
        match message {
            JsonRpcMessage::Response(response) => match response.result {
                ServerResult::CallToolResult(result) => Some((response.id, result)),
                _ => None,
            },
            _ => None,
        }
    }

    /// What rmcp's own reader makes of `text`, when it reads a tool call's answer.
    fn by_rmcp(text: &str) -> Option<(RequestId, CallToolResult)> {
        tool_result(serde_json::from_str::<Incoming>(text).ok()?)
    }

    #[test]
    fn a_tool_answer_reads_as_rmcp_reads_it() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{"content":[],"isError":true,"_meta":{"k":1}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"result":{"structuredContent":null}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","structuredContent":{"a":[1]},"content":[{"type":"image","data":"AA==","mimeType":"image/png"}]}}"#,
        ] {
            let ours = tool_answer(text.as_bytes()).and_then(tool_result);
            assert!(ours.is_some(), "{text}");
            assert_eq!(ours, by_rmcp(text), "{text}");
        }
    }

    #[test]
    fn anything_else_is_left_to_rmcp() {
        for text in [
            // Other kinds of result, and tool results with a key of another kind.
            r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"tools":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"action":"accept","content":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":{}}}"#,
            // A content item of a type MCP does not define (the inspector mends it).
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"video","data":"x"}]}}"#,
            // Errors, requests, notifications, a stray key, another JSON-RPC version.
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"error":{"code":-1,"message":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"result":{"content":[]}}"#,
        ] {
            assert!(tool_answer(text.as_bytes()).is_none(), "{text}");
        }
    }
}
