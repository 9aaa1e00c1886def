//! What an execution returns: the value, the logs, a call trace, stats, and an error that
//! says what kind of failure it was, where in the user's code, and how to fix it.

use serde::Serialize;
use serde_json::Value;

pub use crate::wire::protocol::{BackendCondition, ErrorKind, Fault};

/// Why an execution failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExecError {
    /// The kind of failure.
    pub kind: ErrorKind,
    /// What happened.
    pub message: String,
    /// 1-based line in the user's code, when known.
    pub line: Option<u32>,
    /// 1-based column in the user's code, when known.
    pub column: Option<u32>,
    /// How to fix it, when we know.
    pub hint: Option<String>,
    /// What the code reached for and could not use, as the engine classified it: what the
    /// gateway's notes match on (never shown: the message says it).
    #[serde(skip)]
    pub fault: Option<Fault>,
}

/// One console line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogLine {
    /// `log`, `info`, `warn`, `error` or `debug`.
    pub level: String,
    /// The formatted message.
    pub message: String,
}

/// One call the code made; the trace lists them in the order the code made them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallRecord {
    /// `backend.tool`, or the host function's name.
    pub name: String,
    /// Size of the JSON arguments.
    pub args_bytes: usize,
    /// Milliseconds from the start of the execution to the call.
    pub started_ms: f64,
    /// How long it took, or `None` if it never finished.
    pub duration_ms: Option<f64>,
    /// Whether it succeeded (a tool result with `isError` is a failure).
    pub ok: bool,
    /// Size of the JSON result.
    pub result_bytes: usize,
    /// The failure, for calls that failed.
    pub error: Option<String>,
    /// The arguments as sent, when the execution keeps them
    /// ([`Limits::max_recorded_argument_bytes`](crate::wire::limits::Limits)); cut, and marked so, past
    /// their bound.
    pub arguments: Option<String>,
    /// What its backend was, when it failed because of it.
    pub condition: Option<BackendCondition>,
}

/// What a call list keeps of one call's arguments, within what is left of the execution's
/// `budget` (which it lowers): `None` once the budget is spent.
pub fn kept_arguments(args: &str, budget: &mut usize) -> Option<String> {
    if *budget == 0 {
        return None;
    }
    let room = (*budget).min(crate::wire::limits::RECORDED_ARGUMENT_BYTES_PER_CALL);
    let kept = if args.len() <= room {
        args.to_string()
    } else {
        let end = crate::wire::encoding::floor_boundary(args, room);
        format!("{}… (cut: {} bytes in all)", &args[..end], args.len())
    };
    *budget = budget.saturating_sub(kept.len());
    Some(kept)
}

/// Resource use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ExecStats {
    /// Wall time, in milliseconds, including queueing.
    pub wall_ms: f64,
    /// QuickJS heap in use at the end, in bytes (0 if the worker was killed).
    pub memory_bytes: u64,
    /// Calls made.
    pub calls: u32,
}

/// The whole outcome of one execution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExecutionResult {
    /// The returned value (`null` for none), when the execution succeeded.
    pub value: Option<Value>,
    /// Console output, in order.
    pub logs: Vec<LogLine>,
    /// Every call, finished or not.
    pub trace: Vec<CallRecord>,
    /// Resource use.
    pub stats: ExecStats,
    /// The failure, if any.
    pub error: Option<ExecError>,
}

impl ExecutionResult {
    /// A result that failed before any code ran.
    pub fn failed(error: ExecError) -> Self {
        ExecutionResult {
            value: None,
            logs: vec![],
            trace: vec![],
            stats: ExecStats::default(),
            error: Some(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorKind;

    #[test]
    fn as_str_matches_the_json_name() {
        for kind in [
            ErrorKind::Syntax,
            ErrorKind::Runtime,
            ErrorKind::Timeout,
            ErrorKind::Memory,
            ErrorKind::Stack,
            ErrorKind::ToolDenied,
            ErrorKind::ToolFailed,
            ErrorKind::OutputLimit,
            ErrorKind::Busy,
            ErrorKind::Internal,
        ] {
            assert_eq!(serde_json::to_value(kind).ok(), Some(kind.as_str().into()));
        }
    }

    use super::kept_arguments;
    use crate::wire::limits::RECORDED_ARGUMENT_BYTES_PER_CALL;

    #[test]
    fn kept_arguments_are_cut_per_call_and_stop_when_the_budget_is_spent() {
        let mut budget = 0;
        assert_eq!(kept_arguments("{}", &mut budget), None, "off by default");
        let mut budget = 30 * 1024;
        assert_eq!(kept_arguments(r#"{"a":1}"#, &mut budget).as_deref(), Some(r#"{"a":1}"#));
        let long = format!("{{\"text\":\"{}\"}}", "é".repeat(20 * 1024));
        let kept = kept_arguments(&long, &mut budget).unwrap_or_default();
        assert!(kept.len() < RECORDED_ARGUMENT_BYTES_PER_CALL + 64, "{}", kept.len());
        assert!(kept.ends_with(&format!("… (cut: {} bytes in all)", long.len())), "{kept}");
        // What is left is less than a call's bound, and then nothing is left.
        let third = kept_arguments(&long, &mut budget).unwrap_or_default();
        assert!(third.len() < RECORDED_ARGUMENT_BYTES_PER_CALL, "{}", third.len());
        assert_eq!(budget, 0);
        assert_eq!(kept_arguments(r#"{"a":1}"#, &mut budget), None);
    }
}
