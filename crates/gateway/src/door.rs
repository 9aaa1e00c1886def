//! The one door to everything outside the gateway: every backend tool call and every host
//! capability an execution uses passes through here, whichever tier or route it came by (tier 1
//! and 2 shortcuts, the sandbox bridge, `.raw()`, stored tools later).
//!
//! The door asks the caller's [`Access`](sandgate_policy::Access) for a proof
//! ([`Authorized`]), writes the decision to the audit log, and only then calls: the backend
//! manager's `call` and the capabilities take nothing but a proof. A refusal is a
//! [`FailureKind::Denied`] naming the rule and where to change it. `tests/one_door.rs` reads
//! the sources and holds every call to a backend to this file.

use std::sync::Arc;
use std::time::Duration;

use sandgate_policy::{Authorized, PolicyError, ToolCall};
use sandgate_sandbox::{CallFailure, FailureKind, ToolAnswer};
use sandgate_upstream::UpstreamError;

use crate::Gateway;
use crate::audit::{Decision, Subject};
use crate::caller::Caller;
use crate::telemetry::{CallOutcome, traces};
use sandgate_upstream::{BackendProgress, CallContext};

/// Who is knocking: the caller and the execution it runs.
#[derive(Debug, Clone)]
pub struct Knock {
    /// The caller (profile, token, owner).
    pub caller: Caller,
    /// The execution's id.
    pub execution_id: String,
    /// The stored tools running, outermost first, when the knock comes from inside one
    /// (for the cycle and depth guard).
    pub within: Vec<String>,
    /// Where the execution's progress goes, when its client asked for it: finished calls and
    /// the backends' own progress notices.
    pub progress: Option<crate::chain::ProgressSink>,
}

impl Knock {
    /// A knock by `caller` for execution `execution_id`, outside any stored tool.
    pub fn new(caller: Caller, execution_id: impl Into<String>) -> Knock {
        Knock {
            caller,
            execution_id: execution_id.into(),
            within: Vec::new(),
            progress: None,
        }
    }
}

impl Gateway {
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

    /// Calls a backend tool for `knock`: the one path to [`BackendManager::call`]. Each call
    /// is counted for `/metrics` and traced as a span under the caller's trace.
    ///
    /// [`BackendManager::call`]: sandgate_upstream::BackendManager::call
    pub(crate) async fn call_tool(
        self: &Arc<Self>,
        knock: &Knock,
        call: ToolCall,
        args: String,
        limit: Option<Duration>,
    ) -> Result<ToolAnswer, CallFailure> {
        let started = std::time::Instant::now();
        let (backend, tool) = (call.backend.clone(), call.tool.clone());
        let span = traces::start_tool_call(&knock.caller.trace, &backend, &tool);
        let answer = self.call_tool_in(knock, call, args, limit, &span).await;
        let outcome = match &answer {
            Ok(answer) if answer.is_error => CallOutcome::ErrorResult,
            Ok(_) => CallOutcome::Ok,
            Err(failure) => match failure.kind {
                FailureKind::Denied => CallOutcome::Denied,
                FailureKind::Timeout => CallOutcome::Timeout,
                _ => CallOutcome::Failed,
            },
        };
        let known = self.catalog().resolve(&format!("{backend}.{tool}")).is_ok();
        self.metrics
            .call_finished(&backend, &tool, known, outcome, started.elapsed());
        traces::end_tool_call(
            &span,
            (outcome != CallOutcome::Ok).then(|| outcome.as_str()),
        );
        answer
    }

    /// [`Gateway::call_tool`] inside its span `trace`.
    async fn call_tool_in(
        self: &Arc<Self>,
        knock: &Knock,
        call: ToolCall,
        args: String,
        limit: Option<Duration>,
        trace: &opentelemetry::Context,
    ) -> Result<ToolAnswer, CallFailure> {
        let authorized = self.authorize_tool(knock, call, &args)?;
        let call = authorized.get();
        // Checked on the text, before it is parsed or sent: a backend that is sent more than
        // it accepts may exit, and then it is down for every client.
        let max = self
            .manager()
            .max_argument_bytes(&call.backend)
            .or((call.backend == crate::stored::BACKEND).then_some(4 * 1024 * 1024));
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
        if call.backend == crate::stored::BACKEND {
            let name = call.tool.clone();
            return self.call_stored(knock, &name, arguments).await;
        }
        let arguments = Some(arguments);
        let (progress, forwarding) = match knock.progress.clone() {
            Some(sink) => {
                let (notices, forwarding) = forward_progress(sink, call.qualified());
                (Some(notices), Some(forwarding))
            }
            None => (None, None),
        };
        let context = CallContext {
            limit,
            trace: traces::to_meta(trace),
            progress,
        };
        let result = self.manager().call(&authorized, arguments, context).await;
        // The call's notices reach the client before the call is reported finished.
        if let Some(forwarding) = forwarding {
            let _ = tokio::time::timeout(PROGRESS_DRAIN, forwarding).await;
        }
        let result = result.map_err(|e| {
            let kind = match e {
                UpstreamError::Timeout { .. } => FailureKind::Timeout,
                _ => FailureKind::Failed,
            };
            CallFailure::new(kind, e.to_string())
        })?;
        let is_error = result.is_error == Some(true);
        let json = serde_json::to_string(&result)
            .map_err(|e| CallFailure::new(FailureKind::Internal, e.to_string()))?;
        Ok(ToolAnswer { json, is_error })
    }

    /// Calls `call` as `caller`, outside any execution: through the door like every call
    /// (authorized, audited). For stored tools exposed as plain MCP tools, embedding and
    /// benchmarks; MCP clients otherwise reach tools through `call_tool_chain`.
    pub async fn call_as(
        self: &Arc<Self>,
        caller: &Caller,
        call: ToolCall,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<ToolAnswer, CallFailure> {
        let knock = Knock::new(caller.clone(), sandgate_store::new_execution_id());
        self.call_tool(
            &knock,
            call,
            serde_json::Value::Object(arguments).to_string(),
            None,
        )
        .await
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
        if !self.audit().enabled() {
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
        self.audit().record(&Decision {
            profile: Some(knock.caller.profile()),
            token_id: knock.caller.token_id.as_deref(),
            execution_id: (!knock.execution_id.is_empty()).then_some(knock.execution_id.as_str()),
            subject,
            target,
            allowed,
            rule,
            arguments,
        });
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
    sink: crate::chain::ProgressSink,
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
