//! One backend: its connection state, and how a call waits for it, is capped and timed out.
//!
//! The state lives in a `watch` channel written only by the backend's supervisor. A call reads
//! it: if the backend is still starting, the call waits for it (up to the call's deadline);
//! once it is ready, the call takes a concurrency permit and runs under the same deadline.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::handler::client::progress::{ProgressDispatcher, ProgressSubscriber};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, JsonObject, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RequestHandle, RoleClient, ServiceError};
use sandgate_catalog::ToolSpec;
use sandgate_config::{BackendConfig, Transport};
use serde::Serialize;
use tokio::sync::{Semaphore, watch};
use tokio::time::{Instant, timeout_at};

use crate::context::{BackendProgress, CallContext};
use crate::direct_call::DirectCalls;
use crate::error::UpstreamError;
use crate::frames::{REFUSED_CODE, REFUSED_MARK, StdoutNoise};
use crate::listing::{Listing, ToolProblem};
use crate::stderr::StderrRing;

/// Where a backend is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendState {
    /// Configured with `enabled = false`.
    Disabled,
    /// First connection attempt in progress.
    Starting,
    /// Connected, tools listed.
    Ready,
    /// Lost or failed; waiting to retry.
    Restarting,
    /// Restart budget spent; no more retries.
    Failed,
}

/// A snapshot of one backend for status resources and `sandgate status`. It never contains
/// stderr or secrets.
#[derive(Debug, Clone, Serialize)]
pub struct BackendStatus {
    /// Configured name.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// Current state.
    pub state: BackendState,
    /// Exposed tools (after allow/deny filters), from the live connection or the cache.
    pub tools: Vec<String>,
    /// Whether `tools` came from the cache rather than a live connection.
    pub tools_from_cache: bool,
    /// Restarts since sandgate started.
    pub restarts: u32,
    /// The most recent failure, in sandgate's own words.
    pub last_error: Option<String>,
    /// Negotiated MCP protocol version, when connected.
    pub protocol_version: Option<String>,
    /// Tools the backend listed that were dropped or changed, and why (live connection only).
    pub tool_problems: Vec<ToolProblem>,
    /// When restarting: milliseconds until the next attempt.
    pub retry_in_ms: Option<u64>,
    /// How its tool definitions are pinned (`first_use`, `review`, `off`).
    pub pin: &'static str,
    /// Its tools the supply-chain guard holds for review (live connection only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<String>,
}

impl BackendStatus {
    /// Why the backend's tools cannot be used right now, in words for the model; `None` when
    /// it is ready.
    pub fn unavailability(&self) -> Option<String> {
        let name = &self.name;
        let last = self
            .last_error
            .as_deref()
            .map(|e| format!(" Its last error: {e}."))
            .unwrap_or_default();
        let text = match self.state {
            BackendState::Ready => return None,
            BackendState::Disabled => match self.last_error.as_deref() {
                Some(why) => format!("backend `{name}` is not started: {why}."),
                None => format!("backend `{name}` is disabled in the config."),
            },
            BackendState::Starting => format!(
                "backend `{name}` is still starting (its first connection is in progress), so its tools are not available yet.{last} Retry in a few seconds."
            ),
            BackendState::Restarting => format!(
                "backend `{name}` is restarting; the next attempt is in {:.1} s.{last} Retry after that.",
                self.retry_in_ms.unwrap_or(0) as f64 / 1000.0
            ),
            BackendState::Failed => {
                format!("backend `{name}` has failed and is not retried.{last}")
            }
        };
        Some(format!(
            "{text} sandgate://backend/{name} shows its status."
        ))
    }
}

/// Why a restarting backend cannot take a call, with when it is retried.
fn restarting_reason(reason: &str, retry_at: Instant) -> String {
    format!(
        "it is restarting after: {reason}; the next attempt is in {:.1} s",
        retry_at
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
    )
}

