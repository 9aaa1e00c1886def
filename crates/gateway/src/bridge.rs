//! The sandbox's way to the door: every call a guest makes arrives here and goes through the
//! [`Door`](crate::door::Door), tools with their stored ones run in the sandbox again, and host
//! functions by their [`HostFunction`]. The sandbox names tools by index into the list the
//! gateway gave it, which holds only the caller's view, so the guest can never ask for a tool
//! outside it; the door checks each call again.
//!
//! [`call_as`] is the same way in for a caller outside any execution.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use sandgate_policy::ToolCall;
use sandgate_sandbox::{Bridge, CallFailure, FailureKind, ToolAnswer, ToolBinding};
use serde_json::{Map, Value};

use crate::caller::Caller;
use crate::door::{HostFunction, Knock, RunStored};
use crate::gateway::Gateway;
use crate::progress::ProgressSink;

/// Routes one execution's calls to the door.
#[derive(Debug, Clone)]
pub struct ExecutionBridge {
    gateway: Arc<Gateway>,
    knock: Arc<Knock>,
    /// The longest any single call may take (the execution's own deadline still applies).
    call_limit: Option<Duration>,
    /// Where a detached execution shows its logs and calls so far.
    detached: Option<Arc<crate::detached::Detached>>,
}

impl ExecutionBridge {
    /// A bridge for one execution of `knock`'s caller.
    pub fn new(gateway: Arc<Gateway>, knock: Knock, call_limit: Option<Duration>) -> Self {
        ExecutionBridge {
            gateway,
            knock: Arc::new(knock),
            call_limit,
            detached: None,
        }
    }

    /// Shows each log line and finished call to `detached` as they happen.
    pub(crate) fn with_detached(
        mut self,
        detached: Option<Arc<crate::detached::Detached>>,
    ) -> Self {
        self.detached = detached;
        self
    }

    /// Reports each finished call, and the backends' own progress, to `progress`.
    pub fn with_progress(mut self, progress: Option<ProgressSink>) -> Self {
        let mut knock = (*self.knock).clone();
        knock.progress = progress;
        self.knock = Arc::new(knock);
        self
    }
}

/// Runs stored tools for the door, in the sandbox of `0`.
struct StoredRunner<'a>(&'a Arc<Gateway>);

impl RunStored for StoredRunner<'_> {
    fn run_stored<'a>(
        &'a self,
        knock: &'a Knock,
        name: &'a str,
        arguments: Map<String, Value>,
    ) -> BoxFuture<'a, Result<ToolAnswer, CallFailure>> {
        Box::pin(async move {
            let prepared = crate::stored::run::prepare(self.0, knock, name, arguments).await?;
            let bridge = ExecutionBridge::new(self.0.clone(), prepared.knock, None);
            let result = prepared
                .runtime
                .sandbox
                .run(prepared.execution, Arc::new(bridge))
                .await;
            Ok(crate::stored::run::answer(&prepared.tool, result))
        })
    }
}

/// Calls `call` for `knock` through the door, a stored tool run by the gateway's sandbox.
pub(crate) async fn call_tool(
    gateway: &Arc<Gateway>,
    knock: &Knock,
    call: ToolCall,
    args: String,
    limit: Option<Duration>,
) -> Result<ToolAnswer, CallFailure> {
    let catalog = gateway.catalog();
    gateway
        .door()
        .call_tool(knock, call, args, limit, &StoredRunner(gateway), &catalog)
        .await
}

/// Calls `call` as `caller`, outside any execution: through the door like every call
/// (authorized, audited). For stored tools exposed as plain MCP tools, embedding and
/// benchmarks; MCP clients otherwise reach tools through `call_tool_chain`.
pub async fn call_as(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    call: ToolCall,
    arguments: Map<String, Value>,
) -> Result<ToolAnswer, CallFailure> {
    let knock = Knock::new(caller.clone(), sandgate_store::new_execution_id());
    call_tool(
        gateway,
        &knock,
        call,
        Value::Object(arguments).to_string(),
        None,
    )
    .await
}

impl Bridge for ExecutionBridge {
    fn call_tool(
        &self,
        tool: &ToolBinding,
        args: String,
    ) -> BoxFuture<'static, Result<ToolAnswer, CallFailure>> {
        self.call_tool_at(tool, args, None)
    }

    fn call_tool_at(
        &self,
        tool: &ToolBinding,
        args: String,
        line: Option<u32>,
    ) -> BoxFuture<'static, Result<ToolAnswer, CallFailure>> {
        let call = ToolCall::new(tool.backend.clone(), tool.name.clone())
            .called_in_code(&tool.js_backend, &tool.js_tool);
        let qualified = call.qualified();
        let gateway = self.gateway.clone();
        // A call's own knock only when it says where it was made (executions with approvals).
        let knock = match line {
            None => self.knock.clone(),
            Some(_) => Arc::new(Knock {
                line,
                ..(*self.knock).clone()
            }),
        };
        let limit = self.call_limit;
        let progress = self.knock.progress.clone();
        let detached = self.detached.clone();
        let started = std::time::Instant::now();
        Box::pin(async move {
            let result = call_tool(&gateway, &knock, call, args, limit).await;
            let ok = matches!(&result, Ok(answer) if !answer.is_error);
            let millis = started.elapsed().as_secs_f64() * 1000.0;
            if let Some(detached) = &detached {
                detached.call_finished(&qualified, ok, millis);
            }
            if let Some(progress) = &progress {
                progress.call_finished(&qualified, ok, millis).await;
            }
            result
        })
    }

    fn logged(&self, line: &sandgate_sandbox::LogLine) {
        if let Some(detached) = &self.detached {
            detached.logged(line);
        }
    }

    fn call_host(
        &self,
        name: &str,
        args: String,
    ) -> BoxFuture<'static, Result<String, CallFailure>> {
        let (gateway, knock) = (self.gateway.clone(), self.knock.clone());
        let function = HostFunction::named(name);
        let name = name.to_string();
        Box::pin(async move {
            match function {
                Some(function) => gateway.door().use_host(&knock, function, args).await,
                None => Err(CallFailure::new(
                    FailureKind::Denied,
                    format!("`{name}` is not a capability of this execution"),
                )),
            }
        })
    }
}
