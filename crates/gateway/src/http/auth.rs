//! Bearer tokens on the HTTP front: every request must carry `Authorization: Bearer <token>`
//! with a configured (or generated) token, unless auth is off (loopback only).
//!
//! Tokens are kept as SHA-256 digests and a presented token is hashed and compared with every
//! one of them in constant time, so neither the comparison nor the order of tokens leaks
//! anything through timing. A token is never logged or written to the audit log; its id is.
//! A request without a valid token gets 401 with `WWW-Authenticate: Bearer`, before its body
//! is read. A matching request carries an [`Authenticated`] (its profile and token id) to the
//! handler.
//!
//! With `[auth.oauth]`, a bearer that is no configured token and has a JWT's form is an access
//! token: `sandgate_identity` checks it against the configured issuers, and its user (`iss`
//! plus `sub`) is the caller, with the profile the claim rules give. A 401 then points at the
//! protected resource's metadata (`WWW-Authenticate: Bearer resource_metadata="…"`), so an
//! MCP client finds the issuer by itself; a valid token no rule admits gets 403 with the
//! reason.

use std::sync::{Arc, PoisonError, RwLock};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::audit::{Decision, Subject};
use crate::caller::Authenticated;
use crate::gateway::Gateway;

/// A token the front accepts.
#[derive(Debug, Clone)]
pub struct KnownToken {
    /// SHA-256 of the token.
    pub digest: [u8; 32],
    /// The profile its bearer gets.
    pub profile: String,
    /// Its id (configured name): never the token.
    pub id: String,
}

impl KnownToken {
    /// A token known by its text.
    pub fn from_secret(secret: &str, profile: &str, id: &str) -> KnownToken {
        KnownToken {
            digest: sha256(secret.as_bytes()),
            profile: profile.to_string(),
            id: id.to_string(),
        }
    }
}

/// Who may use the HTTP front.
#[derive(Debug, Clone, Default)]
pub struct HttpAuthOptions {
    /// `false`: no token is needed (`[http] auth = "none"`, loopback only).
    pub required: bool,
    /// The accepted tokens.
    pub tokens: Vec<KnownToken>,
    /// Access tokens of the configured issuers (`[auth.oauth]`), beside the tokens.
    pub oauth: Option<Arc<sandgate_identity::Verifier>>,
    /// The console's login through an issuer (`[auth.oauth.console]`).
    pub console_login: Option<Arc<sandgate_identity::ConsoleLogin>>,
}

impl HttpAuthOptions {
    /// Whether a session bound to `digest` still has an owner who may use it: a configured
    /// token, or a user whose access token has not expired.
    pub fn still_owns(&self, digest: &[u8; 32]) -> bool {
        !self.required
            || self.tokens.iter().any(|t| t.digest == *digest)
            || self.oauth.as_ref().is_some_and(|v| v.still_valid(digest))
    }
}

/// Who may use the HTTP front now. The binary keeps a clone, so a reload puts new tokens in
/// place (a token taken out is refused from the next request on).
#[derive(Debug, Clone, Default)]
pub struct HttpTokens(Arc<RwLock<Arc<HttpAuthOptions>>>);

impl HttpTokens {
    /// `options`, in place from now on.
    pub fn new(options: HttpAuthOptions) -> HttpTokens {
        HttpTokens(Arc::new(RwLock::new(Arc::new(options))))
    }

    /// Puts `options` in place of the current ones.
    pub fn replace(&self, options: HttpAuthOptions) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(options);
    }

    /// The options in place now.
    pub fn current(&self) -> Arc<HttpAuthOptions> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The check's state: the tokens (a reload may replace them) and where refusals are written.
pub(crate) struct TokenCheck {
    pub tokens: HttpTokens,
    pub gateway: Arc<Gateway>,
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(&Sha256::digest(bytes));
    out
}

