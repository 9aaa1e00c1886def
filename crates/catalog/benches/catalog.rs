//! Catalog benchmarks: search over 2,000 synthetic tools and `types.d.ts` generation for them.
//! Targets (issue 2): search p50 ≤ 1 ms, declarations ≤ 50 ms. And growth (issue 13): build
//! and search at 10,000 and 20,000 tools, and build with one 50 KB and one 100 KB description,
//! each of which must scale linearly (memory: `tests/index_growth.rs`). And what checking a
//! call's arguments against its tool's declaration costs on every backend call (issue 47, item
//! 8): `arguments/*`, to set beside a tier-1 call's cost (`cargo bench -p sandgate --bench
//! chain`).

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

/// `count` tools over 20 backends, with realistic names, descriptions and schemas.
fn synthetic_tools(count: usize) -> Vec<ToolSpec> {
    let mut tools = Vec::with_capacity(count);
    for i in 0..count {
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
            origin: Default::default(),
        });
    }
    tools
}

fn bench(c: &mut Criterion) {
    let catalog = Catalog::new(synthetic_tools(2000));
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
        b.iter(|| Catalog::new(black_box(synthetic_tools(2000))))
    });
}

/// One tool whose description is `bytes` long: words of every length up to 40 000 letters, the
/// shape that once made the index quadratic.
fn long_description(bytes: usize) -> Vec<ToolSpec> {
    let mut text = String::with_capacity(bytes);
    let mut state: u32 = 7;
    let mut word_len = 1;
    while text.len() < bytes {
        for _ in 0..word_len.min(bytes - text.len()) {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            text.push(char::from(b'a' + ((state >> 16) % 26) as u8));
        }
        text.push(' ');
        word_len = (word_len * 3).min(40_000);
    }
    vec![ToolSpec {
        backend: "b".into(),
        name: "long".into(),
        description: Some(text),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: None,
        origin: Default::default(),
    }]
}

fn growth(c: &mut Criterion) {
    let mut group = c.benchmark_group("growth");
    group.sample_size(10);
    for count in [10_000, 20_000] {
        let tools = synthetic_tools(count);
        group.bench_function(format!("catalog_build_{count}_tools"), |b| {
            b.iter_batched(
                || tools.clone(),
                |tools| Catalog::new(black_box(tools)),
                criterion::BatchSize::LargeInput,
            )
        });
        let catalog = Catalog::new(tools);
        group.bench_function(format!("search_{count}_tools"), |b| {
            b.iter(|| {
                catalog
                    .search_index()
                    .search(black_box("creat calender evnt"), 10)
            })
        });
    }
    for kb in [50, 100] {
        let tools = long_description(kb * 1000);
        group.bench_function(format!("catalog_build_{kb}kb_description"), |b| {
            b.iter_batched(
                || tools.clone(),
                |tools| Catalog::new(black_box(tools)),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

fn arguments(c: &mut Criterion) {
    use sandgate_catalog::argument_problems;
    let sum = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                     "required": ["a", "b"], "additionalProperties": false});
    let good = json!({"a": 2, "b": 3});
    let good = good.as_object().cloned().unwrap_or_default();
    c.bench_function("arguments/get_sum, right", |b| {
        b.iter(|| argument_problems(black_box(&sum), black_box(&good)))
    });
    // A GitHub-sized tool: twelve declared keys, an enum, six given.
    let issue = json!({"type": "object", "required": ["owner", "repo", "title"], "properties": {
        "owner": {"type": "string"}, "repo": {"type": "string"}, "title": {"type": "string"},
        "body": {"type": "string"}, "assignees": {"type": "array"}, "labels": {"type": "array"},
        "milestone": {"type": "integer"}, "state": {"enum": ["open", "closed"]},
        "type": {"type": "string"}, "draft": {"type": "boolean"}, "head": {"type": "string"},
        "base": {"type": "string"}}});
    let given = json!({"owner": "acme", "repo": "app", "title": "Crash on start", "body": "Steps…",
                       "labels": ["bug"], "state": "open"});
    let given = given.as_object().cloned().unwrap_or_default();
    c.bench_function("arguments/create_issue, right", |b| {
        b.iter(|| argument_problems(black_box(&issue), black_box(&given)))
    });
    let wrong = json!({"owner": "acme", "repo": 5, "titel": "Crash"});
    let wrong = wrong.as_object().cloned().unwrap_or_default();
    c.bench_function("arguments/create_issue, three problems", |b| {
        b.iter(|| argument_problems(black_box(&issue), black_box(&wrong)))
    });
}

criterion_group!(benches, bench, growth, arguments);
criterion_main!(benches);
