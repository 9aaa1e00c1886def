//! What operators and orchestrators ask the HTTP listener besides MCP: `/healthz` (the process
//! answers), `/readyz` (every enabled backend has had its first connection attempt) and
//! `/metrics` (Prometheus text). The probes need no token and say nothing about the backends
//! beyond a count; `/metrics` names backends and tools, so it takes a token of an admin
//! profile (or none, when auth is off).

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::caller::Authenticated;
use crate::gateway::Gateway;

/// `/healthz`: the gateway is alive and answering.
pub(crate) async fn healthz() -> Response {
    (
        StatusCode::OK,
        [(http::header::CONTENT_TYPE, "text/plain")],
        "ok\n",
    )
        .into_response()
}

/// `/readyz`: 200 once every enabled backend has had its first connection attempt (whether it
/// connected or not), 503 before.
pub(crate) async fn readyz(State(gateway): State<Arc<Gateway>>) -> Response {
    let (ready, starting) = gateway.readiness();
    let (status, body) = if gateway.draining() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: shutting down (finishing what it has)\n".to_string(),
        )
    } else if ready {
        (StatusCode::OK, "ready\n".to_string())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: {starting} backend(s) are still on their first connection attempt\n"
            ),
        )
    };
    (status, [(http::header::CONTENT_TYPE, "text/plain")], body).into_response()
}

/// `/metrics`: the Prometheus text, for an admin profile's token.
pub(crate) async fn metrics(
    State(gateway): State<Arc<Gateway>>,
    who: Option<Extension<Authenticated>>,
) -> Response {
    if let Some(Extension(who)) = who
        && !gateway.profile(&who.profile).admin
    {
        return (
            StatusCode::FORBIDDEN,
            [(http::header::CONTENT_TYPE, "text/plain")],
            format!(
                "forbidden: /metrics names every backend and tool, so it needs a token of an admin profile; profile `{}` is not (set admin = true in its [profiles] entry, or give the scraper another token)\n",
                who.profile
            ),
        )
            .into_response();
    }
    (
        StatusCode::OK,
        [(
            http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        gateway.metrics_text(),
    )
        .into_response()
}

/// While the gateway drains, every response closes its connection: a balancer's kept-alive
/// connections end cleanly, one response at a time, before the listener closes, rather than
/// being cut under a request.
pub(crate) async fn close_while_draining(
    State(gateway): State<Arc<Gateway>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let mut response = next.run(request).await;
    if gateway.draining() {
        response.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
    response
}
