//! What the one redaction step masks, and what it leaves alone.

use proptest::prelude::*;
use sandgate_redact::{MASK, redact, redact_with, remember};

const JWT: &str =
    "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSIsImlzcyI6Imh0dHBzOi8vaXNzIn0.c2lnbmF0dXJlLWJ5dGVz";

#[test]
fn a_jwt_anywhere_is_masked_whole() {
    let text = format!("invalid_request: subject_token {JWT} is not for this client");
    let out = redact(&text);
    assert!(!out.contains("eyJzdWIi"), "{out}");
    assert!(!out.contains("c2lnbmF0dXJl"), "{out}");
    assert!(out.contains("is not for this client"), "{out}");
}

#[test]
fn a_bearer_and_named_values_are_masked_and_prose_is_kept() {
    for (text, secret) in [
        (
            "Bearer error=\"invalid_token\", error_description=\"Bearer sk-live-0123456789abcdef rejected\"",
            "sk-live-0123456789abcdef",
        ),
        (
            "token=opaque-abcdef123456&token_type_hint=access_token",
            "opaque-abcdef123456",
        ),
        (
            "{\"client_secret\": \"s3cr3t-client-value\"}",
            "s3cr3t-client-value",
        ),
        ("login failed: password=hunter2hunter2", "hunter2hunter2"),
        (
            "Authorization: Basic dXNlcjpwYXNzd29yZA==",
            "dXNlcjpwYXNzd29yZA==",
        ),
    ] {
        let out = redact(text);
        assert!(!out.contains(secret), "{secret} in {out}");
        assert!(out.contains(MASK), "{out}");
    }
    for prose in [
        "the token has expired: get a new one",
        "the issuer says the token is not active (expired, revoked, or never issued)",
        "backend `github` is still starting",
        "invalid_token",
    ] {
        assert_eq!(redact(prose), prose);
    }
}

#[test]
fn a_remembered_credential_is_masked_wherever_it_is_quoted() {
    let secret = "per-user-secret-7f3a91c2";
    assert!(redact(&format!("the server said: {secret} is wrong")).contains(secret));
    remember(secret);
    let quoted = format!("invalid token (got {secret}); try again");
    let out = redact(&quoted);
    assert!(!out.contains(secret), "{out}");
    assert!(out.contains("try again"), "{out}");
    // Too short to be told from a word: not remembered, not masked.
    remember("short");
    assert_eq!(redact("a short text"), "a short text");
}

#[test]
fn what_a_request_showed_is_masked_too() {
    let out = redact_with(
        "introspection refused: the token opaque-caller-token-1 is unknown",
        &["opaque-caller-token-1", "x"],
    );
    assert!(!out.contains("opaque-caller-token-1"), "{out}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Whatever surrounds it, a shown value never survives, and the step never panics.
    #[test]
    fn a_shown_value_never_survives(prefix in ".{0,40}", secret in "[A-Za-z0-9._-]{8,40}", suffix in ".{0,40}") {
        let text = format!("{prefix}{secret}{suffix}");
        let out = redact_with(&text, &[&secret]);
        prop_assert!(!out.contains(secret.as_str()));
    }
}

#[test]
fn a_jwt_cut_short_is_still_masked() {
    for cut in [
        &JWT[..70],
        &JWT[..40],
        &JWT[..JWT.find('.').unwrap_or(10) + 1],
    ] {
        let said = format!("(invalid_request: {cut}…)");
        let out = redact(&said);
        assert!(!out.contains("eyJhbGciOiJSUzI1NiJ9"), "{out}");
    }
}

#[test]
fn a_json_line_stays_json() {
    let line = r#"{"rule":"asked","arguments":"{\"observations\":[\"token=s3cr3t-value\"],\"auth\":\"Bearer abcdefghijkl\"}"}"#;
    let out = redact(line);
    assert!(
        !out.contains("s3cr3t-value") && !out.contains("abcdefghijkl"),
        "{out}"
    );
    assert!(out.starts_with('{') && out.ends_with("\"}\"}"), "{out}");
    // Every quote the line had is still there, escaped as it was.
    assert_eq!(
        out.matches("\\\"").count(),
        line.matches("\\\"").count(),
        "{out}"
    );
}
