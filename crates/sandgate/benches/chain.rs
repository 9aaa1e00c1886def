//! call_tool_chain benchmarks (issue 4): the gateway's own cost on each tier, against the same
//! real backend (the npm `server-everything`, over stdio) called directly.
//!
//! - `direct/manager_call`: policy check + the backend call through sandgate's rmcp client,
//!   the floor every tier pays;
//! - `chain/json` (tier 1), `chain/single_call` (tier 2), `chain/sandbox` (tier 3, forced):
//!   the whole `call_tool_chain`, with routing, result mapping, shaping, rendering and the
//!   execution record (to an in-memory store).
//!
//! The gateway's added latency per tier-1 call is `chain/json − direct/manager_call`
//! (target ≤ 100 µs). Needs the npm servers: run `scripts/test` once, or `npm ci` in
//! tests/node.

#![allow(missing_docs, clippy::expect_used)]
#![expect(
    clippy::disallowed_methods,
    reason = "the benchmark starts backends, which inherit PATH and HOME"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use sandgate_config::{Format, parse_str};
use sandgate_gateway::AuditLog;
use sandgate_gateway::{Caller, Cancellation, ChainArgs, ChainRuntime, Gateway, call_tool_chain};
use sandgate_policy::{Access, ToolCall};
use sandgate_sandbox::{Limits, PoolConfig, Sandbox};
use sandgate_store::{Retention, Store, StoreHandle};
use sandgate_upstream::{BackendCalls, BackendManager, ManagerOptions};

const EVERYTHING: &str =
    "tests/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js";

fn bench(c: &mut Criterion) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let server = repo.join(EVERYTHING);
    assert!(
        server.exists(),
        "{} is missing: run scripts/test once (or npm ci in tests/node)",
        server.display()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let toml = format!(
        "[servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
        server.display().to_string()
    );
    let config = parse_str(&toml, Format::Toml, "bench.toml").expect("config");
    let (gateway, direct) = runtime.block_on(async {
        let inherited_env: Vec<(String, String)> = sandgate_upstream::INHERITED_ENV
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
            .collect();
        // Listings pass the supply-chain guard, as they do in `sandgate serve` (pins in memory).
        let guard =
            sandgate_gateway::pins::PinGuard::new(None, sandgate_gateway::AuditLog::disabled());
        let options = || ManagerOptions {
            inherited_env: inherited_env.clone(),
            cache: None,
            restart: Default::default(),
            guard: Some(guard.clone() as std::sync::Arc<dyn sandgate_upstream::ListingGuard>),
        };
        // The direct measurement calls a backend of its own (the gateway's door keeps the
        // gateway's backends' only calls half): the same server, started the same way.
        let (direct, direct_calls) = BackendManager::start(&config, options());
        let (manager, calls) = BackendManager::start(&config, options());
        direct.wait_settled(Duration::from_secs(30)).await;
        manager.wait_settled(Duration::from_secs(30)).await;
        let mut pool = PoolConfig::new(env!("CARGO_BIN_EXE_sandgate"));
        pool.args = vec!["__sandbox-worker".into()];
        pool.workers = 2;
        let sandbox = Sandbox::start(pool).await.expect("sandbox");
        let store = StoreHandle::spawn(Store::open_in_memory(Retention::default()).expect("store"))
            .expect("store thread");
        let gateway = Gateway::builder(manager, Box::new(calls))
            .profiles(config.access_profiles())
            .audit(AuditLog::disabled())
            .chain(ChainRuntime {
                sandbox,
                store: Some(store),
                output: Default::default(),
                limits: Limits::default(),
                default_engine: Default::default(),
            })
            .build()
            .await;
        // Let the catalog see the backend before measuring.
        let _ = gateway
            .settled_view(&Caller::local(gateway.profiles()).access)
            .await;
        (gateway, (direct, direct_calls))
    });
    assert!(
        !gateway.catalog().is_empty(),
        "server-everything did not connect"
    );

    let samples: Samples = Arc::default();
    let runtime = &runtime;

    // Direct: the backend call itself, through the same rmcp client and policy check.
    {
        let (gateway, direct) = (gateway.clone(), Arc::new(direct));
        let measure = timed(runtime, samples.clone(), "direct/manager_call", move || {
            let (gateway, direct) = (gateway.clone(), direct.clone());
            async move {
                let authorized = Access::new(gateway.profile("default"))
                    .authorize_tool(ToolCall::new("everything", "echo"))
                    .expect("allowed");
                let mut args = serde_json::Map::new();
                args.insert("message".into(), "bench".into());
                let result = direct
                    .1
                    .call(&authorized, Some(args), Default::default())
                    .await
                    .expect("echo");
                assert_ne!(result.is_error, Some(true));
            }
        });
        c.bench_function("direct/manager_call", |b| b.iter_custom(&measure));
    }

    for (name, code, force) in [
        (
            "chain/json",
            r#"{"tool": "everything.echo", "arguments": {"message": "bench"}}"#,
            false,
        ),
        (
            "chain/single_call",
            "return await everything.echo({message: 'bench'})",
            false,
        ),
        (
            "chain/sandbox",
            "return await everything.echo({message: 'bench'})",
            true,
        ),
    ] {
        let gateway = gateway.clone();
        let measure = timed(runtime, samples.clone(), name, move || {
            let gateway = gateway.clone();
            async move {
                let args = ChainArgs {
                    code: code.to_string(),
                    force_sandbox: Some(force),
                    ..ChainArgs::default()
                };
                let never = Cancellation::default();
                let caller = Caller::local(gateway.profiles());
                let result = call_tool_chain(&gateway, &caller, args, None, &never).await;
                assert_ne!(result.is_error, Some(true), "{result:?}");
            }
        });
        c.bench_function(name, |b| b.iter_custom(&measure));
    }

    // Stored tools (issue 17): a tool that answers from its input, run as a stored tool
    // through the door (lookup, input validation, the tool's access and view, the sandbox run in
    // tool mode, the result's normalisation and output check), against the same module run by
    // the sandbox alone. The difference is what a stored tool costs beyond its run.
    let tool_code = "export const meta = { description: 'bench', input: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] }, output: { type: 'object', properties: { doubled: { type: 'number' } } } };\nexport default async function (input: { n: number }) { return { doubled: input.n * 2 }; }\n";
    runtime.block_on(async {
        let store = gateway.chain_store().expect("store");
        store
            .put_tool(
                "bench_double",
                tool_code,
                &stored_meta(tool_code),
                "default",
            )
            .await
            .expect("registered");
        let tools = store.tools().await.expect("stored tools");
        gateway
            .install_stored_tools(sandgate_gateway::stored::load(tools))
            .await;
    });
    {
        let gateway = gateway.clone();
        let measure = timed(runtime, samples.clone(), "stored/call", move || {
            let gateway = gateway.clone();
            async move {
                let caller = Caller::local(gateway.profiles());
                let mut args = serde_json::Map::new();
                args.insert("n".into(), 21.into());
                let answer = gateway
                    .call_as(
                        &caller,
                        &sandgate_catalog::ToolRef::new("user", "bench_double"),
                        args,
                    )
                    .await
                    .expect("called");
                assert!(!answer.is_error, "{}", answer.json);
            }
        });
        c.bench_function("stored/call", |b| b.iter_custom(&measure));
    }
    {
        let sandbox = gateway.chain_sandbox().expect("sandbox");
        let measure = timed(runtime, samples.clone(), "stored/sandbox_run", move || {
            let sandbox = sandbox.clone();
            async move {
                let execution = sandgate_sandbox::Execution {
                    code: tool_code.to_string(),
                    tools: Arc::new(vec![]),
                    host_functions: Arc::new(vec![]),
                    env: Default::default(),
                    context: Some(
                        serde_json::json!({"input": {"n": 21}, "caller": {"profile": "default"}}),
                    ),
                    limits: Limits::default(),
                    mode: sandgate_sandbox::RunMode::Tool,
                    engine: Default::default(),
                };
                let result = sandbox.run(execution, Arc::new(NoTools)).await;
                assert!(result.error.is_none(), "{:?}", result.error);
            }
        });
        c.bench_function("stored/sandbox_run", |b| b.iter_custom(&measure));
    }

    println!("\nper-call percentiles (all timed calls, warm-up included):");
    let all = std::mem::take(&mut *samples.lock().expect("samples"));
    let p50 = |times: &[Duration]| times[times.len() / 2];
    for (name, times) in &all {
        let mut times = times.clone();
        times.sort();
        let at = |q: f64| times[((times.len() as f64 - 1.0) * q) as usize];
        println!(
            "  {name:22} n={:6}  p50 {:>9.1?}  p95 {:>9.1?}",
            times.len(),
            at(0.5),
            at(0.95)
        );
    }
    if let (Some(run), Some(call)) = (all.get("stored/sandbox_run"), all.get("stored/call")) {
        let (mut run, mut call) = (run.clone(), call.clone());
        run.sort();
        call.sort();
        println!(
            "  stored tool overhead beyond its sandbox run (p50 stored/call − p50 stored/sandbox_run): {:.1?}",
            p50(&call).saturating_sub(p50(&run))
        );
    }
    if let (Some(direct), Some(json)) = (all.get("direct/manager_call"), all.get("chain/json")) {
        let (mut direct, mut json) = (direct.clone(), json.clone());
        direct.sort();
        json.sort();
        println!(
            "  gateway overhead per tier-1 call (p50 chain/json − p50 direct): {:.1?}",
            p50(&json).saturating_sub(p50(&direct))
        );
    }
}

