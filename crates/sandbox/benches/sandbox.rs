//! Sandbox benchmarks, through the pool of real locked-down worker processes, with a never-used
//! QuickJS runtime and context for every execution (copied back from the worker's template
//! image; `no_template/*` builds one per execution instead) and an in-process echo tool.
//! Targets (issue 3): trivial p50 ≤ 250 µs; 3 awaited tool calls p50 ≤ 300 µs; ≤ 15 µs per
//! extra tool call; TS strip of a 30-line script ≤ 100 µs; ≥ 3,000 trivial executions/s.
//! `floor/pipe_round_trip_to_a_child_process` measures what no sandbox code can go below: one
//! byte to a child process and back.

#![allow(missing_docs, clippy::expect_used)] // criterion_group! generates undocumented items
#![expect(
    clippy::disallowed_methods,
    reason = "a test or benchmark harness reads its settings (PATH, RUSTC, PROPTEST_CASES, BENCH_WORKERS) from the environment"
)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use futures::future::BoxFuture;
use sandgate_sandbox::NO_TEMPLATE_ARG;
use sandgate_sandbox::engine::{self, Link, RunRequest, SharedLink};
use sandgate_sandbox::protocol::{HostFrame, WorkerFrame};
use sandgate_sandbox::{
    Bridge, CallFailure, Execution, Limits, PoolConfig, Sandbox, ToolAnswer, ToolBinding,
};

/// Answers every call at once with the arguments as structured content.
struct Echo;

impl Bridge for Echo {
    fn call_tool(
        &self,
        _tool: &ToolBinding,
        args: String,
    ) -> BoxFuture<'static, Result<ToolAnswer, CallFailure>> {
        Box::pin(async move {
            Ok(ToolAnswer {
                json: format!(r#"{{"content":[],"structuredContent":{args}}}"#),
                is_error: false,
            })
        })
    }
}

/// The worker's link, in memory: every call is answered like [`Echo`], at once.
#[derive(Default)]
struct InMemoryEcho {
    replies: Vec<HostFrame>,
}

