//! The one door to everything outside the gateway: every backend tool call and every host
//! capability an execution uses passes through here, whichever tier or route it came by (tier 1
//! and 2 shortcuts, the sandbox bridge, `.raw()`, stored tools later).
//!
//! The door is a value, [`Door`], and the only holder of the backends' calls half
//! ([`BackendCalls`], handed out once when the backends start) and of the host's capabilities
//! (a [`Host`]: `fetch`, `fs` and `env` are its methods and nothing else), both in private
//! fields. It asks the caller's [`Access`](sandgate_policy::Access) for a proof
//! ([`Authorized`]), writes the decision to the audit log, and only then calls. A refusal is a
//! [`FailureKind::Denied`] naming the rule and where to change it. Code outside this module
//! cannot reach a backend at all; the compile-fail examples below show it.
//!
//! Holding the gateway gives no way around the door: its fields are private, and the
//! backends' other half has no `call`:
//!
//! ```compile_fail,E0616
//! fn sneak(door: &sandgate_gateway::Door) { let _ = &door.calls; }
//! ```
//!
//! ```compile_fail,E0599
//! async fn sneak(gateway: &sandgate_gateway::Gateway, proof: sandgate_policy::Authorized<sandgate_policy::ToolCall>) {
//!     let _ = gateway.backends().call(&proof, None, Default::default()).await;
//! }
//! ```
//!
//! ```compile_fail,E0616
//! fn sneak(door: &sandgate_gateway::Door) { let _ = &door.host; }
//! ```
//!
//! Nor is a capability a function anyone may call:
//!
//! ```compile_fail,E0425
//! fn sneak(proof: &sandgate_policy::Authorized<sandgate_policy::EnvRead>) {
//!     let _ = sandgate_capabilities::read_env(proof);
//! }
//! ```
//!
//! And the calls half is one value, never copied:
//!
//! ```compile_fail,E0277
//! use sandgate_upstream::ManagerCalls;
//! fn copy(calls: &ManagerCalls) -> ManagerCalls { <ManagerCalls as Clone>::clone(calls) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use sandgate_capabilities::Host;
use sandgate_catalog::{Entry, Origin};
use sandgate_policy::{Authorized, PolicyError, ToolCall};
use sandgate_sandbox::{BackendCondition, CallFailure, FailureKind, ToolAnswer};
use sandgate_upstream::{BackendCalls, BackendProgress, Backends, CallContext, UpstreamError};
use serde_json::{Map, Value};

use crate::audit::{AuditLog, Decision, Subject};
use crate::progress::ProgressSink;
use crate::telemetry::{CallOutcome, Metrics, traces};

mod approval;
mod capability;
mod knock;
mod state;
mod user_connection;

pub use capability::{HostFunction, granted};
pub use knock::{Knock, ScriptPass};

/// The most JSON bytes a stored tool's arguments may have.
const MAX_STORED_ARGUMENT_BYTES: usize = 4 * 1024 * 1024;

/// Runs stored tools for the door: they run in the sandbox, which the layers above the door
/// hold. The door authorizes and counts the call; this runs it, its own calls going through
/// `door` again. Handed to the door once, when the gateway is built.
pub trait RunStored: Send + Sync + std::fmt::Debug {
    /// Runs stored tool `name` for `knock` with `arguments`.
    fn run_stored<'a>(
        &'a self,
        door: &'a Arc<Door>,
        knock: &'a Knock,
        name: &'a str,
        arguments: Map<String, Value>,
    ) -> BoxFuture<'a, Result<ToolAnswer, CallFailure>>;
}

/// Where a call goes once it is allowed.
#[derive(Clone, Copy)]
enum Target {
    /// A backend's tool, called through the backends' calls half.
    Backend,
    /// A stored tool, run in the sandbox.
    Stored,
}

impl Target {
    /// Where a call to `entry` goes: its origin says.
    fn of(entry: &Entry) -> Target {
        match entry.spec.origin {
            Origin::Stored => Target::Stored,
            Origin::Backend => Target::Backend,
        }
    }
}

/// The one door: see the module's documentation.
#[derive(Debug)]
pub struct Door {
    calls: Box<dyn BackendCalls>,
    backends: Arc<dyn Backends>,
    host: Arc<Host>,
    audit: AuditLog,
    metrics: Arc<Metrics>,
    /// Users' own credentials, for backends that serve each user on its own connection.
    credentials: Option<Arc<crate::credentials::Credentials>>,
    /// The questions approval-gated calls (and backends' own requests) wait on.
    approvals: Arc<crate::approvals::Approvals>,
    /// Where script state is kept (the store), when there is one.
    state: Option<sandgate_store::StoreHandle>,
    /// What tools return, learned from their results.
    shapes: Option<Arc<crate::shapes::Shapes>>,
    /// What runs stored tools, when the gateway has a sandbox.
    stored: Option<Arc<dyn RunStored>>,
}

