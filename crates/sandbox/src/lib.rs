//! The sandbox: runs untrusted, model-written TypeScript that calls tools, fast and locked down.
//!
//! The host side ([`Sandbox`]) strips TypeScript with oxc and hands the JavaScript to a pool
//! of worker processes. Each worker locks itself down (rlimits, `no_new_privs`, Landlock,
//! a seccomp allowlist, an empty environment) before it reads any code, and runs each
//! execution in a fresh QuickJS runtime. The guest sees one object per backend with an async
//! function per tool, `console`, timers and a few web basics, and nothing else. Every call it
//! makes travels as a frame to the host, which maps it to the tools *it* chose for the
//! execution and runs it through a [`Bridge`]; the guest can never name a tool outside that
//! set.
//!
//! This crate does not know MCP: the gateway is one [`Bridge`]; a Rust service that wants a
//! sandbox for its own async functions is another (see `examples/embed.rs`).
//!
//! | module | runs in | what it holds |
//! |---|---|---|
//! | `host` | the gateway's process | reading code, the direct tiers, the worker pool, error hints |
//! | `worker` | each locked-down worker process | the lockdown, the heap region, the engine, the scheduler of many executions |
//! | `wire` | both | the frames, the limits, the control page, limit-hit texts, text encoding |
//!
//! The security boundary runs between `host` and `worker`: nothing in `worker` uses host code
//! (`tests/layout.rs` checks), so what a worker process contains is what `worker` and `wire`
//! hold.

//!
//! It runs on Linux only (Landlock, seccomp, the Linux process model): on any other system
//! the crate is one `compile_error!` that says so (`build.rs` sets `sandgate_linux`;
//! `tests/platform.rs` checks).

#[cfg(not(sandgate_linux))]
compile_error!(
    "sandgate runs on Linux only (x86_64, aarch64): its sandbox locks each worker down with Landlock and seccomp, which other systems do not have. Build and run it on Linux, in a Linux VM, or in a container."
);

/// Declares the crate's items on Linux only, so that elsewhere the `compile_error!` above is
/// the only error.
macro_rules! on_linux {
    ($($item:item)*) => { $( #[cfg(sandgate_linux)] $item )* };
}

on_linux! {
    mod error;
    mod host;
    mod wire;
    mod worker;

    // The public surface, chosen: the host-side tiers and readers the gateway uses, the
    // frames and their encoding (the protocol between the two sides), the worker's entry, its
    // heap region and its engine (benchmarked in process). The three trees stay private.
    pub use host::{direct, named_tools, nesting, normalize, single_call, tool_file, transpile};
    pub use wire::{encoding, protocol};
    pub use worker::{NO_TEMPLATE_ARG, engine, main as worker_main, region};
    pub use worker::v8::{V8_ARG, V8_KILL_GRACE};
    pub use worker::python::PYTHON_ARG;
    use wire::limits;
    use worker::lockdown;

    use host::{pool, result};

    pub use error::SandboxError;
    pub use host::sandbox::{Engine, Execution, Sandbox};
    pub use limits::{LimitRequest, Limits};
    pub use lockdown::Protections;
    pub use pool::{Bridge, COMPUTING_SLICE, Pool, PoolConfig, WorkerInfo};
    pub use wire::errors::TIMED_OUT_COMPUTING;
    pub use protocol::{
        BackendCondition, CallFailure, FailureKind, Fault, Nullish, RunMode, ToolAnswer, ToolBinding,
    };
    pub use result::{
        CallRecord, ErrorKind, ExecError, ExecStats, ExecutionResult, LogLine, kept_arguments,
    };
}
