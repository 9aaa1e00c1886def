//! The typed configuration that the rest of sandgate consumes. Every field has been checked by
//! the parser, so consumers can trust it without re-validating.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use sandgate_output::OutputConfig;
use sandgate_policy::Profile;

use crate::access::{AuditConfig, HttpAuth, HttpToken, TokenSecret};
use crate::error::ConfigError;
use crate::interpolate;
use crate::secret::Secret;

/// Default per-call timeout for a backend tool call.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time a backend has to finish the MCP handshake.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default cap on concurrent in-flight calls to one backend. The npm reference servers answer
/// 1,000 calls at once (1,000 one-second calls in 1.22 s, see docs/BENCHMARKS.md), so the cap
/// is there against a runaway, not to pace ordinary use: 1,000 scripts that each wait on one
/// call to the same backend never queue behind it.
pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 1024;
/// Default size of one call's arguments (JSON bytes) sent to a backend. Many servers refuse
/// messages over 10 MiB by exiting, which would take the backend down for every client.
pub const DEFAULT_MAX_ARGUMENT_BYTES: usize = 4 * 1024 * 1024;
/// The largest `max_argument_bytes` a backend may be given: a backend's whole message limit.
pub const MAX_ARGUMENT_BYTES_CEILING: usize = 64 * 1024 * 1024;

/// What one backend may send before sandgate refuses it: every message, list and tool from a
/// backend is untrusted input, bounded here. Each bound has a default and a config key of the
/// same name (docs/config.md); past a bound the message, tool or list is refused with a reason
/// that `sandgate status` shows, never buffered without limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendBounds {
    /// Largest message (one result, one page of a list) read from the backend, in bytes.
    pub max_result_bytes: usize,
    /// Most tools kept from one backend.
    pub max_tools: usize,
    /// Most pages one `tools/list` may take.
    pub max_list_pages: usize,
    /// Most bytes one whole `tools/list` (all pages) may take.
    pub max_list_bytes: usize,
    /// Longest description kept, in characters; longer ones are cut with "…".
    pub max_description_chars: usize,
    /// Largest input or output schema kept, in JSON bytes; a larger one becomes `unknown`.
    pub max_schema_bytes: usize,
    /// Deepest input or output schema kept, in JSON levels; a deeper one becomes `unknown`.
    pub max_schema_depth: usize,
}

/// Longest tool name accepted from a backend, in bytes (MCP asks for at most 128 characters).
pub const MAX_TOOL_NAME_BYTES: usize = 256;

impl Default for BackendBounds {
    fn default() -> Self {
        BackendBounds {
            max_result_bytes: 16 * 1024 * 1024,
            max_tools: 20_000,
            max_list_pages: 1_000,
            max_list_bytes: 64 * 1024 * 1024,
            max_description_chars: 16 * 1024,
            max_schema_bytes: 256 * 1024,
            max_schema_depth: 32,
        }
    }
}

/// A whole, validated sandgate configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// The file this was loaded from, if any (used in messages and for the cache location).
    pub source: Option<PathBuf>,
    /// Backends in the order the file lists them.
    pub backends: Vec<BackendConfig>,
    /// The HTTP front.
    pub http: HttpConfig,
    /// Where the tool cache lives; `None` lets the binary choose a default.
    pub cache_file: Option<PathBuf>,
    /// How long a first answer (`tools/list`, search, the overview and declarations) waits for
    /// backends still on their first connection attempt with nothing cached (`[gateway]
    /// startup_wait`); `None` means the gateway's default (10 s).
    pub startup_wait: Option<Duration>,
    /// The code sandbox.
    pub sandbox: SandboxConfig,
    /// How large results are shaped for the model (`[output]`).
    pub output: OutputConfig,
    /// Where execution records and full outputs are kept (`[store]`).
    pub store: StoreConfig,
    /// The profiles as written (`[profiles.NAME]`); see [`Config::access_profiles`].
    pub profiles: Vec<Profile>,
    /// The audit log (`[audit]`).
    pub audit: AuditConfig,
    /// Stored tools (`[stored_tools]`).
    pub stored_tools: StoredToolsConfig,
    /// Where OpenTelemetry spans go (`[telemetry]`).
    pub telemetry: crate::telemetry::TelemetryConfig,
    /// Identity providers whose access tokens are accepted (`[auth]`).
    pub auth: crate::sections::auth::AuthConfig,
    /// Where users' own backend secrets are sealed (`[credentials]`).
    pub credentials: crate::sections::credentials::CredentialsConfig,
    /// How calls that need a person's approval wait (`[approvals]`).
    pub approvals: crate::sections::approvals::ApprovalsConfig,
    /// How backends' tool definitions are pinned when their entry does not say (`[gateway]
    /// pin`).
    pub pin: PinMode,
}

