//! What the supply-chain guard costs a listing: the scan of every tool of the real servers in
//! `tests/fixtures/real_tools` (the names made once, as the gateway does for a listing), the
//! digest of each, and cleaning a description. None of it is on a call's path: it runs when a
//! listing arrives or changes.

#![allow(missing_docs, clippy::expect_used)]

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use sandgate_pins::{Definition, Names, clean, scan};
use serde_json::Value;

fn real() -> Vec<(String, Definition)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/real_tools");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)
        .expect("real_tools")
        .filter_map(Result::ok)
    {
        let fact: Value =
            serde_json::from_slice(&std::fs::read(entry.path()).expect("read")).expect("JSON");
        let server = entry
            .path()
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        for tool in fact["tools"].as_array().into_iter().flatten() {
            out.push((
                server.clone(),
                Definition {
                    name: tool["name"].as_str().unwrap_or_default().into(),
                    title: tool["title"].as_str().map(String::from),
                    description: tool["description"].as_str().map(String::from),
                    input_schema: tool.get("inputSchema").cloned().unwrap_or(Value::Null),
                    output_schema: tool.get("outputSchema").cloned(),
                    annotations: tool.get("annotations").cloned(),
                },
            ));
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let tools = real();
    let names: Vec<(String, String)> = tools
        .iter()
        .map(|(s, d)| (s.clone(), d.name.clone()))
        .collect();
    let notion: Vec<&Definition> = tools
        .iter()
        .filter(|(s, _)| s == "notion")
        .map(|(_, d)| d)
        .collect();
    c.bench_function("listing/notion_24_tools_scanned", |b| {
        b.iter(|| {
            let all = Names::new(&names);
            let context = all.context("notion");
            notion
                .iter()
                .map(|d| scan(d, &context).len())
                .sum::<usize>()
        })
    });
    c.bench_function("listing/all_real_tools_scanned", |b| {
        b.iter(|| {
            let all = Names::new(&names);
            tools
                .iter()
                .map(|(s, d)| scan(d, &all.context(s)).len())
                .sum::<usize>()
        })
    });
    c.bench_function("listing/names_of_233_tools_made", |b| {
        b.iter(|| Names::new(&names))
    });
    c.bench_function("listing/all_real_tools_digested", |b| {
        b.iter(|| tools.iter().map(|(_, d)| d.digest().len()).sum::<usize>())
    });
    let description = tools
        .iter()
        .filter_map(|(_, d)| d.description.clone())
        .max_by_key(String::len)
        .unwrap_or_default();
    c.bench_function("clean/longest_real_description", |b| {
        b.iter(|| clean(&description).len())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
