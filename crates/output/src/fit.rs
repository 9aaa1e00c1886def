//! Fitting a JSON value into the response budget: as much of the data as fits, every cut
//! marked, every list bounded.
//!
//! A result that fits is never shaped (see [`crate::shape`]). One that does not is cut to the
//! budget the caller asked for, keeping what a model most likely needs:
//! - a uniform array (rows with the same keys) keeps as many leading rows *in full* as fit,
//!   one compact row per line, then the identities of some of the rest (at most
//!   [`REST_IDS`]) and how many rows are not shown;
//!   When even the identities do not fit, fewer are listed, down to none: the count and the
//!   keys always show;
//! - any other value keeps its shape: every array is cut to the same number of items (an
//!   object keeps at least 32 keys: they are its shape) and every string to the same length,
//!   the largest that fit, each cut saying how much it left out. That length is found by
//!   bisection up to the whole budget, so a value dominated by one string (a file read as
//!   `{content}`) spends the budget on that string: its head and tail, and between them the
//!   `read_output` path and byte offset of what was left out.
//!
//! The text is valid JSON, so code can parse it. `None` when not even the smallest cut fits
//! (then the caller truncates text).

use serde_json::{Map, Value, json};

use crate::chunk::{IDENTITY_FIELDS, uniform_keys, write_pretty};
use crate::path::{push_index, push_key};

/// Most identities of rows not shown that a summary lists.
pub const REST_IDS: usize = 100;
/// Entries per array or object tried, largest first.
const WIDTHS: [usize; 11] = [2000, 500, 200, 100, 50, 20, 10, 5, 3, 2, 1];
/// Levels shown before deeper arrays and objects are only described, deepest first.
const DEPTHS: [usize; 7] = [usize::MAX, 8, 6, 4, 3, 2, 1];
/// Keys an object keeps however small the width: an object's keys are its shape.
const OBJECT_KEYS: usize = 32;
/// String lengths tried (in characters), longest first; the best cut is then widened by
/// bisection.
const STRING_CHARS: [usize; 3] = [usize::MAX, 300, 40];
/// A string cut to at least this many characters shows its head and tail and where the rest
/// is read; a shorter cut shows its head and how much it left out (the pointer would cost more
/// than what it shows).
const POINTED_CHARS: usize = 300;
/// Share of a pointed cut's characters that go to its head.
const HEAD_SHARE: f64 = 0.6;

/// `value` as JSON text of at most `budget` characters (see the module docs).
pub fn fit_json(value: &Value, budget: usize) -> Option<String> {
    if let Value::Array(items) = value
        && items.len() > 1
        && let Some(keys) = uniform_keys(items)
        && let Some(text) = fit_rows(items, &keys, budget)
    {
        return Some(text);
    }
    // Every cut is tried from the smallest up, and the largest text that fits wins: a deep
    // tree is better shown whole two levels down than two children wide all the way. A cut
    // larger than one that did not fit is not tried (it would not fit either).
    let mut best: Option<(String, usize, usize, usize)> = None;
    let mut too_big: Vec<(usize, usize)> = Vec::new();
    for &width in WIDTHS.iter().rev() {
        for &depth in &DEPTHS {
            if too_big.iter().any(|&(w, d)| width >= w && depth >= d) {
                continue;
            }
            let fitted = STRING_CHARS.iter().find_map(|&chars| {
                let text = pruned(value, width, chars, depth);
                (text.chars().count() <= budget).then_some((text, chars))
            });
            match fitted {
                Some((text, chars)) if best.as_ref().is_none_or(|b| text.len() > b.0.len()) => {
                    best = Some((text, width, depth, chars));
                }
                Some(_) => {}
                None => too_big.push((width, depth)),
            }
        }
    }
    let (text, width, depth, chars) = best?;
    if chars == usize::MAX {
        return Some(text);
    }
    // The strings were cut to one of a few lengths: the longest cut that fits is found by
    // bisection (a longer cut never renders shorter).
    let (mut low, mut high, mut widest) = (chars, budget, text);
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        let text = pruned(value, width, mid, depth);
        if text.chars().count() <= budget {
            widest = text;
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    Some(widest)
}

/// `value` pruned (see [`prune`]) and rendered.
fn pruned(value: &Value, width: usize, chars: usize, depth: usize) -> String {
    render(&prune(value, width, chars, depth, &mut String::from("$")))
}

/// The summary of a uniform array with its first `shown` rows in full.
fn rows_summary(items: &[Value], keys: &[String], shown: usize, ids: usize) -> Value {
    let identity = IDENTITY_FIELDS
        .iter()
        .find(|f| keys.iter().any(|k| k == *f));
    let rest = items.len() - shown;
    let mut summary = Map::new();
    summary.insert(
        "summary".into(),
        json!(if rest == 0 {
            format!("array of {} objects with the same keys", items.len())
        } else {
            format!(
                "array of {} objects with the same keys; the first {shown} in full, {rest} not shown (the whole array is stored)",
                items.len()
            )
        }),
    );
    summary.insert("count".into(), json!(items.len()));
    summary.insert("keys".into(), json!(keys));
    summary.insert("first".into(), Value::Array(items[..shown].to_vec()));
    if let Some(field) = identity
        && rest > 0
        && ids > 0
    {
        let listed: Vec<Value> = items[shown..]
            .iter()
            .take(ids)
            .map(|item| item[*field].clone())
            .collect();
        if rest > listed.len() {
            summary.insert(
                format!("rest_by_{field}"),
                json!({"first": listed, "more": rest - listed.len()}),
            );
        } else {
            summary.insert(format!("rest_by_{field}"), Value::Array(listed));
        }
    }
    Value::Object(summary)
}

/// The most leading rows whose summary fits, by bisection (a summary grows with its rows); when
/// not even the identities of the rest fit, as many of them as do (the count and the keys are
/// worth more to a model than the cut shape of every row).
fn fit_rows(items: &[Value], keys: &[String], budget: usize) -> Option<String> {
    let fits = |shown: usize, ids: usize| {
        let text = render(&rows_summary(items, keys, shown, ids));
        (text.chars().count() <= budget).then_some(text)
    };
    let Some(mut best) = fits(0, REST_IDS) else {
        fits(0, 0)?;
        let (mut low, mut high) = (0, REST_IDS - 1);
        while low < high {
            let mid = low + (high - low).div_ceil(2);
            match fits(0, mid) {
                Some(_) => low = mid,
                None => high = mid - 1,
            }
        }
        return fits(0, low);
    };
    // A row takes at least a few characters (`{}` and its line), which bounds the search.
    let (mut low, mut high) = (0, items.len().min(budget / 4));
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        match fits(mid, REST_IDS) {
            Some(text) => {
                best = text;
                low = mid;
            }
            None => high = mid - 1,
        }
    }
    Some(best)
}

