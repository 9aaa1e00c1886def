//! sandgate as an OAuth 2.1 client of a backend's authorization server, so a user signs in to
//! the backend once and sandgate carries their token on every call (a per-user backend with
//! `oauth`).
//!
//! Discovery starts from the backend's own URL, which the operator wrote: its protected
//! resource metadata (RFC 9728, `/.well-known/oauth-protected-resource` with the URL's path)
//! names the authorization server, whose metadata (OpenID discovery, then RFC 8414) must name
//! itself as that issuer and put its endpoints on its own origin. sandgate is then a client
//! the config names, or one it registers itself (RFC 7591), and asks for a code with PKCE
//! (S256) and for a token for exactly this backend (`resource`, RFC 8707). Codes and refresh
//! tokens are redeemed at the token endpoint; a refresh token the server rotates is replaced.
//! Every fetch is bounded in time and size and follows no redirect; what a server says back
//! is redacted of what was sent before it is shown.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::error::IdentityError;
use crate::jwks::{IssuerKeys, cut};
use crate::login::PendingLogin;
use crate::settings::IssuerSettings;

/// How sandgate signs users in to one backend.
#[derive(Clone, PartialEq, Eq)]
pub struct UpstreamSettings {
    /// The backend's name in the config.
    pub backend: String,
    /// The backend's MCP URL: the resource its tokens must be for.
    pub resource: String,
    /// The scope to ask for, when the backend's metadata should not decide.
    pub scope: Option<String>,
    /// The client the config names at the authorization server; `None` registers one.
    pub client: Option<UpstreamClient>,
    /// Where the authorization server sends the browser back (the console's callback).
    pub redirect_uri: String,
}

impl std::fmt::Debug for UpstreamSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamSettings")
            .field("backend", &self.backend)
            .field("resource", &self.resource)
            .field("redirect_uri", &self.redirect_uri)
            .finish_non_exhaustive()
    }
}

/// A client at an authorization server: configured, or registered by sandgate.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamClient {
    /// Its id.
    pub client_id: String,
    /// Its secret, for a confidential client; a public client has none (PKCE alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamClient")
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// A user's tokens for a backend, as sealed in the store.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamTokens {
    /// The access token the backend takes.
    pub access_token: String,
    /// The refresh token, when the server gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires (ms since the epoch), when the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
    /// When it is refreshed: a minute before it expires, or halfway through a shorter life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_after_ms: Option<i64>,
    /// The scope granted, when the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl std::fmt::Debug for UpstreamTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTokens")
            .field("expires_at_ms", &self.expires_at_ms)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl UpstreamTokens {
    /// Whether the access token is due to be refreshed at `now_ms`.
    pub fn due(&self, now_ms: i64) -> bool {
        self.refresh_after_ms
            .or(self.expires_at_ms)
            .is_some_and(|at| at <= now_ms)
    }
}

/// How long before it expires a token is refreshed, at most.
const REFRESH_BEFORE_MS: i64 = 60_000;

/// One backend's authorization server, found when first needed.
pub struct UpstreamOAuth {
    settings: UpstreamSettings,
    http: reqwest::Client,
    server: Mutex<Option<Arc<IssuerKeys>>>,
}

