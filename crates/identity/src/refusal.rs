//! Why a token is refused: what the issuer's keys, the introspection endpoint and the check
//! itself all answer with, in a file of its own so none of them imports another for it.

/// Why a token is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// It proves nothing (401).
    Invalid(String),
    /// It is valid, and no rule gives it a profile (403).
    NoProfile(String),
}

impl Refusal {
    /// The HTTP status the refusal deserves.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Invalid(_) => 401,
            Refusal::NoProfile(_) => 403,
        }
    }

    /// Why, in words (never the token).
    pub fn reason(&self) -> &str {
        match self {
            Refusal::Invalid(why) | Refusal::NoProfile(why) => why,
        }
    }
}
