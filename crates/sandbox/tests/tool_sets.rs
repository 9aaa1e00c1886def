//! The tools an execution is given: a worker keeps the last set it was sent, and the preamble
//! binds a backend only when code first touches it. Both must be invisible to the guest: each
//! run sees exactly its own tools, bound the same whatever the guest did to builtins first.

mod common;

use std::sync::Arc;

use common::{TestBridge, execution, run, sandbox, tool, value};
use serde_json::json;

/// One worker, so every run below lands on the worker that holds the previous run's set.
#[tokio::test]
async fn each_run_sees_its_own_tools_when_the_set_changes_between_runs() {
    let sb = sandbox(1).await;
    let bridge = Arc::new(TestBridge::default());
    let code = r#"return [typeof test, typeof my_server, await my_server.get_sum({a: 1, b: 2})];"#;

    let everything = sb.run(execution(code), bridge.clone()).await;
    assert_eq!(
        value(&everything),
        json!(["object", "object", "The sum is 3"])
    );

    // A smaller set in which `my-server.get-sum` has index 0, where `test.echo` was before.
    let mut only_sum = execution(code);
    only_sum.tools = Arc::new(vec![tool("my-server", "get-sum")]);
    let result = sb.run(only_sum.clone(), bridge.clone()).await;
    assert_eq!(
        value(&result),
        json!(["undefined", "object", "The sum is 3"])
    );
    // The same set again, in a new allocation with the same content, and then the same one.
    let mut same_content = execution(code);
    same_content.tools = Arc::new(only_sum.tools.as_ref().clone());
    assert_eq!(
        value(&sb.run(same_content, bridge.clone()).await),
        json!(["undefined", "object", "The sum is 3"])
    );
    assert_eq!(
        value(&sb.run(only_sum, bridge.clone()).await),
        json!(["undefined", "object", "The sum is 3"])
    );

    // And back to the full set: `test` is there again and index 0 is `test.echo` again.
    let back = sb
        .run(
            execution(r#"return [typeof test, await test.echo({n: 1})];"#),
            bridge.clone(),
        )
        .await;
    assert_eq!(value(&back), json!(["object", {"echo": {"n": 1}}]));

    // No tools at all: no backends, and the aliases are empty.
    let mut none =
        execution(r#"return [typeof test, Object.keys(mcp), Object.keys(__interfaces)];"#);
    none.tools = Arc::new(vec![]);
    assert_eq!(
        value(&sb.run(none, bridge).await),
        json!(["undefined", [], []])
    );
}

#[tokio::test]
async fn backends_bind_the_same_after_the_guest_replaces_builtins() {
    let sb = sandbox(1).await;
    // Everything the binding could lean on is broken before any backend is touched.
    let code = r#"
        Object.freeze(globalThis);
        Object.defineProperty = () => { throw new Error("hijacked defineProperty"); };
        Object.create = () => ({ hijacked: true });
        Object.freeze = (o) => o;
        Array.prototype[Symbol.iterator] = function* () { yield ["hijacked"]; };
        Array.prototype[0] = "hijacked";
        Object.prototype.get = () => "planted getter";
        Object.prototype.set = () => {};
        return [
            await test.echo({n: 1}),
            Object.isFrozen(test),
            Object.getPrototypeOf(test),
            typeof test.echo.raw,
            test.echo.toolName,
            await mcp.my_server.get_sum({a: 1, b: 1}),
            await tools["my-server"]["get-sum"]({a: 2, b: 1}),
            __getToolInterface("test.echo"),
            typeof __interfaces.my_server["get-sum"],
        ];
    "#;
    let result = run(&sb, code).await;
    // On V8 too: the guest's builtins are its context's own, not those of Deno's Node layer
    // (which runs between tasks), so replacing them breaks nothing of ours.
    assert_eq!(
        value(&result),
        json!([
            {"echo": {"n": 1}},
            true,
            null,
            "function",
            "test.echo",
            "The sum is 2",
            "The sum is 3",
            "function echo(args: object): Promise<unknown>",
            "string"
        ])
    );
}

#[tokio::test]
async fn bound_backends_keep_their_guarantees() {
    let sb = sandbox(1).await;
    // Before and after the first touch, a backend cannot be replaced; afterwards it is a fixed
    // data property like any other; the alias objects are frozen; `mcp` and `tools` are one.
    let code = r#"
        let replaced;
        try { test = 1; replaced = "assigned"; } catch (e) { replaced = e.constructor.name; }
        const before = typeof Object.getOwnPropertyDescriptor(globalThis, "my_server").get;
        const sum = await my_server.get_sum({a: 2, b: 2});
        const after = Object.getOwnPropertyDescriptor(globalThis, "my_server");
        let again;
        try { my_server = 1; again = "assigned"; } catch (e) { again = e.constructor.name; }
        return [replaced, before, sum, after.writable, after.configurable, again,
                Object.isFrozen(mcp), mcp === tools, mcp.test === test, Object.keys(mcp).sort(),
                Object.isFrozen(__interfaces), tools.test.echo === test.echo];
    "#;
    let result = run(&sb, code).await;
    assert_eq!(
        value(&result),
        json!([
            "TypeError",
            "function",
            "The sum is 4",
            false,
            false,
            "TypeError",
            true,
            true,
            true,
            ["my_server", "test"],
            true,
            true
        ])
    );
}