/// The meta JSON of a tool file, as registration stores it.
fn stored_meta(code: &str) -> String {
    sandgate_sandbox::tool_file::read(code)
        .expect("a tool file")
        .meta
        .to_string()
}

/// A bridge for a run that calls nothing.
struct NoTools;

impl sandgate_sandbox::Bridge for NoTools {
    fn call_tool(
        &self,
        _tool: &sandgate_sandbox::ToolBinding,
        _args: String,
    ) -> futures::future::BoxFuture<
        'static,
        Result<sandgate_sandbox::ToolAnswer, sandgate_sandbox::CallFailure>,
    > {
        Box::pin(async {
            Err(sandgate_sandbox::CallFailure::new(
                sandgate_sandbox::FailureKind::Denied,
                "no tools",
            ))
        })
    }
}

type Samples = Arc<Mutex<BTreeMap<&'static str, Vec<Duration>>>>;

/// A criterion `iter_custom` body: runs `op` `iterations` times inside a task on the runtime
/// (the way the gateway awaits it), timing each run and keeping every time for percentiles.
/// Preparing the next `op` (cloning handles, building arguments) is inside the timing, as it
/// is on a real request.
fn timed<F, Fut>(
    runtime: &tokio::runtime::Runtime,
    samples: Samples,
    name: &'static str,
    op: F,
) -> impl Fn(u64) -> Duration
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    move |iterations| {
        let op = op.clone();
        let samples = samples.clone();
        runtime
            .block_on(runtime.spawn(async move {
                let mut each = Vec::with_capacity(iterations as usize);
                for _ in 0..iterations {
                    let started = Instant::now();
                    op().await;
                    each.push(started.elapsed());
                }
                let total = each.iter().sum();
                samples
                    .lock()
                    .expect("samples")
                    .entry(name)
                    .or_default()
                    .extend(each);
                total
            }))
            .expect("bench task")
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
