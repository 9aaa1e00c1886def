//! Start-up plumbing shared by the commands: finding and loading the config, resolving
//! `${VAR}`s, choosing the tool cache path, and starting the backends.

use std::hash::{Hash, Hasher};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use sandgate_config::{Config, RecordWrites, StoreBackend};
use sandgate_gateway::pins::PinGuard;
use sandgate_gateway::{ChainRuntime, Gateway};
use sandgate_sandbox::{Limits, PoolConfig, Sandbox};
use sandgate_store::{Retention, Store, StoreHandle};
use sandgate_upstream::{BackendManager, BackendState, ManagerCalls, ManagerOptions, ToolCache};

/// Config files looked for, in order, when `--config` is not given.
const DEFAULT_CONFIGS: &[&str] = &["sandgate.toml", ".mcp.json"];

/// The hidden first argument that turns this binary into a sandbox worker process.
pub const WORKER_ARG: &str = "__sandbox-worker";

/// Sends logs to stderr at `log_level` (`--log-level`; by default `info` while serving, else
/// `warn`). `RUST_LOG` overrides it.
pub fn init_logging(log_level: Option<&str>, serving: bool) {
    let default = if serving { "info,rmcp=warn" } else { "warn" };
    let level = log_level.unwrap_or(default);
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(RedactedStderr)
        .with_ansi(std::io::stderr().is_terminal())
        .finish();
    let _ = tracing_subscriber::util::SubscriberInitExt::try_init(
        tracing_subscriber::layer::SubscriberExt::with(subscriber, QuietDisconnects),
    );
}

/// Standard error through the one redaction step: a log line may quote another party's words
/// (rmcp logs a backend's `WWW-Authenticate` challenge, which may quote the credential it was
/// sent), so every line is masked as it is written.
struct RedactedStderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RedactedStderr {
    type Writer = RedactedLine;

    fn make_writer(&'a self) -> RedactedLine {
        RedactedLine(Vec::new())
    }
}

/// One log line, collected and written to standard error, masked, when it is dropped (the
/// formatter writes a line and drops its writer).
struct RedactedLine(Vec<u8>);

impl std::io::Write for RedactedLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactedLine {
    fn drop(&mut self) {
        let line = String::from_utf8_lossy(&self.0);
        let _ = std::io::Write::write_all(
            &mut std::io::stderr().lock(),
            sandgate_redact::redact(&line).as_bytes(),
        );
    }
}

/// Drops rmcp's error "failed to send pending response during drain" (and its sibling): it
/// means an HTTP client went away before its response, which is ordinary; the gateway logs
/// that at debug level itself. Hundreds of such ERROR lines used to follow a load test.
/// Drops rmcp's warning "Error sending response" too: a backend answered a request whose
/// caller had gone (a call cancelled or timed out, or a command such as `check` exiting while
/// a tool list was being fetched again); sandgate reports the cancel or timeout itself.
struct QuietDisconnects;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for QuietDisconnects {
    fn event_enabled(
        &self,
        event: &tracing::Event<'_>,
        _cx: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        if !event.metadata().target().starts_with("rmcp") {
            return true;
        }
        let mut message = MessageText(String::new());
        event.record(&mut message);
        !(message.0.ends_with("during drain") || message.0 == "Error sending response")
    }
}

/// The `message` field of an event.
struct MessageText(String);

