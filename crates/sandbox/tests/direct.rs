//! The host-side shortcuts (`direct`, `single_call`) against the real thing: each input runs
//! through a locked-down worker too, and the two must agree exactly. This is what lets the
//! gateway skip the sandbox for a single call and still promise the same bytes.

#![allow(clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use sandgate_sandbox::direct::{map_tool_result, tool_error};
use sandgate_sandbox::single_call::{Shortcut, recognise};
use sandgate_sandbox::{Bridge, CallFailure, Execution, Limits, ToolAnswer, ToolBinding};
use serde_json::{Value, json};

/// `t.reply({raw})` answers with `raw` as the MCP result; `t.args(x)` records the JSON the
/// guest sent.
#[derive(Default)]
struct MirrorBridge {
    sent: Mutex<Vec<String>>,
}

impl Bridge for MirrorBridge {
    fn call_tool(
        &self,
        tool: &ToolBinding,
        args: String,
    ) -> BoxFuture<'static, Result<ToolAnswer, CallFailure>> {
        let reply = if tool.name == "reply" {
            let parsed: Value = serde_json::from_str(&args).unwrap_or(Value::Null);
            parsed
                .get("raw")
                .cloned()
                .unwrap_or(Value::Null)
                .to_string()
        } else {
            if let Ok(mut sent) = self.sent.lock() {
                sent.push(args);
            }
            json!({"content": []}).to_string()
        };
        let is_error = reply.contains("\"isError\":true");
        Box::pin(async move {
            Ok(ToolAnswer {
                json: reply,
                is_error,
            })
        })
    }
}

fn execution(code: String) -> Execution {
    Execution {
        code,
        tools: Arc::new(vec![common::tool("t", "reply"), common::tool("t", "args")]),
        host_functions: Arc::new(vec![]),
        env: Default::default(),
        context: None,
        limits: Limits::default(),
        mode: Default::default(),
        engine: Default::default(),
    }
}

#[tokio::test]
async fn result_mapping_matches_the_preamble() {
    let sandbox = common::sandbox(1).await;
    let raws = [
        json!({"content": [{"type": "text", "text": "plain"}]}),
        json!({"content": [{"type": "text", "text": "  {\"b\": 1.0, \"a\": [1e2, 0.5]}"}]}),
        json!({"content": [{"type": "text", "text": "[1, 2"}]}),
        json!({"content": [{"type": "text", "text": "\u{feff}[1]"}]}),
        json!({"content": [{"type": "text", "text": "\u{a0}[1]"}]}),
        json!({"content": [{"type": "text", "text": "{\"z\": 1, \"10\": 2, \"2\": 3}"}]}),
        json!({"content": [{"type": "text", "text": "12345678901234567890"}]}),
        json!({"content": [{"type": "text", "text": "[12345678901234567890, 9007199254740993]"}]}),
        json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
        json!({"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}),
        json!({"content": []}),
        json!({"content": [], "structuredContent": {"k": 1.0, "1": "one"}}),
        json!({"content": [{"type": "text", "text": "x"}], "structuredContent": null}),
        json!({"content": [{"type": "text", "text": "é 😀 \u{2028}"}]}),
        json!({"content": [{"type": "text", "text": "bad input"}], "isError": true}),
        json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "isError": true}),
        json!({"content": [], "isError": true}),
        json!({"content": [{"type": "text", "text": "MCP error -32602: Invalid arguments for tool reply"}], "isError": true}),
    ];
    let reply_tool = common::tool("t", "reply");
    for raw in raws {
        let code = format!("return await t.reply({{raw: {raw}}})");
        let ran = sandbox
            .run(execution(code), Arc::new(MirrorBridge::default()))
            .await;
        match map_tool_result(&reply_tool, &raw) {
            Ok(value) => {
                assert_eq!(ran.error, None, "{raw}");
                let ran = serde_json::to_string(&ran.value).expect("json");
                let direct = serde_json::to_string(&Some(value)).expect("json");
                assert_eq!(ran, direct, "{raw}");
            }
            Err(error) => {
                let ran = ran.error.expect("the sandbox fails too");
                assert_eq!(
                    (ran.kind, &ran.message, &ran.hint),
                    (error.kind, &error.message, &error.hint),
                    "{raw}"
                );
            }
        }
    }
    assert_eq!(tool_error("x".into()).message, "ToolError: x");
}

#[tokio::test]
async fn literal_arguments_match_what_the_guest_sends() {
    let sandbox = common::sandbox(1).await;
    let literals = [
        "{}",
        "{a: 1, b: 'two', c: \"three\", d: true, e: null}",
        "{z: 1, 10: 'ten', '2': 'two', a: 2}",
        "{n: 1.0, m: -0, big: 12345678901234567890, e: 1e21, f: 1e-7, g: 0.1}",
        "{nested: {list: [1, [2, {x: `tpl`}], -3.5], 'quoted-key': 'v',},}",
        "{a: 1, a: 2, b: 3}",
        "{s: 'é😀\\n\\t\\u2028\\\\'}",
        "{['computed']: 1}",
    ];
    for literal in literals {
        let code = format!("return await t.args({literal})");
        let bridge = Arc::new(MirrorBridge::default());
        let ran = sandbox.run(execution(code.clone()), bridge.clone()).await;
        let shortcut = recognise(&code);
        if literal.contains('[') && literal.contains("computed") {
            assert!(shortcut.is_none(), "computed keys are left to the sandbox");
            continue;
        }
        assert_eq!(ran.error, None, "{literal}");
        let sent = bridge.sent.lock().expect("lock").pop().expect("one call");
        let sent: Value = serde_json::from_str(&sent).expect("json");
        let Some(Shortcut::Call(call)) = shortcut else {
            panic!("{literal} is a single call");
        };
        assert_eq!(
            serde_json::to_string(&Value::Object(call.arguments)).expect("json"),
            serde_json::to_string(&sent).expect("json"),
            "{literal}"
        );
    }
}
