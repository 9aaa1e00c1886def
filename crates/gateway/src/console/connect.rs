//! Signing in to a backend from the console (a per-user backend with `oauth`): the user, logged
//! in, presses Connect (or opens the link a waiting script's question gave them), and is sent
//! to the backend's authorization server; it sends them back here, on any replica, with a code
//! that becomes their tokens, sealed as their credential for the backend (`crate::signin`).
//!
//! `GET /ui/connect/start?backend=` needs a console session, which says whose sign-in it is.
//! The state, PKCE verifier and backend ride in a cookie (`HttpOnly`, `SameSite=Lax`: it must
//! come back with the server's redirect, which the session's `Strict` cookie does not) sealed
//! with the `[credentials]` key for that owner, so the callback knows whose sign-in it ends
//! without a session, any replica can open it, and a cookie altered to name another owner
//! opens for nobody. `GET /ui/connect/callback` checks that the `state` the server sent back is
//! the browser's own, redeems the code, keeps the tokens, and says so in the audit log.

use std::time::Duration;

use axum::extract::{Extension, Query, State};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{HeaderValue, StatusCode, header};
use serde::{Deserialize, Serialize};

use super::api::caller;
use super::reply::cut;
use super::session::{Console, ConsoleUser, CookieScope, cookie};
use crate::audit::{Decision, Subject};
use crate::credentials::owner_of;

/// Who refuses a sign-in, in what the browser is shown.
const WHO: &str = "the backend's authorization server";

/// The cookie that carries a sign-in on its way.
const PENDING: &str = "sandgate_connect";
/// How long a sign-in may take at the server.
const PENDING_FOR_MS: i64 = 600_000;
/// Only the callback reads it; it comes back with the server's redirect (`Lax`).
const PENDING_SCOPE: CookieScope = CookieScope {
    path: "/ui/connect",
    same_site: "Lax",
};
/// What the sealed cookie is for (the vault binds it to this and the owner).
const PURPOSE: &str = "sign-in";