/// `value` with every array cut to `width` items (an object to [`OBJECT_KEYS`] keys at least),
/// every string to `chars` characters, and what lies `depth` levels down only described, each
/// cut marked. `at` is the JSON path of `value` (as `read_output` takes it), for the marks.
fn prune(value: &Value, width: usize, chars: usize, depth: usize, at: &mut String) -> Value {
    match value {
        Value::Array(items) if depth == 0 && !items.is_empty() => {
            json!(format!("… an array of {} items", items.len()))
        }
        Value::Object(map) if depth == 0 && !map.is_empty() => {
            json!(format!("… an object of {} keys", map.len()))
        }
        Value::Array(items) => {
            let mut kept: Vec<Value> = Vec::with_capacity(items.len().min(width) + 1);
            for (index, item) in items.iter().take(width).enumerate() {
                let len = at.len();
                push_index(at, index);
                kept.push(prune(item, width, chars, depth.saturating_sub(1), at));
                at.truncate(len);
            }
            if items.len() > width {
                kept.push(json!(format!("… {} more items", items.len() - width)));
            }
            Value::Array(kept)
        }
        Value::Object(map) => {
            let keys = width.max(OBJECT_KEYS);
            let mut kept = Map::new();
            for (key, child) in map.iter().take(keys) {
                let len = at.len();
                push_key(at, key);
                kept.insert(
                    key.clone(),
                    prune(child, width, chars, depth.saturating_sub(1), at),
                );
                at.truncate(len);
            }
            if map.len() > keys {
                kept.insert("…".into(), json!(format!("{} more keys", map.len() - keys)));
            }
            Value::Object(kept)
        }
        Value::String(s) if chars != usize::MAX => match s.chars().count() {
            total if total > chars => json!(cut_string(s, total, chars, at)),
            _ => value.clone(),
        },
        other => other.clone(),
    }
}

/// `text` (`total` characters) cut to `chars` characters. A long cut keeps the head and the
/// tail, and says what was left out and where `read_output` reads it: at the string's path,
/// from the head's bytes.
fn cut_string(text: &str, total: usize, chars: usize, at: &str) -> String {
    if chars < POINTED_CHARS {
        let head: String = text.chars().take(chars).collect();
        return format!("{head}… ({} more characters)", total - chars);
    }
    let head_chars = (chars as f64 * HEAD_SHARE) as usize;
    let tail_chars = chars - head_chars;
    let head_end = text
        .char_indices()
        .nth(head_chars)
        .map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(total - tail_chars)
        .map_or(text.len(), |(i, _)| i);
    format!(
        "{head}… [{left} characters left out: read_output with json_path {at:?} and offset {head_end} reads them] …{tail}",
        head = &text[..head_end],
        left = total - head_chars - tail_chars,
        tail = &text[tail_start..],
    )
}

