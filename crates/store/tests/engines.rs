//! One suite, both engines: every test runs against the embedded SQLite store and against
//! PostgreSQL, through the same `StoreHandle` the gateway uses. Each test also opens a second
//! handle on the same store (another process, or another replica) and checks that what one
//! wrote the other reads.
//!
//! PostgreSQL comes from `SANDGATE_TEST_DATABASE_URL` (`scripts/test` starts a throwaway
//! server with `scripts/test-postgres` and sets it); each test gets a database of its own.
//! Without it the PostgreSQL half is skipped with a message, unless
//! `SANDGATE_REQUIRE_POSTGRES=1` (set by `scripts/test`), which makes it a failure.

#![allow(clippy::expect_used)]
// The test server's address comes from the environment `scripts/test` sets.
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

mod common;

use common::{engines, postgres_url, test_ca, two_replicas};
use sandgate_store::{
    CallRow, ExecutionRecord, RecordFilter, Retention, Store, StoreError, StoreHandle,
};

fn record(id: &str, at: i64, profile: &str, status: &str) -> ExecutionRecord {
    ExecutionRecord {
        id: id.into(),
        started_at_ms: at,
        tier: "sandbox".into(),
        code_hash: format!("hash-{id}"),
        code: Some(format!("return '{id}'")),
        duration_ms: 12.5,
        status: status.into(),
        calls: 2,
        output_bytes: 5000,
        returned_bytes: 1000,
        error_kind: (status != "ok").then(|| "timeout".into()),
        profile: profile.into(),
        user: None,
        call_rows: vec![
            CallRow {
                backend: "memory".into(),
                tool: "read_graph".into(),
                duration_ms: Some(4.0),
                ok: true,
                changed_state: Some(false),
                args_bytes: 12,
                result_bytes: 345,
                started_ms: Some(1.5),
                error: None,
                arguments: Some(r#"{"query":"ada"}"#.into()),
            },
            CallRow {
                backend: "github".into(),
                tool: "search".into(),
                duration_ms: None,
                ok: false,
                changed_state: None,
                args_bytes: 3,
                result_bytes: 0,
                started_ms: None,
                error: Some("é".repeat(3000)),
                arguments: None,
            },
        ],
        shown: Some(format!("shown for {id}")),
        error_line: (status != "ok").then_some(3),
    }
}

#[tokio::test]
async fn records_and_their_calls_read_back_whole_on_either_handle() {
    for e in engines("records", Retention::default()).await {
        let base = sandgate_store::now_ms();
        for i in 0..5 {
            let profile = if i % 2 == 0 { "alice" } else { "bob" };
            let status = if i == 4 { "error" } else { "ok" };
            e.one
                .record(record(&format!("ex-{i}"), base + i, profile, status));
        }
        e.one.flush().await.expect("flushed");
        let got = e
            .other
            .get("ex-4")
            .await
            .expect("the other handle reads it");
        assert_eq!(got.call_rows.len(), 2, "{}", e.name);
        assert_eq!(got.code.as_deref(), Some("return 'ex-4'"), "{}", e.name);
        assert_eq!(got.shown.as_deref(), Some("shown for ex-4"), "{}", e.name);
        assert_eq!(got.error_line, Some(3), "{}", e.name);
        let cut = got.call_rows[1].error.as_deref().expect("an error");
        assert_eq!(
            cut.chars().count(),
            1001,
            "{}: cut to 1,000 and marked",
            e.name
        );
        assert_eq!(
            got.call_rows[0].arguments.as_deref(),
            Some(r#"{"query":"ada"}"#)
        );
        let ids: Vec<String> = e
            .other
            .list(3)
            .await
            .expect("lists")
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(ids, ["ex-4", "ex-3", "ex-2"], "{}: newest first", e.name);
        let alice = RecordFilter {
            profile: Some("alice".into()),
            ..RecordFilter::default()
        };
        let ids: Vec<String> = e
            .other
            .list_matching(alice, 10)
            .await
            .expect("lists")
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(ids, ["ex-4", "ex-2", "ex-0"], "{}", e.name);
        let failed = RecordFilter {
            status: Some("error".into()),
            since_ms: Some(base + 1),
            ..RecordFilter::default()
        };
        assert_eq!(
            e.other
                .list_matching(failed, 10)
                .await
                .expect("lists")
                .len(),
            1,
            "{}",
            e.name
        );
        assert_eq!(
            e.other.ids_starting_with("ex-", 2).await.expect("ids"),
            ["ex-4", "ex-3"],
            "{}",
            e.name
        );
        let stats = e.other.stats(None).await.expect("stats");
        assert_eq!(stats.executions, 5, "{}", e.name);
        assert_eq!(stats.tiers[0].errors, 1, "{}", e.name);
        assert_eq!(stats.bytes_saved, 5 * 4000, "{}", e.name);
        assert_eq!(
            stats.backends.len(),
            1,
            "{}: unfinished calls have no latency",
            e.name
        );
        assert_eq!(
            e.other.stats(Some("bob")).await.expect("stats").executions,
            2,
            "{}",
            e.name
        );
        // A record written again (an execution that ends after it started) replaces itself.
        let mut again = record("ex-0", base, "alice", "ok");
        again.call_rows.truncate(1);
        e.one.record(again);
        e.one.flush().await.expect("flushed");
        assert_eq!(
            e.other.get("ex-0").await.expect("read").call_rows.len(),
            1,
            "{}",
            e.name
        );
        let missing = e.other.get("ex-nothing").await;
        assert!(
            matches!(missing, Err(StoreError::NoExecution { .. })),
            "{}: {missing:?}",
            e.name
        );
    }
}

#[tokio::test]
async fn a_waited_record_is_written_when_its_commit_answers() {
    for e in engines("waited", Retention::default()).await {
        let base = sandgate_store::now_ms();
        // Queued behind a record nobody waits for: both are written by then, in order.
        e.one.record(record("queued-first", base, "alice", "ok"));
        e.one
            .record_waited(record("waited", base + 1, "alice", "ok"))
            .committed()
            .await
            .expect("written");
        // The other handle has its own queue: what it reads was written, not held in ours.
        for id in ["queued-first", "waited"] {
            let got = e.other.get(id).await;
            assert!(got.is_ok(), "{}: {id} is on record: {got:?}", e.name);
        }
    }
}

#[tokio::test]
async fn an_output_is_committed_then_read_whole_or_by_range_from_either_handle() {
    for e in engines("outputs", Retention::default()).await {
        let body = "aé😀b漢字\nend".repeat(5000);
        e.one
            .save_output("ex-1@owner".into(), body.clone())
            .committed()
            .await
            .expect("committed");
        assert_eq!(
            e.other.output("ex-1@owner").await.expect("read"),
            body,
            "{}",
            e.name
        );
        assert_eq!(
            e.other.output_any_owner("ex-1").await.expect("read"),
            body,
            "{}",
            e.name
        );
        for step in [1, 2, 3, 7, 1000, 65_536] {
            let mut joined = String::new();
            let mut at = 0;
            while at < body.len() {
                let part = e
                    .other
                    .output_range("ex-1@owner", at, Some(step))
                    .await
                    .expect("a range");
                assert!(
                    part.end > at && part.total_bytes == body.len(),
                    "{}",
                    e.name
                );
                joined.push_str(&part.text);
                at = part.end;
                if step < 1000 && at > 200 {
                    // Small steps: the start of the walk, then jump near the end.
                    let tail = body.len() - 50;
                    let part = e
                        .other
                        .output_range("ex-1@owner", tail, None)
                        .await
                        .expect("the tail");
                    assert!(
                        body.ends_with(&part.text) && part.end == body.len(),
                        "{}",
                        e.name
                    );
                    joined.clear();
                    break;
                }
            }
            if !joined.is_empty() {
                assert_eq!(joined, body, "{}: step {step}", e.name);
            }
        }
        let past = e.other.output_range("ex-1@owner", body.len(), None).await;
        assert!(
            matches!(past, Err(StoreError::Range { .. })),
            "{}: {past:?}",
            e.name
        );
        let missing = e.other.output("ex-2").await;
        assert!(
            matches!(missing, Err(StoreError::NoOutput { .. })),
            "{}: {missing:?}",
            e.name
        );
    }
}

#[tokio::test]
async fn stored_tools_keep_their_versions_owners_and_a_change_mark_the_other_handle_sees() {
    for e in engines("tools", Retention::default()).await {
        let mark = e.other.change_mark().await.expect("a mark");
        assert_eq!(
            e.one
                .put_tool("t", "v1", "{}", "alice")
                .await
                .expect("added"),
            1
        );
        assert_eq!(
            e.one
                .put_tool("t", "v2", "{}", "alice")
                .await
                .expect("updated"),
            2
        );
        assert_ne!(
            e.other.change_mark().await.expect("a mark"),
            mark,
            "{}: the other sees a change",
            e.name
        );
        let refused = e.other.put_tool("t", "bob's", "{}", "bob").await;
        assert!(
            matches!(&refused, Err(StoreError::OwnedByOther { owner, .. }) if owner == "alice"),
            "{}: {refused:?}",
            e.name
        );
        e.other.rollback_tool("t", 1).await.expect("rolled back");
        assert_eq!(
            e.one.tool("t").await.expect("current").code,
            "v1",
            "{}",
            e.name
        );
        let history = e.one.tool_versions("t").await.expect("history");
        assert_eq!(
            history
                .iter()
                .map(|v| (v.version, v.current))
                .collect::<Vec<_>>(),
            [(1, true), (2, false)],
            "{}",
            e.name
        );
        assert_eq!(
            e.one.tool_version("t", 2).await.expect("v2").code,
            "v2",
            "{}",
            e.name
        );
        let refused = e.one.remove_tool("t", "bob", false).await;
        assert!(
            matches!(refused, Err(StoreError::OwnedByOther { .. })),
            "{}: {refused:?}",
            e.name
        );
        e.one
            .remove_tool("t", "carol", true)
            .await
            .expect("an admin removes it");
        assert!(
            e.other.tools().await.expect("tools").is_empty(),
            "{}",
            e.name
        );
        assert_eq!(
            e.other
                .put_tool("t", "bob's", "{}", "bob")
                .await
                .expect("added"),
            3,
            "{}: numbering goes on",
            e.name
        );
        let missing = e.one.tool_version("t", 9).await;
        assert!(
            matches!(missing, Err(StoreError::NoToolVersion { .. })),
            "{}: {missing:?}",
            e.name
        );
    }
}

#[tokio::test]
async fn one_name_changed_on_two_handles_at_once_gets_distinct_versions() {
    for e in engines("racing", Retention::default()).await {
        let writes = (0..20).map(|i| {
            let handle = if i % 2 == 0 {
                e.one.clone()
            } else {
                e.other.clone()
            };
            async move {
                handle
                    .put_tool("raced", &format!("v{i}"), "{}", "alice")
                    .await
            }
        });
        let mut versions: Vec<u32> = futures_join(writes)
            .await
            .into_iter()
            .map(|v| v.expect("each write lands"))
            .collect();
        versions.sort_unstable();
        assert_eq!(versions, (1..=20).collect::<Vec<_>>(), "{}", e.name);
    }
}

async fn futures_join<F: std::future::Future + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.expect("the task ends"));
    }
    out
}

