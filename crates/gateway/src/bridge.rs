//! The sandbox's way to the door: every call a guest makes arrives here and goes through the
//! [`Door`](crate::door::Door) (which runs stored tools in the sandbox again), and host
//! functions by their [`HostFunction`]. A bridge holds the door and the caller's view, never
//! the gateway. The sandbox names tools by index into the list the
//! gateway gave it, which holds only the caller's view, so the guest can never ask for a tool
//! outside it; the door checks each call again.
//!
//! `Gateway::call_as` is the same way in for a caller outside any execution.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use sandgate_catalog::{Catalog, ToolRef};
use sandgate_sandbox::{Bridge, CallFailure, FailureKind, ToolAnswer, ToolBinding};

use crate::door::{Door, HostFunction, Knock};
use crate::progress::ProgressSink;

/// Routes one execution's calls to the door.
#[derive(Debug, Clone)]
pub struct ExecutionBridge {
    door: Arc<Door>,
    /// The caller's view the execution was given: the tools its bindings name.
    catalog: Arc<Catalog>,
    knock: Arc<Knock>,
    /// The longest any single call may take (the execution's own deadline still applies).
    call_limit: Option<Duration>,
    /// Where a detached execution shows its logs and calls so far.
    detached: Option<Arc<crate::detached::Detached>>,
}

impl ExecutionBridge {
    /// A bridge for one execution of `knock`'s caller, whose tools are those of `catalog`
    /// (the view its bindings were made from), called through `door`.
    pub fn new(
        door: Arc<Door>,
        catalog: Arc<Catalog>,
        knock: Knock,
        call_limit: Option<Duration>,
    ) -> Self {
        ExecutionBridge {
            door,
            catalog,
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
        let tool_ref = ToolRef::new(&tool.backend, &tool.name);
        let qualified = tool_ref.to_string();
        let (door, catalog) = (self.door.clone(), self.catalog.clone());
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
            let result = match catalog.entry(&tool_ref) {
                Some(entry) => door.call_tool(&knock, entry, args, limit).await,
                None => Err(CallFailure::new(
                    FailureKind::Failed,
                    format!("`{qualified}` is not in this execution's tools"),
                )),
            };
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
        let (door, knock) = (self.door.clone(), self.knock.clone());
        let function = HostFunction::named(name);
        let name = name.to_string();
        Box::pin(async move {
            match function {
                Some(function) => door.use_host(&knock, function, args).await,
                None => Err(CallFailure::new(
                    FailureKind::Denied,
                    format!("`{name}` is not a capability of this execution"),
                )),
            }
        })
    }
}