/// A live connection.
#[derive(Debug)]
pub(crate) struct Live {
    pub peer: Peer<RoleClient>,
    /// Plain tool calls straight to a stdio backend on the 2025 protocol (see `direct_call`).
    pub direct: Option<DirectCalls>,
    /// Routes the backend's progress notifications to the calls that asked for them.
    pub progress: ProgressDispatcher,
    pub tools: Arc<Vec<ToolSpec>>,
    /// The tools the supply-chain guard holds: a call to one is refused.
    pub held: std::collections::BTreeMap<String, sandgate_pins::HeldKind>,
    /// What was wrong with the tools the backend listed.
    pub problems: Vec<ToolProblem>,
    pub protocol_version: String,
}

impl Live {
    pub(crate) fn new(
        peer: Peer<RoleClient>,
        progress: ProgressDispatcher,
        listing: Listing,
        protocol_version: String,
        direct: Option<DirectCalls>,
    ) -> Live {
        Live {
            peer,
            direct,
            progress,
            tools: Arc::new(listing.tools),
            held: listing.held,
            problems: listing.problems,
            protocol_version,
        }
    }
}

/// What a call sees of the backend.
#[derive(Debug, Clone)]
pub(crate) enum Conn {
    Disabled,
    Starting,
    Ready(Arc<Live>),
    Restarting { reason: String, retry_at: Instant },
    Failed { reason: String },
}

/// One configured backend, shared by its supervisor and every caller.
#[derive(Debug)]
pub(crate) struct Backend {
    pub config: BackendConfig,
    pub conn: watch::Sender<Conn>,
    pub stderr: Arc<StderrRing>,
    pub noise: Arc<StdoutNoise>,
    pub restarts: AtomicU32,
    pub last_error: Mutex<Option<String>>,
    /// The manager's generation when this backend's live tools last changed.
    pub tools_generation: std::sync::atomic::AtomicU64,
    /// Set when a reload ends this backend: what happens to it instead of a restart, for the
    /// calls its end cuts off.
    pub ended_by_reload: Mutex<Option<String>>,
    /// Set when the backend (HTTP) refused the connection's authorization at its handshake:
    /// `Some(None)` for a 401, `Some(Some(scope))` for a 403 that wants a wider scope; a
    /// per-user connection's call says so as `Unauthorized`, not as a failed connection.
    pub refused_authorization: Mutex<Option<Option<String>>>,
    /// Told when a call to an HTTP backend timed out or lost its connection: the supervisor
    /// then pings it, and reconnects when the ping goes unanswered. A restarted HTTP server
    /// has forgotten its sessions, and one that answers the old session with 400 (not the 404
    /// rmcp re-initializes on) left every later call waiting for its timeout.
    pub suspect: tokio::sync::Notify,
    /// Told when the pins of its tools changed (a person accepted or rejected a change): the
    /// supervisor then lists its tools again, so they are decided against the new pins.
    pub relist: tokio::sync::Notify,
    /// The calls in flight, with who each may ask (see `asks`).
    pub in_flight: Arc<crate::asks::InFlight>,
    permits: Semaphore,
}

impl Backend {
    pub(crate) fn new(config: BackendConfig) -> Backend {
        let initial = if config.enabled {
            Conn::Starting
        } else {
            Conn::Disabled
        };
        Backend {
            permits: Semaphore::new(config.max_concurrent_calls),
            conn: watch::Sender::new(initial),
            stderr: Arc::default(),
            noise: Arc::default(),
            restarts: AtomicU32::new(0),
            // A skipped entry says why in its status.
            last_error: Mutex::new(config.skipped.clone()),
            tools_generation: Default::default(),
            ended_by_reload: Mutex::default(),
            refused_authorization: Mutex::default(),
            suspect: tokio::sync::Notify::new(),
            relist: tokio::sync::Notify::new(),
            in_flight: Arc::default(),
            config,
        }
    }

