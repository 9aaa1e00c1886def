//! On a system other than Linux the crate is one clear `compile_error!`, not a pile of
//! unresolved imports. Compiling `src/lib.rs` without the `sandgate_linux` cfg (which
//! `build.rs` sets for Linux targets) is what such a build sees.

#![allow(clippy::expect_used)] // a missing compiler fails the test, as it should
#![expect(
    clippy::disallowed_methods,
    reason = "a test or benchmark harness reads its settings (PATH, RUSTC, PROPTEST_CASES, BENCH_WORKERS) from the environment"
)]

use std::process::Command;

#[test]
fn a_build_for_another_system_stops_with_one_clear_error() {
    let out_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("platform-check");
    std::fs::create_dir_all(&out_dir).expect("out dir");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let output = Command::new(rustc)
        .args(["--edition", "2024", "--crate-type", "lib", "--crate-name"])
        .arg("sandgate_sandbox")
        .args(["--emit", "metadata", "--out-dir"])
        .arg(&out_dir)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs"))
        .output()
        .expect("run rustc");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("sandgate runs on Linux only (x86_64, aarch64)"),
        "{stderr}"
    );
    let errors = stderr.lines().filter(|l| l.starts_with("error")).count();
    assert_eq!(
        errors, 2,
        "the compile_error and rustc's closing `aborting due to 1 previous error`, nothing else:\n{stderr}"
    );
    assert!(
        stderr.contains("aborting due to 1 previous error"),
        "{stderr}"
    );
}
