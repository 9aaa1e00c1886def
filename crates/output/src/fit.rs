//! Fitting a JSON value into the response budget: as much of the data as fits, every cut
//! marked, every list bounded.
//!
//! A result that fits is never shaped (see [`crate::shape`]). One that does not is cut to the
//! budget the caller asked for, keeping what a model most likely needs:
//! - a uniform array (rows with the same keys) keeps as many leading rows *in full* as fit,
//!   one compact row per line, then the identities of some of the rest (at most
//!   [`REST_IDS`]) and how many rows are not shown;
//! - any other value keeps its shape: every array is cut to the same number of items (an
//!   object keeps at least 32 keys: they are its shape) and every string to the same length,
//!   the largest that fit, each cut saying how much it left out.
//!
//! The text is valid JSON, so code can parse it. `None` when not even the smallest cut fits
//! (then the caller truncates text).

use serde_json::{Map, Value, json};

use crate::chunk::{IDENTITY_FIELDS, uniform_keys, write_pretty};

/// Most identities of rows not shown that a summary lists.
pub const REST_IDS: usize = 100;
/// Entries per array or object tried, largest first.
const WIDTHS: [usize; 11] = [2000, 500, 200, 100, 50, 20, 10, 5, 3, 2, 1];
/// Levels shown before deeper arrays and objects are only described, deepest first.
const DEPTHS: [usize; 7] = [usize::MAX, 8, 6, 4, 3, 2, 1];
/// Keys an object keeps however small the width: an object's keys are its shape.
const OBJECT_KEYS: usize = 32;
/// String lengths tried (in characters), longest first.
const STRING_CHARS: [usize; 3] = [usize::MAX, 300, 40];

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
    let mut best: Option<String> = None;
    let mut too_big: Vec<(usize, usize)> = Vec::new();
    for &width in WIDTHS.iter().rev() {
        for &depth in &DEPTHS {
            if too_big.iter().any(|&(w, d)| width >= w && depth >= d) {
                continue;
            }
            let fitted = STRING_CHARS.iter().find_map(|&chars| {
                let text = render(&prune(value, width, chars, depth));
                (text.chars().count() <= budget).then_some(text)
            });
            match fitted {
                Some(text) if best.as_ref().is_none_or(|b| text.len() > b.len()) => {
                    best = Some(text);
                }
                Some(_) => {}
                None => too_big.push((width, depth)),
            }
        }
    }
    best
}

/// The summary of a uniform array with its first `shown` rows in full.
fn rows_summary(items: &[Value], keys: &[String], shown: usize) -> Value {
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
    {
        let listed: Vec<Value> = items[shown..]
            .iter()
            .take(REST_IDS)
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

/// The most leading rows whose summary fits, by bisection (a summary grows with its rows).
fn fit_rows(items: &[Value], keys: &[String], budget: usize) -> Option<String> {
    let fits = |shown: usize| {
        let text = render(&rows_summary(items, keys, shown));
        (text.chars().count() <= budget).then_some(text)
    };
    let mut best = fits(0)?;
    // A row takes at least a few characters (`{}` and its line), which bounds the search.
    let (mut low, mut high) = (0, items.len().min(budget / 4));
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        match fits(mid) {
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
/// cut marked.
fn prune(value: &Value, width: usize, chars: usize, depth: usize) -> Value {
    match value {
        Value::Array(items) if depth == 0 && !items.is_empty() => {
            json!(format!("… an array of {} items", items.len()))
        }
        Value::Object(map) if depth == 0 && !map.is_empty() => {
            json!(format!("… an object of {} keys", map.len()))
        }
        Value::Array(items) => {
            let mut kept: Vec<Value> = items
                .iter()
                .take(width)
                .map(|item| prune(item, width, chars, depth.saturating_sub(1)))
                .collect();
            if items.len() > width {
                kept.push(json!(format!("… {} more items", items.len() - width)));
            }
            Value::Array(kept)
        }
        Value::Object(map) => {
            let keys = width.max(OBJECT_KEYS);
            let mut kept: Map<String, Value> = map
                .iter()
                .take(keys)
                .map(|(k, v)| (k.clone(), prune(v, width, chars, depth.saturating_sub(1))))
                .collect();
            if map.len() > keys {
                kept.insert("…".into(), json!(format!("{} more keys", map.len() - keys)));
            }
            Value::Object(kept)
        }
        Value::String(s) if chars != usize::MAX && s.chars().count() > chars => {
            let head: String = s.chars().take(chars).collect();
            json!(format!(
                "{head}… ({} more characters)",
                s.chars().count() - chars
            ))
        }
        other => other.clone(),
    }
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
            text.contains("more characters") && text.contains("\"ok\": true"),
            "{text}"
        );
    }
}