fn render(value: &Value) -> String {
    let mut out = String::new();
    write_pretty(value, 0, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize) -> Value {
        Value::Array(
            (0..n)
                .map(|i| json!({"id": i, "title": format!("Issue number {i}"), "state": "open"}))
                .collect(),
        )
    }

    #[test]
    fn rows_fill_the_budget_and_the_rest_is_bounded() {
        let text = fit_json(&rows(3_000), 20_000).unwrap_or_default();
        assert!(text.chars().count() <= 20_000, "{}", text.len());
        let parsed: Value = serde_json::from_str(&text).unwrap_or_default();
        let shown = parsed["first"].as_array().map_or(0, Vec::len);
        assert!(shown > 200, "only {shown} rows in 20,000 characters");
        assert_eq!(parsed["count"], 3_000);
        assert_eq!(
            parsed["rest_by_id"]["first"].as_array().map_or(0, Vec::len),
            REST_IDS
        );
        assert_eq!(parsed["rest_by_id"]["more"], 3_000 - shown - REST_IDS);
    }

    #[test]
    fn a_tree_keeps_its_shape_with_every_cut_marked() {
        fn tree(depth: usize) -> Value {
            if depth == 0 {
                return json!({"name": "file.txt", "type": "file"});
            }
            json!({"name": format!("dir{depth}"), "type": "directory",
                   "children": (0..6).map(|_| tree(depth - 1)).collect::<Vec<_>>()})
        }
        let value = tree(5);
        let text = fit_json(&value, 4_000).unwrap_or_default();
        assert!(text.chars().count() <= 4_000);
        let parsed: Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(parsed["name"], "dir5");
        assert!(text.contains("more items"), "{text}");
    }

    #[test]
    fn long_strings_are_cut_and_say_so() {
        let value = json!({"readme": "x".repeat(50_000), "ok": true});
        let text = fit_json(&value, 2_000).unwrap_or_default();
        assert!(text.chars().count() <= 2_000);
        assert!(
            text.contains("characters left out") && text.contains("\"ok\": true"),
            "{text}"
        );
    }

    #[test]
    fn one_long_string_spends_the_budget_and_says_where_the_rest_is() {
        let file: String = (0..560)
            .map(|i| format!("Line {i}: the quick brown fox jumps over the lazy dog.\n"))
            .collect();
        let value = json!({"content": file});
        let text = fit_json(&value, 20_000).unwrap_or_default();
        let shown = text.chars().count();
        assert!(
            (18_000..=20_000).contains(&shown),
            "{shown} characters shown"
        );
        let parsed: Value = serde_json::from_str(&text).unwrap_or_default();
        let cut = parsed["content"].as_str().unwrap_or_default();
        assert!(
            cut.starts_with("Line 0: ")
                && cut.ends_with("Line 559: the quick brown fox jumps over the lazy dog.\n"),
            "{cut}"
        );
        // The pointer names the path and the byte where what was left out starts.
        let pointer = cut.split("json_path ").nth(1).unwrap_or_default();
        let path: String =
            serde_json::from_str(pointer.split(" and offset ").next().unwrap_or_default())
                .unwrap_or_default();
        let offset: usize = pointer
            .split(" and offset ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(usize::MAX);
        let whole = crate::select(&value, &path)
            .ok()
            .and_then(Value::as_str)
            .unwrap_or_default();
        let head = cut.split("… [").next().unwrap_or_default();
        assert_eq!(
            offset,
            head.len(),
            "the offset is the head's length in bytes"
        );
        assert!(whole.starts_with(head) && whole.len() > offset, "{path}");
    }

    #[test]
    fn a_string_under_an_odd_key_is_pointed_at_by_a_path_select_reads() {
        let value = json!({"files": [{"the text": "é".repeat(40_000)}]});
        let text = fit_json(&value, 5_000).unwrap_or_default();
        assert!(text.chars().count() <= 5_000);
        assert!(
            text.contains(r#"json_path \"$.files[0][\\\"the text\\\"]\""#),
            "{text}"
        );
        assert_eq!(
            crate::select(&value, r#"$.files[0]["the text"]"#)
                .ok()
                .and_then(Value::as_str)
                .map(str::len),
            Some(80_000)
        );
    }

    #[test]
    fn rows_keep_their_count_and_keys_in_a_small_budget() {
        let rows: Vec<Value> = (0..167)
            .map(|i| json!({"id": format!("ticket-{i:05}"), "title": format!("A title of ticket {i}"), "state": "open", "owner": "someone", "n": i}))
            .collect();
        let text = fit_json(&Value::Array(rows), 400).unwrap_or_default();
        assert!(text.chars().count() <= 400, "{text}");
        let parsed: Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(parsed["count"], 167, "{text}");
        assert_eq!(parsed["keys"].as_array().map_or(0, Vec::len), 5, "{text}");
    }
}
