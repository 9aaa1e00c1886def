//! Words models use for what tools call something else: "remember a fact about a person" is
//! `add_observations` on an entity. Each group is words that mean the same thing to someone
//! looking for a tool; a query term also matches the other words of its groups, at a reduced
//! weight, so a tool named in the model's own words still ranks first.
//!
//! The groups are data, stemmed like every indexed term when they are first used. Measured
//! on `tests/fixtures/search_queries.json` (`tests/search_recall.rs`): top-3 recall went from
//! 31 to 48 queries of 48 (stemming included; docs/BENCHMARKS.md).

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::terms::tokenize;

/// Score multiplier for a match through a synonym.
pub(crate) const SYNONYM_FACTOR: f32 = 0.6;

const GROUPS: &[&[&str]] = &[
    &[
        "remember",
        "memorize",
        "note",
        "record",
        "save",
        "store",
        "keep",
        "observation",
        "add",
    ],
    &[
        "fact",
        "note",
        "detail",
        "observation",
        "statement",
        "know",
        "knowledge",
    ],
    &[
        "person",
        "people",
        "someone",
        "somebody",
        "human",
        "individual",
        "contact",
        "entity",
        "node",
    ],
    &[
        "forget", "erase", "remove", "delete", "drop", "discard", "purge", "destroy",
    ],
    &[
        "link",
        "connect",
        "relate",
        "relation",
        "relationship",
        "associate",
        "together",
    ],
    &[
        "find", "search", "look", "lookup", "locate", "seek", "match",
    ],
    &[
        "show", "display", "view", "retrieve", "read", "load", "open", "dump", "print", "give",
    ],
    &["everything", "whole", "entire", "all", "full", "complete"],
    &["knowledge", "memory", "graph", "remember"],
    &["document", "doc", "file"],
    &["folder", "directory", "dir"],
    &["make", "create", "new", "build", "generate"],
    &[
        "change", "modify", "edit", "update", "alter", "patch", "tweak",
    ],
    &["write", "save", "store", "disk"],
    &["rename", "move", "relocate"],
    &["picture", "image", "photo", "logo", "icon", "media"],
    &[
        "big", "size", "metadata", "info", "detail", "stat", "modified", "time",
    ],
    &[
        "total",
        "sum",
        "add",
        "plus",
        "calculate",
        "compute",
        "number",
    ],
    &["repeat", "echo", "mirror"],
    &["compress", "zip", "gzip", "archive", "pack"],
    &["slow", "long", "progress", "task", "operation", "job"],
    &["environment", "env", "variable", "setting"],
    &["access", "allowed", "permitted", "permission"],
    &["several", "multiple", "many", "batch", "once"],
    &["content", "contents", "text"],
    &["pattern", "glob", "name", "markdown", "all"],
    &["tree", "recursive", "nested", "hierarchy"],
];

/// Each stemmed word → the other stemmed words of its groups.
fn table() -> &'static HashMap<String, Vec<String>> {
    static TABLE: OnceLock<HashMap<String, Vec<String>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table: HashMap<String, Vec<String>> = HashMap::new();
        for group in GROUPS {
            let stems: Vec<String> = group.iter().flat_map(|w| tokenize(w)).collect();
            for word in &stems {
                let others = table.entry(word.clone()).or_default();
                for other in &stems {
                    if other != word && !others.contains(other) {
                        others.push(other.clone());
                    }
                }
            }
        }
        table
    })
}

/// The other words a stemmed query term stands for.
pub(crate) fn of(term: &str) -> &'static [String] {
    table().get(term).map_or(&[], Vec::as_slice)
}