/// Settings of stored tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoredToolsConfig {
    /// Also list each stored tool a caller may reach as a plain MCP tool (`user.<name>`).
    pub expose_as_mcp_tools: bool,
}

/// Default time a full output stays readable after its execution.
pub const DEFAULT_OUTPUT_RETENTION_HOURS: u64 = 168;
/// Default number of execution records kept (the oldest go first).
pub const DEFAULT_MAX_RECORDS: u64 = 100_000;

/// Which engine keeps the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreBackend {
    /// The embedded SQLite file: one machine.
    #[default]
    Sqlite,
    /// PostgreSQL: several replicas share it.
    Postgres,
}

/// What a rate limit shared through the store does while the store cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateLimitFallback {
    /// Each replica counts alone meanwhile: never unlimited, at most the limit once per
    /// replica, and no refusal for a fault that is not the caller's.
    #[default]
    Local,
    /// Admit everything meanwhile.
    Open,
    /// Refuse what the limit covers meanwhile.
    Closed,
}

/// When an execution's record is written, against its response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecordWrites {
    /// Queued, and written with the others that queued up a few milliseconds after the
    /// response: off the request path, but a process killed in those milliseconds loses them.
    #[default]
    Batched,
    /// The response waits until its record is written (or its first attempt failed): an
    /// answered execution is on record even if the process is killed the moment after.
    BeforeResponse,
}

/// Settings of the store.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    /// The engine.
    pub backend: StoreBackend,
    /// The SQLite database file; `None` lets the binary choose one per config file.
    pub path: Option<PathBuf>,
    /// The PostgreSQL connection URL (`backend = "postgres"`), `${VAR}` resolved.
    pub url: Option<Secret>,
    /// A PEM file of the CA that signed the PostgreSQL server's certificate, when it is not
    /// one the system trusts.
    pub ca_file: Option<PathBuf>,
    /// What shared rate limits do while PostgreSQL cannot be reached.
    pub rate_limit_when_unreachable: RateLimitFallback,
    /// Hours a stored full output stays readable.
    pub output_retention_hours: u64,
    /// Execution records kept.
    pub max_records: u64,
    /// Whether each call's arguments are kept with its record (cut at 16 KiB a call and 1 MiB
    /// an execution); off by default, since arguments may hold what a user would not keep.
    pub record_arguments: bool,
    /// When a record is written, against its response.
    pub records: RecordWrites,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            backend: StoreBackend::Sqlite,
            path: None,
            url: None,
            ca_file: None,
            rate_limit_when_unreachable: RateLimitFallback::Local,
            output_retention_hours: DEFAULT_OUTPUT_RETENTION_HOURS,
            max_records: DEFAULT_MAX_RECORDS,
            record_arguments: false,
            records: RecordWrites::Batched,
        }
    }
}