impl std::fmt::Debug for UpstreamOAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamOAuth")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl UpstreamOAuth {
    /// Sign-ins to the backend `settings` name.
    pub fn new(settings: UpstreamSettings) -> Result<UpstreamOAuth, IdentityError> {
        let http = reqwest::Client::builder()
            .timeout(crate::jwks::FETCH_TIMEOUT)
            .connect_timeout(crate::jwks::FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| failed(&settings, e.to_string()))?;
        Ok(UpstreamOAuth {
            settings,
            http,
            server: Mutex::new(None),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &UpstreamSettings {
        &self.settings
    }

    /// The backend's authorization server, from its protected resource metadata.
    async fn server(&self) -> Result<Arc<IssuerKeys>, IdentityError> {
        let mut held = self.server.lock().await;
        if let Some(server) = held.as_ref() {
            return Ok(server.clone());
        }
        let metadata = self.resource_metadata().await?;
        let issuer = metadata
            .get("authorization_servers")
            .and_then(Value::as_array)
            .and_then(|servers| servers.first())
            .and_then(Value::as_str)
            .ok_or_else(|| {
                failed(
                    &self.settings,
                    "its protected resource metadata names no authorization_servers".into(),
                )
            })?;
        if !https_or_loopback(issuer) {
            return Err(failed(
                &self.settings,
                format!(
                    "its authorization server {} is not an https URL (http is taken on loopback only)",
                    cut(issuer)
                ),
            ));
        }
        let server = Arc::new(IssuerKeys::new(IssuerSettings {
            issuer: issuer.to_string(),
            audience: self.settings.resource.clone(),
            algorithms: vec![],
            jwks_uri: None,
            introspection: None,
            token_exchange: None,
        })?);
        *held = Some(server.clone());
        Ok(server)
    }

    /// What the authorization server's failure says, as this backend's sign-in's.
    fn server_failed(&self, error: IdentityError) -> IdentityError {
        match error {
            IdentityError::Keys { issuer, message } => failed(
                &self.settings,
                format!("its authorization server {issuer}: {message}"),
            ),
            other => other,
        }
    }

    /// The backend's protected resource metadata (RFC 9728): at the well-known path with the
    /// resource's own path after it, then at the origin's.
    async fn resource_metadata(&self) -> Result<Value, IdentityError> {
        let resource = reqwest::Url::parse(&self.settings.resource)
            .map_err(|e| failed(&self.settings, format!("its URL: {e}")))?;
        let base = format!(
            "{}://{}",
            resource.scheme(),
            resource.host_str().unwrap_or_default()
        );
        let base = match resource.port() {
            Some(port) => format!("{base}:{port}"),
            None => base,
        };
        let path = resource.path().trim_end_matches('/');
        let mut last = None;
        for url in [
            format!("{base}/.well-known/oauth-protected-resource{path}"),
            format!("{base}/.well-known/oauth-protected-resource"),
        ] {
            match self.get_json(&url).await {
                Ok(metadata) => {
                    let names = metadata.get("resource").and_then(Value::as_str);
                    if names.is_some_and(|r| {
                        r.trim_end_matches('/') != self.settings.resource.trim_end_matches('/')
                    }) {
                        return Err(failed(
                            &self.settings,
                            format!(
                                "its protected resource metadata at {url} is for another resource ({}); the backend's url must be exactly its `resource`",
                                cut(names.unwrap_or_default())
                            ),
                        ));
                    }
                    return Ok(metadata);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| failed(&self.settings, "no protected resource metadata".into())))
    }

    /// A JSON document at `url`, bounded as the issuer's metadata is.
    async fn get_json(&self, url: &str) -> Result<Value, IdentityError> {
        crate::jwks::get_bounded_json(&self.http, url)
            .await
            .map_err(|why| failed(&self.settings, why))
    }

    /// A client registered at the backend's authorization server for sandgate (RFC 7591): a
    /// public one, authorization code and refresh, at `redirect_uri`.
    pub async fn register(&self) -> Result<UpstreamClient, IdentityError> {
        let server = self.server().await?;
        let endpoint = server.endpoint("registration_endpoint").await.map_err(|e| {
            failed(
                &self.settings,
                format!(
                    "its authorization server registers no clients ({e}); name one with oauth.client_id"
                ),
            )
        })?;
        let body = json!({
            "client_name": "sandgate",
            "redirect_uris": [self.settings.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        });
        let answer = server
            .post_json(&endpoint, &body)
            .await
            .map_err(|e| self.server_failed(e))?;
        let client_id = answer
            .get("client_id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty() && id.len() <= 512)
            .ok_or_else(|| {
                failed(
                    &self.settings,
                    "the registration's answer holds no client_id".into(),
                )
            })?;
        Ok(UpstreamClient {
            client_id: client_id.to_string(),
            client_secret: answer
                .get("client_secret")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }

    /// A fresh sign-in for `client`, asking for `scope` (else the configured one): the state
    /// and verifier to keep, and where to send the browser.
    pub async fn start(
        &self,
        client: &UpstreamClient,
        scope: Option<&str>,
    ) -> Result<(PendingLogin, String), IdentityError> {
        let (pending, challenge) = PendingLogin::fresh()?;
        let endpoint = self
            .server()
            .await?
            .endpoint("authorization_endpoint")
            .await?;
        let mut url = reqwest::Url::parse(&endpoint)
            .map_err(|e| failed(&self.settings, format!("the authorization endpoint: {e}")))?;
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &client.client_id)
                .append_pair("redirect_uri", &self.settings.redirect_uri)
                .append_pair("state", &pending.state)
                .append_pair("code_challenge", &challenge)
                .append_pair("code_challenge_method", "S256")
                .append_pair("resource", &self.settings.resource);
            if let Some(scope) = scope.or(self.settings.scope.as_deref()) {
                query.append_pair("scope", scope);
            }
        }
        Ok((pending, url.to_string()))
    }

    /// The tokens `code` is redeemed for, with the verifier of the sign-in it ends.
    pub async fn redeem(
        &self,
        client: &UpstreamClient,
        code: &str,
        pending: &PendingLogin,
    ) -> Result<UpstreamTokens, IdentityError> {
        self.token(
            client,
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", self.settings.redirect_uri.as_str()),
                ("code_verifier", pending.verifier.as_str()),
                ("resource", self.settings.resource.as_str()),
            ],
            None,
        )
        .await
    }

    /// New tokens for `refresh_token`; the old refresh token is kept when the server sends
    /// none back (it did not rotate it).
    pub async fn refresh(
        &self,
        client: &UpstreamClient,
        refresh_token: &str,
    ) -> Result<UpstreamTokens, IdentityError> {
        self.token(
            client,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh_token),
                ("resource", self.settings.resource.as_str()),
            ],
            Some(refresh_token),
        )
        .await
    }

    /// An answer of the token endpoint, as tokens.
    async fn token(
        &self,
        client: &UpstreamClient,
        form: &[(&str, &str)],
        old_refresh: Option<&str>,
    ) -> Result<UpstreamTokens, IdentityError> {
        let server = self.server().await?;
        let endpoint = server
            .endpoint("token_endpoint")
            .await
            .map_err(|e| self.server_failed(e))?;
        let mut form = form.to_vec();
        let basic = match &client.client_secret {
            Some(secret) => Some((client.client_id.as_str(), secret.as_str())),
            None => {
                form.push(("client_id", client.client_id.as_str()));
                None
            }
        };
        let answer = server
            .post_form(&endpoint, &form, basic)
            .await
            .map_err(|e| self.server_failed(e))?;
        let access_token = answer
            .get("access_token")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                failed(
                    &self.settings,
                    format!(
                        "the token endpoint's answer holds no access_token ({})",
                        crate::jwks::cut_shown(&answer.to_string(), &[])
                    ),
                )
            })?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let lifetime_ms = answer
            .get("expires_in")
            .and_then(Value::as_i64)
            .filter(|s| *s > 0)
            .map(|s| s.saturating_mul(1000));
        let tokens = UpstreamTokens {
            access_token: access_token.to_string(),
            refresh_token: answer
                .get("refresh_token")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| old_refresh.map(str::to_string)),
            expires_at_ms: lifetime_ms.map(|ms| now.saturating_add(ms)),
            refresh_after_ms: lifetime_ms
                .map(|ms| now.saturating_add((ms - REFRESH_BEFORE_MS).max(ms / 2))),
            scope: answer
                .get("scope")
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        // Tokens the gateway now holds: masked wherever another party quotes them back.
        sandgate_redact::remember(&tokens.access_token);
        if let Some(refresh) = &tokens.refresh_token {
            sandgate_redact::remember(refresh);
        }
        Ok(tokens)
    }
}

