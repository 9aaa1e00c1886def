//! The sandbox's door to the backends: every call a guest makes arrives here, is checked by
//! the policy, and only then reaches the backend manager. The sandbox names tools by index into
//! the list the gateway gave it, so the guest can never ask for a tool outside that list.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use sandgate_catalog::{Catalog, TsDecl};
use sandgate_policy::ToolCall;
use sandgate_sandbox::{Bridge, CallFailure, ToolBinding};

use crate::Gateway;
use crate::chain::ProgressSink;

/// Routes sandbox tool calls to the backends, through the policy.
#[derive(Debug, Clone)]
pub struct UpstreamBridge {
    gateway: Arc<Gateway>,
    /// The longest any single call may take (the execution's own deadline still applies).
    call_limit: Option<Duration>,
    /// Where finished calls are reported, when the client asked for progress.
    progress: Option<ProgressSink>,
}

impl UpstreamBridge {
    /// A bridge over the gateway's backends.
    pub fn new(gateway: Arc<Gateway>, call_limit: Option<Duration>) -> Self {
        UpstreamBridge {
            gateway,
            call_limit,
            progress: None,
        }
    }

    /// Reports each finished call to `progress`.
    pub fn with_progress(mut self, progress: Option<ProgressSink>) -> Self {
        self.progress = progress;
        self
    }
}

impl Bridge for UpstreamBridge {
    fn call_tool(
        &self,
        tool: &ToolBinding,
        args: String,
    ) -> BoxFuture<'static, Result<String, CallFailure>> {
        let call = ToolCall::new(tool.backend.clone(), tool.name.clone());
        let gateway = self.gateway.clone();
        let limit = self.call_limit;
        let progress = self.progress.clone();
        let started = std::time::Instant::now();
        Box::pin(async move {
            let authorized = gateway.authorize(call).map_err(|e| CallFailure {
                kind: "tool_denied".into(),
                message: e.to_string(),
            })?;
            // Checked on the text, before it is parsed or sent: a backend that is sent more
            // than it accepts may exit, and then it is down for every client.
            let call = authorized.get();
            let max = gateway.manager().max_argument_bytes(&call.backend);
            if let Some(max) = max.filter(|&max| args.len() > max) {
                return Err(CallFailure {
                    kind: "tool_failed".into(),
                    message: sandgate_sandbox::direct::arguments_too_large(
                        &call.qualified(),
                        args.len(),
                        max,
                    ),
                });
            }
            let arguments = match serde_json::from_str::<serde_json::Value>(&args) {
                Ok(serde_json::Value::Object(map)) => Some(map),
                Ok(_) | Err(_) => {
                    return Err(CallFailure {
                        kind: "tool_failed".into(),
                        message: "tool arguments must be one JSON object".into(),
                    });
                }
            };
            let result = gateway
                .manager()
                .call(&authorized, arguments, limit)
                .await
                .map_err(|e| CallFailure {
                    kind: "tool_failed".into(),
                    message: e.to_string(),
                });
            if let Some(progress) = &progress {
                let ok = matches!(&result, Ok(r) if r.is_error != Some(true));
                let millis = started.elapsed().as_secs_f64() * 1000.0;
                progress
                    .call_finished(&authorized.get().qualified(), ok, millis)
                    .await;
            }
            let result = result?;
            serde_json::to_string(&result).map_err(|e| CallFailure {
                kind: "internal".into(),
                message: e.to_string(),
            })
        })
    }
}

/// The sandbox's view of every tool in a catalog, with TypeScript declarations.
pub fn tool_bindings(catalog: &Catalog) -> Vec<ToolBinding> {
    catalog
        .entries()
        .iter()
        .map(|entry| ToolBinding {
            backend: entry.spec.backend.clone(),
            name: entry.spec.name.clone(),
            js_backend: entry.js_backend.clone(),
            js_tool: entry.js_tool.clone(),
            declaration: TsDecl::for_entry(entry).declaration,
        })
        .collect()
}
