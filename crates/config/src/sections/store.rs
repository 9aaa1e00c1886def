//! `[store]`: where records and full outputs are kept, and for how long.

use std::path::PathBuf;

use serde_json::Value;

use crate::error::ConfigError;
use crate::model::*;
use crate::secret::Secret;
use crate::walker::{Walker, opt_bool, opt_string};

const STORE_KEYS: &[&str] = &[
    "backend",
    "path",
    "url",
    "ca_file",
    "rate_limit_when_unreachable",
    "output_retention_hours",
    "max_records",
    "record_arguments",
    "records",
];

impl Walker<'_> {
    pub(crate) fn store_section(&self, value: Option<&Value>) -> Result<StoreConfig, ConfigError> {
        let Some(value) = value else {
            return Ok(StoreConfig::default());
        };
        let table = self.table("store", value)?;
        self.check_keys("store", table, STORE_KEYS, &[])?;
        let backend = match opt_string(self, "store.backend", table.get("backend"))?.as_deref() {
            None | Some("sqlite") => StoreBackend::Sqlite,
            Some("postgres") => StoreBackend::Postgres,
            Some(other) => {
                return Err(self.invalid(
                    "store.backend",
                    format!("is \"{other}\""),
                    "use \"sqlite\" (one machine, the default) or \"postgres\" (replicas)",
                ));
            }
        };
        let url = opt_string(self, "store.url", table.get("url"))?;
        match (backend, &url) {
            (StoreBackend::Postgres, None) => {
                return Err(self.invalid(
                    "store.url",
                    "is missing".to_string(),
                    "backend = \"postgres\" needs url = \"${DATABASE_URL}\" (a postgres:// URL, from the environment)",
                ));
            }
            (StoreBackend::Sqlite, Some(_)) => {
                return Err(self.invalid(
                    "store.url",
                    "is set while backend is sqlite".to_string(),
                    "add backend = \"postgres\" to use it, or remove url (SQLite takes path)",
                ));
            }
            _ => {}
        }
        if backend == StoreBackend::Postgres && table.get("path").is_some() {
            return Err(self.invalid(
                "store.path",
                "is set while backend is postgres".to_string(),
                "remove path (it is the SQLite file), or set backend = \"sqlite\"",
            ));
        }
        let rate_limit_when_unreachable = match opt_string(
            self,
            "store.rate_limit_when_unreachable",
            table.get("rate_limit_when_unreachable"),
        )?
        .as_deref()
        {
            None | Some("local") => RateLimitFallback::Local,
            Some("open") => RateLimitFallback::Open,
            Some("closed") => RateLimitFallback::Closed,
            Some(other) => {
                return Err(self.invalid(
                    "store.rate_limit_when_unreachable",
                    format!("is \"{other}\""),
                    "use \"local\" (each replica counts alone meanwhile, the default), \"open\" or \"closed\"",
                ));
            }
        };
        let records = match opt_string(self, "store.records", table.get("records"))?.as_deref() {
            None | Some("batched") => RecordWrites::Batched,
            Some("before_response") => RecordWrites::BeforeResponse,
            Some(other) => {
                return Err(self.invalid(
                    "store.records",
                    format!("is \"{other}\""),
                    "use \"batched\" (written just after the response, the default) or \"before_response\" (every answer waits for its record)",
                ));
            }
        };
        let mut store = StoreConfig {
            backend,
            records,
            rate_limit_when_unreachable,
            url: url.map(Secret::from),
            ca_file: opt_string(self, "store.ca_file", table.get("ca_file"))?.map(PathBuf::from),
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
