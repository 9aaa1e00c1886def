//! Loading and validating both config formats.
//!
//! Both formats are first read into a `serde_json::Value` and then walked by hand. The walk
//! knows every key, so an error names the exact dotted key, says what type was expected, and
//! suggests the closest known key for a typo. serde's derive errors cannot do all of that.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::ConfigError;
use crate::model::*;
use crate::servers::{gemini_shaped, load_env_file};
use crate::suggest::did_you_mean;
use crate::walker::{Walker, duration, opt_bool, opt_string, string_list, whole_number};

/// Which of the two formats a config is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// sandgate's own `sandgate.toml`.
    Toml,
    /// `{"mcpServers": {...}}` as used by Claude Desktop, Claude Code and Cursor.
    McpServersJson,
}

impl Format {
    /// Detects the format from the file extension, falling back to the content.
    pub fn detect(path: Option<&Path>, content: &str) -> Format {
        match path.and_then(|p| p.extension()).and_then(|e| e.to_str()) {
            Some("toml") => Format::Toml,
            Some("json") => Format::McpServersJson,
            _ if content.trim_start().starts_with('{') => Format::McpServersJson,
            _ => Format::Toml,
        }
    }
}

/// Reads and validates a config file, detecting its format.
pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
    let content = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
        path: path.to_path_buf(),
        cause,
    })?;
    let format = Format::detect(Some(path), &content);
    let mut config = parse_str(&content, format, &path.display().to_string())?;
    let base = path.parent().unwrap_or(Path::new("."));
    // Relative paths in a config are relative to the config file, not to wherever sandgate runs.
    for backend in &mut config.backends {
        if let Transport::Stdio { cwd: Some(cwd), .. } = &mut backend.transport
            && cwd.is_relative()
        {
            *cwd = base.join(&*cwd);
        }
    }
    if let Some(cache) = &mut config.cache_file
        && cache.is_relative()
    {
        *cache = base.join(&*cache);
    }
    if let Some(audit) = &mut config.audit.path
        && audit.is_relative()
    {
        *audit = base.join(&*audit);
    }
    for backend in &mut config.backends {
        load_env_file(backend, base);
    }
    for root in config.profiles.iter_mut().flat_map(|p| p.fs.iter_mut()) {
        if root.path.is_relative() {
            root.path = base.join(&root.path);
        }
    }
    config.source = Some(path.to_path_buf());
    Ok(config)
}

/// Parses and validates config text. `file` is used only in error messages.
pub fn parse_str(content: &str, format: Format, file: &str) -> Result<Config, ConfigError> {
    let syntax = |message: String| ConfigError::Syntax {
        file: file.to_string(),
        message,
    };
    let root: Value = match format {
        Format::Toml => toml::from_str::<Value>(content).map_err(|e| syntax(e.to_string()))?,
        // Clients' JSON files may hold comments and trailing commas (VS Code's do).
        Format::McpServersJson => serde_json::from_str(&crate::jsonc::strip(content))
            .map_err(|e| syntax(format!("invalid JSON: {e}")))?,
    };
    let walker = Walker {
        file,
        timeouts_in_ms: format == Format::McpServersJson && gemini_shaped(file, &root),
    };
    match format {
        Format::Toml => walker.toml_root(&root),
        Format::McpServersJson => walker.json_root(&root),
    }
}

