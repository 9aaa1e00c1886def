//! Console sessions: a token entered once is checked like a bearer token and becomes a random
//! session id in an `HttpOnly`, `SameSite=Strict` cookie. The token itself is never stored or
//! sent back. Sessions are capped and expire; where they are kept is `logins`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Deserialize;

use super::logins::{LIFETIME, Logins};
use super::reply::{json, problem};
use crate::audit::{Decision, Subject};
use crate::gateway::Gateway;
use crate::http::auth::{HttpAuthOptions, HttpTokens, identify};

/// What the console's handlers share.
#[derive(Clone)]
pub(crate) struct Console {
    pub gateway: Arc<Gateway>,
    /// Who may use the HTTP front now (a reload may change the tokens).
    pub tokens: HttpTokens,
    pub sessions: Arc<Logins>,
    /// Origins other than the request's own that may change state (`[http] allowed_origins`).
    pub allowed_origins: Arc<Vec<String>>,
    /// Whether browsers reach the gateway over https, so its cookies are `Secure`.
    pub secure_cookies: bool,
}

impl Console {
    /// Who may use the HTTP front now (a reload may change the tokens).
    pub(crate) fn auth(&self) -> Arc<HttpAuthOptions> {
        self.tokens.current()
    }

    /// Puts cookie `name` on `response` (`value` empty and `max_age` 0 clear it): always
    /// `HttpOnly`, and `Secure` whenever the gateway is reached over https, so neither a
    /// session nor a login's PKCE verifier ever travels in clear text.
    pub(crate) fn set_cookie(
        &self,
        response: &mut Response,
        name: &str,
        value: &str,
        attributes: CookieScope,
        max_age: Duration,
    ) {
        let CookieScope { path, same_site } = attributes;
        let secure = if self.secure_cookies { "; Secure" } else { "" };
        let cookie = format!(
            "{name}={value}; Path={path}; HttpOnly; SameSite={same_site}; Max-Age={}{secure}",
            max_age.as_secs()
        );
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
}

/// Where a cookie goes and from which sites it comes back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CookieScope {
    pub path: &'static str,
    pub same_site: &'static str,
}

/// The session cookie's scope: the console, from its own pages only.
const SESSION_SCOPE: CookieScope = CookieScope {
    path: "/ui",
    same_site: "Strict",
};

/// The cookie's name.
const COOKIE: &str = "sandgate_console";

/// Who a console request acts as.
#[derive(Debug, Clone)]
pub(crate) struct ConsoleUser {
    /// The profile.
    pub profile: String,
    /// The token's id, when one was entered.
    pub token_id: Option<String>,
    /// The session's id (stored outputs of its playground runs are keyed by it).
    pub session: String,
    /// The user an identity provider proved, for a login through it (see
    /// `sandgate_identity::user_id_of`): its records and credentials are its own.
    pub user: Option<String>,
    /// What admitted that user (its issuer and claims), asked of the live config again on
    /// every request.
    pub admission: Option<Arc<sandgate_identity::Admission>>,
}

impl ConsoleUser {
    /// Who this console user is: the same principal as over MCP (a token's id, a user's id),
    /// so what it asked there it cannot answer here.
    pub(crate) fn principal(&self) -> crate::caller::Principal {
        crate::caller::Principal::proved(self.user.as_deref(), self.token_id.as_deref(), false)
    }
}

#[derive(Deserialize)]
pub(crate) struct Login {
    token: String,
}

/// `POST /ui/login {"token": "..."}`: a session cookie for a valid token.
pub(crate) async fn login(
    State(console): State<Console>,
    axum::Json(body): axum::Json<Login>,
) -> Response {
    let mut headers = http::HeaderMap::new();
    let Ok(value) = HeaderValue::from_str(&format!("Bearer {}", body.token.trim())) else {
        return problem(StatusCode::UNAUTHORIZED, "that is not a token");
    };
    headers.insert(header::AUTHORIZATION, value);
    let auth = console.auth();
    let known = match identify(&auth, &headers) {
        Ok(known) => known,
        Err(why) => {
            console.gateway.door().audit().record(&Decision {
                profile: None,
                token_id: None,
                execution_id: None,
                subject: Subject::Http,
                target: "POST /ui/login",
                allowed: false,
                rule: why,
                arguments: None,
                asked: false,
            });
            return problem(
                StatusCode::UNAUTHORIZED,
                "that token is not one this gateway knows: use a token from [[http.tokens]], or the one sandgate generated and printed at its first start",
            );
        }
    };
    let id = match console
        .sessions
        .start(
            known.profile.clone(),
            known.id.clone(),
            known.digest,
            None,
            LIFETIME,
        )
        .await
    {
        Ok(id) => id,
        Err(why) => {
            return problem(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("no session could be opened ({why}); try again"),
            );
        }
    };
    let mut response = json(&serde_json::json!({"profile": known.profile}));
    set_session_cookie(&console, &mut response, &id, LIFETIME);
    response
}

