//! One access token checked: which configured issuer it claims, that issuer's key and
//! algorithm, its standard claims, then the rules that give it a profile.

use base64::Engine as _;
use jsonwebtoken::{Validation, decode, decode_header};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::IdentityError;
use crate::jwks::{IssuerKeys, cut};
use crate::refusal::Refusal;
use crate::rules::profile_for;
use crate::settings::OAuthSettings;

/// The largest token read. Providers' access tokens are a few KiB; anything near this is an
/// attack on the parser, refused before it is decoded.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// The longest `sub` accepted.
pub const MAX_SUBJECT_BYTES: usize = 256;

/// A caller proved by an access token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The issuer that vouches for it.
    pub issuer: String,
    /// Its subject at that issuer.
    pub subject: String,
    /// The profile the claim rules gave it.
    pub profile: String,
    /// When the token stops being valid (seconds since the epoch).
    pub expires_at: u64,
    /// The digest of `issuer` and `subject` (computed once, when the token is checked).
    pub digest: [u8; 32],
    /// What admitted it: the issuer and the claims the rules read.
    pub admission: std::sync::Arc<Admission>,
}

/// What admitted a user: the issuer that vouched for it and the claims its token carried. A
/// console login keeps it, so every request can ask the live config again whether that issuer
/// is still trusted and which profile the rules now give those claims ([`Verifier::admits`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Admission {
    /// The issuer.
    pub issuer: String,
    /// The token's claims, as checked.
    pub claims: Value,
}

/// A stable digest of `iss` and `sub`: what a user's sessions and outputs are bound to. A new
/// token of the same user (a refresh) is the same identity.
fn digest_of(issuer: &str, subject: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"oauth\0");
    hasher.update(issuer.as_bytes());
    hasher.update(b"\0");
    hasher.update(subject.as_bytes());
    hasher.finalize().into()
}

/// The id a user goes by in records, stored outputs and credentials: 128 bits of its digest,
/// in hex (the user does not choose it, so no one can aim at another's).
pub fn user_id_of(digest: &[u8; 32]) -> String {
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The id (see [`user_id_of`]) of `subject` at `issuer`, as the operator names a user.
pub fn user_id(issuer: &str, subject: &str) -> String {
    user_id_of(&digest_of(issuer, subject))
}

impl Identity {
    /// How long its token stays valid from now (at least a second).
    pub fn lifetime(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.expires_at.saturating_sub(now_seconds()).max(1))
    }

    /// How logs and the audit name it: the subject at its issuer.
    pub fn name(&self) -> String {
        format!("{} at {}", self.subject, self.issuer)
    }
}

/// The most users whose latest expiry is remembered (for [`Verifier::still_valid`]); past it,
/// expired ones go first, then a user not remembered counts as expired (its sessions end, and
/// its next request opens a new one).
pub const MAX_REMEMBERED_USERS: usize = 100_000;

/// The most tokens whose check is remembered (see [`Verifier::verify`]).
pub const MAX_CACHED_TOKENS: usize = 10_000;
/// How long an issuer's word on an opaque token is taken without asking again.
pub const OPAQUE_CACHE_SECONDS: u64 = 60;

/// Checks access tokens against the configured issuers.
pub struct Verifier {
    settings: OAuthSettings,
    issuers: Vec<IssuerKeys>,
    /// Each user's latest token expiry, by identity digest.
    expiries: std::sync::Mutex<std::collections::HashMap<[u8; 32], u64>>,
    /// Tokens checked already, by their SHA-256, until they expire: a client sends one token
    /// for minutes, and its signature need not be checked on every request.
    checked: std::sync::Mutex<std::collections::HashMap<[u8; 32], (Identity, u64)>>,
    /// Turns to ask an issuer about an opaque token.
    introspecting: tokio::sync::Semaphore,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// A verifier for `settings` (checked here); keys are fetched when first needed.
    pub fn new(settings: OAuthSettings) -> Result<Verifier, IdentityError> {
        settings.check()?;
        if settings
            .issuers
            .iter()
            .filter(|i| i.introspection.is_some())
            .count()
            > 1
        {
            return Err(IdentityError::Settings(
                "names more than one issuer with introspection: an opaque token does not say whose it is, and would be shown to each; keep it on one".into(),
            ));
        }
        let issuers = settings
            .issuers
            .iter()
            .cloned()
            .map(IssuerKeys::new)
            .collect::<Result<_, _>>()?;
        Ok(Verifier {
            settings,
            issuers,
            expiries: Default::default(),
            checked: Default::default(),
            introspecting: tokio::sync::Semaphore::new(crate::introspect::MAX_IN_FLIGHT),
        })
    }

    /// A verifier for `settings` whose issuers hold `issuers`' keys already (the property
    /// tests: no HTTP).
    #[cfg(test)]
    pub(crate) fn holding(settings: OAuthSettings, issuers: Vec<IssuerKeys>) -> Verifier {
        Verifier {
            settings,
            issuers,
            expiries: Default::default(),
            checked: Default::default(),
            introspecting: tokio::sync::Semaphore::new(crate::introspect::MAX_IN_FLIGHT),
        }
    }

