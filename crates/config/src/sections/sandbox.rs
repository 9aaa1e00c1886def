//! `[sandbox]`: the worker pool and the limits of one execution.

use serde_json::Value;

use crate::error::ConfigError;
use crate::model::*;
use crate::walker::{Walker, duration, opt_bool, opt_string};

const SANDBOX_KEYS: &[&str] = &[
    "engine",
    "python",
    "deno",
    "require_lockdown",
    "workers",
    "max_workers",
    "max_executions",
    "timeout",
];

impl Walker<'_> {
    pub(crate) fn sandbox_section(
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
        let timeout = duration(self, &format!("{key}.timeout"), table.get("timeout"))?;
        if let Some(timeout) =
            timeout.filter(|t| *t < std::time::Duration::from_millis(100) || t.as_secs() > 86_400)
        {
            return Err(self.invalid(
                &format!("{key}.timeout"),
                format!("is {timeout:?}"),
                "give the longest an execution may run, between 100ms and 24h, e.g. \"10m\"",
            ));
        }
        let engine = match opt_string(self, &format!("{key}.engine"), table.get("engine"))? {
            None => sandgate_policy::Engine::Quickjs,
            Some(name) => sandgate_policy::Engine::named(&name).ok_or_else(|| {
                self.invalid(
                    &format!("{key}.engine"),
                    format!("is \"{name}\""),
                    "write \"quickjs\" (the default) or \"v8\"",
                )
            })?,
        };
        let deno = match opt_string(self, &format!("{key}.deno"), table.get("deno"))? {
            Some(path) if path.is_empty() || path.contains('\0') => {
                return Err(self.invalid(
                    &format!("{key}.deno"),
                    "is not a path",
                    "give the deno executable: a path (a relative one is read from this file's directory), or a bare name looked up on PATH",
                ));
            }
            Some(path) => Some(std::path::PathBuf::from(path)),
            None => None,
        };
        Ok(SandboxConfig {
            python: opt_bool(self, &format!("{key}.python"), table.get("python"))?.unwrap_or(true),
            engine,
            deno,
            timeout,
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
}
