//! The policy check on every tool call (issue 16: ≤ 2 µs per call): `Access::authorize_tool`
//! for the implicit default profile (`*`), for a realistic profile (ten allow patterns, three
//! deny patterns), the same narrowed by `allow_tools`, a tool whose name needs sanitizing
//! (matched by both spellings), and a refusal (which formats its message). Run: `cargo bench -p sandgate-policy --bench decide`.

#![allow(missing_docs, clippy::expect_used)]

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use sandgate_policy::{Access, Grant, Profile, ToolCall};

fn realistic() -> Profile {
    let mut profile = Profile::implicit_default("sandgate.toml");
    profile.name = "reader".into();
    profile.key = "profiles.reader".into();
    profile.implicit = false;
    profile.tools = Grant::new(
        [
            "memory.read_*",
            "memory.search_*",
            "memory.open_*",
            "fs.read_*",
            "fs.list_*",
            "github.get_*",
            "github.list_*",
            "github.search_*",
            "slack.read_*",
            "everything.echo",
        ]
        .into_iter()
        .map(String::from)
        .collect(),
        [
            "fs.read_media_file",
            "github.get_secret_*",
            "slack.read_private_*",
        ]
        .into_iter()
        .map(String::from)
        .collect(),
    );
    profile
}

fn bench(c: &mut Criterion) {
    let everything = Access::new(Arc::new(Profile::implicit_default("sandgate.toml")));
    let reader = Access::new(Arc::new(realistic()));
    let narrowed = reader
        .clone()
        .narrowed_to(vec!["github.*".into(), "memory.read_*".into()]);
    let call = || ToolCall::new("github", "list_pull_requests");
    c.bench_function("authorize/default_profile", |b| {
        b.iter(|| {
            everything
                .authorize_tool(std::hint::black_box(call()))
                .is_ok()
        })
    });
    c.bench_function("authorize/ten_patterns", |b| {
        b.iter(|| reader.authorize_tool(std::hint::black_box(call())).is_ok())
    });
    c.bench_function("authorize/narrowed", |b| {
        b.iter(|| {
            narrowed
                .authorize_tool(std::hint::black_box(call()))
                .is_ok()
        })
    });
    // A tool whose names need sanitizing is matched by both spellings (issue 26): the second
    // is built only then.
    let sanitized = || {
        ToolCall::new("github", "list-pull-requests").called_in_code("github", "list_pull_requests")
    };
    c.bench_function("authorize/two_spellings", |b| {
        b.iter(|| {
            reader
                .authorize_tool(std::hint::black_box(sanitized()))
                .is_ok()
        })
    });
    c.bench_function("authorize/refused", |b| {
        b.iter(|| {
            reader
                .authorize_tool(std::hint::black_box(ToolCall::new("github", "delete_repo")))
                .is_err()
        })
    });
    c.bench_function("make_the_call_request_alone", |b| {
        b.iter(|| std::hint::black_box(call()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