#[derive(Deserialize)]
pub(crate) struct Start {
    backend: String,
    scope: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// What the cookie seals.
#[derive(Serialize, Deserialize)]
struct Pending {
    backend: String,
    state: String,
    verifier: String,
    until_ms: i64,
}

/// `GET /ui/connect/start?backend=[&scope=]`: to the backend's authorization server.
pub(crate) async fn start(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
    Query(start): Query<Start>,
) -> Response {
    let credentials = match credentials_of(&console) {
        Ok(credentials) => credentials,
        Err(refused) => return *refused,
    };
    let Some(signins) = credentials
        .sign_ins()
        .filter(|s| s.has(&start.backend))
        .cloned()
    else {
        return refusal(
            &console,
            StatusCode::NOT_FOUND,
            &format!(
                "backend `{}` takes no sign-in (it is not a per-user backend with oauth)",
                cut(&start.backend)
            ),
        );
    };
    let owner = owner_of(&caller(&console, &user));
    let scope = start.scope.as_deref().filter(|s| s.len() <= 1000);
    let (pending, url) = match signins
        .start(credentials.as_ref(), &start.backend, scope)
        .await
    {
        Ok(started) => started,
        Err(why) => return refusal(&console, StatusCode::BAD_GATEWAY, &why),
    };
    let sealed = serde_json::to_string(&Pending {
        backend: start.backend.clone(),
        state: pending.state,
        verifier: pending.verifier,
        until_ms: sandgate_store::now_ms() + PENDING_FOR_MS,
    })
    .map_err(|e| e.to_string())
    .and_then(|text| credentials.seal_for(&owner, PURPOSE, &text));
    let sealed = match sealed {
        Ok(sealed) => sealed,
        Err(why) => return refusal(&console, StatusCode::INTERNAL_SERVER_ERROR, &why),
    };
    let mut response = StatusCode::FOUND.into_response();
    let Ok(location) = HeaderValue::from_str(&url) else {
        return refusal(
            &console,
            StatusCode::BAD_GATEWAY,
            "the authorization URL is not a URL",
        );
    };
    response.headers_mut().insert(header::LOCATION, location);
    console.set_cookie(
        &mut response,
        PENDING,
        &format!("{}.{sealed}", URL_SAFE_NO_PAD.encode(owner.as_bytes())),
        PENDING_SCOPE,
        Duration::from_millis(PENDING_FOR_MS as u64),
    );
    response
}

/// `GET /ui/connect/callback?code=&state=`: back from the backend's authorization server.
pub(crate) async fn callback(
    State(console): State<Console>,
    headers: http::HeaderMap,
    Query(back): Query<Callback>,
) -> Response {
    let credentials = match credentials_of(&console) {
        Ok(credentials) => credentials,
        Err(refused) => return *refused,
    };
    let Some(signins) = credentials.sign_ins().cloned() else {
        return refusal(
            &console,
            StatusCode::NOT_FOUND,
            "no backend here takes a sign-in",
        );
    };
    if let Some(error) = back.error {
        let said = super::reply::refused_by(WHO, &error, back.error_description);
        return refusal(&console, StatusCode::UNAUTHORIZED, &said);
    }
    let opened = cookie(&headers, PENDING).and_then(|value| {
        let (owner, sealed) = value.split_once('.')?;
        let owner = String::from_utf8(URL_SAFE_NO_PAD.decode(owner).ok()?).ok()?;
        let text = credentials.open_for(&owner, PURPOSE, sealed).ok()?;
        let pending: Pending = serde_json::from_str(&text).ok()?;
        (pending.until_ms > sandgate_store::now_ms()).then_some((owner, pending))
    });
    let Some((owner, pending)) = opened else {
        return refusal(
            &console,
            StatusCode::BAD_REQUEST,
            "this browser started no sign-in here (or took over 10 minutes): press Connect again in the console",
        );
    };
    let Some(code) = super::reply::code_for_state(back.state.as_deref(), back.code, &pending.state)
    else {
        return refusal(
            &console,
            StatusCode::BAD_REQUEST,
            "the sign-in's state does not match this browser's: press Connect again in the console",
        );
    };
    let signed = sandgate_identity::PendingLogin {
        state: pending.state,
        verifier: pending.verifier,
    };
    if let Err(why) = signins
        .finish(
            credentials.as_ref(),
            &owner,
            &pending.backend,
            &code,
            &signed,
        )
        .await
    {
        return refusal(&console, StatusCode::BAD_GATEWAY, &why);
    }
    audit(&console, &owner, &pending.backend, true, "signed in");
    let mut response = StatusCode::FOUND.into_response();
    response.headers_mut().insert(
        header::LOCATION,
        HeaderValue::from_static("/ui#/credentials"),
    );
    console.set_cookie(&mut response, PENDING, "", PENDING_SCOPE, Duration::ZERO);
    response
}

/// Where this gateway keeps users' credentials, or the answer that it keeps none.
fn credentials_of(
    console: &Console,
) -> Result<std::sync::Arc<crate::credentials::Credentials>, Box<Response>> {
    console
        .gateway
        .door()
        .credentials()
        .cloned()
        .ok_or_else(|| {
            Box::new(refusal(
                console,
                StatusCode::NOT_FOUND,
                "this gateway keeps no credentials",
            ))
        })
}

/// An audit line about `owner`'s sign-in to `backend`.
fn audit(console: &Console, owner: &str, backend: &str, allowed: bool, rule: &str) {
    console.gateway.door().audit().record(&Decision {
        profile: None,
        token_id: Some(owner),
        execution_id: None,
        subject: Subject::Http,
        target: &format!("sign-in to {backend}"),
        allowed,
        rule,
        arguments: None,
        asked: false,
    });
}

/// A failed sign-in: its reason as plain text (the browser shows it), and an audit line.
fn refusal(console: &Console, status: StatusCode, why: &str) -> Response {
    audit(console, "unknown", "a backend", false, why);
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("The sign-in did not succeed: {why}\n"),
    )
        .into_response()
}
