//! Locking a V8 worker down before it becomes Deno. The same steps as the QuickJS worker's
//! (`worker::lockdown`), measured for what Deno and V8 need, and inherited across `execve`:
//!
//! - **rlimits:** no file writes, no core dumps, a CPU budget and a bound on descriptors. The
//!   address space is not capped: V8 reserves large virtual ranges up front (its heap cage);
//!   each isolate's heap is capped by V8 instead (`--max-old-space-size`).
//! - **`no_new_privs`.**
//! - **Landlock:** reading and running the `deno` executable, reading the shared libraries it
//!   links and the few kernel files V8 and Tokio size themselves by; nothing else, and no
//!   network at all.
//! - **an empty environment:** the host starts the worker with none; Deno gets four fixed
//!   settings of its own (`TZ=UTC` among them).
//! - **seccomp:** an allowlist of the system calls Deno needs to run isolates (threads,
//!   memory, epoll, time, the pipes). No socket, no `connect`, no file creation; `execve`
//!   stays open for the one that starts Deno (Landlock then allows running only `deno`);
//!   `clone` only makes threads, and `clone3` answers `ENOSYS` so the C library falls back to
//!   `clone`, whose flags the filter can read.

use std::path::Path;

use crate::worker::lockdown::Protections;

/// CPU seconds a V8 worker may use over its life (as the QuickJS worker).
const CPU_SECONDS: u64 = 900;
/// Descriptors a V8 worker may hold: its pipes, and about five for each isolate running (its
/// thread's event loop: epoll, eventfds, a socket pair), for a thousand executions and more.
const MAX_DESCRIPTORS: u64 = 16_384;

/// Applies every protection this host supports and reports which took effect.
pub fn apply(deno: &Path) -> Protections {
    #[expect(
        clippy::disallowed_methods,
        reason = "the worker checks that its own environment is empty"
    )]
    let empty_environment = std::env::vars_os().next().is_none();
    let rlimits = rlimits().is_ok();
    let no_new_privs = nix::sys::prctl::set_no_new_privs().is_ok();
    let landlock = landlock(deno);
    let seccomp = seccomp().is_ok();
    Protections {
        active: vec![
            ("rlimits".to_string(), rlimits),
            ("no_new_privs".to_string(), no_new_privs),
            ("landlock".to_string(), landlock),
            ("empty_environment".to_string(), empty_environment),
            ("seccomp".to_string(), seccomp),
        ],
    }
}

fn rlimits() -> nix::Result<()> {
    use nix::sys::resource::{Resource, setrlimit};
    setrlimit(Resource::RLIMIT_CPU, CPU_SECONDS, CPU_SECONDS)?;
    setrlimit(Resource::RLIMIT_FSIZE, 0, 0)?;
    setrlimit(Resource::RLIMIT_CORE, 0, 0)?;
    setrlimit(Resource::RLIMIT_NOFILE, MAX_DESCRIPTORS, MAX_DESCRIPTORS)
}

/// Where the dynamic loader Deno is linked against lives (the first that exists is used).
const LOADERS: &[&str] = &["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"];

/// What Deno reads besides its own executable: the dynamic loader's cache and the libraries
/// it links, and what V8 and Tokio size themselves by (read only; each is optional).
const READABLE: &[&str] = &[
    "/etc/ld.so.cache",
    "/lib",
    "/lib64",
    "/usr/lib",
    "/usr/lib64",
    "/proc/self/maps",
    "/proc/self/cgroup",
    "/proc/meminfo",
    "/sys/devices/system/cpu/online",
    "/sys/fs/cgroup",
    "/dev/urandom",
];

fn landlock(deno: &Path) -> bool {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus,
    };
    let abi = ABI::V7;
    let read = AccessFs::from_read(abi) & !AccessFs::Execute;
    let created = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
        .and_then(|r| r.create());
    let Ok(mut ruleset) = created else {
        return false;
    };
    // The executable itself: read and run (the C library maps it, `execve` runs it).
    let Ok(exe) = PathFd::new(deno) else {
        return false;
    };
    ruleset = match ruleset.add_rule(PathBeneath::new(exe, AccessFs::from_read(abi))) {
        Ok(r) => r,
        Err(_) => return false,
    };
    // The dynamic loader `execve` starts it with, which must be runnable too.
    for loader in LOADERS {
        let Ok(fd) = PathFd::new(loader) else { continue };
        ruleset = match ruleset.add_rule(PathBeneath::new(fd, AccessFs::from_read(abi))) {
            Ok(r) => r,
            Err(_) => return false,
        };
    }
    for path in READABLE {
        // A path this host lacks is simply not granted.
        let Ok(fd) = PathFd::new(path) else { continue };
        // Libraries are mapped executable: reading them is what the loader needs (Landlock's
        // `Execute` governs `execve` only).
        ruleset = match ruleset.add_rule(PathBeneath::new(fd, read)) {
            Ok(r) => r,
            Err(_) => return false,
        };
    }
    match ruleset.restrict_self() {
        Ok(status) => !matches!(status.ruleset, RulesetStatus::NotEnforced),
        Err(_) => false,
    }
}