impl Door {
    /// The door over `calls`, the backends' only calls half; host capabilities fetch with
    /// `host`; decisions go to `audit`; calls are counted in `metrics`.
    pub(crate) fn new(
        calls: Box<dyn BackendCalls>,
        backends: Arc<dyn Backends>,
        host: Host,
        audit: AuditLog,
        metrics: Arc<Metrics>,
        credentials: Option<Arc<crate::credentials::Credentials>>,
        approvals: crate::approvals::Approvals,
    ) -> Door {
        Door {
            calls,
            backends,
            host: Arc::new(host),
            audit,
            metrics,
            credentials,
            approvals: Arc::new(approvals),
            state: None,
            shapes: None,
            stored: None,
        }
    }

    /// The door that runs stored tools with `stored`.
    pub(crate) fn with_stored(mut self, stored: Arc<dyn RunStored>) -> Self {
        self.stored = Some(stored);
        self
    }

    /// This door, keeping script state in `store` and learning results' shapes into `shapes`.
    pub(crate) fn with_memory(
        mut self,
        store: Option<sandgate_store::StoreHandle>,
        shapes: Arc<crate::shapes::Shapes>,
    ) -> Door {
        self.state = store;
        self.shapes = Some(shapes);
        self
    }

    /// The shapes learned from tools' results.
    pub(crate) fn shapes(&self) -> Option<&Arc<crate::shapes::Shapes>> {
        self.shapes.as_ref()
    }

    /// The questions approval-gated calls wait on.
    pub fn approvals(&self) -> &crate::approvals::Approvals {
        &self.approvals
    }

    /// Users' own credentials, when this gateway keeps them.
    pub(crate) fn credentials(&self) -> Option<&Arc<crate::credentials::Credentials>> {
        self.credentials.as_ref()
    }

    /// Where decisions are written.
    pub(crate) fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// Authorizes a tool call for `knock`, and records the decision.
    pub(crate) fn authorize_tool(
        &self,
        knock: &Knock,
        call: ToolCall,
        arguments: &str,
    ) -> Result<Authorized<ToolCall>, CallFailure> {
        let target = call.qualified();
        let decision = knock.caller.access.authorize_tool(call);
        self.record(knock, Subject::Tool, &target, &decision, Some(arguments));
        decision.map_err(denied)
    }

    /// Calls `entry`'s tool for `knock`: the one path to the backends' calls half; a stored
    /// tool (its origin says) is run by the stored-tools runner. Each call is counted for
    /// `/metrics` and traced as a span under the caller's trace.
    pub(crate) async fn call_tool(
        self: &Arc<Self>,
        knock: &Knock,
        entry: &Entry,
        args: String,
        limit: Option<Duration>,
    ) -> Result<ToolAnswer, CallFailure> {
        let started = std::time::Instant::now();
        let (backend, tool) = (entry.spec.backend.clone(), entry.spec.name.clone());
        // A tool that declares no output schema is learned from (off this path: `offer` only
        // queues the result).
        let learn = entry.spec.output_schema.is_none();
        let span = traces::start_tool_call(&knock.caller.trace, &backend, &tool);
        let answer = match self.call_tool_in(knock, entry, args, limit, &span).await {
            Ok((answer, result)) => {
                if let (true, Some(shapes), Some(result)) = (learn, &self.shapes, result)
                    && answer.json.len() <= crate::shapes::MAX_LEARNED_RESULT_BYTES
                {
                    shapes.offer(backend.clone(), tool.clone(), result, answer.json.len());
                }
                Ok(answer)
            }
            Err(failure) => Err(failure),
        };
        let outcome = match &answer {
            Ok(answer) if answer.is_error => CallOutcome::ErrorResult,
            Ok(_) => CallOutcome::Ok,
            Err(failure) => match failure.kind {
                FailureKind::Denied => CallOutcome::Denied,
                FailureKind::Timeout => CallOutcome::Timeout,
                _ => CallOutcome::Failed,
            },
        };
        self.metrics
            .call_finished(&backend, &tool, true, outcome, started.elapsed());
        traces::end_tool_call(
            &span,
            (outcome != CallOutcome::Ok).then(|| outcome.as_str()),
        );
        answer
    }

