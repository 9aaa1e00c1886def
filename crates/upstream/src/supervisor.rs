//! The supervisor: one task per backend that connects it, watches it, and restarts it.
//!
//! A backend that crashes, exits, closes its transport or never finishes its handshake is
//! restarted with exponential backoff (capped). A restart budget stops a backend that keeps
//! failing from looping forever; it is then reported as failed. While connected, the
//! supervisor refreshes the tool list whenever the backend says `tools/list_changed`, over the
//! legacy notification or, on 2026-07-28, over a `subscriptions/listen` stream.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientRequest, ElicitRequest, ElicitRequestParams,
    ElicitResult, ErrorCode, ErrorData, Implementation, InputRequest, PingRequest,
    ProgressNotificationParam, ProtocolVersion, ServerNotification, SubscriptionFilter,
};
#[allow(deprecated)]
use rmcp::model::{CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult};
use rmcp::service::{
    ClientLifecycleMode, NotificationContext, RequestContext, RoleClient, RunningService,
};
use rmcp::transport::sink_stream::SinkStreamTransport;
use rmcp::{ClientHandler, ClientServiceExt};
use sandgate_config::Transport;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;

use crate::backend::{Backend, Conn, Live};
use crate::direct_call::{DirectCalls, SharedStdin};
use crate::era::{self, Era};
use crate::guard::guarded;
use crate::listing::list_tools;
use crate::shared::Shared;
use crate::transport::{ChildGroup, http_transport, spawn_stdio};

/// How restarts are paced. The defaults suit production; tests shorten them.
#[derive(Debug, Clone)]
pub struct RestartPolicy {
    /// Delay before the first restart; doubles each consecutive failure.
    pub base_delay: Duration,
    /// Longest delay between restarts.
    pub max_delay: Duration,
    /// Most restarts allowed within `window` before giving up.
    pub budget: usize,
    /// The window the budget counts over.
    pub window: Duration,
    /// A connection that lived this long resets the backoff.
    pub stable_after: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(30),
            budget: 8,
            window: Duration::from_secs(600),
            stable_after: Duration::from_secs(60),
        }
    }
}

/// The shortest time between two re-fetches of one backend's tool list after
/// `tools/list_changed`.
const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(1);
/// How long an HTTP backend whose call failed has to answer a ping before it is reconnected.
const SUSPECT_PING_WITHIN: Duration = Duration::from_secs(3);

/// Receives backend notifications and requests: list changes go to the supervisor, progress
/// to the call that asked for it, and the backend's own requests (`elicitation/create`,
/// `sampling/createMessage`) to the client of the one call in flight (see `asks`).
struct BackendClient {
    changed: mpsc::Sender<()>,
    progress: ProgressDispatcher,
    name: String,
    in_flight: Arc<crate::asks::InFlight>,
}

impl BackendClient {
    /// Passes `request` to the client of the backend's one call in flight.
    async fn pass_on(
        &self,
        request: InputRequest,
        what: &str,
    ) -> Result<serde_json::Value, ErrorData> {
        let refused = |why: String| ErrorData::new(ErrorCode::INVALID_REQUEST, why, None);
        let asker = self
            .in_flight
            .sole_asker(&self.name, what)
            .map_err(refused)?;
        asker.ask(&self.name, request).await.map_err(refused)
    }
}

