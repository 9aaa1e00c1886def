//! The store on a real SQLite file: migrations from every earlier version, records and stats,
//! outputs by range, retention, and the handle's ordering guarantee.

#![allow(clippy::expect_used)]

use std::time::Duration;

use rusqlite::Connection;
use sandgate_store::migrate::{MIGRATIONS, latest, migrate};
use sandgate_store::{CallRow, ExecutionRecord, Retention, Store, StoreError, StoreHandle};

fn record(id: &str, tier: &str, ms: f64, status: &str) -> ExecutionRecord {
    ExecutionRecord {
        id: id.into(),
        started_at_ms: sandgate_store::now_ms(),
        tier: tier.into(),
        code_hash: "abc".into(),
        code: None,
        duration_ms: ms,
        status: status.into(),
        calls: 1,
        output_bytes: 5000,
        returned_bytes: 1000,
        error_kind: (status != "ok").then(|| "timeout".into()),
        profile: "default".into(),
        user: None,
        call_rows: vec![CallRow {
            backend: "memory".into(),
            tool: "read_graph".into(),
            duration_ms: Some(ms / 2.0),
            ok: status == "ok",
            changed_state: Some(false),
            args_bytes: 12,
            result_bytes: 345,
            started_ms: Some(1.5),
            error: (status != "ok").then(|| "x".repeat(5000)),
            arguments: Some(r#"{"query":"ada"}"#.into()),
        }],
        shown: Some(format!("shown for {id}")),
        error_line: (status != "ok").then_some(3),
    }
}

#[test]
fn migrations_run_forward_from_every_version() {
    for start in 0..=MIGRATIONS.len() {
        let conn = Connection::open_in_memory().expect("memory db");
        for sql in &MIGRATIONS[..start] {
            conn.execute_batch(sql).expect("old migration");
        }
        conn.pragma_update(None, "user_version", start as i64)
            .expect("version");
        migrate(&conn).expect("migrates");
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .expect("version");
        assert_eq!(version, latest());
    }
}

/// Several `sandgate run` processes may open one store file that an older sandgate left a
/// version behind (or that does not exist yet): each must find it migrated, none may fail on
/// a step another process applied first.
#[test]
fn processes_that_open_one_old_store_together_migrate_it_once() {
    for start in [0, MIGRATIONS.len() - 1] {
        for _round in 0..5 {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("s.db");
            if start > 0 {
                let conn = Connection::open(&path).expect("opens");
                for sql in &MIGRATIONS[..start] {
                    conn.execute_batch(sql).expect("old migration");
                }
                conn.pragma_update(None, "user_version", start as i64)
                    .expect("version");
            }
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
            let openers: Vec<_> = (0..6)
                .map(|_| {
                    let (path, barrier) = (path.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        Store::open(&path, Retention::default()).map(|_| ())
                    })
                })
                .collect();
            for opener in openers {
                let opened = opener.join().expect("no panic");
                assert!(opened.is_ok(), "from version {start}: {opened:?}");
            }
        }
    }
}

#[test]
fn a_store_from_a_newer_sandgate_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.db");
    Store::open(&path, Retention::default()).expect("creates");
    let conn = Connection::open(&path).expect("opens");
    conn.pragma_update(None, "user_version", latest() + 1)
        .expect("bump");
    drop(conn);
    let error = Store::open(&path, Retention::default()).expect_err("refused");
    assert!(matches!(error, StoreError::TooNew { .. }), "{error}");
    assert!(error.to_string().contains("Upgrade sandgate"));
}