/// Whether `url` is `https`, or `http` on a loopback address.
fn https_or_loopback(url: &str) -> bool {
    match reqwest::Url::parse(url) {
        Ok(url) if url.scheme() == "https" => true,
        Ok(url) if url.scheme() == "http" => url.host_str().is_some_and(|host| {
            host == "localhost"
                || host
                    .trim_matches(['[', ']'])
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }),
        _ => false,
    }
}

/// A failure to sign in to the backend `settings` name.
fn failed(settings: &UpstreamSettings, message: String) -> IdentityError {
    IdentityError::Upstream {
        backend: settings.backend.clone(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_authorization_server_is_https_or_loopback_http() {
        for good in [
            "https://as.example.com",
            "http://127.0.0.1:9000",
            "http://[::1]:9000/realms/x",
            "http://localhost:8080",
        ] {
            assert!(https_or_loopback(good), "{good}");
        }
        for bad in [
            "http://as.example.com",
            "http://10.0.0.1",
            "ftp://127.0.0.1",
            "javascript:alert(1)",
            "",
            "http://127.0.0.1.evil.com",
        ] {
            assert!(!https_or_loopback(bad), "{bad}");
        }
    }

    #[test]
    fn a_token_is_due_halfway_through_a_short_life_or_a_minute_before_a_long_one_ends() {
        let tokens = |refresh_after_ms, expires_at_ms| UpstreamTokens {
            access_token: "a".into(),
            refresh_token: None,
            expires_at_ms,
            refresh_after_ms,
            scope: None,
        };
        assert!(!tokens(Some(1_000), Some(2_000)).due(999));
        assert!(tokens(Some(1_000), Some(2_000)).due(1_000));
        assert!(
            tokens(None, Some(2_000)).due(2_000),
            "no refresh mark: at expiry"
        );
        assert!(
            !tokens(None, None).due(i64::MAX),
            "a token that never expires"
        );
    }
}