/// The middleware (see the module docs).
pub(crate) async fn require_token(
    State(check): State<Arc<TokenCheck>>,
    mut request: Request,
    next: Next,
) -> Response {
    let options = check.tokens.current();
    if !options.required {
        return next.run(request).await;
    }
    let target = format!("{} {}", request.method(), request.uri().path());
    let refused = |why: &str, status: StatusCode| {
        check.gateway.door().audit().record(&Decision {
            profile: None,
            token_id: None,
            execution_id: None,
            subject: Subject::Http,
            target: &target,
            allowed: false,
            rule: why,
            arguments: None,
            asked: false,
        });
        refusal(&options, why, status)
    };
    let token = match bearer(request.headers()) {
        Ok(token) => token.to_string(),
        Err(why) => return refused(why, StatusCode::UNAUTHORIZED),
    };
    let token = token.as_str();
    let authenticated = match (known(&options, token), &options.oauth) {
        (Some(found), _) => Authenticated {
            profile: found.profile.clone(),
            name: found.id.clone(),
            digest: found.digest,
            user: None,
            grant: None,
        },
        (None, Some(verifier))
            if sandgate_identity::Verifier::looks_like_jwt(token) || verifier.introspects() =>
        {
            match verifier.verify(token).await {
                Ok(identity) => Authenticated {
                    profile: identity.profile.clone(),
                    name: identity.name(),
                    digest: identity.digest,
                    user: Some(identity.digest),
                    grant: Some(std::sync::Arc::new(crate::caller::UserGrant {
                        issuer: identity.issuer.clone(),
                        token: sandgate_config::Secret::new(token),
                    })),
                },
                Err(refusal) => {
                    let status =
                        StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::UNAUTHORIZED);
                    return refused(refusal.reason(), status);
                }
            }
        }
        (None, _) => {
            return refused(
                "the bearer token matches no configured token",
                StatusCode::UNAUTHORIZED,
            );
        }
    };
    request.extensions_mut().insert(authenticated);
    next.run(request).await
}

/// The configured token a request's headers carry, or why there is none that matches.
pub(crate) fn identify<'a>(
    options: &'a HttpAuthOptions,
    headers: &http::HeaderMap,
) -> Result<&'a KnownToken, &'static str> {
    known(options, bearer(headers)?).ok_or("the bearer token matches no configured token")
}

/// The bearer token of `Authorization: Bearer <token>`, or why there is none.
fn bearer(headers: &http::HeaderMap) -> Result<&str, &'static str> {
    let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(if headers.contains_key(http::header::AUTHORIZATION) {
            "more than one Authorization header"
        } else {
            "no Authorization header"
        });
    };
    let value = value
        .to_str()
        .map_err(|_| "the Authorization header is not text")?;
    let (scheme, token) = value
        .split_once(' ')
        .ok_or("the Authorization header is not `Bearer <token>`")?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err("the Authorization header is not `Bearer <token>`");
    }
    if token.is_empty() || token.contains(char::is_whitespace) {
        return Err("the bearer token is empty or holds spaces");
    }
    Ok(token)
}

/// The configured token `token` is, if any.
fn known<'a>(options: &'a HttpAuthOptions, token: &str) -> Option<&'a KnownToken> {
    let digest = sha256(token.as_bytes());
    // Every token is compared, so the time taken does not say which one (or whether any) was
    // close.
    let mut found = None;
    for known in &options.tokens {
        if bool::from(known.digest.ct_eq(&digest)) {
            found = Some(known);
        }
    }
    found
}

