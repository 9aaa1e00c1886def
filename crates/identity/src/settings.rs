//! What `[auth.oauth]` says, in the types the checks use: which issuers are trusted, what
//! audience their tokens must carry, with which algorithms, and which claims give which profile.

use std::time::Duration;

use jsonwebtoken::Algorithm;

use crate::error::IdentityError;
use crate::rules::ClaimRule;

/// The algorithms accepted when an issuer names none: the asymmetric ones providers use.
pub const DEFAULT_ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// How far `exp` and `nbf` may be off, for clocks that differ a little.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);

/// One trusted issuer.
#[derive(Debug, Clone, PartialEq)]
pub struct IssuerSettings {
    /// Its issuer identifier, exactly as its tokens' `iss` (an `https` URL, or `http` on
    /// loopback).
    pub issuer: String,
    /// The audience its tokens must be for: this gateway.
    pub audience: String,
    /// The signing algorithms accepted from it.
    pub algorithms: Vec<Algorithm>,
    /// Where its keys are, when its metadata should not be asked, or names keys on another
    /// origin (which discovery refuses).
    pub jwks_uri: Option<String>,
    /// How to ask it about opaque tokens (RFC 7662), if at all.
    pub introspection: Option<IssuerClient>,
    /// How to exchange callers' tokens at it for backends' (RFC 8693), if at all.
    pub token_exchange: Option<IssuerClient>,
}

/// How sandgate authenticates at an issuer, and where: to ask about a token it made (RFC
/// 7662), or to exchange one (RFC 8693).
#[derive(Clone, PartialEq)]
pub struct IssuerClient {
    /// The endpoint, when the issuer's metadata should not be asked.
    pub endpoint: Option<String>,
    /// The client sandgate authenticates as.
    pub client_id: String,
    /// Its secret (never printed).
    pub client_secret: String,
}

impl std::fmt::Debug for IssuerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuerClient")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<hidden>")
            .finish()
    }
}

/// All of `[auth.oauth]`.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthSettings {
    /// This gateway's resource identifier: the URL of its MCP endpoint, as clients reach it.
    pub resource: String,
    /// The trusted issuers.
    pub issuers: Vec<IssuerSettings>,
    /// Claims to profiles; the first that matches wins, and none is a refusal.
    pub rules: Vec<ClaimRule>,
    /// How far `exp` and `nbf` may be off.
    pub leeway: Duration,
}

impl OAuthSettings {
    /// Checks what can be checked before anything is fetched.
    pub fn check(&self) -> Result<(), IdentityError> {
        if self.issuers.is_empty() {
            return Err(IdentityError::Settings(
                "names no issuer: add [[auth.oauth.issuers]] with issuer and audience".into(),
            ));
        }
        check_url("resource", &self.resource)?;
        for issuer in &self.issuers {
            check_url("issuer", &issuer.issuer)?;
            if let Some(jwks) = &issuer.jwks_uri {
                check_url("jwks_uri", jwks)?;
            }
            if let Some(endpoint) = issuer
                .introspection
                .as_ref()
                .and_then(|i| i.endpoint.as_ref())
            {
                check_url("introspection endpoint", endpoint)?;
            }
            if issuer.audience.is_empty() {
                return Err(IdentityError::Settings(format!(
                    "issuer {} has an empty audience: set it to this gateway's resource URL",
                    issuer.issuer
                )));
            }
        }
        Ok(())
    }
}

/// An algorithm by its JOSE name; shared-secret algorithms (`HS*`) and `none` are refused.
pub fn parse_algorithm(name: &str) -> Result<Algorithm, IdentityError> {
    let refused = |why: &str| IdentityError::Settings(format!("algorithm {name:?} {why}"));
    if name.eq_ignore_ascii_case("none") || name.to_ascii_uppercase().starts_with("HS") {
        return Err(refused(
            "is refused: only asymmetric signatures prove the issuer signed (use RS256, ES256, PS256 or EdDSA)",
        ));
    }
    name.parse::<Algorithm>().map_err(|_| {
        refused("is unknown: use RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384 or EdDSA")
    })
}

/// `https`, or `http` to a loopback host: tokens and keys do not cross a network in the clear.
fn check_url(what: &str, url: &str) -> Result<(), IdentityError> {
    let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
        .iter()
        .any(|p| {
            url.strip_prefix(p)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with([':', '/']))
        });
    if url.starts_with("https://") || loopback {
        Ok(())
    } else {
        Err(IdentityError::Settings(format!(
            "{what} {url:?} is not an https URL (http is accepted on loopback only)"
        )))
    }
}

/// The scheme, host and port of `url`.
pub(crate) fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let end = url[after_scheme..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| after_scheme + i);
    &url[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_secret_algorithms_and_none_are_refused() {
        for name in ["HS256", "hs512", "none", "None"] {
            assert!(parse_algorithm(name).is_err(), "{name}");
        }
        assert_eq!(parse_algorithm("ES256").ok(), Some(Algorithm::ES256));
        assert!(parse_algorithm("XX1").is_err());
    }

    #[test]
    fn issuers_and_keys_are_reached_over_https_or_on_loopback() {
        let mut settings = OAuthSettings {
            resource: "https://gw.example/mcp".into(),
            issuers: vec![IssuerSettings {
                issuer: "https://idp.example/realms/x".into(),
                audience: "https://gw.example/mcp".into(),
                algorithms: DEFAULT_ALGORITHMS.to_vec(),
                jwks_uri: Some("https://idp.example/realms/x/certs".into()),
                introspection: None,
                token_exchange: None,
            }],
            rules: vec![],
            leeway: DEFAULT_LEEWAY,
        };
        assert!(settings.check().is_ok());
        settings.issuers[0].jwks_uri = Some("http://keys.example/certs".into());
        assert!(settings.check().is_err());
        settings.issuers[0].jwks_uri = None;
        settings.issuers[0].issuer = "http://idp.example".into();
        assert!(settings.check().is_err());
        settings.issuers[0].issuer = "http://127.0.0.1:9000".into();
        assert!(settings.check().is_ok());
        settings.issuers[0].issuer = "http://127.0.0.1.attacker.example".into();
        assert!(settings.check().is_err());
    }
}
