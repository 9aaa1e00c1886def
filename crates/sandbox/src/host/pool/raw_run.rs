//! What a run on a worker produced, before hints, and the error of a run the pool itself
//! could not carry out.

use crate::host::result::{CallRecord, ErrorKind, ExecError, LogLine};
use crate::wire::protocol::{GuestError, RunStats};

/// What a run on a worker produced, before hints.
pub(crate) struct RawRun {
    pub outcome: Result<String, GuestError>,
    pub logs: Vec<LogLine>,
    pub trace: Vec<CallRecord>,
    pub stats: RunStats,
    /// Whether the worker can take another run.
    pub worker_ok: bool,
}

impl RawRun {
    /// A run whose worker is gone (killed or failed): what it reported so far, and why.
    pub(crate) fn lost(
        kind: ErrorKind,
        name: &str,
        message: String,
        logs: Vec<LogLine>,
        trace: Vec<CallRecord>,
    ) -> RawRun {
        let error = GuestError {
            at: None,
            kind: Some(kind),
            name: name.into(),
            message,
            stack: String::new(),
            fault: None,
        };
        RawRun {
            outcome: Err(error),
            logs,
            trace,
            stats: RunStats::default(),
            worker_ok: false,
        }
    }
}

/// An error of the pool's own.
pub(super) fn internal(message: &str) -> ExecError {
    ExecError {
        kind: ErrorKind::Internal,
        message: message.to_string(),
        line: None,
        column: None,
        hint: None,
        fault: None,
    }
}
