//! `Verifier::check` against garbage and against tokens made and then broken on purpose, with
//! the `jsonwebtoken` crate, configured on its own from the same key and rules, as the oracle:
//! the verifier admits exactly the tokens the oracle verifies and the claim rules give a
//! profile, never panics, and answers garbage as a refusal.

#![allow(clippy::expect_used)]

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::{MAX_SUBJECT_BYTES, Verifier, now_seconds};
use crate::jwks::IssuerKeys;
use crate::rules::ClaimRule;
use crate::settings::{DEFAULT_LEEWAY, IssuerSettings, OAuthSettings};

const ISSUER: &str = "https://idp.example";
const AUDIENCE: &str = "https://gw.example/mcp";
const KID: &str = "k1";

/// The issuer's signing key (a P-256 key made for these tests only).
const SIGNING_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg2mIBqpbp2Aw9XuWC
II6D0SIRNvEgcjkgk1ejfeHHcD+hRANCAARlLEIPUpOi8Nu9cwnbWy+XA404IoIz
kH9MvI7YD+f9eEbz9ulDHUV4EVgnbcgni7TQJMoOkTOLvMXIow6vBcmo
-----END PRIVATE KEY-----
";
const VERIFYING_KEY: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEZSxCD1KTovDbvXMJ21svlwONOCKC
M5B/TLyO2A/n/XhG8/bpQx1FeBFYJ23IJ4u00CTKDpEzi7zFyKMOrwXJqA==
-----END PUBLIC KEY-----
";
/// Another P-256 key, which the issuer never used.
const STRANGER_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgRZhBTHtaYkOSH9cI
SR06HV/psT5qbKYncD10D9E7bm+hRANCAAQjy22ekZ/kBYooB5+nnbCSRWGmhjs/
Qj2b0edmyjeIiFb/ZOZ3Q9FDE7R0vZNXl1Zz7ND3L+AhXWutgRjjKjhf
-----END PRIVATE KEY-----
";

/// The DER a PEM block holds.
fn der(pem: &str) -> Vec<u8> {
    use base64::Engine;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("the test key's PEM")
}

/// The issuer's public key as its JWKS gives it (`x` and `y`), read as sandgate reads a JWK.
fn verifying_key() -> DecodingKey {
    let spki = der(VERIFYING_KEY);
    let point = &spki[spki.len() - 64..];
    DecodingKey::from_ec_components(&b64_bytes(&point[..32]), &b64_bytes(&point[32..]))
        .expect("the test key")
}

fn signing_key(pem: &str) -> EncodingKey {
    EncodingKey::from_ec_der(&der(pem))
}

