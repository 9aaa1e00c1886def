//! Many executions on one worker: they wait together, never see each other, keep their own
//! limits, and a worker that dies takes only its own executions with it.
//!
//! Most tests here use a *gate*: a `test.gate` tool whose calls are all held until a given
//! number of them wait at once. Executions that each call it get through only if the worker
//! holds all of them in flight together (a worker that ran one execution at a time would
//! never open the gate), and while they wait there, every one of them is parked at the same
//! moment.

#![allow(clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::*;
use futures::future::{BoxFuture, join_all};
use sandgate_sandbox::{
    Bridge, CallFailure, ErrorKind, Execution, ExecutionResult, Limits, PoolConfig, Sandbox,
    ToolAnswer, ToolBinding,
};
use serde_json::{Value, json};

/// `test.gate` waits for the gate; everything else answers as [`TestBridge`] does.
struct GateBridge {
    gate: Arc<tokio::sync::Barrier>,
    waiting: Arc<AtomicU32>,
    rest: TestBridge,
}

impl GateBridge {
    fn new(parties: usize) -> Arc<GateBridge> {
        Arc::new(GateBridge {
            gate: Arc::new(tokio::sync::Barrier::new(parties)),
            waiting: Arc::default(),
            rest: TestBridge::default(),
        })
    }
}

impl Bridge for GateBridge {
    fn call_tool(
        &self,
        tool: &ToolBinding,
        args: String,
    ) -> BoxFuture<'static, Result<ToolAnswer, CallFailure>> {
        if tool.name != "gate" {
            return self.rest.call_tool(tool, args);
        }
        let (gate, waiting) = (self.gate.clone(), self.waiting.clone());
        Box::pin(async move {
            waiting.fetch_add(1, Ordering::SeqCst);
            gate.wait().await;
            Ok(ToolAnswer {
                json: json!({"content": [{"type": "text", "text": "through"}]}).to_string(),
                is_error: false,
            })
        })
    }
}

fn gated(code: &str, limits: Limits) -> Execution {
    let mut tools = tools().as_ref().clone();
    tools.push(tool("test", "gate"));
    Execution {
        tools: Arc::new(tools),
        limits,
        ..execution(code)
    }
}

async fn one_worker() -> Sandbox {
    sandbox_of_exactly(1).await
}

/// Runs every execution at once through one bridge, within `limit`.
async fn all_at_once(
    sb: &Sandbox,
    executions: Vec<Execution>,
    bridge: Arc<GateBridge>,
    limit: Duration,
) -> Vec<ExecutionResult> {
    let runs = executions
        .into_iter()
        .map(|e| sb.run(e, bridge.clone() as Arc<dyn Bridge>));
    tokio::time::timeout(limit, join_all(runs))
        .await
        .expect("the executions wait together, so the gate opens")
}

#[tokio::test]
async fn a_hundred_executions_wait_at_once_on_one_worker() {
    let sb = one_worker().await;
    let n = 100;
    let executions = (0..n)
        .map(|i| {
            gated(
                &format!("await test.gate({{}}); return {i};"),
                Limits::default(),
            )
        })
        .collect();
    let results = all_at_once(&sb, executions, GateBridge::new(n), Duration::from_secs(20)).await;
    for (i, result) in results.iter().enumerate() {
        assert_eq!(value(result), json!(i));
    }
    assert_eq!(sb.workers().len(), 1, "one worker held them all");
}

