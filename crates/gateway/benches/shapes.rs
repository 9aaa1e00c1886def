//! What learning a result's shape costs (issue 31): on the call path, the door only queues the
//! result (`Shapes::offer`); the learning itself (`seen_by_script` and `LearnedShape::observe`)
//! runs on a blocking thread. Both are measured for a 10 KB result, a list of issues as the
//! GitHub server answers (23 of them), as JSON text. Target: ≤ 5 µs at p50 on the call path.
//!
//!     cargo bench -p sandgate-gateway --bench shapes
//!
//! The queue is drained before each timed offer (the learner keeps up in use; a full queue
//! drops the lesson and costs less), so every timed offer is one the queue accepts.

#![allow(clippy::expect_used)]
#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::model::{CallToolResult, ContentBlock};
use sandgate_catalog::LearnedShape;
use sandgate_gateway::shapes::{Shapes, seen_by_script};
use serde_json::json;

/// About 10 KB of JSON: twenty-three issues.
fn ten_kb_result() -> CallToolResult {
    let issues: Vec<_> = (0..23)
        .map(|n| {
            json!({
                "number": n, "title": format!("Crash when the cache is cold ({n})"),
                "state": if n % 3 == 0 { "closed" } else { "open" },
                "user": {"login": format!("user{n}"), "id": 1000 + n, "site_admin": false},
                "labels": [{"name": "bug", "color": "d73a4a"}, {"name": "p1", "color": "b60205"}],
                "comments": n * 2, "created_at": "2026-11-01T10:00:00Z", "updated_at": "2026-11-20T10:00:00Z",
                "body": "Steps: start the gateway with an empty cache, call the tool twice, see the stack trace.",
                "html_url": format!("https://github.com/acme/app/issues/{n}"),
            })
        })
        .collect();
    let text = serde_json::to_string(&issues).expect("json");
    assert!(
        (9_000..12_000).contains(&text.len()),
        "{} bytes",
        text.len()
    );
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let config = sandgate_config::parse_str(
        "[servers.gh]\ncommand = \"true\"\n",
        sandgate_config::Format::Toml,
        "bench.toml",
    )
    .expect("config");
    let shapes = runtime.block_on(async {
        let (manager, _calls) =
            sandgate_upstream::BackendManager::start(&config, Default::default());
        Shapes::start(None, manager).await
    });
    let result = ten_kb_result();
    c.bench_function("shapes/offer a 10 KB result (on the call path)", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let lesson = result.clone();
                while shapes.waiting() > 0 {
                    std::thread::yield_now();
                }
                let started = Instant::now();
                shapes.offer("gh".into(), "list_issues".into(), black_box(lesson), 10_000);
                spent += started.elapsed();
            }
            spent
        })
    });
    c.bench_function("shapes/learn from a 10 KB result (off the path)", |b| {
        let mut shape = LearnedShape::default();
        b.iter_batched(
            || result.clone(),
            |lesson| shape.observe(&seen_by_script(lesson), 1),
            criterion::BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
