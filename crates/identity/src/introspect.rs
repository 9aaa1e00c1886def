//! Opaque access tokens, asked about at their issuer (RFC 7662 introspection).
//!
//! A token that is not a JWT carries nothing sandgate can check itself, so the one issuer the
//! config lets introspect is asked whether it is active, and for its claims. Only one issuer
//! may introspect: an opaque token does not say whose it is, and sending it to several would
//! show one issuer's tokens to another. The answer must say `active`, name this gateway in
//! `aud`, carry a `sub` (or, for a client's own token, a `client_id`), and not be expired; its claims then go through the same rules as a
//! JWT's. At most [`MAX_IN_FLIGHT`] questions are asked at once, so a flood of made-up tokens
//! cannot turn sandgate into a flood against the issuer.

use serde_json::Value;

use crate::jwks::{IssuerKeys, cut};
use crate::refusal::Refusal;
use crate::settings::IssuerClient;

/// The most introspection requests in flight at once.
pub const MAX_IN_FLIGHT: usize = 8;

/// The claims the issuer gives `token`, once they show it is active and for `audience`.
pub(crate) async fn introspect(
    keys: &IssuerKeys,
    settings: &IssuerClient,
    audience: &str,
    token: &str,
    now: u64,
    leeway: u64,
) -> Result<Value, Refusal> {
    let unreadable = |e: crate::error::IdentityError| {
        tracing::warn!("{e}");
        Refusal::Invalid(format!(
            "the issuer could not be asked about the token ({e}); try again shortly"
        ))
    };
    let endpoint = match &settings.endpoint {
        Some(endpoint) => endpoint.clone(),
        None => keys
            .endpoint("introspection_endpoint")
            .await
            .map_err(unreadable)?,
    };
    let answer = keys
        .post_form(
            &endpoint,
            &[("token", token), ("token_type_hint", "access_token")],
            Some((&settings.client_id, &settings.client_secret)),
        )
        .await
        .map_err(unreadable)?;
    if answer.get("active") != Some(&Value::Bool(true)) {
        return Err(Refusal::Invalid(
            "the issuer says the token is not active (expired, revoked, or never issued)".into(),
        ));
    }
    let issuer = &keys.settings().issuer;
    if let Some(iss) = answer.get("iss")
        && iss.as_str() != Some(issuer.as_str())
    {
        return Err(Refusal::Invalid(format!(
            "the introspected token names another issuer ({})",
            cut(&iss.to_string())
        )));
    }
    let for_us = match answer.get("aud") {
        Some(Value::String(aud)) => aud == audience,
        Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(audience)),
        _ => false,
    };
    if !for_us {
        return Err(Refusal::Invalid(
            "the token is for another resource (aud): ask the issuer for a token for this gateway (RFC 8707 resource)".into(),
        ));
    }
    match answer.get("exp").and_then(Value::as_u64) {
        Some(exp) if exp.saturating_add(leeway) > now => {}
        Some(_) => {
            return Err(Refusal::Invalid(
                "the token has expired: get a new one".into(),
            ));
        }
        None => {
            return Err(Refusal::Invalid(
                "the issuer's answer gives the token no exp".into(),
            ));
        }
    }
    if let Some(nbf) = answer.get("nbf").and_then(Value::as_u64)
        && nbf > now.saturating_add(leeway)
    {
        return Err(Refusal::Invalid("the token is not valid yet (nbf)".into()));
    }
    // A client-credentials token has no user: its client is the subject, as its JWT form
    // says with `sub` (RFC 9068).
    let mut answer = answer;
    if answer.get("sub").is_none()
        && let Some(client) = answer.get("client_id").cloned()
        && let Some(fields) = answer.as_object_mut()
    {
        fields.insert("sub".into(), client);
    }
    Ok(answer)
}
