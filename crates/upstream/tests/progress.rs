//! A stdio backend's progress notices reach the call that asked for them in the order the
//! backend wrote them, before its answer: through the real manager and supervisor with the fake
//! backend in tests/fixtures/fake_backend.py. rmcp hands each notice to a task of its own, and
//! under load the last one (where the backend got to) reached the call after its answer, or
//! never (seen once in a full run of the suite; an idle machine does not show it).

#![allow(clippy::expect_used)] // test helpers panic on broken fixtures by design

mod common;

use common::{start, text};
use sandgate_policy::{Access, Profile, ToolCall};
use sandgate_upstream::{BackendCalls, BackendProgress, CallContext};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_notice_of_a_flood_is_heard_before_the_answer() {
    let m = start(&[("flood", "ok", "")]);
    let authorized = Access::new(std::sync::Arc::new(Profile::implicit_default("test")))
        .authorize_tool(ToolCall::new("flood", "progress_flood"))
        .expect("grant");
    for round in 0..3 {
        let (sender, mut receiver) = tokio::sync::mpsc::channel::<BackendProgress>(16);
        let heard = tokio::spawn(async move {
            let mut last = None;
            let mut count = 0usize;
            while let Some(notice) = receiver.recv().await {
                count += 1;
                last = Some(notice);
            }
            (count, last)
        });
        let context = CallContext {
            progress: Some(sender),
            ..Default::default()
        };
        let arguments = json!({"n": 20_000});
        let result = m
            .calls
            .call(&authorized, arguments.as_object().cloned(), context)
            .await
            .expect("progress_flood answers");
        assert_eq!(text(&result), "sent 20000");
        let (count, last) = heard.await.expect("the listener ends with the call");
        let last = last.expect("some notices were heard");
        assert_eq!(
            (last.progress, last.total),
            (20_000.0, Some(20_000.0)),
            "round {round}: the last of {count} notices heard was {last:?}"
        );
    }
}
