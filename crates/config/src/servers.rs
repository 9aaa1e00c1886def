//! The backend entries (`[servers.NAME]` in `sandgate.toml`, `mcpServers` in a client's
//! JSON): every key sandgate reads in one, the keys other clients write that it ignores or
//! reports, Gemini CLI's millisecond timeouts and Cursor's `envFile`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::ConfigError;
use crate::model::*;
use crate::secret::Secret;
use crate::walker::{
    Walker, duration, opt_bool, opt_string, string_list, string_map, whole_number,
};

/// The backend name stored tools appear under (`user.<name>`), so no configured backend may
/// take it.
pub const STORED_TOOLS_BACKEND: &str = "user";

const BACKEND_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "type",
    "headers",
    "timeout",
    "handshake_timeout",
    "max_concurrent_calls",
    "max_argument_bytes",
    "max_result_bytes",
    "max_tools",
    "max_list_pages",
    "max_list_bytes",
    "max_description_chars",
    "max_schema_bytes",
    "max_schema_depth",
    "enabled",
    "disabled",
    "allow_tools",
    "deny_tools",
    "approve",
    "learn_shapes",
    "pin",
];
/// Keys other MCP clients put in `mcpServers` entries. They mean nothing to sandgate, and
/// refusing them would stop users from pointing sandgate at the file they already have.
const FOREIGN_BACKEND_KEYS: &[&str] = &[
    "autoApprove",
    "alwaysAllow",
    "description",
    // Milliseconds; read when `timeout` is absent (see `call_timeout`).
    "timeoutMs",
    // Gemini CLI: whether to confirm calls, and tool lists it filters itself.
    "trust",
    "includeTools",
    "excludeTools",
    // Honoured or reported below.
    "envFile",
    "oauth",
    "headersHelper",
    "httpUrl",
];

/// Keys only Gemini CLI writes in a server entry.
const GEMINI_ENTRY_KEYS: &[&str] = &["httpUrl", "trust", "includeTools", "excludeTools"];

/// Whether a JSON config is Gemini CLI's `settings.json`: by its place (`.gemini/`), or by an
/// entry with a key only Gemini writes.
pub(crate) fn gemini_shaped(file: &str, root: &Value) -> bool {
    let path = file.replace('\\', "/");
    if path.ends_with(".gemini/settings.json") {
        return true;
    }
    root.get("mcpServers")
        .and_then(Value::as_object)
        .is_some_and(|servers| {
            servers
                .values()
                .filter_map(Value::as_object)
                .any(|entry| GEMINI_ENTRY_KEYS.iter().any(|key| entry.contains_key(*key)))
        })
}

/// Merges Cursor's `envFile` (`KEY=VALUE` lines, `#` comments, optional `export` and quotes)
/// into the backend's `env`, under what the entry sets itself; a file that cannot be read skips
/// the backend, with the reason.
pub(crate) fn load_env_file(backend: &mut BackendConfig, base: &Path) {
    let Some(file) = backend.env_file.clone() else {
        return;
    };
    let file = if file.is_relative() {
        base.join(file)
    } else {
        file
    };
    match std::fs::read_to_string(&file) {
        Ok(text) => {
            for line in text.lines() {
                let line = line.trim();
                let line = line.strip_prefix("export ").unwrap_or(line);
                let Some((key, value)) = line.split_once('=').filter(|_| !line.starts_with('#'))
                else {
                    continue;
                };
                let value = value.trim();
                let value = value
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                    .unwrap_or(value);
                backend
                    .env
                    .entry(key.trim().to_string())
                    .or_insert_with(|| Secret::from(value));
            }
            backend.env_file = Some(file);
        }
        Err(e) => {
            backend.enabled = false;
            backend.skipped = Some(format!(
                "its envFile {} cannot be read: {e}",
                file.display()
            ));
        }
    }
}

