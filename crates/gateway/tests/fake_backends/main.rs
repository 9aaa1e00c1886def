//! Gateway logic over fake backends: no backend process, the gateway built from its parts as
//! the binary builds it, the door and the sandbox real. The tiers give the same answer; the
//! door allows, denies, narrows and runs stored tools; large results are shaped and kept;
//! every execution is recorded; progress reaches the client; a cancelled execution stops its
//! calls.
//!
//! The test binary is its own sandbox worker (as `sandgate` is), so it runs with a custom
//! harness: `cargo test -p sandgate-gateway --test fake_backends`.

#![allow(clippy::expect_used, missing_docs)]

mod fake;
mod setup;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fake::{Behaviour, Fakes, answers, echoes};
use libtest_mimic::{Arguments, Failed, Trial};
use rmcp::model::CallToolResult;
use sandgate_gateway::{Cancellation, ChainArgs, call_tool_chain};
use sandgate_upstream::BackendProgress;
use serde_json::{Value, json};
use setup::{Built, build, caller, run, structured};

/// Lets the worker build its template runtime in the heap region, as in `sandgate`.
#[global_allocator]
static ALLOCATOR: sandgate_sandbox::region::RegionAllocator =
    sandgate_sandbox::region::RegionAllocator;

fn main() {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == setup::WORKER_ARG)
    {
        std::process::exit(sandgate_sandbox::worker_main());
    }
    let tests = vec![
        trial(
            "the_tiers_give_the_same_answer",
            the_tiers_give_the_same_answer,
        ),
        trial(
            "the_door_allows_denies_and_narrows",
            the_door_allows_denies_and_narrows,
        ),
        trial(
            "a_stored_tool_calls_backends_through_the_door",
            a_stored_tool_calls_backends_through_the_door,
        ),
        trial(
            "a_large_result_is_shaped_and_kept_whole",
            a_large_result_is_shaped_and_kept_whole,
        ),
        trial(
            "every_execution_is_recorded_with_its_calls",
            every_execution_is_recorded_with_its_calls,
        ),
        trial(
            "a_backends_progress_reaches_the_client",
            a_backends_progress_reaches_the_client,
        ),
        trial(
            "progress_grows_on_the_wire_while_many_calls_report_at_once",
            progress_grows_on_the_wire_while_many_calls_report_at_once,
        ),
        trial(
            "a_cancelled_execution_stops_its_calls",
            a_cancelled_execution_stops_its_calls,
        ),
        trial(
            "a_backends_condition_reaches_the_hint_as_data",
            a_backends_condition_reaches_the_hint_as_data,
        ),
    ];
    libtest_mimic::run(&Arguments::from_args(), tests).exit();
}

/// A test body that runs on its own runtime.
fn trial<F, Fut>(name: &'static str, body: F) -> Trial
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), Failed>>,
{
    Trial::test(name, move || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Failed::from(e.to_string()))?
            .block_on(body())
    })
}

/// `condition`, or a failure saying `what`.
fn check(condition: bool, what: impl std::fmt::Display) -> Result<(), Failed> {
    if condition {
        Ok(())
    } else {
        Err(what.to_string().into())
    }
}