#[tokio::test]
async fn executions_sharing_a_worker_never_see_each_others_state() {
    let sb = one_worker().await;
    // Each writer changes everything a run can change, then waits at the gate with every
    // other execution parked beside it, then checks that all of it is still its own.
    let writer = |id: u32| {
        format!(
            r#"
            globalThis.mark = {id};
            Object.prototype.polluted = {id};
            Array.prototype.map = function () {{ return "map of {id}"; }};
            JSON.stringify = () => "stringify of {id}";
            const buffer = new Uint8Array(4096).fill({id});
            let fired = null;
            setTimeout(() => {{ fired = {id}; }}, 30);
            setTimeout(() => {{ globalThis.late = {id}; }}, 60_000);
            Symbol.for("writer-{id}");
            const started = Math.random();
            await test.gate({{}});
            await new Promise((resolve) => setTimeout(resolve, 60));
            return {{
                mark: globalThis.mark,
                polluted: ({{}}).polluted,
                map: [1].map((x) => x),
                stringify: JSON.stringify({{}}),
                buffer: buffer.every((b) => b === {id}),
                fired,
                symbols: Symbol.keyFor(Symbol.for("writer-{id}")),
                random: typeof started,
            }};
            "#
        )
    };
    // Each reader starts while writers wait, and must see a never-used runtime.
    let reader = r#"
        const seen = {
            mark: typeof mark,
            polluted: ({}).polluted === undefined,
            map: [1, 2].map((x) => x * 2),
            stringify: JSON.stringify({ a: 1 }),
            late: typeof late,
            zeroed: new Uint8Array(1 << 16).every((b) => b === 0),
        };
        await test.gate({});
        return seen;
    "#;
    let writers = 30u32;
    let readers = 10usize;
    let mut executions: Vec<Execution> = (1..=writers)
        .map(|id| gated(&writer(id), Limits::default()))
        .collect();
    executions.extend((0..readers).map(|_| gated(reader, Limits::default())));
    let bridge = GateBridge::new(writers as usize + readers);
    let results = all_at_once(&sb, executions, bridge, Duration::from_secs(20)).await;
    for (i, result) in results.iter().enumerate() {
        let got = value(result);
        if i < writers as usize {
            let id = i as u32 + 1;
            assert_eq!(
                got,
                json!({
                    "mark": id, "polluted": id, "map": format!("map of {id}"),
                    "stringify": format!("stringify of {id}"), "buffer": true, "fired": id,
                    "symbols": format!("writer-{id}"), "random": "number",
                }),
                "writer {id}"
            );
        } else {
            assert_eq!(
                got,
                json!({
                    "mark": "undefined", "polluted": true, "map": [2, 4],
                    "stringify": "{\"a\":1}", "late": "undefined", "zeroed": true,
                }),
                "reader {i}"
            );
        }
    }
    // And after them all, a run on the same worker starts from the template again.
    let after = run(
        &sb,
        "return [typeof mark, ({}).polluted, [1].map((x) => x + 1)];",
    )
    .await;
    assert_eq!(value(&after), json!(["undefined", null, [2]]));
}

#[tokio::test]
async fn a_limit_hit_in_one_execution_leaves_the_others_on_its_worker_correct() {
    let sb = one_worker().await;
    let good = |id: u32| {
        format!(
            "const a = await test.echo({{ id: {id} }});\n\
             const list = Array.from({{ length: 1000 }}, (_, i) => i * {id});\n\
             await test.gate({{}});\n\
             const b = await test.echo({{ id: {id}, sum: list.reduce((s, x) => s + x, 0) }});\n\
             return [a.echo.id, b.echo.sum];"
        )
    };
    let small = Limits {
        memory_bytes: 16 << 20,
        ..Limits::default()
    };
    let bad = [
        // Memory: arrays kept until the heap limit.
        (
            "await test.gate({}); const keep = []; while (true) keep.push(new Array(10000).fill(keep.length));",
            small,
            ErrorKind::Memory,
        ),
        // Stack: unbounded recursion.
        (
            "await test.gate({}); function f(n) { return f(n + 1) + 1; } return f(0);",
            Limits::default(),
            ErrorKind::Stack,
        ),
        // Time: a loop past its wall time. (On V8 the sixteen isolates take the main thread a
        // while to start, so this one must outlast their start to reach the gate.)
        (
            "await test.gate({}); while (true) {}",
            Limits {
                wall_ms: if on_v8() { 3_000 } else { 400 },
                ..Limits::default()
            },
            ErrorKind::Timeout,
        ),
        // Calls: past the call limit.
        (
            "await test.gate({}); for (let i = 0; ; i++) await test.echo({ i });",
            Limits {
                max_tool_calls: 5,
                ..Limits::default()
            },
            ErrorKind::Runtime,
        ),
    ];
    let goods = 12u32;
    let mut executions: Vec<Execution> = (1..=goods)
        .map(|id| gated(&good(id), Limits::default()))
        .collect();
    executions.extend(bad.iter().map(|(code, limits, _)| gated(code, *limits)));
    let bridge = GateBridge::new(goods as usize + bad.len());
    let results = all_at_once(&sb, executions, bridge, Duration::from_secs(30)).await;
    for (i, result) in results.iter().enumerate() {
        if i < goods as usize {
            let id = i as u64 + 1;
            assert_eq!(value(result), json!([id, id * 499_500]), "good run {id}");
        } else {
            let (code, _, kind) = &bad[i - goods as usize];
            let error = result.error.as_ref().expect("the bad run fails");
            assert_eq!(error.kind, *kind, "{code}: {error:?}");
        }
    }
    assert_eq!(
        value(&run(&sb, "return 'still serving';").await),
        json!("still serving")
    );
}

