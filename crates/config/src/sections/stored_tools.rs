//! `[stored_tools]`: where stored tools live and whether they are listed as plain MCP tools.

use serde_json::Value;

use crate::error::ConfigError;
use crate::model::*;
use crate::walker::{Walker, opt_bool};

impl Walker<'_> {
    pub(crate) fn stored_tools_section(
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
}
