//! The console's Approvals page: the questions approval-gated calls wait on, and yes or no for
//! each. An admin sees and answers every one; anyone else, those asked under their own profile
//! by their own user (a token's login: those no identity provider's user asked). The answer
//! reaches the waiting call at once; the door writes it to the audit log, naming the console
//! profile that gave it.

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
    Answerer::Console {
        profile: user.profile.clone(),
        user: user.user.clone(),
        admin: console.gateway.profile(&user.profile).admin,
    }
}

/// `GET /ui/api/approvals`: the questions this user may answer, oldest first.
pub(crate) async fn list(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
) -> Response {
    let approvals = console.gateway.door().approvals();
    let shown = approvals.visible(&answerer(&console, &user), LISTED);
    json(&json!({"approvals": shown, "waiting": approvals.waiting_count()}))
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