/// Settings of the code sandbox.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxConfig {
    /// Whether the Python engine (Monty) runs, so `call_tool_chain` takes Python (`python`,
    /// on by default: one more worker process).
    pub python: bool,
    /// The engine executions run on unless their profile says otherwise (`quickjs`, `v8`).
    pub engine: sandgate_policy::Engine,
    /// The `deno` executable the V8 engine runs (`None`: found on `PATH` when V8 is used).
    pub deno: Option<std::path::PathBuf>,
    /// Refuse to start unless every worker protection (seccomp, Landlock, rlimits,
    /// `no_new_privs`, empty environment) is active on this host.
    pub require_lockdown: bool,
    /// Warm worker processes; `None` means one per CPU.
    pub workers: Option<usize>,
    /// Workers at most, counting the extra ones started while every worker computes; `None`
    /// means four times the warm count.
    pub max_workers: Option<usize>,
    /// Executions in flight at once (waiting ones included) before callers get `busy`;
    /// `None` means the sandbox's default (2,048).
    pub max_executions: Option<usize>,
    /// The longest an execution may run, waiting included (for a tool, for a person's
    /// approval); `None` means the sandbox's default (30 s). Profiles and callers may lower it.
    pub timeout: Option<std::time::Duration>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            python: true,
            engine: Default::default(),
            deno: None,
            require_lockdown: false,
            workers: None,
            max_workers: None,
            max_executions: None,
            timeout: None,
        }
    }
}

impl Config {
    /// Looks a backend up by its configured name.
    pub fn backend(&self, name: &str) -> Option<&BackendConfig> {
        self.backends.iter().find(|b| b.name == name)
    }

    /// Resolves `${VAR}` references in every enabled backend's `env` and `headers` using
    /// `lookup` (normally the gateway's own environment). Fails on the first variable that is
    /// unset. Disabled backends are skipped: they never start, so their secrets are not needed.
    /// The input is left untouched, so a failure never leaves a half-resolved config behind.
    pub fn resolved(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let mut config = self.clone();
        for backend in config.backends.iter_mut().filter(|b| b.enabled) {
            // A variable that is not set disables only the backend that needs it; its status
            // names the variable.
            if let Err((key, var)) = resolve_backend(backend, lookup) {
                backend.enabled = false;
                backend.skipped = Some(format!(
                    "`{key}` needs ${{{var}}}, which is not set in sandgate's environment; export {var} and restart sandgate"
                ));
            }
        }
        if let Some(url) = &mut config.store.url {
            *url = Secret::from(interpolate(url.expose(), lookup).map_err(|var| {
                ConfigError::MissingSecret {
                    key: "store.url".into(),
                    var,
                }
            })?);
        }
        if let Some(ca_file) = &mut config.store.ca_file {
            let path = ca_file.to_string_lossy().into_owned();
            *ca_file = interpolate(&path, lookup)
                .map_err(|var| ConfigError::MissingSecret {
                    key: "store.ca_file".into(),
                    var,
                })?
                .into();
        }
        if let Some(oauth) = &mut config.auth.oauth {
            if let Some(secret) = oauth
                .console
                .as_mut()
                .and_then(|c| c.client_secret.as_mut())
            {
                *secret = Secret::from(interpolate(secret.expose(), lookup).map_err(|var| {
                    ConfigError::MissingSecret {
                        key: "auth.oauth.console.client_secret".into(),
                        var,
                    }
                })?);
            }
            for (i, issuer) in oauth.issuers.iter_mut().enumerate() {
                for (part, client) in [
                    ("introspection", &mut issuer.introspection),
                    ("token_exchange", &mut issuer.token_exchange),
                ] {
                    if let Some(how) = client {
                        how.client_secret =
                            Secret::from(interpolate(how.client_secret.expose(), lookup).map_err(
                                |var| ConfigError::MissingSecret {
                                    key: format!("auth.oauth.issuers[{i}].{part}.client_secret"),
                                    var,
                                },
                            )?);
                    }
                }
            }
        }
        if let Some(key) = &mut config.credentials.key {
            *key = Secret::from(interpolate(key.expose(), lookup).map_err(|var| {
                ConfigError::MissingSecret {
                    key: "credentials.key".into(),
                    var,
                }
            })?);
        }
        for (i, token) in config.http.tokens.iter_mut().enumerate() {
            if let TokenSecret::Plain(text) = &mut token.secret {
                let key = match &token.name {
                    Some(name) => format!("http.tokens ({name})"),
                    None => format!("http.tokens[{i}]"),
                };
                *text = Secret::from(interpolate(text.expose(), lookup).map_err(|var| {
                    ConfigError::MissingSecret {
                        key: key.clone(),
                        var,
                    }
                })?);
                if text.expose().chars().count() < crate::access::MIN_TOKEN_CHARS {
                    return Err(ConfigError::WeakToken {
                        key,
                        min: crate::access::MIN_TOKEN_CHARS,
                    });
                }
            }
        }
        Ok(config)
    }

