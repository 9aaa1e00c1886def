//! Using the sandbox from your own Rust service, without MCP: run untrusted TypeScript that may
//! call exactly the async functions you expose (here `addNumbers`) and read a JSON `context`.
//!
//! ```sh
//! cargo build -p sandgate-sandbox          # builds the sandgate-worker binary next to this one
//! cargo run -p sandgate-sandbox --example embed
//! ```

use std::sync::Arc;

use futures::future::BoxFuture;
use sandgate_sandbox::{
    Bridge, CallFailure, Execution, FailureKind, Limits, PoolConfig, Sandbox, ToolAnswer,
    ToolBinding,
};
use serde_json::{Value, json};

/// Your service's functions, as the guest sees them.
struct MyFunctions;

impl Bridge for MyFunctions {
    fn call_tool(
        &self,
        tool: &ToolBinding,
        _args: String,
    ) -> BoxFuture<'static, Result<ToolAnswer, CallFailure>> {
        let message = format!("no tools in this example ({})", tool.name);
        Box::pin(async move { Err(CallFailure::new(FailureKind::Denied, message)) })
    }

    fn call_host(
        &self,
        name: &str,
        args: String,
    ) -> BoxFuture<'static, Result<String, CallFailure>> {
        let name = name.to_string();
        Box::pin(async move {
            let args: Vec<Value> = serde_json::from_str(&args).unwrap_or_default();
            match name.as_str() {
                "addNumbers" => {
                    Ok(json!(args.iter().filter_map(Value::as_f64).sum::<f64>()).to_string())
                }
                other => Err(CallFailure::new(
                    FailureKind::Internal,
                    format!("unknown function {other}"),
                )),
            }
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The worker binary sits in target/<profile>/, one level above target/<profile>/examples/.
    let exe = std::env::current_exe()?;
    let worker = exe
        .parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("sandgate-worker"))
        .ok_or("no target directory")?;
    let sandbox = Sandbox::start(PoolConfig::new(worker)).await?;
    println!("worker protections: {:?}", sandbox.protections().active);

    let execution = Execution {
        code: "const total: number = await addNumbers(context.a, context.b, 3);\nconsole.log(`total is ${total}`);\nreturn { total };".into(),
        tools: Arc::new(vec![]),
        host_functions: Arc::new(vec!["addNumbers".into()]),
        env: Default::default(),
        context: Some(json!({"a": 1, "b": 2})),
        limits: Limits { wall_ms: 5_000, ..Limits::default() },
        mode: Default::default(),
        engine: Default::default(),
};
    let result = sandbox.run(execution, Arc::new(MyFunctions)).await;
    println!("{}", serde_json::to_string_pretty(&result)?);
    Ok(())
}
