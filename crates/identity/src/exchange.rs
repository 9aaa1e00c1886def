//! A caller's token exchanged for one a backend accepts (RFC 8693 token exchange).
//!
//! The MCP authorization spec forbids passing a client's token on to a backend: it was issued
//! for this gateway. An HTTP backend with `token_exchange` instead gets a token the caller's
//! own issuer makes for it: sandgate presents the caller's token (`subject_token`) with its own
//! client credentials and asks for the backend's audience. The issuer decides; sandgate only
//! asks the issuer that vouched for the caller, and only with the credentials the config gives
//! it for that issuer.
//!
//! An exchanged token is kept, by the SHA-256 of the caller's token and the audience, until a
//! little before it expires, so a script's many calls cost one exchange: a kept one is found
//! in microseconds. At most [`MAX_IN_FLIGHT`] exchanges run at once, and at most
//! [`MAX_KEPT`] tokens are kept.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use sandgate_config::Secret;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::IdentityError;
use crate::jwks::{IssuerKeys, cut};
use crate::settings::IssuerSettings;
use crate::verify::now_seconds;

/// The grant type of RFC 8693.
const GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The type of the token presented, and of the one asked for.
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
/// The most exchanges in flight at once.
pub const MAX_IN_FLIGHT: usize = 16;
/// The most exchanged tokens kept.
pub const MAX_KEPT: usize = 10_000;
/// A kept token is used until this many seconds before it expires.
const EARLY: u64 = 30;
/// How long a token the issuer gives no `expires_in` for is kept.
const DEFAULT_LIFETIME: u64 = 60;

/// Exchanges callers' tokens at the issuers that allow it.
pub struct Exchanger {
    issuers: Vec<IssuerKeys>,
    kept: Mutex<HashMap<[u8; 32], (Secret, u64)>>,
    turns: tokio::sync::Semaphore,
}

impl std::fmt::Debug for Exchanger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchanger").finish_non_exhaustive()
    }
}

impl Exchanger {
    /// An exchanger at each of `issuers` that has `token_exchange` settings; `None` when none
    /// has.
    pub fn new(issuers: &[IssuerSettings]) -> Result<Option<Exchanger>, IdentityError> {
        let issuers: Vec<IssuerKeys> = issuers
            .iter()
            .filter(|i| i.token_exchange.is_some())
            .cloned()
            .map(IssuerKeys::new)
            .collect::<Result<_, _>>()?;
        if issuers.is_empty() {
            return Ok(None);
        }
        Ok(Some(Exchanger {
            issuers,
            kept: Mutex::default(),
            turns: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
        }))
    }

    /// A token for `audience` (with `scope`, if given) in exchange for `subject_token`, which
    /// `issuer` made for this gateway; a kept one while it is fresh.
    pub async fn exchange(
        &self,
        issuer: &str,
        subject_token: &str,
        audience: &str,
        scope: Option<&str>,
    ) -> Result<Secret, IdentityError> {
        let key = kept_key(subject_token, audience, scope);
        let now = now_seconds();
        if let Some(token) = self.kept_token(&key, now) {
            return Ok(token);
        }
        let Some(keys) = self.issuers.iter().find(|k| k.settings().issuer == issuer) else {
            return Err(IdentityError::Exchange(format!(
                "issuer {issuer} exchanges no tokens for sandgate: give it token_exchange in [[auth.oauth.issuers]]"
            )));
        };
        let Some(client) = &keys.settings().token_exchange else {
            return Err(IdentityError::Exchange(format!(
                "issuer {issuer} exchanges no tokens for sandgate"
            )));
        };
        let _turn = self
            .turns
            .acquire()
            .await
            .map_err(|_| IdentityError::Exchange("sandgate is shutting down".into()))?;
        // Another call may have exchanged the same token meanwhile.
        if let Some(token) = self.kept_token(&key, now_seconds()) {
            return Ok(token);
        }
        let endpoint = match &client.endpoint {
            Some(endpoint) => endpoint.clone(),
            None => keys.endpoint("token_endpoint").await?,
        };
        let mut form = vec![
            ("grant_type", GRANT),
            ("subject_token", subject_token),
            ("subject_token_type", ACCESS_TOKEN),
            ("requested_token_type", ACCESS_TOKEN),
            ("audience", audience),
        ];
        // Providers that take resource indicators (RFC 8707) read the target there.
        if audience.starts_with("https://") || audience.starts_with("http://") {
            form.push(("resource", audience));
        }
        if let Some(scope) = scope {
            form.push(("scope", scope));
        }
        let answer = keys
            .post_form(
                &endpoint,
                &form,
                Some((&client.client_id, &client.client_secret)),
            )
            .await
            .map_err(|e| {
                IdentityError::Exchange(format!("the issuer refused the exchange: {e}"))
            })?;
        let token = match answer.get("access_token").and_then(Value::as_str) {
            Some(token) if !token.is_empty() && token.len() <= 16 * 1024 => token,
            _ => {
                return Err(IdentityError::Exchange(
                    "the issuer's answer holds no usable access_token".into(),
                ));
            }
        };
        match answer.get("token_type").and_then(Value::as_str) {
            Some(kind) if kind.eq_ignore_ascii_case("bearer") => {}
            other => {
                return Err(IdentityError::Exchange(format!(
                    "the issuer gave a token of type {}, not a Bearer token",
                    cut(other.unwrap_or("(none)"))
                )));
            }
        }
        let lifetime = answer
            .get("expires_in")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_LIFETIME);
        let token = Secret::new(token);
        let until = now_seconds().saturating_add(lifetime.saturating_sub(EARLY));
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= MAX_KEPT {
            let now = now_seconds();
            kept.retain(|_, (_, until)| *until > now);
            if kept.len() >= MAX_KEPT {
                kept.clear();
            }
        }
        // A credential the gateway holds now: masked wherever another party quotes it.
        sandgate_redact::remember(token.expose());
        kept.insert(key, (token.clone(), until));
        Ok(token)
    }

    fn kept_token(&self, key: &[u8; 32], now: u64) -> Option<Secret> {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.get(key)
            .filter(|(_, until)| *until > now)
            .map(|(token, _)| token.clone())
    }
}

/// What a kept token is found by: the caller's token, the audience and the scope.
fn kept_key(subject_token: &str, audience: &str, scope: Option<&str>) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(subject_token.as_bytes());
    hasher.update(b"\0");
    hasher.update(audience.as_bytes());
    hasher.update(b"\0");
    hasher.update(scope.unwrap_or("").as_bytes());
    hasher.finalize().into()
}