    /// Whether browsers reach the gateway over https, so the console's cookies must be
    /// `Secure`: `[http] secure_cookies` when set, else whether `[auth.oauth] resource` (the
    /// gateway's public URL) is https.
    pub fn secure_cookies(&self) -> bool {
        self.http.secure_cookies.unwrap_or_else(|| {
            self.auth
                .oauth
                .as_ref()
                .is_some_and(|o| o.resource.to_ascii_lowercase().starts_with("https://"))
        })
    }

    /// The profiles callers get, by name. With none written, one implicit `default`: every
    /// tool, and no network, files or environment. With some written but no `default`, the
    /// default (stdio, and HTTP without auth) grants nothing: deny by default.
    pub fn access_profiles(&self) -> Vec<Profile> {
        let file = self
            .source
            .as_ref()
            .map_or_else(|| "the config".to_string(), |p| p.display().to_string());
        if self.profiles.is_empty() {
            return vec![Profile::implicit_default(&file)];
        }
        let mut profiles = self.profiles.clone();
        if !profiles.iter().any(|p| p.name == "default") {
            let key = match profiles.first() {
                Some(p) if p.key.starts_with("sandgate.") => "sandgate.profiles.default",
                _ => "profiles.default",
            };
            profiles.push(Profile::granting_nothing("default", key, &file));
        }
        profiles
    }
}

/// Resolves `${VAR}` in every string of one backend that may hold one (`command`, `args`,
/// `url`, `env`, `headers`), or says which key needs which unset variable. The backend is left
/// as it was on failure.
fn resolve_backend(
    backend: &mut BackendConfig,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), (String, String)> {
    let mut resolved = backend.clone();
    let at = |key: String| move |var: String| (key.clone(), var);
    for (key, value) in resolved.env.iter_mut() {
        *value =
            Secret::from(interpolate(value.expose(), lookup).map_err(at(format!("env.{key}")))?);
    }
    match &mut resolved.transport {
        Transport::Stdio { command, args, .. } => {
            *command = interpolate(command, lookup).map_err(at("command".into()))?;
            for (i, arg) in args.iter_mut().enumerate() {
                *arg = interpolate(arg, lookup).map_err(at(format!("args[{i}]")))?;
            }
        }
        Transport::Http { url, headers } => {
            *url = interpolate(url, lookup).map_err(at("url".into()))?;
            for (key, value) in headers.iter_mut() {
                *value = Secret::from(
                    interpolate(value.expose(), lookup).map_err(at(format!("headers.{key}")))?,
                );
            }
        }
    }
    *backend = resolved;
    Ok(())
}

/// The HTTP front's settings. HTTP is off unless `listen` is set (or `--http` is given).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HttpConfig {
    /// Whether clients need a bearer token (the default) or not (loopback only).
    pub auth: HttpAuth,
    /// The configured tokens; with none, `serve` generates one.
    pub tokens: Vec<HttpToken>,
    /// Address to listen on; loopback is strongly advised.
    pub listen: Option<SocketAddr>,
    /// Extra `Host` values to accept beyond loopback (for deployments behind a proxy).
    pub allowed_hosts: Vec<String>,
    /// Browser origins to accept; requests with any other `Origin` are refused.
    pub allowed_origins: Vec<String>,
    /// What a client may hold and how long it may take.
    pub limits: HttpLimits,
    /// Whether browsers reach the gateway over https (`secure_cookies`; unset: whether
    /// `[auth.oauth] resource` is an https URL).
    pub secure_cookies: Option<bool>,
}

