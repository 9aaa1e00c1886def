//! The `call_tool_chain` response format (docs/call_tool_chain.md), snapshot by snapshot: a
//! small result, a shaped one that names where the rest is, logs, a runtime error with its
//! hint, and a timeout that lists what completed and what may have changed state.

#![allow(clippy::expect_used)]

use rmcp::model::CallToolResult;
use sandgate_catalog::{Catalog, ToolSpec};
use sandgate_gateway::chain::response::{Request, respond};
use sandgate_gateway::chain::{Outcome, Tier};
use sandgate_gateway::{Caller, Owner, Principal};
use sandgate_output::OutputConfig;
use sandgate_policy::{Access, Profile};
use sandgate_sandbox::{CallRecord, ErrorKind, ExecError, LogLine};
use sandgate_store::{Retention, Store, StoreHandle};
use serde_json::{Value, json};

fn catalog() -> Catalog {
    let spec = |backend: &str, name: &str, read_only: Option<bool>| ToolSpec {
        backend: backend.into(),
        name: name.into(),
        description: None,
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: read_only.map(|r| json!({"readOnlyHint": r})),
        origin: Default::default(),
    };
    Catalog::new(vec![
        spec("memory", "create_entities", Some(false)),
        spec("memory", "read_graph", Some(true)),
        spec("legacy", "write", None),
    ])
}

fn call(name: &str, ms: Option<f64>, ok: bool) -> CallRecord {
    CallRecord {
        condition: None,
        name: name.into(),
        args_bytes: 20,
        started_ms: 0.0,
        duration_ms: ms,
        ok,
        result_bytes: 100,
        error: None,
        arguments: None,
    }
}

fn outcome(tier: Tier, value: Option<Value>, error: Option<ExecError>) -> Outcome {
    Outcome {
        tier,
        value,
        error,
        logs: vec![],
        calls: vec![],
        duration_ms: 12.345,
    }
}

fn render(outcome: &Outcome, max_chars: usize, store: Option<&StoreHandle>) -> CallToolResult {
    let caller = Caller {
        owner: Owner::Local,
        access: Access::new(std::sync::Arc::new(Profile::implicit_default(
            "sandgate.toml",
        ))),
        principal: Principal::Local,
        name: None,
        grant: None,
        trace: opentelemetry::Context::new(),
        reach: Default::default(),
    };
    let request = Request {
        id: "ex-test",
        code: "return 1",
        intent: None,
        max_chars,
        started_at_ms: 0,
        caller: &caller,
        observed: &|_| None,
    };
    futures::executor::block_on(
        respond(
            outcome,
            &request,
            &catalog(),
            store,
            &OutputConfig::default(),
        )
        .committed(),
    )
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn store() -> StoreHandle {
    StoreHandle::spawn(Store::open_in_memory(Retention::default()).expect("store")).expect("thread")
}

#[test]
fn a_small_result() {
    let mut ok = outcome(
        Tier::SingleCall,
        Some(json!({"entities": [], "relations": []})),
        None,
    );
    ok.calls = vec![call("memory.read_graph", Some(2.5), true)];
    let result = render(&ok, 20_000, None);
    assert_eq!(result.is_error, Some(false));
    insta::assert_snapshot!(text(&result));
    insta::assert_json_snapshot!(result.structured_content);
}

#[tokio::test]
async fn a_shaped_result_names_where_the_rest_is() {
    let items: Vec<Value> = (0..400)
        .map(|i| json!({"id": i, "name": format!("item {i}")}))
        .collect();
    let full = serde_json::to_string_pretty(&Value::Array(items.clone())).expect("json");
    let store = store();
    let result = render(
        &outcome(Tier::Sandbox, Some(Value::Array(items)), None),
        2_000,
        Some(&store),
    );
    insta::assert_snapshot!(text(&result));
    let data = result.structured_content.expect("structured");
    assert_eq!(data["shaped"], json!(true));
    assert_eq!(
        data["output"]["resource"],
        json!("sandgate://executions/ex-test/output")
    );
    assert_eq!(store.output("ex-test").await.expect("stored"), full);
    assert_eq!(
        store.get("ex-test").await.expect("recorded").tier,
        "sandbox"
    );
}

#[test]
fn logs_and_a_runtime_error_with_its_hint() {
    let mut failed = outcome(
        Tier::Sandbox,
        None,
        Some(ExecError {
            kind: ErrorKind::Runtime,
            message: "ReferenceError: githb is not defined".into(),
            line: Some(3),
            column: Some(9),
            hint: Some("Did you mean `github`?".into()),
            fault: None,
        }),
    );
    failed.logs = vec![
        LogLine {
            level: "log".into(),
            message: "starting".into(),
        },
        LogLine {
            level: "warn".into(),
            message: "two items".into(),
        },
    ];
    let result = render(&failed, 20_000, None);
    assert_eq!(result.is_error, Some(true));
    insta::assert_snapshot!(text(&result));
}

#[test]
fn a_timeout_lists_completed_calls_and_writes() {
    let mut timed_out = outcome(
        Tier::Sandbox,
        None,
        Some(ExecError {
            kind: ErrorKind::Timeout,
            message: "the execution ran out of time (1000 ms) with 1 call(s) still in flight"
                .into(),
            line: None,
            column: None,
            hint: Some("The code ran out of time.".into()),
            fault: None,
        }),
    );
    timed_out.calls = vec![
        call("memory.create_entities", Some(3.0), true),
        call("memory.read_graph", Some(1.0), true),
        call("legacy.write", Some(4.0), true),
        call("memory.read_graph", None, false),
    ];
    let result = render(&timed_out, 20_000, None);
    insta::assert_snapshot!(text(&result));
    insta::assert_json_snapshot!(result.structured_content.expect("structured")["calls"]);
}

#[test]
fn a_run_that_made_calls_and_returned_nothing_is_told_to_return() {
    let mut forgot = outcome(Tier::Sandbox, Some(Value::Null), None);
    forgot.calls = vec![
        call("memory.read_graph", Some(2.0), true),
        call("memory.read_graph", Some(3.0), true),
    ];
    let result = render(&forgot, 20_000, None);
    let text = text(&result);
    assert!(
        text.contains("the script returned nothing after 2 call(s); add `return …`"),
        "{text}"
    );
    insta::assert_snapshot!(text);
    // Without calls, a `null` result is just a result.
    let plain = render(
        &outcome(Tier::Sandbox, Some(Value::Null), None),
        20_000,
        None,
    );
    assert!(!text_of_note(&plain), "{}", self::text(&plain));
}

#[test]
fn calls_still_running_when_the_script_returned_are_named() {
    let mut escaped = outcome(Tier::Sandbox, Some(json!([{}, {}])), None);
    escaped.calls = vec![
        call("memory.create_entities", None, false),
        call("memory.create_entities", None, false),
    ];
    let result = render(&escaped, 20_000, None);
    let text = text(&result);
    assert!(
        text.contains("2 call(s) were still running when the script returned, and were stopped (memory.create_entities): `await` each call"),
        "{text}"
    );
    insta::assert_snapshot!(text);
}

fn text_of_note(result: &CallToolResult) -> bool {
    text(result).contains("--- note ---")
}