impl ClientHandler for BackendClient {
    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.progress.handle_notification(params)
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.changed.try_send(());
        std::future::ready(())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let asked = InputRequest::Elicitation(ElicitRequest::new(request));
        let response = self
            .pass_on(asked, "a question (elicitation/create)")
            .await?;
        serde_json::from_value(response).map_err(|e| {
            ErrorData::internal_error(
                format!("the client's answer is not an elicitation result: {e}"),
                None,
            )
        })
    }

    // Sampling is deprecated by SEP-2577, but a 2025-11-25 backend may still ask for it; it is
    // passed on to a client that declares it.
    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let asked = InputRequest::CreateMessage(CreateMessageRequest::new(params));
        let response = self
            .pass_on(
                asked,
                "a request for a model completion (sampling/createMessage)",
            )
            .await?;
        serde_json::from_value(response).map_err(|e| {
            ErrorData::internal_error(
                format!("the client's answer is not a sampling result: {e}"),
                None,
            )
        })
    }

    fn get_info(&self) -> ClientConfig {
        // What sandgate passes on to its own clients, when they declare it (see `asks`).
        let mut capabilities = ClientCapabilities::default();
        let mut elicitation = rmcp::model::ElicitationCapability::default();
        elicitation.form = Some(rmcp::model::FormElicitationCapability::default());
        capabilities.elicitation = Some(elicitation);
        capabilities.sampling = Some(rmcp::model::SamplingCapability::default());
        ClientConfig::new(
            capabilities,
            Implementation::new("sandgate", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// Runs one backend until shutdown.
pub(crate) async fn supervise(
    backend: Arc<Backend>,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) {
    let policy = shared.options.restart.clone();
    let mut recent: VecDeque<Instant> = VecDeque::new();
    let mut consecutive = 0u32;
    loop {
        let started = Instant::now();
        let outcome = tokio::select! {
            outcome = run_once(&backend, &shared, &shutdown) => outcome,
            _ = shutdown.cancelled() => return,
        };
        if shutdown.is_cancelled() {
            return;
        }
        // Why it went down is partly the backend's words (a refusal may quote the credential
        // it was sent): they pass the one redaction step before the log, statuses or a caller
        // see them.
        let outcome = match outcome {
            Ok(reason) => Ok(sandgate_redact::redact(&reason).into_owned()),
            Err(Down::Retry(reason)) => {
                Err(Down::Retry(sandgate_redact::redact(&reason).into_owned()))
            }
            Err(Down::Fatal(reason)) => {
                Err(Down::Fatal(sandgate_redact::redact(&reason).into_owned()))
            }
        };
        let reason = match outcome {
            Ok(reason) | Err(Down::Retry(reason)) => reason,
            // Retrying would fail the same way (a program that is not installed): say so once.
            Err(Down::Fatal(reason)) => {
                tracing::warn!(backend = %backend.config.name, "backend failed: {reason}");
                backend.set_error(&reason);
                backend.conn.send_replace(Conn::Failed { reason });
                shared.status_changed(&backend.config.name);
                return;
            }
        };
        tracing::warn!(backend = %backend.config.name, "backend down: {reason}");
        backend.set_error(&reason);
        if started.elapsed() >= policy.stable_after {
            consecutive = 0;
        }
        let now = Instant::now();
        recent.push_back(now);
        while recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > policy.window)
        {
            recent.pop_front();
        }
        if recent.len() > policy.budget {
            let reason = format!(
                "it failed {} times within {:?}; last error: {reason}. Fix the backend and restart sandgate",
                recent.len(),
                policy.window
            );
            backend.set_error(&reason);
            backend.conn.send_replace(Conn::Failed { reason });
            shared.status_changed(&backend.config.name);
            return;
        }
        let delay = policy
            .base_delay
            .saturating_mul(1u32 << consecutive.min(16))
            .min(policy.max_delay);
        consecutive += 1;
        backend.conn.send_replace(Conn::Restarting {
            reason: reason.clone(),
            retry_at: Instant::now() + delay,
        });
        shared.status_changed(&backend.config.name);
        tokio::select! {
            _ = sleep(delay) => {}
            _ = shutdown.cancelled() => return,
        }
        backend.restarts.fetch_add(1, Ordering::Relaxed);
    }
}

/// Why a connection ended: worth a retry, or not (a retry would fail the same way).
enum Down {
    Retry(String),
    Fatal(String),
}

impl From<String> for Down {
    fn from(reason: String) -> Down {
        Down::Retry(reason)
    }
}

/// Connects once and serves until the connection ends. Returns why it ended.
async fn run_once(
    backend: &Arc<Backend>,
    shared: &Arc<Shared>,
    shutdown: &CancellationToken,
) -> Result<String, Down> {
    let config = &backend.config;
    let handshake = config.handshake_timeout;
    let (changed_tx, mut changed_rx) = mpsc::channel(1);
    let progress = ProgressDispatcher::new();
    let client = BackendClient {
        changed: changed_tx.clone(),
        progress: progress.clone(),
        name: config.name.clone(),
        in_flight: backend.in_flight.clone(),
    };

    let mut child = None;
    let mut stderr_read = None;
    let mut direct = None;
    let connecting = match &config.transport {
        Transport::Stdio { command, .. } => {
            let spawned = spawn_stdio(
                config,
                &shared.options.inherited_env,
                backend.stderr.clone(),
                backend.noise.clone(),
                progress.clone(),
            )
            .map_err(|e| {
                let reason = format!(
                    "could not start `{command}`: {e}. Check that it is installed and on PATH"
                );
                if e.kind() == std::io::ErrorKind::NotFound {
                    Down::Fatal(reason)
                } else {
                    Down::Retry(reason)
                }
            })?;
            child = Some(spawned.child);
            stderr_read = Some(spawned.stderr_read);
            let (mut writer, mut incoming) = (spawned.writer, spawned.incoming);
            let waiting = spawned.waiting;
            // One bound for the whole handshake, the era probe included (see `era`).
            timeout(handshake, async {
                let era =
                    era::probe(&mut writer, &mut incoming, ProtocolVersion::V_2026_07_28).await?;
                let lifecycle = match era {
                    Era::Modern => ClientLifecycleMode::Discover {
                        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                    },
                    Era::Legacy => ClientLifecycleMode::Initialize,
                };
                let stdin = SharedStdin::new(writer);
                // A 2025 backend's plain tool calls skip rmcp's request machinery (see
                // `direct_call`); a 2026-07-28 one's requests carry what rmcp adds for it.
                direct = (era == Era::Legacy).then(|| DirectCalls::new(stdin.clone(), waiting));
                client
                    .serve_with_lifecycle(
                        // rmcp reads what the inspector parsed, and writes JSON lines to stdin.
                        SinkStreamTransport::new(
                            stdin.sink(),
                            era::without_probe_answers(incoming),
                        ),
                        lifecycle,
                    )
                    .await
                    .map_err(|e| e.to_string())
            })
            .await
        }
        Transport::Http { .. } => {
            let transport = http_transport(config)?;
            let lifecycle = ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: None,
            };
            timeout(handshake, async {
                client
                    .serve_with_lifecycle(transport, lifecycle)
                    .await
                    .map_err(|e| {
                        crate::backend::note_handshake_refusal(backend, &e);
                        e.to_string()
                    })
            })
            .await
        }
    };
    let running: RunningService<RoleClient, BackendClient> = match connecting {
        Err(_) => {
            return Err(format!(
                "the MCP handshake did not finish within {handshake:?} (handshake_timeout); a backend that is slow to start needs a longer one"
            )
            .into());
        }
        Ok(Err(e)) => {
            let reason =
                with_exit_status(format!("the MCP handshake failed: {e}"), &mut child).await;
            if child.is_some() && refused_as_its_own_backend(backend, stderr_read).await {
                return Err(Down::Fatal(format!(
                    "this entry starts sandgate itself (through `{}`), and a gateway cannot be its own backend: each copy would start another. Remove the entry, or point your MCP client at sandgate instead of listing sandgate in its config",
                    match &config.transport {
                        Transport::Stdio { command, .. } => command.as_str(),
                        Transport::Http { url, .. } => url.as_str(),
                    }
                )));
            }
            return Err(reason.into());
        }
        Ok(Ok(running)) => running,
    };
    let peer = running.peer().clone();
    let protocol_version = peer
        .peer_info()
        .map(|i| i.protocol_version.to_string())
        .unwrap_or_else(|| "unknown".into());
    let listing = timeout(handshake, list_tools(config, &peer))
        .await
        .map_err(|_| format!("tools/list did not answer within {handshake:?}"))??;
    let listing = guarded(shared.options.guard.as_ref(), config, listing).await;
    let live = Live::new(
        peer.clone(),
        progress.clone(),
        listing,
        protocol_version.clone(),
        direct.clone(),
    );
    let tools = live.tools.clone();
    shared.tools_changing(backend);
    backend.conn.send_replace(Conn::Ready(Arc::new(live)));
    if let Ok(mut e) = backend.last_error.lock() {
        *e = None;
    }
    shared.tools_changed(&config.name, tools);
    tracing::info!(backend = %config.name, %protocol_version, "backend ready");

    if protocol_version.as_str() >= ProtocolVersion::V_2026_07_28.as_str() {
        let peer = peer.clone();
        let tx = changed_tx.clone();
        let stop = shutdown.child_token();
        tokio::spawn(async move {
            let filter = SubscriptionFilter::builder().tools_list_changed().build();
            let Ok(mut subscription) = peer.listen(filter).await else {
                return;
            };
            loop {
                tokio::select! {
                    next = subscription.next() => match next {
                        Ok(Some(ServerNotification::ToolListChangedNotification(_))) => { let _ = tx.try_send(()); }
                        Ok(Some(_)) => {}
                        _ => return,
                    },
                    _ = stop.cancelled() => return,
                }
            }
        });
    }

    let closed = running.waiting();
    tokio::pin!(closed);
    let mut last_refresh = Instant::now();
    loop {
        tokio::select! {
            _ = &mut closed => {
                return Err(with_exit_status("the connection closed".to_string(), &mut child).await.into());
            }
            status = wait_child(&mut child) => {
                return Err(format!("the process exited ({status})").into());
            }
            () = backend.suspect.notified() => {
                let ping = ClientRequest::PingRequest(PingRequest::default());
                if !matches!(timeout(SUSPECT_PING_WITHIN, peer.send_request(ping)).await, Ok(Ok(_))) {
                    return Err(format!(
                        "a call failed and a ping then went unanswered within {SUSPECT_PING_WITHIN:?}; reconnecting (a restarted HTTP server forgets its sessions)"
                    )
                    .into());
                }
            }
            () = backend.relist.notified() => {
                // The pins changed: list again at once (a person is waiting for the answer).
                let _ = changed_tx.try_send(());
            }
            Some(()) = changed_rx.recv() => {
                // Coalesce a flood: one re-fetch at a time, at most one per interval, and every
                // notice that arrived meanwhile is answered by that one re-fetch.
                if let Some(wait) = MIN_REFRESH_INTERVAL.checked_sub(last_refresh.elapsed()) {
                    sleep(wait).await;
                }
                while changed_rx.try_recv().is_ok() {}
                last_refresh = Instant::now();
                match timeout(handshake, list_tools(config, &peer)).await {
                    Ok(Ok(listing)) => {
                        let listing = guarded(shared.options.guard.as_ref(), config, listing).await;
                        let live = Live::new(peer.clone(), progress.clone(), listing, protocol_version.clone(), direct.clone());
                        let tools = live.tools.clone();
                        shared.tools_changing(backend);
                        backend.conn.send_replace(Conn::Ready(Arc::new(live)));
                        shared.tools_changed(&config.name, tools);
                    }
                    Ok(Err(e)) => tracing::warn!(backend = %config.name, "refreshing tools failed: {e}"),
                    Err(_) => tracing::warn!(backend = %config.name, "refreshing tools timed out"),
                }
            }
        }
    }
}

async fn wait_child(child: &mut Option<ChildGroup>) -> String {
    match child {
        Some(c) => match c.wait().await {
            Ok(status) => status.to_string(),
            Err(e) => format!("wait failed: {e}"),
        },
        None => std::future::pending().await,
    }
}

/// Whether the child that failed its handshake was a sandgate that refused to run as a backend
/// of this one. It says so on stderr, which is read on its own task: the answer waits for that
/// task to read stderr to its end (the refusing copy exits at once), at most
/// [`STDERR_END_WAIT`] for a child that keeps stderr open. Polling the ring for a fixed moment
/// missed the line on a loaded machine, and the entry was then retried, starting a second copy.
async fn refused_as_its_own_backend(
    backend: &Backend,
    stderr_read: Option<tokio::task::JoinHandle<()>>,
) -> bool {
    if let Some(read) = stderr_read {
        let _ = timeout(STDERR_END_WAIT, read).await;
    }
    backend
        .stderr
        .snapshot()
        .iter()
        .any(|line| line.contains(crate::escapees::SELF_AS_BACKEND))
}

/// How long a failed handshake waits for the child's stderr to end before judging its reason.
const STDERR_END_WAIT: Duration = Duration::from_secs(3);

/// Adds the child's exit status to a message, if it exits promptly.
async fn with_exit_status(message: String, child: &mut Option<ChildGroup>) -> String {
    if child.is_none() {
        return message;
    }
    match timeout(Duration::from_millis(500), wait_child(child)).await {
        Ok(status) => format!("{message}; the process exited ({status})"),
        Err(_) => message,
    }
}
