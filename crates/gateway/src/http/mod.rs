//! The streamable HTTP front, as an axum app.
//!
//! It serves 2025-11-25 sessions and stateless 2026-07-28 on one endpoint (`/mcp`). It binds to
//! loopback unless told otherwise, and on every route but the health probes refuses requests
//! whose `Host` is not an allowed name (DNS rebinding) or whose `Origin` is not an allowed
//! browser origin (`front`). Clients are untrusted:
//! connections are capped and timed (`accept`), every request is checked before rmcp sees it
//! (`guard`), and sessions are capped and expire when idle. A response given before its
//! request's body was read closes its connection, and says so (`unread`). Every request needs a bearer
//! token unless auth is off (`auth`), except the health probes (`probes`).

mod accept;
pub(crate) mod auth;
mod bound;
mod front;
mod guard;
mod probes;
mod restore;
mod unread;

pub use auth::{HttpAuthOptions, HttpTokens, KnownToken, sha256};

use std::net::SocketAddr;
use std::sync::Arc;

use axum::response::IntoResponse;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sandgate_config::HttpLimits;
use tokio_util::sync::CancellationToken;

use crate::error::GatewayError;
use crate::gateway::Gateway;
use crate::mcp::SandgateServer;

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
    /// Connection, time and session limits.
    pub limits: HttpLimits,
    /// Who may connect (keep a clone to replace the tokens on a reload).
    pub auth: HttpTokens,
    /// Whether browsers reach the gateway over https: the console's cookies are then `Secure`.
    pub secure_cookies: bool,
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
        .map_err(|cause| GatewayError::Bind {
            addr: options.addr,
            cause,
        })?;
    let addr = listener.local_addr().map_err(|cause| GatewayError::Bind {
        addr: options.addr,
        cause,
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
    let front = Arc::new(front::Front::new(&hosts, origins.clone()));
    let limits = options.limits;
    let trimmed_gateway = gateway.clone();
    let McpRoutes {
        mcp,
        sessions,
        owners,
        check,
    } = mcp_routes(gateway, &options, &shutdown, hosts, origins);
    // Where clients find the issuer (RFC 9728): no token needed, and the Host check applies.
    let metadata = axum::Router::new()
        .route(
            "/.well-known/oauth-protected-resource",
            axum::routing::get(auth::resource_metadata),
        )
        .route(
            "/.well-known/oauth-protected-resource/{*resource}",
            axum::routing::get(auth::resource_metadata),
        )
        .with_state(check.clone());
    let with_token = axum::Router::new()
        .route("/metrics", axum::routing::get(probes::metrics))
        .with_state(trimmed_gateway.clone())
        .merge(mcp)
        .layer(axum::middleware::from_fn_with_state(
            check,
            auth::require_token,
        ));
    let console = crate::console::router(crate::console::Console {
        gateway: trimmed_gateway.clone(),
        tokens: options.auth.clone(),
        sessions: Arc::new(crate::console::Logins::new(
            trimmed_gateway.chain_store().and_then(|s| s.shared()),
        )),
        allowed_origins: Arc::new(options.allowed_origins.clone()),
        secure_cookies: options.secure_cookies,
    });
    // Every route but the probes passes the same Host and Origin check, first.
    let checked = console
        .merge(metadata)
        .merge(with_token)
        .layer(axum::middleware::from_fn_with_state(front, front::check));
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(probes::healthz))
        .route("/readyz", axum::routing::get(probes::readyz))
        .with_state(trimmed_gateway.clone())
        .merge(checked)
        .layer(axum::middleware::from_fn_with_state(
            trimmed_gateway.clone(),
            probes::close_while_draining,
        ))
        .layer(axum::middleware::from_fn(unread::close_if_unread));
    tokio::spawn(trim_after_sessions_expire(
        trimmed_gateway,
        options.auth.clone(),
        sessions,
        owners,
        shutdown.clone(),
    ));
    bound(addr);
    accept::accept_loop(listener, app, limits, shutdown).await;
    Ok(())
}

