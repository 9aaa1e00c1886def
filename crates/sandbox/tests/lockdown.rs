//! The locked-down worker cannot open a file, create one, open a socket, run a program or see
//! an environment, even when driven from native code. The `Probe` frame (compiled only with
//! the `test-probes` feature these tests enable) asks the worker to try, after lockdown.

#![allow(clippy::expect_used)]

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use sandgate_sandbox::protocol::{HostFrame, WorkerFrame, read_frame, write_frame};

/// What a worker reported at start, and what each probe returned.
type ProbeReport = (Vec<(String, bool)>, Vec<Result<String, String>>);

fn probe_worker(probes: &[&str]) -> ProbeReport {
    let mut child = Command::new(common::worker_program())
        .env_clear()
        .env("SANDGATE_SHOULD_NOT_LEAK", "secret") // the pool clears the env; this test checks the worker's report too
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("worker starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let protections = match read_frame::<_, WorkerFrame>(&mut stdout).expect("frame") {
        Some(WorkerFrame::Ready { protections, .. }) => protections,
        other => panic!("expected Ready, got {other:?}"),
    };
    let mut outcomes = Vec::new();
    for what in probes {
        write_frame(
            &mut stdin,
            &HostFrame::Probe {
                what: what.to_string(),
            },
        )
        .expect("send");
        stdin.flush().expect("flush");
        match read_frame::<_, WorkerFrame>(&mut stdout).expect("frame") {
            Some(WorkerFrame::ProbeResult { outcome }) => outcomes.push(outcome),
            other => panic!("expected ProbeResult, got {other:?}"),
        }
    }
    drop(stdin);
    let _ = child.wait();
    (protections, outcomes)
}

#[test]
fn every_protection_is_active_on_this_host() {
    let (protections, _) = probe_worker(&[]);
    let names: Vec<&str> = protections.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "rlimits",
            "no_new_privs",
            "landlock",
            "empty_environment",
            "seccomp"
        ]
    );
    // The environment was not empty here on purpose: the worker must say so.
    assert!(
        protections
            .iter()
            .any(|(n, on)| n == "empty_environment" && !on),
        "{protections:?}"
    );
    for (name, on) in &protections {
        if name != "empty_environment" {
            assert!(on, "{name} is not active on this host: {protections:?}");
        }
    }
}

#[test]
fn native_code_in_the_worker_cannot_reach_files_sockets_or_programs() {
    let (_, outcomes) = probe_worker(&["open", "create", "socket", "udp", "exec"]);
    for (what, outcome) in ["open", "create", "socket", "udp", "exec"]
        .iter()
        .zip(&outcomes)
    {
        let error = outcome
            .as_ref()
            .expect_err(&format!("{what} must fail, got {outcome:?}"));
        assert!(
            error.contains("Operation not permitted") || error.contains("Permission denied"),
            "{what}: {error}"
        );
    }
}

#[test]
fn workers_started_by_the_pool_have_an_empty_environment() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let protections = runtime.block_on(async { common::sandbox(1).await.protections().clone() });
    assert!(protections.all_active(), "{protections:?}");
}
