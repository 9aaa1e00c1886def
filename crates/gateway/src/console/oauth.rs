//! The console's login through the identity provider (`[auth.oauth.console]`): the
//! authorization code flow with PKCE.
//!
//! `GET /ui/oauth/start` sends the browser to the issuer with a fresh `state` and code
//! challenge, which the browser keeps in a short-lived `HttpOnly` cookie (`SameSite=Lax`, since
//! it must come back with the issuer's redirect; nothing is kept on the server, so any replica
//! can take the callback). `GET /ui/oauth/callback` checks that the `state` the issuer sent
//! back is the browser's own, redeems the code with the verifier, and checks the token it got
//! exactly as an MCP client's bearer token is checked. Only then does the browser get a
//! console session, of the profile the claim rules give, owned by that user, and lasting no
//! longer than the token. Every failure says why, and is an audit line.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Deserialize;

use std::time::Duration;

use super::session::{Console, CookieScope, cookie, set_session_cookie};
use crate::audit::{Decision, Subject};

/// Who refuses a login, in what the browser is shown.
const WHO: &str = "the identity provider";

/// The cookie that carries a login on its way.
const PENDING: &str = "sandgate_login";
/// How long a login may take at the issuer.
const PENDING_FOR_SECS: u64 = 600;
/// The pending login's cookie: only its callback reads it, and it must come back with the
/// issuer's redirect (a top-level navigation from another site: `Lax`).
const PENDING_SCOPE: CookieScope = CookieScope {
    path: "/ui/oauth",
    same_site: "Lax",
};

#[derive(Deserialize)]
pub(crate) struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /ui/login-options`: how the login page may log in (a token, and the identity
/// provider when one is configured for the console).
pub(crate) async fn options(State(console): State<Console>) -> Response {
    let issuer = console
        .auth()
        .console_login
        .as_ref()
        .map(|login| login.issuer().to_string());
    super::reply::json(&serde_json::json!({"issuer": issuer}))
}

/// `GET /ui/oauth/start`: to the issuer.
pub(crate) async fn start(State(console): State<Console>) -> Response {
    let Some(login) = console.auth().console_login.clone() else {
        return refusal(
            &console,
            StatusCode::NOT_FOUND,
            "this console does not log in through an identity provider ([auth.oauth.console] is not configured)",
        );
    };
    let (pending, url) = match login.start().await {
        Ok(started) => started,
        Err(e) => return refusal(&console, StatusCode::BAD_GATEWAY, &e.to_string()),
    };
    let mut response = StatusCode::FOUND.into_response();
    if let Ok(location) = HeaderValue::from_str(&url) {
        response.headers_mut().insert(header::LOCATION, location);
        console.set_cookie(
            &mut response,
            PENDING,
            &format!("{}.{}", pending.state, pending.verifier),
            PENDING_SCOPE,
            Duration::from_secs(PENDING_FOR_SECS),
        );
    }
    response
}

/// `GET /ui/oauth/callback?code=&state=`: back from the issuer.
pub(crate) async fn callback(
    State(console): State<Console>,
    headers: http::HeaderMap,
    Query(back): Query<Callback>,
) -> Response {
    let auth = console.auth();
    let (Some(login), Some(verifier)) = (auth.console_login.clone(), auth.oauth.clone()) else {
        return refusal(
            &console,
            StatusCode::NOT_FOUND,
            "this console does not log in through an identity provider",
        );
    };
    if let Some(error) = back.error {
        let said = super::reply::refused_by(WHO, &error, back.error_description);
        return refusal(&console, StatusCode::UNAUTHORIZED, &said);
    }
    let Some(pending) = pending_login(&headers) else {
        return refusal(
            &console,
            StatusCode::BAD_REQUEST,
            "this browser started no login here (or took over 10 minutes): start again from /ui",
        );
    };
    let Some(code) = super::reply::code_for_state(back.state.as_deref(), back.code, &pending.state)
    else {
        return refusal(
            &console,
            StatusCode::BAD_REQUEST,
            "the login's state does not match this browser's: start again from /ui",
        );
    };
    let token = match login.redeem(&code, &pending).await {
        Ok(token) => token,
        Err(e) => return refusal(&console, StatusCode::UNAUTHORIZED, &e.to_string()),
    };
    let identity = match verifier.verify(&token).await {
        Ok(identity) => identity,
        Err(refusal_of) => {
            let status =
                StatusCode::from_u16(refusal_of.status()).unwrap_or(StatusCode::UNAUTHORIZED);
            return refusal(&console, status, refusal_of.reason());
        }
    };
    let lifetime = identity.lifetime();
    let session = match console
        .sessions
        .start(
            identity.profile.clone(),
            identity.name(),
            identity.digest,
            Some((
                sandgate_identity::user_id_of(&identity.digest),
                identity.admission.clone(),
            )),
            lifetime,
        )
        .await
    {
        Ok(session) => session,
        Err(why) => {
            return refusal(
                &console,
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("no session could be opened ({why}); try again"),
            );
        }
    };
    let mut response = StatusCode::FOUND.into_response();
    response
        .headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static("/ui"));
    set_session_cookie(
        &console,
        &mut response,
        &session,
        lifetime.min(super::logins::LIFETIME),
    );
    console.set_cookie(&mut response, PENDING, "", PENDING_SCOPE, Duration::ZERO);
    response
}

/// The login this browser started, from its cookie.
fn pending_login(headers: &http::HeaderMap) -> Option<sandgate_identity::PendingLogin> {
    let value = cookie(headers, PENDING)?;
    let (state, verifier) = value.split_once('.')?;
    (!state.is_empty() && !verifier.is_empty()).then(|| sandgate_identity::PendingLogin {
        state: state.to_string(),
        verifier: verifier.to_string(),
    })
}

/// A failed login: its reason as plain text (the browser shows it), and an audit line.
fn refusal(console: &Console, status: StatusCode, why: &str) -> Response {
    console.gateway.door().audit().record(&Decision {
        profile: None,
        token_id: None,
        execution_id: None,
        subject: Subject::Http,
        target: "GET /ui/oauth",
        allowed: false,
        rule: why,
        arguments: None,
        asked: false,
    });
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("The console login did not succeed: {why}\n"),
    )
        .into_response()
}
