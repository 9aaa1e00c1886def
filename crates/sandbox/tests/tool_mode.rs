//! Stored tools in the sandbox (`RunMode::Tool`): the module's default export runs with
//! `context.input` and `ctx`, which holds exactly the tools and host functions the execution
//! was given; nothing becomes a global.

#![allow(clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use sandgate_sandbox::{ErrorKind, Execution, RunMode};
use serde_json::{Value, json};

fn tool_execution(code: &str, input: Value) -> Execution {
    Execution {
        mode: RunMode::Tool,
        engine: Default::default(),
        env: Default::default(),
        context: Some(
            json!({"input": input, "caller": {"profile": "reader", "execution_id": "ex-1"}}),
        ),
        ..execution(code)
    }
}

#[tokio::test]
async fn a_tool_gets_its_input_and_its_capabilities_through_ctx_only() {
    let sandbox = sandbox(1).await;
    let code = r#"
export const meta = { description: "echoes", input: { type: "object" } };
export default async function (input: { word: string }, ctx: any) {
  ctx.log("called with", input.word);
  const echoed = await ctx.tools.test.echo({ said: input.word });
  const sum = await ctx.addNumbers(2, 3);
  return {
    echoed, sum, caller: ctx.caller,
    globals: [typeof test, typeof tools, typeof mcp, typeof addNumbers, typeof ctx.fetch],
    keys: Object.keys(ctx).sort(),
  };
}"#;
    let result = sandbox
        .run(
            tool_execution(code, json!({"word": "hi"})),
            Arc::new(TestBridge::default()),
        )
        .await;
    assert!(result.error.is_none(), "{:?}", result.error);
    let got = value(&result);
    assert_eq!(got["echoed"], json!({"echo": {"said": "hi"}}));
    assert_eq!(got["sum"], json!(5));
    assert_eq!(got["caller"]["profile"], "reader");
    assert_eq!(
        got["globals"],
        json!([
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined"
        ])
    );
    assert_eq!(got["keys"], json!(["addNumbers", "caller", "log", "tools"]));
    assert_eq!(result.logs[0].message, "called with hi");
}

#[tokio::test]
async fn the_object_form_and_errors_with_their_line() {
    let sandbox = sandbox(1).await;
    let code = "export const meta = { description: 'x', input: {} };\nexport default {\n  async execute(input: any, ctx: any) {\n    throw new Error(`no ${input.what}`);\n  },\n};";
    let result = sandbox
        .run(
            tool_execution(code, json!({"what": "luck"})),
            Arc::new(TestBridge::default()),
        )
        .await;
    let error = result.error.expect("thrown");
    assert_eq!(error.kind, ErrorKind::Runtime);
    assert!(error.message.contains("no luck"), "{error:?}");
    assert_eq!(error.line, Some(4), "{error:?}");
}