/// A refused request: 401 (with where to get a token) or 403, and why.
fn refusal(options: &HttpAuthOptions, why: &str, status: StatusCode) -> Response {
    let (how, challenge) = match &options.oauth {
        Some(verifier) => (
            "Send `Authorization: Bearer <access token>` from one of the issuers in the protected resource metadata, or a token from [[http.tokens]].",
            sandgate_identity::metadata::challenge(verifier.settings()),
        ),
        None => (
            "Send `Authorization: Bearer <token>` with a token from [[http.tokens]] in the config, or the one sandgate generated and printed at its first start.",
            "Bearer realm=\"sandgate\"".to_string(),
        ),
    };
    let (word, how) = if status == StatusCode::FORBIDDEN {
        ("forbidden", "")
    } else {
        ("unauthorized", how)
    };
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32001, "message": format!("{word}: {why}. {how}").trim_end()},
    });
    let mut response = (
        status,
        [(http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response();
    if status == StatusCode::UNAUTHORIZED
        && let Ok(value) = http::HeaderValue::from_str(&challenge)
    {
        response
            .headers_mut()
            .insert(http::header::WWW_AUTHENTICATE, value);
    }
    response
}

/// The protected resource's metadata (RFC 9728), for clients to find the issuer; 404 when no
/// issuer is configured.
pub(crate) async fn resource_metadata(State(check): State<Arc<TokenCheck>>) -> Response {
    match &check.tokens.current().oauth {
        Some(verifier) => (
            [(http::header::CONTENT_TYPE, "application/json")],
            sandgate_identity::metadata::document(verifier.settings()).to_string(),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> HttpAuthOptions {
        HttpAuthOptions {
            required: true,
            oauth: None,
            console_login: None,
            tokens: vec![
                KnownToken::from_secret("reader-token-0123456789", "reader", "research"),
                KnownToken::from_secret("writer-token-0123456789", "writer", "ci"),
            ],
        }
    }

    fn headers(values: &[&str]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for value in values {
            if let Ok(v) = http::HeaderValue::from_str(value) {
                map.append(http::header::AUTHORIZATION, v);
            }
        }
        map
    }

    #[test]
    fn the_right_token_names_its_profile_and_every_wrong_form_is_refused() {
        let options = options();
        let found = identify(&options, &headers(&["Bearer writer-token-0123456789"])).expect("ok");
        assert_eq!(
            (found.profile.as_str(), found.id.as_str()),
            ("writer", "ci")
        );
        assert!(identify(&options, &headers(&["bearer reader-token-0123456789"])).is_ok());
        for wrong in [
            vec![],
            vec!["Bearer"],
            vec!["Bearer "],
            vec!["Basic reader-token-0123456789"],
            vec!["reader-token-0123456789"],
            vec!["Bearer reader-token-012345678"],
            vec!["Bearer reader-token-0123456789 extra"],
            vec!["Bearer  reader-token-0123456789"],
            vec![
                "Bearer reader-token-0123456789",
                "Bearer writer-token-0123456789",
            ],
        ] {
            assert!(identify(&options, &headers(&wrong)).is_err(), "{wrong:?}");
        }
    }
}

/// The bearer parser against what a header says: any token of header characters without
/// whitespace, under any casing of the scheme, is read back as sent; whatever else a header
/// holds, what is read (if anything) is its text after `Bearer `, and two headers are refused.
#[cfg(test)]
mod properties {
    use super::bearer;
    use proptest::prelude::*;

    fn headers(values: &[&str]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for value in values {
            if let Ok(value) = http::HeaderValue::from_str(value) {
                map.append(http::header::AUTHORIZATION, value);
            }
        }
        map
    }

    proptest! {
        #[test]
        fn a_token_is_read_back_as_sent(scheme in "[bB][eE][aA][rR][eE][rR]", token in "[!-~]{1,64}") {
            let value = format!("{scheme} {token}");
            let one = headers(&[&value]);
            prop_assert_eq!(bearer(&one), Ok(token.as_str()));
            prop_assert!(bearer(&headers(&[&value, &value])).is_err(), "two headers are refused");
        }

        #[test]
        fn anything_else_is_refused_or_read_after_the_scheme(value in "[ -~\t]{0,40}") {
            let sent = headers(&[&value]);
            if let Ok(token) = bearer(&sent) {
                prop_assert!(!token.is_empty() && !token.contains(char::is_whitespace));
                let scheme = value.strip_suffix(token).and_then(|s| s.strip_suffix(' '));
                prop_assert!(scheme.is_some_and(|s| s.eq_ignore_ascii_case("bearer")), "{value:?}");
            }
        }
    }
}
