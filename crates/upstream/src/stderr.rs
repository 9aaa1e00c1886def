//! A backend's stderr: read for as long as the backend lives, into a bounded ring buffer that
//! operators can read (`sandgate status`, logs). The model never sees it, because stderr often
//! carries paths, tokens and stack traces.
//!
//! The reading itself is bounded too: a line is cut at [`STDERR_LINE_BYTES`] and the rest of
//! it skipped up to its newline (one 1 GB line without one used to take the gateway to 2 GB),
//! bytes that are not UTF-8 are replaced rather than ending the reading (a closed pipe would
//! kill the backend with SIGPIPE on its next write), and lines reach the gateway's log at
//! debug level, at most [`LOGGED_PER_SECOND`] a second.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Lines a backend's stderr may add to the gateway's log per second; the rest are counted.
pub const LOGGED_PER_SECOND: u32 = 50;

/// Lines kept per backend.
pub const STDERR_LINES: usize = 200;
/// Longest line kept; longer lines are cut at a character boundary.
pub const STDERR_LINE_BYTES: usize = 2048;

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

/// Reads `stderr` until it ends (the backend closed it or exited), line by line, within the
/// bounds in the module docs.
pub(crate) async fn pump(stderr: impl AsyncRead + Unpin, backend: &str, ring: Arc<StderrRing>) {
    let mut reader = BufReader::with_capacity(16 * 1024, stderr);
    let mut line: Vec<u8> = Vec::with_capacity(256);
    // Whether the current line was already cut and emitted: skip to its newline.
    let mut skipping = false;
    let mut log = RateLimit::new(LOGGED_PER_SECOND);
    loop {
        let (used, ended) = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(bytes) => match bytes.iter().position(|b| *b == b'\n') {
                Some(at) => {
                    if !skipping {
                        take_up_to(&mut line, &bytes[..at]);
                    }
                    (at + 1, true)
                }
                None => {
                    if !skipping {
                        take_up_to(&mut line, bytes);
                    }
                    (bytes.len(), false)
                }
            },
        };
        reader.consume(used);
        let full = !skipping && line.len() >= STDERR_LINE_BYTES;
        if ended || full {
            if !skipping {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end_matches('\r');
                ring.push(text);
                if log.allow() {
                    tracing::debug!(backend, "stderr: {text}");
                }
                line.clear();
            }
            skipping = full && !ended;
            if ended {
                skipping = false;
            }
        }
    }
    if !line.is_empty() && !skipping {
        ring.push(String::from_utf8_lossy(&line).trim_end_matches('\r'));
    }
}

/// Appends to `line` what fits below [`STDERR_LINE_BYTES`].
fn take_up_to(line: &mut Vec<u8>, bytes: &[u8]) {
    let room = STDERR_LINE_BYTES.saturating_sub(line.len());
    line.extend_from_slice(&bytes[..bytes.len().min(room)]);
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
    async fn stderr_is_read_to_the_end_whatever_it_holds() {
        let (mut writer, reader) = tokio::io::duplex(64 * 1024);
        let ring = Arc::new(StderrRing::default());
        let pumping = tokio::spawn({
            let ring = ring.clone();
            async move { pump(reader, "b", ring).await }
        });
        writer
            .write_all(b"first\nnot utf-8: \xff\xfe end\n")
            .await
            .expect("write");
        // 20 MB without a newline: read through (the writer never blocks), kept cut.
        let chunk = vec![b'x'; 1024 * 1024];
        for _ in 0..20 {
            writer.write_all(&chunk).await.expect("write");
        }
        writer
            .write_all(b"\nafter the flood\r\nlast without newline")
            .await
            .expect("write");
        drop(writer);
        pumping.await.expect("pump ends at EOF");
        let lines = ring.snapshot();
        assert_eq!(lines[0], "first");
        assert_eq!(lines[1], "not utf-8: \u{fffd}\u{fffd} end");
        assert_eq!(lines[2].len(), STDERR_LINE_BYTES);
        assert_eq!(&lines[3..], ["after the flood", "last without newline"]);
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
