//! A bounded ring buffer for backend stderr. Operators can read it (`sandgate status`, logs);
//! the model never sees it, because stderr often carries paths, tokens and stack traces.

use std::collections::VecDeque;
use std::sync::Mutex;

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

#[cfg(test)]
mod tests {
    use super::*;

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
