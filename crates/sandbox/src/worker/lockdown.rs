//! Locking the worker process down before it reads any untrusted code.
//!
//! In order: resource limits (address space, CPU, no new files, no file writes, no child
//! processes, no core dumps), `no_new_privs`, a Landlock ruleset that grants no file or network
//! access at all, and a seccomp filter that allows only the syscalls the engine needs (read and
//! write on the pipes it already has, memory, time, randomness, poll, exit). Everything else,
//! `open`, `socket`, `connect` and `execve` included, fails with `EPERM`. Each step reports
//! whether it took effect, so `sandgate doctor` can say what this host enforces.

use serde::{Deserialize, Serialize};

/// Which protections are active in a worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protections {
    /// Protection name → whether it is in force.
    pub active: Vec<(String, bool)>,
}

impl Protections {
    /// Whether every protection is in force.
    pub fn all_active(&self) -> bool {
        !self.active.is_empty() && self.active.iter().all(|(_, on)| *on)
    }

    /// Names of protections that are not in force.
    pub fn missing(&self) -> Vec<String> {
        self.active
            .iter()
            .filter(|(_, on)| !on)
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// Address-space limit of a worker, on top of the QuickJS heap limits (a backstop): its heap
/// region (512 MiB reserved), what its parked executions may hold (1 GiB, see
/// `scheduler::PARKED_BUDGET_BYTES`), the resident execution's big blocks and the process's
/// own needs.
pub const WORKER_ADDRESS_SPACE: u64 = 2560 * 1024 * 1024;
/// CPU seconds a worker may use over its whole life before the kernel stops it.
pub const WORKER_CPU_SECONDS: u64 = 900;

/// Applies every protection this host supports and reports which took effect.
#[cfg(target_os = "linux")]
pub fn apply() -> Protections {
    // Order matters: seccomp comes last, because the steps before it need syscalls it forbids.
    let rlimits = rlimits().is_ok();
    let no_new_privs = nix::sys::prctl::set_no_new_privs().is_ok();
    let landlock = landlock_deny_all();
    #[expect(
        clippy::disallowed_methods,
        reason = "the worker checks that its own environment is empty"
    )]
    let empty_environment = std::env::vars_os().next().is_none();
    let seccomp = seccomp_allowlist().is_ok();
    let active = vec![
        ("rlimits".to_string(), rlimits),
        ("no_new_privs".to_string(), no_new_privs),
        ("landlock".to_string(), landlock),
        ("empty_environment".to_string(), empty_environment),
        ("seccomp".to_string(), seccomp),
    ];
    Protections { active }
}

/// Not Linux: nothing can be enforced, and the report says so.
#[cfg(not(target_os = "linux"))]
pub fn apply() -> Protections {
    Protections {
        active: vec![
            ("seccomp".into(), false),
            ("landlock".into(), false),
            ("rlimits".into(), false),
        ],
    }
}

#[cfg(target_os = "linux")]
fn rlimits() -> nix::Result<()> {
    use nix::sys::resource::{Resource, setrlimit};
    setrlimit(
        Resource::RLIMIT_AS,
        WORKER_ADDRESS_SPACE,
        WORKER_ADDRESS_SPACE,
    )?;
    setrlimit(Resource::RLIMIT_CPU, WORKER_CPU_SECONDS, WORKER_CPU_SECONDS)?;
    setrlimit(Resource::RLIMIT_FSIZE, 0, 0)?;
    setrlimit(Resource::RLIMIT_CORE, 0, 0)?;
    setrlimit(Resource::RLIMIT_NPROC, 0, 0)?;
    // stdin, stdout, stderr and the duplicates the worker made of them; nothing more.
    setrlimit(Resource::RLIMIT_NOFILE, 8, 8)
}

#[cfg(target_os = "linux")]
fn landlock_deny_all() -> bool {
    use landlock::{ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetStatus};
    let abi = ABI::V7;
    let created = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
        .and_then(|r| r.create());
    match created.and_then(|r| r.restrict_self()) {
        Ok(status) => !matches!(status.ruleset, RulesetStatus::NotEnforced),
        Err(_) => false,
    }
}

#[cfg(target_os = "linux")]
fn seccomp_allowlist() -> Result<(), String> {
    use std::collections::BTreeMap;

    use nix::libc;
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

    #[cfg(target_arch = "x86_64")]
    let (arch, extra) = (TargetArch::x86_64, vec![libc::SYS_poll]);
    #[cfg(target_arch = "aarch64")]
    let (arch, extra) = (TargetArch::aarch64, Vec::<i64>::new());

    let allowed = [
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_readv,
        libc::SYS_writev,
        libc::SYS_ppoll,
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_brk,
        libc::SYS_madvise,
        libc::SYS_mprotect,
        libc::SYS_futex,
        libc::SYS_clock_gettime,
        libc::SYS_clock_nanosleep,
        libc::SYS_getrandom,
        libc::SYS_sched_yield,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_sigaltstack,
        libc::SYS_close,
        libc::SYS_exit,
        libc::SYS_exit_group,
    ];
    let rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> = allowed
        .iter()
        .chain(extra.iter())
        .map(|&nr| (nr, vec![]))
        .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| e.to_string())
}
