//! Who a caller is, when an identity provider says so: sandgate as an OAuth 2.1 resource server.
//!
//! A client sends an access token its issuer made for this gateway. [`Verifier`] checks it
//! against the issuers the config names and nothing else: the signature with the issuer's own
//! keys (fetched from the issuer's metadata, never from a URL the token names), `iss`, `aud`
//! (the token must be for this gateway, RFC 8707), `exp` and `nbf` with a small leeway, and an
//! allowed algorithm (asymmetric only: a shared-secret algorithm would let anyone who holds
//! the issuer's public key sign). The caller is then `iss` plus `sub`, and the config's claim
//! rules give it a profile, deny by default. [`metadata`] answers what a client needs to find
//! the issuer by itself (RFC 9728).
//!
//! What the rest of the gateway sees is an [`Identity`] or a [`Refusal`] that says why, with the
//! HTTP status it deserves: 401 for a token that proves nothing, 403 for a valid token no rule
//! admits. An opaque token (not a JWT) is asked about at its issuer's introspection endpoint
//! (RFC 7662), when the config says how.
//!
//! A user's own secret for a backend is sealed by a [`Vault`] (AES-256-GCM, under a key the
//! operator keeps outside the config) before the store keeps it.

mod error;
mod exchange;
mod introspect;
mod jwks;
mod login;
pub mod metadata;
mod refusal;
mod rules;
mod settings;
mod upstream;
mod vault;
mod verify;

pub use error::IdentityError;
pub use exchange::Exchanger;
pub use login::{ConsoleLogin, LoginSettings, PendingLogin};
pub use refusal::Refusal;
pub use rules::ClaimRule;
pub use settings::{
    DEFAULT_ALGORITHMS, DEFAULT_LEEWAY, IssuerClient, IssuerSettings, OAuthSettings,
    parse_algorithm,
};
pub use upstream::{UpstreamClient, UpstreamOAuth, UpstreamSettings, UpstreamTokens};
pub use vault::{MAX_SECRET_BYTES, Vault};
pub use verify::{Admission, Identity, Verifier, user_id, user_id_of};
