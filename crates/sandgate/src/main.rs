//! The `sandgate` binary: command line, config loading, logging and wiring.
//!
//! This is the only crate that reads the environment, prints to stdout or uses `anyhow`.
//! Logs always go to stderr, because in stdio mode stdout is the MCP protocol.

#![expect(
    clippy::disallowed_methods,
    reason = "the binary is the one crate that reads the environment (clippy.toml)"
)]

mod access;
mod cli;
mod selfguard;
mod setup;
mod telemetry;

use clap::Parser;

/// The system allocator, except inside a sandbox worker while it builds or runs a JavaScript
/// runtime in its heap region (see `sandgate_sandbox::region`); elsewhere it costs one check.
#[global_allocator]
static ALLOCATOR: sandgate_sandbox::region::RegionAllocator =
    sandgate_sandbox::region::RegionAllocator;

/// `sandgate tools list | head -1`: when the reader of standard output goes away, the next
/// print fails with a broken pipe and `println!` panics. That is the reader's choice, not a
/// fault: the command ends there, quietly and successfully, as Unix tools do. Every other
/// panic is reported as before.
fn quiet_on_a_closed_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        report(info);
    }));
}

fn main() -> std::process::ExitCode {
    // A sandbox worker must lock itself down before anything else runs: no logging, no async
    // runtime, no threads. So it is dispatched before argument parsing.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == setup::WORKER_ARG)
    {
        let code = sandgate_sandbox::worker_main();
        return std::process::ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // Started as another sandgate's backend: refuse before anything starts (a config that
    // lists sandgate would otherwise start copies without end).
    if let Some(why) = selfguard::started_as_a_backend() {
        eprintln!("{why}");
        return std::process::ExitCode::from(78);
    }
    sandgate_sandbox::region::map_large_blocks();
    quiet_on_a_closed_pipe();
    let args = cli::Cli::parse();
    let serving = matches!(args.command, cli::Command::Serve(_));
    setup::init_logging(args.log_level.as_deref(), serving);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sandgate: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(cli::run(args));
    // Tasks still blocked (the stdio server's read of a stdin that stays open) must not hold
    // the process: give them a moment, then go.
    runtime.shutdown_timeout(std::time::Duration::from_millis(300));
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sandgate: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
