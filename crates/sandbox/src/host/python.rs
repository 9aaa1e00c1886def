//! The host side of a Python execution: no transpiling (Monty reads the code itself), the
//! Python pool, and the worker's report turned into a result whose errors point at the user's
//! own lines (Monty's tracebacks are in them, so no position map is needed).

use std::time::Instant;

use super::pool::raw_run::RawRun;
use crate::host::result::{ExecError, ExecutionResult};
use crate::{ErrorKind, ExecStats};

/// The error of a Python execution in a sandbox that has no Python engine.
pub(super) fn not_running() -> ExecutionResult {
    ExecutionResult::failed(ExecError {
        kind: ErrorKind::Internal,
        message: "the Python engine is not running in this sandbox".into(),
        line: None,
        column: None,
        hint: Some("Send the code as TypeScript, or ask the operator to turn Python on ([sandbox] python, docs/config.md).".into()),
        fault: None,
    })
}

/// What a Python run on a worker reported, as the execution's result: errors at the user's
/// lines (`lines_before`: lines of a fence the worker did not see).
pub(super) fn result(
    raw: Result<RawRun, ExecError>,
    lines_before: u32,
    started: Instant,
    code: &str,
    granted: &[String],
) -> ExecutionResult {
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    let raw = match raw {
        Ok(raw) => raw,
        Err(error) => {
            let mut result = ExecutionResult::failed(error);
            result.stats.wall_ms = wall_ms;
            return result;
        }
    };
    let stats = ExecStats {
        wall_ms,
        memory_bytes: raw.stats.memory_bytes,
        calls: raw.stats.calls.max(raw.trace.len() as u32),
    };
    let (value, error) = match raw.outcome {
        Ok(json) => match serde_json::from_str::<serde_json::Value>(&json) {
            Ok(value) => (Some(value), None),
            Err(e) => (
                None,
                Some(ExecError {
                    kind: ErrorKind::OutputLimit,
                    message: format!("the result cannot be read back ({e}); a result may nest at most 128 levels deep"),
                    line: None,
                    column: None,
                    hint: Some("Return a flatter value.".into()),
                    fault: None,
                }),
            ),
        },
        Err(guest) => {
            let (line, column) = guest
                .at
                .map_or((None, None), |(l, c)| (Some(l + lines_before), Some(c)));
            let message = if guest.message.is_empty() {
                guest.name.clone()
            } else {
                format!("{}: {}", guest.name, guest.message)
            };
            let hint = super::python_hints::hint(&super::python_hints::Failure {
                name: &guest.name,
                message: &guest.message,
                fault: guest.fault.as_ref(),
                code,
                granted,
            });
            (
                None,
                Some(ExecError {
                    kind: guest.kind.unwrap_or(ErrorKind::Runtime),
                    message,
                    line,
                    column,
                    hint,
                    fault: guest.fault,
                }),
            )
        }
    };
    ExecutionResult {
        value,
        logs: raw.logs,
        trace: raw.trace,
        stats,
        error,
    }
}

/// The code inside a ```` ```python ```` fence, when the model sent one (with nothing after
/// it), and how many lines came before it; else the code as sent.
pub fn strip_fence(code: &str) -> (&str, u32) {
    let trimmed = code.trim_end();
    let start = trimmed.len() - trimmed.trim_start().len();
    let before = code[..start].matches('\n').count() as u32 + 1;
    let trimmed = trimmed.trim_start();
    let Some(rest) = trimmed
        .strip_prefix("```python")
        .or_else(|| trimmed.strip_prefix("```py"))
    else {
        return (code, 0);
    };
    let Some(body) = rest.strip_suffix("```") else {
        return (code, 0);
    };
    match body.split_once('\n') {
        Some((first, body)) if first.trim().is_empty() => (body, before),
        _ => (code, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::strip_fence;

    #[test]
    fn a_fenced_script_is_its_body() {
        assert_eq!(strip_fence("```python\nx = 1\nx\n```"), ("x = 1\nx\n", 1));
        assert_eq!(strip_fence("\n  ```py\nprint(1)\n```  "), ("print(1)\n", 2));
        assert_eq!(strip_fence("x = 1"), ("x = 1", 0));
        assert_eq!(strip_fence("```python x```"), ("```python x```", 0));
    }
}