    /// Marks this backend as ended by a reload, saying what happens instead of a restart.
    pub(crate) fn ended_by(&self, why: &str) {
        if let Ok(mut slot) = self.ended_by_reload.lock() {
            *slot = Some(why.to_string());
        }
    }

    pub(crate) fn set_error(&self, error: &str) {
        if let Ok(mut slot) = self.last_error.lock() {
            *slot = Some(error.to_string());
        }
    }

    /// The tools of the live connection, if there is one.
    pub(crate) fn live_tools(&self) -> Option<Arc<Vec<ToolSpec>>> {
        match &*self.conn.borrow() {
            Conn::Ready(live) => Some(live.tools.clone()),
            _ => None,
        }
    }

    /// Why `tool` is held by the supply-chain guard, if it is (as of the last listing).
    pub(crate) fn held(&self, tool: &str) -> Option<sandgate_pins::HeldKind> {
        match &*self.conn.borrow() {
            Conn::Ready(live) => live.held.get(tool).copied(),
            _ => None,
        }
    }

    pub(crate) fn status(&self, cached: Option<&[ToolSpec]>) -> BackendStatus {
        let conn = self.conn.borrow().clone();
        let (state, protocol_version) = match &conn {
            Conn::Disabled => (BackendState::Disabled, None),
            Conn::Starting => (BackendState::Starting, None),
            Conn::Ready(live) => (BackendState::Ready, Some(live.protocol_version.clone())),
            Conn::Restarting { .. } => (BackendState::Restarting, None),
            Conn::Failed { .. } => (BackendState::Failed, None),
        };
        let (tools, tools_from_cache) = match (&conn, cached) {
            (Conn::Ready(live), _) => (live.tools.iter().map(|t| t.name.clone()).collect(), false),
            (_, Some(cached)) => (cached.iter().map(|t| t.name.clone()).collect(), true),
            _ => (vec![], false),
        };
        BackendStatus {
            name: self.config.name.clone(),
            transport: match self.config.transport {
                Transport::Stdio { .. } => "stdio",
                Transport::Http { .. } => "http",
            },
            state,
            tools,
            tools_from_cache,
            restarts: self.restarts.load(Ordering::Relaxed),
            last_error: self.last_error.lock().ok().and_then(|e| e.clone()),
            protocol_version,
            retry_in_ms: match &conn {
                Conn::Restarting { retry_at, .. } => Some(
                    retry_at
                        .saturating_duration_since(Instant::now())
                        .as_millis() as u64,
                ),
                _ => None,
            },
            tool_problems: match &conn {
                Conn::Ready(live) => live.problems.clone(),
                _ => vec![],
            },
            pin: self.config.pin.as_str(),
            held: match &conn {
                Conn::Ready(live) => live.held.keys().cloned().collect(),
                _ => vec![],
            },
        }
    }

