//! Stateless (2026-07-28) `tools/call` answered without rmcp's per-request service.
//!
//! rmcp serves a stateless request by building a service for it: it parses the body into its
//! message types again, serializes it back to JSON for the header checks, and spawns a serve
//! loop with a one-shot transport, channels and cancellation tokens, all to run one handler
//! call. That machinery was about 30% of the gateway's CPU per tier-1 request (docs/BENCHMARKS.md,
//! "CPU per request"). A request that is plainly what a 2026-07-28 client sends for a tool
//! call is answered here instead, from the body the HTTP guard has already parsed: the same
//! caller, the same routes (`handler::answer_call`), the same panic containment and
//! cancellation, and the same JSON-RPC answer, serialized by rmcp's own types.
//!
//! "Plainly" is narrow on purpose: anything this path does not recognise goes to rmcp, which
//! checks it and answers as before. So it takes only requests rmcp would accept, and answers
//! them as rmcp would: a session, another method, a progress token, a `_meta` key or a
//! `params` key it does not know, a tool name outside `[A-Za-z0-9_.-]`, an `Accept` with
//! parameters, an `Mcp-Param-*` header, a header given twice, or a client that declares
//! elicitation or tasks (it may be asked, or given a task) all go the long way.

use std::sync::Arc;

use http::HeaderMap;
use rmcp::model::{
    JsonObject, ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerResult,
};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::handler::{ToolCall, answer_call};
use crate::caller::Caller;
use crate::gateway::Gateway;
use crate::runtime::Cancellation;

/// The one protocol version this path answers.
const VERSION: &str = "2026-07-28";
/// The `_meta` keys of a 2026-07-28 request (rmcp keeps its names private).
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_CLIENT: &str = "io.modelcontextprotocol/clientInfo";

/// A stateless `tools/call` this path answers.
#[derive(Debug)]
pub(crate) struct DirectCall {
    id: RequestId,
    name: String,
    arguments: Option<JsonObject>,
    trace: opentelemetry::Context,
}

/// The request as a [`DirectCall`] when it is plainly a stateless 2026-07-28 `tools/call`
/// (see the module docs); `None` leaves it to rmcp.
pub(crate) fn direct_call(headers: &HeaderMap, message: Map<String, Value>) -> Option<DirectCall> {
    if headers.contains_key("mcp-session-id")
        || sole(headers, "mcp-protocol-version")? != VERSION
        || sole(headers, "mcp-method")? != "tools/call"
        || headers
            .keys()
            .any(|name| name.as_str().starts_with("mcp-param-"))
        || !accepts_json_and_stream(headers)
        || !is_json(headers)
    {
        return None;
    }
    let header_name = sole(headers, "mcp-name")?;
    let (mut id, mut params) = (None, None);
    for (key, value) in message {
        match (key.as_str(), value) {
            ("jsonrpc", Value::String(version)) if version == "2.0" => {}
            ("method", Value::String(method)) if method == "tools/call" => {}
            ("id", id_value @ (Value::String(_) | Value::Number(_))) => {
                id = Some(serde_json::from_value::<RequestId>(id_value).ok()?);
            }
            ("params", Value::Object(object)) => params = Some(object),
            _ => return None,
        }
    }
    let (id, params) = (id?, params?);
    let (mut name, mut arguments, mut meta) = (None, None, None);
    for (key, value) in params {
        match (key.as_str(), value) {
            ("name", Value::String(text)) if plain_name(&text) && text == header_name => {
                name = Some(text);
            }
            ("arguments", Value::Object(object)) => arguments = Some(object),
            ("_meta", Value::Object(object)) => meta = Some(object),
            _ => return None,
        }
    }
    let meta = RequestMetaObject::from(meta?);
    let trace = trace_of(&meta)?;
    let name = name?;
    tracing::trace!(tool = %name, "a stateless tools/call answered without rmcp's per-request service");
    Some(DirectCall {
        id,
        name,
        arguments,
        trace,
    })
}

/// The trace context of a `_meta` this path takes: only the keys a 2026-07-28 client sends
/// with a plain call, the version this path answers, and valid client capabilities (and
/// client info, when given).
fn trace_of(meta: &RequestMetaObject) -> Option<opentelemetry::Context> {
    let known = [
        META_VERSION,
        META_CAPABILITIES,
        META_CLIENT,
        "traceparent",
        "tracestate",
    ];
    if meta.keys().any(|key| !known.contains(&key.as_str()))
        || meta.protocol_version() != Some(ProtocolVersion::V_2026_07_28)
        || !meta
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty()
        || (meta.contains_key(META_CLIENT) && meta.client_info().is_none())
        // A client that can be asked, or takes tasks, is answered by the handler, which asks
        // it (input-required results) or gives it a task.
        || meta
            .client_capabilities()
            .is_some_and(|caps| caps.elicitation.is_some() || caps.supports_tasks())
    {
        return None;
    }
    let text = |key: &str| match meta.get(key) {
        None => Some(None),
        Some(Value::String(text)) => Some(Some(text.as_str())),
        Some(_) => None,
    };
    Some(crate::telemetry::traces::from_meta(
        text("traceparent")?,
        text("tracestate")?,
    ))
}