impl tracing::field::Visit for MessageText {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

/// Finds, loads and resolves the config.
pub fn load_config(explicit: Option<&Path>) -> anyhow::Result<Config> {
    load_config_from(&config_path(explicit)?)
}

/// The config file to read: `explicit`, or the first of [`DEFAULT_CONFIGS`] here.
pub fn config_path(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    Ok(match explicit {
        Some(path) => path.to_path_buf(),
        None => match DEFAULT_CONFIGS
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
        {
            Some(found) => found,
            None => bail!(
                "no config given and none of {} exists here. Pass --config FILE (a sandgate.toml or an mcpServers JSON such as claude_desktop_config.json); examples/sandgate.toml is annotated.",
                DEFAULT_CONFIGS.join(", ")
            ),
        },
    })
}

/// Loads and resolves the config at `path`.
pub fn load_config_from(path: &Path) -> anyhow::Result<Config> {
    let config = sandgate_config::load_file(path)?;
    let mut config = config.resolved(&|name| std::env::var(name).ok())?;
    crate::access::remember_secrets(&config);
    crate::selfguard::skip_own_entries(&mut config);
    for backend in &config.backends {
        if let Some(why) = &backend.skipped {
            tracing::warn!(backend = %backend.name, "skipped: {why}");
        }
    }
    Ok(config)
}

/// The tool cache: the config's `cache_file`, or one per config file under the user cache dir.
pub fn cache_for(config: &Config) -> Option<ToolCache> {
    if let Some(path) = &config.cache_file {
        return Some(ToolCache::new(path));
    }
    per_config_file(config, "XDG_CACHE_HOME", ".cache", "tools", "json").map(ToolCache::new)
}

/// The store's file: `[store] path`, or one per config file under the user state dir.
pub fn store_path(config: &Config) -> Option<PathBuf> {
    if let Some(path) = &config.store.path {
        return Some(path.clone());
    }
    per_config_file(config, "XDG_STATE_HOME", ".local/state", "store", "db")
}

/// `$XDG_…/sandgate/{stem}-{hash of the config path}.{ext}`, so two configs never share a file.
pub fn per_config_file(
    config: &Config,
    xdg_var: &str,
    home_fallback: &str,
    stem: &str,
    ext: &str,
) -> Option<PathBuf> {
    let base = std::env::var_os(xdg_var)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(home_fallback)))?;
    let source = config
        .source
        .as_ref()
        .and_then(|p| p.canonicalize().ok())
        .unwrap_or_default();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    source.hash(&mut hasher);
    Some(
        base.join("sandgate")
            .join(format!("{stem}-{:016x}.{ext}", hasher.finish())),
    )
}

/// How long `config` keeps things.
fn retention(config: &Config) -> Retention {
    Retention {
        outputs: Duration::from_secs(config.store.output_retention_hours.saturating_mul(3600)),
        max_records: config.store.max_records,
    }
}

/// The store of `config`, on its engine: the SQLite file on its own thread, or PostgreSQL
/// (connected and migrated).
pub async fn store_handle(config: &Config) -> anyhow::Result<StoreHandle> {
    let waits = config.store.records == RecordWrites::BeforeResponse;
    Ok(engine_handle(config)
        .await?
        .with_records_before_response(waits))
}

/// The store of `config`, on its engine.
async fn engine_handle(config: &Config) -> anyhow::Result<StoreHandle> {
    match config.store.backend {
        StoreBackend::Sqlite => Ok(StoreHandle::spawn(open_store(config)?)?),
        StoreBackend::Postgres => {
            let url = config
                .store
                .url
                .as_ref()
                .context("[store] backend = \"postgres\" needs url")?;
            Ok(StoreHandle::postgres(
                url.expose(),
                config.store.ca_file.as_deref(),
                retention(config),
            )
            .await?)
        }
    }
}

/// Says so when approvals are configured but an execution may not run as long as a question
/// may wait: a person then has only the execution's time to answer.
fn warn_of_short_approvals(config: &Config) {
    let asks = config.profiles.iter().any(|p| !p.approve.is_empty())
        || config.backends.iter().any(|b| !b.approve.is_empty());
    let longest = config
        .sandbox
        .timeout
        .unwrap_or(Limits::default().wall_time());
    if asks && longest < config.approvals.timeout {
        tracing::warn!(
            "approvals are configured, but an execution may run only {} s ([sandbox] timeout) while a question may wait {} s ([approvals] timeout): a person has only the execution's time to answer; raise [sandbox] timeout",
            longest.as_secs_f64(),
            config.approvals.timeout.as_secs()
        );
    }
}

/// Opens the SQLite store for `config`.
fn open_store(config: &Config) -> anyhow::Result<Store> {
    let retention = retention(config);
    match store_path(config) {
        Some(path) => Ok(Store::open(&path, retention)?),
        None => {
            tracing::warn!(
                "no HOME or XDG_STATE_HOME and no [store] path: execution records and full outputs are kept in memory only"
            );
            Ok(Store::open_in_memory(retention)?)
        }
    }
}

/// Starts the sandbox and the store: what `call_tool_chain` and stored tools run on.
pub async fn chain_runtime(config: &Config, store: StoreHandle) -> anyhow::Result<ChainRuntime> {
    warn_of_short_approvals(config);
    let sandbox = start_sandbox(config).await?;
    Ok(ChainRuntime {
        sandbox,
        store: Some(store),
        output: config.output,
        // Each execution's argument bound follows the backends (see
        // `ChainRuntime::execution_limits`).
        limits: Limits {
            max_recorded_argument_bytes: recorded_argument_bytes(config),
            wall_ms: config
                .sandbox
                .timeout
                .map_or(Limits::default().wall_ms, |t| {
                    u64::try_from(t.as_millis()).unwrap_or(u64::MAX)
                }),
            ..Limits::default()
        },
        default_engine: config.sandbox.engine,
    })
}

