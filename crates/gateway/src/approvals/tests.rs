//! The questions' bounds, masks, owners and expiry.

use std::sync::Arc;
use std::time::Duration;

use sandgate_config::ApprovalsConfig;

use super::*;
use crate::caller::tests::caller;
use crate::caller::{Caller, Declared, Owner, Principal};

const ASKS: Declared = Declared {
    elicitation: true,
    sampling: false,
    url_elicitation: false,
};

fn gated() -> GatedCall<'static> {
    GatedCall {
        tool: "db.delete_rows",
        arguments: "{}",
        rule: "profiles.default.approve: db.*",
        line: Some(3),
    }
}

fn settings(timeout_ms: u64, per_caller: usize) -> ApprovalsConfig {
    ApprovalsConfig {
        timeout: Duration::from_millis(timeout_ms),
        max_waiting_per_caller: per_caller,
        max_waiting: 1000,
        scripts: Default::default(),
    }
}

#[test]
fn arguments_are_shown_bounded_with_secrets_masked() {
    let shown = question::shown_arguments(
        r#"{"repo":"a/b","token":"s3cr3t-value","headers":{"Authorization":"abc"},"note":"Bearer xyz123","key2":"ghp_abcdef"}"#,
    );
    for secret in ["s3cr3t-value", "abc\"", "xyz123", "ghp_abcdef"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("a/b"), "{shown}");
    let huge = format!(
        r#"{{"text":"{}","list":[{}]}}"#,
        "x".repeat(100_000),
        "1,".repeat(5000) + "1"
    );
    assert!(question::shown_arguments(&huge).chars().count() <= question::SHOWN_ARGUMENT_CHARS + 1);
    let deep = "[".repeat(100) + &"]".repeat(100);
    assert!(question::shown_arguments(&deep).len() < 500);
}

#[tokio::test]
async fn a_client_that_cannot_be_asked_is_refused_at_once() {
    let approvals = Approvals::new(settings(60_000, 4));
    let refused = approvals
        .ask(
            &Asking::Nobody,
            &caller(Owner::Local, "default"),
            "ex-1",
            gated(),
        )
        .await
        .expect_err("nobody");
    assert_eq!(refused.kind, FailureKind::ApprovalDenied);
    assert!(
        refused.message.contains("elicitation"),
        "{}",
        refused.message
    );
    assert_eq!(approvals.waiting_count(), 0);
}

#[tokio::test]
async fn only_the_owner_or_the_console_answers_and_only_once() {
    let approvals = Arc::new(Approvals::new(settings(60_000, 4)));
    let inbox = Arc::new(Inbox::default());
    let alice = caller(Owner::Session("a".into()), "ops");
    let asking = Asking::Waiter(inbox.clone(), ASKS);
    let waiting = {
        let (approvals, alice, asking) = (approvals.clone(), alice.clone(), asking.clone());
        tokio::spawn(async move { approvals.ask(&asking, &alice, "ex-1", gated()).await })
    };
    while inbox.questions().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let id = inbox.questions()[0].id.clone();
    let bob = Answerer::Owner(owner_of(&caller(Owner::Session("b".into()), "ops")));
    assert!(
        approvals
            .answer(&id, &bob, Verdict::Approved { by: "bob".into() })
            .is_err()
    );
    let other_profile = Answerer::Console {
        profile: "dev".into(),
        principal: Principal::Token("dev-lead".into()),
        admin: false,
        approves: vec!["dev".into()],
    };
    assert!(approvals.visible(&other_profile, 10).is_empty());
    assert!(
        approvals
            .answer(&id, &other_profile, Verdict::Approved { by: "x".into() })
            .is_err()
    );
    let owner = Answerer::Owner(owner_of(&alice));
    assert_eq!(approvals.visible(&owner, 10).len(), 1);
    approvals
        .answer(
            &id,
            &owner,
            Verdict::Approved {
                by: "client".into(),
            },
        )
        .expect("answered");
    assert!(waiting.await.expect("joined").is_ok());
    assert!(
        approvals
            .answer(
                &id,
                &owner,
                Verdict::Approved {
                    by: "client".into()
                }
            )
            .is_err(),
        "answered twice"
    );
    assert_eq!(approvals.waiting_count(), 0);
    assert!(inbox.questions().is_empty());
}