impl Walker<'_> {
    pub(crate) fn backends(
        &self,
        key: &str,
        value: &Value,
        pin: PinMode,
    ) -> Result<Vec<BackendConfig>, ConfigError> {
        let table = self.table(key, value)?;
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        let mut backends = Vec::with_capacity(table.len());
        for (name, entry) in table {
            let path = format!("{key}.{name}");
            if name.trim().is_empty() || name.contains('.') {
                return Err(self.invalid(
                    &path,
                    "is not a usable backend name (empty, or contains `.`)",
                    "use letters, digits, `-` or `_`, e.g. `github`",
                ));
            }
            if name.eq_ignore_ascii_case(STORED_TOOLS_BACKEND) {
                return Err(self.invalid(
                    &path,
                    "is reserved: stored tools are called as user.<name>",
                    "give this backend another name",
                ));
            }
            // Names that differ only in case would collide in tool names and in the sandbox.
            if let Some(previous) = seen.insert(name.to_lowercase(), name.clone()) {
                return Err(self.invalid(
                    &path,
                    format!(
                        "duplicates backend `{previous}` (names are compared case-insensitively)"
                    ),
                    "rename one of them",
                ));
            }
            backends.push(self.backend(&path, name, entry, pin)?);
        }
        Ok(backends)
    }

    /// A backend's `timeout`: seconds (or a string with a unit); milliseconds as a bare number
    /// in Gemini's file; else `timeoutMs`, milliseconds, as some clients write it.
    fn call_timeout(
        &self,
        path: &str,
        table: &Map<String, Value>,
    ) -> Result<Option<Duration>, ConfigError> {
        let in_ms = |value: &Value| match value {
            Value::Number(n) => Some(Value::String(format!("{n}ms"))),
            _ => None,
        };
        match (table.get("timeout"), table.get("timeoutMs")) {
            (Some(timeout), _) if self.timeouts_in_ms => {
                let value = in_ms(timeout).unwrap_or_else(|| timeout.clone());
                duration(self, &format!("{path}.timeout"), Some(&value))
            }
            (Some(timeout), _) => duration(self, &format!("{path}.timeout"), Some(timeout)),
            (None, Some(ms)) => {
                let value = in_ms(ms).unwrap_or_else(|| ms.clone());
                duration(self, &format!("{path}.timeoutMs"), Some(&value))
            }
            (None, None) => Ok(None),
        }
    }

    fn backend(
        &self,
        path: &str,
        name: &str,
        value: &Value,
        pin: PinMode,
    ) -> Result<BackendConfig, ConfigError> {
        let table = self.table(path, value)?;
        let known: Vec<&str> = BACKEND_KEYS
            .iter()
            .chain(crate::sections::credentials::PER_USER_KEYS)
            .copied()
            .collect();
        self.check_keys(path, table, &known, FOREIGN_BACKEND_KEYS)?;
        let key = |k: &str| format!("{path}.{k}");
        let command = opt_string(self, &key("command"), table.get("command"))?;
        // Gemini CLI names a streamable HTTP server's endpoint `httpUrl`.
        let url = match opt_string(self, &key("url"), table.get("url"))? {
            Some(url) => Some(url),
            None => opt_string(self, &key("httpUrl"), table.get("httpUrl"))?,
        };
        let kind = opt_string(self, &key("type"), table.get("type"))?;
        // Keys of other clients that sandgate cannot honour skip this entry (with the reason
        // in its status), never the whole file.
        let foreign_oauth = table
            .get("oauth")
            .and_then(Value::as_object)
            .and_then(|oauth| {
                oauth
                    .keys()
                    .find(|k| !crate::sections::credentials::OAUTH_KEYS.contains(&k.as_str()))
            });
        let skipped = if let Some(foreign) = foreign_oauth {
            Some(format!(
                "it uses `oauth` in another client's form (`{foreign}`): sandgate signs users in to a backend with oauth = {{ scope, client_id, client_secret, redirect_uri }} (docs/config.md, \"Signing in to a backend\")"
            ))
        } else if table.contains_key("headersHelper") {
            Some(
                "it uses `headersHelper`: sandgate does not run header helper commands".to_string(),
            )
        } else if kind.as_deref() == Some("sse") {
            Some("it uses the deprecated HTTP+SSE transport (`type: \"sse\"`), which sandgate does not speak; point `url` at the server's streamable HTTP endpoint and set `type: \"http\"`".to_string())
        } else if value.to_string().contains("${input:") {
            Some("it uses a VS Code input (`${input:...}`), a value only VS Code can prompt for; put the value in sandgate's environment and write ${VAR}".to_string())
        } else {
            None
        };
        let kind = if skipped.is_some() && kind.as_deref() == Some("sse") {
            Some("http".to_string())
        } else {
            kind
        };
        let env_file = opt_string(self, &key("envFile"), table.get("envFile"))?.map(PathBuf::from);
        let transport = match (command, url) {
            (Some(_), Some(_)) => {
                return Err(self.invalid(
                    path,
                    "has both `command` and `url`",
                    "keep `command` for a local process or `url` for an HTTP server, not both",
                ));
            }
            (None, None) => {
                return Err(self.invalid(path, "has neither `command` nor `url`", "add `command = \"npx\"` (with `args`) for a local server, or `url = \"https://...\"`"));
            }
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(self.invalid(
                        &key("command"),
                        "is empty",
                        "give the program to run, e.g. \"npx\"",
                    ));
                }
                if let Some(kind) = kind.as_deref().filter(|k| *k != "stdio") {
                    return Err(self.invalid(
                        &key("type"),
                        format!("is `{kind}` but the backend has a `command`"),
                        "use `type = \"stdio\"` or drop `type`",
                    ));
                }
                if table.contains_key("headers") {
                    return Err(self.invalid(
                        &key("headers"),
                        "only applies to HTTP backends",
                        "remove it, or use `url` instead of `command`",
                    ));
                }
                Transport::Stdio {
                    command,
                    args: string_list(self, &key("args"), table.get("args"))?,
                    cwd: opt_string(self, &key("cwd"), table.get("cwd"))?.map(PathBuf::from),
                }
            }
            (None, Some(url)) => {
                match kind.as_deref() {
                    None | Some("http") | Some("streamable-http") | Some("streamableHttp") => {}
                    Some("sse") => return Err(self.invalid(&key("type"), "is `sse`, the deprecated HTTP+SSE transport, which sandgate does not speak", "point `url` at the server's streamable HTTP endpoint and set `type = \"http\"`")),
                    Some(other) => return Err(self.invalid(&key("type"), format!("is `{other}`"), "use `http` for a URL backend")),
                }
                self.http_url(&key("url"), &url, "https://example.com/mcp")?;
                for stdio_only in ["args", "cwd", "env"] {
                    if table.contains_key(stdio_only) {
                        return Err(self.invalid(
                            &key(stdio_only),
                            "only applies to stdio backends",
                            "remove it, or use `command` instead of `url`",
                        ));
                    }
                }
                Transport::Http {
                    url,
                    headers: secrets(string_map(self, &key("headers"), table.get("headers"))?),
                }
            }
        };
        let enabled = match (
            opt_bool(self, &key("enabled"), table.get("enabled"))?,
            opt_bool(self, &key("disabled"), table.get("disabled"))?,
        ) {
            (Some(e), Some(d)) if e == d => {
                return Err(self.invalid(
                    path,
                    "sets `enabled` and `disabled` to contradicting values",
                    "keep only one of them",
                ));
            }
            (Some(e), _) => e,
            (None, Some(d)) => !d,
            (None, None) => true,
        } && skipped.is_none();
        let number = |field: &str, default: usize, range: std::ops::RangeInclusive<usize>| {
            whole_number(self, &key(field), table.get(field), default, range)
        };
        let max_concurrent_calls = number(
            "max_concurrent_calls",
            DEFAULT_MAX_CONCURRENT_CALLS,
            1..=10_000,
        )?;
        let max_argument_bytes = number(
            "max_argument_bytes",
            DEFAULT_MAX_ARGUMENT_BYTES,
            1..=MAX_ARGUMENT_BYTES_CEILING,
        )?;
        let defaults = BackendBounds::default();
        let bounds = BackendBounds {
            max_result_bytes: number(
                "max_result_bytes",
                defaults.max_result_bytes,
                1024..=MAX_ARGUMENT_BYTES_CEILING,
            )?,
            max_tools: number("max_tools", defaults.max_tools, 1..=1_000_000)?,
            max_list_pages: number("max_list_pages", defaults.max_list_pages, 1..=1_000_000)?,
            max_list_bytes: number(
                "max_list_bytes",
                defaults.max_list_bytes,
                1024..=1024 * 1024 * 1024,
            )?,
            max_description_chars: number(
                "max_description_chars",
                defaults.max_description_chars,
                16..=1024 * 1024,
            )?,
            max_schema_bytes: number(
                "max_schema_bytes",
                defaults.max_schema_bytes,
                64..=MAX_ARGUMENT_BYTES_CEILING,
            )?,
            max_schema_depth: number("max_schema_depth", defaults.max_schema_depth, 2..=100)?,
        };
        // Another client's `oauth` skipped the entry (see `skipped`): it is not read as sandgate's.
        let own_keys;
        let per_user_table = if skipped.is_some() && table.contains_key("oauth") {
            own_keys = table
                .iter()
                .filter(|(k, _)| *k != "oauth")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Map<String, Value>>();
            &own_keys
        } else {
            table
        };
        let per_user = self.per_user(
            path,
            per_user_table,
            matches!(transport, Transport::Stdio { .. }),
        )?;
        let approve = string_list(self, &key("approve"), table.get("approve"))?
            .iter()
            .map(|pattern| format!("{name}.{pattern}"))
            .collect();
        Ok(BackendConfig {
            per_user,
            approve,
            learn_shapes: opt_bool(self, &key("learn_shapes"), table.get("learn_shapes"))?
                .unwrap_or(true),
            pin: self
                .pin_mode(&key("pin"), table.get("pin"), true)?
                .unwrap_or(pin),
            skipped: skipped.clone(),
            env_file,
            name: name.to_string(),
            env: secrets(string_map(self, &key("env"), table.get("env"))?),
            transport,
            timeout: self
                .call_timeout(path, table)?
                .unwrap_or(DEFAULT_CALL_TIMEOUT),
            handshake_timeout: duration(
                self,
                &key("handshake_timeout"),
                table.get("handshake_timeout"),
            )?
            .unwrap_or(DEFAULT_HANDSHAKE_TIMEOUT),
            max_concurrent_calls,
            max_argument_bytes,
            bounds,
            enabled,
            tools: sandgate_policy::Grant::for_backend(
                name,
                &string_list(self, &key("allow_tools"), table.get("allow_tools"))?,
                &string_list(self, &key("deny_tools"), table.get("deny_tools"))?,
            ),
        })
    }
}

/// Values that must not be shown, by key.
fn secrets(values: BTreeMap<String, String>) -> BTreeMap<String, Secret> {
    values
        .into_iter()
        .map(|(key, value)| (key, Secret::from(value)))
        .collect()
}
