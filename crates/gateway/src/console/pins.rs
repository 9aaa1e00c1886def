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

/// The login's name for the audit log and the store the pins are in, or the refusal for a login
/// that may not review (or a gateway without a store).
fn reviewing(
    console: &Console,
    user: &ConsoleUser,
) -> Result<(String, sandgate_store::StoreHandle), Refusal> {
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
    let store = console.gateway.chain_store().ok_or((
        StatusCode::SERVICE_UNAVAILABLE,
        "this gateway keeps no store, so nothing is pinned",
    ))?;
    Ok((
        format!("console:{}:{}", user.profile, principal.key()),
        store,
    ))
}

/// `GET /ui/api/pins`: every pin and held change.
pub(crate) async fn list(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
) -> Response {
    let (_, store) = match reviewing(&console, &user) {
        Ok(reviewing) => reviewing,
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
    let (_, store) = match reviewing(&console, &user) {
        Ok(reviewing) => reviewing,
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
    let (by, store) = match reviewing(&console, &user) {
        Ok(reviewing) => reviewing,
        Err(refusal) => return refused(refusal),
    };
    let audit = console.gateway.door().audit();
    match review::decide(&store, audit, &query.tool, &by, body.accept).await {
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
