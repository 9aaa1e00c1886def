//! One redaction step for text the gateway did not write.
//!
//! Identity providers and backends write error texts (an introspection 400's
//! `error_description`, a token-exchange refusal, a backend's `WWW-Authenticate` challenge), and
//! some quote the credential they were sent. That text reaches the gateway's log, the audit
//! log, execution records and the model. Every such path calls [`redact`] (or [`redact_with`],
//! naming what the request itself carried), so no one place can forget a rule:
//!
//! | what | masked |
//! |---|---|
//! | a credential the gateway holds ([`remember`]: configured tokens, headers and env values, client secrets, users' opened secrets, exchanged tokens) | wherever it occurs |
//! | what one request showed (`shown`: the caller's bearer, the form a request sent) | wherever it occurs |
//! | anything shaped like a JWT (`eyJ…`, up to three base64url parts: also one cut short) | the whole token |
//! | `Bearer …` and `Basic …` | the credential after the word |
//! | `access_token=…`, `"client_secret": "…"`, `password=…` and their kin | the value |
//!
//! Each masked value becomes [`MASK`]. Values shorter than [`MIN_SECRET_CHARS`] are not
//! remembered (they would mask ordinary words), and at most [`MAX_KNOWN`] are, in at most
//! [`MAX_KNOWN_BYTES`] (the oldest goes first). The step knows nothing of where the text goes.

use std::borrow::Cow;
use std::collections::{HashSet, VecDeque};
use std::sync::{LazyLock, PoisonError, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};
use regex::Regex;

/// What a masked value becomes.
pub const MASK: &str = "[redacted]";
/// The shortest value remembered or masked as a credential.
pub const MIN_SECRET_CHARS: usize = 8;
/// The most credentials remembered; past it the oldest is forgotten.
pub const MAX_KNOWN: usize = 65_536;
/// The most bytes of credentials remembered; past it the oldest are forgotten.
pub const MAX_KNOWN_BYTES: usize = 16 * 1024 * 1024;
/// The most bytes of one credential remembered: a longer one is remembered by its first ones,
/// which masks the bulk of any quote of it.
pub const MAX_SECRET_BYTES: usize = 4096;

/// The credentials the gateway holds or was shown, and a matcher over them built when first
/// needed after a change.
#[derive(Default)]
struct Known {
    order: VecDeque<Box<str>>,
    set: HashSet<Box<str>>,
    bytes: usize,
    matcher: Option<AhoCorasick>,
    stale: bool,
}

static KNOWN: LazyLock<RwLock<Known>> = LazyLock::new(RwLock::default);

/// Remembers `secret` (trimmed) as a credential to mask wherever it appears from now on.
pub fn remember(secret: &str) {
    let mut secret = secret.trim();
    if secret.chars().count() < MIN_SECRET_CHARS {
        return;
    }
    if secret.len() > MAX_SECRET_BYTES {
        let mut end = MAX_SECRET_BYTES;
        while !secret.is_char_boundary(end) {
            end -= 1;
        }
        secret = &secret[..end];
    }
    if KNOWN
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .set
        .contains(secret)
    {
        return;
    }
    let mut known = KNOWN.write().unwrap_or_else(PoisonError::into_inner);
    if !known.set.insert(secret.into()) {
        return;
    }
    known.order.push_back(secret.into());
    known.bytes += secret.len();
    while known.order.len() > MAX_KNOWN || known.bytes > MAX_KNOWN_BYTES {
        let Some(oldest) = known.order.pop_front() else {
            break;
        };
        known.bytes -= oldest.len();
        known.set.remove(&oldest);
    }
    known.stale = true;
}

/// How many credentials are remembered now.
pub fn remembered() -> usize {
    KNOWN
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .order
        .len()
}

/// `text` with every credential the gateway holds, and every token-shaped value, masked.
pub fn redact(text: &str) -> Cow<'_, str> {
    redact_with(text, &[])
}

/// [`redact`], also masking each of `shown` (what the request the text answers carried: the
/// caller's token, a form's values) that is at least [`MIN_SECRET_CHARS`] long.
pub fn redact_with<'a>(text: &'a str, shown: &[&str]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for value in shown {
        let value = value.trim();
        if value.chars().count() >= MIN_SECRET_CHARS && out.contains(value) {
            out = Cow::Owned(out.replace(value, MASK));
        }
    }
    if let Some(masked) = mask_known(&out) {
        out = Cow::Owned(masked);
    }
    for (pattern, replacement) in SHAPES.iter() {
        if let Cow::Owned(masked) = pattern.replace_all(&out, *replacement) {
            out = Cow::Owned(masked);
        }
    }
    out
}

/// `text` with the remembered credentials masked, if it holds any.
fn mask_known(text: &str) -> Option<String> {
    let stale = KNOWN.read().unwrap_or_else(PoisonError::into_inner).stale;
    if stale {
        let mut known = KNOWN.write().unwrap_or_else(PoisonError::into_inner);
        if known.stale {
            known.matcher = AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(known.order.iter().map(|s| s.as_bytes()))
                .ok();
            known.stale = false;
        }
    }
    let known = KNOWN.read().unwrap_or_else(PoisonError::into_inner);
    let matcher = known.matcher.as_ref()?;
    if !matcher.is_match(text) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    matcher.replace_all_with(text, &mut out, |_, _, dst| {
        dst.push_str(MASK);
        true
    });
    Some(out)
}

/// Token shapes and what each becomes.
static SHAPES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // A JWT, or what is left of one cut short: a base64url JSON header (`{"` is `eyJ`),
        // then its claims and signature, if they are there.
        (r"eyJ[A-Za-z0-9_-]{8,}(\.[A-Za-z0-9_-]*){0,2}", MASK),
        // An Authorization credential after its scheme.
        (
            r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,}",
            "${1}${2}[redacted]",
        ),
        // A credential's value after its well-known name, in a form, a query or JSON (up to a
        // backslash too, so a JSON-escaped quote after it stays whole).
        (
            r#"(?i)\b(access_token|refresh_token|id_token|subject_token|actor_token|client_secret|password|passwd|api[_-]?key|secret|token)(\s*=\s*|"\s*:\s*"|'\s*:\s*')([^\s"'&,;\\]{6,})"#,
            "${1}${2}[redacted]",
        ),
    ]
    .into_iter()
    .filter_map(|(pattern, replacement)| Some((Regex::new(pattern).ok()?, replacement)))
    .collect()
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_has_compiled() {
        assert_eq!(SHAPES.len(), 3);
    }
}
