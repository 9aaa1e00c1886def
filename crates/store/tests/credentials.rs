//! Users' sealed credentials, on both engines through the gateway's handle: one per owner and
//! backend, read back only by the owner that set them, bounded in size and count.

#![allow(clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

mod common;

use common::engines;
use sandgate_store::{MAX_CREDENTIALS_PER_OWNER, MAX_SEALED_BYTES, Retention, StoreError};

#[tokio::test]
async fn a_credential_is_kept_per_owner_and_backend_and_only_its_owner_reads_it() {
    for e in engines("credentials", Retention::default()).await {
        e.one
            .put_credential("user:alice", "notes", b"sealed-a1".to_vec())
            .await
            .expect("kept");
        e.one
            .put_credential("user:bob", "notes", b"sealed-b".to_vec())
            .await
            .expect("kept");
        e.one
            .put_credential("user:alice", "notes", b"sealed-a2".to_vec())
            .await
            .expect("replaced");
        assert_eq!(
            e.other
                .credential("user:alice", "notes")
                .await
                .expect("read"),
            Some(b"sealed-a2".to_vec()),
            "{}: the other handle reads the newest",
            e.name
        );
        assert_eq!(
            e.other.credential("user:bob", "notes").await.expect("read"),
            Some(b"sealed-b".to_vec()),
            "{}",
            e.name
        );
        assert_eq!(
            e.other
                .credential("user:carol", "notes")
                .await
                .expect("read"),
            None,
            "{}: another owner names no row",
            e.name
        );
        let listed = e.one.credentials_of("user:alice").await.expect("listed");
        assert_eq!(
            listed
                .iter()
                .map(|c| c.backend.as_str())
                .collect::<Vec<_>>(),
            ["notes"],
            "{}",
            e.name
        );
        assert!(
            e.other
                .remove_credential("user:alice", "notes")
                .await
                .expect("removed"),
            "{}",
            e.name
        );
        assert!(
            !e.other
                .remove_credential("user:alice", "notes")
                .await
                .expect("nothing to remove"),
            "{}",
            e.name
        );
        assert_eq!(
            e.one.credential("user:alice", "notes").await.expect("read"),
            None,
            "{}",
            e.name
        );
        assert_eq!(
            e.one.credential("user:bob", "notes").await.expect("read"),
            Some(b"sealed-b".to_vec()),
            "{}: bob's stays",
            e.name
        );
    }
}

#[tokio::test]
async fn an_oversized_credential_and_one_too_many_are_refused_with_the_limit() {
    for e in engines("credential_limits", Retention::default()).await {
        let huge = e
            .one
            .put_credential("user:x", "b", vec![0; MAX_SEALED_BYTES + 1])
            .await;
        assert!(
            matches!(&huge, Err(StoreError::Invalid(why)) if why.contains("at most")),
            "{}: {huge:?}",
            e.name
        );
        for i in 0..MAX_CREDENTIALS_PER_OWNER {
            e.one
                .put_credential("user:x", &format!("b{i}"), vec![1])
                .await
                .expect("kept");
        }
        let over = e.other.put_credential("user:x", "one-more", vec![1]).await;
        assert!(
            matches!(&over, Err(StoreError::Invalid(why)) if why.contains("remove one")),
            "{}: {over:?}",
            e.name
        );
        e.other
            .put_credential("user:x", "b0", vec![2])
            .await
            .expect("replacing one is not one more");
        e.other
            .put_credential("user:y", "b0", vec![2])
            .await
            .expect("another owner has its own count");
    }
}