    /// Calls one tool. The context's limit may shorten (never lengthen) the backend's
    /// configured timeout.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> Result<CallToolResult, UpstreamError> {
        let name = &self.config.name;
        let timeout = context
            .limit
            .map_or(self.config.timeout, |l| l.min(self.config.timeout));
        let started = Instant::now();
        let deadline = started + timeout;
        let live = self.wait_until_ready(deadline, started).await?;
        // Held as of the listing this call waited for (the manager asked before it waited).
        if let Some(&kind) = live.held.get(tool) {
            return Err(crate::guard::held_error(name, tool, kind));
        }
        if !live.tools.iter().any(|t| t.name == tool) {
            return Err(UpstreamError::UnknownTool {
                backend: name.clone(),
                tool: tool.to_string(),
            });
        }
        let timed_out = |hint: String| UpstreamError::Timeout {
            backend: name.clone(),
            tool: tool.to_string(),
            timeout,
            hint,
        };
        let _permit = match timeout_at(deadline, self.permits.acquire()).await {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => {
                return Err(UpstreamError::Unavailable {
                    backend: name.clone(),
                    reason: "it is shutting down".into(),
                    retrying: false,
                });
            }
            Err(_) => {
                return Err(timed_out(format!(
                    " while waiting for a free slot: {} calls were already in flight (max_concurrent_calls)",
                    self.config.max_concurrent_calls
                )));
            }
        };
        let noise_before = self.noise.count();
        let _flying = self.in_flight.enter(context.asks.clone());
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = arguments;
        params.meta = context.meta();
        let call = async {
            match (context.progress, &live.direct) {
                (Some(sink), _) => call_with_progress(&live, params, sink).await,
                (None, Some(direct)) => direct.call_tool(params).await,
                (None, None) => call_plainly(&live, params).await,
            }
        };
        let outcome = timeout_at(deadline, call).await;
        if matches!(self.config.transport, Transport::Http { .. })
            && matches!(
                outcome,
                Err(_)
                    | Ok(Err(
                        ServiceError::TransportSend(_) | ServiceError::TransportClosed
                    ))
            )
        {
            self.suspect.notify_one();
        }
        if let Ok(Err(ServiceError::TransportSend(error))) = &outcome
            && let Some(wider) = refused_authorization(error)
        {
            return Err(UpstreamError::Unauthorized {
                backend: name.clone(),
                tool: tool.to_string(),
                wider,
            });
        }
        match outcome {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(e)))
                if e.code.0 == REFUSED_CODE
                    && e.data
                        .as_ref()
                        .is_some_and(|d| d.get(REFUSED_MARK).is_some()) =>
            {
                Err(UpstreamError::ResultRefused {
                    backend: name.clone(),
                    tool: tool.to_string(),
                    reason: e.message.to_string(),
                })
            }
            Ok(Err(ServiceError::McpError(e))) => Err(UpstreamError::Protocol {
                backend: name.clone(),
                tool: tool.to_string(),
                message: crate::error::bounded(&e.message),
            }),
            Ok(Err(ServiceError::UnexpectedResponse)) => Err(UpstreamError::ResultRefused {
                backend: name.clone(),
                tool: tool.to_string(),
                reason: UNEXPECTED_RESULT.to_string(),
            }),
            Ok(Err(e)) => Err(UpstreamError::ConnectionLost {
                backend: name.clone(),
                tool: tool.to_string(),
                detail: describe_service_error(&e),
                then: self
                    .ended_by_reload
                    .lock()
                    .ok()
                    .and_then(|why| why.clone())
                    .unwrap_or_else(|| "sandgate is restarting it".into()),
            }),
            Err(_) => {
                let noise = self.noise.count() - noise_before;
                let hint = if noise > 0 {
                    format!(
                        ". Meanwhile the backend wrote {noise} line(s) to stdout that are not MCP messages; it is probably misbehaving (MCP servers must log to stderr)"
                    )
                } else {
                    ". The backend may be overloaded or stuck; try a smaller request".to_string()
                };
                Err(timed_out(hint))
            }
        }
    }

    async fn wait_until_ready(
        &self,
        deadline: Instant,
        started: Instant,
    ) -> Result<Arc<Live>, UpstreamError> {
        let name = &self.config.name;
        let mut rx = self.conn.subscribe();
        let waited = timeout_at(
            deadline,
            rx.wait_for(|c| !matches!(c, Conn::Starting | Conn::Restarting { .. })),
        )
        .await
        .map(|r| r.map(|conn| conn.clone()));
        let conn = match waited {
            Ok(Ok(conn)) => conn,
            Ok(Err(_)) => Conn::Failed {
                reason: "sandgate is shutting down".into(),
            },
            Err(_) => match &*rx.borrow() {
                Conn::Restarting { reason, retry_at } => {
                    return Err(UpstreamError::Unavailable {
                        backend: name.clone(),
                        reason: restarting_reason(reason, *retry_at),
                        retrying: true,
                    });
                }
                _ => {
                    return Err(UpstreamError::StillStarting {
                        backend: name.clone(),
                        waited: started.elapsed(),
                    });
                }
            },
        };
        match conn {
            Conn::Ready(live) => Ok(live),
            Conn::Disabled => Err(UpstreamError::Disabled {
                backend: name.clone(),
            }),
            Conn::Failed { reason } => Err(UpstreamError::Unavailable {
                backend: name.clone(),
                reason,
                retrying: false,
            }),
            Conn::Restarting { reason, retry_at } => Err(UpstreamError::Unavailable {
                backend: name.clone(),
                reason: restarting_reason(&reason, retry_at),
                retrying: true,
            }),
            Conn::Starting => Err(UpstreamError::StillStarting {
                backend: name.clone(),
                waited: started.elapsed(),
            }),
        }
    }
}

