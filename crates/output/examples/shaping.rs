//! What the model sees of results from 5 KB to 7 MB (rows, trees, text), and how much of the
//! data it carries, at the default budget (20,000 characters) and at a `max_output_size` of
//! 100,000. Prints a markdown table.
//!
//! Run: `cargo run --release -p sandgate-output --example shaping`.
//!
//! "Carried" is the share of the data the model can read without a `read_output` round trip:
//! for JSON, of the original's scalar values (each row field, each tree leaf), those that
//! appear in what is shown; for text, the share of its characters shown.

use std::collections::HashMap;

use sandgate_output::{OutputConfig, shape};
use serde_json::{Value, json};

fn rows(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| {
                json!({"id": i, "title": format!("Ticket {i}: printer on floor {} jams", i % 9),
                       "state": if i % 3 == 0 { "open" } else { "closed" }, "assignee": format!("user{}", i % 17)})
            })
            .collect(),
    )
}

fn tree(depth: usize, fanout: usize, at: &str) -> Value {
    if depth == 0 {
        return json!({"name": format!("{at}.txt"), "type": "file"});
    }
    json!({"name": at, "type": "directory",
           "children": (0..fanout).map(|i| tree(depth - 1, fanout, &format!("{at}_{i}"))).collect::<Vec<_>>()})
}

fn log(lines: usize) -> String {
    (0..lines)
        .map(|i| {
            format!(
                "2026-11-26T00:{:02}:{:02}Z INFO worker {i}: processed batch {i} in {} ms\n",
                i / 60 % 60,
                i % 60,
                i % 97
            )
        })
        .collect()
}

fn leaves(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
        Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
        scalar => out.push(scalar.to_string()),
    }
}

/// A file read as one call returns it: `{"content": "<the text>"}`.
fn file_read(text: String) -> Value {
    json!({ "content": text })
}

/// The share of the original's data in `shown`.
fn carried(original: &str, shown: &str) -> f64 {
    if let (Ok(Value::Object(whole)), Ok(Value::Object(part))) = (
        serde_json::from_str::<Value>(original),
        serde_json::from_str::<Value>(shown),
    ) && let (Some(Value::String(all)), Some(Value::String(seen))) =
        (whole.get("content"), part.get("content"))
        && whole.len() == 1
    {
        // One string: the share of its characters shown (without a cut's marker).
        let kept = match seen.split_once("… [") {
            Some((head, rest)) => head.len() + rest.split_once("] …").map_or(0, |(_, t)| t.len()),
            None => seen
                .split_once("… (")
                .map_or(seen.len(), |(head, _)| head.len()),
        };
        return (kept as f64 / all.len().max(1) as f64).min(1.0);
    }
    match (
        serde_json::from_str::<Value>(original),
        serde_json::from_str::<Value>(shown),
    ) {
        (Ok(whole), Ok(part)) => {
            let mut all = Vec::new();
            leaves(&whole, &mut all);
            let mut seen = Vec::new();
            leaves(&part, &mut seen);
            // Each value counts as often as it is shown, at most as often as it occurs: a
            // value repeated in every row ("open") is carried once per row shown. A value that
            // only sits inside a summary's text is not counted (this undercounts rather than
            // flatters).
            let mut shown: HashMap<String, usize> = HashMap::new();
            for value in seen {
                *shown.entry(value).or_default() += 1;
            }
            let found = all
                .iter()
                .filter(|v| {
                    shown.get_mut(*v).is_some_and(|n| {
                        let had = *n > 0;
                        *n = n.saturating_sub(1);
                        had
                    })
                })
                .count();
            found as f64 / all.len().max(1) as f64
        }
        (Ok(_), Err(_)) => {
            // Shown as text (cut JSON): the share of characters, at most.
            (shown.len() as f64 / original.len().max(1) as f64).min(1.0)
        }
        _ => (shown.len() as f64 / original.len().max(1) as f64).min(1.0),
    }
}

/// How many whole rows of a row array the model sees (`None` for other results).
fn rows_in_full(original: &str, shown: &str) -> Option<usize> {
    let Ok(Value::Array(rows)) = serde_json::from_str::<Value>(original) else {
        return None;
    };
    let keys = rows.first()?.as_object()?.len();
    let shown: Value = serde_json::from_str(shown).ok()?;
    let listed = match &shown {
        Value::Array(items) => items.clone(),
        Value::Object(map) => map.get("first")?.as_array()?.clone(),
        _ => return Some(0),
    };
    Some(
        listed
            .iter()
            .filter(|r| r.as_object().is_some_and(|o| o.len() == keys))
            .count(),
    )
}

fn main() {
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let cases: Vec<(&str, String)> = vec![
        ("rows: 60 (5 KB)", pretty(&rows(60))),
        (
            "rows: 200 (13 KB)",
            serde_json::to_string(&rows(200)).unwrap_or_default(),
        ),
        ("rows: 3,000", pretty(&rows(3_000))),
        ("rows: 50,000 (7 MB)", pretty(&rows(50_000))),
        ("tree: 30 KB", pretty(&tree(3, 6, "d"))),
        ("tree: 180 KB", pretty(&tree(4, 6, "d"))),
        ("tree: 21 MB", pretty(&tree(6, 7, "d"))),
        (
            "a file read as {content}: 30 KB",
            pretty(&file_read(log(400))),
        ),
        (
            "a tree read as {content: <its JSON text>}: 130 KB",
            pretty(&file_read(pretty(&tree(4, 5, "d")))),
        ),
        ("text: log of 1,000 lines", log(1_000)),
        ("text: log of 100,000 lines", log(100_000)),
    ];
    let config = OutputConfig::default();
    println!(
        "| result | bytes | budget | shown (bytes) | values carried | rows in full | stages |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, text) in &cases {
        for budget in [20_000, 100_000] {
            let shaped = shape(text, None, budget, &config);
            // The footer is not data.
            let shown = shaped
                .text
                .rsplit_once("\n[Output: ")
                .map_or(shaped.text.as_str(), |(body, _)| body);
            let rows = rows_in_full(text, shown).map_or("".to_string(), |n| n.to_string());
            println!(
                "| {name} | {} | {budget} | {} | {:.1}% | {rows} | {} |",
                text.len(),
                shaped.text.len(),
                carried(text, shown) * 100.0,
                if shaped.stages.is_empty() {
                    "none".to_string()
                } else {
                    shaped.stages.join(", ")
                }
            );
        }
    }
}