#[tokio::test]
async fn retention_drops_the_oldest_records_their_codes_and_expired_outputs() {
    let retention = Retention {
        outputs: Duration::from_millis(0),
        max_records: 5,
    };
    for e in engines("retention", retention).await {
        let base = sandgate_store::now_ms() - 1000;
        for i in 0..12 {
            e.one
                .record(record(&format!("ex-{i:02}"), base + i, "alice", "ok"));
        }
        e.one.flush().await.expect("flushed");
        e.one
            .save_output("ex-11".into(), "old".into())
            .committed()
            .await
            .expect("committed");
        tokio::time::sleep(Duration::from_millis(5)).await;
        e.one.prune().await.expect("prunes");
        let ids: Vec<String> = e
            .one
            .list(100)
            .await
            .expect("lists")
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(
            ids,
            ["ex-11", "ex-10", "ex-09", "ex-08", "ex-07"],
            "{}",
            e.name
        );
        assert_eq!(
            e.one.code_count().await.expect("codes"),
            5,
            "{}: the dropped records' codes go",
            e.name
        );
        let expired = e.one.output("ex-11").await;
        assert!(
            matches!(expired, Err(StoreError::NoOutput { .. })),
            "{}: {expired:?}",
            e.name
        );
    }
}

#[tokio::test]
async fn replicas_that_start_together_migrate_once_and_a_newer_database_is_refused() {
    let Some(url) = postgres_url("migrate").await else {
        return;
    };
    let starting = (0..4).map(|_| {
        let url = url.clone();
        async move { StoreHandle::postgres(&url, test_ca().as_deref(), Retention::default()).await }
    });
    for started in futures_join(starting).await {
        started.expect("every replica starts");
    }
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(connection);
    let version: i64 = client
        .query_one("SELECT version FROM sandgate_schema", &[])
        .await
        .expect("a version")
        .get(0);
    assert_eq!(version, sandgate_store::postgres::schema::latest());
    client
        .execute("UPDATE sandgate_schema SET version = version + 1", &[])
        .await
        .expect("a newer sandgate's version");
    let refused = StoreHandle::postgres(&url, test_ca().as_deref(), Retention::default()).await;
    assert!(
        matches!(refused, Err(StoreError::TooNew { .. })),
        "{:?}",
        refused.map(|h| h.engine())
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_clear_error_that_names_it_without_the_password() {
    let refused = StoreHandle::postgres(
        "postgres://app:s3cret@127.0.0.1:9/none?connect_timeout=2",
        None,
        Retention::default(),
    )
    .await;
    let message = refused
        .map(|h| h.engine())
        .expect_err("nothing listens there")
        .to_string();
    assert!(
        message.contains("127.0.0.1:9")
            && message.contains("cannot connect")
            && !message.contains("s3cret"),
        "{message}"
    );
}

/// Fault injection: a TCP proxy in front of the test server that can cut every connection
/// and refuse new ones (PostgreSQL down), then let them through again.
struct Cuttable {
    port: u16,
    open: std::sync::Arc<std::sync::atomic::AtomicBool>,
    cuts: tokio::sync::watch::Sender<u64>,
}

impl Cuttable {
    async fn before(upstream: std::net::SocketAddr) -> Cuttable {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let port = listener.local_addr().expect("an address").port();
        let open = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (cuts, _) = tokio::sync::watch::channel(0u64);
        let (taking, cut) = (open.clone(), cuts.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !taking.load(std::sync::atomic::Ordering::SeqCst) {
                    continue; // dropped: the connection is refused at once
                }
                let mut cut = cut.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Cuttable { port, open, cuts }
    }

    fn cut(&self) {
        self.open.store(false, std::sync::atomic::Ordering::SeqCst);
        self.cuts.send_modify(|n| *n += 1);
    }

    fn restore(&self) {
        self.open.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test]
async fn while_postgresql_is_away_a_commit_fails_and_records_wait_until_it_is_back() {
    let Some(url) = postgres_url("outage").await else {
        return;
    };
    let config: tokio_postgres::Config = url.parse().expect("a URL");
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let proxy = Cuttable::before(std::net::SocketAddr::from(([127, 0, 0, 1], port))).await;
    let through = url.replacen(&format!(":{port}/"), &format!(":{}/", proxy.port), 1);
    assert_ne!(through, url, "the URL names the port");
    let store = StoreHandle::postgres(&through, test_ca().as_deref(), Retention::default())
        .await
        .expect("connects through the proxy");
    let base = sandgate_store::now_ms();
    for i in 0..3 {
        store.record(record(&format!("before-{i}"), base + i, "alice", "ok"));
    }
    store.flush().await.expect("flushed");
    proxy.cut();
    for i in 0..5 {
        store.record(record(&format!("during-{i}"), base + 10 + i, "alice", "ok"));
    }
    let refused = store
        .save_output("ex-during".into(), "x".into())
        .committed()
        .await;
    assert!(
        refused.is_err(),
        "a commit while the database is away fails"
    );
    let said = refused.expect_err("an error").to_string();
    assert!(said.contains("PostgreSQL"), "{said}");
    assert!(
        store.list(100).await.is_err(),
        "a read says the store is away"
    );
    // A waited record is answered once its attempt failed, not when the database is back;
    // it is held with the others.
    let waited = tokio::time::timeout(
        Duration::from_secs(20),
        store
            .record_waited(record("during-waited", base + 20, "alice", "ok"))
            .committed(),
    )
    .await
    .expect("answered while the database is away");
    assert!(waited.is_err(), "the answer says it is not written yet");
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.restore();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(records) = store.list(100).await
            && records.len() == 9
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the held records were never written"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    store
        .save_output("ex-after".into(), "y".into())
        .committed()
        .await
        .expect("commits again");
}

#[tokio::test]
async fn tls_is_used_when_the_server_offers_it_and_its_certificate_is_checked() {
    let Some(url) = postgres_url("tls").await else {
        return;
    };
    let ca = test_ca().expect("SANDGATE_TEST_DATABASE_CA names the test server's CA");
    let required = format!("{url}?sslmode=require");
    StoreHandle::postgres(&required, Some(&ca), Retention::default())
        .await
        .expect("TLS with the server's CA");
    // Without its CA the server's certificate is refused: TLS was spoken, and checked.
    let refused = StoreHandle::postgres(&required, None, Retention::default())
        .await
        .map(|h| h.engine())
        .expect_err("an unknown issuer")
        .to_string();
    assert!(
        refused.contains("certificate") && refused.contains("ca_file"),
        "{refused}"
    );
    // Asked for no TLS, none is attempted.
    StoreHandle::postgres(
        &format!("{url}?sslmode=disable"),
        None,
        Retention::default(),
    )
    .await
    .expect("in the clear, as asked");
}

#[tokio::test]
async fn a_shared_rate_admits_its_limit_across_replicas_and_no_more() {
    let Some(url) = postgres_url("rates").await else {
        return;
    };
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(
            StoreHandle::postgres(&url, test_ca().as_deref(), Retention::default())
                .await
                .expect("connects"),
        );
    }
    // 100 attempts at once, spread over three replicas, against 30 a minute.
    let attempts = (0..100).map(|i| {
        let replica = replicas[i % 3].clone();
        async move { replica.admit_shared("executions:p", 30).await }
    });
    let outcomes: Vec<sandgate_store::Admitted> = futures_join(attempts)
        .await
        .into_iter()
        .map(|o| o.expect("shared").expect("answered"))
        .collect();
    let admitted = outcomes
        .iter()
        .filter(|o| **o == sandgate_store::Admitted::Yes)
        .count();
    assert_eq!(admitted, 30, "the limit holds across replicas, exactly");
    let waits: Vec<Duration> = outcomes
        .iter()
        .filter_map(|o| match o {
            sandgate_store::Admitted::No { retry_in } => Some(*retry_in),
            sandgate_store::Admitted::Yes => None,
        })
        .collect();
    assert!(
        waits.iter().all(|w| *w <= Duration::from_millis(2100)),
        "one admission frees every 2 s: {waits:?}"
    );
    // Another key is not slowed.
    assert_eq!(
        replicas[0]
            .admit_shared("executions:q", 30)
            .await
            .expect("shared")
            .expect("answered"),
        sandgate_store::Admitted::Yes
    );
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let again: Vec<_> = futures_join((0..3).map(|i| {
        let replica = replicas[i].clone();
        async move { replica.admit_shared("executions:p", 30).await }
    }))
    .await;
    let freed = again
        .into_iter()
        .filter(|o| matches!(o, Some(Ok(sandgate_store::Admitted::Yes))))
        .count();
    assert_eq!(freed, 1, "after one interval, one more");
    // SQLite counts in the process: not shared.
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = StoreHandle::spawn(
        Store::open(&dir.path().join("s.db"), Retention::default()).expect("opens"),
    )
    .expect("spawns");
    assert!(sqlite.admit_shared("executions:p", 30).await.is_none());
}

#[tokio::test]
async fn a_change_on_one_replica_is_announced_to_the_others() {
    let Some((one, other)) = two_replicas("announce").await else {
        return;
    };
    let mut heard = other.changes().expect("PostgreSQL announces changes");
    // The listener's first connection counts as a change (nothing heard before it).
    tokio::time::timeout(Duration::from_secs(5), heard.wait_for(|n| *n >= 1))
        .await
        .expect("listening")
        .expect("the listener lives");
    let before = *heard.borrow_and_update();
    one.put_tool("t", "v1", "{}", "alice").await.expect("added");
    tokio::time::timeout(Duration::from_secs(5), heard.wait_for(|n| *n > before))
        .await
        .expect("the other replica hears of the change")
        .expect("the listener lives");
}

#[tokio::test]
async fn a_users_records_are_found_by_its_id_and_no_other_users_are() {
    for e in engines("record_users", Retention::default()).await {
        for (id, user) in [("u1", Some("aa")), ("u2", Some("bb")), ("u3", None)] {
            let mut r = record(id, 1_000, "builder", "ok");
            r.user = user.map(str::to_string);
            e.one.record(r);
        }
        let of = |user: &str| RecordFilter {
            user: Some(Some(user.to_string())),
            ..RecordFilter::default()
        };
        let ids = |records: Vec<ExecutionRecord>| {
            records
                .into_iter()
                .map(|r| (r.id, r.user))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(e.one.list_matching(of("aa"), 10).await.expect("listed")),
            [("u1".to_string(), Some("aa".to_string()))],
            "{}",
            e.name
        );
        assert!(
            ids(e.one.list_matching(of("cc"), 10).await.expect("listed")).is_empty(),
            "{}",
            e.name
        );
        let without = RecordFilter {
            user: Some(None),
            ..RecordFilter::default()
        };
        assert_eq!(
            ids(e.one.list_matching(without, 10).await.expect("listed")),
            [("u3".to_string(), None)],
            "{}: records no user ran",
            e.name
        );
        assert_eq!(
            e.one.get("u2").await.expect("read").user.as_deref(),
            Some("bb"),
            "{}",
            e.name
        );
    }
}
