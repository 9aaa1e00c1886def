//! An issuer's signing keys (and its other endpoints), from the issuer only.
//!
//! The keys' address comes from the config (`jwks_uri`) or from the issuer's own metadata
//! (`/.well-known/openid-configuration`, then RFC 8414's `oauth-authorization-server`), whose
//! `issuer` must be the configured one and whose `jwks_uri` must be on the issuer's origin. A
//! token's `jku`, `x5u` or `kid` never names where to fetch: a `kid` only picks among keys
//! already fetched. The keys are cached; a `kid` not among them fetches them again, at most
//! once per [`MIN_REFRESH`], so a stream of made-up `kid`s costs the issuer nothing. A fetch is
//! bounded in time ([`FETCH_TIMEOUT`]) and size ([`MAX_DOCUMENT_BYTES`], [`MAX_KEYS`]), follows
//! no redirect, and a failed one keeps the keys held before.

use std::time::{Duration, Instant};

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use serde_json::Value;
use tokio::sync::{Mutex, RwLock};

use crate::error::IdentityError;
use crate::refusal::Refusal;
use crate::settings::{IssuerSettings, origin};

/// The least time between two fetches of one issuer's keys.
pub const MIN_REFRESH: Duration = Duration::from_secs(10);
/// How long a fetch (metadata or keys) may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest metadata or key document read.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// The most keys kept from one issuer.
pub const MAX_KEYS: usize = 64;

/// One issuer's keys, fetched when first needed.
pub(crate) struct IssuerKeys {
    settings: IssuerSettings,
    http: reqwest::Client,
    held: RwLock<Held>,
    /// One fetch at a time; the others wait for its keys.
    fetching: Mutex<()>,
    /// The issuer's metadata, once read.
    metadata: Mutex<Option<Value>>,
}

#[derive(Default)]
struct Held {
    keys: Vec<(Option<String>, DecodingKey)>,
    last_fetch: Option<Instant>,
}

