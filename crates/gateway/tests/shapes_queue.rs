//! The shape learner's queue is bounded in bytes while callers on many threads offer results
//! and the learner takes them. The count used to be added after a lesson was sent: when the
//! learner took the lesson and subtracted its bytes first, the count wrapped below zero, and a
//! concurrent offer panicked on overflow ("attempt to add with overflow" in a
//! `call_tool_chain`, seen once in a CI run under load). That window is a few instructions and
//! cannot be forced from outside; the count is now permits each lesson holds until it is
//! dropped, so it cannot wrap whoever runs first. This test holds the accounting under the
//! same race: sixteen threads offer as fast as they can while the learner drains, the count
//! stays within its bound throughout, and every byte comes back once all is learned.

#![allow(clippy::expect_used)]

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, ContentBlock};
use sandgate_gateway::shapes::Shapes;

#[test]
fn the_queued_byte_count_never_wraps_while_offers_race_the_learner() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let config = sandgate_config::parse_str(
        "[servers.gh]\ncommand = \"true\"\n",
        sandgate_config::Format::Toml,
        "shapes.toml",
    )
    .expect("config");
    let shapes = runtime.block_on(async {
        let (manager, _calls) =
            sandgate_upstream::BackendManager::start(&config, Default::default());
        Shapes::start(None, manager).await
    });
    let result = CallToolResult::success(vec![ContentBlock::text("{\"n\":1}")]);
    let until = Instant::now() + Duration::from_secs(3);
    let offerers: Vec<_> = (0..16)
        .map(|_| {
            let shapes: Arc<Shapes> = shapes.clone();
            let result = result.clone();
            thread::spawn(move || {
                let mut offers = 0u64;
                while Instant::now() < until {
                    for _ in 0..64 {
                        shapes.offer("gh".into(), "list".into(), result.clone(), 7);
                        let queued = shapes.queued_bytes();
                        assert!(
                            queued <= 16 * 1024 * 1024 + 16 * 7,
                            "the queued byte count wrapped: {queued} after {offers} offers"
                        );
                        offers += 1;
                    }
                    // Let the learner take what waits, so offers keep meeting a drain.
                    if shapes.waiting() > 1024 {
                        thread::sleep(Duration::from_micros(200));
                    }
                }
                offers
            })
        })
        .collect();
    let offers: u64 = offerers
        .into_iter()
        .map(|o| o.join().expect("an offering thread panicked"))
        .sum();
    assert!(offers > 10_000, "only {offers} offers in 3 s");
    runtime.block_on(shapes.flush());
    assert_eq!(shapes.queued_bytes(), 0, "bytes counted for nothing");
}
