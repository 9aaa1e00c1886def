//! Fault injection: backends that crash, hang, print garbage or are slow, driven through the
//! real manager and supervisor with the fake backend in tests/fixtures/fake_backend.py.

#![allow(clippy::expect_used)] // test helpers panic on broken fixtures by design

mod common;

use std::time::Duration;

use common::{call, start, start_with, text};
use sandgate_policy::{Access, Profile, ToolCall};
use sandgate_upstream::{BackendCalls, BackendState, ToolCache, UpstreamError};
use serde_json::json;

#[tokio::test]
async fn crash_mid_call_gives_a_clear_error_then_restarts() {
    let m = start(&[("flaky", "ok", "")]);
    let pid_before = text(&call(&m, "flaky", "pid", json!({})).await.expect("pid"));
    let err = call(&m, "flaky", "crash", json!({}))
        .await
        .expect_err("crash fails the call");
    assert!(
        matches!(err, UpstreamError::ConnectionLost { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("went away during the call to `crash`"),
        "{err}"
    );
    // The next call waits for the restart and works, on a new process.
    let mut pid_after = None;
    for _ in 0..50 {
        match call(&m, "flaky", "pid", json!({})).await {
            Ok(r) => {
                pid_after = Some(text(&r));
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let pid_after = pid_after.expect("backend came back");
    assert_ne!(
        pid_before, pid_after,
        "a new process serves after the crash"
    );
    let status = m
        .statuses()
        .into_iter()
        .find(|s| s.name == "flaky")
        .expect("status");
    assert_eq!(status.state, BackendState::Ready);
    assert!(status.restarts >= 1);
    assert!(
        m.stderr_tail("flaky")
            .iter()
            .any(|l| l.contains("crashing on purpose")),
        "stderr is captured for operators"
    );
}

#[tokio::test]
async fn a_hung_handshake_does_not_block_other_backends() {
    let m = start(&[
        (
            "stuck",
            "hang-handshake",
            "handshake_timeout = \"1s\"\ntimeout = \"3s\"",
        ),
        ("good", "ok", ""),
    ]);
    let reply = call(&m, "good", "echo", json!({"text": "hi"}))
        .await
        .expect("good backend works");
    assert_eq!(text(&reply), "hi");
    let err = call(&m, "stuck", "echo", json!({"text": "hi"}))
        .await
        .expect_err("stuck backend");
    let message = err.to_string();
    assert!(
        message.contains("still starting") || message.contains("handshake did not finish"),
        "{message}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let status = m
        .statuses()
        .into_iter()
        .find(|s| s.name == "stuck")
        .expect("status");
    assert_ne!(status.state, BackendState::Ready);
    assert!(
        status
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("handshake did not finish within 1s")),
        "{status:?}"
    );
}

#[tokio::test]
async fn garbage_on_stdout_is_reported_and_the_backend_keeps_serving() {
    let m = start(&[("noisy", "garbage-banner", "timeout = \"1s\"")]);
    // A banner before the handshake is skipped; the backend still connects.
    assert_eq!(
        text(
            &call(&m, "noisy", "echo", json!({"text": "a"}))
                .await
                .expect("echo")
        ),
        "a"
    );
    // A call answered only by garbage times out with a diagnosis.
    let err = call(&m, "noisy", "garbage", json!({}))
        .await
        .expect_err("no answer");
    let message = err.to_string();
    assert!(
        message.contains("timed out after 1s") && message.contains("not MCP messages"),
        "{message}"
    );
    assert!(
        !message.contains("garbage line"),
        "stdout content is not echoed to the model: {message}"
    );
    assert_eq!(
        text(
            &call(&m, "noisy", "echo", json!({"text": "b"}))
                .await
                .expect("still serving")
        ),
        "b"
    );
}

#[tokio::test]
async fn stderr_that_is_not_utf8_or_has_huge_lines_is_read_and_the_backend_keeps_serving() {
    let m = start(&[("messy", "stderr-garbage", "timeout = \"5s\"")]);
    // Each call writes to stderr: had sandgate stopped reading it (it used to, at the first
    // byte that is not UTF-8), the backend's write would fail and so would the call.
    for i in 0..5 {
        let text_in = format!("call {i}");
        let answer = call(&m, "messy", "echo", json!({"text": text_in}))
            .await
            .expect("still serving");
        assert_eq!(text(&answer), text_in);
    }
    let lines = m.stderr_tail("messy");
    let tail = lines.join("\n");
    assert!(tail.contains("not utf-8: \u{fffd}\u{fffd}"), "{tail}");
    assert!(tail.contains("call \u{fffd}( echo"), "{tail}");
    assert!(lines.iter().all(|l| l.len() <= 2048));
}

#[tokio::test]
async fn slow_calls_time_out_and_others_stay_responsive() {
    let m = start(&[(
        "slowpoke",
        "ok",
        "timeout = \"500ms\"\nmax_concurrent_calls = 4",
    )]);
    let started = std::time::Instant::now();
    let (slow, fast) = tokio::join!(call(&m, "slowpoke", "slow", json!({"ms": 5000})), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        call(&m, "slowpoke", "echo", json!({"text": "quick"})).await
    });
    let err = slow.expect_err("slow call times out");
    assert!(matches!(err, UpstreamError::Timeout { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "timeout fired near 500ms, took {:?}",
        started.elapsed()
    );
    assert_eq!(text(&fast.expect("concurrent call is answered")), "quick");
}

#[tokio::test]
async fn concurrency_cap_queues_calls() {
    let m = start(&[("single", "ok", "max_concurrent_calls = 1\ntimeout = \"5s\"")]);
    call(&m, "single", "echo", json!({"text": "warm"}))
        .await
        .expect("ready");
    let authorized = Access::new(std::sync::Arc::new(Profile::implicit_default("test")))
        .authorize_tool(ToolCall::new("single", "echo"))
        .expect("grant");
    let args = json!({"text": "queued"}).as_object().cloned();
    let (slow, queued, impatient) = tokio::join!(
        call(&m, "single", "slow", json!({"ms": 600})),
        async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let started = std::time::Instant::now();
            (
                m.calls
                    .call(&authorized, args.clone(), Default::default())
                    .await,
                started.elapsed(),
            )
        },
        async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            m.calls
                .call(
                    &authorized,
                    args.clone(),
                    sandgate_upstream::CallContext {
                        limit: Some(Duration::from_millis(200)),
                        ..Default::default()
                    },
                )
                .await
        },
    );
    slow.expect("the slot holder finishes");
    let (queued, waited) = queued;
    assert_eq!(
        text(&queued.expect("the queued call runs once the slot frees")),
        "queued"
    );
    assert!(
        waited >= Duration::from_millis(400),
        "it waited for the slot ({waited:?})"
    );
    let err = impatient.expect_err("a caller limit shorter than the queue wait");
    assert!(err.to_string().contains("waiting for a free slot"), "{err}");
}

#[tokio::test]
async fn list_changed_refreshes_tools() {
    let m = start(&[("dyn", "ok", "")]);
    let mut events = m.subscribe();
    call(&m, "dyn", "echo", json!({"text": "x"}))
        .await
        .expect("ready");
    assert!(!m.tools().iter().any(|t| t.name == "extra"));
    call(&m, "dyn", "add_tool", json!({})).await.expect("add");
    let refreshed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(sandgate_upstream::UpstreamEvent::ToolsChanged { .. }) = events.recv().await
                && m.tools().iter().any(|t| t.name == "extra")
            {
                return;
            }
        }
    })
    .await;
    assert!(
        refreshed.is_ok(),
        "tools/list_changed refreshed the tool list"
    );
    // The new tool is now routed to the backend (which answers with the tool's name).
    let answered = call(&m, "dyn", "extra", json!({}))
        .await
        .expect("routed to the backend, not refused locally");
    assert_eq!(text(&answered), "extra");
}

#[tokio::test]
async fn children_get_a_clean_environment() {
    // The test process has CARGO_MANIFEST_DIR set; the child must not see it.
    let m = start(&[("envcheck", "ok", "env = { ONLY_THIS = \"yes\" }")]);
    let leaked = text(
        &call(&m, "envcheck", "env", json!({"name": "CARGO_MANIFEST_DIR"}))
            .await
            .expect("env"),
    );
    assert_eq!(
        leaked, "null",
        "the gateway's environment does not leak into backends"
    );
    let own = text(
        &call(&m, "envcheck", "env", json!({"name": "ONLY_THIS"}))
            .await
            .expect("env"),
    );
    assert_eq!(own, "\"yes\"");
    let path = text(
        &call(&m, "envcheck", "env", json!({"name": "PATH"}))
            .await
            .expect("env"),
    );
    assert_ne!(path, "null", "PATH is passed through");
}

#[tokio::test]
async fn a_backend_that_keeps_dying_exhausts_its_budget() {
    let m = start(&[("dead", "exit-at-start", "")]);
    let failed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if m.any_in(BackendState::Failed) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(failed.is_ok(), "restart budget stops the loop");
    let err = call(&m, "dead", "echo", json!({"text": "x"}))
        .await
        .expect_err("unavailable");
    assert!(matches!(err, UpstreamError::Unavailable { .. }), "{err:?}");
    assert!(err.to_string().contains("failed 6 times"), "{err}");
}

#[tokio::test]
async fn the_cache_serves_tools_before_backends_connect() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = ToolCache::new(dir.path().join("tools.json"));
    {
        let m = start_with(&[("cached", "ok", "")], Some(cache.clone()));
        call(&m, "cached", "echo", json!({"text": "x"}))
            .await
            .expect("ready");
        m.stop(Duration::from_secs(5)).await;
    }
    // Now a backend that never finishes its handshake: its tools still come from the cache.
    let m = start_with(&[("cached", "hang-handshake", "")], Some(cache));
    let tools = m.tools();
    assert!(
        tools.iter().any(|t| t.name == "echo"),
        "cached tools served at once: {tools:?}"
    );
    let status = m.statuses().into_iter().next().expect("status");
    assert!(status.tools_from_cache && status.state == BackendState::Starting);
}

