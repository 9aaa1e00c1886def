//! The web console's login through the identity provider: the OAuth 2.1 authorization code
//! flow with PKCE (S256), as a browser does it.
//!
//! The console sends the browser to the issuer's `authorization_endpoint` with a fresh `state`
//! and code challenge, asking for a token for this gateway (`resource`, RFC 8707); the issuer
//! sends it back with a code, which the console redeems at the `token_endpoint` with the
//! verifier. The access token it gets is then checked exactly as a bearer token is (its
//! issuer, keys, audience, expiry, rules), so a console login proves no more than an MCP
//! client's token would. The endpoints come from the issuer's own metadata.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::IdentityError;
use crate::jwks::{IssuerKeys, cut};
use crate::settings::IssuerSettings;

/// How the console logs in: at which issuer, as which client.
#[derive(Clone, PartialEq)]
pub struct LoginSettings {
    /// The issuer (one of `[auth.oauth]`'s).
    pub issuer: IssuerSettings,
    /// The console's client id at the issuer.
    pub client_id: String,
    /// Its secret, for a confidential client; a public client has none (PKCE alone).
    pub client_secret: Option<String>,
    /// The scope to ask for.
    pub scope: String,
    /// This gateway's resource identifier: the token must be for it.
    pub resource: String,
    /// Where the issuer sends the browser back (the console's callback).
    pub redirect_uri: String,
}

impl std::fmt::Debug for LoginSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginSettings")
            .field("issuer", &self.issuer.issuer)
            .field("client_id", &self.client_id)
            .field("redirect_uri", &self.redirect_uri)
            .finish_non_exhaustive()
    }
}

/// One login (to the console, or a user's sign-in to a backend) on its way: what the browser
/// keeps (in a cookie) until it comes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingLogin {
    /// The `state` the issuer must send back.
    pub state: String,
    /// The PKCE verifier, sent when the code is redeemed.
    pub verifier: String,
}

impl PendingLogin {
    /// A fresh `state` and PKCE verifier, and the verifier's S256 challenge.
    pub(crate) fn fresh() -> Result<(PendingLogin, String), IdentityError> {
        let pending = PendingLogin {
            state: random_text()?,
            verifier: random_text()?,
        };
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(pending.verifier.as_bytes()));
        Ok((pending, challenge))
    }
}

/// The console's login at one issuer.
pub struct ConsoleLogin {
    settings: LoginSettings,
    keys: IssuerKeys,
}

impl std::fmt::Debug for ConsoleLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleLogin")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl ConsoleLogin {
    /// The console's login as `settings` say.
    pub fn new(settings: LoginSettings) -> Result<ConsoleLogin, IdentityError> {
        let keys = IssuerKeys::new(settings.issuer.clone())?;
        Ok(ConsoleLogin { settings, keys })
    }

    /// The issuer, as its tokens name it.
    pub fn issuer(&self) -> &str {
        &self.settings.issuer.issuer
    }

    /// A fresh login: the `state` and verifier to keep, and where to send the browser.
    pub async fn start(&self) -> Result<(PendingLogin, String), IdentityError> {
        let (pending, challenge) = PendingLogin::fresh()?;
        let endpoint = self.keys.endpoint("authorization_endpoint").await?;
        let mut url = reqwest::Url::parse(&endpoint)
            .map_err(|e| IdentityError::Login(format!("the authorization endpoint: {e}")))?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.settings.client_id)
            .append_pair("redirect_uri", &self.settings.redirect_uri)
            .append_pair("scope", &self.settings.scope)
            .append_pair("state", &pending.state)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", &self.settings.resource);
        Ok((pending, url.to_string()))
    }

    /// The access token `code` is redeemed for, with the verifier of the login it ends.
    pub async fn redeem(
        &self,
        code: &str,
        pending: &PendingLogin,
    ) -> Result<String, IdentityError> {
        let endpoint = self.keys.endpoint("token_endpoint").await?;
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.settings.redirect_uri.as_str()),
            ("code_verifier", pending.verifier.as_str()),
            ("resource", self.settings.resource.as_str()),
        ];
        let client = match &self.settings.client_secret {
            Some(secret) => Some((self.settings.client_id.as_str(), secret.as_str())),
            None => {
                form.push(("client_id", self.settings.client_id.as_str()));
                None
            }
        };
        let answer = self
            .keys
            .post_form(&endpoint, &form, client)
            .await
            .map_err(|e| IdentityError::Login(format!("the code could not be redeemed: {e}")))?;
        match answer.get("access_token").and_then(Value::as_str) {
            Some(token) if !token.is_empty() => Ok(token.to_string()),
            _ => Err(IdentityError::Login(format!(
                "the issuer's answer holds no access_token ({})",
                cut(&answer.to_string())
            ))),
        }
    }
}

/// 32 random bytes as URL-safe text (a `state`, a PKCE verifier: 43 characters).
fn random_text() -> Result<String, IdentityError> {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes)
        .map_err(|_| IdentityError::Login("no randomness for a login".into()))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}
