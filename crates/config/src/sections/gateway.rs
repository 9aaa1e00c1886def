//! `[gateway]`: the gateway's own settings (how long first answers wait for starting backends).

use std::path::PathBuf;

use serde_json::Value;

use crate::error::ConfigError;
use crate::model::*;
use crate::walker::{Walker, duration, opt_string};

const GATEWAY_KEYS: &[&str] = &["cache_file", "startup_wait"];

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
        }
        Ok(config)
    }
}
