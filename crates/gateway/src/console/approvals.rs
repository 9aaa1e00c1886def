//! The console's Approvals page: the questions approval-gated calls wait on, and yes or no for
//! each. An admin sees and answers every one, a profile that `approves` others those asked
//! under them; nobody sees or answers a question their own principal (token or user) asked,
//! since an agent can log into the console with its own token. With auth off, nobody here
//! answers: anyone on the machine could be the asker. The answer reaches the waiting call at
//! once; the door writes it to the audit log, naming the console user that gave it.

use axum::extract::{Extension, Query, State};
use axum::response::Response;
use http::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::reply::{json, problem};
use super::session::{Console, ConsoleUser};
use crate::approvals::{Answerer, Verdict};

/// The most questions the page lists.
const LISTED: usize = 200;

#[derive(Deserialize)]
pub(crate) struct QuestionQuery {
    id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Answer {
    approve: bool,
}

/// Who this console user answers as.
fn answerer(console: &Console, user: &ConsoleUser) -> Answerer {
    let profile = console.gateway.profile(&user.profile);
    Answerer::Console {
        profile: user.profile.clone(),
        principal: user.principal(),
        admin: profile.admin,
        approves: profile.approves.clone(),
    }
}

/// `GET /ui/api/approvals`: the questions this user may answer, oldest first.
pub(crate) async fn list(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
) -> Response {
    let approvals = console.gateway.door().approvals();
    let by = answerer(&console, &user);
    let shown = approvals.visible(&by, LISTED);
    let who = match &by {
        Answerer::Console {
            admin: true,
            principal,
            ..
        } if principal.is_accountable() => {
            "every profile's (admin), except those you asked yourself".to_string()
        }
        Answerer::Console {
            approves,
            principal,
            ..
        } if principal.is_accountable() && !approves.is_empty() => format!(
            "those asked under {} (approves), except those you asked yourself",
            approves.join(", ")
        ),
        _ => "none: your profile approves no one's calls (an admin, or a profile with approves = [...], answers them; a call you asked is answered by another person, or in your own client)".to_string(),
    };
    json(&json!({
        "approvals": shown,
        "waiting": approvals.waiting_count(),
        "you_answer": who,
    }))
}

/// `POST /ui/api/approvals?id=` with `{"approve": true|false}`: answers one question.
pub(crate) async fn answer(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
    Query(query): Query<QuestionQuery>,
    axum::Json(body): axum::Json<Answer>,
) -> Response {
    let by = answerer(&console, &user);
    let verdict = if body.approve {
        Verdict::Approved { by: by.name() }
    } else {
        Verdict::Denied {
            by: by.name(),
            why: "it was refused in the console".into(),
        }
    };
    match console
        .gateway
        .door()
        .approvals()
        .answer(&query.id, &by, verdict)
    {
        Ok(()) => json(&json!({"id": query.id, "approved": body.approve})),
        Err(why) => problem(StatusCode::NOT_FOUND, &why),
    }
}