impl Link for InMemoryEcho {
    fn send(&mut self, frame: &WorkerFrame) -> std::io::Result<()> {
        if let WorkerFrame::Call { run, id, args, .. } = frame {
            self.replies.push(HostFrame::Reply {
                run: *run,
                id: *id,
                result: Ok(format!(r#"{{"content":[],"structuredContent":{args}}}"#)),
            });
        }
        Ok(())
    }

    fn recv(&mut self, _timeout: Duration) -> std::io::Result<Option<HostFrame>> {
        Ok(self.replies.pop())
    }
}

type Samples = Arc<Mutex<BTreeMap<&'static str, Vec<Duration>>>>;

/// Adds one timed batch to a benchmark's per-execution samples (for the percentile report).
fn keep(samples: &Samples, name: &'static str, each: Vec<Duration>) {
    samples
        .lock()
        .expect("samples")
        .entry(name)
        .or_default()
        .extend(each);
}

fn execution(code: &str) -> Execution {
    Execution {
        code: code.to_string(),
        tools: Arc::new(vec![ToolBinding {
            backend: "bench".into(),
            name: "echo".into(),
            js_backend: "bench".into(),
            js_tool: "echo".into(),
            declaration: String::new(),
        }]),
        host_functions: Arc::new(vec![]),
        env: Default::default(),
        context: None,
        limits: Limits::default(),
        mode: Default::default(),
        engine: Default::default(),
    }
}

/// The same execution with a gateway's worth of tools besides `bench.echo`: `backends`
/// backends of `per_backend` tools each, every one with a declaration of realistic size (what
/// `sandgate_catalog` generates for a five-property schema, about 400 characters).
fn execution_among(code: &str, backends: usize, per_backend: usize) -> Execution {
    let mut tools = execution(code).tools.as_ref().clone();
    for b in 0..backends {
        for t in 0..per_backend {
            tools.push(ToolBinding {
                backend: format!("server-{b}"),
                name: format!("do-thing-{t}"),
                js_backend: format!("server_{b}"),
                js_tool: format!("do_thing_{t}"),
                declaration: format!(
                    "/** Does thing {t} on server {b}: finds the records that match the query and returns them in pages. */\n\
                     do_thing_{t}(args: {{ query: string; limit?: number; order?: \"asc\" | \"desc\"; filter?: {{ field: string; value: string }}; tags?: string[] }}): Promise<{{ items: {{ id: string; title: string }}[]; next?: string }}>;"
                ),
            });
        }
    }
    Execution {
        tools: Arc::new(tools),
        ..execution(code)
    }
}

const TRIVIAL: &str = "return 1;";
const PY_TRIVIAL: &str = "1";
const PY_THREE_AWAITED: &str =
    "a = await bench.echo(n=1)\nb = await bench.echo(n=2)\nc = await bench.echo(n=3)\n[a, b, c]";

/// The same three calls for Monty alone, to a function `echo` of its host.
const MONTY_THREE_AWAITED: &str =
    "a = await echo(n=1)\nb = await echo(n=2)\nc = await echo(n=3)\n[a, b, c]";

/// An execution of Python `code` on Monty.
fn on_monty(code: &str) -> Execution {
    Execution {
        engine: sandgate_sandbox::Engine::Monty,
        ..execution(code)
    }
}

/// Runs `code` on Monty in this process: every name is a host function, whose calls are
/// futures resolved with their keyword arguments as soon as the code awaits them (as `Echo`
/// answers, and as the worker drives Monty).
fn monty_alone(code: &str) -> monty_types::MontyObject {
    use monty::{MontyRun, RunProgress};
    use monty_types::{
        CompileOptions, MontyObject, NameLookupResult, PrintWriter, ResourceTracker,
    };
    let runner = MontyRun::new(
        code.to_string(),
        "bench.py",
        vec![],
        CompileOptions::default(),
    )
    .expect("compiles");
    let mut progress = runner
        .start(vec![], ResourceTracker::default(), PrintWriter::Disabled)
        .expect("starts");
    let mut answers = Vec::new();
    loop {
        progress = match progress {
            RunProgress::Complete(value) => return value,
            RunProgress::NameLookup(lookup) => {
                let name = lookup.name.clone();
                lookup
                    .resume(
                        NameLookupResult::Value(MontyObject::Function {
                            name,
                            docstring: None,
                        }),
                        PrintWriter::Disabled,
                    )
                    .expect("resumes")
            }
            RunProgress::FunctionCall(call) => {
                answers.push((call.call_id, MontyObject::Dict(call.kwargs.clone().into())));
                call.resume_pending(PrintWriter::Disabled).expect("resumes")
            }
            RunProgress::ResolveFutures(waiting) => {
                let ready = std::mem::take(&mut answers)
                    .into_iter()
                    .map(|(id, value)| (id, monty_types::ExtFunctionResult::Return(value)))
                    .collect();
                waiting
                    .resume(ready, PrintWriter::Disabled)
                    .expect("resumes")
            }
            other => panic!("unexpected pause: {other:?}"),
        };
    }
}
const THREE_AWAITED: &str = "const a = await bench.echo({n: 1}); const b = await bench.echo({n: 2}); const c = await bench.echo({n: 3}); return [a, b, c];";

const SCRIPT_30_LINES: &str = r#"
interface Issue { id: number; title: string; labels: string[]; state: "open" | "closed" }
type Summary = { total: number; open: number; byLabel: Record<string, number> };
enum Priority { Low = 1, High = 2 }
function summarize(issues: Issue[]): Summary {
  const byLabel: Record<string, number> = {};
  let open = 0;
  for (const issue of issues) {
    if (issue.state === "open") open++;
    for (const label of issue.labels) {
      byLabel[label] = (byLabel[label] ?? 0) + 1;
    }
  }
  return { total: issues.length, open, byLabel };
}
const pages: number[] = [1, 2, 3];
const results = await Promise.all(pages.map((page) => bench.echo({ page, per_page: 50 })));
const issues: Issue[] = results.flatMap((r: any) =>
  Array.from({ length: 3 }, (_, i) => ({
    id: r.page * 10 + i,
    title: `Issue ${i}`,
    labels: i % 2 ? ["bug"] : ["feature", "ui"],
    state: (i % 3 ? "open" : "closed") as Issue["state"],
  })),
);
const priority = issues.length > 5 ? Priority.High : Priority.Low;
const summary = summarize(issues);
console.log(`summarized ${summary.total} issues`);
return { summary, priority };
"#;

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let program = env!("CARGO_BIN_EXE_sandgate-worker");
    let mut config = PoolConfig::new(program);
    config.workers = std::env::var("BENCH_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(2);
    // The same workers, told to build a runtime for every execution instead of copying one
    // back from their template image: what the template saves.
    let mut no_template = config.clone();
    no_template.args = vec![NO_TEMPLATE_ARG.to_string()];
    let sandbox = runtime.block_on(Sandbox::start(config)).expect("sandbox");
    assert!(
        sandbox.protections().all_active(),
        "benchmarks must measure locked-down workers"
    );
    assert!(sandbox.template_bytes().is_some(), "workers use a template");
    let no_template = runtime
        .block_on(Sandbox::start(no_template))
        .expect("sandbox without templates");
    assert!(no_template.template_bytes().is_none());
    // Python on Monty (issue 50): the same workers' program in its Python mode, next to
    // QuickJS in the same run.
    let mut python_workers = PoolConfig::new(program);
    python_workers.args = vec![sandgate_sandbox::PYTHON_ARG.to_string()];
    let mut quickjs_one = PoolConfig::new(program);
    quickjs_one.workers = 1;
    let python = runtime
        .block_on(async {
            Sandbox::start(quickjs_one)
                .await?
                .with_python(python_workers)
                .await
        })
        .expect("the Python engine");
    let bridge: Arc<dyn Bridge> = Arc::new(Echo);

    let runtime = &runtime;
    // Each measurement runs inside a task on the runtime, the way the gateway calls the sandbox
    // (a request handler awaiting `Sandbox::run`), not from a thread outside it.
    // Every execution's own time is also kept, so the report can give true percentiles
    // (criterion's estimates are of the mean).
    let samples: Samples = Arc::default();
    let timed = |sandbox: &Sandbox, name: &'static str, run: Execution| {
        let sandbox = sandbox.clone();
        let bridge = bridge.clone();
        let samples = samples.clone();
        move |iterations: u64| -> Duration {
            let sandbox = sandbox.clone();
            let bridge = bridge.clone();
            let samples = samples.clone();
            let run = run.clone();
            runtime
                .block_on(runtime.spawn(async move {
                    let mut total = Duration::ZERO;
                    let mut each = Vec::with_capacity(iterations as usize);
                    for _ in 0..iterations {
                        let started = Instant::now();
                        let result = sandbox.run(run.clone(), bridge.clone()).await;
                        let took = started.elapsed();
                        total += took;
                        each.push(took);
                        assert!(result.error.is_none(), "{:?}", result.error);
                    }
                    keep(&samples, name, each);
                    total
                }))
                .expect("bench task")
        }
    };

    // The floor under any call that crosses the worker boundary: one byte to a child process
    // (`cat`) and back, from a task on the same runtime, with no sandgate code involved.
    let floor_samples = samples.clone();
    c.bench_function("floor/pipe_round_trip_to_a_child_process", |b| {
        b.iter_custom(|iterations| {
            let samples = floor_samples.clone();
            runtime
                .block_on(runtime.spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut child = tokio::process::Command::new("cat")
                        .stdin(std::process::Stdio::piped())
                        .stdout(std::process::Stdio::piped())
                        .kill_on_drop(true)
                        .spawn()
                        .expect("cat");
                    let mut input = child.stdin.take().expect("stdin");
                    let mut output = child.stdout.take().expect("stdout");
                    let mut byte = [0u8; 1];
                    let mut total = Duration::ZERO;
                    let mut each = Vec::with_capacity(iterations as usize);
                    for _ in 0..iterations {
                        let started = Instant::now();
                        input.write_all(&byte).await.expect("write");
                        output.read_exact(&mut byte).await.expect("read");
                        let took = started.elapsed();
                        total += took;
                        each.push(took);
                    }
                    keep(&samples, "floor/pipe_round_trip_to_a_child_process", each);
                    total
                }))
                .expect("floor task")
        })
    });

    // Diagnostic: the same engine inside this process, its calls answered by an in-memory link,
    // so no call crosses a process boundary. Each iteration still gets a fresh runtime (made
    // and torn down outside the timed part). 200 sequential calls minus a 200-iteration loop
    // without calls, divided by 200, is sandgate's own per-call work on both sides.
    for (name, code) in [
        (
            "in_process/200_sequential_calls",
            "let s = 0; for (let i = 0; i < 200; i++) s += (await bench.echo({i})).i; return s;",
        ),
        (
            "in_process/200_iteration_loop",
            "let s = 0; for (let i = 0; i < 200; i++) s += i; return s;",
        ),
    ] {
        let js = sandgate_sandbox::transpile::transpile(code)
            .expect("valid")
            .js;
        let tools = Arc::new(engine::ToolSet::new(execution(code).tools.as_ref().clone()));
        c.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let fresh = engine::fresh().expect("fresh runtime");
                    let link: SharedLink = Rc::new(RefCell::new(InMemoryEcho::default()));
                    let request = RunRequest {
                        js: js.clone(),
                        tools: tools.clone(),
                        host_functions: vec![],
                        env: Default::default(),
                        context: None,
                        limits: Limits::default(),
                        mode: Default::default(),
                    };
                    let started = Instant::now();
                    let (done, spent) = engine::steps::execute(fresh, 1, request, &link);
                    total += started.elapsed();
                    drop(spent);
                    assert!(
                        matches!(done, WorkerFrame::Done { outcome: Ok(_), .. }),
                        "{done:?}"
                    );
                }
                total
            })
        });
    }

    // Monty alone, in this process: compiling and running the script, its calls answered in
    // place. What the Python rows above add to this is the worker boundary and sandgate's own.
    for (name, code) in [
        ("monty_alone/trivial", PY_TRIVIAL),
        ("monty_alone/3_awaited_tool_calls", MONTY_THREE_AWAITED),
    ] {
        c.bench_function(name, |b| b.iter(|| monty_alone(code)));
    }

    c.bench_function("transpile_30_line_script", |b| {
        b.iter(|| sandgate_sandbox::transpile::transpile(std::hint::black_box(SCRIPT_30_LINES)))
    });
    // Its parts: the nesting check every parse of untrusted code starts with, and the parse
    // itself without the check or the sized stack.
    c.bench_function("nesting_check_30_line_script", |b| {
        b.iter(|| sandgate_sandbox::nesting::check(std::hint::black_box(SCRIPT_30_LINES)))
    });
    c.bench_function("sized_stack_for_30_line_script", |b| {
        b.iter(|| sandgate_sandbox::nesting::on_sized_stack(SCRIPT_30_LINES.len(), || 1))
    });
    c.bench_function("transpile_30_line_script_unguarded", |b| {
        b.iter(|| {
            sandgate_sandbox::transpile::transpile_on_this_stack(std::hint::black_box(
                SCRIPT_30_LINES,
            ))
        })
    });
    // A gateway in front of twenty servers gives every execution all of their tools and the
    // code uses one: `among_400_tools/*` minus the `execute/*` row of the same script is what
    // the rest cost. `no_template/*` runs on workers that build a runtime per execution.
    let rows = [
        ("execute/trivial", &sandbox, execution(TRIVIAL)),
        (
            "execute/3_awaited_tool_calls",
            &sandbox,
            execution(THREE_AWAITED),
        ),
        (
            "execute/0_calls_loop",
            &sandbox,
            execution("let s = 0; for (let i = 0; i < 20; i++) s += i; return s;"),
        ),
        (
            // Ten thousand promise reactions in one step: what the job loop's own checks cost.
            "execute/10k_chained_promises",
            &sandbox,
            execution(
                "let p = Promise.resolve(0); for (let i = 0; i < 1e4; i++) p = p.then((x) => x + 1); return await p;",
            ),
        ),
        (
            "execute/20_sequential_tool_calls",
            &sandbox,
            execution(
                "let s = 0; for (let i = 0; i < 20; i++) s += (await bench.echo({i})).i; return s;",
            ),
        ),
        (
            "execute/20_parallel_tool_calls",
            &sandbox,
            execution(
                "const r = await Promise.all(Array.from({length: 20}, (_, i) => bench.echo({i}))); return r.length;",
            ),
        ),
        (
            "execute/30_line_ts_with_3_parallel_calls",
            &sandbox,
            execution(SCRIPT_30_LINES),
        ),
        (
            "among_400_tools/trivial",
            &sandbox,
            execution_among(TRIVIAL, 20, 20),
        ),
        (
            "among_400_tools/touch_a_20_tool_backend",
            &sandbox,
            execution_among("return typeof server_0.do_thing_0;", 20, 20),
        ),
        (
            "among_400_tools/3_awaited_tool_calls",
            &sandbox,
            execution_among(THREE_AWAITED, 20, 20),
        ),
        ("python/trivial", &python, on_monty(PY_TRIVIAL)),
        (
            "python/3_awaited_tool_calls",
            &python,
            on_monty(PY_THREE_AWAITED),
        ),
        ("no_template/trivial", &no_template, execution(TRIVIAL)),
        (
            "no_template/3_awaited_tool_calls",
            &no_template,
            execution(THREE_AWAITED),
        ),
    ];
    for (name, pool, run) in rows {
        let measure = timed(pool, name, run);
        c.bench_function(name, |b| b.iter_custom(&measure));
    }

    // Latency with spare capacity: executions arrive 2 ms apart (agents send code seconds
    // apart), so each worker has prepared its next fresh runtime before the next one comes.
    // Only the execution itself is timed; every execution still gets a never-used runtime.
    for (name, code) in [
        ("paced/trivial", TRIVIAL),
        ("paced/3_awaited_tool_calls", THREE_AWAITED),
    ] {
        let sandbox = sandbox.clone();
        let bridge = bridge.clone();
        c.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    std::thread::sleep(Duration::from_millis(2));
                    let started = Instant::now();
                    let result = runtime.block_on(sandbox.run(execution(code), bridge.clone()));
                    total += started.elapsed();
                    assert!(result.error.is_none(), "{:?}", result.error);
                }
                total
            })
        });
    }

    // Throughput: trivial executions issued from 8 concurrent callers onto the 2-worker pool.
    let mut group = c.benchmark_group("throughput");
    group.throughput(criterion::Throughput::Elements(200));
    group.bench_function("trivial_executions_200_from_8_callers", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let started = Instant::now();
                runtime.block_on(async {
                    let callers = (0..8).map(|_| {
                        let sandbox = sandbox.clone();
                        let bridge = bridge.clone();
                        tokio::spawn(async move {
                            for _ in 0..25 {
                                let result =
                                    sandbox.run(execution("return 1;"), bridge.clone()).await;
                                assert!(result.error.is_none());
                            }
                        })
                    });
                    for caller in futures::future::join_all(callers).await {
                        caller.expect("caller");
                    }
                });
                total += started.elapsed();
            }
            total
        })
    });
    group.finish();

    println!("\nper-execution percentiles (all timed executions, warm-up included):");
    for (name, mut times) in std::mem::take(&mut *samples.lock().expect("samples")) {
        times.sort();
        let at = |q: f64| times[((times.len() as f64 - 1.0) * q) as usize];
        println!(
            "  {name:45} n={:6}  p50 {:>9.1?}  p95 {:>9.1?}  p99 {:>9.1?}",
            times.len(),
            at(0.5),
            at(0.95),
            at(0.99)
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
