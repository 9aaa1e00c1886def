//! How much of an execution's logs, error and calls a response shows. The result has the
//! caller's `max_output_size`; everything else together fits in [`RESPONSE_SLACK`], however
//! much the code logged, however long its error, however many calls it made. What is left out
//! of logs and errors is stored whole first (parts `logs` and `error` of `read_output`).
//!
//! Beside them: the bound on a meta-tool's text arguments (`short_text`, shared by
//! `read_output` and the MCP surface above), and whether a call may have changed state
//! (`may_change_state`), which the call lists here and the record in `response` both show.

use sandgate_catalog::Catalog;
use sandgate_output::truncate;
use sandgate_sandbox::{CallRecord, LogLine};

/// Characters a response may hold beyond the caller's `max_output_size`: logs, error, hint,
/// calls, the summary line and the structure around them, in the text and in
/// `structuredContent` together. Documented in docs/call_tool_chain.md and SECURITY.md.
pub const RESPONSE_SLACK: usize = 12 * 1024;

/// Characters of logs shown (a quarter of the result's budget, within these bounds).
const LOGS_SHOWN_MIN: usize = 200;
const LOGS_SHOWN_MAX: usize = 2_000;
/// Characters of an error message shown, and of its hint.
pub(crate) const ERROR_SHOWN: usize = 1_000;
pub(crate) const HINT_SHOWN: usize = 600;
/// Calls listed one by one in `structuredContent` (the first and the last half), and names
/// listed in the text.
const CALLS_LISTED: usize = 10;
const NAMES_LISTED: usize = 8;
/// Characters of one call's error in `structuredContent`.
const CALL_ERROR_SHOWN: usize = 120;

/// The logs as the response shows them.
pub(crate) struct ShownLogs {
    /// Every line as `[level] message`, joined: what is stored when it is cut.
    pub full: String,
    /// What the text shows.
    pub text: String,
    /// The lines `structuredContent` lists: the shown head and tail, with a marker between.
    pub lines: Vec<LogLine>,
    /// Whether anything was left out.
    pub cut: bool,
}

/// The logs within a budget of a quarter of `max_chars` (between the two bounds above).
pub(crate) fn shown_logs(logs: &[LogLine], max_chars: usize) -> ShownLogs {
    if logs.is_empty() {
        return ShownLogs {
            full: String::new(),
            text: String::new(),
            lines: Vec::new(),
            cut: false,
        };
    }
    let budget = (max_chars / 4).clamp(LOGS_SHOWN_MIN, LOGS_SHOWN_MAX);
    let rendered: Vec<String> = logs
        .iter()
        .map(|l| format!("[{}] {}", l.level, l.message))
        .collect();
    let full = rendered.join("\n");
    if full.chars().count() <= budget {
        return ShownLogs {
            text: full.clone(),
            full,
            lines: logs.to_vec(),
            cut: false,
        };
    }
    // Whole lines from each end while they fit (a line longer than its half is cut).
    let half = budget / 2;
    let head = take_lines(logs.iter(), half);
    let tail_taken = take_lines(logs.iter().rev().take(logs.len() - head.len()), half);
    let left_out = logs.len() - head.len() - tail_taken.len();
    let marker = LogLine {
        level: "warn".into(),
        message: format!("[… {left_out} log lines left out …]"),
    };
    let mut lines = head;
    lines.push(marker);
    lines.extend(tail_taken.into_iter().rev());
    let text = lines
        .iter()
        .map(|l| format!("[{}] {}", l.level, l.message))
        .collect::<Vec<_>>()
        .join("\n");
    ShownLogs {
        full,
        text,
        lines,
        cut: true,
    }
}

/// Lines from `lines` while their messages fit in `budget` characters; a line that does not
/// fit whole is cut, and ends the taking.
fn take_lines<'a>(lines: impl Iterator<Item = &'a LogLine>, budget: usize) -> Vec<LogLine> {
    let mut taken = Vec::new();
    let mut used = 0;
    for line in lines {
        let chars = line.message.chars().count() + line.level.len() + 4;
        if used + chars <= budget {
            used += chars;
            taken.push(line.clone());
            continue;
        }
        let room = budget.saturating_sub(used + line.level.len() + 4);
        if room >= 40 {
            taken.push(LogLine {
                level: line.level.clone(),
                message: truncate(&line.message, room),
            });
        }
        break;
    }
    taken
}

/// `text` within `max_chars` (head and tail), and whether it was cut.
pub(crate) fn bounded(text: &str, max_chars: usize) -> (String, bool) {
    if text.len() <= max_chars || text.chars().count() <= max_chars {
        return (text.to_string(), false);
    }
    (truncate(text, max_chars), true)
}

/// The calls `structuredContent` lists: all of them when few, else the first and the last
/// few. Returns the listed calls and how many were left out between them.
pub(crate) fn listed_calls(calls: &[CallRecord]) -> (Vec<&CallRecord>, usize) {
    if calls.len() <= CALLS_LISTED {
        return (calls.iter().collect(), 0);
    }
    let half = CALLS_LISTED / 2;
    let listed = calls[..half]
        .iter()
        .chain(&calls[calls.len() - half..])
        .collect();
    (listed, calls.len() - CALLS_LISTED)
}