#[tokio::test]
async fn a_killed_worker_fails_exactly_its_executions_with_their_completed_calls() {
    let sb = sandbox_of_exactly(2).await;
    let n = 8usize;
    // Each run completes one call, then waits on a slow one until the test kills a worker.
    let executions: Vec<Execution> = (0..n)
        .map(|i| {
            gated(
                &format!(
                    "await test.echo({{ i: {i} }}); await test.slow({{ ms: 4000 }}); return {i};"
                ),
                Limits::default(),
            )
        })
        .collect();
    let bridge = Arc::new(TestBridge::default());
    let runs = executions.into_iter().map(|e| {
        let (sb, bridge) = (sb.clone(), bridge.clone());
        async move { sb.run(e, bridge as Arc<dyn Bridge>).await }
    });
    let all = tokio::spawn(join_all(runs));
    // Every execution has made its first call and waits in its second.
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        while bridge.in_flight.load(Ordering::SeqCst) < n as u32 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "all {n} executions reach their slow call");
    let workers = sb.workers();
    assert_eq!(workers.len(), 2, "{workers:?}");
    let victim = &workers[0];
    assert!(
        victim.executions > 0,
        "the least-loaded worker took some: {workers:?}"
    );
    let pid = victim.pid.expect("a live worker has a pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the worker");
    let results = tokio::time::timeout(Duration::from_secs(15), all)
        .await
        .expect("every execution ends")
        .expect("joined");
    let failed: Vec<&ExecutionResult> = results.iter().filter(|r| r.error.is_some()).collect();
    assert_eq!(
        failed.len(),
        victim.executions,
        "exactly the executions on the killed worker fail"
    );
    for result in &failed {
        let error = result.error.as_ref().expect("failed");
        assert_eq!(error.kind, ErrorKind::Internal, "{error:?}");
        assert!(
            error
                .message
                .contains("1 call(s) had completed and may have changed state: test.echo"),
            "the error lists the completed calls: {}",
            error.message
        );
        assert!(error.message.contains("not retried"), "{}", error.message);
        assert!(result.trace[0].ok && result.trace[0].name == "test.echo");
    }
    for (i, result) in results.iter().enumerate() {
        if result.error.is_none() {
            assert_eq!(value(result), json!(i));
        }
    }
    // The pool replaces the worker and serves on.
    assert_eq!(value(&run(&sb, "return 'served';").await), json!("served"));
}

