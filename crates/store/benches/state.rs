//! `state.get` of a 1 KB value on SQLite through the handle the gateway uses (issue 31):
//! target ≤ 50 µs. Also the query alone (no hop to the store's thread) and `state.set` of the
//! same value, for reference.
//!
//!     cargo bench -p sandgate-store --bench state

#![allow(clippy::expect_used)]
#![allow(missing_docs)] // criterion_group! generates undocumented functions

use criterion::{Criterion, criterion_group, criterion_main};
use sandgate_store::{Retention, Store, StoreHandle};

fn bench(c: &mut Criterion) {
    // As the gateway runs: a multi-threaded runtime (its two workers on this machine).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::open(&dir.path().join("store.db"), Retention::default()).expect("opens");
    let handle = StoreHandle::spawn(store).expect("spawns");
    let value = serde_json::to_string(&"v".repeat(1020)).expect("json");
    assert!((1000..1100).contains(&value.len()));
    runtime.block_on(async {
        for i in 0..200 {
            handle
                .state_set(
                    "user:bench:default",
                    &format!("k{i}"),
                    value.clone(),
                    3_600_000,
                )
                .await
                .expect("kept");
        }
    });
    let direct = Store::open(&dir.path().join("store.db"), Retention::default()).expect("opens");
    c.bench_function("state/get a 1 KB value, the query alone (SQLite)", |b| {
        b.iter(|| {
            direct
                .state_get("user:bench:default", "k100")
                .expect("read")
                .expect("there")
        })
    });
    c.bench_function("state/get a 1 KB value (SQLite)", |b| {
        b.iter(|| {
            runtime
                .block_on(handle.state_get("user:bench:default", "k100"))
                .expect("read")
                .expect("there")
        })
    });
    c.bench_function("state/set a 1 KB value (SQLite)", |b| {
        b.iter(|| {
            runtime
                .block_on(handle.state_set("user:bench:default", "k101", value.clone(), 3_600_000))
                .expect("kept")
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
