//! Text that crosses between JavaScript and Rust, made well-formed and bounded.
//!
//! A JavaScript string is UTF-16 and may hold a lone surrogate (`"a\ud800b"`), which no Rust
//! `String` and no strict JSON parser accepts. Left alone, one such character made
//! `console.log` throw a `TypeError`, and turned a result object into a JSON string on the host.
//! Every tier replaces a lone surrogate with U+FFFD instead, the way `String.prototype
//! .toWellFormed` does: [`well_formed_json`] on JSON text (whose `JSON.stringify` escapes lone
//! surrogates as `\udXXX`), and the worker's lossy reading of strings built on it.
//!
//! [`head_and_tail`] cuts long text the one way every limit shows it: the start, a marker that
//! says how much was left out, and the end, never splitting a character.

use std::borrow::Cow;

/// `json` with every `\uXXXX` escape of a lone surrogate replaced by `\ufffd`; escapes of a
/// proper surrogate pair are kept. Borrowed when there is nothing to replace.
pub fn well_formed_json(json: &str) -> Cow<'_, str> {
    if !json.contains("\\u") {
        return Cow::Borrowed(json);
    }
    let bytes = json.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        if bytes.get(i + 1) != Some(&b'u') {
            // Any other escape, `\\` included: skip both characters.
            i += 2;
            continue;
        }
        let Some(unit) = hex_unit(bytes, i + 2) else {
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => {
                let low = (bytes.get(i + 6..i + 8) == Some(b"\\u"))
                    .then(|| hex_unit(bytes, i + 8))
                    .flatten();
                if low.is_some_and(|low| (0xDC00..=0xDFFF).contains(&low)) {
                    i += 12;
                    continue;
                }
                true
            }
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let out = out.get_or_insert_with(|| String::with_capacity(json.len()));
            out.push_str(&json[copied..i]);
            out.push_str("\\ufffd");
            copied = i + 6;
        }
        i += 6;
    }
    match out {
        None => Cow::Borrowed(json),
        Some(mut out) => {
            out.push_str(&json[copied.min(json.len())..]);
            Cow::Owned(out)
        }
    }
}

/// [`well_formed_json`] for text already owned: no copy when there is nothing to replace.
pub fn into_well_formed_json(json: String) -> String {
    match well_formed_json(&json) {
        Cow::Borrowed(_) => json,
        Cow::Owned(fixed) => fixed,
    }
}

/// The code unit of the four hex digits at `at`, if there are four.
fn hex_unit(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    let text = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(text, 16).ok()
}

/// `text` cut to at most about `max_bytes`: its head, a marker naming how many bytes were left
/// out, and its tail. Unchanged when it fits. Cuts fall on character boundaries.
pub fn head_and_tail(text: &str, max_bytes: usize) -> Cow<'_, str> {
    if text.len() <= max_bytes {
        return Cow::Borrowed(text);
    }
    let half = max_bytes / 2;
    let head_end = floor_boundary(text, half);
    let tail_start = ceil_boundary(text, text.len() - half);
    let omitted = tail_start - head_end;
    let cut = format!(
        "{}\n[… {omitted} bytes left out …]\n{}",
        &text[..head_end],
        &text[tail_start..]
    );
    // Just over the budget, the marker can outweigh what it replaces.
    if cut.len() >= text.len() {
        return Cow::Borrowed(text);
    }
    Cow::Owned(cut)
}

/// The largest character boundary at or before `at`.
pub fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest character boundary at or after `at`.
fn ceil_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let json = r#"{"a":"x\ud800y","b":"\udc00","c":"\ud83d\ude00","d":"\\ud800","e":"\ud800\ud800\udc00"}"#;
        let fixed = well_formed_json(json);
        assert_eq!(
            fixed,
            r#"{"a":"x\ufffdy","b":"\ufffd","c":"\ud83d\ude00","d":"\\ud800","e":"\ufffd\ud800\udc00"}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&fixed).expect("strict JSON now");
        assert_eq!(parsed["a"], "x\u{fffd}y");
        assert_eq!(parsed["c"], "😀");
        assert_eq!(parsed["d"], "\\ud800");
        assert!(matches!(
            well_formed_json(r#"{"a":"\u00e9"}"#),
            Cow::Borrowed(_)
        ));
        assert_eq!(well_formed_json(r#""\ud800"#), r#""\ufffd"#);
        assert_eq!(well_formed_json(r#""\ud8"#), r#""\ud8"#);
    }

    #[test]
    fn long_text_keeps_its_head_and_tail() {
        assert_eq!(head_and_tail("short", 10), "short");
        let text = format!("{}{}", "é".repeat(1000), "z".repeat(1000));
        let cut = head_and_tail(&text, 100);
        assert!(cut.starts_with("ééé") && cut.ends_with("zzz"));
        assert!(cut.contains("bytes left out"));
        assert!(cut.len() < 160);
    }
}
