//! A gateway over fake backends, built as the binary builds one: the door keeps the fakes'
//! calls half, a real sandbox (this test binary as its worker), an in-memory store, an audit
//! log in a temporary file.

use std::sync::Arc;

use libtest_mimic::Failed;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ProgressNotificationParam, ProgressToken,
    RequestMetaObject,
};
use rmcp::service::{NotificationContext, RoleClient};
use rmcp::{ClientHandler, ServiceExt};
use sandgate_gateway::{
    AuditLog, Caller, Cancellation, ChainArgs, ChainRuntime, Gateway, Owner, SandgateServer,
    call_tool_chain,
};
use sandgate_policy::Access;
use sandgate_sandbox::{Limits, PoolConfig, Sandbox};
use sandgate_store::{Retention, Store, StoreHandle};
use serde_json::Value;

use super::fake::{FakeBackends, Fakes};

/// The hidden first argument that makes this binary a sandbox worker.
pub const WORKER_ARG: &str = "__sandbox-worker";

/// A gateway and what a test looks at beside it.
pub struct Built {
    pub gateway: Arc<Gateway>,
    pub fakes: Arc<FakeBackends>,
    pub store: StoreHandle,
    pub audit: Audit,
}

/// The audit log's file.
pub struct Audit {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl Audit {
    /// Every line written so far (the log writes on its own thread: give it a moment).
    pub async fn lines(&self) -> Vec<Value> {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// A gateway over `fakes`, with the profiles `profiles` (TOML) declares besides `default`.
pub async fn build(fakes: Fakes, profiles: &str) -> Built {
    let config = sandgate_config::parse_str(profiles, sandgate_config::Format::Toml, "test.toml")
        .expect("the test's profiles");
    let (backends, calls) = fakes.start();
    let mut pool = PoolConfig::new(std::env::current_exe().expect("the test binary"));
    pool.args = vec![WORKER_ARG.into()];
    pool.workers = 1;
    let sandbox = Sandbox::start(pool).await.expect("the sandbox starts");
    let store = StoreHandle::spawn(Store::open_in_memory(Retention::default()).expect("store"))
        .expect("store thread");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("audit.jsonl");
    let gateway = Gateway::builder(backends.clone(), Box::new(calls))
        .profiles(config.access_profiles())
        .audit(AuditLog::open(&path, false).expect("audit log"))
        .chain(ChainRuntime {
            sandbox,
            store: Some(store.clone()),
            output: Default::default(),
            limits: Limits::default(),
            default_engine: Default::default(),
        })
        .build()
        .await;
    Built {
        gateway,
        fakes: backends,
        store,
        audit: Audit { _dir: dir, path },
    }
}

/// The local caller under `profile`.
pub fn caller(gateway: &Gateway, profile: &str) -> Caller {
    Caller {
        owner: Owner::Local,
        access: Access::new(gateway.profile(profile)),
        token_id: None,
        user: None,
        grant: None,
        trace: opentelemetry::Context::new(),
        reach: Default::default(),
    }
}

/// One `call_tool_chain`.
pub async fn run(gateway: &Arc<Gateway>, caller: &Caller, args: ChainArgs) -> CallToolResult {
    call_tool_chain(gateway, caller, args, None, &Cancellation::default()).await
}

/// A response's `structuredContent`.
pub fn structured(result: &CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or_default()
}

/// Registers stored tool `name` as the default profile, and lists it.
pub async fn register(gateway: &Arc<Gateway>, name: &str, code: &str) {
    let access = Access::new(gateway.profile("default"));
    let registration = sandgate_gateway::stored::check(name, code, &access, &gateway.catalog())
        .expect("a valid stored tool");
    let store = gateway.chain_store().expect("a store");
    store
        .put_tool(
            &registration.name,
            &registration.code,
            &registration.meta_json,
            "default",
        )
        .await
        .expect("registered");
    let tools = store.tools().await.expect("stored tools");
    gateway
        .install_stored_tools(sandgate_gateway::stored::load(tools))
        .await;
}

/// Hears progress notifications.
#[derive(Clone)]
struct Listener(tokio::sync::mpsc::UnboundedSender<ProgressNotificationParam>);

impl ClientHandler for Listener {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(params);
    }
}

/// Calls `call_tool_chain` with `code` from an MCP client connected in process, with a
/// progress token; returns the progress notifications it heard, in order.
pub async fn call_with_progress(
    gateway: &Arc<Gateway>,
    code: &str,
) -> Result<Vec<ProgressNotificationParam>, Failed> {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = SandgateServer::new(gateway.clone());
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let client = Listener(tx)
        .serve(client_io)
        .await
        .map_err(|e| e.to_string())?;
    let mut arguments = serde_json::Map::new();
    arguments.insert("code".into(), Value::String(code.into()));
    let mut params = CallToolRequestParams::new("call_tool_chain").with_arguments(arguments);
    params.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        rmcp::model::NumberOrString::Number(7),
    )));
    let result = client
        .peer()
        .call_tool(params)
        .await
        .map_err(|e| e.to_string())?;
    if result.is_error == Some(true) {
        return Err(format!("call_tool_chain failed: {result:?}").into());
    }
    // Notifications sent before the answer are delivered before it; collect what came.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let mut heard = Vec::new();
    while let Ok(progress) = rx.try_recv() {
        heard.push(progress);
    }
    let _ = client.cancel().await;
    Ok(heard)
}