/// Why rmcp could not read a response as a tool result.
const UNEXPECTED_RESULT: &str = "the response is not a valid MCP tool result (for example a content item of a type MCP does not define; the types are text, image, audio, resource and resource_link)";

/// Notes whether a failed handshake was a refusal of its authorization (see
/// `Backend::refused_authorization`).
pub(crate) fn note_handshake_refusal(
    backend: &Backend,
    error: &rmcp::service::ClientInitializeError,
) {
    let refused = match error {
        rmcp::service::ClientInitializeError::TransportError { error, .. } => {
            refused_authorization(error)
        }
        _ => None,
    };
    if let Ok(mut held) = backend.refused_authorization.lock() {
        *held = refused;
    }
}

/// Whether an HTTP backend refused the request's authorization: `Some(None)` for a 401,
/// `Some(Some(scope))` for a 403 `insufficient_scope` that names the scope it wants (only a
/// plain scope list is taken from what the backend wrote, at most 1,000 characters).
fn refused_authorization(error: &rmcp::transport::DynamicTransportError) -> Option<Option<String>> {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    match error
        .error
        .downcast_ref::<StreamableHttpError<reqwest::Error>>()?
    {
        StreamableHttpError::AuthRequired(_) => Some(None),
        StreamableHttpError::InsufficientScope(refused) => Some(
            refused
                .required_scope
                .as_deref()
                .filter(|scope| {
                    !scope.is_empty()
                        && scope.len() <= 1000
                        && scope.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
                        && !scope.contains(['"', '\\'])
                })
                .map(str::to_string),
        ),
        _ => None,
    }
}

fn describe_service_error(error: &ServiceError) -> String {
    match error {
        ServiceError::TransportClosed => "the connection closed".into(),
        ServiceError::TransportSend(e) => format!("sending failed: {e}"),
        ServiceError::Cancelled { .. } => "the connection was shut down".into(),
        other => other.to_string(),
    }
}

/// How many turns a call with progress gives the notices its backend sent just before its
/// answer (see `call_with_progress`).
const NOTICE_TURNS: usize = 4;
/// How long a call with progress waits for the rest of its notices when the last one said
/// there was more.
const LAST_NOTICE_WAIT: std::time::Duration = std::time::Duration::from_millis(50);
/// How long the last notice the full sink did not take may wait for room (the sink is
/// drained as fast as the client is sent notices; a loaded machine needed more than 50 ms).
const LEFT_OVER_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// `tools/call`, passing the backend's progress notifications for it on to `sink` (dropped,
/// never waited for, when the sink is full). rmcp gives the request its progress token, so
/// the call is sent here rather than through `Peer::call_tool`; like that, a call dropped
/// before its answer is cancelled at the backend.
async fn call_with_progress(
    live: &Live,
    params: CallToolRequestParams,
    sink: tokio::sync::mpsc::Sender<BackendProgress>,
) -> Result<CallToolResult, ServiceError> {
    let (handle, mut unanswered) = send_call(live, params).await?;
    let mut notes = live.progress.subscribe(handle.progress_token.clone()).await;
    let answer = handle.await_response();
    tokio::pin!(answer);
    let mut relay = Relay {
        sink,
        unfinished: false,
        left_over: None,
    };
    let answer = loop {
        tokio::select! {
            // Notices first: one sent just before the answer is passed on before it.
            biased;
            Some(note) = futures::StreamExt::next(&mut notes) => relay.pass_on(note),
            answer = &mut answer => break answer,
        }
    };
    unanswered.id = None;
    relay.finish(&mut notes).await;
    tool_result(answer?)
}