/// The MCP endpoint's routes, with the sessions they keep and who owns each.
struct McpRoutes {
    mcp: axum::Router,
    sessions: Arc<LocalSessionManager>,
    owners: Arc<bound::SessionOwners>,
    check: Arc<auth::TokenCheck>,
}

/// `/mcp`: rmcp's streamable HTTP service behind the request guard and the session binding,
/// its sessions shared through the store when it is shared.
fn mcp_routes(
    gateway: Arc<Gateway>,
    options: &HttpOptions,
    shutdown: &CancellationToken,
    hosts: Vec<String>,
    origins: Vec<String>,
) -> McpRoutes {
    // A 2026-07-28 request whose answer is its only message is answered as plain JSON, not
    // as a one-event stream (an answer after progress notices is still a stream).
    let config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_cancellation_token(shutdown.child_token());
    let limits = options.limits;
    // On a shared store, a session any replica opened can be continued on this one.
    let shared = gateway
        .chain_store()
        .and_then(|s| s.shared())
        .map(|store| (store, limits.session_idle_timeout));
    let mut config = config;
    config.session_store = shared.clone().map(|(store, ttl)| {
        Arc::new(restore::SharedSessionStore { store, ttl })
            as Arc<dyn rmcp::transport::streamable_http_server::session::store::SessionStore>
    });
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(limits.session_idle_timeout);
    let sessions = Arc::new(manager);
    let trimmed_gateway = gateway.clone();
    // Behind an `Arc`: axum clones what serves a route for every request, and every middleware
    // clones what it wraps, and rmcp's service copies its whole config when cloned.
    let service = Arc::new(StreamableHttpService::new(
        move || Ok(SandgateServer::new(gateway.clone())),
        sessions.clone(),
        config,
    ));
    let mcp_service = move |request: axum::extract::Request| {
        let service = service.clone();
        async move { service.handle(request).await.into_response() }
    };
    let guard = guard::RequestGuard::new(
        trimmed_gateway.clone(),
        limits.body_timeout,
        limits.max_sessions,
        sessions.clone(),
        shared.is_some(),
    );
    let check = Arc::new(auth::TokenCheck {
        tokens: options.auth.clone(),
        gateway: trimmed_gateway.clone(),
    });
    // The token check is the outer layer: a request without a valid token is refused before
    // its body is read. The probes need no token (see `probes`).
    let owners = bound::SessionOwners::new(sessions.clone(), shared);
    tokio::spawn(owners.clone().follow_notices(shutdown.clone()));
    let mcp = axum::Router::new()
        .route("/mcp", axum::routing::any(mcp_service.clone()))
        .route("/mcp/{*rest}", axum::routing::any(mcp_service))
        .layer(axum::middleware::from_fn_with_state(guard, guard::guard))
        .layer(axum::middleware::from_fn_with_state(
            owners.clone(),
            bound::bind,
        ));
    McpRoutes {
        mcp,
        sessions,
        owners,
        check,
    }
}

/// Drops what closed sessions left behind, closes sessions whose token is no longer accepted,
/// and, after many closed (each holds tens of KB), hands the memory back to the kernel: so the
/// gateway returns near its baseline once a burst of sessions expires.
async fn trim_after_sessions_expire(
    gateway: Arc<Gateway>,
    tokens: HttpTokens,
    sessions: Arc<LocalSessionManager>,
    owners: Arc<bound::SessionOwners>,
    stop: CancellationToken,
) {
    const CLOSED_BEFORE_TRIM: usize = 100;
    let mut high = 0usize;
    loop {
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
            () = stop.cancelled() => return,
        }
        let auth = tokens.current();
        owners.sweep(|digest| auth.still_owns(digest)).await;
        let open = sessions.sessions.read().await.len();
        gateway.clients().forget_closed();
        high = high.max(open);
        if high >= open + CLOSED_BEFORE_TRIM {
            high = open;
            let _ = tokio::task::spawn_blocking(sandgate_sandbox::region::return_free_memory).await;
        }
    }
}
