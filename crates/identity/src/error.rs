//! The identity crate's one error type, in a file of its own so every module reaches it without
//! going through the crate root.

impl IdentityError {
    /// The error with its words passed through the one redaction step (`sandgate_redact`),
    /// also masking `shown`: what the request it answers carried.
    pub(crate) fn redacted(self, shown: &[&str]) -> IdentityError {
        let clean = |text: String| sandgate_redact::redact_with(&text, shown).into_owned();
        match self {
            IdentityError::Settings(m) => IdentityError::Settings(clean(m)),
            IdentityError::Login(m) => IdentityError::Login(clean(m)),
            IdentityError::Exchange(m) => IdentityError::Exchange(clean(m)),
            IdentityError::Key(m) => IdentityError::Key(clean(m)),
            IdentityError::Credential(m) => IdentityError::Credential(clean(m)),
            IdentityError::Keys { issuer, message } => IdentityError::Keys {
                issuer,
                message: clean(message),
            },
            IdentityError::Upstream { backend, message } => IdentityError::Upstream {
                backend,
                message: clean(message),
            },
        }
    }
}

/// What can go wrong in this crate outside a token's own check (which is a `Refusal`).
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The settings cannot work.
    #[error("[auth.oauth] {0}")]
    Settings(String),
    /// The console's login through the issuer failed.
    #[error("console login: {0}")]
    Login(String),
    /// A caller's token could not be exchanged for a backend's.
    #[error("token exchange: {0}")]
    Exchange(String),
    /// The `[credentials]` key cannot be used.
    #[error("the [credentials] key {0}")]
    Key(String),
    /// A user's secret cannot be sealed or opened.
    #[error("{0}")]
    Credential(String),
    /// Signing a user in to a backend's authorization server failed.
    #[error("signing in to backend `{backend}`: {message}")]
    Upstream {
        /// The backend.
        backend: String,
        /// Why.
        message: String,
    },
    /// An issuer's metadata or keys could not be read.
    #[error("the keys of issuer {issuer} could not be read: {message}")]
    Keys {
        /// The issuer.
        issuer: String,
        /// Why.
        message: String,
    },
}
