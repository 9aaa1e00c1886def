//! What every section of the config is read with: the [`Walker`], which knows the file it
//! reads and makes its errors name the file, the key and a fix; and the readers of single
//! values (strings, lists, maps, numbers, durations). Each section's reader (`parse`,
//! `servers`, `access`) is built on these.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::ConfigError;
use crate::suggest::did_you_mean;

/// Reads one config file's values.
pub(crate) struct Walker<'a> {
    pub(crate) file: &'a str,
    /// A bare number as a backend's `timeout` is milliseconds, as Gemini CLI writes it
    /// (sandgate's own unit is seconds).
    pub(crate) timeouts_in_ms: bool,
    /// The file is JSON (an `mcpServers` file): advice is written in JSON.
    pub(crate) json: bool,
}

impl Walker<'_> {
    /// `toml` or `json`, whichever syntax the file is in.
    pub(crate) fn in_syntax(&self, toml: &str, json: &str) -> String {
        if self.json { json } else { toml }.to_string()
    }

    pub(crate) fn invalid(
        &self,
        key: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_string(),
            key: key.to_string(),
            problem: problem.into(),
            fix: fix.into(),
        }
    }

    pub(crate) fn check_keys(
        &self,
        prefix: &str,
        table: &Map<String, Value>,
        known: &[&str],
        ignored: &[&str],
    ) -> Result<(), ConfigError> {
        for key in table.keys() {
            if !known.contains(&key.as_str()) && !ignored.contains(&key.as_str()) {
                return Err(ConfigError::UnknownKey {
                    file: self.file.to_string(),
                    key: join(prefix, key),
                    suggestion: did_you_mean(key, known),
                });
            }
        }
        Ok(())
    }

    /// Checks that `url` is an http(s) URL with a host (one holding `${VAR}` only by its
    /// scheme: the rest is known once the variable is); `example` shows the fix.
    pub(crate) fn http_url(&self, key: &str, url: &str, example: &str) -> Result<(), ConfigError> {
        let fix = format!("write it like \"{example}\"");
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(self.invalid(key, format!("is `{url}`, which is not an http(s) URL"), fix));
        }
        if url.contains("${") {
            return Ok(());
        }
        match url::Url::parse(url) {
            Ok(parsed) if parsed.host_str().is_some_and(|h| !h.is_empty()) => Ok(()),
            Ok(_) => Err(self.invalid(key, format!("is `{url}`, which names no host"), fix)),
            Err(e) => Err(self.invalid(
                key,
                format!("is `{url}`, which is not a valid URL ({e})"),
                fix,
            )),
        }
    }

    pub(crate) fn table<'v>(
        &self,
        key: &str,
        value: &'v Value,
    ) -> Result<&'v Map<String, Value>, ConfigError> {
        value.as_object().ok_or_else(|| {
            self.invalid(
                key,
                format!("must be a table/object, found {}", kind(value)),
                "write it as a table of keys",
            )
        })
    }
}

pub(crate) fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

pub(crate) fn opt_string(
    w: &Walker,
    key: &str,
    value: Option<&Value>,
) -> Result<Option<String>, ConfigError> {
    match value {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(w.invalid(
            key,
            format!("must be a string, found {}", kind(other)),
            "put the value in quotes",
        )),
    }
}

pub(crate) fn opt_bool(
    w: &Walker,
    key: &str,
    value: Option<&Value>,
) -> Result<Option<bool>, ConfigError> {
    match value {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(w.invalid(
            key,
            format!("must be true or false, found {}", kind(other)),
            "write true or false without quotes",
        )),
    }
}

pub(crate) fn string_list(
    w: &Walker,
    key: &str,
    value: Option<&Value>,
) -> Result<Vec<String>, ConfigError> {
    let Some(value) = value else {
        return Ok(vec![]);
    };
    let bad = || {
        w.invalid(
            key,
            format!("must be a list of strings, found {}", kind(value)),
            "write it like [\"a\", \"b\"]",
        )
    };
    value
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
        .collect()
}

pub(crate) fn string_map(
    w: &Walker,
    key: &str,
    value: Option<&Value>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let Some(value) = value else {
        return Ok(BTreeMap::new());
    };
    let table = w.table(key, value)?;
    table
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            other => Err(w.invalid(
                &format!("{key}.{k}"),
                format!("must be a string, found {}", kind(other)),
                "put the value in quotes",
            )),
        })
        .collect()
}

/// Reads a duration written as a number of seconds (`30`, `0.5`) or a string with a unit
/// (`"500ms"`, `"30s"`, `"2m"`).
/// A whole number in `range`, or `default` when the key is absent.
pub(crate) fn whole_number(
    w: &Walker,
    key: &str,
    value: Option<&Value>,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, ConfigError> {
    let Some(v) = value else {
        return Ok(default);
    };
    match v.as_u64().and_then(|n| usize::try_from(n).ok()) {
        Some(n) if range.contains(&n) => Ok(n),
        _ => Err(w.invalid(
            key,
            format!("is {v}"),
            format!(
                "use a whole number from {} to {}; the default is {default}",
                range.start(),
                range.end()
            ),
        )),
    }
}

pub(crate) fn duration(
    w: &Walker,
    key: &str,
    value: Option<&Value>,
) -> Result<Option<Duration>, ConfigError> {
    let bad = |shown: String| {
        w.invalid(
            key,
            format!("is {shown}, which is not a duration"),
            "write seconds as a number (30) or a string with a unit (\"500ms\", \"30s\", \"2m\")",
        )
    };
    let parsed = match value {
        None => return Ok(None),
        Some(Value::Number(n)) => n.as_f64().map(|s| s * 1000.0),
        Some(Value::String(s)) => {
            let s = s.trim();
            let (digits, scale) = if let Some(d) = s.strip_suffix("ms") {
                (d, 1.0)
            } else if let Some(d) = s.strip_suffix('s') {
                (d, 1000.0)
            } else if let Some(d) = s.strip_suffix('m') {
                (d, 60_000.0)
            } else {
                (s, 1000.0)
            };
            digits.trim().parse::<f64>().ok().map(|n| n * scale)
        }
        Some(other) => return Err(bad(kind(other).to_string())),
    };
    match parsed {
        Some(ms) if ms.is_finite() && ms > 0.0 && ms <= 86_400_000.0 => {
            Ok(Some(Duration::from_millis(ms as u64)))
        }
        _ => Err(bad(value.map(|v| v.to_string()).unwrap_or_default())),
    }
}
