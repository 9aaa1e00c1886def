//! Backends that run in the test, behind the same two traits the real manager implements
//! (`Backends` to read them, `BackendCalls` to call them). Each tool is a Rust closure; every
//! call that reaches one is written down, so a test can say what got past the door.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, JsonObject};
use sandgate_catalog::ToolSpec;
use sandgate_policy::{Authorized, ToolCall};
use sandgate_upstream::{
    BackendCalls, BackendState, BackendStatus, Backends, CallContext, UpstreamError, UpstreamEvent,
};
use serde_json::{Value, json};
use tokio::sync::broadcast;

/// What a fake tool does with its arguments.
pub type Behaviour = Arc<
    dyn Fn(JsonObject, CallContext) -> BoxFuture<'static, Result<CallToolResult, UpstreamError>>
        + Send
        + Sync,
>;

/// One call that reached a fake backend.
#[derive(Debug, Clone, PartialEq)]
pub struct Reached {
    pub backend: String,
    pub tool: String,
    pub arguments: Value,
}

struct Tool {
    spec: ToolSpec,
    behaviour: Behaviour,
}

#[derive(Default)]
struct State {
    tools: BTreeMap<(String, String), Tool>,
    reached: Mutex<Vec<Reached>>,
}

/// The read half.
pub struct FakeBackends {
    state: Arc<State>,
    events: broadcast::Sender<UpstreamEvent>,
}

/// The calls half.
pub struct FakeCalls {
    state: Arc<State>,
}

impl std::fmt::Debug for FakeBackends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FakeBackends")
    }
}

impl std::fmt::Debug for FakeCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FakeCalls")
    }
}

/// Builds fake backends tool by tool.
#[derive(Default)]
pub struct Fakes {
    state: State,
}

impl Fakes {
    /// Adds `backend.tool`, answering with `behaviour`; `read_only` sets `readOnlyHint`.
    pub fn tool(
        mut self,
        backend: &str,
        tool: &str,
        read_only: Option<bool>,
        behaviour: Behaviour,
    ) -> Self {
        let spec = ToolSpec {
            backend: backend.into(),
            name: tool.into(),
            description: Some(format!("the fake {tool}")),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: read_only.map(|r| json!({"readOnlyHint": r})),
            origin: Default::default(),
        };
        self.state
            .tools
            .insert((backend.into(), tool.into()), Tool { spec, behaviour });
        self
    }

    /// Both halves.
    pub fn start(self) -> (Arc<FakeBackends>, FakeCalls) {
        let state = Arc::new(self.state);
        let read = Arc::new(FakeBackends {
            state: state.clone(),
            events: broadcast::channel(16).0,
        });
        (read, FakeCalls { state })
    }
}

impl FakeBackends {
    /// Every call that reached a backend, in order.
    pub fn reached(&self) -> Vec<Reached> {
        self.state
            .reached
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }
}

/// A tool that answers with `text` (and the same as `structuredContent` when it is JSON).
pub fn answers(text: impl Into<String>) -> Behaviour {
    let text = text.into();
    Arc::new(move |_, _| {
        let text = text.clone();
        Box::pin(async move {
            let mut result = CallToolResult::success(vec![rmcp::model::ContentBlock::text(&text)]);
            result.structured_content = serde_json::from_str::<Value>(&text)
                .ok()
                .filter(Value::is_object);
            Ok(result)
        })
    })
}

/// A tool that answers with its arguments, as JSON text.
pub fn echoes() -> Behaviour {
    Arc::new(|arguments, _| {
        Box::pin(async move {
            Ok(CallToolResult::success(vec![
                rmcp::model::ContentBlock::text(Value::Object(arguments).to_string()),
            ]))
        })
    })
}

impl Backends for FakeBackends {
    fn subscribe(&self) -> broadcast::Receiver<UpstreamEvent> {
        self.events.subscribe()
    }

    fn generation(&self) -> u64 {
        0
    }

    fn tools_changed_since(&self, _since: u64, _needed: &dyn Fn(&str) -> bool) -> bool {
        false
    }

    fn tools(&self) -> Vec<ToolSpec> {
        self.state.tools.values().map(|t| t.spec.clone()).collect()
    }

    fn statuses(&self) -> Vec<BackendStatus> {
        let mut by_backend: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (backend, tool) in self.state.tools.keys() {
            by_backend.entry(backend).or_default().push(tool.clone());
        }
        by_backend
            .into_iter()
            .map(|(name, tools)| BackendStatus {
                name: name.to_string(),
                transport: "fake",
                state: BackendState::Ready,
                tools,
                tools_from_cache: false,
                restarts: 0,
                last_error: None,
                protocol_version: None,
                tool_problems: Vec::new(),
                retry_in_ms: None,
                pin: "first_use",
                held: Vec::new(),
            })
            .collect()
    }

    fn cold_backends(&self) -> Vec<String> {
        Vec::new()
    }

    fn stderr_tail(&self, _backend: &str) -> Vec<String> {
        Vec::new()
    }

    fn wait_settled_for<'a>(&'a self, _names: &'a [String], _max: Duration) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn max_argument_bytes(&self, backend: &str) -> Option<usize> {
        self.state
            .tools
            .keys()
            .any(|(b, _)| b == backend)
            .then_some(sandgate_config::DEFAULT_MAX_ARGUMENT_BYTES)
    }

    fn largest_argument_bytes(&self) -> usize {
        sandgate_config::DEFAULT_MAX_ARGUMENT_BYTES
    }

    fn stop(&self, _within: Duration) -> BoxFuture<'_, bool> {
        Box::pin(async { true })
    }
}

impl BackendCalls for FakeCalls {
    fn call<'a>(
        &'a self,
        call: &'a Authorized<ToolCall>,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> BoxFuture<'a, Result<CallToolResult, UpstreamError>> {
        let ToolCall { backend, tool, .. } = call.get();
        let arguments = arguments.unwrap_or_default();
        if let Ok(mut reached) = self.state.reached.lock() {
            reached.push(Reached {
                backend: backend.clone(),
                tool: tool.clone(),
                arguments: Value::Object(arguments.clone()),
            });
        }
        match self.state.tools.get(&(backend.clone(), tool.clone())) {
            Some(found) => (found.behaviour)(arguments, context),
            None => Box::pin(async move {
                Err(UpstreamError::UnknownBackend {
                    backend: backend.clone(),
                    known: String::new(),
                })
            }),
        }
    }
}
