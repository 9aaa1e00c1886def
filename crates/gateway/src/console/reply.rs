//! The console API's answers: JSON, and problems the page shows as `{"error": message}`.

use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use serde_json::{Value, json};

/// A JSON answer.
pub(crate) fn json(value: &Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// An error answer the page shows: `{"error": message}`.
pub(crate) fn problem(status: StatusCode, message: &str) -> Response {
    let mut response = json(&json!({"error": message}));
    *response.status_mut() = status;
    response
}

/// At most 200 characters of what another party said, redacted before it is cut.
pub(crate) fn cut(text: &str) -> String {
    sandgate_redact::redact(text).chars().take(200).collect()
}

/// What an authorization server's `error` and `error_description` on a redirect back say, as
/// `who` refusing: bounded and redacted.
pub(crate) fn refused_by(who: &str, error: &str, description: Option<String>) -> String {
    format!(
        "{who} refused: {} {}",
        cut(error),
        cut(&description.unwrap_or_default())
    )
}

/// The code an authorization server sent back, when the `state` it sent is `expected` (the
/// browser's own, compared in constant time); `None` otherwise.
pub(crate) fn code_for_state(
    sent_state: Option<&str>,
    code: Option<String>,
    expected: &str,
) -> Option<String> {
    use subtle::ConstantTimeEq;
    let matches =
        sent_state.is_some_and(|state| bool::from(state.as_bytes().ct_eq(expected.as_bytes())));
    code.filter(|_| matches)
}