#[tokio::test]
async fn cancelling_a_computing_execution_spares_the_worker_and_its_neighbours() {
    let sb = one_worker().await;
    let pid = sb.workers()[0].pid;
    let bridge = Arc::new(TestBridge::default());
    let neighbour = sb.run(
        execution("await test.slow({ ms: 600 }); return 'neighbour';"),
        bridge.clone(),
    );
    let spinning = sb.run_until(
        execution("await test.echo({}); while (true) {}"),
        bridge.clone(),
        tokio::time::sleep(Duration::from_millis(200)),
    );
    let started = std::time::Instant::now();
    let (neighbour, spinning) = tokio::join!(neighbour, spinning);
    let error = spinning.error.expect("cancelled");
    assert_eq!(error.kind, ErrorKind::Cancelled, "{error:?}");
    assert_eq!(value(&neighbour), json!("neighbour"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the loop stopped long before its 30 s wall time"
    );
    assert_eq!(
        sb.workers().iter().map(|w| w.pid).collect::<Vec<_>>(),
        vec![pid],
        "the worker was not killed"
    );
    // The loop was stopped inside the worker: the next run starts at once.
    let next = run(&sb, "return 'next';").await;
    assert_eq!(value(&next), json!("next"));
    assert!(
        next.stats.wall_ms < 1000.0,
        "no loop holds the worker: {} ms",
        next.stats.wall_ms
    );
}

#[tokio::test]
async fn a_run_waiting_in_the_parked_state_times_out_on_its_own() {
    // An execution parked behind others still ends at its own deadline.
    let sb = one_worker().await;
    let bridge = GateBridge::new(2);
    let lonely = gated(
        "await test.gate({}); return 'never';",
        Limits {
            wall_ms: 300,
            ..Limits::default()
        },
    );
    let busy = gated(
        "await test.slow({ ms: 800 }); return 'busy';",
        Limits::default(),
    );
    let results = all_at_once(&sb, vec![lonely, busy], bridge, Duration::from_secs(10)).await;
    let error = results[0].error.as_ref().expect("timed out");
    assert_eq!(error.kind, ErrorKind::Timeout, "{error:?}");
    assert_eq!(value(&results[1]), json!("busy"));
    let _: Value = value(&run(&sb, "return 1;").await);
}

#[tokio::test]
async fn a_run_queued_behind_a_computing_step_moves_to_a_free_worker_and_runs_once() {
    let mut config = PoolConfig::new(worker_program());
    config.workers = 1;
    config.max_workers = 2;
    let sb = Sandbox::start(config).await.expect("sandbox");
    let bridge = Arc::new(TestBridge::default());
    // The loop goes first; the quick run lands behind it on the same worker, in its pipe.
    let computing = {
        let (sb, bridge) = (sb.clone(), bridge.clone());
        tokio::spawn(async move {
            sb.run(
                execution(
                    "const end = Date.now() + 3000; while (Date.now() < end) {} return 'done';",
                ),
                bridge,
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(5)).await;
    let quick = sb
        .run(
            execution("const r = await test.echo({ n: 1 }); return r.echo.n;"),
            bridge.clone(),
        )
        .await;
    assert_eq!(value(&quick), json!(1));
    assert!(
        !computing.is_finished(),
        "the quick run finished while the loop still held the first worker"
    );
    assert_eq!(
        bridge.calls.load(Ordering::SeqCst),
        1,
        "the moved run made its call once"
    );
    let computing = computing.await.expect("joined");
    assert_eq!(value(&computing), json!("done"));
}

#[tokio::test]
async fn code_an_execution_leaves_running_never_holds_up_the_next() {
    // On V8 an isolate serves one execution after another, each in a fresh context. One whose
    // code goes on after its result (a loop of microtasks) is not given the next run: the
    // isolate goes back only once it answers between tasks, which this one never does, and it
    // is ended. On both engines the run answers with its result all the same.
    let sb = one_worker().await;
    let short = Limits {
        wall_ms: 1_000,
        ..Limits::default()
    };
    for round in 0..3 {
        let leaver = run_with(
            &sb,
            "(async () => { for (;;) await null; })(); return 'left';",
            short,
        )
        .await;
        assert_eq!(value(&leaver), json!("left"), "round {round}");
        let next = run_with(
            &sb,
            "await new Promise((r) => setTimeout(r, 5)); return 'next';",
            short,
        )
        .await;
        assert_eq!(
            value(&next),
            json!("next"),
            "round {round}: {:?}",
            next.error
        );
    }
}

#[tokio::test]
async fn cleanup_callbacks_run_while_their_execution_does() {
    // A FinalizationRegistry's callbacks run when the collector gets to them. On V8 an isolate
    // serves one execution after another, so the guest's callbacks are gated to its own
    // execution's life (`guest.js`); within it they are called as on any engine.
    let sb = one_worker().await;
    let code = r#"
        let called = 0;
        const registry = new FinalizationRegistry(() => { called++; });
        for (let i = 0; i < 20000; i++) registry.register({ i, pad: new Array(8).fill(i) }, i);
        for (let round = 0; round < 50 && called === 0; round++) {
            const junk = [];
            for (let i = 0; i < 20000; i++) junk.push({ i, pad: new Array(8).fill(i) });
            await new Promise((r) => setTimeout(r, 10));
        }
        return [called > 0, registry instanceof FinalizationRegistry];
    "#;
    assert_eq!(value(&run(&sb, code).await), json!([true, true]));
}

/// The threads of a process, from `/proc`.
fn threads_of(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn after_a_burst_a_worker_keeps_only_a_few_ready() {
    // On V8 each execution in flight holds an isolate (a thread of the Deno process) and a
    // finished one is kept for the next run: after a burst only a few stay, the rest end.
    let sb = one_worker().await;
    assert_eq!(value(&run(&sb, "return 1;").await), json!(1));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let pid = sb.workers()[0].pid.expect("a running worker has a pid");
    let before = threads_of(pid);
    let burst = (0..30).map(|_| {
        run_with(
            &sb,
            "await new Promise((r) => setTimeout(r, 300)); return 'done';",
            Limits {
                wall_ms: 20_000,
                ..Limits::default()
            },
        )
    });
    for result in join_all(burst).await {
        assert_eq!(value(&result), json!("done"), "{:?}", result.error);
    }
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    assert_eq!(sb.workers()[0].pid, Some(pid), "the same worker");
    let after = threads_of(pid);
    // At most 8 ready isolates (4 were before), and a few threads of Deno's own that a burst
    // starts; the 30 isolates the burst used would be 26 more.
    assert!(
        before > 0 && after <= before + 10,
        "{before} threads before the burst of 30, {after} after it"
    );
}

#[tokio::test]
async fn a_run_whose_time_ends_before_it_gets_an_isolate_is_told_none_of_it_ran() {
    // On V8 each execution in flight holds an isolate. Twelve that hold theirs for a second
    // take the four kept ready and the eight started for those left waiting; three short runs
    // behind them wait past their 200 ms. Their code never ran, so they are told the engine was
    // busy (safe to retry), not that their code ran out of time (look for an endless loop).
    let sb = one_worker().await;
    assert_eq!(value(&run(&sb, "return 1;").await), json!(1));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let holders: Vec<_> = (0..12)
        .map(|_| {
            run_with(
                &sb,
                "await new Promise((r) => setTimeout(r, 1000)); return 'held';",
                Limits {
                    wall_ms: 20_000,
                    ..Limits::default()
                },
            )
        })
        .collect();
    let short = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let runs = (0..3).map(|_| {
            run_with(
                &sb,
                "return 'ran';",
                Limits {
                    wall_ms: 200,
                    ..Limits::default()
                },
            )
        });
        join_all(runs).await
    };
    let (held, short) = tokio::join!(join_all(holders), short);
    for result in &held {
        assert_eq!(value(result), json!("held"), "{:?}", result.error);
    }
    if !on_v8() {
        for result in &short {
            assert_eq!(value(result), json!("ran"), "{:?}", result.error);
        }
        return;
    }
    let busy: Vec<_> = short
        .iter()
        .filter_map(|r| r.error.as_ref())
        .filter(|e| e.kind == ErrorKind::Busy)
        .collect();
    assert!(
        !busy.is_empty(),
        "a short run waited past its time: {short:?}"
    );
    for error in busy {
        assert!(
            error.message.contains("none of its code ran")
                && error.message.contains("200 ms")
                && error
                    .hint
                    .as_deref()
                    .is_some_and(|h| h.contains("safe to run again")),
            "{error:?}"
        );
    }
    for result in &short {
        assert!(
            result
                .error
                .as_ref()
                .is_none_or(|e| e.kind == ErrorKind::Busy),
            "a short run either ran or was told it could not: {:?}",
            result.error
        );
    }
}
