//! Resource limits of one execution. Every resource the guest can consume has a named default;
//! a caller may lower any of them but never raise one above what the operator configured.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default wall-clock time for one execution.
pub const DEFAULT_WALL_TIME: Duration = Duration::from_secs(30);
/// Default QuickJS heap limit.
pub const DEFAULT_MEMORY_BYTES: usize = 64 * 1024 * 1024;
/// Default JavaScript stack limit.
pub const DEFAULT_STACK_BYTES: usize = 1024 * 1024;
/// Default number of tool calls per execution.
pub const DEFAULT_MAX_TOOL_CALLS: u32 = 1000;
/// Default number of tool calls in flight at once.
pub const DEFAULT_MAX_CONCURRENT_CALLS: u32 = 16;
/// Default size of the serialized (JSON) result, in bytes: the raw limit that stops a runaway
/// result. Below it a large result is shaped for the model and stored whole, never refused; the
/// response's own size is the caller's `max_output_size`, a separate limit.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 16 * 1024 * 1024;
/// Default total size of captured logs, in bytes; every line also costs
/// [`LOG_LINE_OVERHEAD_BYTES`], so empty lines count.
pub const DEFAULT_MAX_LOG_BYTES: usize = 1024 * 1024;
/// Default number of captured log lines, empty ones included.
pub const DEFAULT_MAX_LOG_LINES: u32 = 10_000;
/// What each log line costs against the byte limit beyond its text.
pub const LOG_LINE_OVERHEAD_BYTES: usize = 16;
/// Default number of pending timers.
pub const DEFAULT_MAX_TIMERS: u32 = 10_000;
/// Default size of one call's arguments, in JSON bytes: checked in the worker before the call
/// leaves it (the host checks each backend's own limit again).
pub const DEFAULT_MAX_CALL_ARGS_BYTES: usize = 4 * 1024 * 1024;
/// Default size of the code of one execution, in bytes. Model-written code is a few KiB; the
/// limit bounds what the host parses (and the stack it parses on, see `nesting`).
pub const DEFAULT_MAX_CODE_BYTES: usize = 256 * 1024;

/// How many bytes of one call's arguments the call list keeps, when it keeps arguments at all
/// (see [`Limits::max_recorded_argument_bytes`]); longer arguments are cut.
pub const RECORDED_ARGUMENT_BYTES_PER_CALL: usize = 16 * 1024;

/// Limits for one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Wall-clock time, in milliseconds.
    pub wall_ms: u64,
    /// QuickJS heap, in bytes.
    pub memory_bytes: usize,
    /// JavaScript stack, in bytes.
    pub stack_bytes: usize,
    /// Tool (and host function) calls.
    pub max_tool_calls: u32,
    /// Calls in flight at once; more wait in the worker.
    pub max_concurrent_calls: u32,
    /// Serialized result, in bytes (the raw limit; see `DEFAULT_MAX_RESULT_BYTES`).
    pub max_result_bytes: usize,
    /// Captured logs, in bytes.
    pub max_log_bytes: usize,
    /// Captured log lines.
    pub max_log_lines: u32,
    /// Pending timers.
    pub max_timers: u32,
    /// The code's size, in bytes.
    pub max_code_bytes: usize,
    /// One call's arguments, in JSON bytes.
    pub max_call_args_bytes: usize,
    /// The calls' arguments the call list keeps, in bytes over the whole execution (each
    /// call's cut at `RECORDED_ARGUMENT_BYTES_PER_CALL`); 0, the default, keeps none. The
    /// host holds them, never the worker (`[store] record_arguments` turns it on).
    pub max_recorded_argument_bytes: usize,
    /// Whether each tool call says where in the code it was made (its line, which a call a
    /// person must approve shows them). Off, the default, the worker never reads a call's site.
    #[serde(default)]
    pub report_call_sites: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            wall_ms: DEFAULT_WALL_TIME.as_millis() as u64,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            stack_bytes: DEFAULT_STACK_BYTES,
            max_tool_calls: DEFAULT_MAX_TOOL_CALLS,
            max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            max_log_bytes: DEFAULT_MAX_LOG_BYTES,
            max_log_lines: DEFAULT_MAX_LOG_LINES,
            max_timers: DEFAULT_MAX_TIMERS,
            max_code_bytes: DEFAULT_MAX_CODE_BYTES,
            max_call_args_bytes: DEFAULT_MAX_CALL_ARGS_BYTES,
            max_recorded_argument_bytes: 0,
            report_call_sites: false,
        }
    }
}

/// A caller's request to lower some limits. Unset fields keep the operator's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitRequest {
    /// Lower wall time.
    pub wall_ms: Option<u64>,
    /// Lower heap.
    pub memory_bytes: Option<usize>,
    /// Lower the raw result limit.
    pub max_result_bytes: Option<usize>,
    /// Lower tool-call count.
    pub max_tool_calls: Option<u32>,
}

impl Limits {
    /// The wall time as a duration.
    pub fn wall_time(&self) -> Duration {
        Duration::from_millis(self.wall_ms)
    }

    /// These limits, lowered by a caller's request. A request above a limit is ignored for
    /// that limit: a caller can only narrow.
    pub fn lowered(&self, request: &LimitRequest) -> Limits {
        Limits {
            wall_ms: request
                .wall_ms
                .map_or(self.wall_ms, |v| v.min(self.wall_ms)),
            memory_bytes: request
                .memory_bytes
                .map_or(self.memory_bytes, |v| v.min(self.memory_bytes)),
            max_result_bytes: request
                .max_result_bytes
                .map_or(self.max_result_bytes, |v| v.min(self.max_result_bytes)),
            max_tool_calls: request
                .max_tool_calls
                .map_or(self.max_tool_calls, |v| v.min(self.max_tool_calls)),
            ..*self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_can_only_lower() {
        let base = Limits::default();
        let lowered = base.lowered(&LimitRequest {
            wall_ms: Some(1000),
            memory_bytes: Some(usize::MAX),
            ..Default::default()
        });
        assert_eq!(lowered.wall_ms, 1000);
        assert_eq!(
            lowered.memory_bytes, DEFAULT_MEMORY_BYTES,
            "a raise is ignored"
        );
    }
}
