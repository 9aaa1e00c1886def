//! What the gateway tells operators about itself: Prometheus metrics (`/metrics`) and
//! OpenTelemetry spans. Counters are recorded where executions and tool calls finish (the
//! chain and the door); gauges are read when scraped, from the backends and the sandbox.

mod metrics;
pub mod traces;

pub use metrics::{CallOutcome, MAX_TOOL_SERIES, Metrics};

use std::fmt::Write as _;

use sandgate_upstream::{BackendState, BackendStatus};

use metrics::{escape, family, single};

/// Every backend state, in the order `/metrics` lists them.
const STATES: [(BackendState, &str); 5] = [
    (BackendState::Disabled, "disabled"),
    (BackendState::Starting, "starting"),
    (BackendState::Ready, "ready"),
    (BackendState::Restarting, "restarting"),
    (BackendState::Failed, "failed"),
];

/// What `/metrics` reads when scraped, besides the counters.
pub(crate) struct Gauges<'a> {
    /// Every backend's status.
    pub statuses: Vec<BackendStatus>,
    /// `call_tool_chain` executions in progress.
    pub running: u64,
    /// The sandbox, when executions run.
    pub sandbox: Option<&'a sandgate_sandbox::Sandbox>,
    /// Seconds since start.
    pub uptime_secs: u64,
    /// Each per-user backend's open users' connections, by name (none when no backend is
    /// per-user).
    pub user_connections: Vec<(String, usize)>,
    /// Questions waiting for a person (approvals, backends' own requests).
    pub questions_waiting: usize,
    /// Executions held detached from their request (tasks, yielded, parked on a question).
    pub detached: usize,
}

/// The metrics in the Prometheus text format: `metrics`' counters, then `gauges`.
pub(crate) fn render(metrics: &Metrics, gauges: &Gauges<'_>) -> String {
    let mut out = String::with_capacity(8 * 1024);
    metrics.write(&mut out);
    write_backends(&mut out, gauges);
    single(
        &mut out,
        "sandgate_executions_running",
        "gauge",
        "call_tool_chain executions in progress.",
        gauges.running,
    );
    single(
        &mut out,
        "sandgate_questions_waiting",
        "gauge",
        "Questions waiting for a person: approvals, and backends' own requests passed on.",
        gauges.questions_waiting as u64,
    );
    single(
        &mut out,
        "sandgate_executions_detached",
        "gauge",
        "Executions held apart from their request: tasks, yielded runs, and runs parked on a question (finished ones are kept a while for their waiter).",
        gauges.detached as u64,
    );
    if let Some(sandbox) = gauges.sandbox {
        write_sandbox(&mut out, sandbox);
    }
    single(
        &mut out,
        "sandgate_uptime_seconds",
        "gauge",
        "Seconds since the gateway started.",
        gauges.uptime_secs,
    );
    out
}

/// The backends' gauges: how many are in each state, and each one's state, restarts, tools and
/// users' connections.
fn write_backends(out: &mut String, gauges: &Gauges<'_>) {
    let statuses = &gauges.statuses;
    family(
        out,
        "sandgate_backends",
        "gauge",
        "Configured backends, by state.",
    );
    for (state, name) in STATES {
        let n = statuses.iter().filter(|s| s.state == state).count();
        let _ = writeln!(out, "sandgate_backends{{state=\"{name}\"}} {n}");
    }
    let per_backend = [
        (
            "sandgate_backend_up",
            "gauge",
            "1 when a backend is connected and its tools are listed, else 0.",
            (|s: &BackendStatus| u64::from(s.state == BackendState::Ready))
                as fn(&BackendStatus) -> u64,
        ),
        (
            "sandgate_backend_restarts_total",
            "counter",
            "Restarts of each backend since sandgate started.",
            |s| u64::from(s.restarts),
        ),
        (
            "sandgate_backend_tools",
            "gauge",
            "Tools each backend exposes.",
            |s| s.tools.len() as u64,
        ),
    ];
    for (name, kind, help, value) in per_backend {
        family(out, name, kind, help);
        for s in statuses {
            let _ = writeln!(
                out,
                "{name}{{backend=\"{}\"}} {}",
                escape(&s.name),
                value(s)
            );
        }
    }
    if !gauges.user_connections.is_empty() {
        family(
            out,
            "sandgate_backend_user_connections",
            "gauge",
            "Users' own connections (processes, for stdio) open to each per-user backend.",
        );
        for (backend, open) in &gauges.user_connections {
            let _ = writeln!(
                out,
                "sandgate_backend_user_connections{{backend=\"{}\"}} {open}",
                escape(backend)
            );
        }
    }
}

/// The sandbox's gauges: its workers, the executions on them, and backstop kills.
fn write_sandbox(out: &mut String, sandbox: &sandgate_sandbox::Sandbox) {
    let workers = sandbox.workers();
    let extra = workers.iter().filter(|w| w.extra).count();
    family(
        out,
        "sandgate_sandbox_workers",
        "gauge",
        "Sandbox worker processes, by kind (warm pool or extra).",
    );
    let _ = writeln!(
        out,
        "sandgate_sandbox_workers{{kind=\"pool\"}} {}",
        workers.len() - extra
    );
    let _ = writeln!(out, "sandgate_sandbox_workers{{kind=\"extra\"}} {extra}");
    single(
        out,
        "sandgate_sandbox_executions_in_flight",
        "gauge",
        "Executions on the sandbox's workers.",
        workers.iter().map(|w| w.executions as u64).sum(),
    );
    single(
        out,
        "sandgate_sandbox_backstop_kills_total",
        "counter",
        "Workers killed because one step outlived every deadline on them.",
        sandbox.backstop_kills() as u64,
    );
}
