//! The `sandgate` binary: command line, config loading, logging and wiring.
//!
//! This is the only crate that reads the environment, prints to stdout or uses `anyhow`.
//! Logs always go to stderr, because in stdio mode stdout is the MCP protocol.

mod cli;
mod setup;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = cli::Cli::parse();
    setup::init_logging(&args);
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
    match runtime.block_on(cli::run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sandgate: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