/// Puts the cookie of session `id` on `response`.
pub(crate) fn set_session_cookie(
    console: &Console,
    response: &mut Response,
    id: &str,
    lifetime: Duration,
) {
    console.set_cookie(response, COOKIE, id, SESSION_SCOPE, lifetime);
}

/// `POST /ui/logout`: ends the session.
pub(crate) async fn logout(State(console): State<Console>, request: Request) -> Response {
    if let Some(id) = session_id(request.headers()) {
        console.sessions.end(&id).await;
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    console.set_cookie(&mut response, COOKIE, "", SESSION_SCOPE, Duration::ZERO);
    response
}

/// The user of the session `id`, while it lives: not expired, and what admitted it still
/// admits it to its profile under the live config. A token's login needs that very token
/// still accepted for its profile (one a reload took out, or rotated under the same name,
/// ends it). A login through the identity provider lasts no longer than the token it got,
/// and needs its issuer still configured and the rules still giving its claims the same
/// profile (a reload that removes either ends it).
async fn live_user(console: &Console, auth: &HttpAuthOptions, id: &str) -> Option<ConsoleUser> {
    let (user, digest) = console.sessions.find(id).await?;
    let still_known = match (&user.user, &user.admission) {
        (Some(_), Some(admission)) => auth
            .oauth
            .as_ref()
            .and_then(|verifier| verifier.admits(admission))
            .is_some_and(|profile| profile == user.profile),
        (Some(_), None) => false,
        (None, _) => auth
            .tokens
            .iter()
            .any(|t| t.digest == digest && t.profile == user.profile),
    };
    if !still_known {
        console.sessions.end(id).await;
    }
    still_known.then_some(user)
}

/// Whether `user`'s session still lives (a stream asks as it goes, so it ends with its
/// token, not only when the browser leaves).
pub(crate) async fn still_open(console: &Console, user: &ConsoleUser) -> bool {
    let auth = console.auth();
    if !auth.required {
        return user.token_id.is_none();
    }
    live_user(console, &auth, &user.session).await.is_some()
}

/// The API's gate: a live session, or, with auth off, the `default` profile.
pub(crate) async fn require_session(
    State(console): State<Console>,
    mut request: Request,
    next: Next,
) -> Response {
    let auth = console.auth();
    let user = if auth.required {
        match session_id(request.headers()) {
            Some(id) => live_user(&console, &auth, &id).await,
            None => None,
        }
    } else {
        Some(ConsoleUser {
            profile: "default".into(),
            token_id: None,
            session: "open".into(),
            user: None,
            admission: None,
        })
    };
    let Some(user) = user else {
        return problem(
            StatusCode::UNAUTHORIZED,
            "log in with a token first (the session may have expired)",
        );
    };
    request.extensions_mut().insert(user);
    next.run(request).await
}

/// The session id a request's cookie carries.
fn session_id(headers: &http::HeaderMap) -> Option<String> {
    cookie(headers, COOKIE).map(str::to_string)
}

/// The value of the cookie `name` a request carries, if not empty.
pub(crate) fn cookie<'a>(headers: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(found, _)| *found == name)
        .map(|(_, value)| value)
        .filter(|v| !v.is_empty())
}

/// The cookie parser against the pairs it was sent: over one `Cookie` header or several, the
/// value of a name is that of its first pair (none when that one is empty), and no header
/// makes it fail.
#[cfg(test)]
mod properties {
    use super::cookie;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_cookie_is_its_first_pairs_value(
            pairs in prop::collection::vec(("[a-d]{1,2}", "[A-Za-z0-9_-]{0,8}"), 0..8),
            split in 1usize..4,
            name in "[a-d]{1,2}",
        ) {
            let mut headers = http::HeaderMap::new();
            for chunk in pairs.chunks(split) {
                let text: Vec<String> = chunk.iter().map(|(n, v)| format!("{n}={v}")).collect();
                if let Ok(value) = http::HeaderValue::from_str(&text.join("; ")) {
                    headers.append(http::header::COOKIE, value);
                }
            }
            let expected = pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
                .filter(|v| !v.is_empty());
            prop_assert_eq!(cookie(&headers, &name), expected);
        }

        #[test]
        fn any_header_is_read_without_failing(value in "[ -~]{0,60}") {
            let mut headers = http::HeaderMap::new();
            if let Ok(value) = http::HeaderValue::from_str(&value) {
                headers.append(http::header::COOKIE, value);
            }
            if let Some(found) = cookie(&headers, "sandgate_session") {
                prop_assert!(!found.is_empty() && value.contains(found));
            }
        }
    }
}