/// A call without progress, as rmcp's own `call_tool` makes it (a call dropped before its
/// answer is cancelled at the backend), except that a result of no known kind whose only fault
/// is content items of types MCP does not define is kept (`crate::content`): over HTTP no
/// stdout inspector has repaired it.
async fn call_plainly(
    live: &Live,
    params: CallToolRequestParams,
) -> Result<CallToolResult, ServiceError> {
    let (handle, mut unanswered) = send_call(live, params).await?;
    let answer = handle.await_response().await;
    unanswered.id = None;
    tool_result(answer?)
}

/// Sends a tool call, with the guard that cancels it at the backend if it is dropped before
/// its answer (clear the guard's id once answered).
async fn send_call(
    live: &Live,
    params: CallToolRequestParams,
) -> Result<(RequestHandle<RoleClient>, CancelUnanswered), ServiceError> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = live
        .peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await?;
    let unanswered = CancelUnanswered {
        peer: live.peer.clone(),
        id: Some(handle.id.clone()),
    };
    Ok((handle, unanswered))
}

/// A call's answer as a tool result, its unknown content items replaced by notes.
fn tool_result(answer: ServerResult) -> Result<CallToolResult, ServiceError> {
    match answer {
        ServerResult::CallToolResult(result) => Ok(result),
        ServerResult::CustomResult(rmcp::model::CustomResult(value)) => {
            crate::content::tool_result_of(&value).ok_or(ServiceError::UnexpectedResponse)
        }
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// Passes one call's progress notices on to its sink, never waiting on it.
struct Relay {
    sink: tokio::sync::mpsc::Sender<BackendProgress>,
    /// Whether the backend's last notice said it had more to report (a total not reached).
    unfinished: bool,
    /// The last notice the full sink did not take: sent once the call is over, so the client
    /// always hears where the backend got to.
    left_over: Option<BackendProgress>,
}

impl Relay {
    fn pass_on(&mut self, note: rmcp::model::ProgressNotificationParam) {
        self.unfinished = note.total.is_some_and(|total| note.progress < total);
        let notice = BackendProgress {
            progress: note.progress,
            total: note.total,
            message: note.message,
        };
        self.left_over = match self.sink.try_send(notice) {
            Err(tokio::sync::mpsc::error::TrySendError::Full(notice)) => Some(notice),
            _ => None,
        };
    }

    /// After the answer: rmcp hands notifications to the handler on tasks of their own, so
    /// one the backend sent just before its answer may still be on its way. Those tasks get a
    /// few turns, and a moment more when the last notice said there was more; then the notice
    /// the sink had no room for goes.
    async fn finish(mut self, notes: &mut ProgressSubscriber) {
        for _ in 0..NOTICE_TURNS {
            while let Some(Some(note)) =
                futures::FutureExt::now_or_never(futures::StreamExt::next(notes))
            {
                self.pass_on(note);
            }
            tokio::task::yield_now().await;
        }
        let until = Instant::now() + LAST_NOTICE_WAIT;
        while self.unfinished {
            match timeout_at(until, futures::StreamExt::next(notes)).await {
                Ok(Some(note)) => self.pass_on(note),
                _ => break,
            }
        }
        if let Some(notice) = self.left_over {
            let _ = timeout_at(Instant::now() + LEFT_OVER_WAIT, self.sink.send(notice)).await;
        }
    }
}

/// Sends `notifications/cancelled` for a request dropped before its answer.
struct CancelUnanswered {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelUnanswered {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let reason = Some("the call was cancelled".to_string());
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(Some(id), reason))
                    .await;
            });
        }
    }
}
