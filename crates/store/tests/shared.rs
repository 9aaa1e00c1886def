//! What only a shared store (PostgreSQL) does for replicas: sessions any replica continues,
//! bound to their opener's token and ended everywhere at once, and the notices replicas send
//! each other (a session ended). Plus the `running` record an
//! execution leaves from its start, which statistics leave out on either engine.

#![allow(clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

mod common;

use std::time::Duration;

use common::two_replicas;
use sandgate_store::{
    ExecutionRecord, Notice, RUNNING, Retention, SessionKind, Store, StoreHandle,
};

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn a_session_opened_on_one_replica_is_found_on_another_with_its_owner_and_state() {
    let Some((one, other)) = two_replicas("sessions").await else {
        return;
    };
    let (a, b) = (
        one.shared().expect("shared"),
        other.shared().expect("shared"),
    );
    let owner = [7u8; 32];
    // The transport keeps its state first, then the opener binds it: until bound it belongs
    // to no one.
    a.set_session_state(SessionKind::Mcp, "s1", r#"{"v":1}"#, HOUR)
        .await
        .expect("state kept");
    let unbound = b.session(SessionKind::Mcp, "s1").await.expect("read");
    assert_eq!(unbound.expect("kept").owner, None);
    a.open_session(SessionKind::Mcp, "s1", owner, "alice", Some("t1"), HOUR)
        .await
        .expect("bound");
    let found = b
        .session(SessionKind::Mcp, "s1")
        .await
        .expect("read")
        .expect("found on the other replica");
    assert_eq!(found.owner, Some(owner));
    assert_eq!(found.profile.as_deref(), Some("alice"));
    assert_eq!(found.token_id.as_deref(), Some("t1"));
    assert_eq!(found.state.as_deref(), Some(r#"{"v":1}"#));
    // Kinds are apart: a console login of the same id is another session.
    assert!(
        b.session(SessionKind::Console, "s1")
            .await
            .expect("read")
            .is_none()
    );
}

#[tokio::test]
async fn an_ended_session_is_gone_everywhere_and_every_replica_hears_of_it() {
    let Some((one, other)) = two_replicas("session_end").await else {
        return;
    };
    let (a, b) = (
        one.shared().expect("shared"),
        other.shared().expect("shared"),
    );
    let mut heard = b.notices();
    // The listener needs its connection before it hears anything.
    let mut changes = other.changes().expect("changes");
    tokio::time::timeout(Duration::from_secs(5), changes.wait_for(|n| *n >= 1))
        .await
        .expect("listening")
        .expect("alive");
    a.open_session(SessionKind::Console, "c1", [1; 32], "bob", None, HOUR)
        .await
        .expect("opened");
    a.end_session(SessionKind::Console, "c1")
        .await
        .expect("ended");
    assert!(
        b.session(SessionKind::Console, "c1")
            .await
            .expect("read")
            .is_none()
    );
    let notice = tokio::time::timeout(Duration::from_secs(5), heard.recv())
        .await
        .expect("heard in time")
        .expect("a notice");
    assert_eq!(
        notice,
        Notice::SessionEnded {
            kind: SessionKind::Console,
            id: "c1".into()
        }
    );
}

#[tokio::test]
async fn a_session_expires_unless_used_and_a_replica_learns_which_of_its_copies_still_live() {
    let Some((one, other)) = two_replicas("session_expiry").await else {
        return;
    };
    let (a, b) = (
        one.shared().expect("shared"),
        other.shared().expect("shared"),
    );
    let short = Duration::from_millis(600);
    for id in ["used", "idle", "ended"] {
        a.open_session(SessionKind::Mcp, id, [2; 32], "p", None, short)
            .await
            .expect("opened");
    }
    a.end_session(SessionKind::Mcp, "ended")
        .await
        .expect("ended");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held: Vec<String> = ["used", "idle", "ended", "never"]
        .map(String::from)
        .to_vec();
    let alive = b
        .keep_sessions(SessionKind::Mcp, &["used".to_string()], &held, short)
        .await
        .expect("kept");
    assert_eq!(alive.len(), 2, "{alive:?}");
    assert!(alive.contains("used") && alive.contains("idle"));
    tokio::time::sleep(Duration::from_millis(450)).await;
    // `idle` was not used: it expired; `used` was moved on.
    assert!(
        b.session(SessionKind::Mcp, "idle")
            .await
            .expect("read")
            .is_none()
    );
    assert!(
        b.session(SessionKind::Mcp, "used")
            .await
            .expect("read")
            .is_some()
    );
    let alive = b
        .keep_sessions(SessionKind::Mcp, &[], &held, short)
        .await
        .expect("kept");
    assert_eq!(
        alive.into_iter().collect::<Vec<_>>(),
        vec!["used".to_string()]
    );
}

fn record(id: &str, status: &str, duration_ms: f64) -> ExecutionRecord {
    ExecutionRecord {
        id: id.into(),
        started_at_ms: 1_700_000_000_000,
        tier: "sandbox".into(),
        code_hash: "h".into(),
        code: Some("1".into()),
        duration_ms,
        status: status.into(),
        calls: 0,
        output_bytes: 0,
        returned_bytes: 0,
        error_kind: None,
        profile: "alice".into(),
        user: None,
        call_rows: vec![],
        shown: None,
        error_line: None,
    }
}

#[tokio::test]
async fn a_record_left_running_is_listed_but_kept_out_of_the_statistics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut handles = vec![
        StoreHandle::spawn(
            Store::open(&dir.path().join("s.db"), Retention::default()).expect("opens"),
        )
        .expect("spawns"),
    ];
    if let Some((pg, _)) = two_replicas("running").await {
        handles.push(pg);
    }
    for store in handles {
        // Started and finished within one batch: written once, finished.
        store.record(record("done", RUNNING, 0.0));
        store.record(record("done", "ok", 10.0));
        store.record(record("dead", RUNNING, 0.0));
        let listed = store.list(10).await.expect("listed");
        assert_eq!(listed.len(), 2, "{}", store.engine());
        let done = store.get("done").await.expect("kept");
        assert_eq!(
            (done.status.as_str(), done.duration_ms),
            ("ok", 10.0),
            "{}",
            store.engine()
        );
        let stats = store.stats(None).await.expect("stats");
        assert_eq!(stats.executions, 1, "{}", store.engine());
        assert_eq!(stats.tiers.len(), 1, "{}", store.engine());
        assert_eq!(stats.tiers[0].count, 1, "{}", store.engine());
        assert_eq!(stats.tiers[0].p50_ms, 10.0, "{}", store.engine());
    }
}