#[test]
fn records_list_show_and_stats() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = Store::open(&dir.path().join("nested/dir/s.db"), Retention::default())
        .expect("opens, creating directories");
    for (i, ms) in [1.0, 2.0, 3.0, 4.0, 100.0].iter().enumerate() {
        store
            .record(&record(&format!("a{i}"), "json", *ms, "ok"))
            .expect("records");
    }
    store
        .record(&record("b0", "sandbox", 50.0, "error"))
        .expect("records");
    let mut reader = record("r0", "sandbox", 7.0, "ok");
    reader.profile = "reader".into();
    reader.code_hash = "c0de".into();
    reader.code = Some("return 42".into());
    store.record(&reader).expect("records");
    // The code is kept once per hash, and read back with the record.
    let mut twin = record("r1", "sandbox", 7.0, "ok");
    twin.code_hash = "c0de".into();
    twin.code = Some("return 42".into());
    store.record(&twin).expect("records");
    assert_eq!(
        store.get("r1").expect("shows").code.as_deref(),
        Some("return 42")
    );
    assert_eq!(store.get("a0").expect("shows").code, None);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("nested/dir/s.db"))
        .expect("file")
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "only the owner may read stored outputs"
    );
    let listed = store.list(3).expect("lists");
    assert_eq!(listed.len(), 3);
    let shown = store.get("b0").expect("shows");
    assert_eq!(shown.error_kind.as_deref(), Some("timeout"));
    assert_eq!(shown.call_rows.len(), 1);
    assert_eq!(shown.call_rows[0].changed_state, Some(false));
    assert_eq!(
        (
            shown.call_rows[0].args_bytes,
            shown.call_rows[0].result_bytes
        ),
        (12, 345)
    );
    assert_eq!(shown.call_rows[0].started_ms, Some(1.5));
    assert_eq!(
        shown.call_rows[0].arguments.as_deref(),
        Some(r#"{"query":"ada"}"#)
    );
    // A failure text is kept, cut to its bound.
    let error = shown.call_rows[0].error.as_deref().unwrap_or_default();
    assert_eq!(
        error.chars().count(),
        sandgate_store::MAX_CALL_ERROR_CHARS + 1,
        "{error}"
    );
    assert!(matches!(
        store.get("nope"),
        Err(StoreError::NoExecution { .. })
    ));

    // Each profile's statistics hold its own executions only; the gateway's hold them all.
    let mine = store.stats(Some("reader")).expect("stats");
    assert_eq!(mine.executions, 1);
    assert_eq!(store.stats(Some("default")).expect("stats").executions, 7);
    assert_eq!(mine.tiers.len(), 1);
    assert_eq!((mine.backends[0].calls, mine.outputs_stored), (1, None));
    assert_eq!(store.get("r0").expect("shows").profile, "reader");
    assert_eq!(store.stats(Some("nobody")).expect("stats").executions, 0);
    store.save_output("r0", "out").expect("saves");
    assert_eq!(store.stats(None).expect("stats").outputs_stored, Some(1));
    let stats = store.stats(Some("default")).expect("stats");
    assert_eq!(stats.executions, 7);
    let json = stats
        .tiers
        .iter()
        .find(|t| t.tier == "json")
        .expect("json tier");
    assert_eq!(
        (json.count, json.errors, json.p50_ms, json.p95_ms),
        (5, 0, 3.0, 100.0)
    );
    let sandbox = stats
        .tiers
        .iter()
        .find(|t| t.tier == "sandbox")
        .expect("sandbox tier");
    assert_eq!((sandbox.count, sandbox.errors), (2, 1));
    assert_eq!(stats.backends[0].backend, "memory");
    assert_eq!(stats.backends[0].calls, 7);
    assert_eq!(stats.bytes_saved, 7 * 4000);
}

#[test]
fn outputs_are_kept_read_by_range_and_expire() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.db");
    let mut store = Store::open(&path, Retention::default()).expect("opens");
    let body = "héllo wörld ".repeat(1000);
    store.save_output("x", &body).expect("saves");
    assert_eq!(store.output("x").expect("whole"), body);
    let part = store.output_range("x", 1, Some(2)).expect("range");
    assert_eq!((part.text.as_str(), part.start, part.end), ("é", 1, 3));
    assert!(matches!(
        store.output("y"),
        Err(StoreError::NoOutput { .. })
    ));
    drop(store);
    // Reopened with a retention shorter than the output's age: it is gone.
    std::thread::sleep(Duration::from_millis(20));
    let store = Store::open(
        &path,
        Retention {
            outputs: Duration::from_millis(1),
            max_records: 10,
        },
    )
    .expect("reopens");
    assert!(matches!(
        store.output("x"),
        Err(StoreError::NoOutput { .. })
    ));
}

#[test]
fn records_past_the_cap_are_dropped_oldest_first() {
    let retention = Retention {
        outputs: Duration::from_secs(3600),
        max_records: 3,
    };
    let mut store = Store::open_in_memory(retention).expect("opens");
    for i in 0..5 {
        let mut r = record(&format!("r{i}"), "json", 1.0, "ok");
        r.started_at_ms = i;
        store.record(&r).expect("records");
    }
    store.prune().expect("prunes");
    let ids: Vec<String> = store
        .list(10)
        .expect("lists")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, ["r4", "r3", "r2"]);
}

#[tokio::test]
async fn the_handle_reads_its_own_writes() {
    let handle = StoreHandle::spawn(Store::open_in_memory(Retention::default()).expect("opens"))
        .expect("spawns");
    let commit = handle.save_output("id1".into(), "full text".into());
    handle.record(record("id1", "sandbox", 2.0, "ok"));
    assert_eq!(handle.output("id1").await.expect("read"), "full text");
    commit.committed().await.expect("the output is written");
    assert_eq!(handle.get("id1").await.expect("record").tier, "sandbox");
    assert_eq!(handle.stats(None).await.expect("stats").executions, 1);
    // A burst is written in batches; a read after it still sees every record.
    for i in 0..600 {
        handle.record(record(&format!("burst{i}"), "json", 1.0, "ok"));
    }
    assert_eq!(handle.stats(None).await.expect("stats").executions, 601);
}

