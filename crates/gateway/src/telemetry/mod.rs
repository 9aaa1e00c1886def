//! What the gateway tells operators about itself: Prometheus metrics (`/metrics`) and
//! OpenTelemetry spans. Counters are recorded where executions and tool calls finish (the
//! chain and the door); gauges are read when scraped, from the backends and the sandbox.

mod metrics;
pub mod traces;

pub use metrics::{CallOutcome, MAX_TOOL_SERIES, Metrics};

use std::fmt::Write as _;

use sandgate_upstream::BackendState;

use crate::Gateway;
use metrics::{escape, family};

/// Every backend state, in the order `/metrics` lists them.
const STATES: [(BackendState, &str); 5] = [
    (BackendState::Disabled, "disabled"),
    (BackendState::Starting, "starting"),
    (BackendState::Ready, "ready"),
    (BackendState::Restarting, "restarting"),
    (BackendState::Failed, "failed"),
];

impl Gateway {
    /// The metrics in the Prometheus text format.
    pub fn metrics_text(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        self.metrics.write(&mut out);
        let statuses = self.manager().statuses();
        family(
            &mut out,
            "sandgate_backends",
            "gauge",
            "Configured backends, by state.",
        );
        for (state, name) in STATES {
            let n = statuses.iter().filter(|s| s.state == state).count();
            let _ = writeln!(out, "sandgate_backends{{state=\"{name}\"}} {n}");
        }
        family(
            &mut out,
            "sandgate_backend_up",
            "gauge",
            "1 when a backend is connected and its tools are listed, else 0.",
        );
        for s in &statuses {
            let up = u8::from(s.state == BackendState::Ready);
            let _ = writeln!(
                out,
                "sandgate_backend_up{{backend=\"{}\"}} {up}",
                escape(&s.name)
            );
        }
        family(
            &mut out,
            "sandgate_backend_restarts_total",
            "counter",
            "Restarts of each backend since sandgate started.",
        );
        for s in &statuses {
            let _ = writeln!(
                out,
                "sandgate_backend_restarts_total{{backend=\"{}\"}} {}",
                escape(&s.name),
                s.restarts
            );
        }
        family(
            &mut out,
            "sandgate_backend_tools",
            "gauge",
            "Tools each backend exposes.",
        );
        for s in &statuses {
            let _ = writeln!(
                out,
                "sandgate_backend_tools{{backend=\"{}\"}} {}",
                escape(&s.name),
                s.tools.len()
            );
        }
        family(
            &mut out,
            "sandgate_executions_running",
            "gauge",
            "call_tool_chain executions in progress.",
        );
        let _ = writeln!(
            out,
            "sandgate_executions_running {}",
            self.running_executions()
        );
        if let Some(chain) = self.chain() {
            let workers = chain.sandbox.workers();
            family(
                &mut out,
                "sandgate_sandbox_workers",
                "gauge",
                "Sandbox worker processes, by kind (warm pool or extra).",
            );
            let extra = workers.iter().filter(|w| w.extra).count();
            let _ = writeln!(
                out,
                "sandgate_sandbox_workers{{kind=\"pool\"}} {}",
                workers.len() - extra
            );
            let _ = writeln!(out, "sandgate_sandbox_workers{{kind=\"extra\"}} {extra}");
            family(
                &mut out,
                "sandgate_sandbox_executions_in_flight",
                "gauge",
                "Executions on the sandbox's workers.",
            );
            let _ = writeln!(
                out,
                "sandgate_sandbox_executions_in_flight {}",
                workers.iter().map(|w| w.executions).sum::<usize>()
            );
            family(
                &mut out,
                "sandgate_sandbox_backstop_kills_total",
                "counter",
                "Workers killed because one step outlived every deadline on them.",
            );
            let _ = writeln!(
                out,
                "sandgate_sandbox_backstop_kills_total {}",
                chain.sandbox.backstop_kills()
            );
        }
        family(
            &mut out,
            "sandgate_uptime_seconds",
            "gauge",
            "Seconds since the gateway started.",
        );
        let _ = writeln!(out, "sandgate_uptime_seconds {}", self.uptime_secs());
        out
    }

    /// Whether every enabled backend has had its first connection attempt (`/readyz`), and
    /// how many have not.
    pub fn readiness(&self) -> (bool, usize) {
        let starting = self
            .manager()
            .statuses()
            .iter()
            .filter(|s| s.state == BackendState::Starting)
            .count();
        (starting == 0, starting)
    }
}
