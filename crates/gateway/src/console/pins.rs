//! The console's Pins page (issue 49): every pinned tool definition and every change the
//! supply-chain guard holds, the diff of a held one, and accept or reject. Admins only, and only
//! a login someone is accountable for (a token or a user; with auth off, `sandgate pins` on
//! the machine decides instead), since accepting a definition lets every agent read it. The
//! decision is the same one `sandgate pins` makes (`pins::review`), audited with the login that
//! made it, and this replica lists the backend again at once; the others follow within seconds.

use axum::extract::{Extension, Query, State};
use axum::response::Response;
use http::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::reply::{json, problem};
use super::session::{Console, ConsoleUser};
use crate::pins::review;

#[derive(Deserialize)]
pub(crate) struct ToolQuery {
    tool: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Decision {
    accept: bool,
}

/// Why a request is refused: its status and the words the page shows.
type Refusal = (StatusCode, &'static str);

fn refused((status, why): Refusal) -> Response {
    problem(status, why)
}

/// The login's name for the audit log, or the refusal for one that may not review.
fn reviewer(console: &Console, user: &ConsoleUser) -> Result<String, Refusal> {
    let principal = user.principal();
    if !console.gateway.profile(&user.profile).admin {
        return Err((
            StatusCode::FORBIDDEN,
            "only an admin profile reviews tool definitions (or `sandgate pins` on the gateway's machine)",
        ));
    }
    if !principal.is_accountable() {
        return Err((
            StatusCode::FORBIDDEN,
            "with HTTP auth off nobody is accountable for a console login: review with `sandgate pins` on the gateway's machine",
        ));
    }
    Ok(format!("console:{}:{}", user.profile, principal.key()))
}

fn store(console: &Console) -> Result<sandgate_store::StoreHandle, Refusal> {
    console.gateway.chain_store().ok_or((
        StatusCode::SERVICE_UNAVAILABLE,
        "this gateway keeps no store, so nothing is pinned",
    ))
}

/// `GET /ui/api/pins`: every pin and held change.
pub(crate) async fn list(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
) -> Response {
    let store = match reviewer(&console, &user).and(store(&console)) {
        Ok(store) => store,
        Err(refusal) => return refused(refusal),
    };
    match review::list(&store).await {
        Ok(rows) => json(&json!({ "pins": rows })),
        Err(e) => problem(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

/// `GET /ui/api/pins/diff?tool=BACKEND.TOOL`: a held change beside its pinned definition.
pub(crate) async fn diff(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
    Query(query): Query<ToolQuery>,
) -> Response {
    let store = match reviewer(&console, &user).and(store(&console)) {
        Ok(store) => store,
        Err(refusal) => return refused(refusal),
    };
    match review::diff(&store, &query.tool).await {
        Ok(diff) => json(&serde_json::to_value(diff).unwrap_or_default()),
        Err(e) => problem(StatusCode::NOT_FOUND, &e.to_string()),
    }
}

/// `POST /ui/api/pins?tool=BACKEND.TOOL` with `{"accept": true|false}`: decides a held change.
pub(crate) async fn decide(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
    Query(query): Query<ToolQuery>,
    axum::Json(body): axum::Json<Decision>,
) -> Response {
    let by = match reviewer(&console, &user) {
        Ok(by) => by,
        Err(refusal) => return refused(refusal),
    };
    let store = match store(&console) {
        Ok(store) => store,
        Err(refusal) => return refused(refusal),
    };
    let audit = console.gateway.door().audit();
    let decided = if body.accept {
        review::accept(&store, audit, &query.tool, &by).await
    } else {
        review::reject(&store, audit, &query.tool, &by).await
    };
    match decided {
        Ok(names) => {
            let backend = query
                .tool
                .split_once('.')
                .map_or(query.tool.as_str(), |(b, _)| b);
            console.gateway.backends().relist(backend);
            json(&json!({ "decided": names, "accepted": body.accept, "by": by }))
        }
        Err(e) => problem(StatusCode::NOT_FOUND, &e.to_string()),
    }
}
