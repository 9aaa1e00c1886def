//! `sandgate run examples/*.ts` against the example config (the three real npm servers), with
//! its output snapshot-tested. Timings and heap sizes vary from run to run and are masked.

#![allow(clippy::expect_used)]

use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Replaces the numbers that change between runs, and the repository's place on this machine.
fn mask(output: &str) -> String {
    let root = std::fs::canonicalize(repo())
        .expect("repo")
        .display()
        .to_string();
    output
        .replace(&root, "<repo>")
        .lines()
        .map(|line| {
            if let Some(at) = line.find(": ok in ") {
                format!("{}: ok in <ms> ms", &line[..at])
            } else if line.contains(": failed: ") && line.contains(" bytes out") {
                // A backend's error text may include absolute paths, so its size varies.
                let name_end = line.find(" (").unwrap_or(line.len());
                let reason = line.split(": failed: ").nth(1).unwrap_or("");
                format!("{} (<bytes>): failed: {reason}", &line[..name_end])
            } else if line.ends_with(" KiB heap") {
                let calls = line.split(", ").nth(1).unwrap_or("");
                format!("<ms> ms, {calls}, <heap> KiB heap")
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `sandgate run examples/NAME.ts` with the example config and a private memory file.
fn sandgate_run(name: &str, extra: &[&str]) -> std::process::Output {
    let memory = tempfile::NamedTempFile::new().expect("temp file");
    Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .current_dir(repo())
        .args([
            "run",
            &format!("examples/{name}.ts"),
            "--config",
            "examples/sandgate.toml",
        ])
        .args(extra)
        .env("SANDGATE_MEMORY_FILE", memory.path())
        .output()
        .expect("sandgate runs")
}

fn run_example(name: &str) -> (String, i32) {
    let output = sandgate_run(name, &[]);
    (
        mask(&String::from_utf8_lossy(&output.stdout)),
        output.status.code().unwrap_or(-1),
    )
}

#[test]
fn sum() {
    let (out, code) = run_example("sum");
    assert_eq!(code, 0, "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn memory() {
    let (out, code) = run_example("memory");
    assert_eq!(code, 0, "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn files() {
    let (out, code) = run_example("files");
    assert_eq!(code, 0, "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn typo() {
    let (out, code) = run_example("typo");
    assert_eq!(code, 1, "a failed script exits 1: {out}");
    insta::assert_snapshot!(out);
}

#[test]
fn json_output_has_every_part() {
    let output = sandgate_run("sum", &["--json"]);
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(result["value"]["a"], "The sum of 2 and 3 is 5.");
    assert_eq!(result["trace"].as_array().map(Vec::len), Some(2));
    assert_eq!(result["logs"][0]["level"], "log");
    assert!(
        result["stats"]["wall_ms"]
            .as_f64()
            .is_some_and(|ms| ms > 0.0)
    );
    assert!(result["error"].is_null());
}
