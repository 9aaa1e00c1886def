//! What the one redaction step costs a line: an audit line and a log line, with the credentials
//! a small deployment holds (100) and a large one (10,000 users' secrets), and a line that holds
//! a JWT to mask. It runs off the request path (the audit log's thread, the log writer), so the
//! target is only that it stays small beside writing the line.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};

const AUDIT: &str = r#"{"time":"2026-11-28T16:03:15.790Z","profile":"default","token":"research-agent","execution_id":"ex-1a222e57e0d-c65f2a0fa22bc459383ff6cde8d1559f","kind":"tool","target":"everything.echo","decision":"allow","rule":"profiles.default.tools: *"}"#;
const WITH_JWT: &str = "2026-11-28T16:03:15Z ERROR rmcp::transport: unexpected server response: 401, www-authenticate: Bearer error=\"invalid_token\", error_description=\"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl was revoked\"";

fn remember(count: usize, from: usize) {
    for i in from..count {
        sandgate_redact::remember(&format!("per-user-secret-{i:08}-{:016x}", i * 7919));
    }
}

fn bench(c: &mut Criterion) {
    remember(100, 0);
    let _ = sandgate_redact::redact(AUDIT);
    c.bench_function("redact an audit line, 100 credentials held", |b| {
        b.iter(|| sandgate_redact::redact(black_box(AUDIT)).len())
    });
    c.bench_function("redact a log line with a JWT, 100 credentials held", |b| {
        b.iter(|| sandgate_redact::redact(black_box(WITH_JWT)).len())
    });
    remember(10_000, 100);
    let _ = sandgate_redact::redact(AUDIT);
    c.bench_function("redact an audit line, 10,000 credentials held", |b| {
        b.iter(|| sandgate_redact::redact(black_box(AUDIT)).len())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