    /// Whether the user of `digest` has shown a token that is still valid: its sessions live
    /// as long as its tokens do.
    pub fn still_valid(&self, digest: &[u8; 32]) -> bool {
        let now = now_seconds();
        let expiries = self
            .expiries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        expiries
            .get(digest)
            .is_some_and(|&exp| exp.saturating_add(self.settings.leeway.as_secs()) > now)
    }

    fn remember(&self, identity: &Identity) {
        let now = now_seconds();
        let mut expiries = self
            .expiries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if expiries.len() >= MAX_REMEMBERED_USERS && !expiries.contains_key(&identity.digest) {
            expiries.retain(|_, &mut exp| exp > now);
            if expiries.len() >= MAX_REMEMBERED_USERS {
                return;
            }
        }
        let slot = expiries.entry(identity.digest).or_insert(0);
        *slot = (*slot).max(identity.expires_at);
    }

    /// The profile these settings give a user `admission` admitted, if they still admit it:
    /// its issuer is still configured and a rule still maps its claims. What was checked once
    /// is asked again of the live config, so a reload that removes the issuer or the rule ends
    /// what the user holds.
    pub fn admits(&self, admission: &Admission) -> Option<&str> {
        self.settings
            .issuers
            .iter()
            .any(|i| i.issuer == admission.issuer)
            .then(|| profile_for(&self.settings.rules, &admission.claims))
            .flatten()
    }

    /// What it was made from.
    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// Whether an issuer is set to introspect opaque tokens.
    pub fn introspects(&self) -> bool {
        self.settings
            .issuers
            .iter()
            .any(|i| i.introspection.is_some())
    }

    /// Whether `token` has a JWT's form (three base64url parts): static tokens never do.
    pub fn looks_like_jwt(token: &str) -> bool {
        let mut parts = 0;
        for part in token.split('.') {
            parts += 1;
            if !part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return false;
            }
        }
        parts == 3
    }

    /// Who `token` proves, or why it proves no one. A token that passed is remembered (by its
    /// SHA-256, at most `MAX_CACHED_TOKENS`) until it expires, and passes again without its
    /// signature being checked; a refused one is checked again each time.
    pub async fn verify(&self, token: &str) -> Result<Identity, Refusal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = now_seconds();
        if let Some(identity) = self
            .checked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&digest)
            .filter(|(_, until)| *until > now)
        {
            return Ok(identity.0.clone());
        }
        let identity = self.check(token).await?;
        let mut checked = self
            .checked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if checked.len() >= MAX_CACHED_TOKENS {
            checked.retain(|_, (_, until)| *until > now);
            if checked.len() >= MAX_CACHED_TOKENS {
                checked.clear();
            }
        }
        // A JWT until it expires; what an issuer said of an opaque token, for a minute at most
        // (so a revocation there is heard within it).
        let until = if Verifier::looks_like_jwt(token) {
            identity
                .expires_at
                .saturating_add(self.settings.leeway.as_secs())
        } else {
            identity
                .expires_at
                .min(now.saturating_add(OPAQUE_CACHE_SECONDS))
        };
        checked.insert(digest, (identity.clone(), until));
        Ok(identity)
    }

    /// [`Verifier::verify`] without the cache.
    async fn check(&self, token: &str) -> Result<Identity, Refusal> {
        let invalid = |why: String| Refusal::Invalid(why);
        if token.len() > MAX_TOKEN_BYTES {
            return Err(invalid(format!(
                "the token is {} bytes, over the {} KiB an access token may be",
                token.len(),
                MAX_TOKEN_BYTES / 1024
            )));
        }
        if !Verifier::looks_like_jwt(token) {
            return self.check_opaque(token).await;
        }
        let header = decode_header(token).map_err(|e| {
            invalid(format!(
                "the token is not a signed JWT sandgate accepts ({e}); `alg: none` and unknown algorithms are refused"
            ))
        })?;
        let claimed = unverified_issuer(token)?;
        let Some(keys) = self.issuers.iter().find(|k| k.settings().issuer == claimed) else {
            return Err(invalid(format!(
                "issuer {} is not one [auth.oauth] trusts",
                cut(&claimed)
            )));
        };
        let settings = keys.settings();
        if !settings.algorithms.contains(&header.alg) {
            return Err(invalid(format!(
                "algorithm {:?} is not accepted from {}",
                header.alg, settings.issuer
            )));
        }
        let key = keys.key(header.kid.as_deref()).await?;
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.leeway = self.settings.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&settings.issuer]);
        validation.set_audience(&[&settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = decode::<Value>(token, &key, &validation).map_err(|e| invalid(explain(&e)))?;
        self.identity(&settings.issuer, &data.claims)
    }

    /// An opaque token, asked about at the one issuer that may introspect.
    async fn check_opaque(&self, token: &str) -> Result<Identity, Refusal> {
        let Some((keys, how)) = self
            .issuers
            .iter()
            .find_map(|k| k.settings().introspection.as_ref().map(|how| (k, how)))
        else {
            return Err(Refusal::Invalid(
                "the token is not a JWT, and no issuer in [auth.oauth] is set to introspect opaque tokens".into(),
            ));
        };
        let _turn = self
            .introspecting
            .acquire()
            .await
            .map_err(|_| Refusal::Invalid("the gateway is shutting down".into()))?;
        let claims = crate::introspect::introspect(
            keys,
            how,
            &keys.settings().audience,
            token,
            now_seconds(),
            self.settings.leeway.as_secs(),
        )
        .await?;
        self.identity(&keys.settings().issuer, &claims)
    }

    /// The identity `claims` (checked already) give, with its profile from the rules.
    fn identity(&self, issuer: &str, claims: &Value) -> Result<Identity, Refusal> {
        let invalid = |why: String| Refusal::Invalid(why);
        let subject = match claims.get("sub").and_then(Value::as_str) {
            Some(sub) if !sub.is_empty() && sub.len() <= MAX_SUBJECT_BYTES => sub.to_string(),
            _ => {
                return Err(invalid(format!(
                    "the token's sub is not a string of 1 to {MAX_SUBJECT_BYTES} bytes"
                )));
            }
        };
        let expires_at = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        let Some(profile) = profile_for(&self.settings.rules, claims) else {
            return Err(Refusal::NoProfile(format!(
                "the token of {} at {} is valid, and no rule in [[auth.oauth.rules]] gives it a profile (deny by default): add a rule for one of its claims",
                cut(&subject),
                issuer
            )));
        };
        let identity = Identity {
            digest: digest_of(issuer, &subject),
            issuer: issuer.to_string(),
            subject,
            profile: profile.to_string(),
            expires_at,
            admission: std::sync::Arc::new(Admission {
                issuer: issuer.to_string(),
                claims: claims.clone(),
            }),
        };
        self.remember(&identity);
        Ok(identity)
    }
}

