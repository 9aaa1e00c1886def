//! `sandgate status` (alias `doctor`) reports the sandbox: how each execution gets its
//! runtime and which lockdown protections the workers run with, as the README promises.

#![allow(clippy::expect_used)]

use std::io::Write;
use std::process::Command;

#[test]
fn status_reports_the_sandbox_runtimes_and_protections() {
    let mut config = tempfile::NamedTempFile::new().expect("temp file");
    writeln!(config, "# no backends").expect("write config");
    let output = Command::new(env!("CARGO_BIN_EXE_sandgate"))
        .args(["doctor", "--config"])
        .arg(config.path())
        .output()
        .expect("sandgate runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("sandbox: each execution's runtime copied back from a "),
        "{stdout}"
    );
    let protections = stdout
        .lines()
        .find_map(|l| l.strip_prefix("sandbox protections: "))
        .expect("a protections line");
    for name in [
        "rlimits",
        "no_new_privs",
        "landlock",
        "empty_environment",
        "seccomp",
    ] {
        assert!(
            protections.contains(&format!("{name} on")),
            "{name} is reported active: {protections}"
        );
    }
}