/// A call's error as `structuredContent` shows it.
pub(crate) fn call_error(error: &str) -> String {
    bounded(error, CALL_ERROR_SHOWN).0
}

/// Names joined for a sentence, repeated names counted (`memory.create_entities ×40`), at
/// most [`NAMES_LISTED`] distinct ones.
pub(crate) fn names(names: impl Iterator<Item = String>) -> String {
    let mut counted: Vec<(String, usize)> = Vec::new();
    for name in names {
        match counted.iter_mut().find(|(n, _)| *n == name) {
            Some((_, count)) => *count += 1,
            None => counted.push((name, 1)),
        }
    }
    let distinct = counted.len();
    let mut parts: Vec<String> = counted
        .into_iter()
        .take(NAMES_LISTED)
        .map(|(name, count)| {
            if count > 1 {
                format!("{name} ×{count}")
            } else {
                name
            }
        })
        .collect();
    if distinct > NAMES_LISTED {
        parts.push(format!("and {} more", distinct - NAMES_LISTED));
    }
    parts.join(", ")
}

/// The completed calls that may have changed state, as names for a sentence.
pub(crate) fn writes(calls: &[&CallRecord], catalog: &Catalog) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.ok)
        .filter_map(|c| match may_change_state(catalog, &c.name) {
            Some(false) => None,
            Some(true) => Some(c.name.clone()),
            None => Some(format!("{} (no annotations; assume it did)", c.name)),
        })
        .collect()
}

/// The longest text argument a meta-tool reads (a search query, a tool name, a JSON path, an
/// intent). Longer text is refused, not echoed back or searched.
pub(crate) const MAX_TEXT_ARGUMENT_CHARS: usize = 1_000;

/// `value` if it is at most [`MAX_TEXT_ARGUMENT_CHARS`] long; otherwise an error naming `field`.
pub(crate) fn short_text<'a>(field: &str, value: &'a str) -> Result<&'a str, String> {
    let chars = value.chars().take(MAX_TEXT_ARGUMENT_CHARS + 1).count();
    if chars > MAX_TEXT_ARGUMENT_CHARS {
        return Err(format!(
            "{field} is longer than {MAX_TEXT_ARGUMENT_CHARS} characters; send a few words (or the exact name) instead"
        ));
    }
    Ok(value)
}

/// Whether a call may have changed state, from the tool's annotations: `Some(false)` for a
/// tool that declares `readOnlyHint`, `Some(true)` for one that declares otherwise, `None`
/// when it says nothing (then it must be assumed it did).
pub fn may_change_state(catalog: &Catalog, qualified: &str) -> Option<bool> {
    // Host capabilities: reading files and the environment changes nothing; a write does; a
    // fetch may (its method is not on record).
    match qualified {
        "fs.readFile" | "fs.readdir" | "fs.stat" | "env.get" | "state.get" | "state.keys" => {
            return Some(false);
        }
        "fs.writeFile" | "state.set" | "state.delete" => return Some(true),
        "fetch" => return None,
        _ => {}
    }
    let entry = catalog.resolve(qualified).ok()?;
    entry.spec.annotations.as_ref()?;
    Some(!entry.spec.says_read_only())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(message: &str) -> LogLine {
        LogLine {
            level: "log".into(),
            message: message.into(),
        }
    }

    #[test]
    fn many_lines_show_their_head_and_tail() {
        let logs: Vec<LogLine> = (0..10_000).map(|i| line(&format!("line {i}"))).collect();
        let shown = shown_logs(&logs, 20_000);
        assert!(shown.cut);
        assert!(
            shown.text.chars().count() <= LOGS_SHOWN_MAX + 60,
            "{}",
            shown.text.len()
        );
        assert!(shown.text.starts_with("[log] line 0\n"));
        assert!(shown.text.ends_with("[log] line 9999"));
        assert!(shown.text.contains("log lines left out"));
        assert_eq!(shown.full.lines().count(), 10_000);
    }

    #[test]
    fn empty_lines_count_too() {
        let logs: Vec<LogLine> = (0..100_000).map(|_| line("")).collect();
        let shown = shown_logs(&logs, 20_000);
        assert!(
            shown.cut && shown.lines.len() < 600,
            "{}",
            shown.lines.len()
        );
    }

    #[test]
    fn one_huge_line_is_cut() {
        let logs = vec![line(&"x".repeat(3_000_000))];
        let shown = shown_logs(&logs, 20_000);
        assert!(shown.cut && shown.text.len() < LOGS_SHOWN_MAX + 200);
    }

    #[test]
    fn names_are_counted_and_capped() {
        let many = (0..50).map(|i| format!("b.t{}", i % 20));
        let text = names(many);
        assert!(text.starts_with("b.t0 ×3, b.t1 ×3"), "{text}");
        assert!(text.ends_with("and 12 more"), "{text}");
    }
}
