//! Ending the processes a backend started that left its process group.
//!
//! Killing a backend's process group ends everything it started, except what called
//! `setsid` (or `setpgid`) to leave: a daemonizing helper, a browser, a language server. Such
//! an escapee used to outlive the gateway. Two things find it:
//! - sandgate is a child subreaper (`PR_SET_CHILD_SUBREAPER`), so an orphan among its
//!   descendants becomes its child instead of init's;
//! - every backend process is started with [`RUN_VAR`] naming its run, and descendants keep
//!   their environment.
//!
//! When a backend run ends (restart, stop, shutdown), its group is killed, and so is every
//! process whose environment names that run; those that became sandgate's children are
//! reaped (never a process tokio waits for: the leader is left to it). Sandbox workers start
//! with an empty environment, so they never match.

use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The environment variable that names a backend run.
pub(crate) const RUN_VAR: &str = "SANDGATE_BACKEND_RUN";
/// `RUN_VAR`, for a sandgate that checks whether it was started as someone's backend.
pub const BACKEND_RUN_VAR: &str = RUN_VAR;
/// What a sandgate started as a backend of another writes on stderr before it exits; the
/// parent marks the entry failed (never retried) when it reads it.
pub const SELF_AS_BACKEND: &str = "sandgate refuses to run as a backend of sandgate";

static NEXT_RUN: AtomicU64 = AtomicU64::new(1);
static ADOPT: Once = Once::new();

/// A name for a new backend run, unique in this process.
pub(crate) fn new_run() -> String {
    format!(
        "{}.{}",
        std::process::id(),
        NEXT_RUN.fetch_add(1, Ordering::Relaxed)
    )
}

/// Makes this process the reaper of its descendants' orphans (once).
pub(crate) fn adopt_orphans() {
    ADOPT.call_once(|| {
        #[cfg(target_os = "linux")]
        if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
            tracing::warn!("cannot become a child subreaper ({e}); a backend's processes that leave its process group may outlive it");
        }
    });
}

/// Kills every process of `run` but its `leader` (which the caller kills, and tokio reaps), and
/// reaps those that became this process's children. An orphan is reparented here when its
/// parent dies, so reaping looks a few times over a short while.
pub(crate) fn end(run: &str, leader: Option<u32>) {
    let tag = format!("{RUN_VAR}={run}");
    let leader = leader.and_then(|p| i32::try_from(p).ok());
    let mut members: Vec<i32> = all_processes()
        .into_iter()
        .filter(|p| Some(*p) != leader && *p != std::process::id() as i32)
        .filter(|p| environment_has(*p, &tag))
        .collect();
    if members.is_empty() {
        return;
    }
    for pid in &members {
        kill(*pid);
    }
    for wait in [0u64, 20, 80] {
        std::thread::sleep(Duration::from_millis(wait));
        members.retain(|pid| !reaped(*pid));
        if members.is_empty() {
            return;
        }
    }
}

/// Kills every process of every backend run of this gateway, at once and without waiting:
/// for exiting on the spot (a second signal), when there is no time to stop backends one by
/// one. Without it, backends that only exit when their stdin closes could outlive the gateway
/// by as long as they take to notice.
pub fn kill_every_backend_process() {
    let prefix = format!("{RUN_VAR}={}.", std::process::id());
    for pid in all_processes() {
        if pid == std::process::id() as i32 {
            continue;
        }
        let tagged = std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
            environ
                .split(|&b| b == 0)
                .any(|entry| entry.starts_with(prefix.as_bytes()))
        });
        if tagged {
            kill(pid);
        }
    }
}

/// Every process this user can see.
fn all_processes() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect()
}

fn environment_has(pid: i32, entry: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|environ| environ.split(|&b| b == 0).any(|e| e == entry.as_bytes()))
        .unwrap_or(false)
}

fn kill(pid: i32) {
    #[cfg(unix)]
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Reaps `pid` if it is a child of this process that has exited; whether it is gone for
/// good (reaped here, or not ours to reap).
fn reaped(pid: i32) -> bool {
    #[cfg(unix)]
    {
        use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
        match waitpid(nix::unistd::Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => false,
            Ok(_) => true,
            // Not our child (yet): reparented here only once its parent dies, unless it has.
            Err(_) => !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        }
    }
    #[cfg(not(unix))]
    true
}
