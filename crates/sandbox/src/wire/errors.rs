//! What a run that ends on a limit says: the same words from the worker (which enforces the
//! limit on code it runs) and from the host's direct tiers (which enforce it on a call they
//! answer without the worker), so every tier reads the same.

use crate::wire::protocol::{ErrorKind, GuestError};

/// How the error of a result that holds a Promise starts (the host adds the calls still out).
pub const PROMISE_IN_RESULT: &str = "the result holds a Promise";
/// How a timeout says the deadline found the code computing (not waiting for a call or a
/// timer); the gateway's engine advice looks for it.
pub const TIMED_OUT_COMPUTING: &str = "while its code was computing";
/// How a call refused before it left says so (`arguments_too_large`); its hint looks for it.
pub const NOT_SENT: &str = "so the call was not sent";

/// The guest error of an execution that ran out of time.
pub fn timeout_guest_error(wall_ms: u64, in_flight: u32) -> GuestError {
    GuestError {
        at: None,
        kind: Some(ErrorKind::Timeout),
        name: "TimeoutError".into(),
        message: format!(
            "the execution ran out of time ({wall_ms} ms) with {in_flight} call(s) still in flight"
        ),
        stack: String::new(),
        fault: None,
    }
}

/// The guest error of an execution whose time ran out before the V8 engine had an isolate
/// free for it: none of its code ran, so it is not a timeout of the code (whose hint would send
/// the model looking for an endless loop).
pub fn no_isolate_in_time_guest_error(wall_ms: u64, in_flight: u32) -> GuestError {
    GuestError {
        at: None,
        kind: Some(ErrorKind::Busy),
        name: "BusyError".into(),
        message: format!(
            "the sandbox is busy: no V8 isolate was free for this execution within its time limit ({wall_ms} ms), so none of its code ran; {in_flight} executions were in flight on its worker"
        ),
        stack: String::new(),
        fault: None,
    }
}

/// The guest error of a result over the raw result limit.
pub fn output_limit_guest_error(bytes: usize, max_bytes: usize) -> GuestError {
    GuestError {
        at: None,
        kind: Some(ErrorKind::OutputLimit),
        name: "OutputLimitError".into(),
        message: format!(
            "the result is {bytes} bytes of JSON, over the {max_bytes}-byte raw result limit (limits.max_result_bytes); results below it are shortened for the response and kept whole, never refused"
        ),
        stack: String::new(),
        fault: None,
    }
}

/// What a cancelled execution's error says, whichever tier it was in and wherever it stood.
pub const CANCELLED_MESSAGE: &str =
    "the execution was cancelled by the caller and stopped where it stood";

/// The same, as the worker reports it.
pub fn cancelled_guest_error() -> GuestError {
    GuestError {
        at: None,
        kind: Some(ErrorKind::Cancelled),
        name: "CancelledError".into(),
        message: CANCELLED_MESSAGE.into(),
        stack: String::new(),
        fault: None,
    }
}

/// Why a call whose arguments are over the limit was not sent; the same words whether the
/// worker or the host refused it, so every tier says the same.
pub fn arguments_too_large(qualified: &str, bytes: usize, max_bytes: usize) -> String {
    format!(
        "the arguments of {qualified} are {bytes} bytes of JSON; one call's arguments may be at most {max_bytes} bytes ({}), {NOT_SENT} (the operator's limits: [sandbox] max_call_args_bytes, and max_argument_bytes of the backend's entry)",
        mib(max_bytes)
    )
}

fn mib(bytes: usize) -> String {
    if bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    }
}