    /// [`Door::call_tool`] inside its span `trace`: the answer, and a backend's successful
    /// result to learn from. `entry`'s origin says where the call goes, and its declared input
    /// is what a backend's arguments are checked against before anything is sent.
    async fn call_tool_in(
        self: &Arc<Self>,
        knock: &Knock,
        entry: &Entry,
        args: String,
        limit: Option<Duration>,
        trace: &opentelemetry::Context,
    ) -> Result<(ToolAnswer, Option<rmcp::model::CallToolResult>), CallFailure> {
        let authorized = self.authorize_tool(knock, crate::views::call_of(entry), &args)?;
        let call = authorized.get();
        // Checked on the text, before it is parsed or sent: a backend that is sent more than
        // it accepts may exit, and then it is down for every client.
        let target = Target::of(entry);
        let schema = Some(&entry.spec.input_schema);
        let max = match target {
            Target::Backend => self.backends.max_argument_bytes(&call.backend),
            Target::Stored => Some(MAX_STORED_ARGUMENT_BYTES),
        };
        if let Some(max) = max.filter(|&max| args.len() > max) {
            return Err(CallFailure::new(
                FailureKind::Failed,
                sandgate_sandbox::direct::arguments_too_large(&call.qualified(), args.len(), max),
            ));
        }
        let arguments = match serde_json::from_str::<serde_json::Value>(&args) {
            Ok(serde_json::Value::Object(map)) => map,
            Ok(_) | Err(_) => {
                return Err(CallFailure::new(
                    FailureKind::Failed,
                    "tool arguments must be one JSON object",
                ));
            }
        };
        // Arguments the declaration plainly refuses are answered here, in the same words
        // whatever the server is written in, and nobody is asked to approve them.
        if let (Target::Backend, Some(schema)) = (target, schema) {
            let problems = sandgate_catalog::argument_problems(schema, &arguments);
            if !problems.is_empty() {
                return Err(CallFailure::new(
                    FailureKind::Failed,
                    format!(
                        "invalid arguments for {}: {}. Nothing was sent to the backend.",
                        call.qualified(),
                        problems.join("; ")
                    ),
                ));
            }
        }
        // A call a person must approve waits here for the answer; no other path goes out.
        self.approved(knock, entry, call, &args).await?;
        if let Target::Stored = target {
            let Some(stored) = &self.stored else {
                return Err(CallFailure::new(
                    FailureKind::Failed,
                    "stored tools need the sandbox, which is not running",
                ));
            };
            let answer = stored
                .run_stored(self, knock, &call.tool, arguments)
                .await?;
            return Ok((answer, None));
        }
        // A backend that serves each user on a connection of its own gets who this is, and
        // the user's own secret; the secret goes nowhere else.
        let per_user = self.backends.per_user(&call.backend);
        let signs_in = per_user
            .as_ref()
            .is_some_and(|p| matches!(p.secret, sandgate_config::UserSecret::OAuth(_)));
        let mut arguments = Some(arguments);
        let mut wider_scope = None;
        let mut signed_in_again = false;
        let result = loop {
            let user = match &per_user {
                None => None,
                Some(per_user) => Some(
                    self.user_connection(knock, &call.backend, per_user, wider_scope.as_deref())
                        .await?,
                ),
            };
            // A backend its users sign in to may refuse a token (revoked) or want a wider
            // scope: the call goes out once more, after the user signs in again. It never
            // reached the tool the first time.
            let again = signs_in && !signed_in_again;
            let sent = if again {
                arguments.clone()
            } else {
                arguments.take()
            };
            match self
                .send(knock, &authorized, sent, limit, trace, user)
                .await
            {
                Err(UpstreamError::Unauthorized { wider, .. }) if again => {
                    signed_in_again = true;
                    wider_scope = wider;
                    self.sign_in_again(knock, &call.backend, wider_scope.as_deref())
                        .await?;
                }
                // Refused again: the user's sign-in is what must be mended.
                Err(refused @ UpstreamError::Unauthorized { .. }) if signs_in => {
                    return Err(CallFailure::new(
                        FailureKind::SignInRequired,
                        format!(
                            "{refused}. Sign in to `{}` again: the console's Credentials page, Connect",
                            call.backend
                        ),
                    ));
                }
                result => break result,
            }
        };
        let result = result.map_err(failure_of)?;
        let is_error = result.is_error == Some(true);
        let json = serde_json::to_string(&result)
            .map_err(|e| CallFailure::new(FailureKind::Internal, e.to_string()))?;
        let lesson = (!is_error).then_some(result);
        Ok((ToolAnswer { json, is_error }, lesson))
    }

