//! One door: the sources hold every path to a backend and to a host capability, and this test
//! enumerates them. A new path that skips the door (a second `BackendManager::call`, a
//! capability used outside `capability.rs`, a bridge that calls the manager) fails here.
//!
//! Paths to a backend tool, all through `Gateway::call_tool` in `door.rs`:
//! - tier 1 (JSON) and tier 2 (one call): `chain::direct_call` → `UpstreamBridge::call_tool`;
//! - the sandbox (`.raw()` included): the worker's call frame → `UpstreamBridge::call_tool`;
//! - introspection never calls a backend (declarations come from the caller's view);
//! - `sandgate run` builds the same `UpstreamBridge`;
//! - a stored tool exposed as a plain MCP tool (`stored/mcp.rs`) enters by `Gateway::call_as`, and a
//!   stored tool's own calls go through the `UpstreamBridge` of its run.
//!
//! Paths to a capability, all through `Gateway::use_capability` in `capability.rs`, which
//! authorizes in the door: the sandbox's host-function frame → `UpstreamBridge::call_host`.

#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};

fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    let mut stack: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates")
        .filter_map(|e| e.ok().map(|e| e.path().join("src")))
        .collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source");
                let name = path
                    .strip_prefix(&root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                files.push((name, text));
            }
        }
    }
    files
}

/// The files (outside `except`) whose code, without comments, matches `needle`.
fn users(files: &[(String, String)], needle: &str, except: &[&str]) -> Vec<String> {
    files
        .iter()
        .filter(|(name, _)| !except.iter().any(|e| name.contains(e)))
        .filter(|(_, text)| {
            text.lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n")
                .replace([' ', '\n'], "")
                .contains(needle)
        })
        .map(|(name, _)| name.clone())
        .collect()
}

#[test]
fn every_backend_call_and_capability_goes_through_the_door() {
    let files = sources();
    assert!(files.len() > 50, "found {} sources", files.len());
    // The manager's call takes an Authorized<ToolCall>; only the door holds one to give it.
    assert_eq!(
        users(&files, ".call(&authorized", &["crates/upstream/"]),
        ["crates/gateway/src/door.rs"]
    );
    assert_eq!(
        users(&files, "access.authorize_tool(", &["crates/policy/"]),
        ["crates/gateway/src/door.rs"]
    );
    // The door is entered from the bridge (every tier), and from the denial reports.
    let mut callers = users(&files, ".call_tool(&knock", &[]);
    callers.sort();
    assert_eq!(
        callers,
        [
            "crates/gateway/src/bridge.rs",
            // `Gateway::call_as`: the door's own entry, for embedders, benchmarks and stored
            // tools exposed as plain MCP tools.
            "crates/gateway/src/door.rs",
        ]
    );
    let mut authorizers = users(&files, "gateway.authorize_tool(", &[]);
    authorizers.sort();
    assert_eq!(authorizers, ["crates/gateway/src/chain/ungranted.rs"]);
    // Capabilities are performed in one file, after the door's decision.
    for capability in [
        "sandgate_capabilities::read_file(",
        "sandgate_capabilities::write_file(",
        "sandgate_capabilities::read_dir(",
        "sandgate_capabilities::stat(",
        "sandgate_capabilities::read_env(",
        ".fetcher()",
    ] {
        assert_eq!(
            users(
                &files,
                capability,
                &["crates/capabilities/", "crates/gateway/src/state.rs"]
            ),
            ["crates/gateway/src/capability.rs"],
            "{capability}"
        );
    }
    assert_eq!(
        users(&files, ".use_capability(", &[]),
        ["crates/gateway/src/bridge.rs"]
    );
    // The only Bridge the gateway and the binary build is the door's.
    let mut bridges = users(&files, "implBridgefor", &["crates/sandbox/"]);
    bridges.sort();
    assert_eq!(bridges, ["crates/gateway/src/bridge.rs"]);
    let bridge = &files
        .iter()
        .find(|(n, _)| n == "crates/gateway/src/bridge.rs")
        .expect("bridge")
        .1;
    assert!(
        !bridge.contains("manager()"),
        "the bridge reaches the manager only through the door"
    );
}

#[test]
fn the_enumeration_catches_a_second_path() {
    let mut files = sources();
    files.push((
        "crates/gateway/src/shortcut.rs".into(),
        "async fn sneak(g: &Gateway, a: Authorized<ToolCall>) { g.manager().call(&authorized, None, None).await; }"
            .into(),
    ));
    assert_eq!(
        users(&files, ".call(&authorized", &["crates/upstream/"]).len(),
        2
    );
}