/// What HTTP clients may hold of the gateway, and how slowly they may send. Every key has a
/// default (docs/config.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Time a client has to send a request's headers (an idle keep-alive connection is
    /// closed after it too).
    pub header_timeout: Duration,
    /// Time a client has to send a request's body once its headers arrived.
    pub body_timeout: Duration,
    /// Open connections, from everyone.
    pub max_connections: usize,
    /// Open connections from one IP address.
    pub max_connections_per_ip: usize,
    /// Open 2025-11-25 sessions; a new one past this gets 503 while the others keep working.
    pub max_sessions: usize,
    /// A session nobody used for this long is closed.
    pub session_idle_timeout: Duration,
    /// On SIGTERM or SIGINT, how long to go on serving while `/readyz` says 503 (so a load
    /// balancer takes the replica out of rotation), and then how long requests in flight get
    /// to finish; zero stops at once.
    pub drain: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_connections_per_ip: 256,
            max_sessions: 1000,
            session_idle_timeout: Duration::from_secs(300),
            drain: Duration::ZERO,
        }
    }
}

/// One backend MCP server.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendConfig {
    /// The name the user gave it; tools are qualified as `name.tool`.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// Environment for a stdio child (values may hold `${VAR}` until resolved).
    pub env: BTreeMap<String, Secret>,
    /// Per-call timeout.
    pub timeout: Duration,
    /// Handshake timeout.
    pub handshake_timeout: Duration,
    /// Cap on concurrent in-flight calls.
    pub max_concurrent_calls: usize,
    /// Cap on one call's arguments, in JSON bytes; a larger call is refused before it is sent.
    pub max_argument_bytes: usize,
    /// What the backend may send (results, lists, tools).
    pub bounds: BackendBounds,
    /// Disabled backends are listed but never started.
    pub enabled: bool,
    /// Why this entry is not started, when sandgate skipped it (a key of another client it
    /// cannot honour, a variable that is not set): shown in its status. Skipped entries are
    /// also not `enabled`.
    pub skipped: Option<String>,
    /// Cursor's `envFile`: variables to load for the child (its own `env` wins).
    pub env_file: Option<PathBuf>,
    /// Which of its tools are exposed.
    pub tools: sandgate_policy::Grant,
    /// One connection per user, and what of the user's it carries (`per_user`).
    pub per_user: Option<crate::sections::credentials::PerUser>,
    /// Its tools a person must approve before a call runs, as `backend.tool` patterns
    /// (`approve`, written over the backend's tool names).
    pub approve: Vec<String>,
    /// Whether the shapes of its tools' results are learned, for tools that declare no output
    /// schema (`learn_shapes`, on by default): off for tools whose results are private even
    /// in shape.
    pub learn_shapes: bool,
    /// How its tool definitions are pinned against changes (`pin`; `[gateway] pin` when the
    /// entry does not say).
    pub pin: PinMode,
}

/// How a backend's tool definitions are pinned (issue 49: the supply-chain guard).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PinMode {
    /// Each tool is pinned the first time it is seen (unless the scan holds it); a later
    /// change is held until a person accepts it (`"first_use"`, the default).
    #[default]
    FirstUse,
    /// Every tool not pinned yet is held until a person accepts it (`"review"`).
    Review,
    /// Nothing is pinned or held: for a backend whose tools change by design (`false`).
    Off,
}

impl PinMode {
    /// The mode as the config writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            PinMode::FirstUse => "first_use",
            PinMode::Review => "review",
            PinMode::Off => "off",
        }
    }
}

/// How sandgate reaches a backend.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// Program to run (looked up on `PATH`).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Working directory.
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP server.
    Http {
        /// Endpoint URL.
        url: String,
        /// Extra request headers (values may hold `${VAR}` until resolved).
        headers: BTreeMap<String, Secret>,
    },
}