/// The gateway-wide sections: at the root of `sandgate.toml` (beside `servers`), and in the
/// `sandgate` object of a JSON config.
const SETTINGS_KEYS: &[&str] = &[
    "http",
    "gateway",
    "sandbox",
    "output",
    "store",
    "profiles",
    "audit",
    "stored_tools",
    "telemetry",
];
const STORE_KEYS: &[&str] = &[
    "path",
    "output_retention_hours",
    "max_records",
    "record_arguments",
];
const OUTPUT_KEYS: &[&str] = &[
    "max_chars",
    "intent_min_bytes",
    "intent_min_term_ratio",
    "json_chunk_min_bytes",
    "json_sample_items",
    "footer_min_removed_bytes",
    "intent_filter",
    "json_chunking",
];
const SANDBOX_KEYS: &[&str] = &[
    "require_lockdown",
    "workers",
    "max_workers",
    "max_executions",
];
const GATEWAY_KEYS: &[&str] = &["cache_file", "startup_wait"];
const HTTP_KEYS: &[&str] = &[
    "listen",
    "allowed_hosts",
    "allowed_origins",
    "header_timeout",
    "body_timeout",
    "max_connections",
    "max_connections_per_ip",
    "max_sessions",
    "session_idle_timeout",
    "auth",
    "tokens",
];
/// Top-level keys of a JSON config sandgate reads: the servers (`mcpServers`, or VS Code's
/// `servers`), its own `sandgate` object, and VS Code's `inputs` (prompted values sandgate
/// cannot ask for). Any other top-level key belongs to the client (Claude Desktop's
/// `globalShortcut`, `preferences`, ...) and is ignored, unless it looks like a misspelling of
/// one of these.
const JSON_ROOT_KEYS: &[&str] = &["mcpServers", "servers", "sandgate", "inputs"];
impl Walker<'_> {
    fn toml_root(&self, root: &Value) -> Result<Config, ConfigError> {
        let root = self.table("<root>", root)?;
        let known: Vec<&str> = SETTINGS_KEYS.iter().copied().chain(["servers"]).collect();
        self.check_keys("", root, &known, &[])?;
        let mut config = self.settings("", root)?;
        if let Some(servers) = root.get("servers") {
            config.backends = self.backends("servers", servers)?;
        }
        Ok(config)
    }

    fn json_root(&self, root: &Value) -> Result<Config, ConfigError> {
        let root = self.table("<root>", root)?;
        for key in root.keys() {
            let suggestion = did_you_mean(key, JSON_ROOT_KEYS);
            if !JSON_ROOT_KEYS.contains(&key.as_str()) && !suggestion.is_empty() {
                return Err(ConfigError::UnknownKey {
                    file: self.file.to_string(),
                    key: key.clone(),
                    suggestion,
                });
            }
        }
        let (key, servers) = match (root.get("mcpServers"), root.get("servers")) {
            (Some(_), Some(_)) => {
                return Err(self.invalid(
                    "servers",
                    "is given with mcpServers",
                    "keep one list of servers: mcpServers (Claude, Cursor) or servers (VS Code)",
                ));
            }
            (Some(servers), None) => ("mcpServers", servers),
            (None, Some(servers)) => ("servers", servers),
            (None, None) => {
                return Err(self.invalid(
                    "mcpServers",
                    "is missing",
                    r#"a JSON config needs {"mcpServers": {"name": {"command": "..."}}} (or VS Code's {"servers": {...}})"#,
                ));
            }
        };
        // Optional sandgate-only settings ride along in a `sandgate` object that other clients ignore.
        let mut config = Config::default();
        if let Some(extra) = root.get("sandgate") {
            let extra = self.table("sandgate", extra)?;
            self.check_keys("sandgate", extra, SETTINGS_KEYS, &[])?;
            config = self.settings("sandgate.", extra)?;
        }
        config.backends = self.backends(key, servers)?;
        Ok(config)
    }

    /// The gateway-wide sections of `table` (see [`SETTINGS_KEYS`]); `prefix` is how keys are
    /// named in errors (`""` or `"sandgate."`).
    fn settings(&self, prefix: &str, table: &Map<String, Value>) -> Result<Config, ConfigError> {
        let key = |section: &str| format!("{prefix}{section}");
        let mut config = self.gateway_section(table.get("gateway"))?;
        config.http = self.http_section(table.get("http"))?;
        config.sandbox = self.sandbox_section(&key("sandbox"), table.get("sandbox"))?;
        config.output = self.output_section(table.get("output"))?;
        config.store = self.store_section(table.get("store"))?;
        config.profiles = self.profiles_section(&key("profiles"), table.get("profiles"))?;
        config.audit = self.audit_section(&key("audit"), table.get("audit"))?;
        config.stored_tools =
            self.stored_tools_section(&key("stored_tools"), table.get("stored_tools"))?;
        config.telemetry = self.telemetry_section(&key("telemetry"), table.get("telemetry"))?;
        self.check_access(&config.profiles, &config.http.tokens)?;
        Ok(config)
    }

    fn stored_tools_section(
        &self,
        key: &str,
        value: Option<&Value>,
    ) -> Result<StoredToolsConfig, ConfigError> {
        let Some(value) = value else {
            return Ok(StoredToolsConfig::default());
        };
        let table = self.table(key, value)?;
        self.check_keys(key, table, &["expose_as_mcp_tools"], &[])?;
        Ok(StoredToolsConfig {
            expose_as_mcp_tools: opt_bool(
                self,
                &format!("{key}.expose_as_mcp_tools"),
                table.get("expose_as_mcp_tools"),
            )?
            .unwrap_or(false),
        })
    }

    fn gateway_section(&self, value: Option<&Value>) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        if let Some(value) = value {
            let table = self.table("gateway", value)?;
            self.check_keys("gateway", table, GATEWAY_KEYS, &[])?;
            config.cache_file =
                opt_string(self, "gateway.cache_file", table.get("cache_file"))?.map(PathBuf::from);
            config.startup_wait =
                duration(self, "gateway.startup_wait", table.get("startup_wait"))?;
        }
        Ok(config)
    }

    fn sandbox_section(
        &self,
        key: &str,
        value: Option<&Value>,
    ) -> Result<SandboxConfig, ConfigError> {
        let Some(value) = value else {
            return Ok(SandboxConfig::default());
        };
        let table = self.table(key, value)?;
        self.check_keys(key, table, SANDBOX_KEYS, &[])?;
        let count = |name: &str, max: u64| -> Result<Option<usize>, ConfigError> {
            match table.get(name) {
                None => Ok(None),
                Some(v) => match v.as_u64() {
                    Some(n) if (1..=max).contains(&n) => Ok(Some(n as usize)),
                    _ => Err(self.invalid(
                        &format!("{key}.{name}"),
                        format!("is {v}"),
                        format!("use a whole number from 1 to {max}"),
                    )),
                },
            }
        };
        let workers = count("workers", 256)?;
        let max_workers = count("max_workers", 1024)?;
        let max_executions = count("max_executions", 100_000)?;
        if let (Some(base), Some(max)) = (workers, max_workers)
            && max < base
        {
            return Err(self.invalid(
                &format!("{key}.max_workers"),
                format!("is {max}, below workers ({base})"),
                "make max_workers at least workers",
            ));
        }
        Ok(SandboxConfig {
            max_workers,
            max_executions,
            require_lockdown: opt_bool(
                self,
                &format!("{key}.require_lockdown"),
                table.get("require_lockdown"),
            )?
            .unwrap_or(false),
            workers,
        })
    }

    fn output_section(&self, value: Option<&Value>) -> Result<OutputConfig, ConfigError> {
        let Some(value) = value else {
            return Ok(OutputConfig::default());
        };
        let table = self.table("output", value)?;
        let known: Vec<&str> = OUTPUT_KEYS.to_vec();
        self.check_keys("output", table, &known, &[])?;
        let config: OutputConfig = serde_json::from_value(value.clone()).map_err(|e| {
            self.invalid(
                "output",
                format!("has a bad value: {e}"),
                "sizes are whole numbers of bytes or characters, switches true or false, intent_min_term_ratio a number from 0 to 1",
            )
        })?;
        if !(0.0..=1.0).contains(&config.intent_min_term_ratio) {
            return Err(self.invalid(
                "output.intent_min_term_ratio",
                format!("is {}", config.intent_min_term_ratio),
                "use a fraction from 0 to 1, e.g. 0.3",
            ));
        }
        if config.max_chars < 200 {
            return Err(self.invalid(
                "output.max_chars",
                format!("is {}", config.max_chars),
                "use at least 200 characters; 20000 is the default",
            ));
        }
        Ok(config)
    }

    fn store_section(&self, value: Option<&Value>) -> Result<StoreConfig, ConfigError> {
        let Some(value) = value else {
            return Ok(StoreConfig::default());
        };
        let table = self.table("store", value)?;
        self.check_keys("store", table, STORE_KEYS, &[])?;
        let mut store = StoreConfig {
            path: opt_string(self, "store.path", table.get("path"))?.map(PathBuf::from),
            record_arguments: opt_bool(
                self,
                "store.record_arguments",
                table.get("record_arguments"),
            )?
            .unwrap_or(false),
            ..StoreConfig::default()
        };
        for (key, slot) in [
            ("output_retention_hours", &mut store.output_retention_hours),
            ("max_records", &mut store.max_records),
        ] {
            if let Some(v) = table.get(key) {
                *slot = v.as_u64().filter(|&n| n > 0).ok_or_else(|| {
                    self.invalid(
                        &format!("store.{key}"),
                        format!("is {v}"),
                        "use a whole number above 0",
                    )
                })?;
            }
        }
        Ok(store)
    }

    fn http_section(&self, value: Option<&Value>) -> Result<HttpConfig, ConfigError> {
        let Some(value) = value else {
            return Ok(HttpConfig::default());
        };
        let table = self.table("http", value)?;
        self.check_keys("http", table, HTTP_KEYS, &[])?;
        let listen = match opt_string(self, "http.listen", table.get("listen"))? {
            None => None,
            Some(text) => Some(text.parse::<SocketAddr>().map_err(|_| {
                self.invalid(
                    "http.listen",
                    format!("is `{text}`, which is not an IP:port address"),
                    "write it like \"127.0.0.1:8931\"",
                )
            })?),
        };
        let defaults = HttpLimits::default();
        let time = |key: &str, default: Duration| -> Result<Duration, ConfigError> {
            Ok(duration(self, &format!("http.{key}"), table.get(key))?.unwrap_or(default))
        };
        let number = |key: &str, default: usize| {
            whole_number(
                self,
                &format!("http.{key}"),
                table.get(key),
                default,
                1..=1_000_000,
            )
        };
        let limits = HttpLimits {
            header_timeout: time("header_timeout", defaults.header_timeout)?,
            body_timeout: time("body_timeout", defaults.body_timeout)?,
            max_connections: number("max_connections", defaults.max_connections)?,
            max_connections_per_ip: number(
                "max_connections_per_ip",
                defaults.max_connections_per_ip,
            )?,
            max_sessions: number("max_sessions", defaults.max_sessions)?,
            session_idle_timeout: time("session_idle_timeout", defaults.session_idle_timeout)?,
        };
        let auth = self.http_auth(table.get("auth"))?;
        if auth == crate::access::HttpAuth::None
            && let Some(addr) = listen.filter(|a| !a.ip().is_loopback())
        {
            return Err(self.invalid(
                "http.auth",
                format!("is \"none\" while http.listen is {addr}, which is not loopback"),
                "keep token auth (the default) for a listener other machines reach, or listen on 127.0.0.1",
            ));
        }
        Ok(HttpConfig {
            auth,
            tokens: self.http_tokens(table.get("tokens"))?,
            listen,
            allowed_hosts: string_list(self, "http.allowed_hosts", table.get("allowed_hosts"))?,
            allowed_origins: string_list(
                self,
                "http.allowed_origins",
                table.get("allowed_origins"),
            )?,
            limits,
        })
    }
}