    /// Sends one call to its backend (its progress and the backend's own requests passed on to
    /// the caller), and waits for the answer.
    async fn send(
        &self,
        knock: &Knock,
        authorized: &Authorized<ToolCall>,
        arguments: Option<Map<String, Value>>,
        limit: Option<Duration>,
        trace: &opentelemetry::Context,
        user: Option<sandgate_upstream::UserConnection>,
    ) -> Result<rmcp::model::CallToolResult, UpstreamError> {
        let call = authorized.get();
        let (progress, forwarding) = match knock.progress.clone() {
            Some(sink) => {
                let (notices, forwarding) = forward_progress(sink, call.qualified());
                (Some(notices), Some(forwarding))
            }
            None => (None, None),
        };
        // The backend's own requests during the call go to the person behind its client.
        let asks = match &knock.asking {
            crate::approvals::Asking::Nobody => None,
            asking => Some(Arc::new(crate::approvals::AsksFor {
                approvals: self.approvals.clone(),
                asking: asking.clone(),
                caller: knock.caller.clone(),
                execution_id: knock.execution_id.clone(),
            }) as Arc<dyn sandgate_upstream::AskClient>),
        };
        let context = CallContext {
            limit,
            trace: traces::to_meta(trace),
            progress,
            user,
            asks,
        };
        let result = self.calls.call(authorized, arguments, context).await;
        // The call's notices reach the client before the call is reported finished.
        if let Some(forwarding) = forwarding {
            let _ = tokio::time::timeout(PROGRESS_DRAIN, forwarding).await;
        }
        result
    }

    /// Writes one decision to the audit log.
    pub(crate) fn record<T>(
        &self,
        knock: &Knock,
        subject: Subject,
        target: &str,
        decision: &Result<Authorized<T>, PolicyError>,
        arguments: Option<&str>,
    ) {
        if !self.audit.enabled() {
            return;
        }
        let rule = match decision {
            Ok(proof) => proof.rule(),
            Err(e) => e.reason(),
        };
        self.record_line(knock, subject, target, decision.is_ok(), rule, arguments);
    }

    /// Writes one decision made outside the policy (a symbolic link out of a root, a stored
    /// output of another caller) to the audit log.
    pub(crate) fn record_line(
        &self,
        knock: &Knock,
        subject: Subject,
        target: &str,
        allowed: bool,
        rule: &str,
        arguments: Option<&str>,
    ) {
        self.audit.record(&Decision {
            profile: Some(knock.caller.profile()),
            token_id: knock.caller.name.as_deref(),
            execution_id: (!knock.execution_id.is_empty()).then_some(knock.execution_id.as_str()),
            subject,
            target,
            allowed,
            rule,
            arguments,
            asked: false,
        });
    }
}

/// A backend's error as the guest sees it: its kind, and the backend's condition as data (the
/// hint follows it; it never reads the message).
fn failure_of(error: UpstreamError) -> CallFailure {
    let kind = match error {
        UpstreamError::Timeout { .. } => FailureKind::Timeout,
        UpstreamError::Held { .. } => FailureKind::Held,
        _ => FailureKind::Failed,
    };
    let condition = match &error {
        UpstreamError::StillStarting { .. } => Some(BackendCondition::Starting),
        UpstreamError::Unavailable { retrying: true, .. } => Some(BackendCondition::Restarting),
        UpstreamError::Unavailable { .. } | UpstreamError::Disabled { .. } => {
            Some(BackendCondition::Unavailable)
        }
        UpstreamError::UnknownBackend { .. } | UpstreamError::UnknownTool { .. } => {
            Some(BackendCondition::Unknown)
        }
        _ => None,
    };
    let failure = CallFailure::new(kind, error.to_string());
    match condition {
        Some(condition) => failure.because(condition),
        None => failure,
    }
}

/// A refusal as the guest sees it.
pub(crate) fn denied(error: PolicyError) -> CallFailure {
    CallFailure::new(FailureKind::Denied, error.to_string())
}

/// The longest a finished call waits for its progress notices to be passed on.
const PROGRESS_DRAIN: Duration = Duration::from_millis(500);

/// A channel for a backend's progress notices on a call to `tool`, passed on to `sink` by a
/// task that ends once the call has dropped the channel and every notice is passed on.
fn forward_progress(
    sink: ProgressSink,
    tool: String,
) -> (
    tokio::sync::mpsc::Sender<BackendProgress>,
    tokio::task::JoinHandle<()>,
) {
    const NOTICES_IN_FLIGHT: usize = 16;
    let (tx, mut rx) = tokio::sync::mpsc::channel(NOTICES_IN_FLIGHT);
    let forwarding = tokio::spawn(async move {
        while let Some(notice) = rx.recv().await {
            sink.backend_progress(&tool, notice).await;
        }
    });
    (tx, forwarding)
}
