//! `[gateway]`: the gateway's own settings (how long first answers wait for starting backends).

use std::path::PathBuf;

use serde_json::Value;

use crate::error::ConfigError;
use crate::model::*;
use crate::walker::{Walker, duration, opt_string};

const GATEWAY_KEYS: &[&str] = &["cache_file", "startup_wait", "pin"];

impl Walker<'_> {
    pub(crate) fn gateway_section(&self, value: Option<&Value>) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        if let Some(value) = value {
            let table = self.table("gateway", value)?;
            self.check_keys("gateway", table, GATEWAY_KEYS, &[])?;
            config.cache_file =
                opt_string(self, "gateway.cache_file", table.get("cache_file"))?.map(PathBuf::from);
            config.startup_wait =
                duration(self, "gateway.startup_wait", table.get("startup_wait"))?;
            if let Some(pin) = self.pin_mode("gateway.pin", table.get("pin"), false)? {
                config.pin = pin;
            }
        }
        Ok(config)
    }

    /// A `pin` key: `"first_use"`, `"review"`, or (for a backend, `off_allowed`) `false`;
    /// `true` is `"first_use"`.
    pub(crate) fn pin_mode(
        &self,
        key: &str,
        value: Option<&Value>,
        off_allowed: bool,
    ) -> Result<Option<PinMode>, ConfigError> {
        let fix = if off_allowed {
            "write \"first_use\" (pin each tool on first sight, the default), \"review\" (hold every new tool until `sandgate pins accept`), or false (a backend whose tools change by design)"
        } else {
            "write \"first_use\" (pin each tool on first sight, the default) or \"review\" (hold every new tool until `sandgate pins accept`); `pin = false` is written on a backend of its own"
        };
        match value {
            None => Ok(None),
            Some(Value::Bool(true)) => Ok(Some(PinMode::FirstUse)),
            Some(Value::Bool(false)) if off_allowed => Ok(Some(PinMode::Off)),
            Some(Value::String(text)) if text == "first_use" => Ok(Some(PinMode::FirstUse)),
            Some(Value::String(text)) if text == "review" => Ok(Some(PinMode::Review)),
            Some(other) => Err(self.invalid(key, format!("is {other}"), fix)),
        }
    }
}