#[test]
fn execution_ids_carry_128_random_bits() {
    let ids: Vec<String> = (0..1000)
        .map(|_| sandgate_store::new_execution_id())
        .collect();
    for id in &ids {
        let random = id.rsplit('-').next().expect("random part");
        assert_eq!(random.len(), 32, "{id}");
        assert!(random.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len());
    // Consecutive ids share no run of their random parts (a counter would).
    let (a, b) = (&ids[0][ids[0].len() - 32..], &ids[1][ids[1].len() - 32..]);
    let same = a.chars().zip(b.chars()).filter(|(x, y)| x == y).count();
    assert!(same < 12, "{a} vs {b}");
}

#[test]
fn the_operator_reads_outputs_whoever_stored_them() {
    let mut store = Store::open_in_memory(Retention::default()).expect("store");
    store
        .save_output("ex-1@abcdef", "an http caller's")
        .expect("saves");
    store
        .save_output("ex-2", "a local caller's")
        .expect("saves");
    store.save_output("ex-10@abcdef", "another").expect("saves");
    assert_eq!(
        store.output_for_operator("ex-1").expect("found"),
        "an http caller's"
    );
    assert_eq!(
        store.output_for_operator("ex-2").expect("found"),
        "a local caller's"
    );
    assert!(
        store.output("ex-1").is_err(),
        "callers read by their own key only"
    );
    assert!(matches!(
        store.output_for_operator("ex-3"),
        Err(StoreError::NoOutput { .. })
    ));
}

#[test]
fn records_are_listed_by_filter_and_keep_what_the_model_was_shown() {
    let mut store = Store::open_in_memory(Retention::default()).expect("opens");
    for (id, tier, status, profile) in [
        ("x1", "json", "ok", "default"),
        ("x2", "sandbox", "error", "default"),
        ("x3", "sandbox", "ok", "reader"),
        ("x4", "sandbox", "cancelled", "reader"),
    ] {
        let mut r = record(id, tier, 1.0, status);
        r.profile = profile.into();
        store.record(&r).expect("records");
    }
    let ids = |filter: &sandgate_store::RecordFilter| -> Vec<String> {
        let mut ids: Vec<String> = store
            .list_matching(filter, 10)
            .expect("lists")
            .into_iter()
            .map(|r| r.id)
            .collect();
        ids.sort();
        ids
    };
    let by = |profile: Option<&str>, status: Option<&str>, tier: Option<&str>| {
        sandgate_store::RecordFilter {
            profile: profile.map(str::to_string),
            status: status.map(str::to_string),
            tier: tier.map(str::to_string),
            since_ms: None,
            user: None,
        }
    };
    assert_eq!(ids(&by(Some("reader"), None, None)), ["x3", "x4"]);
    assert_eq!(ids(&by(None, Some("error"), None)), ["x2"]);
    assert_eq!(ids(&by(None, None, Some("sandbox"))), ["x2", "x3", "x4"]);
    assert_eq!(ids(&by(Some("default"), Some("ok"), Some("json"))), ["x1"]);
    let future = sandgate_store::RecordFilter {
        since_ms: Some(sandgate_store::now_ms() + 60_000),
        ..Default::default()
    };
    assert!(ids(&future).is_empty());
    let shown = store.get("x2").expect("shows");
    assert_eq!(
        (shown.shown.as_deref(), shown.error_line),
        (Some("shown for x2"), Some(3))
    );
    // A long text is cut to its bound.
    let mut long = record("x5", "sandbox", 1.0, "ok");
    long.shown = Some("é".repeat(sandgate_store::MAX_SHOWN_BYTES));
    store.record(&long).expect("records");
    let kept = store.get("x5").expect("shows").shown.unwrap_or_default();
    assert!(kept.len() < sandgate_store::MAX_SHOWN_BYTES + 64 && kept.contains("(cut: "));
}

#[test]
fn only_the_most_recent_records_keep_what_the_model_was_shown() {
    let mut store = Store::open_in_memory(Retention::default()).expect("opens");
    let keep = sandgate_store::KEEP_SHOWN as usize;
    let start = sandgate_store::now_ms() - 1_000_000;
    let batch: Vec<ExecutionRecord> = (0..keep + 150)
        .map(|i| {
            let mut r = record(&format!("s{i}"), "json", 1.0, "ok");
            r.started_at_ms = start + i as i64;
            r
        })
        .collect();
    store.record_all(&batch).expect("records");
    store.prune().expect("prunes");
    let shown = |i: usize| store.get(&format!("s{i}")).expect("shows").shown;
    assert_eq!(shown(0), None);
    assert_eq!(shown(149), None);
    assert_eq!(shown(150).as_deref(), Some("shown for s150"));
    assert_eq!(shown(keep + 149).as_deref(), Some("shown for s1149"));
    // A later prune lets go of those that fell out since, and only them.
    let more: Vec<ExecutionRecord> = (keep + 150..keep + 200)
        .map(|i| {
            let mut r = record(&format!("s{i}"), "json", 1.0, "ok");
            r.started_at_ms = start + i as i64;
            r
        })
        .collect();
    store.record_all(&more).expect("records");
    store.prune().expect("prunes");
    assert_eq!(store.get("s199").expect("shows").shown, None);
    assert_eq!(
        store.get("s200").expect("shows").shown.as_deref(),
        Some("shown for s200")
    );
}

#[test]
fn writes_keep_the_records_under_the_cap_and_drop_the_codes_only_they_held() {
    let retention = Retention {
        outputs: Duration::from_secs(3600),
        max_records: 1_000,
    };
    let mut store = Store::open_in_memory(retention).expect("opens");
    for i in 0..2_500 {
        let mut r = record(&format!("r{i}"), "json", 1.0, "ok");
        r.started_at_ms = i;
        // Each record's own code, so the codes of the dropped ones must go with them.
        r.code_hash = format!("h{i}");
        r.code = Some(format!("return {i};"));
        store.record(&r).expect("records");
    }
    let kept = store.stats(None).expect("stats").executions;
    // The cap holds after every write; each time it is reached the oldest go down to 95%.
    assert!((950..=1_000).contains(&kept), "{kept} records kept");
    let newest = store.list(1).expect("lists");
    assert_eq!(newest[0].id, "r2499");
    assert!(store.get("r0").is_err(), "the oldest record is gone");
    let oldest_kept = 2_500 - kept as usize;
    assert_eq!(
        store
            .get(&format!("r{oldest_kept}"))
            .expect("kept")
            .code
            .as_deref(),
        Some(format!("return {oldest_kept};").as_str()),
        "a kept record keeps its code"
    );
    assert_eq!(
        store.code_count().expect("codes"),
        kept,
        "no code outlives its records"
    );
    // An explicit prune keeps exactly the cap.
    store.prune().expect("prunes");
    assert!(store.stats(None).expect("stats").executions <= 1_000);
}

/// The gateway's watch over stored tools reads them only when `data_version` moved: so it must
/// move for another connection's commit (the CLI's), and stay put for the gateway's own writes
/// (its records, which would otherwise make it read every tool once a second under load).
#[test]
fn data_version_moves_for_other_connections_commits_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.db");
    let mut gateway = Store::open(&path, Retention::default()).expect("opens");
    let before = gateway.data_version().expect("reads");
    gateway
        .record(&record("own", "json", 1.0, "ok"))
        .expect("records");
    gateway
        .put_tool("mine", "return 1;", "{}", "default")
        .expect("puts");
    assert_eq!(gateway.data_version().expect("reads"), before, "own writes");
    let mut cli = Store::open(&path, Retention::default()).expect("opens");
    cli.put_tool("theirs", "return 2;", "{}", "default")
        .expect("puts");
    assert_ne!(
        gateway.data_version().expect("reads"),
        before,
        "another connection's commit"
    );
}

