//! Installing OpenTelemetry for `sandgate serve` and `sandgate run`: the W3C trace-context
//! propagator always (so a trace a client sends reaches the backends even when nothing is
//! exported), and, with `[telemetry] otlp_endpoint`, an OTLP/HTTP exporter of the gateway's
//! spans, batched on a thread of its own so exporting never waits on the async threads.

use std::time::Duration;

use anyhow::Context as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use sandgate_config::TelemetryConfig;

/// How long finished spans wait before they are sent in a batch.
const EXPORT_DELAY: Duration = Duration::from_millis(500);
/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long shutting down waits for the last spans to leave (sandgate stops within 2 s).
const FLUSH_TIMEOUT: Duration = Duration::from_millis(500);

/// The installed exporter; [`Telemetry::shut_down`] sends what is left.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

/// Installs the propagator, and the exporter `config` asks for.
pub fn install(config: &TelemetryConfig) -> anyhow::Result<Telemetry> {
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let Some(url) = config.traces_url() else {
        return Ok(Telemetry { provider: None });
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url.clone())
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .with_context(|| format!("cannot set up the OTLP exporter to {url}"))?;
    let batches = BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_scheduled_delay(EXPORT_DELAY)
                .build(),
        )
        .build();
    let service = config
        .service_name
        .clone()
        .unwrap_or_else(|| "sandgate".into());
    let provider = SdkTracerProvider::builder()
        .with_span_processor(batches)
        .with_resource(Resource::builder().with_service_name(service).build())
        .build();
    opentelemetry::global::set_tracer_provider(provider.clone());
    sandgate_gateway::telemetry::traces::set_exporting(true);
    tracing::info!("exporting OpenTelemetry spans to {url}");
    Ok(Telemetry {
        provider: Some(provider),
    })
}

impl Telemetry {
    /// Sends the spans still waiting, within a bound, off the async threads.
    pub async fn shut_down(self) {
        let Some(provider) = self.provider else {
            return;
        };
        let flushed =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(FLUSH_TIMEOUT));
        if let Ok(Ok(Err(e))) = tokio::time::timeout(FLUSH_TIMEOUT * 2, flushed).await {
            tracing::warn!("the last OpenTelemetry spans were not sent: {e}");
        }
    }
}
