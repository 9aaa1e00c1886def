//! Property tests of the output crate's readers of untrusted text (the fuzz targets of JSON-path
//! selection and shaping): any path, any value, any text, without a panic; a path walked from a
//! value selects exactly what it walked to; shaping stays within its budget and valid UTF-8.
//! `cargo test` runs a short smoke; `PROPTEST_CASES=100000 cargo test --release -p
//! sandgate-output --test fuzz` runs long.

#![allow(clippy::expect_used)]

use proptest::prelude::*;
use sandgate_output::{OutputConfig, select, shape};
use serde_json::Value;

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::from),
        "[a-zé \"\\\\.\\[\\]]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z. \"\\[\\]]{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A path to somewhere inside `value`, chosen by `picks`, and what is there.
fn walk<'v>(value: &'v Value, picks: &[usize]) -> (String, &'v Value) {
    let mut path = String::from("$");
    let mut here = value;
    for pick in picks {
        match here {
            Value::Array(items) if !items.is_empty() => {
                let i = pick % items.len();
                path.push_str(&format!("[{i}]"));
                here = &items[i];
            }
            Value::Object(map) if !map.is_empty() => {
                let (key, next) = map.iter().nth(pick % map.len()).expect("in range");
                path.push_str(&format!(
                    "[{}]",
                    serde_json::to_string(key).expect("a string")
                ));
                here = next;
            }
            _ => break,
        }
    }
    (path, here)
}

proptest! {
    #[test]
    fn select_never_panics(value in json(), path in any::<String>()) {
        let _ = select(&value, &path);
    }

    #[test]
    fn select_never_panics_on_path_like_text(value in json(), path in "[$.\\[\\]0-9a-z\"'\\-]{0,40}") {
        let _ = select(&value, &path);
    }

    #[test]
    fn a_walked_path_selects_what_it_walked_to(value in json(), picks in proptest::collection::vec(any::<usize>(), 0..6)) {
        let (path, expected) = walk(&value, &picks);
        prop_assert_eq!(select(&value, &path), Ok(expected), "{}", path);
    }

    #[test]
    fn shaping_keeps_to_its_budget(text in any::<String>(), max in 50usize..400) {
        let shaped = shape(&text, None, max, &OutputConfig::default());
        prop_assert!(shaped.text.chars().count() <= max + 200, "{} > {}", shaped.text.chars().count(), max);
    }

    #[test]
    fn shaping_json_keeps_to_its_budget(value in json(), max in 50usize..400) {
        let text = serde_json::to_string_pretty(&value).expect("serializes");
        let config = OutputConfig { json_chunk_min_bytes: 0, ..OutputConfig::default() };
        let shaped = shape(&text, Some("a b"), max, &config);
        prop_assert!(shaped.text.chars().count() <= max + 200, "{} > {}", shaped.text.chars().count(), max);
    }
}
