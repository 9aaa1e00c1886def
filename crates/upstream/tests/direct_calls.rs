//! Tool calls written straight to a 2025 stdio backend (`direct_call`), through the real
//! manager and supervisor with the fake backend in tests/fixtures/fake_backend.py: which calls
//! take that path, and that a call dropped before its answer is forgotten and the backend told,
//! as rmcp tells it.

#![allow(clippy::expect_used)] // test helpers panic on broken fixtures by design

mod common;

use std::time::Duration;

use common::{call, start, text};
use sandgate_policy::{Access, Profile, ToolCall};
use sandgate_upstream::{BackendCalls, CallContext, UpstreamError};
use serde_json::{Value, json};

/// The JSON-RPC id the backend saw for one `request_id` call made with `context`.
async fn id_seen(m: &common::Started, backend: &str, context: CallContext) -> Value {
    let authorized = Access::new(std::sync::Arc::new(Profile::implicit_default("test")))
        .authorize_tool(ToolCall::new(backend, "request_id"))
        .expect("grant");
    let result = m
        .calls
        .call(&authorized, None, context)
        .await
        .expect("request_id answers");
    serde_json::from_str(&text(&result)).expect("the id as JSON")
}

#[tokio::test]
async fn a_plain_call_to_a_2025_backend_is_written_straight_to_it() {
    let m = start(&[("legacy", "ok", ""), ("modern", "modern", "")]);
    // The direct path names its requests; rmcp numbers its own.
    let id = id_seen(&m, "legacy", CallContext::default()).await;
    assert!(
        id.as_str().is_some_and(|s| s.starts_with("sandgate-call-")),
        "{id}"
    );
    // A call that asks for progress goes through rmcp, which routes the progress notices.
    let (sender, _receiver) = tokio::sync::mpsc::channel(4);
    let with_progress = CallContext {
        progress: Some(sender),
        ..Default::default()
    };
    assert!(id_seen(&m, "legacy", with_progress).await.is_number());
    // A 2026-07-28 backend's requests carry what rmcp adds for that protocol.
    assert!(
        id_seen(&m, "modern", CallContext::default())
            .await
            .is_number()
    );
    // Many calls at once each get their own answer.
    let answers = futures::future::join_all(
        (0..50).map(|i| call(&m, "legacy", "echo", json!({"text": format!("call {i}")}))),
    )
    .await;
    for (i, answer) in answers.into_iter().enumerate() {
        assert_eq!(text(&answer.expect("answered")), format!("call {i}"));
    }
}

#[tokio::test]
async fn a_call_dropped_before_its_answer_tells_the_backend_and_its_late_answer_goes_nowhere() {
    let m = start(&[("slowpoke", "ok", "timeout = \"300ms\"")]);
    let err = call(&m, "slowpoke", "slow", json!({"ms": 1000}))
        .await
        .expect_err("times out");
    assert!(matches!(err, UpstreamError::Timeout { .. }), "{err:?}");
    // The late answer arrives meanwhile; nothing waits for it, and the backend keeps serving.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let seen: Value = serde_json::from_str(&text(
        &call(&m, "slowpoke", "cancelled", json!({}))
            .await
            .expect("the backend still answers"),
    ))
    .expect("JSON");
    let notices = seen.as_array().expect("a list");
    assert_eq!(notices.len(), 1, "{seen}");
    assert!(
        notices[0]["requestId"]
            .as_str()
            .is_some_and(|id| id.starts_with("sandgate-call-")),
        "{seen}"
    );
    assert_eq!(notices[0]["reason"], "request abandoned by the caller");
    assert_eq!(
        text(
            &call(&m, "slowpoke", "echo", json!({"text": "after"}))
                .await
                .expect("echo")
        ),
        "after"
    );
}
