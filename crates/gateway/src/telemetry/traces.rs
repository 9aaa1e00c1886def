//! OpenTelemetry spans: one per `call_tool_chain` execution and one per tool call, named and
//! tagged with the semantic conventions for tools (`gen_ai.tool.name`) and MCP
//! (`mcp.method.name`). A W3C trace context a client sends in `_meta` (`traceparent`,
//! `tracestate`) is the execution's parent, and each tool call's context is sent on to its
//! backend in the same `_meta` keys.
//!
//! Only the API is used here: the binary installs the exporter (OTLP) and the W3C propagator,
//! and says so with [`set_exporting`]. Without an exporter no span is built at all (one cost
//! several allocations per call for nothing), and a context that came in still goes out: a span
//! that records nothing would have carried the same trace and span id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue, global};

/// The instrumentation scope of sandgate's spans.
const SCOPE: &str = "sandgate";

/// The W3C keys of a trace context in `_meta`.
const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

/// Whether spans are exported (an exporter is installed).
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Says that an exporter is installed, so spans are built from now on.
pub fn set_exporting(exporting: bool) {
    EXPORTING.store(exporting, Ordering::Relaxed);
}

fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// The context a request's `_meta` carried, or an empty one.
pub fn from_meta(traceparent: Option<&str>, tracestate: Option<&str>) -> Context {
    let Some(traceparent) = traceparent else {
        return Context::new();
    };
    let mut carrier = HashMap::from([(TRACEPARENT.to_string(), traceparent.to_string())]);
    if let Some(state) = tracestate {
        carrier.insert(TRACESTATE.to_string(), state.to_string());
    }
    global::get_text_map_propagator(|propagator| propagator.extract(&carrier))
}

/// The `traceparent` and `tracestate` to send with a request made under `cx`, if it is in a
/// trace.
pub fn to_meta(cx: &Context) -> Option<(String, Option<String>)> {
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier: HashMap<String, String> = HashMap::new();
    global::get_text_map_propagator(|propagator| propagator.inject_context(cx, &mut carrier));
    let traceparent = carrier.remove(TRACEPARENT)?;
    Some((
        traceparent,
        carrier.remove(TRACESTATE).filter(|s| !s.is_empty()),
    ))
}

/// Starts the span of one execution under `parent`; returns the context it runs in.
pub fn start_execution(parent: &Context, execution_id: &str, profile: &str) -> Context {
    if !exporting() {
        return parent.clone();
    }
    let tracer = global::tracer(SCOPE);
    let span = tracer
        .span_builder("tools/call call_tool_chain")
        .with_kind(SpanKind::Server)
        .with_attributes([
            KeyValue::new("mcp.method.name", "tools/call"),
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", "call_tool_chain"),
            KeyValue::new("sandgate.execution.id", execution_id.to_string()),
            KeyValue::new("sandgate.profile", profile.to_string()),
        ])
        .start_with_context(&tracer, parent);
    parent.with_span(span)
}

/// Ends an execution's span with how it went.
pub fn end_execution(cx: &Context, tier: &'static str, status: &str, error_kind: Option<&str>) {
    if !exporting() {
        return;
    }
    let span = cx.span();
    span.set_attribute(KeyValue::new("sandgate.tier", tier));
    span.set_attribute(KeyValue::new("sandgate.status", status.to_string()));
    if let Some(kind) = error_kind {
        span.set_attribute(KeyValue::new("error.type", kind.to_string()));
        span.set_status(Status::error(kind.to_string()));
    }
    span.end();
}

/// Starts the span of one tool call under `parent`; returns the context it runs in.
pub fn start_tool_call(parent: &Context, backend: &str, tool: &str) -> Context {
    if !exporting() {
        return parent.clone();
    }
    let tracer = global::tracer(SCOPE);
    let span = tracer
        .span_builder(format!("tools/call {tool}"))
        .with_kind(SpanKind::Client)
        .with_attributes([
            KeyValue::new("mcp.method.name", "tools/call"),
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", tool.to_string()),
            KeyValue::new("sandgate.backend", backend.to_string()),
        ])
        .start_with_context(&tracer, parent);
    parent.with_span(span)
}

/// Ends a tool call's span; `error` names what went wrong (`error.type`).
pub fn end_tool_call(cx: &Context, error: Option<&'static str>) {
    if !exporting() {
        return;
    }
    let span = cx.span();
    if let Some(kind) = error {
        span.set_attribute(KeyValue::new("error.type", kind));
        span.set_status(Status::error(kind));
    }
    span.end();
}
