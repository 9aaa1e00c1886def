//! A backend's stderr: read for as long as the backend lives, into a bounded ring buffer that
//! operators can read (`sandgate status`, logs). The model never sees it, because stderr often
//! carries paths, tokens and stack traces.
//!
//! The reading itself is `sandgate-stderr`'s (lines cut at [`STDERR_LINE_BYTES`], any bytes
//! read, read to the end); here its lines go to the ring and to the gateway's log at debug
//! level, at most [`LOGGED_PER_SECOND`] a second.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncRead;

/// Lines a backend's stderr may add to the gateway's log per second; the rest are counted.
pub const LOGGED_PER_SECOND: u32 = 50;

/// Lines kept per backend.
pub const STDERR_LINES: usize = 200;
/// Longest line kept; longer lines are cut at a character boundary.
pub const STDERR_LINE_BYTES: usize = sandgate_stderr::MAX_LINE_BYTES;

/// The last [`STDERR_LINES`] lines a backend wrote to stderr.
#[derive(Debug, Default)]
pub struct StderrRing {
    lines: Mutex<VecDeque<String>>,
}

impl StderrRing {
    /// Appends a line, evicting the oldest when full.
    pub fn push(&self, line: &str) {
        let mut cut = line.len().min(STDERR_LINE_BYTES);
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        let Ok(mut lines) = self.lines.lock() else {
            return;
        };
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line[..cut].to_string());
    }

    /// A copy of the buffered lines, oldest first.
    pub fn snapshot(&self) -> Vec<String> {
        self.lines
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// Reads `stderr` until it ends (the backend closed it or exited), line by line, into `ring`
/// and the log.
pub(crate) async fn pump(stderr: impl AsyncRead + Unpin, backend: &str, ring: Arc<StderrRing>) {
    let mut log = RateLimit::new(LOGGED_PER_SECOND);
    sandgate_stderr::read_lines(stderr, |text| {
        ring.push(text);
        if log.allow() {
            tracing::debug!(backend, "stderr: {text}");
        }
    })
    .await;
}

/// At most `per_second` events a second; says how many were held back when a second ends.
struct RateLimit {
    per_second: u32,
    window: Instant,
    seen: u32,
}

impl RateLimit {
    fn new(per_second: u32) -> Self {
        RateLimit {
            per_second,
            window: Instant::now(),
            seen: 0,
        }
    }

    fn allow(&mut self) -> bool {
        if self.window.elapsed() >= Duration::from_secs(1) {
            if self.seen > self.per_second {
                tracing::debug!(
                    "{} backend stderr lines were not logged (at most {} a second)",
                    self.seen - self.per_second,
                    self.per_second
                );
            }
            self.window = Instant::now();
            self.seen = 0;
        }
        self.seen += 1;
        self.seen <= self.per_second
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn every_line_reaches_the_ring_cut_to_its_bound() {
        let (mut writer, reader) = tokio::io::duplex(64 * 1024);
        let ring = Arc::new(StderrRing::default());
        let pumping = tokio::spawn({
            let ring = ring.clone();
            async move { pump(reader, "b", ring).await }
        });
        writer
            .write_all(b"first\nnot utf-8: \xff end\n")
            .await
            .expect("write");
        writer
            .write_all(&vec![b'x'; STDERR_LINE_BYTES * 3])
            .await
            .expect("write");
        writer.write_all(b"\nlast").await.expect("write");
        drop(writer);
        pumping.await.expect("pump ends at EOF");
        let lines = ring.snapshot();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(lines[..2], ["first", "not utf-8: \u{fffd} end"]);
        assert_eq!(lines[2].len(), STDERR_LINE_BYTES);
        assert_eq!(lines[3], "last");
    }

    #[test]
    fn keeps_the_newest_lines_and_cuts_on_char_boundaries() {
        let ring = StderrRing::default();
        for i in 0..STDERR_LINES + 5 {
            ring.push(&format!("line {i}"));
        }
        let lines = ring.snapshot();
        assert_eq!(lines.len(), STDERR_LINES);
        assert_eq!(lines[0], "line 5");
        ring.push(&"é".repeat(STDERR_LINE_BYTES));
        assert!(
            ring.snapshot()
                .last()
                .is_some_and(|l| l.len() <= STDERR_LINE_BYTES)
        );
    }
}
