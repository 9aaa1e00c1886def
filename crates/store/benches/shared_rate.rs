//! The shared rate limit on PostgreSQL (issue 28, item 4): how many admissions a second three
//! replicas make through it, and how close to its bound it admits under a hot loop.
//!
//!     d=$(mktemp -d); url=$(scripts/test-postgres start $d 54330)
//!     SANDGATE_BENCH_DATABASE_URL="$url?sslmode=disable" cargo bench -p sandgate-store --bench shared_rate
//!
//! Throughput: 3 replicas × 8 tasks ask in a loop for 5 s under a limit no one reaches.
//! Accuracy: the same load for 10 s against 600 a minute; GCRA admits the burst (600) and then
//! one every 100 ms, so at most 600 + 10 s × 10/s = 700 may pass.

#![allow(clippy::expect_used)]
// Where the benchmark's server is comes from the environment.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sandgate_store::{Admitted, Retention, StoreHandle};

const REPLICAS: usize = 3;
const TASKS_PER_REPLICA: usize = 8;

async fn hammer(replicas: &[StoreHandle], key: &str, per_minute: u32, seconds: u64) -> (u64, u64) {
    let admitted = Arc::new(AtomicU64::new(0));
    let asked = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for replica in replicas {
        for _ in 0..TASKS_PER_REPLICA {
            let (replica, admitted, asked, key) = (
                replica.clone(),
                admitted.clone(),
                asked.clone(),
                key.to_string(),
            );
            tasks.push(tokio::spawn(async move {
                while Instant::now() < until {
                    let answer = replica.admit_shared(&key, per_minute).await;
                    asked.fetch_add(1, Ordering::Relaxed);
                    if matches!(answer, Some(Ok(Admitted::Yes))) {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("a task ends");
    }
    (
        asked.load(Ordering::Relaxed),
        admitted.load(Ordering::Relaxed),
    )
}

fn main() {
    let Ok(url) = std::env::var("SANDGATE_BENCH_DATABASE_URL") else {
        eprintln!("set SANDGATE_BENCH_DATABASE_URL (scripts/test-postgres start prints one)");
        return;
    };
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let mut replicas = Vec::new();
        for _ in 0..REPLICAS {
            replicas.push(
                StoreHandle::postgres(&url, None, Retention::default())
                    .await
                    .expect("connects"),
            );
        }
        let key = format!("bench:{}", sandgate_store::now_ms());
        let (asked, admitted) = hammer(&replicas, &format!("{key}:free"), 1_000_000, 5).await;
        println!(
            "throughput: {asked} asked, {admitted} admitted in 5 s: {:.0} admissions/s through {REPLICAS} replicas",
            admitted as f64 / 5.0
        );
        let (asked, admitted) = hammer(&replicas, &format!("{key}:tight"), 600, 10).await;
        println!(
            "accuracy: {asked} asked, {admitted} admitted in 10 s against 600 a minute (bound 700)"
        );
    });
}
