//! Script state and learned shapes, on both engines through the handle the gateway uses: what
//! one handle keeps the other (another process, or another replica) reads; values expire; the
//! bounds refuse with what to do; one owner never reads another's.

#![allow(clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

mod common;

use common::engines;
use sandgate_store::{MAX_STATE_KEYS, MAX_STATE_VALUE_BYTES, Retention, StoreError};

#[tokio::test]
async fn state_is_read_back_by_its_owner_alone_on_either_handle_and_expires() {
    for e in engines("script_state", Retention::default()).await {
        e.one
            .state_set("alice", "issues", "[1,2,3]".into(), 60_000)
            .await
            .expect("kept");
        e.one
            .state_set("alice", "brief", "\"soon\"".into(), 300)
            .await
            .expect("kept");
        assert_eq!(
            e.other.state_get("alice", "issues").await.expect("read"),
            Some("[1,2,3]".into()),
            "{}: the other handle reads it",
            e.name
        );
        assert_eq!(
            e.other.state_get("bob", "issues").await.expect("read"),
            None
        );
        assert!(e.other.state_keys("bob").await.expect("listed").is_empty());
        assert_eq!(
            e.one.state_keys("alice").await.expect("listed"),
            ["brief", "issues"]
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            e.one.state_get("alice", "brief").await.expect("read"),
            None,
            "{}: expired",
            e.name
        );
        assert_eq!(e.one.state_keys("alice").await.expect("listed"), ["issues"]);
        assert!(
            !e.other
                .state_delete("bob", "issues")
                .await
                .expect("deleted")
        );
        assert!(
            e.other
                .state_delete("alice", "issues")
                .await
                .expect("deleted")
        );
        assert_eq!(
            e.one.state_get("alice", "issues").await.expect("read"),
            None
        );
    }
}

#[tokio::test]
async fn state_bounds_refuse_with_what_to_do_and_keep_what_was_there() {
    for e in engines("script_state_bounds", Retention::default()).await {
        let big = format!("\"{}\"", "x".repeat(MAX_STATE_VALUE_BYTES));
        let refused = e
            .one
            .state_set("alice", "big", big, 60_000)
            .await
            .expect_err("too large");
        assert!(
            matches!(&refused, StoreError::Invalid(m) if m.contains("at most 65536 bytes") && m.contains("split")),
            "{}: {refused}",
            e.name
        );
        assert!(
            e.one
                .state_set("alice", "", "1".into(), 1000)
                .await
                .is_err()
        );
        for i in 0..MAX_STATE_KEYS {
            e.one
                .state_set("alice", &format!("k{i}"), "1".into(), 60_000)
                .await
                .expect("within the bound");
        }
        let refused = e
            .other
            .state_set("alice", "one-more", "1".into(), 60_000)
            .await
            .expect_err("past the key bound");
        assert!(refused.to_string().contains("state.delete"), "{refused}");
        // Replacing a key is no new key; another owner has bounds of its own.
        e.other
            .state_set("alice", "k0", "2".into(), 60_000)
            .await
            .expect("replaced");
        e.other
            .state_set("bob", "k0", "3".into(), 60_000)
            .await
            .expect("bob's own");
        assert_eq!(
            e.one.state_get("alice", "k0").await.expect("read"),
            Some("2".into())
        );
    }
}

#[tokio::test]
async fn shapes_merge_with_what_is_stored_and_either_handle_reads_them() {
    for e in engines("tool_shapes", Retention::default()).await {
        let first = e
            .one
            .merge_shape(
                "memory",
                "read_graph",
                Box::new(|stored| {
                    assert_eq!(stored, None);
                    "a".into()
                }),
            )
            .await
            .expect("merged");
        assert_eq!(first, "a");
        let second = e
            .other
            .merge_shape(
                "memory",
                "read_graph",
                Box::new(|stored| format!("{}b", stored.unwrap_or_default())),
            )
            .await
            .expect("merged");
        assert_eq!(second, "ab", "{}: merged with the stored one", e.name);
        let all = e.one.shapes(0).await.expect("listed");
        assert_eq!(all.len(), 1);
        assert_eq!(
            (
                all[0].backend.as_str(),
                all[0].tool.as_str(),
                all[0].shape.as_str()
            ),
            ("memory", "read_graph", "ab")
        );
        let refused = e
            .one
            .merge_shape(
                "memory",
                "read_graph",
                Box::new(|_| "x".repeat(sandgate_store::MAX_SHAPE_BYTES + 1)),
            )
            .await;
        assert!(refused.is_err(), "{}", e.name);
        assert_eq!(e.other.shapes(0).await.expect("listed")[0].shape, "ab");
        // Only what changed since a time is read again (replicas catch up on each other's).
        let later = sandgate_store::now_ms() + 60_000;
        assert!(e.other.shapes(later).await.expect("listed").is_empty());
        assert_eq!(
            e.other.shapes(later - 120_000).await.expect("listed").len(),
            1
        );
    }
}
