//! Loading and validating both config formats.
//!
//! Both formats are first read into a `serde_json::Value` and then walked by hand. The walk
//! knows every key, so an error names the exact dotted key, says what type was expected, and
//! suggests the closest known key for a typo. serde's derive errors cannot do all of that.

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::ConfigError;
use crate::model::*;
use crate::servers::{gemini_shaped, load_env_file};
use crate::suggest::did_you_mean;
use crate::walker::Walker;

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
    // A bare name (`deno`) is looked up on PATH when the engine starts; a path is the file's.
    if let Some(deno) = &mut config.sandbox.deno
        && deno.is_relative()
        && deno.components().count() > 1
    {
        *deno = base.join(&*deno);
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
        json: format == Format::McpServersJson,
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
    "auth",
    "credentials",
    "approvals",
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
            config.backends = self.backends("servers", servers, config.pin)?;
        }
        self.check_per_user(&config, "servers")?;
        Ok(config)
    }

    fn json_root(&self, root: &Value) -> Result<Config, ConfigError> {
        let root = self.table("<root>", root)?;
        for key in root.keys() {
            // sandgate's own settings at the top of a client's file were ignored without a word.
            if SETTINGS_KEYS.contains(&key.as_str()) {
                return Err(self.invalid(
                    key,
                    "is one of sandgate's settings, which a JSON config keeps in its \"sandgate\" object",
                    format!(r#"move it there: {{"mcpServers": {{...}}, "sandgate": {{"{key}": ...}}}}"#),
                ));
            }
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
        config.backends = self.backends(key, servers, config.pin)?;
        self.check_per_user(&config, key)?;
        Ok(config)
    }

    /// A backend that carries a user's stored secret or sign-in needs `[credentials]`, one that
    /// exchanges tokens needs `[auth.oauth]`, and a sign-in needs to know where it comes back.
    fn check_per_user(&self, config: &Config, servers: &str) -> Result<(), ConfigError> {
        use crate::sections::credentials::UserSecret;
        for backend in &config.backends {
            let Some(per_user) = &backend.per_user else {
                continue;
            };
            let key = format!("{servers}.{}", backend.name);
            match &per_user.secret {
                UserSecret::Header { .. } | UserSecret::Env { .. }
                    if !config.credentials.configured() =>
                {
                    return Err(self.invalid(
                        &format!("{key}.user_secret"),
                        "needs a key to seal users' secrets with, and [credentials] names none",
                        "add [credentials] with key = \"${SANDGATE_CREDENTIAL_KEY}\" (32 random bytes in base64: `openssl rand -base64 32`)",
                    ));
                }
                UserSecret::TokenExchange { .. }
                    if !config.auth.oauth.as_ref().is_some_and(|oauth| {
                        oauth.issuers.iter().any(|i| i.token_exchange.is_some())
                    }) =>
                {
                    return Err(self.invalid(
                        &format!("{key}.token_exchange"),
                        "exchanges the caller's access token, and no issuer of [auth.oauth] says how",
                        "give the issuer token_exchange = { client_id = \"sandgate\", client_secret = \"${EXCHANGE_SECRET}\" } in [[auth.oauth.issuers]], or use user_secret",
                    ));
                }
                UserSecret::OAuth(_) if !config.credentials.configured() => {
                    return Err(self.invalid(
                        &format!("{key}.oauth"),
                        "needs a key to seal users' tokens with, and [credentials] names none",
                        "add [credentials] with key = \"${SANDGATE_CREDENTIAL_KEY}\" (32 random bytes in base64: `openssl rand -base64 32`)",
                    ));
                }
                UserSecret::OAuth(oauth)
                    if oauth.redirect_uri.is_none() && config.auth.oauth.is_none() =>
                {
                    return Err(self.invalid(
                        &format!("{key}.oauth.redirect_uri"),
                        "is needed: sign-ins come back to this gateway's console, and no [auth.oauth] resource says where browsers reach it",
                        "give redirect_uri = \"https://gateway.example.com/ui/connect/callback\"",
                    ));
                }
                _ => {}
            }
        }
        Ok(())
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
        config.auth = self.auth_section(table.get("auth"))?;
        config.credentials =
            self.credentials_section(&key("credentials"), table.get("credentials"))?;
        config.approvals = self.approvals_section(&key("approvals"), table.get("approvals"))?;
        self.check_access(&config.profiles, &config.http.tokens)?;
        if let Some(oauth) = &config.auth.oauth {
            self.check_rule_profiles(&config.profiles, &oauth.rules)?;
        }
        Ok(config)
    }
}
