//! Catalog benchmarks: search over 2,000 synthetic tools and `types.d.ts` generation for them.
//! Targets (issue 2): search p50 ≤ 1 ms, declarations ≤ 50 ms.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use criterion::{Criterion, criterion_group, criterion_main};
use sandgate_catalog::{Catalog, ToolSpec};
use serde_json::json;
use std::hint::black_box;

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
    "document",
    "page",
    "database",
];

/// 2,000 tools over 20 backends, with realistic names, descriptions and schemas.
fn synthetic_tools() -> Vec<ToolSpec> {
    let mut tools = Vec::with_capacity(2000);
    for i in 0..2000 {
        let verb = VERBS[i % VERBS.len()];
        let noun = NOUNS[(i / VERBS.len()) % NOUNS.len()];
        let backend = format!("service-{}", i % 20);
        tools.push(ToolSpec {
            backend,
            name: format!("{verb}_{noun}_{i}"),
            description: Some(format!(
                "{verb} a {noun} in the workspace. Supports filtering by owner, state and date; returns the {noun} with its metadata and history (variant {i})."
            )),
            input_schema: json!({"type": "object", "properties": {
                "owner": {"type": "string", "description": "Owner of the resource"},
                "id": {"type": "integer"},
                "state": {"enum": ["open", "closed", "all"]},
                "filters": {"type": "object", "properties": {"since": {"type": "string"}, "labels": {"type": "array", "items": {"type": "string"}}}},
                "limit": {"type": "number", "description": "Maximum results"}
            }, "required": ["owner", "id"]}),
            output_schema: (i % 3 == 0).then(|| json!({"type": "object", "properties": {"items": {"type": "array", "items": {"type": "object"}}, "total": {"type": "integer"}}})),
            annotations: None,
        });
    }
    tools
}

fn bench(c: &mut Criterion) {
    let catalog = Catalog::new(synthetic_tools());
    let index = catalog.search_index();
    c.bench_function("search_2000_tools/natural_query", |b| {
        b.iter(|| index.search(black_box("create a calendar event for the customer"), 10))
    });
    c.bench_function("search_2000_tools/typo_query", |b| {
        b.iter(|| index.search(black_box("creat calender evnt"), 10))
    });
    c.bench_function("types_d_ts_2000_tools", |b| {
        b.iter(|| black_box(catalog.declarations()))
    });
    c.bench_function("catalog_build_2000_tools", |b| {
        b.iter(|| Catalog::new(black_box(synthetic_tools())))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
