//! Helpers shared by the upstream integration tests: a manager over the fake backend in
//! tests/fixtures/fake_backend.py, and calls through the real grant.

#![allow(dead_code, clippy::expect_used, clippy::disallowed_methods)] // each test file uses some; broken fixtures panic; backends inherit PATH and HOME

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::CallToolResult;
use sandgate_config::{Format, parse_str};
use sandgate_policy::{Access, Profile, ToolCall};
use sandgate_upstream::{
    BackendCalls, BackendManager, ManagerCalls, ManagerOptions, RestartPolicy, ToolCache,
    UpstreamError,
};

pub fn fixture() -> String {
    format!(
        "{}/../../tests/fixtures/fake_backend.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

pub fn inherited_env() -> Vec<(String, String)> {
    sandgate_upstream::INHERITED_ENV
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect()
}

pub fn fast_restarts() -> RestartPolicy {
    RestartPolicy {
        base_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(200),
        budget: 5,
        window: Duration::from_secs(60),
        stable_after: Duration::from_secs(60),
    }
}

/// Starts a manager whose backends are the fake backend in the given modes, with extra TOML
/// per backend.
pub fn start(backends: &[(&str, &str, &str)]) -> Started {
    start_with(backends, None)
}

pub fn start_with(backends: &[(&str, &str, &str)], cache: Option<ToolCache>) -> Started {
    let mut toml = String::new();
    for (name, mode, extra) in backends {
        toml.push_str(&format!(
            "[servers.{name}]\ncommand = \"python3\"\nargs = [\"{}\", \"{mode}\"]\n{extra}\n",
            fixture()
        ));
    }
    let config = parse_str(&toml, Format::Toml, "test.toml").expect("test config");
    let (manager, calls) = BackendManager::start(
        &config,
        ManagerOptions {
            inherited_env: inherited_env(),
            cache,
            restart: fast_restarts(),
            guard: None,
        },
    );
    Started { manager, calls }
}

/// A started manager and its calls half; reads as the manager.
pub struct Started {
    pub manager: Arc<BackendManager>,
    pub calls: ManagerCalls,
}

impl std::ops::Deref for Started {
    type Target = BackendManager;
    fn deref(&self) -> &BackendManager {
        &self.manager
    }
}

pub async fn call(
    m: &Started,
    backend: &str,
    tool: &str,
    args: serde_json::Value,
) -> Result<CallToolResult, UpstreamError> {
    let authorized = Access::new(std::sync::Arc::new(Profile::implicit_default("test")))
        .authorize_tool(ToolCall::new(backend, tool))
        .expect("grant");
    m.calls
        .call(&authorized, args.as_object().cloned(), Default::default())
        .await
}

pub fn text(result: &CallToolResult) -> String {
    let value = serde_json::to_value(result).expect("serializable");
    match value["content"][0]["text"].as_str() {
        Some(text) => text.to_string(),
        None => panic!("expected one text item, got {value}"),
    }
}