/// The one value of header `name`, as text; `None` when it is absent, repeated or not text.
fn sole<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    match values.next() {
        Some(_) => None,
        None => value.to_str().ok(),
    }
}

/// Whether `Accept` plainly lists both JSON and event streams (entries without parameters).
fn accepts_json_and_stream(headers: &HeaderMap) -> bool {
    let (mut json, mut stream) = (false, false);
    for value in headers.get_all(http::header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for entry in value.split(',').map(str::trim) {
            if entry.contains([';', '"']) {
                return false;
            }
            json |= entry.eq_ignore_ascii_case("application/json");
            stream |= entry.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && stream
}

/// Whether the one `Content-Type` is JSON.
fn is_json(headers: &HeaderMap) -> bool {
    sole(headers, http::header::CONTENT_TYPE.as_str()).is_some_and(|value| {
        let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
        essence.trim().eq_ignore_ascii_case("application/json")
    })
}

/// A tool name that reads the same in a header and in the body.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Answers `call` for the HTTP request `parts`: the JSON-RPC message's bytes. The work runs
/// in a task of its own, as under rmcp: a client that goes away before the answer cancels it
/// (as `notifications/cancelled` would), and the execution still ends and is recorded.
pub(crate) async fn answer(
    gateway: &Arc<Gateway>,
    parts: &http::request::Parts,
    call: DirectCall,
    response_gone: CancellationToken,
) -> Vec<u8> {
    let caller = Caller::of_http(gateway.profiles(), parts, call.trace);
    let request = CancellationToken::new();
    let cancel = Cancellation::new(request.clone()).or_response_gone(response_gone);
    let gateway = gateway.clone();
    let (name, arguments) = (call.name, call.arguments);
    let work = tokio::spawn(async move {
        let call = ToolCall {
            name: &name,
            arguments,
            progress: None,
        };
        answer_call(&gateway, &caller, call, &cancel).await
    });
    // Dropped with this future when the client goes away first.
    let gone_first = request.drop_guard();
    let outcome = work.await;
    gone_first.disarm();
    let message = match outcome {
        Ok(Ok(result)) => {
            let mut result = ServerResult::CallToolResult(result);
            result.fill_missing_cache_hints();
            ServerJsonRpcMessage::response(result, call.id)
        }
        Ok(Err(error)) => ServerJsonRpcMessage::error(error, Some(call.id)),
        Err(ended) => ServerJsonRpcMessage::error(
            rmcp::model::ErrorData::internal_error(
                format!(
                    "internal error while serving tools/call: the call's task ended ({ended}). The gateway is still running."
                ),
                None,
            ),
            Some(call.id),
        ),
    };
    serde_json::to_vec(&message).unwrap_or_else(|error| {
        let message = format!("internal error: the answer could not be written as JSON ({error})");
        serde_json::json!({"jsonrpc": "2.0", "error": {"code": -32603, "message": message}})
            .to_string()
            .into_bytes()
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                http::HeaderValue::from_str(value).expect("value"),
            );
        }
        map
    }

    const PLAIN_HEADERS: &[(&str, &str)] = &[
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "call_tool_chain"),
    ];

    fn plain_body() -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {
                "name": "call_tool_chain",
                "arguments": {"code": "return 1"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
                }
            }
        })
    }

    fn taken(headers: &HeaderMap, body: Value) -> Option<DirectCall> {
        let Value::Object(message) = body else {
            panic!("an object")
        };
        direct_call(headers, message)
    }

    #[test]
    fn a_plain_stateless_tool_call_is_taken() {
        let call = taken(&headers(PLAIN_HEADERS), plain_body()).expect("taken");
        assert_eq!(call.id, RequestId::Number(7));
        assert_eq!(call.name, "call_tool_chain");
        assert_eq!(
            call.arguments.and_then(|a| a.get("code").cloned()),
            Some(json!("return 1"))
        );
        let mut body = plain_body();
        body["id"] = json!("abc");
        body["params"]
            .as_object_mut()
            .expect("params")
            .remove("arguments");
        let call = taken(&headers(PLAIN_HEADERS), body).expect("taken without arguments");
        assert_eq!(call.id, RequestId::String("abc".into()));
        assert!(call.arguments.is_none());
    }

    #[test]
    fn any_header_it_does_not_plainly_recognise_leaves_the_request_to_rmcp() {
        let replaced = |name: &str, value: Option<&str>| {
            let mut pairs: Vec<(&str, &str)> = PLAIN_HEADERS
                .iter()
                .copied()
                .filter(|(n, _)| *n != name)
                .collect();
            if let Some(value) = value {
                pairs.push((name, value));
            }
            headers(&pairs)
        };
        let cases = [
            ("a session", {
                let mut h = headers(PLAIN_HEADERS);
                h.insert("mcp-session-id", http::HeaderValue::from_static("s1"));
                h
            }),
            (
                "an older version",
                replaced("mcp-protocol-version", Some("2025-11-25")),
            ),
            ("no version", replaced("mcp-protocol-version", None)),
            ("no Mcp-Method", replaced("mcp-method", None)),
            (
                "another Mcp-Method",
                replaced("mcp-method", Some("tools/list")),
            ),
            ("no Mcp-Name", replaced("mcp-name", None)),
            (
                "another Mcp-Name",
                replaced("mcp-name", Some("search_tools")),
            ),
            (
                "a Base64 Mcp-Name",
                replaced("mcp-name", Some("=?base64?Y2FsbF90b29sX2NoYWlu?=")),
            ),
            ("Mcp-Name twice", {
                let mut h = headers(PLAIN_HEADERS);
                h.append(
                    "mcp-name",
                    http::HeaderValue::from_static("call_tool_chain"),
                );
                h
            }),
            ("an Mcp-Param header", {
                let mut h = headers(PLAIN_HEADERS);
                h.insert("mcp-param-code", http::HeaderValue::from_static("x"));
                h
            }),
            (
                "Accept with weights",
                replaced("accept", Some("application/json;q=1, text/event-stream")),
            ),
            (
                "Accept without streams",
                replaced("accept", Some("application/json")),
            ),
            ("Accept: */*", replaced("accept", Some("*/*"))),
            ("a text body", replaced("content-type", Some("text/plain"))),
            ("no Content-Type", replaced("content-type", None)),
        ];
        for (case, h) in cases {
            assert!(taken(&h, plain_body()).is_none(), "{case}");
        }
    }

    #[test]
    fn any_body_it_does_not_plainly_recognise_leaves_the_request_to_rmcp() {
        let h = headers(PLAIN_HEADERS);
        let changed = |change: &dyn Fn(&mut Value)| {
            let mut body = plain_body();
            change(&mut body);
            body
        };
        let cases: Vec<(&str, Value)> = vec![
            ("JSON-RPC 1.0", changed(&|b| b["jsonrpc"] = json!("1.0"))),
            (
                "another method",
                changed(&|b| b["method"] = json!("tools/list")),
            ),
            ("a fractional id", changed(&|b| b["id"] = json!(1.5))),
            ("an id past i64", changed(&|b| b["id"] = json!(u64::MAX))),
            ("a null id", changed(&|b| b["id"] = Value::Null)),
            (
                "no id",
                changed(&|b| {
                    b.as_object_mut().expect("body").remove("id");
                }),
            ),
            ("an unknown key", changed(&|b| b["extra"] = json!(1))),
            ("a task", changed(&|b| b["params"]["task"] = json!({}))),
            (
                "arguments as a list",
                changed(&|b| b["params"]["arguments"] = json!([1])),
            ),
            (
                "a name with a space",
                changed(&|b| b["params"]["name"] = json!("call tool")),
            ),
            (
                "a progress token",
                changed(&|b| b["params"]["_meta"]["progressToken"] = json!(1)),
            ),
            (
                "a log level",
                changed(&|b| {
                    b["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("debug");
                }),
            ),
            (
                "an older version in _meta",
                changed(&|b| {
                    b["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] =
                        json!("2025-11-25");
                }),
            ),
            (
                "no capabilities",
                changed(&|b| {
                    b["params"]["_meta"]
                        .as_object_mut()
                        .expect("meta")
                        .remove("io.modelcontextprotocol/clientCapabilities");
                }),
            ),
            (
                "capabilities that are not capabilities",
                changed(&|b| {
                    b["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
                        json!("all");
                }),
            ),
            (
                "client info that is not client info",
                changed(&|b| {
                    b["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] = json!(3);
                }),
            ),
            (
                "a traceparent that is not text",
                changed(&|b| b["params"]["_meta"]["traceparent"] = json!(1)),
            ),
            (
                "no _meta",
                changed(&|b| {
                    b["params"].as_object_mut().expect("params").remove("_meta");
                }),
            ),
        ];
        for (case, body) in cases {
            assert!(taken(&h, body).is_none(), "{case}");
        }
    }
}