#[tokio::test]
async fn unanswered_questions_time_out_and_a_caller_has_a_cap() {
    let approvals = Arc::new(Approvals::new(settings(200, 2)));
    let alice = caller(Owner::Session("a".into()), "ops");
    let asking = Asking::Waiter(Arc::new(Inbox::default()), ASKS);
    let mut asks = Vec::new();
    for _ in 0..2 {
        let (approvals, alice, asking) = (approvals.clone(), alice.clone(), asking.clone());
        asks.push(tokio::spawn(async move {
            approvals.ask(&asking, &alice, "ex-1", gated()).await
        }));
    }
    while approvals.waiting_count() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let over = approvals
        .ask(&asking, &alice, "ex-1", gated())
        .await
        .expect_err("over the cap");
    assert!(
        over.message.contains("max_waiting_per_caller"),
        "{}",
        over.message
    );
    for ask in asks {
        let timed_out = ask.await.expect("joined").expect_err("timeout");
        assert!(
            timed_out.message.contains("nobody answered"),
            "{}",
            timed_out.message
        );
    }
    assert_eq!(approvals.waiting_count(), 0);
}

#[tokio::test]
async fn the_console_never_lets_the_asker_say_yes_to_itself() {
    let approvals = Arc::new(Approvals::new(settings(60_000, 4)));
    let inbox = Arc::new(Inbox::default());
    let agent = Caller {
        principal: Principal::Token("agent".into()),
        name: Some("agent".into()),
        ..caller(Owner::Session("a".into()), "ops")
    };
    let asking = Asking::Waiter(inbox.clone(), ASKS);
    let waiting = {
        let (approvals, agent, asking) = (approvals.clone(), agent.clone(), asking.clone());
        tokio::spawn(async move { approvals.ask(&asking, &agent, "ex-1", gated()).await })
    };
    while inbox.questions().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let id = inbox.questions()[0].id.clone();
    let console = |principal: Principal, admin: bool, approves: &[&str]| Answerer::Console {
        profile: "ops".into(),
        principal,
        admin,
        approves: approves.iter().map(|p| p.to_string()).collect(),
    };
    // The asking token itself, logged into the console: even as an admin, even as an
    // approver of its own profile, it neither sees nor answers its own question.
    for itself in [
        console(Principal::Token("agent".into()), true, &[]),
        console(Principal::Token("agent".into()), false, &["ops"]),
        // A member of the profile that approves nothing.
        console(Principal::Token("teammate".into()), false, &[]),
        // Nobody in particular (auth off).
        console(Principal::Anonymous, true, &["ops"]),
        // An approver of other profiles.
        console(Principal::User("u1".into()), false, &["dev"]),
    ] {
        assert!(approvals.visible(&itself, 10).is_empty(), "{itself:?}");
        assert!(
            approvals
                .answer(&id, &itself, Verdict::Approved { by: "x".into() })
                .is_err(),
            "{itself:?}"
        );
    }
    let lead = console(Principal::User("lead".into()), false, &["ops"]);
    assert_eq!(approvals.visible(&lead, 10).len(), 1);
    approvals
        .answer(&id, &lead, Verdict::Approved { by: lead.name() })
        .expect("another person approves");
    // Answered, and not yet taken by its call (which has not run since): listed no more.
    assert!(approvals.visible(&lead, 10).is_empty());
    assert!(waiting.await.expect("joined").is_ok());
}

#[test]
fn the_code_is_shown_bounded_with_its_hidden_characters_written_out() {
    let code = format!(
        "// ok\u{202e}\nawait github.delete_repo({{}})\n{}",
        "x".repeat(20_000)
    );
    let shown = ScriptShown::new(
        &code,
        "typescript",
        vec![NamedTool {
            tool: "github.delete_repo".into(),
            why: Some("may write".into()),
        }],
        true,
        "profiles.ops.approve_scripts = \"writes\"".into(),
    );
    assert!(shown.code.contains("\\u{202e}") && !shown.code.contains('\u{202e}'));
    assert!(shown.code.chars().count() < question::SHOWN_CODE_CHARS + 200);
    assert!(shown.code.contains("more characters not shown"));
    let message = shown.message("ex-1", "ops", &Principal::Local);
    assert!(
        message.contains("github.delete_repo (may write)"),
        "{message}"
    );
    assert!(message.contains("names computed as it runs"), "{message}");
    assert!(
        message.contains("profile `ops`") && message.contains("local"),
        "{message}"
    );
}
