//! Pins of tool definitions and held changes (issue 49), on both engines through the handle
//! the gateway uses: what one handle (another process, another replica) records the other
//! reads; the first sight wins; a rejection stays with the definition it rejected; accepting
//! makes the held definition the pin; the bound refuses with what it is.

#![allow(clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

mod common;

use common::engines;
use sandgate_store::{MAX_PIN_BYTES, Retention, StoreError, StoredHeld, StoredPin};

fn pin(tool: &str, digest: &str) -> StoredPin {
    StoredPin {
        backend: "mail".into(),
        tool: tool.into(),
        digest: digest.into(),
        definition: format!("{{\"name\":\"{tool}\",\"d\":\"{digest}\"}}"),
        decided_by: "first use".into(),
    }
}

fn held(tool: &str, digest: &str) -> StoredHeld {
    StoredHeld {
        backend: "mail".into(),
        tool: tool.into(),
        kind: "changed".into(),
        digest: digest.into(),
        definition: format!("{{\"name\":\"{tool}\",\"d\":\"{digest}\"}}"),
        findings: "[]".into(),
        rejected_by: None,
    }
}

#[tokio::test]
async fn pins_and_held_changes_are_shared_and_decided_once() {
    for e in engines("pins", Retention::default()).await {
        e.one
            .record_listing("mail", vec![pin("send", "d1"), pin("read", "r1")], vec![])
            .await
            .expect("recorded");
        // Another replica saw another first listing a moment later: the first sight wins.
        e.other
            .record_listing("mail", vec![pin("send", "EVIL")], vec![held("read", "r2")])
            .await
            .expect("recorded");
        let pins = e.one.pins(Some("mail")).await.expect("read");
        assert_eq!(
            pins.iter()
                .map(|p| (p.tool.as_str(), p.digest.as_str()))
                .collect::<Vec<_>>(),
            [("read", "r1"), ("send", "d1")],
            "{}",
            e.name
        );
        assert!(e.one.pins(Some("other")).await.expect("read").is_empty());
        assert_eq!(
            e.one.held(None).await.expect("read"),
            vec![held("read", "r2")],
            "{}",
            e.name
        );

        // Rejected, it stays held, and a later listing of the same definition keeps the mark;
        // another definition is another change.
        assert!(
            e.one
                .reject_held("mail", "read", "alice")
                .await
                .expect("rejected")
        );
        assert!(
            !e.one
                .reject_held("mail", "nothing", "alice")
                .await
                .expect("none")
        );
        e.other
            .record_listing("mail", vec![], vec![held("read", "r2")])
            .await
            .expect("recorded");
        assert_eq!(
            e.one.held(Some("mail")).await.expect("read")[0]
                .rejected_by
                .as_deref(),
            Some("alice"),
            "{}",
            e.name
        );
        e.other
            .record_listing("mail", vec![], vec![held("read", "r3")])
            .await
            .expect("recorded");
        assert_eq!(
            e.one.held(Some("mail")).await.expect("read")[0].rejected_by,
            None,
            "{}",
            e.name
        );

        // Accepted, the held definition is the pin, decided by its person; nothing stays held.
        let accepted = e
            .other
            .accept_held("mail", "read", "bob")
            .await
            .expect("accepted")
            .expect("one was held");
        assert_eq!(accepted.digest, "r3");
        let pins = e.one.pins(Some("mail")).await.expect("read");
        let read = pins.iter().find(|p| p.tool == "read").expect("pinned");
        assert_eq!(
            (read.digest.as_str(), read.decided_by.as_str()),
            ("r3", "bob"),
            "{}",
            e.name
        );
        assert!(e.one.held(Some("mail")).await.expect("read").is_empty());
        // Another replica sees the accepted pin by its digest alone.
        assert!(
            e.one.pin_digests().await.expect("digests").contains(&(
                "mail".into(),
                "read".into(),
                "r3".into()
            )),
            "{}",
            e.name
        );
        assert!(
            e.one
                .accept_held("mail", "read", "bob")
                .await
                .expect("none")
                .is_none()
        );

        // A listing that holds nothing clears what was held.
        e.one
            .record_listing("mail", vec![], vec![held("send", "d2")])
            .await
            .expect("recorded");
        e.one
            .record_listing("mail", vec![], vec![])
            .await
            .expect("recorded");
        assert!(
            e.other.held(None).await.expect("read").is_empty(),
            "{}",
            e.name
        );

        let mut huge = held("big", "x");
        huge.definition = "x".repeat(MAX_PIN_BYTES + 1);
        let refused = e.one.record_listing("mail", vec![], vec![huge]).await;
        assert!(
            matches!(refused, Err(StoreError::Invalid(ref m)) if m.contains("at most")),
            "{refused:?}"
        );
    }
}