impl IssuerKeys {
    pub(crate) fn new(settings: IssuerSettings) -> Result<IssuerKeys, IdentityError> {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| IdentityError::Keys {
                issuer: settings.issuer.clone(),
                message: e.to_string(),
            })?;
        Ok(IssuerKeys {
            settings,
            http,
            held: RwLock::default(),
            fetching: Mutex::new(()),
            metadata: Mutex::new(None),
        })
    }

    /// An issuer whose keys are `keys`, held as if just fetched and never fetched again: what
    /// the property tests check tokens against, with no HTTP.
    #[cfg(test)]
    pub(crate) fn holding(
        settings: IssuerSettings,
        keys: Vec<(Option<String>, DecodingKey)>,
    ) -> Result<IssuerKeys, IdentityError> {
        let issuer = IssuerKeys::new(settings)?;
        let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
        *issuer.held.try_write().map_err(|e| IdentityError::Keys {
            issuer: issuer.settings.issuer.clone(),
            message: e.to_string(),
        })? = Held {
            keys,
            last_fetch: Some(far),
        };
        Ok(issuer)
    }

    pub(crate) fn settings(&self) -> &IssuerSettings {
        &self.settings
    }

    /// The key `kid` names (or the only key, for a token without one).
    pub(crate) async fn key(&self, kid: Option<&str>) -> Result<DecodingKey, Refusal> {
        if let Some(key) = self.held_key(kid).await {
            return Ok(key);
        }
        let started = Instant::now();
        let _one = self.fetching.lock().await;
        // Another request may have fetched them meanwhile.
        let fresh_enough = self
            .held
            .read()
            .await
            .last_fetch
            .is_some_and(|at| at.elapsed() < MIN_REFRESH || at > started);
        if !fresh_enough {
            match self.fetch().await {
                Ok(keys) => {
                    *self.held.write().await = Held {
                        keys,
                        last_fetch: Some(Instant::now()),
                    };
                }
                Err(e) => {
                    tracing::warn!("{e}");
                    self.held.write().await.last_fetch = Some(Instant::now());
                    return Err(Refusal::Invalid(format!(
                        "the issuer's keys could not be read ({e}); try again shortly"
                    )));
                }
            }
        }
        self.held_key(kid).await.ok_or_else(|| {
            Refusal::Invalid(match kid {
                Some(_) => "the token's kid names none of the issuer's keys".into(),
                None => "the token names no kid, and the issuer has more than one key".into(),
            })
        })
    }

    async fn held_key(&self, kid: Option<&str>) -> Option<DecodingKey> {
        let held = self.held.read().await;
        match kid {
            Some(kid) => held
                .keys
                .iter()
                .find(|(id, _)| id.as_deref() == Some(kid))
                .map(|(_, key)| key.clone()),
            None if held.keys.len() == 1 => held.keys.first().map(|(_, key)| key.clone()),
            None => None,
        }
    }

    async fn fetch(&self) -> Result<Vec<(Option<String>, DecodingKey)>, IdentityError> {
        let uri = match &self.settings.jwks_uri {
            Some(uri) => uri.clone(),
            None => self.endpoint("jwks_uri").await?,
        };
        let document = self.get(&uri).await?;
        let set: JwkSet = serde_json::from_value(document)
            .map_err(|e| self.failed(format!("{uri} is not a JWK set: {e}")))?;
        let keys: Vec<(Option<String>, DecodingKey)> = set
            .keys
            .iter()
            .filter(|jwk| is_for_signing(jwk))
            .filter_map(|jwk| Some((jwk.common.key_id.clone(), DecodingKey::from_jwk(jwk).ok()?)))
            .take(MAX_KEYS)
            .collect();
        if keys.is_empty() {
            return Err(self.failed(format!("{uri} holds no signing key sandgate can use")));
        }
        Ok(keys)
    }

    /// The issuer's endpoint `name` (`jwks_uri`, `introspection_endpoint`), from its own
    /// metadata, which must name this issuer and put the endpoint on the issuer's origin.
    pub(crate) async fn endpoint(&self, name: &str) -> Result<String, IdentityError> {
        let root = origin(&self.settings.issuer);
        let metadata = self.metadata().await?;
        let Some(found) = metadata.get(name).and_then(Value::as_str) else {
            return Err(self.failed(format!("the issuer's metadata has no {name}")));
        };
        if origin(found) != root {
            return Err(self.failed(format!(
                "the metadata's {name} {} is not on the issuer's origin; set {name} in the config if that is intended",
                cut(found)
            )));
        }
        Ok(found.to_string())
    }

    /// The issuer's metadata (`/.well-known/openid-configuration`, then RFC 8414's
    /// `oauth-authorization-server`), read once it is found.
    async fn metadata(&self) -> Result<Value, IdentityError> {
        let mut held = self.metadata.lock().await;
        if let Some(metadata) = held.as_ref() {
            return Ok(metadata.clone());
        }
        let issuer = self.settings.issuer.trim_end_matches('/');
        let root = origin(issuer);
        let path = &issuer[root.len()..];
        let candidates = [
            format!("{issuer}/.well-known/openid-configuration"),
            format!("{root}/.well-known/oauth-authorization-server{path}"),
        ];
        let mut last = None;
        for url in candidates {
            let metadata = match self.get(&url).await {
                Ok(m) => m,
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            };
            if metadata.get("issuer").and_then(Value::as_str) != Some(self.settings.issuer.as_str())
            {
                return Err(self.failed(format!(
                    "the metadata at {url} names another issuer ({}); the configured issuer must be exactly its `issuer`",
                    metadata.get("issuer").map_or("none".into(), |i| cut(&i.to_string()))
                )));
            }
            *held = Some(metadata.clone());
            return Ok(metadata);
        }
        Err(last.unwrap_or_else(|| self.failed("no metadata".into())))
    }

    /// The JSON answer to a form POSTed to `url`, bounded as a GET is: by a confidential
    /// client (`client` is its id and secret, sent with HTTP Basic), or by a public one (`None`:
    /// its `client_id` is in the form).
    pub(crate) async fn post_form(
        &self,
        url: &str,
        form: &[(&str, &str)],
        client: Option<(&str, &str)>,
    ) -> Result<Value, IdentityError> {
        let mut request = self
            .http
            .post(url)
            .header("accept", "application/json")
            .form(form);
        if let Some((id, secret)) = client {
            request = request.basic_auth(id, Some(secret));
        }
        // What the issuer says back may quote what it was sent (the caller's token, a
        // subject token, the client's secret): its words pass the one redaction step, with
        // this request's own values named.
        let shown: Vec<&str> = form
            .iter()
            .map(|(_, value)| *value)
            .chain(client.map(|(_, secret)| secret))
            .collect();
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => return Err(self.failed(format!("{url}: {e}")).redacted(&shown)),
        };
        self.read_json(url, response, &shown)
            .await
            .map_err(|e| e.redacted(&shown))
    }

    /// A JSON document at `url`, bounded in time and size.
    async fn get(&self, url: &str) -> Result<Value, IdentityError> {
        get_bounded_json(&self.http, url)
            .await
            .map_err(|why| self.failed(why))
    }

    /// A response's JSON body, if it succeeded and is at most [`MAX_DOCUMENT_BYTES`].
    async fn read_json(
        &self,
        url: &str,
        response: reqwest::Response,
        shown: &[&str],
    ) -> Result<Value, IdentityError> {
        read_bounded_json(url, response, shown)
            .await
            .map_err(|why| self.failed(why))
    }

    /// The JSON answer to `body` POSTed as JSON to `url` (a client registration, RFC 7591),
    /// bounded as a GET is.
    pub(crate) async fn post_json(&self, url: &str, body: &Value) -> Result<Value, IdentityError> {
        let response = self
            .http
            .post(url)
            .header("accept", "application/json")
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| self.failed(format!("{url}: {e}")))?;
        self.read_json(url, response, &[]).await
    }

    fn failed(&self, message: String) -> IdentityError {
        IdentityError::Keys {
            issuer: self.settings.issuer.clone(),
            message,
        }
    }
}

