//! `[telemetry]`: where OpenTelemetry spans go. Off unless `otlp_endpoint` is set.

use serde_json::Value;

use crate::error::ConfigError;
use crate::walker::{Walker, opt_string};

/// OpenTelemetry export settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TelemetryConfig {
    /// Where spans are sent over OTLP/HTTP (protobuf): a collector's base URL
    /// (`http://localhost:4318`, to which `/v1/traces` is added) or its full traces URL.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the spans (default `sandgate`).
    pub service_name: Option<String>,
}

impl TelemetryConfig {
    /// The URL spans are posted to.
    pub fn traces_url(&self) -> Option<String> {
        let endpoint = self.otlp_endpoint.as_deref()?.trim_end_matches('/');
        Some(if endpoint.ends_with("/v1/traces") {
            endpoint.to_string()
        } else {
            format!("{endpoint}/v1/traces")
        })
    }
}

const TELEMETRY_KEYS: &[&str] = &["otlp_endpoint", "service_name"];

impl Walker<'_> {
    pub(crate) fn telemetry_section(
        &self,
        prefix: &str,
        value: Option<&Value>,
    ) -> Result<TelemetryConfig, ConfigError> {
        let Some(value) = value else {
            return Ok(TelemetryConfig::default());
        };
        let table = self.table(prefix, value)?;
        self.check_keys(prefix, table, TELEMETRY_KEYS, &[])?;
        let key = format!("{prefix}.otlp_endpoint");
        let otlp_endpoint = opt_string(self, &key, table.get("otlp_endpoint"))?;
        if let Some(endpoint) = &otlp_endpoint {
            self.http_url(&key, endpoint, "http://localhost:4318")?;
        }
        Ok(TelemetryConfig {
            otlp_endpoint,
            service_name: opt_string(
                self,
                &format!("{prefix}.service_name"),
                table.get("service_name"),
            )?,
        })
    }
}
