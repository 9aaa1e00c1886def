//! Bearer tokens on the HTTP front: every request must carry `Authorization: Bearer <token>`
//! with a configured (or generated) token, unless auth is off (loopback only).
//!
//! Tokens are kept as SHA-256 digests and a presented token is hashed and compared with every
//! one of them in constant time, so neither the comparison nor the order of tokens leaks
//! anything through timing. A token is never logged or written to the audit log; its id is.
//! A request without a valid token gets 401 with `WWW-Authenticate: Bearer`, before its body
//! is read. A matching request carries an [`Authenticated`] (its profile and token id) to the
//! handler.

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
    match identify(&options, request.headers()) {
        Ok(found) => {
            request.extensions_mut().insert(Authenticated {
                profile: found.profile.clone(),
                token_id: found.id.clone(),
                digest: found.digest,
            });
            next.run(request).await
        }
        Err(why) => {
            check.gateway.door().audit().record(&Decision {
                profile: None,
                token_id: None,
                execution_id: None,
                subject: Subject::Http,
                target: &format!("{} {}", request.method(), request.uri().path()),
                allowed: false,
                rule: why,
                arguments: None,
            });
            unauthorized(why)
        }
    }
}

/// The token a request's headers carry, or why there is none that matches.
pub(crate) fn identify<'a>(
    options: &'a HttpAuthOptions,
    headers: &http::HeaderMap,
) -> Result<&'a KnownToken, &'static str> {
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
    let digest = sha256(token.as_bytes());
    // Every token is compared, so the time taken does not say which one (or whether any) was
    // close.
    let mut found = None;
    for known in &options.tokens {
        if bool::from(known.digest.ct_eq(&digest)) {
            found = Some(known);
        }
    }
    found.ok_or("the bearer token matches no configured token")
}

fn unauthorized(why: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32001,
            "message": format!("unauthorized: {why}. Send `Authorization: Bearer <token>` with a token from [[http.tokens]] in the config, or the one sandgate generated and printed at its first start."),
        }
    });
    (
        StatusCode::UNAUTHORIZED,
        [
            (http::header::WWW_AUTHENTICATE, "Bearer realm=\"sandgate\""),
            (http::header::CONTENT_TYPE, "application/json"),
        ],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> HttpAuthOptions {
        HttpAuthOptions {
            required: true,
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
