//! Backends that send hostile results and lists, through the real transport: each bad result
//! fails its own call at once with an error that says why, each bad tool is dropped or
//! degraded on its own, and the backend stays up (same process) throughout.

#![allow(clippy::expect_used)] // test helpers panic on broken fixtures by design

mod common;

use std::time::{Duration, Instant};

use common::{call, start, text};
use sandgate_upstream::{BackendState, UpstreamError};
use serde_json::json;

/// Far under the 60 s call timeout (and room for a debug build streaming 200 MB while other
/// tests run): an answer this fast was not a timeout.
const AT_ONCE: Duration = Duration::from_secs(20);

#[tokio::test]
async fn every_bad_result_fails_its_own_call_at_once_and_the_backend_stays_up() {
    let m = start(&[(
        "hostile",
        "ok",
        "timeout = \"60s\"\nmax_result_bytes = 1048576",
    )]);
    let pid = text(&call(&m, "hostile", "pid", json!({})).await.expect("pid"));
    let cases: [(&str, serde_json::Value, &str); 4] = [
        (
            "big",
            json!({"bytes": 2_000_000}),
            "over this backend's max_result_bytes (1048576)",
        ),
        (
            "deep",
            json!({"levels": 5000}),
            "nests deeper than 100 levels",
        ),
        ("bad_utf8", json!({}), "not valid UTF-8"),
        ("big", json!({"bytes": 200_000_000}), "max_result_bytes"),
    ];
    for (tool, args, expected) in cases {
        let started = Instant::now();
        let outcome = call(&m, "hostile", tool, args).await;
        let took = started.elapsed();
        match outcome {
            Err(e @ UpstreamError::ResultRefused { .. }) => {
                let message = e.to_string();
                assert!(message.contains(expected), "{tool}: {message}");
                assert!(message.contains("still running"), "{message}");
            }
            other => panic!("{tool}: expected a refused result, got {other:?}"),
        }
        assert!(took < AT_ONCE, "{tool} took {took:?}");
        let after = text(
            &call(&m, "hostile", "pid", json!({}))
                .await
                .expect("pid after"),
        );
        assert_eq!(after, pid, "{tool}: the backend was not restarted");
    }
}

#[tokio::test]
async fn a_lone_surrogate_is_repaired_and_a_huge_error_is_bounded() {
    let m = start(&[("hostile", "ok", "")]);
    let repaired = call(&m, "hostile", "lone_surrogate", json!({}))
        .await
        .expect("a lone surrogate is not an error");
    assert_eq!(text(&repaired), "cut \u{fffd}");
    // A content item of a type MCP does not define is marked; the rest of the result is kept.
    let video = call(&m, "hostile", "video", json!({}))
        .await
        .expect("the known items are kept");
    assert_eq!(text(&video), "before the video");
    let shown = serde_json::to_string(&video.content).expect("json");
    assert!(shown.contains("\\\"video\\\" was not passed on"), "{shown}");
    let started = Instant::now();
    let error = call(&m, "hostile", "huge_error", json!({"chars": 1_000_000}))
        .await
        .expect_err("the backend answers with an error");
    assert!(started.elapsed() < AT_ONCE);
    let message = error.to_string();
    assert!(message.len() < 3_000, "{} bytes", message.len());
    assert!(message.contains("more characters not shown"), "{message}");
}

#[tokio::test]
async fn a_bad_tool_is_dropped_or_degraded_and_its_siblings_stay_usable() {
    let m = start(&[("lister", "hostile-list", "max_description_chars = 1000")]);
    m.wait_settled(Duration::from_secs(20)).await;
    let status = m.statuses().remove(0);
    assert_eq!(status.state, BackendState::Ready, "{status:?}");
    let problem = |tool: &str| {
        status
            .tool_problems
            .iter()
            .find(|p| p.tool == tool)
            .map(|p| p.problem.clone())
            .unwrap_or_else(|| panic!("no problem reported for {tool}: {:?}", status.tool_problems))
    };
    assert!(problem("no_schema").contains("no inputSchema"));
    assert!(problem("string_schema").contains("not an object"));
    assert!(problem("deep_schema").contains("shown as unknown"));
    assert!(problem("long_description").contains("max_description_chars"));
    assert!(problem("echo").contains("listed twice"));
    for dropped in ["no_schema", "string_schema"] {
        assert!(
            !status.tools.iter().any(|t| t == dropped),
            "{dropped} is dropped"
        );
    }
    for kept in ["deep_schema", "long_description", "get-sum", "get_sum"] {
        assert!(status.tools.iter().any(|t| t == kept), "{kept} is kept");
    }
    let tools = m.tools();
    let deep = tools
        .iter()
        .find(|t| t.name == "deep_schema")
        .expect("deep_schema");
    assert_eq!(deep.input_schema, json!({}), "rendered as unknown");
    let long = tools
        .iter()
        .find(|t| t.name == "long_description")
        .and_then(|t| t.description.clone())
        .expect("description");
    assert_eq!(long.chars().count(), 1001, "cut, with an ellipsis");
    let echoed = call(&m, "lister", "echo", json!({"text": "still here"}))
        .await
        .expect("a sibling still works");
    assert_eq!(text(&echoed), "still here");
}

#[tokio::test]
async fn a_list_that_never_ends_is_capped() {
    let m = start(&[("pages", "endless-pages", "max_list_pages = 40")]);
    m.wait_settled(Duration::from_secs(20)).await;
    let status = m.statuses().remove(0);
    assert_eq!(status.state, BackendState::Ready, "{status:?}");
    let paged = status
        .tools
        .iter()
        .filter(|t| t.starts_with("page"))
        .count();
    assert_eq!(paged, 40, "one tool per page, 40 pages");
    assert!(
        status
            .tool_problems
            .iter()
            .any(|p| p.tool == "*" && p.problem.contains("max_list_pages")),
        "{:?}",
        status.tool_problems
    );
    let echoed = call(&m, "pages", "echo", json!({"text": "ok"}))
        .await
        .expect("echo");
    assert_eq!(text(&echoed), "ok");
}

#[tokio::test]
async fn a_flood_of_list_changed_is_coalesced() {
    let m = start(&[("flood", "list-flood", "")]);
    m.wait_settled(Duration::from_secs(20)).await;
    // The flood (a notice a millisecond for 2 s) starts 0.5 s after the handshake.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let served: u32 = text(
        &call(&m, "flood", "list_count", json!({}))
            .await
            .expect("count"),
    )
    .parse()
    .expect("a number");
    assert!(
        (2..=5).contains(&served),
        "a 2 s flood caused {served} tools/list requests (one at start, then at most one a second)"
    );
}
