//! The console's JSON API: what each page reads, cut to what the session's profile may see
//! (an admin profile sees everything), and the playground's runs, which go through
//! `call_tool_chain` as the session's caller.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use http::{HeaderValue, StatusCode, header};
use sandgate_policy::Access;
use sandgate_store::RecordFilter;
use serde::Deserialize;
use serde_json::{Value, json};

use super::reply::{json, problem};
use super::session::{Console, ConsoleUser};
use crate::caller::{Caller, Part};

/// The most executions one list holds.
const MAX_LISTED: usize = 500;
/// The longest code the playground takes (as `call_tool_chain` does).
const MAX_CODE_BYTES: usize = 256 * 1024;

/// The text blocks of a tool result, one per line.
fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The caller a console session acts as: its profile, and an owner of its own for what its
/// playground runs store.
pub(super) fn caller(console: &Console, user: &ConsoleUser) -> Caller {
    Caller::of_console(
        Access::new(console.gateway.profile(&user.profile)),
        &user.session,
        user.principal(),
        user.token_id.clone(),
    )
}

fn is_admin(console: &Console, user: &ConsoleUser) -> bool {
    console.gateway.profile(&user.profile).admin
}

/// Whether `user` sees an execution `by` ran under `profile`: an admin sees every one; anyone
/// else, those of its profile run by itself (a user an identity provider proved owns its
/// executions; a token's login sees those no such user ran).
fn sees(admin: bool, user: &ConsoleUser, profile: &str, by: Option<&str>) -> bool {
    admin || (profile == user.profile && by == user.user.as_deref())
}

/// `GET /ui/api/me`.
pub(crate) async fn me(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
) -> Response {
    let admin = is_admin(&console, &user);
    // Why the served config's latest change did not load, for whoever can fix it.
    let config_problem = admin
        .then(|| console.gateway.config_problem())
        .flatten()
        .map(|p| json!({"message": p.message, "at_ms": p.at_ms}));
    json(&json!({
        "profile": user.profile,
        "admin": admin,
        "login": console.auth().required,
        "user": user.user,
        "config_problem": config_problem,
    }))
}

/// `GET /ui/api/backends`: the backends the profile reaches, with their state; the stderr
/// tail for an admin only.
pub(crate) async fn backends(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
) -> Response {
    json(&backends_json(&console, &user))
}

fn backends_json(console: &Console, user: &ConsoleUser) -> Value {
    let caller = caller(console, user);
    let admin = is_admin(console, user);
    let statuses = crate::mcp::resources::visible_statuses(&console.gateway, &caller);
    let list: Vec<Value> = statuses
        .iter()
        .map(|s| {
            let mut item = json!({
                "name": s.name,
                "transport": s.transport,
                "state": s.state,
                "protocol_version": s.protocol_version,
                "tools": s.tools.len(),
                "tools_from_cache": s.tools_from_cache,
                "restarts": s.restarts,
                "last_error": s.last_error,
                "retry_in_ms": s.retry_in_ms,
            });
            if admin {
                item["stderr"] = json!(console.gateway.backends().stderr_tail(&s.name));
            }
            item
        })
        .collect();
    json!({"backends": list})
}

#[derive(Deserialize)]
pub(crate) struct ToolsQuery {
    q: Option<String>,
}

/// `GET /ui/api/tools?q=`: the profile's tools, ranked as `search_tools` ranks them when
/// there is a query.
pub(crate) async fn tools(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
    Query(query): Query<ToolsQuery>,
) -> Response {
    let caller = caller(&console, &user);
    let q = query.q.unwrap_or_default();
    if q.trim().is_empty() {
        let catalog = console.gateway.view(&caller.access).catalog;
        let tools: Vec<Value> = catalog
            .entries()
            .iter()
            .map(|e| json!({"name": e.qualified, "description": e.spec.description}))
            .collect();
        return json(&json!({"results": tools}));
    }
    let arguments = json!({"query": q, "limit": 50, "detail": "summary"});
    meta_tool(&console, &caller, "search_tools", arguments).await
}

#[derive(Deserialize)]
pub(crate) struct NameQuery {
    name: String,
}

/// `GET /ui/api/tool?name=`: one tool's TypeScript declaration, as `tool_info` gives it.
pub(crate) async fn tool(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
    Query(query): Query<NameQuery>,
) -> Response {
    let caller = caller(&console, &user);
    meta_tool(&console, &caller, "tool_info", json!({"name": query.name})).await
}

