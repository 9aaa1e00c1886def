//! Smart truncation: keep the start and the end, cut the middle, say what was cut.
//!
//! The head gets 60% of the budget and the tail 40%, because the start of an output usually
//! says what it is and the end how it finished. Multi-line text is cut on line boundaries and
//! the marker counts lines; a single long line is cut on character boundaries.

use crate::kb;

/// The largest index ≤ `index` that is a character boundary of `text`.
pub fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut i = index.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Cuts `text` to about `max_chars` characters (plus the marker).
pub fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let head_chars = max_chars * 6 / 10;
    let tail_chars = max_chars - head_chars;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines.len() >= 3
        && let Some(cut) = by_lines(text, &lines, head_chars, tail_chars)
    {
        return cut;
    }
    let head_end = byte_index_of_char(text, head_chars);
    let tail_start = byte_index_of_char(text, text.chars().count() - tail_chars);
    let omitted = tail_start.saturating_sub(head_end);
    let cut = format!(
        "{}... [truncated middle — {} omitted] ...{}",
        &text[..head_end],
        size(omitted),
        &text[tail_start..]
    );
    // A cut that saves less than its marker costs shows the text whole (a 309-character text
    // cut to 300 came back 342 characters long, "0.0KB omitted").
    if cut.chars().count() >= text.chars().count() {
        return text.to_string();
    }
    cut
}

/// A size as a marker says it: bytes under a KiB, else KB.
fn size(bytes: usize) -> String {
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else {
        kb(bytes)
    }
}

/// Whole lines from the start and the end within the budgets, or `None` if not even one line
/// fits at each end (then a character cut does better).
fn by_lines(text: &str, lines: &[&str], head_chars: usize, tail_chars: usize) -> Option<String> {
    let mut head = 0;
    let mut used = 0;
    while head < lines.len() && used + lines[head].chars().count() <= head_chars {
        used += lines[head].chars().count();
        head += 1;
    }
    let mut tail = 0;
    let mut used_tail = 0;
    while tail < lines.len() - head
        && used_tail + lines[lines.len() - 1 - tail].chars().count() <= tail_chars
    {
        used_tail += lines[lines.len() - 1 - tail].chars().count();
        tail += 1;
    }
    // Whole lines only when they carry most of the budget: one huge line between short ones
    // (a list of ids on one line) would otherwise leave a response of a few hundred characters.
    if head == 0 || tail == 0 || (used + used_tail) * 2 < head_chars + tail_chars {
        return None;
    }
    let head_text: String = lines[..head].concat();
    let tail_text: String = lines[lines.len() - tail..].concat();
    let cut_lines = lines.len() - head - tail;
    let cut_bytes = text.len() - head_text.len() - tail_text.len();
    let newline = if head_text.ends_with('\n') { "" } else { "\n" };
    Some(format!(
        "{head_text}{newline}... [{cut_lines} lines / {} truncated — showing first {head} + last {tail} lines] ...\n{tail_text}",
        size(cut_bytes)
    ))
}

fn byte_index_of_char(text: &str, char_index: usize) -> usize {
    text.char_indices()
        .nth(char_index)
        .map_or(text.len(), |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_huge_line_between_short_ones_is_cut_by_characters() {
        let text = format!("head\n{}\ntail\n", "1, ".repeat(100_000));
        let cut = truncate(&text, 1_000);
        assert!(
            cut.chars().count() > 900,
            "{} characters kept",
            cut.chars().count()
        );
        assert!(cut.starts_with("head\n1, 1, "), "{}", &cut[..40]);
    }

    #[test]
    fn short_text_is_untouched() {
        assert_eq!(truncate("hello", 10), "hello");
    }

    #[test]
    fn multibyte_text_is_never_split_at_any_cut_point() {
        let text = "é€😀".repeat(500);
        for max in 1..60 {
            let cut = truncate(&text, max);
            assert!(cut.contains("[truncated middle"), "{cut}");
            // Every byte slice boundary landed on a character boundary, or this would panic.
            assert!(cut.chars().count() > 0);
        }
        assert_eq!(floor_char_boundary("é", 1), 0);
    }

    #[test]
    fn a_cut_that_saves_less_than_its_marker_is_not_made() {
        let text = "word ".repeat(62);
        assert_eq!(
            truncate(&text, 300),
            text,
            "310 characters cut to 300 would grow"
        );
        let cut = truncate(&"x".repeat(1_000), 300);
        assert!(cut.contains("— 700 bytes omitted]"), "{cut}");
    }
}