/// The gateway of `config` over started backends (`calls` is their calls half, which only
/// the gateway's door keeps) and `runtime`. It keeps its stored tools in step with the store.
pub async fn build_gateway(
    config: &Config,
    manager: Arc<BackendManager>,
    calls: ManagerCalls,
    runtime: ChainRuntime,
    base: &Base,
) -> anyhow::Result<Arc<Gateway>> {
    let stored = vault(config)?.zip(runtime.store.clone());
    let exchanger = crate::access::token_exchanger(config)?;
    let credentials = (stored.is_some() || exchanger.is_some())
        .then(|| sandgate_gateway::credentials::Credentials::new(stored, exchanger));
    let credentials = match credentials {
        Some(credentials) => Some(credentials.with_sign_ins(crate::access::sign_ins(config)?)),
        None => None,
    };
    let mut builder = Gateway::builder(manager, Box::new(calls));
    if let Some(credentials) = credentials {
        builder = builder.credentials(credentials);
    }
    Ok(builder
        .profiles(config.access_profiles())
        .audit(base.audit.clone())
        .pins(base.guard.clone())
        .chain(runtime)
        .startup_wait(config.startup_wait)
        .expose_stored_tools(config.stored_tools.expose_as_mcp_tools)
        .rate_limit_fallback(config.store.rate_limit_when_unreachable)
        .approvals(config.approvals)
        .build()
        .await)
}

/// The vault that seals users' secrets, when `[credentials]` names a key: from the
/// environment (already resolved into the config) or from `key_file`.
pub fn vault(config: &Config) -> anyhow::Result<Option<Arc<sandgate_identity::Vault>>> {
    let credentials = &config.credentials;
    let text = match (&credentials.key, &credentials.key_file) {
        (Some(key), _) => key.expose().to_string(),
        (None, Some(path)) => std::fs::read_to_string(path).with_context(|| {
            format!(
                "reading [credentials] key_file {}: make it with `openssl rand -base64 32 > {}` and chmod 600",
                path.display(),
                path.display()
            )
        })?,
        (None, None) => return Ok(None),
    };
    Ok(Some(Arc::new(sandgate_identity::Vault::from_key_text(
        &text,
    )?)))
}

/// How many bytes of its calls' arguments an execution's record keeps: none unless
/// `[store] record_arguments` is on.
pub fn recorded_argument_bytes(config: &Config) -> usize {
    const PER_EXECUTION: usize = 1024 * 1024;
    if config.store.record_arguments {
        PER_EXECUTION
    } else {
        0
    }
}

/// What every command that starts backends opens first: the store, the audit log, and the
/// supply-chain guard every listing passes (so no command shows or caches a definition the
/// guard holds).
pub struct Base {
    /// The store of `config`.
    pub store: StoreHandle,
    /// The audit log of `config`.
    pub audit: sandgate_gateway::AuditLog,
    /// The guard of backends' tool definitions, keeping its pins in `store`.
    pub guard: Arc<PinGuard>,
}

/// Opens the [`Base`] of `config`.
pub async fn open_base(config: &Config) -> anyhow::Result<Base> {
    let store = store_handle(config).await?;
    let audit = crate::access::audit_log(config)?;
    let guard = PinGuard::new(Some(store.clone()), audit.clone());
    Ok(Base {
        store,
        audit,
        guard,
    })
}

/// Starts every backend. Children inherit only `PATH` and `HOME` from sandgate. Returns the
/// manager and its calls half (for the gateway's door; a command that calls no tool drops it).
pub fn start_backends(config: &Config, base: &Base) -> (Arc<BackendManager>, ManagerCalls) {
    let inherited_env = sandgate_upstream::INHERITED_ENV
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    BackendManager::start(
        config,
        ManagerOptions {
            inherited_env,
            cache: cache_for(config),
            restart: Default::default(),
            guard: Some(base.guard.clone() as Arc<dyn sandgate_upstream::ListingGuard>),
        },
    )
}