/// A short-lived command (`sandgate check`) ends its runtime right after the backends connect,
/// and the runtime cancels blocking work that has not started: the cache write was such work,
/// and `check` then forgot the tools. So `stop` writes the last known tools before it returns.
/// Here the only blocking thread is busy, so a write merely handed off is still queued when
/// `stop` returns.
#[test]
fn stop_leaves_the_last_known_tools_in_the_cache_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = ToolCache::new(dir.path().join("tools.json"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let on_disk = runtime.block_on(async {
        tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(1500)));
        let m = start_with(&[("cached", "ok", "")], Some(cache.clone()));
        call(&m, "cached", "echo", json!({"text": "x"}))
            .await
            .expect("ready");
        assert!(m.stop(Duration::from_secs(10)).await, "stopped in time");
        cache.load()
    });
    assert!(
        on_disk
            .get("cached")
            .is_some_and(|tools| tools.iter().any(|t| t.name == "echo")),
        "the cache file holds the backend's tools when stop returns: {on_disk:?}"
    );
}

#[tokio::test]
async fn a_command_that_does_not_exist_is_failed_at_once_not_restarted() {
    let config = sandgate_config::parse_str(
        "[servers.ghost]\ncommand = \"definitely-not-a-program-sandgate\"\n",
        sandgate_config::Format::Toml,
        "test.toml",
    )
    .expect("config");
    let (m, _calls) = sandgate_upstream::BackendManager::start(
        &config,
        sandgate_upstream::ManagerOptions {
            inherited_env: common::inherited_env(),
            cache: None,
            restart: common::fast_restarts(),
            guard: None,
        },
    );
    let failed = tokio::time::timeout(Duration::from_secs(5), async {
        while !m.any_in(BackendState::Failed) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(failed.is_ok(), "the missing program is reported as failed");
    let status = &m.statuses()[0];
    assert_eq!(status.restarts, 0, "nothing to retry: {status:?}");
    assert!(
        status
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("installed and on PATH"),
        "{status:?}"
    );
}

#[tokio::test]
async fn a_late_answer_to_the_era_probe_does_not_fail_the_handshake() {
    // The backend answers `server/discover` only when `initialize` arrives, as one that was
    // slow to start does; the answer to the probe lands in the middle of the handshake.
    let m = start(&[("late", "discover-late", "")]);
    let reply = call(&m, "late", "echo", json!({"text": "hi"}))
        .await
        .expect("the backend connects");
    assert_eq!(text(&reply), "hi");
    let status = m
        .statuses()
        .into_iter()
        .find(|s| s.name == "late")
        .expect("status");
    assert_eq!(status.protocol_version.as_deref(), Some("2025-11-25"));
    assert_eq!(status.restarts, 0, "{:?}", status.last_error);
}

#[tokio::test]
async fn a_backend_that_ignores_the_era_probe_connects_without_waiting_it_out() {
    // A strict 2025 server answers nothing before `initialize` but `ping`. The ping's answer
    // says "legacy" at once; waiting for the probe would take rmcp's fixed 10 s.
    let started = std::time::Instant::now();
    let m = start(&[("strict", "ignore-discover", "")]);
    let reply = call(&m, "strict", "echo", json!({"text": "hi"}))
        .await
        .expect("the backend connects");
    assert_eq!(text(&reply), "hi");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "connecting took {:?}",
        started.elapsed()
    );
}