fn seccomp() -> Result<(), String> {
    use std::collections::BTreeMap;

    use nix::libc;
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
        SeccompFilter, SeccompRule, TargetArch,
    };

    #[cfg(target_arch = "x86_64")]
    let arch = TargetArch::x86_64;
    #[cfg(target_arch = "aarch64")]
    let arch = TargetArch::aarch64;

    #[cfg(target_arch = "x86_64")]
    let legacy: &[i64] = &[
        libc::SYS_poll,
        libc::SYS_epoll_wait,
        libc::SYS_stat,
        libc::SYS_lstat,
        libc::SYS_access,
        libc::SYS_readlink,
        libc::SYS_arch_prctl,
        libc::SYS_getdents64,
    ];
    #[cfg(target_arch = "aarch64")]
    let legacy: &[i64] = &[libc::SYS_getdents64];

    let allowed: &[i64] = &[
        // The pipes, and the few files the loader and V8 read (Landlock decides which).
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_readv,
        libc::SYS_writev,
        libc::SYS_pread64,
        libc::SYS_openat,
        libc::SYS_close,
        libc::SYS_fstat,
        libc::SYS_newfstatat,
        libc::SYS_statx,
        libc::SYS_lseek,
        libc::SYS_fcntl,
        libc::SYS_ioctl,
        libc::SYS_readlinkat,
        libc::SYS_faccessat,
        libc::SYS_faccessat2,
        libc::SYS_getcwd,
        libc::SYS_dup,
        libc::SYS_dup3,
        libc::SYS_pipe2,
        libc::SYS_execve,
        // Memory, V8's protection keys included.
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_mprotect,
        libc::SYS_madvise,
        libc::SYS_brk,
        libc::SYS_pkey_alloc,
        libc::SYS_pkey_free,
        libc::SYS_pkey_mprotect,
        libc::SYS_membarrier,
        // Threads and their waits.
        libc::SYS_futex,
        libc::SYS_set_robust_list,
        libc::SYS_get_robust_list,
        libc::SYS_rseq,
        libc::SYS_set_tid_address,
        libc::SYS_gettid,
        libc::SYS_getpid,
        libc::SYS_getppid,
        libc::SYS_tgkill,
        libc::SYS_sched_yield,
        libc::SYS_sched_getaffinity,
        libc::SYS_sched_getparam,
        libc::SYS_sched_getscheduler,
        libc::SYS_sched_setscheduler,
        libc::SYS_prctl,
        libc::SYS_prlimit64,
        libc::SYS_getrlimit,
        libc::SYS_sigaltstack,
        libc::SYS_rt_sigaction,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigreturn,
        // The event loop.
        libc::SYS_epoll_create1,
        libc::SYS_epoll_ctl,
        libc::SYS_epoll_pwait,
        libc::SYS_epoll_pwait2,
        libc::SYS_eventfd2,
        libc::SYS_ppoll,
        // Tokio's signal handling talks over a socket pair it makes itself; no other socket
        // can exist (`socket` is refused).
        libc::SYS_socketpair,
        libc::SYS_recvfrom,
        libc::SYS_sendto,
        libc::SYS_recvmsg,
        libc::SYS_sendmsg,
        // Time, randomness, the machine.
        libc::SYS_clock_gettime,
        libc::SYS_clock_getres,
        libc::SYS_clock_nanosleep,
        libc::SYS_nanosleep,
        libc::SYS_gettimeofday,
        libc::SYS_getrandom,
        libc::SYS_uname,
        libc::SYS_sysinfo,
        libc::SYS_getuid,
        libc::SYS_geteuid,
        libc::SYS_getgid,
        libc::SYS_getegid,
        libc::SYS_exit,
        libc::SYS_exit_group,
        // Only for the filter installed after this one: a filter can only narrow further.
        libc::SYS_seccomp,
    ];
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = allowed
        .iter()
        .chain(legacy)
        .map(|&nr| (nr, vec![]))
        .collect();
    // `clone` only for threads.
    let thread = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64),
        libc::CLONE_THREAD as u64,
    )
    .map_err(|e| e.to_string())?;
    rules.insert(
        libc::SYS_clone,
        vec![SeccompRule::new(vec![thread]).map_err(|e| e.to_string())?],
    );
    let compile = |rules: BTreeMap<i64, Vec<SeccompRule>>, mismatch, matched| {
        let filter = SeccompFilter::new(rules, mismatch, matched, arch).map_err(|e| e.to_string())?;
        let program: BpfProgram = filter
            .try_into()
            .map_err(|e: seccompiler::BackendError| e.to_string())?;
        Ok::<BpfProgram, String>(program)
    };
    let allowlist = compile(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
    )?;
    // Installed after the allowlist, so for `clone3` its answer (`ENOSYS`) is the one given.
    let no_clone3 = compile(
        BTreeMap::from([(libc::SYS_clone3, vec![])]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
    )?;
    seccompiler::apply_filter(&allowlist).map_err(|e| e.to_string())?;
    seccompiler::apply_filter(&no_clone3).map_err(|e| e.to_string())
}