/// Seconds since the epoch, as token times are written.
pub(crate) fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The `iss` a token claims, read before its signature is checked: only to pick which
/// configured issuer's keys check it.
fn unverified_issuer(token: &str) -> Result<String, Refusal> {
    let payload = token
        .split('.')
        .nth(1)
        .ok_or_else(|| Refusal::Invalid("the token is not a JWT".into()))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| Refusal::Invalid("the token's claims are not base64url".into()))?;
    #[derive(serde::Deserialize)]
    struct Issuer {
        iss: Option<String>,
    }
    // Only `iss` is read here; serde_json's depth limit stops deeply nested claims.
    let parsed: Issuer = serde_json::from_slice(&bytes).map_err(|e| {
        Refusal::Invalid(format!(
            "the token's claims are not a JSON object sandgate reads: {e}"
        ))
    })?;
    parsed
        .iss
        .ok_or_else(|| Refusal::Invalid("the token names no issuer (iss)".into()))
}

/// A failed check in words that say what to do.
fn explain(error: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::ExpiredSignature => "the token has expired: get a new one".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidAudience => {
            "the token is for another resource (aud): ask the issuer for a token for this gateway (RFC 8707 resource)".into()
        }
        ErrorKind::InvalidIssuer => "the token's issuer is not the one its key belongs to".into(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".into(),
        ErrorKind::InvalidAlgorithm => "the token's algorithm does not match the issuer's key".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no {claim} claim"),
        ErrorKind::Json(e) => format!(
            "the token's claims are not JSON sandgate reads (at most 128 levels deep): {e}"
        ),
        other => format!("the token does not verify: {other:?}"),
    }
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{DEFAULT_ALGORITHMS, DEFAULT_LEEWAY, IssuerClient, IssuerSettings};

    fn issuer(url: &str, introspect: bool) -> IssuerSettings {
        IssuerSettings {
            issuer: url.into(),
            audience: "https://gw.example/mcp".into(),
            algorithms: DEFAULT_ALGORITHMS.to_vec(),
            jwks_uri: None,
            introspection: introspect.then(|| IssuerClient {
                endpoint: None,
                client_id: "gw".into(),
                client_secret: "secret".into(),
            }),
            token_exchange: None,
        }
    }

    fn settings(issuers: Vec<IssuerSettings>) -> OAuthSettings {
        OAuthSettings {
            resource: "https://gw.example/mcp".into(),
            issuers,
            rules: vec![],
            leeway: DEFAULT_LEEWAY,
        }
    }

    #[test]
    fn one_issuer_at_most_may_introspect() {
        let one = settings(vec![
            issuer("https://a.example", true),
            issuer("https://b.example", false),
        ]);
        assert!(Verifier::new(one).is_ok());
        let two = settings(vec![
            issuer("https://a.example", true),
            issuer("https://b.example", true),
        ]);
        assert!(Verifier::new(two).is_err());
    }

    #[test]
    fn the_jwt_form_is_three_base64url_parts() {
        assert!(Verifier::looks_like_jwt("eyJh.eyJi.c2ln"));
        for not in ["opaque-token", "a.b", "a.b.c.d", "a.b.c d", "a+b.c.d"] {
            assert!(!Verifier::looks_like_jwt(not), "{not}");
        }
    }
}
