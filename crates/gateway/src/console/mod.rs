//! The web console at `/ui`: backends, tools, executions with their call timeline, a
//! playground and statistics, served by `sandgate serve --http` on the same listener.
//!
//! It is one page (`assets/`, embedded in the binary: no CDN, no build step) that talks to a
//! JSON API under `/ui/api`. Every string on the page comes from untrusted parties (tool
//! names, descriptions, results, logs, errors), so the page only ever sets text, never markup,
//! and every answer carries a strict Content-Security-Policy with no inline script. A token
//! entered once becomes a session cookie (`HttpOnly`, `SameSite=Strict`, a random id kept
//! here, never the token); every state-changing request must come from the console's own
//! origin. A profile sees its own executions and tools; an admin profile sees everything.

mod api;
mod approvals;
mod connect;
mod credentials;
mod logins;
mod oauth;
mod pins;
mod reply;
mod session;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderValue, StatusCode, header};

pub(crate) use logins::Logins;
pub(crate) use session::Console;

/// The page and its two files, embedded.
const INDEX_HTML: &str = include_str!("assets/index.html");
/// The page's modules: `app.js` signs in and routes, the others are what it imports.
const SCRIPTS: [(&str, &str); 4] = [
    ("app.js", include_str!("assets/app.js")),
    ("ui.js", include_str!("assets/ui.js")),
    ("runs.js", include_str!("assets/runs.js")),
    ("access.js", include_str!("assets/access.js")),
];
const APP_CSS: &str = include_str!("assets/app.css");

/// No script but the console's own file, no inline anything, nothing framed, no plugins.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The console's routes, to merge into the HTTP app (outside the bearer-token layer: the
/// console has its own login).
pub(crate) fn router(console: Console) -> Router {
    let api = Router::new()
        .route("/ui/api/me", get(api::me))
        .route("/ui/api/backends", get(api::backends))
        .route("/ui/api/tools", get(api::tools))
        .route("/ui/api/tool", get(api::tool))
        .route("/ui/api/executions", get(api::executions))
        .route("/ui/api/execution", get(api::execution))
        .route("/ui/api/output", get(api::output))
        .route("/ui/api/run", post(api::run))
        .route("/ui/api/stats", get(api::stats))
        .route("/ui/api/events", get(api::events))
        .route(
            "/ui/api/credentials",
            get(credentials::list)
                .put(credentials::set)
                .delete(credentials::remove),
        )
        .route("/ui/api/pins", get(pins::list).post(pins::decide))
        .route("/ui/connect/start", get(connect::start))
        .route("/ui/api/pins/diff", get(pins::diff))
        .route(
            "/ui/api/approvals",
            get(approvals::list).post(approvals::answer),
        )
        .route("/ui/logout", post(session::logout))
        .layer(axum::middleware::from_fn_with_state(
            console.clone(),
            session::require_session,
        ));
    scripts(Router::new())
        .route("/ui", get(index))
        .route("/ui/", get(index))
        .route("/ui/app.css", get(style))
        .route("/ui/login", post(session::login))
        .route("/ui/login-options", get(oauth::options))
        .route("/ui/oauth/start", get(oauth::start))
        .route("/ui/oauth/callback", get(oauth::callback))
        .route("/ui/connect/callback", get(connect::callback))
        .merge(api)
        .layer(axum::middleware::from_fn_with_state(
            console.clone(),
            same_origin_writes,
        ))
        .layer(axum::middleware::from_fn(security_headers))
        .with_state(console)
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// The page's modules, each at `/ui/<file>`.
fn scripts<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    SCRIPTS.iter().fold(router, |router, (file, source)| {
        router.route(
            &format!("/ui/{file}"),
            get(move || async move { asset("text/javascript; charset=utf-8", source) }),
        )
    })
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// Every console answer: the CSP, no sniffing, no framing, no referrer.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// A request that changes state (anything but GET and HEAD) must carry an `Origin` that is
/// the console's own (the scheme and `Host` it was reached at) or an allowed one: another
/// site's page cannot log in, run code or log out on the user's behalf.
async fn same_origin_writes(
    State(console): State<Console>,
    request: Request,
    next: Next,
) -> Response {
    if matches!(request.method(), &http::Method::GET | &http::Method::HEAD) {
        return next.run(request).await;
    }
    let headers = request.headers();
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .unwrap_or("");
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let own = !host.is_empty()
        && (origin == format!("http://{host}") || origin == format!("https://{host}"));
    if own || console.allowed_origins.iter().any(|o| o == origin) {
        return next.run(request).await;
    }
    reply::problem(
        StatusCode::FORBIDDEN,
        "this request must come from the console's own page (its Origin is missing or another site's)",
    )
}
