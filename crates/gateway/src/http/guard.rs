//! What every HTTP request passes before rmcp's service sees it.
//!
//! - A POST body must arrive within `http.body_timeout` (408) and hold at most 4 MiB (413).
//! - It must be one JSON-RPC message: text that is not JSON, or JSON nested past serde's
//!   128 levels, gets 400 with JSON-RPC -32700; a batch (`[...]`) or a non-object gets 400
//!   with -32600 (rmcp answered 415, or nothing, before).
//! - A request that reuses the id of one still in flight in the same session gets 400 with
//!   -32600 (rmcp used to answer neither).
//! - An `initialize` that would open a session past `http.max_sessions` gets 503 while the
//!   open sessions keep working.
//! - Every response body carries a [`ResponseGone`] token, cancelled when the body is dropped
//!   (sent in full, or the client went away), so an execution whose client left is cancelled;
//!   a client that left early is logged at debug level.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use hyper::body::{Frame, SizeHint};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Map, Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::gateway::Gateway;
use crate::mcp::direct;
use crate::runtime::ResponseGone;

/// The largest request body accepted (rmcp's own limit).
pub(crate) const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// The request checks' settings and state.
pub(crate) struct RequestGuard {
    /// Answers plain stateless tool calls itself (`mcp::direct`).
    pub gateway: Arc<Gateway>,
    pub body_timeout: Duration,
    pub max_sessions: usize,
    pub sessions: Arc<LocalSessionManager>,
    /// Whether sessions live in a store other replicas share.
    pub shared: bool,
    /// (session id, request id as JSON) of requests whose response is not done yet.
    in_flight: Arc<Mutex<HashSet<(String, String)>>>,
}

impl RequestGuard {
    pub(crate) fn new(
        gateway: Arc<Gateway>,
        body_timeout: Duration,
        max_sessions: usize,
        sessions: Arc<LocalSessionManager>,
        shared: bool,
    ) -> Arc<RequestGuard> {
        Arc::new(RequestGuard {
            gateway,
            body_timeout,
            max_sessions,
            sessions,
            shared,
            in_flight: Arc::default(),
        })
    }
}

