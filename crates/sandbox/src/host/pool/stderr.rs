//! A worker's standard error, read by the host and written to the gateway's log.
//!
//! A worker must never write to the gateway's own standard error. Workers run with
//! `RLIMIT_FSIZE` at 0 (they create no files), and when the gateway's standard error is a
//! regular file (a service's log file, a test's capture) the first write a worker makes to it
//! breaks that limit: the kernel kills the worker with `SIGXFSZ`, and every execution on it with
//! it. Deno writes to standard error on its own (an uncaught error inside an isolate is one), so
//! this was not hypothetical: it lost V8 workers (issue 33). Each worker therefore gets a pipe
//! of its own, drained here for as long as it lives, so it never blocks on a full pipe. Its lines
//! go to the log as warnings, labelled with the worker's process id, each cut to
//! [`MAX_LINE_BYTES`], and at most [`MAX_LINES`] of them over the worker's life: what a worker
//! can write costs the log a bounded amount.

use tokio::io::AsyncReadExt;
use tokio::process::ChildStderr;

/// The longest line logged whole; the rest of a longer one is dropped.
pub(crate) const MAX_LINE_BYTES: usize = 2048;
/// Lines logged for one worker over its life; later ones are read and dropped.
pub(crate) const MAX_LINES: usize = 200;

/// Reads `stderr` until the worker closes it, logging what it says.
pub(crate) fn relay(stderr: ChildStderr, pid: Option<u32>) {
    tokio::spawn(async move {
        let mut lines = Lines::default();
        let mut stderr = stderr;
        let mut chunk = vec![0u8; 8192];
        loop {
            match stderr.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => lines.push(&chunk[..n], &mut |line| log(pid, line)),
            }
        }
        lines.finish(&mut |line| log(pid, line));
    });
}

fn log(pid: Option<u32>, line: Said<'_>) {
    let pid = pid.unwrap_or(0);
    match line {
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
    /// One line, cut to [`MAX_LINE_BYTES`] and made valid UTF-8.
    Line(&'a str),
    /// The worker's line budget is spent.
    Dropping,
}

/// Splits bytes into bounded lines, counting them against [`MAX_LINES`].
#[derive(Default)]
struct Lines {
    /// The current line, up to [`MAX_LINE_BYTES`].
    line: Vec<u8>,
    /// Lines logged so far.
    logged: usize,
}

impl Lines {
    fn push(&mut self, bytes: &[u8], say: &mut dyn FnMut(Said<'_>)) {
        for part in bytes.split_inclusive(|b| *b == b'\n') {
            let (text, ended) = match part.split_last() {
                Some((b'\n', text)) => (text, true),
                _ => (part, false),
            };
            let room = MAX_LINE_BYTES.saturating_sub(self.line.len());
            self.line.extend_from_slice(&text[..text.len().min(room)]);
            if ended {
                self.emit(say);
            }
        }
    }

    fn finish(&mut self, say: &mut dyn FnMut(Said<'_>)) {
        if !self.line.is_empty() {
            self.emit(say);
        }
    }

    fn emit(&mut self, say: &mut dyn FnMut(Said<'_>)) {
        if self.logged < MAX_LINES {
            let text = String::from_utf8_lossy(&self.line);
            say(Said::Line(text.trim_end_matches('\r')));
        } else if self.logged == MAX_LINES {
            say(Said::Dropping);
        }
        self.logged = self.logged.saturating_add(1);
        self.line.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(chunks: &[&[u8]]) -> Vec<String> {
        let mut out = Vec::new();
        let mut lines = Lines::default();
        let mut say = |s: Said<'_>| {
            out.push(match s {
                Said::Line(t) => t.to_string(),
                Said::Dropping => "<dropping>".to_string(),
            })
        };
        for chunk in chunks {
            lines.push(chunk, &mut say);
        }
        lines.finish(&mut say);
        out
    }

    #[test]
    fn lines_are_joined_across_reads_and_cut_to_their_bound() {
        assert_eq!(said(&[b"err", b"or: x\nsecond\r\n", b"tail"]), ["error: x", "second", "tail"]);
        let long = vec![b'a'; MAX_LINE_BYTES * 3];
        let got = said(&[&long, b"\n", b"\xff\xfe ok\n"]);
        assert_eq!(got[0].len(), MAX_LINE_BYTES);
        assert_eq!(got[1], "\u{fffd}\u{fffd} ok");
    }

    #[test]
    fn a_worker_gets_a_bounded_number_of_lines() {
        let flood = "x\n".repeat(MAX_LINES * 5);
        let got = said(&[flood.as_bytes()]);
        assert_eq!(got.len(), MAX_LINES + 1);
        assert_eq!(got[MAX_LINES], "<dropping>");
    }
}
