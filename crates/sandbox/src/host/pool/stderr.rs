//! A worker's standard error, read by the host and written to the gateway's log.
//!
//! A worker must never write to the gateway's own standard error. Workers run with
//! `RLIMIT_FSIZE` at 0 (they create no files), and when the gateway's standard error is a
//! regular file (a service's log file, a test's capture) the first write a worker makes to it
//! breaks that limit: the kernel kills the worker with `SIGXFSZ`, and every execution on it with
//! it. Deno writes to standard error on its own (an uncaught error inside an isolate is one), so
//! this was not hypothetical: it lost V8 workers (issue 33). Each worker therefore gets a pipe
//! of its own, read by `sandgate-stderr` for as long as the worker lives (so it never blocks on
//! a full pipe, and each line is cut to `sandgate_stderr::MAX_LINE_BYTES`). Its lines go to the
//! log as warnings, labelled with the worker's process id, and at most [`MAX_LINES`] of them
//! over the worker's life: what a worker can write costs the log a bounded amount.

use tokio::process::ChildStderr;

/// Lines logged for one worker over its life; later ones are read and dropped.
pub(crate) const MAX_LINES: usize = 200;

/// Reads `stderr` until the worker closes it, logging what it says.
pub(crate) fn relay(stderr: ChildStderr, pid: Option<u32>) {
    tokio::spawn(async move {
        let mut budget = Budget::default();
        sandgate_stderr::read_lines(stderr, |line| budget.take(line, &mut |said| log(pid, said)))
            .await;
    });
}

fn log(pid: Option<u32>, said: Said<'_>) {
    let pid = pid.unwrap_or(0);
    match said {
        Said::Line(text) => tracing::warn!(worker = pid, "sandbox worker: {text}"),
        Said::Dropping => tracing::warn!(
            worker = pid,
            "sandbox worker: wrote more than {MAX_LINES} lines to its standard error; the rest is not logged"
        ),
    }
}

/// What the relay logs.
#[derive(Debug, PartialEq)]
enum Said<'a> {
    /// One line.
    Line(&'a str),
    /// The worker's line budget is spent.
    Dropping,
}

/// Counts a worker's lines against [`MAX_LINES`].
#[derive(Default)]
struct Budget {
    /// Lines seen so far.
    seen: usize,
}

impl Budget {
    /// Says `line` while the budget lasts, then once that the rest is dropped, then nothing.
    fn take<'a>(&mut self, line: &'a str, say: &mut dyn FnMut(Said<'a>)) {
        if self.seen < MAX_LINES {
            say(Said::Line(line));
        } else if self.seen == MAX_LINES {
            say(Said::Dropping);
        }
        self.seen = self.seen.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_gets_a_bounded_number_of_lines() {
        let mut budget = Budget::default();
        let mut out = Vec::new();
        for i in 0..MAX_LINES * 5 {
            let line = format!("line {i}");
            budget.take(&line, &mut |said| {
                out.push(match said {
                    Said::Line(text) => text.to_string(),
                    Said::Dropping => "<dropping>".to_string(),
                })
            });
        }
        assert_eq!(out.len(), MAX_LINES + 1);
        assert_eq!(out[MAX_LINES - 1], format!("line {}", MAX_LINES - 1));
        assert_eq!(out[MAX_LINES], "<dropping>");
    }
}
