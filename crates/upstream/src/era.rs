//! Which protocol era a stdio backend speaks, found before rmcp's handshake starts.
//!
//! rmcp's automatic detection gives the `server/discover` probe a fixed 10 s and then sends
//! `initialize`; a backend that is merely slow to start (`npx -y` on first run, `uvx`,
//! `docker run`, a JVM) answers the probe late, and that late answer fails the handshake as
//! uncorrelated. So sandgate probes on its own, under the backend's whole
//! `handshake_timeout`: it sends `server/discover` and then `ping` (the one request the
//! 2025 lifecycle allows before `initialize`). A backend that answers the probe says its era;
//! one that ignores unknown requests before `initialize` still answers the ping, which says
//! "legacy". rmcp then runs the handshake of that era, and the probe's answers, whenever they
//! come, never reach it (`without_probe_answers`).

use futures::StreamExt;
use futures::channel::mpsc::Receiver;
use rmcp::model::{
    ClientCapabilities, ClientJsonRpcMessage, ClientRequest, DiscoverRequest,
    DiscoverRequestParams, ErrorCode, Implementation, JsonRpcMessage, NumberOrString, PingRequest,
    ProtocolVersion, RequestId, RequestMetaObject,
};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::frames::Incoming;

/// The ids of the probe's two requests. rmcp numbers its own requests, so a string id with
/// this prefix is always the probe's.
const PROBE_PREFIX: &str = "sandgate-era-";
const DISCOVER_ID: &str = "sandgate-era-discover";
const PING_ID: &str = "sandgate-era-ping";

/// The era a backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// 2026-07-28 and later: `server/discover`, no `initialize`.
    Modern,
    /// 2025-11-25 and earlier: `initialize`.
    Legacy,
}

/// Asks the backend for its era: writes the probe to its stdin and reads its messages until
/// one of the probe's requests is answered. The caller bounds the time.
pub(crate) async fn probe(
    stdin: &mut (impl AsyncWrite + Unpin),
    incoming: &mut Receiver<Incoming>,
    preferred: ProtocolVersion,
) -> Result<Era, String> {
    for request in probe_requests(preferred) {
        let mut line = serde_json::to_vec(&request)
            .map_err(|e| format!("could not encode the era probe: {e}"))?;
        line.push(b'\n');
        stdin
            .write_all(&line)
            .await
            .map_err(|e| format!("could not write to the process's stdin: {e}"))?;
    }
    stdin
        .flush()
        .await
        .map_err(|e| format!("could not write to the process's stdin: {e}"))?;
    while let Some(message) = incoming.next().await {
        if let Some(era) = era_from(&message) {
            return Ok(era);
        }
    }
    Err("the process closed its stdout before answering its first message".into())
}

/// `server/discover` with the client context the modern era wants, then `ping`.
fn probe_requests(preferred: ProtocolVersion) -> [ClientJsonRpcMessage; 2] {
    let mut discover = DiscoverRequest::new(DiscoverRequestParams {});
    discover
        .extensions
        .insert(RequestMetaObject::with_client_context(
            preferred,
            Implementation::new("sandgate", env!("CARGO_PKG_VERSION")),
            ClientCapabilities::default(),
        ));
    [
        ClientJsonRpcMessage::request(
            ClientRequest::DiscoverRequest(discover),
            probe_id(DISCOVER_ID),
        ),
        ClientJsonRpcMessage::request(
            ClientRequest::PingRequest(PingRequest::default()),
            probe_id(PING_ID),
        ),
    ]
}

fn probe_id(id: &str) -> RequestId {
    NumberOrString::String(id.into())
}

/// What one message says about the era, if it answers the probe.
fn era_from(message: &Incoming) -> Option<Era> {
    let (id, error_code) = match message {
        JsonRpcMessage::Response(response) => (&response.id, None),
        JsonRpcMessage::Error(error) => (error.id.as_ref()?, Some(error.error.code)),
        JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => return None,
    };
    let NumberOrString::String(id) = id else {
        return None;
    };
    match (id.as_ref(), error_code) {
        // A server that knows `server/discover`: rmcp's discover handshake negotiates the
        // version or reports why it cannot.
        (DISCOVER_ID, None) => Some(Era::Modern),
        (DISCOVER_ID, Some(code)) if is_modern_rejection(code) => Some(Era::Modern),
        (DISCOVER_ID, Some(_)) => Some(Era::Legacy),
        // The ping came back first: the discover request was ignored or is unknown.
        (PING_ID, _) => Some(Era::Legacy),
        _ => None,
    }
}

/// Errors only a modern-era server gives to `server/discover`.
fn is_modern_rejection(code: ErrorCode) -> bool {
    code == ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        || code == ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        || code == ErrorCode::HEADER_MISMATCH
}

/// The backend's messages without the answers to the probe, which may still be on their way
/// when rmcp starts its own handshake.
pub(crate) fn without_probe_answers(
    incoming: Receiver<Incoming>,
) -> impl futures::Stream<Item = Incoming> + Send + Unpin + 'static {
    incoming.filter(|message| std::future::ready(!answers_probe(message)))
}

fn answers_probe(message: &Incoming) -> bool {
    let id = match message {
        JsonRpcMessage::Response(response) => Some(&response.id),
        JsonRpcMessage::Error(error) => error.id.as_ref(),
        JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => None,
    };
    matches!(id, Some(NumberOrString::String(id)) if id.starts_with(PROBE_PREFIX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: serde_json::Value) -> Incoming {
        serde_json::from_value(json).unwrap_or_else(|e| panic!("test message: {e}"))
    }

    #[test]
    fn the_probe_answers_say_the_era() {
        let not_found = parse(serde_json::json!({"jsonrpc": "2.0", "id": DISCOVER_ID,
            "error": {"code": -32601, "message": "Method not found"}}));
        assert_eq!(era_from(&not_found), Some(Era::Legacy));
        let unsupported = parse(serde_json::json!({"jsonrpc": "2.0", "id": DISCOVER_ID,
            "error": {"code": -32022, "message": "unsupported", "data": {"supported": ["2026-09-01"]}}}));
        assert_eq!(era_from(&unsupported), Some(Era::Modern));
        let pong = parse(serde_json::json!({"jsonrpc": "2.0", "id": PING_ID, "result": {}}));
        assert_eq!(era_from(&pong), Some(Era::Legacy));
        let other = parse(serde_json::json!({"jsonrpc": "2.0", "id": 0, "result": {}}));
        assert_eq!(era_from(&other), None);
        let note = parse(
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "booting"}}),
        );
        assert_eq!(era_from(&note), None);
    }

    #[test]
    fn only_the_probes_answers_are_filtered() {
        let late = parse(serde_json::json!({"jsonrpc": "2.0", "id": DISCOVER_ID,
            "error": {"code": -32601, "message": "Method not found"}}));
        let rmcps = parse(serde_json::json!({"jsonrpc": "2.0", "id": 0,
            "error": {"code": -32601, "message": "Method not found"}}));
        let foreign = parse(serde_json::json!({"jsonrpc": "2.0", "id": "their-own", "result": {}}));
        assert!(answers_probe(&late));
        assert!(!answers_probe(&rmcps));
        assert!(!answers_probe(&foreign));
    }
}