/// A JSON-RPC error as an HTTP response.
pub(crate) fn rpc_error(status: StatusCode, id: Value, code: i32, message: String) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    (
        status,
        [(http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// `DELETE` of a session: 404 for a session that is not open (it used to answer 202 as if it
/// were), and 204 once it is closed (clients such as the Python SDK expect 200 or 204, not 202).
async fn end_session(guard: &RequestGuard, request: Request, next: Next) -> Response {
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    // On a shared store the session may be open on another replica only: `bound` found it
    // there, with this request's token, and rmcp ends it everywhere.
    if let Some(id) = &session
        && !guard.shared
        && !guard
            .sessions
            .sessions
            .read()
            .await
            .contains_key(id.as_str())
    {
        return no_session(id);
    }
    let response = next.run(request).await;
    if response.status() == StatusCode::ACCEPTED {
        return StatusCode::NO_CONTENT.into_response();
    }
    response
}

/// What a request naming a session that is not open (to its token) gets.
pub(crate) fn no_session(id: &str) -> Response {
    rpc_error(
        StatusCode::NOT_FOUND,
        Value::Null,
        -32001,
        format!(
            "no open session {:?}: it expired or was already closed",
            id.chars().take(64).collect::<String>()
        ),
    )
}

/// The middleware (see the module docs).
pub(crate) async fn guard(
    State(guard): State<Arc<RequestGuard>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == http::Method::DELETE {
        return end_session(&guard, request, next).await;
    }
    let gone = CancellationToken::new();
    let mut request = request;
    request.extensions_mut().insert(ResponseGone(gone.clone()));
    let mut in_flight_key = None;
    if request.method() == http::Method::POST {
        let (parts, body) = request.into_parts();
        let bytes = match tokio::time::timeout(
            guard.body_timeout,
            axum::body::to_bytes(body, MAX_BODY_BYTES),
        )
        .await
        {
            Err(_) => {
                return rpc_error(
                    StatusCode::REQUEST_TIMEOUT,
                    Value::Null,
                    -32600,
                    format!(
                        "the request body did not arrive within {:?} (http.body_timeout)",
                        guard.body_timeout
                    ),
                );
            }
            Ok(Err(_)) => {
                return rpc_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    Value::Null,
                    -32600,
                    format!(
                        "the request body is over {MAX_BODY_BYTES} bytes, or was cut off; send one smaller message"
                    ),
                );
            }
            Ok(Ok(bytes)) => bytes,
        };
        let session = parts
            .headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let message = match check_message(&guard, &bytes, session).await {
            Ok((key, message)) => {
                in_flight_key = key;
                message
            }
            Err(response) => return *response,
        };
        if let Some(call) = direct::direct_call(&parts.headers, message) {
            let body = direct::answer(&guard.gateway, &parts, call, gone.clone()).await;
            let answer = ([(http::header::CONTENT_TYPE, "application/json")], body).into_response();
            return watched(answer, &guard, gone, in_flight_key);
        }
        request = Request::from_parts(parts, Body::from(bytes));
    }
    let response = next.run(request).await;
    watched(response, &guard, gone, in_flight_key)
}

/// `response` with its body [`Watched`].
fn watched(
    response: Response,
    guard: &RequestGuard,
    gone: CancellationToken,
    in_flight_key: Option<(String, String)>,
) -> Response {
    let release = in_flight_key.map(|key| InFlight {
        set: guard.in_flight.clone(),
        key,
    });
    let (parts, body) = response.into_parts();
    let watched = Watched {
        inner: body,
        finished: false,
        _gone: gone.drop_guard(),
        _in_flight: release,
    };
    Response::from_parts(parts, Body::new(watched))
}

/// Checks one POST body; on success, the in-flight key of a request in a session, and the
/// message.
async fn check_message(
    guard: &RequestGuard,
    bytes: &Bytes,
    session: Option<String>,
) -> Result<(Option<(String, String)>, Map<String, Value>), Box<Response>> {
    let message: Value = serde_json::from_slice(bytes).map_err(|e| {
        Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32700,
            format!("Parse error: the body is not one JSON value sandgate can read ({e})"),
        ))
    })?;
    let Value::Object(message) = message else {
        let why = if message.is_array() {
            "a JSON-RPC batch; MCP (2025-06-18 and later) takes one message per request"
        } else {
            "not a JSON-RPC message (an object)"
        };
        return Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32600,
            format!("Invalid request: the body is {why}"),
        )));
    };
    let id = message.get("id").cloned();
    let method = message.get("method").and_then(Value::as_str);
    if method == Some("initialize") && session.is_none() {
        let open = guard.sessions.sessions.read().await.len();
        if open >= guard.max_sessions {
            let mut response = rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                id.unwrap_or(Value::Null),
                -32000,
                format!(
                    "sandgate has {open} open sessions, its limit (http.max_sessions); close idle sessions with DELETE, or retry in a few seconds"
                ),
            );
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("5"),
            );
            return Err(Box::new(response));
        }
    }
    let (Some(session), Some(id), Some(_)) = (session, id, method) else {
        return Ok((None, message));
    };
    let key = (session, id.to_string());
    let fresh = guard
        .in_flight
        .lock()
        .map(|mut set| set.insert(key.clone()))
        .unwrap_or(true);
    if !fresh {
        return Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            -32600,
            format!(
                "Invalid request: id {} is already in use by a request of this session that has not been answered; give every request its own id",
                key.1
            ),
        )));
    }
    Ok((Some(key), message))
}

/// Removes a request from the in-flight set when its response is done.
struct InFlight {
    set: Arc<Mutex<HashSet<(String, String)>>>,
    key: (String, String),
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut set) = self.set.lock() {
            set.remove(&self.key);
        }
    }
}

/// A response body that, when dropped, cancels its request's [`ResponseGone`] token, frees its
/// in-flight id, and logs (at debug level) a client that left before the end. It keeps the
/// inner body's size, so a JSON answer still goes out with its `Content-Length` in one write
/// (as a stream it went out chunked).
struct Watched {
    inner: Body,
    finished: bool,
    _gone: DropGuard,
    _in_flight: Option<InFlight>,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let next = Pin::new(&mut self.inner).poll_frame(cx);
        if super::unread::ended(&next, &self.inner) {
            self.finished = true;
        }
        next
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if !self.finished {
            tracing::debug!("an HTTP client went away before its response was complete");
        }
    }
}
