//! Scripts through real locked-down worker processes against the real npm reference servers
//! (server-everything, server-memory, server-filesystem), via `sandgate run - --json`.

#![allow(clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn run(script: &str) -> Value {
    let memory = tempfile::NamedTempFile::new().expect("temp file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .current_dir(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")))
        .args(["run", "-", "--json", "--config", "examples/sandgate.toml"])
        .env("SANDGATE_MEMORY_FILE", memory.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sandgate runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write script");
    let output = child.wait_with_output().expect("output");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn value_of(script: &str) -> Value {
    let result = run(script);
    assert!(
        result["error"].is_null(),
        "unexpected error: {}",
        result["error"]
    );
    result["value"].clone()
}

#[test]
fn code_shapes() {
    assert_eq!(
        value_of("const r = await everything.echo({ message: 'hi' });\nreturn r;"),
        json!("Echo: hi")
    );
    assert_eq!(
        value_of(
            "export default async function main() { return await everything.echo({ message: 'a' }); }"
        ),
        json!("Echo: a")
    );
    assert_eq!(
        value_of(
            "export async function main() { return (await everything.echo({ message: 'b' })).length; }"
        ),
        json!(7)
    );
}

#[test]
fn typescript_against_real_tools() {
    let script = r#"
        interface Entity { name: string; entityType: string; observations: string[] }
        enum Kind { Person = "person" }
        function names<T extends { name: string }>(xs: T[]): string[] { return xs.map((x) => x.name); }
        const made = await memory.create_entities({ entities: [{ name: "Lin", entityType: Kind.Person, observations: ["x"] }] as Entity[] });
        const graph = await memory.read_graph({});
        return { created: names(made.entities as Entity[]), first: (graph.entities as Entity[])[0]?.entityType ?? "none", missing: graph.nothing?.deep };
    "#;
    assert_eq!(
        value_of(script),
        json!({"created": ["Lin"], "first": "person"})
    );
}

#[test]
fn fan_out_hyphenated_names_and_raw() {
    let script = r#"
        const sums = await Promise.all([1, 2, 3].map((n) => everything["get-sum"]({ a: n, b: n })));
        const raw = await everything.get_sum.raw({ a: 1, b: 1 });
        return { sums, rawKeys: Object.keys(raw).sort(), same: (await globalThis["everything"].get_sum({ a: 1, b: 2 })) === (await mcp.everything.get_sum({ a: 1, b: 2 })) };
    "#;
    let result = run(script);
    assert!(result["error"].is_null(), "{}", result["error"]);
    assert_eq!(
        result["value"]["sums"],
        json!([
            "The sum of 1 and 1 is 2.",
            "The sum of 2 and 2 is 4.",
            "The sum of 3 and 3 is 6."
        ])
    );
    assert_eq!(result["value"]["rawKeys"], json!(["content"]));
    assert_eq!(result["value"]["same"], json!(true));
    assert_eq!(result["trace"].as_array().map(Vec::len), Some(6));
}

#[test]
fn tool_errors_from_a_real_backend_are_catchable() {
    let script = r#"
        try { await filesystem.read_text_file({ path: "/definitely/not/allowed" }); return "no error"; }
        catch (e) { return { toolError: e instanceof ToolError, tool: e.tool, mentionsPath: e.message.includes("not/allowed") }; }
    "#;
    assert_eq!(
        value_of(script),
        json!({"toolError": true, "tool": "filesystem.read_text_file", "mentionsPath": true})
    );
}

#[test]
fn console_and_timers() {
    let result = run(
        "console.log('before');\nawait new Promise((r) => setTimeout(r, 20));\nconsole.warn('after', { n: 1 });\nreturn await everything.echo({ message: 'done' });",
    );
    assert_eq!(result["value"], json!("Echo: done"));
    assert_eq!(
        result["logs"],
        json!([{"level": "log", "message": "before"}, {"level": "warn", "message": "after {\"n\":1}"}])
    );
}
