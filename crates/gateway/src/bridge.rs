//! The sandbox's way to the door: every call a guest makes arrives here and goes through
//! [`Gateway::call_tool`] (tools) or [`Gateway::use_capability`] (fetch, fs, env). The sandbox
//! names tools by index into the list the gateway gave it, which holds only the caller's view,
//! so the guest can never ask for a tool outside it; the door checks each call again.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use sandgate_catalog::{Catalog, TsDecl};
use sandgate_policy::ToolCall;
use sandgate_sandbox::{Bridge, CallFailure, ToolAnswer, ToolBinding};

use crate::Gateway;
use crate::chain::ProgressSink;
use crate::door::Knock;

/// Routes one execution's calls to the door.
#[derive(Debug, Clone)]
pub struct UpstreamBridge {
    gateway: Arc<Gateway>,
    knock: Arc<Knock>,
    /// The longest any single call may take (the execution's own deadline still applies).
    call_limit: Option<Duration>,
}

impl UpstreamBridge {
    /// A bridge for one execution of `knock`'s caller.
    pub fn new(gateway: Arc<Gateway>, knock: Knock, call_limit: Option<Duration>) -> Self {
        UpstreamBridge {
            gateway,
            knock: Arc::new(knock),
            call_limit,
        }
    }

    /// Reports each finished call, and the backends' own progress, to `progress`.
    pub fn with_progress(mut self, progress: Option<ProgressSink>) -> Self {
        let mut knock = (*self.knock).clone();
        knock.progress = progress;
        self.knock = Arc::new(knock);
        self
    }
}

impl Bridge for UpstreamBridge {
    fn call_tool(
        &self,
        tool: &ToolBinding,
        args: String,
    ) -> BoxFuture<'static, Result<ToolAnswer, CallFailure>> {
        let call = ToolCall::new(tool.backend.clone(), tool.name.clone())
            .called_in_code(&tool.js_backend, &tool.js_tool);
        let qualified = call.qualified();
        let (gateway, knock) = (self.gateway.clone(), self.knock.clone());
        let limit = self.call_limit;
        let progress = self.knock.progress.clone();
        let started = std::time::Instant::now();
        Box::pin(async move {
            let result = gateway.call_tool(&knock, call, args, limit).await;
            if let Some(progress) = &progress {
                let ok = matches!(&result, Ok(answer) if !answer.is_error);
                let millis = started.elapsed().as_secs_f64() * 1000.0;
                progress.call_finished(&qualified, ok, millis).await;
            }
            result
        })
    }

    fn call_host(
        &self,
        name: &str,
        args: String,
    ) -> BoxFuture<'static, Result<String, CallFailure>> {
        let (gateway, knock) = (self.gateway.clone(), self.knock.clone());
        let name = name.to_string();
        Box::pin(async move { gateway.use_capability(&knock, &name, args).await })
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