async fn meta_tool(console: &Console, caller: &Caller, name: &str, arguments: Value) -> Response {
    let cancel = crate::runtime::Cancellation::default();
    let arguments = arguments.as_object().cloned();
    match crate::mcp::routes::call(&console.gateway, caller, name, arguments, None, &cancel).await {
        Some(result) if result.is_error != Some(true) => {
            json(&result.structured_content.unwrap_or(Value::Null))
        }
        Some(result) => problem(StatusCode::BAD_REQUEST, &text_of(&result)),
        None => problem(StatusCode::NOT_FOUND, "no such meta-tool"),
    }
}

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    status: Option<String>,
    tier: Option<String>,
    profile: Option<String>,
    since_ms: Option<i64>,
    limit: Option<usize>,
}

/// `GET /ui/api/executions?status=&tier=&profile=&since_ms=&limit=`: newest first; a profile
/// that is not admin gets only its own, whatever it asks.
pub(crate) async fn executions(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
    Query(query): Query<ListQuery>,
) -> Response {
    let Some(store) = console.gateway.chain_store() else {
        return json(&json!({"executions": []}));
    };
    let admin = is_admin(&console, &user);
    let profile = if admin {
        query.profile.filter(|p| !p.is_empty())
    } else {
        Some(user.profile.clone())
    };
    let filter = RecordFilter {
        profile,
        user: (!admin).then(|| user.user.clone()),
        status: query.status.filter(|s| !s.is_empty()),
        tier: query.tier.filter(|t| !t.is_empty()),
        since_ms: query.since_ms,
    };
    let limit = query.limit.unwrap_or(100).clamp(1, MAX_LISTED);
    match store.list_matching(filter, limit).await {
        Ok(records) => json(&json!({"executions": records})),
        Err(e) => problem(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

#[derive(Deserialize)]
pub(crate) struct IdQuery {
    id: String,
    part: Option<String>,
    download: Option<u8>,
}

/// `GET /ui/api/execution?id=`: one execution with its code, calls and what the model was
/// shown, and whether a full output is stored for this session.
pub(crate) async fn execution(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
    Query(query): Query<IdQuery>,
) -> Response {
    let Some(store) = console.gateway.chain_store() else {
        return problem(StatusCode::NOT_FOUND, "this gateway keeps no records");
    };
    let record = match store.get(&query.id).await {
        Ok(record)
            if sees(
                is_admin(&console, &user),
                &user,
                &record.profile,
                record.user.as_deref(),
            ) =>
        {
            record
        }
        _ => return problem(StatusCode::NOT_FOUND, "no such execution for this profile"),
    };
    let caller = caller(&console, &user);
    let mut stored = serde_json::Map::new();
    for part in [Part::Output, Part::Logs, Part::Error] {
        if let Ok(body) =
            crate::chain::read::stored(&console.gateway, &store, &caller, &query.id, part).await
        {
            stored.insert(part.as_str().to_string(), json!(body.len()));
        }
    }
    json(&json!({"execution": record, "stored": stored}))
}

/// `GET /ui/api/output?id=&part=&download=1`: a stored full output, shown as text or sent as
/// an attachment.
pub(crate) async fn output(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
    Query(query): Query<IdQuery>,
) -> Response {
    let Some(store) = console.gateway.chain_store() else {
        return problem(StatusCode::NOT_FOUND, "this gateway keeps no outputs");
    };
    let part_name = query.part.as_deref().unwrap_or("output");
    let Some(part) = Part::named(part_name) else {
        return problem(StatusCode::BAD_REQUEST, "part is output, logs or error");
    };
    let caller = caller(&console, &user);
    let body = match crate::chain::read::stored(&console.gateway, &store, &caller, &query.id, part)
        .await
    {
        Ok(body) => body,
        Err(why) => return problem(StatusCode::NOT_FOUND, &why),
    };
    let mut response =
        ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response();
    if query.download == Some(1) {
        // The id is sandgate's own (`ex-` and hex), but only its safe characters go in.
        let safe: String = query
            .id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let disposition = format!("attachment; filename=\"{safe}-{}.txt\"", part.as_str());
        if let Ok(value) = HeaderValue::from_str(&disposition) {
            response
                .headers_mut()
                .insert(header::CONTENT_DISPOSITION, value);
        }
    }
    response
}

#[derive(Deserialize)]
pub(crate) struct RunBody {
    code: String,
    timeout_ms: Option<u64>,
    /// `typescript` (the default) or `python`.
    language: Option<String>,
}

/// `POST /ui/api/run {"code": "...", "language"?: "python"}`: the playground: `call_tool_chain` as the session's
/// caller, with the same result, logs and calls; the record is written before the answer.
pub(crate) async fn run(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
    axum::Json(body): axum::Json<RunBody>,
) -> Response {
    if body.code.len() > MAX_CODE_BYTES {
        return problem(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the code is longer than 256 KiB",
        );
    }
    let caller = caller(&console, &user);
    let args = match serde_json::from_value(
        json!({"code": body.code, "timeout_ms": body.timeout_ms, "language": body.language}),
    ) {
        Ok(args) => args,
        Err(e) => return problem(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let cancel = crate::runtime::Cancellation::default();
    let result =
        crate::chain::call_tool_chain(&console.gateway, &caller, args, None, &cancel).await;
    if let Some(store) = console.gateway.chain_store() {
        let _ = tokio::time::timeout(Duration::from_secs(2), store.flush()).await;
    }
    json(&json!({
        "is_error": result.is_error == Some(true),
        "text": text_of(&result),
        "structured": result.structured_content,
    }))
}

/// `GET /ui/api/stats`: per tier and per backend latency, bytes saved, and executions per
/// minute over the last hour.
pub(crate) async fn stats(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
) -> Response {
    let Some(store) = console.gateway.chain_store() else {
        return json(&json!({"stats": null, "per_minute": []}));
    };
    let profile = (!is_admin(&console, &user)).then(|| user.profile.clone());
    let stats = match store.stats(profile.as_deref()).await {
        Ok(stats) => stats,
        Err(e) => return problem(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let now = sandgate_store::now_ms();
    let hour = RecordFilter {
        profile,
        since_ms: Some(now - 3_600_000),
        ..RecordFilter::default()
    };
    let recent = store.list_matching(hour, 100_000).await.unwrap_or_default();
    let mut per_minute = vec![0u64; 60];
    for record in &recent {
        let ago = ((now - record.started_at_ms) / 60_000).clamp(0, 59) as usize;
        per_minute[59 - ago] += 1;
    }
    json(&json!({"stats": stats, "per_minute": per_minute}))
}

/// `GET /ui/api/events`: server-sent events: `execution` as each execution finishes (the
/// profile's own; every one for an admin), and `backends` when a backend's state changes. On a
/// shared store the executions are every replica's (read from the store once a second); the
/// backends are this replica's, whose processes they are.
pub(crate) async fn events(
    State(console): State<Console>,
    Extension(user): Extension<ConsoleUser>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let admin = is_admin(&console, &user);
    let mut finished = Finishes::of(&console, &user, admin);
    // A check of a login in the process costs nothing; a shared store is asked at most a few
    // times a second, however many executions finish.
    let recheck_after = match finished {
        Finishes::Local(_) => std::time::Duration::ZERO,
        Finishes::Shared(_) => SHARED_RECHECK_AFTER,
    };
    let mut upstream = console.gateway.backends().subscribe();
    let console = Arc::new(console);
    let stream = async_stream(move |tx| async move {
        // The session is checked as the stream goes: one whose token was taken out or rotated
        // ends within a second, whether or not anything happens.
        let mut check = tokio::time::interval(std::time::Duration::from_secs(1));
        let mut checked = std::time::Instant::now();
        loop {
            let event = tokio::select! {
                // A browser that went away ends this at once, not at the next event.
                () = tx.closed() => return,
                _ = check.tick() => {
                    if !super::session::still_open(&console, &user).await {
                        return;
                    }
                    checked = std::time::Instant::now();
                    continue;
                }
                done = finished.next() => match done {
                    Some(Some((profile, by, done))) if sees(admin, &user, &profile, by.as_deref()) => {
                        Event::default().event("execution").data(done.to_string())
                    }
                    Some(_) => continue,
                    None => return,
                },
                changed = upstream.recv() => match changed {
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        Event::default().event("backends").data(backends_json(&console, &user).to_string())
                    }
                    Err(_) => return,
                },
            };
            // Checked again before it is sent, unless it just was.
            if checked.elapsed() >= recheck_after {
                if !super::session::still_open(&console, &user).await {
                    return;
                }
                checked = std::time::Instant::now();
            }
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// How long a check in the shared store that a stream's session is open stays good for the
/// events it lets out.
const SHARED_RECHECK_AFTER: std::time::Duration = std::time::Duration::from_millis(200);

/// Where finished executions come from: this gateway's own, or on a shared store every
/// replica's, read from the store once a second while the stream is open (an announcement per
/// execution would cost every replica, at thousands a second, whether a console watches or not).
enum Finishes {
    Local(tokio::sync::broadcast::Receiver<crate::gateway::FinishedExecution>),
    Shared(SharedFinishes),
}

/// The reading of the store for one stream: what it has shown, and what is left to show.
struct SharedFinishes {
    store: sandgate_store::StoreHandle,
    /// `None` for an admin (every profile).
    profile: Option<String>,
    /// `None` for an admin; else the user whose executions it shows (see `sees`).
    user: Option<Option<String>>,
    /// Executions already shown (or there before the stream opened), oldest first.
    shown: std::collections::VecDeque<String>,
    known: std::collections::HashSet<String>,
    /// Read but not yet handed out, oldest first.
    ready: std::collections::VecDeque<Value>,
    /// When the stream opened (Unix milliseconds).
    opened_at_ms: i64,
    polled_at: Option<tokio::time::Instant>,
}

/// A finished execution as a stream reads it: its profile, the user that ran it, its JSON.
type Finished = (String, Option<String>, Value);

/// How many finished executions a stream remembers having shown (more than a poll can read).
const SHOWN_REMEMBERED: usize = 2 * SHARED_POLL_LIMIT;
/// The most recent executions one poll reads.
const SHARED_POLL_LIMIT: usize = 200;
/// How far back a poll looks: an execution that finished since the last poll started at most
/// this long ago (the longest timeout a profile may set is below it).
const SHARED_POLL_BACK_MS: i64 = 60 * 60 * 1000;

impl SharedFinishes {
    /// The next finished execution: from what the last read found, or from a new read a
    /// second later.
    async fn next(&mut self) -> Option<Option<Finished>> {
        loop {
            if let Some(done) = self.ready.pop_front() {
                let profile = done["profile"].as_str().unwrap_or_default().to_string();
                let by = done["user"].as_str().map(str::to_string);
                return Some(Some((profile, by, done)));
            }
            // A deadline, not a fresh wait: the stream's other events cancel this future and
            // call again, and the store is still read once a second.
            if let Some(polled) = self.polled_at {
                tokio::time::sleep_until(polled + std::time::Duration::from_secs(1)).await;
            }
            self.polled_at = Some(tokio::time::Instant::now());
            let filter = RecordFilter {
                profile: self.profile.clone(),
                user: self.user.clone(),
                since_ms: Some(sandgate_store::now_ms() - SHARED_POLL_BACK_MS),
                ..RecordFilter::default()
            };
            let records = match self.store.list_matching(filter, SHARED_POLL_LIMIT).await {
                Ok(records) => records,
                Err(e) => {
                    tracing::debug!("the console's live list could not read the store: {e}");
                    continue;
                }
            };
            // Newest first from the store: shown oldest first. What finished before the stream
            // opened is not news; what finished after it is, whichever read first sees it.
            for record in records.into_iter().rev() {
                if record.status == sandgate_store::RUNNING || self.known.contains(&record.id) {
                    continue;
                }
                self.known.insert(record.id.clone());
                self.shown.push_back(record.id.clone());
                let finished_at_ms = record.started_at_ms + record.duration_ms.ceil() as i64;
                if finished_at_ms >= self.opened_at_ms {
                    self.ready.push_back(json!({
                        "id": record.id,
                        "profile": record.profile,
                        "user": record.user,
                        "tier": record.tier,
                        "status": record.status,
                        "duration_ms": record.duration_ms,
                        "started_at_ms": record.started_at_ms,
                        "calls": record.calls,
                    }));
                }
            }
            while self.shown.len() > SHOWN_REMEMBERED {
                if let Some(old) = self.shown.pop_front() {
                    self.known.remove(&old);
                }
            }
        }
    }
}

impl Finishes {
    fn of(console: &Console, user: &ConsoleUser, admin: bool) -> Finishes {
        match console.gateway.chain_store().filter(|s| s.is_shared()) {
            Some(store) => Finishes::Shared(SharedFinishes {
                store,
                profile: (!admin).then(|| user.profile.clone()),
                user: (!admin).then(|| user.user.clone()),
                shown: Default::default(),
                known: Default::default(),
                ready: Default::default(),
                opened_at_ms: sandgate_store::now_ms(),
                polled_at: None,
            }),
            None => Finishes::Local(console.gateway.finished_executions()),
        }
    }

    /// The next finished execution (its profile, its user and its JSON), `Some(None)` for a
    /// gap, `None` once no more can come.
    async fn next(&mut self) -> Option<Option<Finished>> {
        use tokio::sync::broadcast::error::RecvError;
        match self {
            Finishes::Local(rx) => match rx.recv().await {
                Ok(done) => Some(Some((done.profile.clone(), done.user.clone(), json!(done)))),
                Err(RecvError::Lagged(_)) => Some(None),
                Err(RecvError::Closed) => None,
            },
            Finishes::Shared(shared) => shared.next().await,
        }
    }
}

/// A stream fed by `produce` through a small channel (events wait, never pile up).
fn async_stream<F, Fut>(produce: F) -> impl Stream<Item = Result<Event, Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<Event, Infallible>>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(produce(tx));
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