fn memory() -> Fakes {
    Fakes::default()
        .tool(
            "memory",
            "read_graph",
            Some(true),
            answers(r#"{"entities":[{"name":"ada"}],"relations":[]}"#),
        )
        .tool("memory", "create_entities", Some(false), echoes())
        .tool("memory", "echo", Some(true), echoes())
}

/// What a response says, without what differs from run to run (ids, times, the tier).
fn comparable(result: &CallToolResult) -> Value {
    let mut value = structured(result);
    if let Value::Object(map) = &mut value {
        for key in ["execution_id", "duration_ms", "tier"] {
            map.remove(key);
        }
        if let Some(Value::Array(calls)) = map.get_mut("calls") {
            for call in calls {
                if let Value::Object(call) = call {
                    call.remove("duration_ms");
                }
            }
        }
    }
    value
}

async fn the_tiers_give_the_same_answer() -> Result<(), Failed> {
    let Built { gateway, .. } = build(memory(), "").await;
    let caller = caller(&gateway, "default");
    for (tool, arguments) in [
        ("read_graph", json!({})),
        ("create_entities", json!({"entities": [{"name": "grace"}]})),
    ] {
        let json_call =
            json!({"tool": format!("memory.{tool}"), "arguments": arguments}).to_string();
        let code = format!("return await memory.{tool}({arguments});");
        let tier1 = run(
            &gateway,
            &caller,
            ChainArgs {
                code: json_call,
                ..Default::default()
            },
        )
        .await;
        let tier2 = run(
            &gateway,
            &caller,
            ChainArgs {
                code: code.clone(),
                ..Default::default()
            },
        )
        .await;
        let tier3 = run(
            &gateway,
            &caller,
            ChainArgs {
                code,
                force_sandbox: Some(true),
                ..Default::default()
            },
        )
        .await;
        let tiers: Vec<Value> = [&tier1, &tier2, &tier3]
            .iter()
            .map(|r| structured(r)["tier"].clone())
            .collect();
        check(
            tiers == [json!("json"), json!("single_call"), json!("sandbox")],
            format!("each call took its tier: {tiers:?}"),
        )?;
        check(
            comparable(&tier1) == comparable(&tier2) && comparable(&tier2) == comparable(&tier3),
            format!(
                "memory.{tool}: the tiers answer alike:\n{:#}\n{:#}\n{:#}",
                comparable(&tier1),
                comparable(&tier2),
                comparable(&tier3)
            ),
        )?;
    }
    Ok(())
}

async fn the_door_allows_denies_and_narrows() -> Result<(), Failed> {
    let profiles =
        "[profiles.default]\ntools = [\"*\"]\n[profiles.reader]\ntools = [\"memory.read_*\"]\n";
    let Built {
        gateway,
        fakes,
        audit,
        ..
    } = build(memory(), profiles).await;
    let create =
        json!({"tool": "memory.create_entities", "arguments": {"entities": []}}).to_string();

    // Allowed: the default profile reaches the backend, and the decision is audited.
    let allowed = run(
        &gateway,
        &caller(&gateway, "default"),
        ChainArgs {
            code: create.clone(),
            ..Default::default()
        },
    )
    .await;
    check(
        structured(&allowed)["status"] == "ok",
        format!("allowed: {:#}", structured(&allowed)),
    )?;
    check(
        fakes.reached().len() == 1,
        format!("reached: {:?}", fakes.reached()),
    )?;

    // Denied: a profile without the tool never reaches it, and the refusal is audited.
    let denied = run(
        &gateway,
        &caller(&gateway, "reader"),
        ChainArgs {
            code: create.clone(),
            ..Default::default()
        },
    )
    .await;
    check(
        denied.is_error == Some(true),
        format!("denied: {:#}", structured(&denied)),
    )?;
    check(
        fakes.reached().len() == 1,
        format!("a denied call reached the backend: {:?}", fakes.reached()),
    )?;

    // Narrowed: allow_tools takes the tool away from a profile that has it.
    let narrowed = run(
        &gateway,
        &caller(&gateway, "default"),
        ChainArgs {
            code: "return await memory.create_entities({entities: []});".into(),
            allow_tools: Some(vec!["memory.read_*".into()]),
            ..Default::default()
        },
    )
    .await;
    check(
        narrowed.is_error == Some(true),
        format!("narrowed: {:#}", structured(&narrowed)),
    )?;
    check(
        fakes.reached().len() == 1,
        format!("a narrowed call reached the backend: {:?}", fakes.reached()),
    )?;

    // And what the narrowing leaves still works.
    let read = run(
        &gateway,
        &caller(&gateway, "reader"),
        ChainArgs {
            code: "return await memory.read_graph({});".into(),
            ..Default::default()
        },
    )
    .await;
    check(
        structured(&read)["result"]["entities"][0]["name"] == "ada",
        format!("read: {:#}", structured(&read)),
    )?;

    let lines = audit.lines().await;
    let decided = |profile: &str, decision: &str| {
        lines.iter().any(|l| {
            l["profile"] == profile
                && l["target"] == "memory.create_entities"
                && l["decision"] == decision
        })
    };
    check(
        decided("default", "allow"),
        format!("the allowed call is audited: {lines:#?}"),
    )?;
    check(
        decided("reader", "deny"),
        format!("the denied call is audited: {lines:#?}"),
    )?;
    Ok(())
}

async fn a_stored_tool_calls_backends_through_the_door() -> Result<(), Failed> {
    let Built { gateway, fakes, .. } = build(memory(), "").await;
    let code = "export const meta = { description: 'doubles through echo', input: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] }, capabilities: { tools: ['memory.echo'] } };\n\
                export default async function (input: { n: number }, ctx: any) { return await ctx.tools.memory.echo({ n: input.n * 2 }); }\n";
    setup::register(&gateway, "double", code).await;
    let caller = caller(&gateway, "default");
    let answer = run(
        &gateway,
        &caller,
        ChainArgs {
            code: "return await user.double({n: 21});".into(),
            ..Default::default()
        },
    )
    .await;
    let result = &structured(&answer)["result"];
    check(
        result["data"]["n"] == 42 || result["n"] == 42 || result.to_string().contains("42"),
        format!("stored tool answer: {:#}", structured(&answer)),
    )?;
    let reached = fakes.reached();
    check(
        reached.len() == 1 && reached[0].tool == "echo" && reached[0].arguments == json!({"n": 42}),
        format!("the stored tool's call reached the backend through the door: {reached:?}"),
    )?;
    // Bad input never enters the sandbox, and calls nothing.
    let bad = run(
        &gateway,
        &caller,
        ChainArgs {
            code: "return await user.double({n: 'x'});".into(),
            ..Default::default()
        },
    )
    .await;
    check(
        bad.is_error == Some(true),
        format!("bad input: {:#}", structured(&bad)),
    )?;
    check(fakes.reached().len() == 1, "bad input reached a backend")?;
    Ok(())
}

async fn a_large_result_is_shaped_and_kept_whole() -> Result<(), Failed> {
    let items: Vec<Value> = (0..400)
        .map(|i| json!({"id": i, "name": format!("item {i}")}))
        .collect();
    let big = json!({"items": items}).to_string();
    let fakes = Fakes::default().tool("catalog", "list", Some(true), answers(big.clone()));
    let Built { gateway, store, .. } = build(fakes, "").await;
    let caller = caller(&gateway, "default");
    let answer = run(
        &gateway,
        &caller,
        ChainArgs {
            code: r#"{"tool": "catalog.list", "arguments": {}}"#.into(),
            max_output_size: Some(2_000),
            ..Default::default()
        },
    )
    .await;
    let shown = structured(&answer);
    check(shown["shaped"] == true, format!("shaped: {shown:#}"))?;
    check(
        shown["output"]["stored"] == true,
        format!("stored: {shown:#}"),
    )?;
    let id = shown["execution_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let key = caller.key(&id, sandgate_gateway::Part::Output);
    let kept = store.output(&key).await.map_err(|e| e.to_string())?;
    let kept: Value = serde_json::from_str(&kept).map_err(|e| e.to_string())?;
    check(
        kept["items"].as_array().map(Vec::len) == Some(400),
        "the whole result is kept",
    )?;
    Ok(())
}

async fn every_execution_is_recorded_with_its_calls() -> Result<(), Failed> {
    let Built { gateway, store, .. } = build(memory(), "").await;
    let caller = caller(&gateway, "default");
    let answer = run(
        &gateway,
        &caller,
        ChainArgs {
            code: "const g = await memory.read_graph({}); await memory.create_entities({entities: g.entities}); return g.entities.length;".into(),
            ..Default::default()
        },
    )
    .await;
    let id = structured(&answer)["execution_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let record = store.get(&id).await.map_err(|e| e.to_string())?;
    check(
        record.status == "ok" && record.tier == "sandbox",
        format!("{record:?}"),
    )?;
    let calls: Vec<(String, bool, Option<bool>)> = record
        .call_rows
        .iter()
        .map(|c| (format!("{}.{}", c.backend, c.tool), c.ok, c.changed_state))
        .collect();
    check(
        calls
            == [
                ("memory.read_graph".into(), true, Some(false)),
                ("memory.create_entities".into(), true, Some(true)),
            ],
        format!("{calls:?}"),
    )
}

async fn a_backends_progress_reaches_the_client() -> Result<(), Failed> {
    let slow: Behaviour = Arc::new(|_, context| {
        Box::pin(async move {
            if let Some(progress) = &context.progress {
                for step in 1..=3 {
                    // Apart by more than the gateway's shortest interval between notices.
                    tokio::time::sleep(Duration::from_millis(80)).await;
                    let _ = progress
                        .send(BackendProgress {
                            progress: f64::from(step),
                            total: Some(3.0),
                            message: Some(format!("step {step}")),
                        })
                        .await;
                }
            }
            Ok(CallToolResult::success(vec![
                rmcp::model::ContentBlock::text("done"),
            ]))
        })
    });
    let Built { gateway, .. } = build(Fakes::default().tool("work", "slow", None, slow), "").await;
    let heard =
        setup::call_with_progress(&gateway, r#"{"tool": "work.slow", "arguments": {}}"#).await?;
    let messages: Vec<String> = heard.iter().filter_map(|p| p.message.clone()).collect();
    check(
        ["step 1", "step 2", "step 3"]
            .iter()
            .all(|s| messages.iter().any(|m| m.contains(s))),
        format!("progress heard: {messages:?}"),
    )?;
    check(
        heard.windows(2).all(|w| w[1].progress > w[0].progress),
        format!("progress grows: {heard:?}"),
    )
}

/// Calls that run side by side report their own progress and finish at once: every notice
/// the client gets must still carry a larger number than the one before, as the spec asks.
async fn progress_grows_on_the_wire_while_many_calls_report_at_once() -> Result<(), Failed> {
    let chatty: Behaviour = Arc::new(|_, context| {
        Box::pin(async move {
            if let Some(progress) = &context.progress {
                for _ in 0..4 {
                    // A finished step is always passed on (no interval drops it).
                    let _ = progress
                        .send(BackendProgress {
                            progress: 1.0,
                            total: Some(1.0),
                            message: None,
                        })
                        .await;
                    tokio::task::yield_now().await;
                }
            }
            Ok(CallToolResult::success(vec![
                rmcp::model::ContentBlock::text("done"),
            ]))
        })
    });
    let Built { gateway, .. } =
        build(Fakes::default().tool("work", "chatty", None, chatty), "").await;
    let code = "await Promise.all(Array.from({length: 40}, () => work.chatty({}))); return 1;";
    for round in 0..5 {
        let heard = setup::call_with_progress(&gateway, code).await?;
        check(
            heard.len() > 40,
            format!(
                "round {round}: every call and notice heard: {}",
                heard.len()
            ),
        )?;
        let backwards: Vec<_> = heard
            .windows(2)
            .filter(|w| w[1].progress <= w[0].progress)
            .map(|w| (w[0].progress, w[1].progress))
            .collect();
        check(
            backwards.is_empty(),
            format!("round {round}: progress went back on the wire: {backwards:?}"),
        )?;
    }
    Ok(())
}

async fn a_cancelled_execution_stops_its_calls() -> Result<(), Failed> {
    let dropped = Arc::new(AtomicBool::new(false));
    let seen = dropped.clone();
    let forever: Behaviour = Arc::new(move |_, _| {
        let guard = DropFlag(seen.clone());
        Box::pin(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(CallToolResult::success(vec![]))
        })
    });
    let Built { gateway, fakes, .. } =
        build(Fakes::default().tool("work", "forever", None, forever), "").await;
    let caller = caller(&gateway, "default");
    for (name, code) in [
        (
            "json",
            r#"{"tool": "work.forever", "arguments": {}}"#.to_string(),
        ),
        ("sandbox", "await work.forever({}); return 1;".to_string()),
    ] {
        dropped.store(false, Ordering::SeqCst);
        let token = tokio_util::sync::CancellationToken::new();
        let cancel = Cancellation::new(token.clone());
        let started = Instant::now();
        let (answer, ()) = tokio::join!(
            call_tool_chain(
                &gateway,
                &caller,
                ChainArgs {
                    code,
                    ..Default::default()
                },
                None,
                &cancel
            ),
            async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                token.cancel();
            }
        );
        check(
            started.elapsed() < Duration::from_secs(5),
            format!("{name}: answered at once: {:?}", started.elapsed()),
        )?;
        check(
            structured(&answer)["status"] == "cancelled",
            format!("{name}: {:#}", structured(&answer)),
        )?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        check(
            dropped.load(Ordering::SeqCst),
            format!("{name}: the backend call was dropped"),
        )?;
    }
    check(fakes.reached().len() == 2, format!("{:?}", fakes.reached()))
}

async fn a_backends_condition_reaches_the_hint_as_data() -> Result<(), Failed> {
    let failing = |error: fn() -> sandgate_upstream::UpstreamError| -> Behaviour {
        Arc::new(move |_, _| Box::pin(async move { Err(error()) }))
    };
    let fakes = Fakes::default()
        .tool(
            "cold",
            "go",
            None,
            failing(|| sandgate_upstream::UpstreamError::StillStarting {
                backend: "cold".into(),
                waited: Duration::from_secs(1),
            }),
        )
        .tool(
            "down",
            "go",
            None,
            failing(|| sandgate_upstream::UpstreamError::Unavailable {
                backend: "down".into(),
                // Words that once chose the hint: the condition decides now.
                reason: "it said it is still starting, but it is not".into(),
                retrying: false,
            }),
        );
    let Built { gateway, .. } = build(fakes, "").await;
    let caller = caller(&gateway, "default");
    for (backend, expected) in [("cold", "not ready yet"), ("down", "The backend is down")] {
        for force_sandbox in [None, Some(true)] {
            let answer = run(
                &gateway,
                &caller,
                ChainArgs {
                    code: format!("return await {backend}.go({{}});"),
                    force_sandbox,
                    ..Default::default()
                },
            )
            .await;
            let hint = structured(&answer)["error"]["hint"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            check(
                hint.contains(expected),
                format!("{backend} (sandbox: {force_sandbox:?}): {hint}"),
            )?;
        }
    }
    Ok(())
}

/// Sets its flag when dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}