/// Starts the sandbox: a pool of workers that are this very binary, re-executed with
/// [`WORKER_ARG`], so no second executable has to be installed.
pub async fn start_sandbox(config: &Config) -> anyhow::Result<Sandbox> {
    let program = std::env::current_exe()
        .context("cannot find the sandgate executable to start sandbox workers")?;
    let mut pool = PoolConfig::new(program);
    pool.args = vec![WORKER_ARG.to_string()];
    if let Some(workers) = config.sandbox.workers {
        pool.workers = workers;
        pool.max_workers = workers * 4;
    }
    if let Some(max_workers) = config.sandbox.max_workers {
        pool.max_workers = max_workers;
    }
    if let Some(max_executions) = config.sandbox.max_executions {
        pool.max_executions = max_executions;
    }
    pool.require_lockdown = config.sandbox.require_lockdown;
    let mut v8 = pool.clone();
    let mut python = pool.clone();
    // The gateway's own list of meta-tools: hints name them when code reaches for one.
    let mut sandbox = Sandbox::start(pool)
        .await?
        .with_outside_tools(sandgate_gateway::META_TOOLS.iter().copied());
    if config.sandbox.python {
        // One warm Python worker: a waiting Python run holds no interpreter, so one worker
        // carries many; more start while every one computes.
        python.args.push(sandgate_sandbox::PYTHON_ARG.to_string());
        python.workers = config.sandbox.workers.unwrap_or(1).min(python.workers);
        python.max_workers = python.max_workers.max(python.workers);
        sandbox = sandbox.with_python(python).await.context(
            "cannot start the Python engine (set [sandbox] python = false to run without it)",
        )?;
    }
    if !uses_v8(config) {
        return Ok(sandbox);
    }
    let deno = deno_path(config)?;
    v8.args.extend([
        sandgate_sandbox::V8_ARG.to_string(),
        deno.display().to_string(),
    ]);
    v8.kill_grace = sandgate_sandbox::V8_KILL_GRACE;
    sandbox.with_v8(v8).await.with_context(|| {
        format!(
            "cannot start the V8 engine with {}: check that it is Deno 2 (`{} --version`)",
            deno.display(),
            deno.display()
        )
    })
}

/// Whether any execution may run on V8: the sandbox's default, or a profile's engine.
pub fn uses_v8(config: &Config) -> bool {
    use sandgate_policy::{Engine, EngineGrant};
    config.sandbox.engine == Engine::V8
        || config.access_profiles().iter().any(|p| {
            matches!(
                p.engine,
                EngineGrant::Only(Engine::V8) | EngineGrant::Either
            )
        })
}

/// The `deno` the V8 engine runs: `[sandbox] deno` (a bare name is looked up on `PATH`), else
/// `deno` on `PATH`.
pub fn deno_path(config: &Config) -> anyhow::Result<std::path::PathBuf> {
    let named = config
        .sandbox
        .deno
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("deno"));
    if named.components().count() > 1 {
        return Ok(named);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(&named))
        .find(|candidate| candidate.is_file())
        .with_context(|| {
            format!(
                "the V8 engine needs Deno, and there is no `{}` on PATH: install it (`npm install deno`, or https://deno.com), or set [sandbox] deno to its path",
                named.display()
            )
        })
}

/// Waits for the first connection attempt of every backend, showing progress on a TTY.
pub async fn wait_for_backends(config: &Config, manager: &BackendManager) -> anyhow::Result<()> {
    let longest = config
        .backends
        .iter()
        .filter(|b| b.enabled)
        .map(|b| b.handshake_timeout)
        .max()
        .unwrap_or_default();
    let max = longest + Duration::from_secs(2);
    let tty = std::io::stderr().is_terminal();
    let total = config.backends.iter().filter(|b| b.enabled).count();
    let waiting = manager.wait_settled(max);
    tokio::pin!(waiting);
    let mut ticker = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = &mut waiting => break,
            _ = ticker.tick(), if tty => {
                let ready = manager.statuses().iter().filter(|s| s.state == BackendState::Ready).count();
                eprint!("\rconnecting to {total} backend(s)… {ready} ready");
            }
        }
    }
    if tty {
        eprint!("\r\x1b[2K");
    }
    Ok(())
}

/// Context for errors about a config file.
pub fn describe(config: &Config) -> String {
    config
        .source
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "<config>".into())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::QuietDisconnects;

    /// Collects the messages of the events that get through.
    struct Seen(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Seen {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            let mut message = super::MessageText(String::new());
            event.record(&mut message);
            if let Ok(mut seen) = self.0.lock() {
                seen.push(message.0);
            }
        }
    }

    #[test]
    fn rmcp_noise_about_callers_that_went_away_is_dropped_and_the_rest_kept() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry()
            .with(QuietDisconnects)
            .with(Seen(seen.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: "rmcp::service", id = 7, "Error sending response");
            tracing::error!(target: "rmcp::transport", "failed to send pending response during drain");
            tracing::warn!(target: "rmcp::service", "Received unexpected message");
            tracing::warn!(target: "sandgate_upstream", "Error sending response");
        });
        let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(
            seen,
            ["Received unexpected message", "Error sending response"]
        );
    }
}