/// The JSON document at `url`, fetched with `http` (which bounds the time and follows no
/// redirect) and read as [`read_bounded_json`] reads it; else why not.
pub(crate) async fn get_bounded_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let response = http
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    read_bounded_json(url, response, &[]).await
}

/// A response's JSON body, if it succeeded and is at most [`MAX_DOCUMENT_BYTES`]; else why not,
/// with an OAuth error's words redacted (also of `shown`: what the request carried) and cut.
pub(crate) async fn read_bounded_json(
    url: &str,
    mut response: reqwest::Response,
    shown: &[&str],
) -> Result<Value, String> {
    let status = response.status();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {e}"))? {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(format!(
                "{url} sent more than {} KiB",
                MAX_DOCUMENT_BYTES / 1024
            ));
        }
        body.extend_from_slice(&chunk);
    }
    let parsed = serde_json::from_slice::<Value>(&body);
    if !status.is_success() {
        // An OAuth error says what went wrong (RFC 6749 5.2): pass on its words, redacted
        // (they may quote what was sent: `shown`) before they are cut, so a cut cannot leave a
        // credential's head unrecognised.
        let words = |text: &str| cut_shown(text, shown);
        let said = parsed
            .ok()
            .and_then(|error| {
                let code = error.get("error")?.as_str()?.to_string();
                let description = error
                    .get("error_description")
                    .and_then(Value::as_str)
                    .map(|d| format!(": {}", words(d)))
                    .unwrap_or_default();
                Some(format!(" ({}{description})", words(&code)))
            })
            .unwrap_or_default();
        return Err(format!("{url} answered {status}{said}"));
    }
    parsed.map_err(|e| format!("{url} is not JSON: {e}"))
}

/// Whether `jwk` may verify signatures (not an encryption key).
fn is_for_signing(jwk: &Jwk) -> bool {
    !matches!(
        jwk.common.public_key_use,
        Some(jsonwebtoken::jwk::PublicKeyUse::Encryption)
    )
}

/// At most 100 characters of what a remote party sent, for a message: redacted first (see
/// [`cut_shown`]).
pub(crate) fn cut(text: &str) -> String {
    cut_shown(text, &[])
}

/// At most 100 characters of what a remote party sent, after the one redaction step (which
/// also masks `shown`, what the request it answers carried): redacting before cutting, so a
/// cut never leaves a credential's head that no longer looks like one.
pub(crate) fn cut_shown(text: &str, shown: &[&str]) -> String {
    let text = sandgate_redact::redact_with(text, shown);
    let mut out: String = text.chars().take(100).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}
