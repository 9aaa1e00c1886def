//! The streamable HTTP front, as an axum app.
//!
//! It serves 2025-11-25 sessions and stateless 2026-07-28 on one endpoint (`/mcp`). It binds to
//! loopback unless told otherwise, and refuses requests whose `Host` is not an allowed name
//! (DNS rebinding) or whose `Origin` is not an allowed browser origin.

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::{Gateway, GatewayError, SandgateServer};

/// Host names always accepted: loopback.
const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "::1", "[::1]"];
/// Browser origins always accepted: pages served from loopback.
const LOOPBACK_ORIGINS: &[&str] = &["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// HTTP front settings.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Address to bind.
    pub addr: SocketAddr,
    /// Extra accepted `Host` values (beyond loopback).
    pub allowed_hosts: Vec<String>,
    /// Extra accepted `Origin` values (beyond loopback pages).
    pub allowed_origins: Vec<String>,
}

/// Cancelled when the HTTP response to a request is gone: sent in full, or dropped because the
/// client went away. The handler reads it from the request's parts, so an execution whose
/// client disconnected is cancelled like one the client cancelled.
#[derive(Debug, Clone)]
pub(crate) struct ResponseGone(pub CancellationToken);

/// Gives each request a [`ResponseGone`] token, cancelled when its response body is dropped.
async fn watch_disconnect(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let token = CancellationToken::new();
    request.extensions_mut().insert(ResponseGone(token.clone()));
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    let guard = token.drop_guard();
    let body = axum::body::Body::from_stream(futures::StreamExt::map(
        body.into_data_stream(),
        move |chunk| {
            let _alive = &guard;
            chunk
        },
    ));
    axum::response::Response::from_parts(parts, body)
}

/// Binds and serves until `shutdown` is cancelled. Returns the bound address through `bound`
/// (useful with port 0) before serving.
pub async fn serve_http(
    gateway: Arc<Gateway>,
    options: HttpOptions,
    shutdown: CancellationToken,
    bound: impl FnOnce(SocketAddr),
) -> Result<(), GatewayError> {
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|source| GatewayError::Bind {
            addr: options.addr,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| GatewayError::Bind {
        addr: options.addr,
        source,
    })?;
    let hosts: Vec<String> = LOOPBACK_HOSTS
        .iter()
        .map(|h| h.to_string())
        .chain(options.allowed_hosts.iter().cloned())
        .collect();
    let origins: Vec<String> = LOOPBACK_ORIGINS
        .iter()
        .map(|o| o.to_string())
        .chain(options.allowed_origins.iter().cloned())
        .collect();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_cancellation_token(shutdown.child_token());
    let service = StreamableHttpService::new(
        move || Ok(SandgateServer::new(gateway.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(watch_disconnect));
    bound(addr);
    // Without TCP_NODELAY a response written in two pieces waits for the client's delayed
    // ACK: about 40 ms per request on a keep-alive connection.
    let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY on an accepted connection: {e}");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
        .await
        .map_err(|e| GatewayError::Serve(e.to_string()))
}
