//! Prometheus metrics: counters and histograms the gateway records as executions and tool
//! calls finish, and gauges read at scrape time from the backends and the sandbox.
//!
//! The text is the Prometheus exposition format (0.0.4), written here: a handful of families
//! need no registry. Labels come from a bounded set: a tier, a status and an outcome are
//! sandgate's own words, a backend is configured, and a tool is counted under its name only
//! if the catalog lists it (any other name, which a script can make up, counts as `_other`),
//! with at most [`MAX_TOOL_SERIES`] tools named in all.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the duration histograms, in seconds.
const BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0,
];

/// The most distinct tools the tool-call families name; later ones count as `_other`.
pub const MAX_TOOL_SERIES: usize = 2000;

/// How a tool call ended, as the `outcome` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CallOutcome {
    /// The tool answered.
    Ok,
    /// The tool answered with an error result (`isError`).
    ErrorResult,
    /// The call failed (backend down, protocol error, result refused).
    Failed,
    /// The call ran out of time.
    Timeout,
    /// The policy refused it.
    Denied,
}

impl CallOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::ErrorResult => "error_result",
            CallOutcome::Failed => "failed",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Denied => "denied",
        }
    }
}

/// A histogram of durations.
#[derive(Debug, Default, Clone)]
struct Histogram {
    /// Observations at or below each bound of [`BUCKETS`].
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (bound, slot) in BUCKETS.iter().zip(self.buckets.iter_mut()) {
            if seconds <= *bound {
                *slot += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }

    fn write(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (bound, count) in BUCKETS.iter().zip(self.buckets) {
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.count
        );
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// What is counted between scrapes.
#[derive(Debug, Default)]
struct Counted {
    /// (tier, status) → executions.
    executions: BTreeMap<(&'static str, String), u64>,
    /// tier → durations.
    execution_seconds: BTreeMap<&'static str, Histogram>,
    /// (backend, tool, outcome) → calls.
    calls: BTreeMap<(String, String, CallOutcome), u64>,
    /// (backend, tool) → durations.
    call_seconds: BTreeMap<(String, String), Histogram>,
    /// The distinct (backend, tool) pairs named so far.
    named_tools: std::collections::BTreeSet<(String, String)>,
}

/// The gateway's counters and histograms.
#[derive(Debug, Default)]
pub struct Metrics {
    counted: Mutex<Counted>,
}

impl Metrics {
    /// Counts one finished execution.
    pub fn execution_finished(&self, tier: &'static str, status: &str, took: Duration) {
        let Ok(mut counted) = self.counted.lock() else {
            return;
        };
        *counted
            .executions
            .entry((tier, status.to_string()))
            .or_default() += 1;
        counted
            .execution_seconds
            .entry(tier)
            .or_default()
            .observe(took.as_secs_f64());
    }

    /// Counts one finished tool call. `known` says whether the catalog lists the tool; a name
    /// it does not list is counted as `_other`.
    pub fn call_finished(
        &self,
        backend: &str,
        tool: &str,
        known: bool,
        outcome: CallOutcome,
        took: Duration,
    ) {
        let Ok(mut counted) = self.counted.lock() else {
            return;
        };
        let pair = (backend.to_string(), tool.to_string());
        let named = known
            && (counted.named_tools.contains(&pair) || counted.named_tools.len() < MAX_TOOL_SERIES);
        let (backend, tool) = if named {
            counted.named_tools.insert(pair.clone());
            pair
        } else if known {
            (backend.to_string(), "_other".to_string())
        } else {
            ("_other".to_string(), "_other".to_string())
        };
        *counted
            .calls
            .entry((backend.clone(), tool.clone(), outcome))
            .or_default() += 1;
        counted
            .call_seconds
            .entry((backend, tool))
            .or_default()
            .observe(took.as_secs_f64());
    }

    /// The counted families in the exposition format.
    pub fn write(&self, out: &mut String) {
        let Ok(counted) = self.counted.lock() else {
            return;
        };
        family(
            out,
            "sandgate_executions_total",
            "counter",
            "call_tool_chain executions, by tier and status.",
        );
        for ((tier, status), n) in &counted.executions {
            let _ = writeln!(
                out,
                "sandgate_executions_total{{tier=\"{tier}\",status=\"{}\"}} {n}",
                escape(status)
            );
        }
        family(
            out,
            "sandgate_execution_duration_seconds",
            "histogram",
            "How long call_tool_chain executions took, by tier.",
        );
        for (tier, histogram) in &counted.execution_seconds {
            histogram.write(
                out,
                "sandgate_execution_duration_seconds",
                &format!("tier=\"{tier}\""),
            );
        }
        family(
            out,
            "sandgate_tool_calls_total",
            "counter",
            "Backend tool calls, by backend, tool and outcome.",
        );
        for ((backend, tool, outcome), n) in &counted.calls {
            let _ = writeln!(
                out,
                "sandgate_tool_calls_total{{backend=\"{}\",tool=\"{}\",outcome=\"{}\"}} {n}",
                escape(backend),
                escape(tool),
                outcome.as_str()
            );
        }
        family(
            out,
            "sandgate_tool_call_duration_seconds",
            "histogram",
            "How long backend tool calls took, by backend and tool.",
        );
        for ((backend, tool), histogram) in &counted.call_seconds {
            histogram.write(
                out,
                "sandgate_tool_call_duration_seconds",
                &format!("backend=\"{}\",tool=\"{}\"", escape(backend), escape(tool)),
            );
        }
    }
}

/// A family's `# HELP` and `# TYPE` lines.
pub(crate) fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A family of one unlabelled sample.
pub(crate) fn single(out: &mut String, name: &str, kind: &str, help: &str, value: u64) {
    family(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// A label value as the format wants it: backslash, quote and newline escaped.
pub(crate) fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_bounded_and_unknown_names_are_not_labels() {
        let metrics = Metrics::default();
        for i in 0..MAX_TOOL_SERIES + 10 {
            metrics.call_finished("b", &format!("t{i}"), true, CallOutcome::Ok, Duration::ZERO);
        }
        for i in 0..50 {
            let made_up = format!("made_up_{i}");
            metrics.call_finished("b", &made_up, false, CallOutcome::Failed, Duration::ZERO);
        }
        let mut text = String::new();
        metrics.write(&mut text);
        let series = text
            .lines()
            .filter(|l| l.starts_with("sandgate_tool_calls_total{"))
            .count();
        assert_eq!(
            series,
            MAX_TOOL_SERIES + 2,
            "the named tools, then `_other` twice"
        );
        assert!(!text.contains("made_up"));
        assert!(
            text.contains(
                r#"sandgate_tool_calls_total{backend="b",tool="_other",outcome="ok"} 10"#
            )
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