fn b64_bytes(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn verifier() -> Verifier {
    let issuer = IssuerSettings {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        algorithms: vec![Algorithm::ES256, Algorithm::RS256],
        jwks_uri: Some(format!("{ISSUER}/jwks")),
        introspection: None,
        token_exchange: None,
    };
    let key = verifying_key();
    let settings = OAuthSettings {
        resource: AUDIENCE.into(),
        issuers: vec![issuer.clone()],
        rules: vec![ClaimRule {
            claim: "role".into(),
            value: "user".into(),
            profile: "default".into(),
        }],
        leeway: DEFAULT_LEEWAY,
    };
    let keys = IssuerKeys::holding(issuer, vec![(Some(KID.into()), key)]).expect("keys");
    Verifier::holding(settings, vec![keys])
}

/// What the oracle admits: `jsonwebtoken` verifies the token with the issuer's key (the one
/// its `kid` names, or the only one) and the same checks, and the claims give a profile (`role` is `user`) and a usable `sub`.
fn oracle(token: &str) -> Option<String> {
    let key = verifying_key();
    let header = jsonwebtoken::decode_header(token).ok()?;
    // The issuer holds one key: a token that names no `kid` is checked with it.
    if header.alg != Algorithm::ES256 || header.kid.as_deref().is_some_and(|kid| kid != KID) {
        return None;
    }
    let mut validation = Validation::new(Algorithm::ES256);
    validation.leeway = DEFAULT_LEEWAY.as_secs();
    validation.validate_nbf = true;
    validation.set_issuer(&[ISSUER]);
    validation.set_audience(&[AUDIENCE]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let claims = decode::<Value>(token, &key, &validation).ok()?.claims;
    let sub = claims.get("sub")?.as_str()?;
    let usable = !sub.is_empty() && sub.len() <= MAX_SUBJECT_BYTES;
    (usable && claims.get("role") == Some(&json!("user"))).then(|| sub.to_string())
}

/// Claims near the edge of each check: the right or a wrong issuer and audience, a past,
/// present or future `exp` and `nbf`, a usable, empty or long `sub`, and a role or not.
fn claims() -> impl Strategy<Value = Value> {
    let now = now_seconds() as i64;
    // Weighted to the good side of each check, so about one signed token in four passes them all.
    (
        prop_oneof![16 => Just(json!(ISSUER)), 1 => Just(json!("https://evil.example")), 1 => Just(json!(7))],
        prop_oneof![16 => Just(json!(AUDIENCE)), 1 => Just(json!([AUDIENCE, "x"])), 2 => Just(json!("https://other"))],
        prop_oneof![
            6 => (now + 60..now + 10_000).prop_map(|t| json!(t)),
            2 => (now - 10_000..now + 60).prop_map(|t| json!(t)),
            1 => Just(json!("soon")),
            1 => Just(Value::Null)
        ],
        prop::option::of((now - 200..now + 200).prop_map(|t| json!(t))),
        prop_oneof![
            16 => "[a-z0-9|@.]{1,40}".prop_map(|s| json!(s)),
            1 => Just(json!("")),
            1 => Just(json!("s".repeat(MAX_SUBJECT_BYTES + 1))),
            1 => Just(json!(42))
        ],
        prop_oneof![16 => Just(Some("user")), 1 => Just(Some("admin")), 1 => Just(None)],
    )
        .prop_map(|(iss, aud, exp, nbf, sub, role)| {
            let mut claims = json!({"iss": iss, "aud": aud, "exp": exp, "sub": sub});
            if let Some(nbf) = nbf {
                claims["nbf"] = nbf;
            }
            if let Some(role) = role {
                claims["role"] = json!(role);
            }
            claims
        })
}

/// A token signed with the issuer's key or a stranger's, under the right `kid` or another.
fn signed() -> impl Strategy<Value = String> {
    (
        claims(),
        prop::bool::weighted(0.85),
        prop_oneof![16 => Just(Some(KID)), 1 => Just(Some("k2")), 1 => Just(None)],
    )
        .prop_map(|(claims, by_issuer, kid)| {
            let pem = if by_issuer { SIGNING_KEY } else { STRANGER_KEY };
            let key = signing_key(pem);
            let mut header = Header::new(Algorithm::ES256);
            header.kid = kid.map(str::to_string);
            encode(&header, &claims, &key).expect("signed")
        })
}

/// A signed token with one character of one part changed, a part dropped or swapped for
/// another's, or its header replaced (`alg: none`, HS256 with the key as a secret).
fn broken() -> impl Strategy<Value = String> {
    (signed(), 0usize..3, any::<prop::sample::Index>(), 0u8..6).prop_map(
        |(token, part, at, how)| {
            let mut parts: Vec<String> = token.split('.').map(str::to_string).collect();
            match how {
                0 | 1 => {
                    let chars: Vec<char> = parts[part].chars().collect();
                    if !chars.is_empty() {
                        let i = at.index(chars.len());
                        let swapped = if chars[i] == 'A' { 'B' } else { 'A' };
                        parts[part] = chars
                            .iter()
                            .enumerate()
                            .map(|(j, c)| if j == i { swapped } else { *c })
                            .collect();
                    }
                }
                2 => {
                    parts.remove(part);
                }
                3 => parts[0] = b64(r#"{"alg":"none","typ":"JWT","kid":"k1"}"#),
                4 => parts[0] = b64(r#"{"alg":"HS256","typ":"JWT","kid":"k1"}"#),
                _ => parts[2] = String::new(),
            }
            parts.join(".")
        },
    )
}

fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

/// Anything: arbitrary text, and three base64url parts of random bytes.
fn garbage() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[A-Za-z0-9_-]{0,60}\\.[A-Za-z0-9_-]{0,120}\\.[A-Za-z0-9_-]{0,90}",
        (any::<Vec<u8>>(), any::<Vec<u8>>()).prop_map(|(h, c)| {
            use base64::Engine;
            let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
            format!("{}.{}.{}", e.encode(h), e.encode(c), e.encode(b"sig"))
        }),
    ]
}

fn check(verifier: &Verifier, runtime: &tokio::runtime::Runtime, token: &str) -> Option<String> {
    runtime
        .block_on(verifier.check(token))
        .ok()
        .map(|identity| identity.subject)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn the_verifier_admits_what_the_oracle_verifies(token in prop_oneof![3 => signed(), 1 => broken(), 1 => garbage()]) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let verifier = verifier();
        prop_assert_eq!(check(&verifier, &runtime, &token), oracle(&token), "token {}", token);
    }
}

#[test]
fn the_oracle_and_the_verifier_admit_a_good_token() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let claims = json!({
        "iss": ISSUER, "aud": AUDIENCE, "exp": now_seconds() + 600, "sub": "ada", "role": "user",
    });
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(KID.into());
    let key = signing_key(SIGNING_KEY);
    let token = encode(&header, &claims, &key).expect("signed");
    assert_eq!(oracle(&token).as_deref(), Some("ada"));
    assert_eq!(check(&verifier(), &runtime, &token).as_deref(), Some("ada"));
}

#[test]
fn the_generated_tokens_are_admitted_and_refused_both() {
    // The same strategies, sampled: a fair share of good tokens, and many more refused.
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = prop_oneof![3 => signed(), 1 => broken(), 1 => garbage()];
    let admitted = (0..400)
        .filter(|_| {
            let token = strategy.new_tree(&mut runner).expect("a token").current();
            oracle(&token).is_some()
        })
        .count();
    assert!((40..=200).contains(&admitted), "{admitted} of 400 admitted");
}
