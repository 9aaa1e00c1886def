//! The console's Credentials page: a user keeps their own secret for each per-user backend
//! that takes one. The secret goes in once and is never shown back, not even to its owner: the
//! page only says whether one is kept, and since when.

use axum::extract::{Extension, Query, State};
use axum::response::Response;
use http::StatusCode;
use sandgate_config::UserSecret;
use serde::Deserialize;
use serde_json::json;

use super::api::caller;
use super::reply::{json, problem};
use super::session::{Console, ConsoleUser};
use crate::credentials::owner_of;

#[derive(Deserialize)]
pub(crate) struct BackendQuery {
    backend: String,
}

#[derive(Deserialize)]
pub(crate) struct NewSecret {
    secret: String,
}

/// The per-user backends that take a stored secret, with where it goes.
fn takes_secret(console: &Console) -> Vec<(String, &'static str)> {
    let backends = console.gateway.backends();
    backends
        .statuses()
        .into_iter()
        .filter_map(|status| {
            let kind = match backends.per_user(&status.name)?.secret {
                UserSecret::Header { .. } => "header",
                UserSecret::Env { .. } => "environment",
                UserSecret::OAuth(_) => "sign-in",
                UserSecret::None | UserSecret::TokenExchange { .. } => return None,
            };
            Some((status.name, kind))
        })
        .collect()
}

/// `GET /ui/api/credentials`: each backend that takes a user's secret, and whether this user
/// keeps one for it.
pub(crate) async fn list(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
) -> Response {
    let Some(credentials) = console
        .gateway
        .door()
        .credentials()
        .filter(|c| c.keeps_secrets())
    else {
        return json(&json!({"kept": false, "backends": []}));
    };
    let owner = owner_of(&caller(&console, &user));
    let kept = match credentials.list(&owner).await {
        Ok(kept) => kept,
        Err(e) => return problem(StatusCode::SERVICE_UNAVAILABLE, &e),
    };
    let backends: Vec<_> = takes_secret(&console)
        .into_iter()
        .map(|(name, goes)| {
            let set = kept.iter().find(|k| k.backend == name);
            json!({"backend": name, "goes_in": goes, "set": set.is_some(),
                   "updated_at_ms": set.map(|k| k.updated_at_ms)})
        })
        .collect();
    json(&json!({"kept": true, "backends": backends}))
}

/// `PUT /ui/api/credentials?backend=`: keeps this user's secret for a backend.
pub(crate) async fn set(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
    Query(query): Query<BackendQuery>,
    axum::Json(body): axum::Json<NewSecret>,
) -> Response {
    let Some(credentials) = console.gateway.door().credentials() else {
        return problem(
            StatusCode::NOT_FOUND,
            "this gateway keeps no credentials ([credentials] names no key)",
        );
    };
    if takes_secret(&console)
        .iter()
        .any(|(name, kind)| *name == query.backend && *kind == "sign-in")
    {
        return problem(
            StatusCode::BAD_REQUEST,
            &format!(
                "backend `{}` takes your own sign-in, not a pasted token: press Connect beside it",
                query.backend
            ),
        );
    }
    if !takes_secret(&console)
        .iter()
        .any(|(name, _)| *name == query.backend)
    {
        return problem(
            StatusCode::BAD_REQUEST,
            &format!(
                "backend `{}` takes no user's own secret (it is not a per-user backend with user_secret)",
                query.backend
            ),
        );
    }
    let owner = owner_of(&caller(&console, &user));
    match credentials.set(&owner, &query.backend, &body.secret).await {
        Ok(()) => json(&json!({"backend": query.backend, "set": true})),
        Err(e) => problem(StatusCode::BAD_REQUEST, &e),
    }
}

/// `DELETE /ui/api/credentials?backend=`: forgets this user's secret for a backend.
pub(crate) async fn remove(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
    Query(query): Query<BackendQuery>,
) -> Response {
    let Some(credentials) = console.gateway.door().credentials() else {
        return problem(StatusCode::NOT_FOUND, "this gateway keeps no credentials");
    };
    let owner = owner_of(&caller(&console, &user));
    match credentials.remove(&owner, &query.backend).await {
        Ok(removed) => json(&json!({"backend": query.backend, "removed": removed})),
        Err(e) => problem(StatusCode::SERVICE_UNAVAILABLE, &e),
    }
}
