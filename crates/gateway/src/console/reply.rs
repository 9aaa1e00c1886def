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