#[tokio::test]
async fn a_profile_changes_only_its_own_stored_tools_and_an_admin_removes_any() {
    let handle = StoreHandle::spawn(Store::open_in_memory(Retention::default()).expect("opens"))
        .expect("spawns");
    assert_eq!(
        handle
            .put_tool("t", "v1", "{}", "alice")
            .await
            .expect("added"),
        1
    );
    assert_eq!(
        handle
            .put_tool("t", "v2", "{}", "alice")
            .await
            .expect("updated"),
        2
    );
    let refused = handle.put_tool("t", "bob's", "{}", "bob").await;
    assert!(
        matches!(&refused, Err(StoreError::OwnedByOther { owner, .. }) if owner == "alice"),
        "{refused:?}"
    );
    let refused = handle.remove_tool("t", "bob", false).await;
    assert!(
        matches!(refused, Err(StoreError::OwnedByOther { .. })),
        "{refused:?}"
    );
    assert_eq!(
        handle.tools().await.expect("tools")[0].code,
        "v2",
        "nothing changed"
    );
    handle
        .remove_tool("t", "carol", true)
        .await
        .expect("an admin removes it");
    assert!(handle.tools().await.expect("tools").is_empty());
    // A removed name is free again; its numbering goes on.
    assert_eq!(
        handle
            .put_tool("t", "bob's", "{}", "bob")
            .await
            .expect("added"),
        3
    );
    let missing = handle.remove_tool("nothing", "bob", false).await;
    assert!(
        matches!(missing, Err(StoreError::NoTool { .. })),
        "{missing:?}"
    );
}
