//! A gateway over fake backends, built as the binary builds one: the door keeps the fakes'
//! calls half, a real sandbox (this test binary as its worker), an in-memory store, an audit
//! log in a temporary file.

use std::sync::Arc;

use libtest_mimic::Failed;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ProgressNotificationParam, ProgressToken,
    RequestMetaObject,
};
use sandgate_gateway::{
    AuditLog, Caller, Cancellation, ChainArgs, ChainRuntime, Gateway, Owner, Principal,
    SandgateServer, call_tool_chain,
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
        principal: Principal::Local,
        name: None,
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

/// Calls `call_tool_chain` with `code` from an MCP client connected in process, with a
/// progress token; returns the progress notifications the server wrote, in the order they
/// went over the wire. (They are read off the wire because rmcp's client hands each
/// notification to its handler in a task of its own, so a handler may hear them out of
/// order.)
pub async fn call_with_progress(
    gateway: &Arc<Gateway>,
    code: &str,
) -> Result<Vec<ProgressNotificationParam>, Failed> {
    let (server_io, server_end) = tokio::io::duplex(64 * 1024);
    let (client_io, client_end) = tokio::io::duplex(64 * 1024);
    let server = SandgateServer::new(gateway.clone());
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let wire = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let (from_server, to_server) = tokio::io::split(server_end);
    let (from_client, to_client) = tokio::io::split(client_end);
    tokio::spawn(copy(from_client, to_server, None));
    tokio::spawn(copy(from_server, to_client, Some(wire.clone())));
    let client = ().serve(client_io).await.map_err(|e| e.to_string())?;
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
    let _ = client.cancel().await;
    let wire = wire.lock().map(|w| w.clone()).unwrap_or_default();
    Ok(String::from_utf8_lossy(&wire)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["method"] == "notifications/progress")
        .filter_map(|message| serde_json::from_value(message["params"].clone()).ok())
        .collect())
}

/// Copies bytes from `from` to `to`, keeping a copy in `kept` when given.
async fn copy(
    mut from: impl tokio::io::AsyncRead + Unpin,
    mut to: impl tokio::io::AsyncWrite + Unpin,
    kept: Option<Arc<std::sync::Mutex<Vec<u8>>>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = vec![0u8; 16 * 1024];
    while let Ok(read) = from.read(&mut buffer).await {
        let Some(bytes) = buffer.get(..read).filter(|b| !b.is_empty()) else {
            break;
        };
        if let Some(kept) = &kept
            && let Ok(mut kept) = kept.lock()
        {
            kept.extend_from_slice(bytes);
        }
        if to.write_all(bytes).await.is_err() {
            break;
        }
    }
}
