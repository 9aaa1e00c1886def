//! `[store]`: where records and full outputs are kept, and for how long.

use std::path::PathBuf;

use serde_json::Value;

use crate::error::ConfigError;
use crate::model::*;
use crate::walker::{Walker, opt_bool, opt_string};

const STORE_KEYS: &[&str] = &[
    "path",
    "output_retention_hours",
    "max_records",
    "record_arguments",
];

impl Walker<'_> {
    pub(crate) fn store_section(&self, value: Option<&Value>) -> Result<StoreConfig, ConfigError> {
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
}
