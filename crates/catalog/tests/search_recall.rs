//! Search recall on queries as models write them (issue 34, item 6): paraphrases, synonyms
//! and task descriptions (`tests/fixtures/search_queries.json`) against the three npm
//! reference servers' real tool lists (`tests/fixtures/reference_tools.json`), alone and among
//! 2,000 synthetic tools of 20 other backends. A query is answered when one of the tools it
//! names is in the top 3. `cargo test -p sandgate-catalog --test search_recall -- --nocapture`
//! prints each query's top 3.

#![allow(clippy::expect_used)] // a broken fixture is a broken test

use std::path::PathBuf;

use sandgate_catalog::{Catalog, ToolSpec};
use serde_json::{Value, json};

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("json")
}

fn reference_tools() -> Vec<ToolSpec> {
    let cache = fixture("reference_tools.json");
    cache["backends"]
        .as_object()
        .expect("backends")
        .values()
        .flat_map(|tools| tools.as_array().cloned().unwrap_or_default())
        .map(|tool| serde_json::from_value(tool).expect("a tool spec"))
        .collect()
}

/// Other backends' tools, as the catalog benchmark makes them: verbs and nouns a query's
/// words can also meet.
fn distractors(count: usize) -> Vec<ToolSpec> {
    const VERBS: &[&str] = &[
        "get", "list", "create", "update", "delete", "search", "read", "write", "sync", "export",
    ];
    const NOUNS: &[&str] = &[
        "issue",
        "pull_request",
        "file",
        "directory",
        "user",
        "repository",
        "comment",
        "label",
        "branch",
        "commit",
        "message",
        "channel",
        "event",
        "calendar",
        "invoice",
        "customer",
        "ticket",
        "page",
        "database",
    ];
    (0..count)
        .map(|i| {
            let verb = VERBS[i % VERBS.len()];
            let noun = NOUNS[(i / VERBS.len()) % NOUNS.len()];
            ToolSpec {
                backend: format!("service-{}", i % 20),
                name: format!("{verb}_{noun}_{i}"),
                description: Some(format!(
                    "{verb} a {noun} in the workspace. Supports filtering by owner, state and date; returns the {noun} with its metadata and history (variant {i})."
                )),
                input_schema: json!({"type": "object", "properties": {"owner": {"type": "string"}, "id": {"type": "integer"}}}),
                output_schema: None,
                annotations: None,
                origin: Default::default(),
            }
        })
        .collect()
}

/// (answered, all, literal answered, literal all) over the queries under `set`, printing
/// each query's top 3.
fn recall(catalog: &Catalog, label: &str, set: &str) -> (usize, usize, usize, usize) {
    let queries = fixture("search_queries.json");
    let (mut answered, mut all, mut literal_answered, mut literal_all) = (0, 0, 0, 0);
    for case in queries[set].as_array().expect("queries") {
        let query = case["query"].as_str().expect("query");
        let wanted: Vec<&str> = case["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let top: Vec<&str> = catalog
            .search_index()
            .search(query, 3)
            .iter()
            .map(|hit| catalog.entries()[hit.entry].qualified.as_str())
            .collect();
        let hit = top.iter().any(|name| wanted.contains(name));
        println!(
            "{label} {} {query:?} → {top:?}",
            if hit { "ok  " } else { "MISS" }
        );
        all += 1;
        answered += usize::from(hit);
        if case["literal"].as_bool() == Some(true) {
            literal_all += 1;
            literal_answered += usize::from(hit);
        }
    }
    println!(
        "{label}: top-3 recall {answered}/{all}; the literal queries {literal_answered}/{literal_all}"
    );
    (answered, all, literal_answered, literal_all)
}

#[test]
fn paraphrases_find_their_tools() {
    let alone = Catalog::new(reference_tools());
    let (answered, all, literal, literal_all) = recall(&alone, "reference", "queries");
    assert_eq!(
        literal, literal_all,
        "a query in the tools' own words stopped working"
    );
    // Before stemming and synonyms, 31 of the 48 were answered (30 among 2,000 others, and
    // one literal query lost there).
    assert!(answered * 100 >= all * 85, "top-3 recall {answered}/{all}");
    let (held, held_all, _, _) = recall(&alone, "held out", "held_out");
    assert!(
        held * 100 >= held_all * 60,
        "top-3 recall on the held-out queries {held}/{held_all}"
    );

    let mut crowded = reference_tools();
    crowded.extend(distractors(2_000));
    let crowded = Catalog::new(crowded);
    let (answered, all, literal, literal_all) = recall(&crowded, "crowded", "queries");
    assert_eq!(
        literal, literal_all,
        "a query in the tools' own words stopped working"
    );
    assert!(
        answered * 100 >= all * 75,
        "top-3 recall among 2,000 others {answered}/{all}"
    );
}

/// Issue 47, item 16: the filesystem server's `read_file` says "DEPRECATED: Use read_text_file
/// instead", and ranked first for "read a file". A tool that says it is deprecated ranks below
/// the tools that match as well.
#[test]
fn a_tool_that_says_it_is_deprecated_ranks_below_its_replacement() {
    let catalog = Catalog::new(reference_tools());
    for query in [
        "read a file",
        "read file contents",
        "read the text of a file",
    ] {
        let names: Vec<&str> = catalog
            .search_index()
            .search(query, 5)
            .iter()
            .map(|hit| catalog.entries()[hit.entry].qualified.as_str())
            .collect();
        let replacement = names.iter().position(|n| *n == "filesystem.read_text_file");
        let deprecated = names.iter().position(|n| *n == "filesystem.read_file");
        assert!(replacement.is_some(), "{query}: {names:?}");
        assert!(
            deprecated.is_none_or(|d| Some(d) > replacement && d > 0),
            "{query}: {names:?}"
        );
    }
}
