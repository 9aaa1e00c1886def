//! Command-line interface: `serve`, `run`, `check`, `tools`, `executions`, `credentials`,
//! `pins`, `migrate`, `status`.

mod args;
mod check;
mod credentials;
mod executions;
mod pins;
mod reload;
mod run;
mod serve;
mod stored;
mod tools;

pub use args::ConfigArg;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// One MCP endpoint for all your MCP servers, in code mode.
#[derive(Debug, Parser)]
#[command(name = "sandgate", version, about)]
pub struct Cli {
    /// Log filter for stderr (e.g. `info`, `debug`, `sandgate_upstream=debug`); RUST_LOG wins.
    /// Default: `info,rmcp=warn` for serve, `warn` for the other commands.
    #[arg(long, global = true)]
    pub log_level: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP over stdio (default) and/or streamable HTTP.
    Serve(serve::ServeArgs),
    /// Run a TypeScript file in the sandbox against the configured backends.
    Run(run::RunArgs),
    /// Validate the config, connect to every backend and print a table of them.
    Check(ConfigArg),
    /// List, search and inspect backend tools from the command line.
    Tools {
        /// Which tools command.
        #[command(subcommand)]
        command: tools::ToolsCommand,
    },
    /// Inspect the executions call_tool_chain recorded.
    Executions {
        /// Which executions command.
        #[command(subcommand)]
        command: executions::ExecutionsCommand,
    },
    /// Keep users' own secrets for per-user backends (sealed with the [credentials] key).
    Credentials {
        /// Which credentials command.
        #[command(subcommand)]
        command: credentials::CredentialsCommand,
    },
    /// Review the tool definitions the supply-chain guard pinned and holds: list, diff, accept,
    /// reject.
    Pins {
        /// Which pins command.
        #[command(subcommand)]
        command: pins::PinsCommand,
    },
    /// Bring the store's schema to this version and exit: for a deployment job that runs
    /// before replicas start (they migrate by themselves too, one at a time).
    Migrate(ConfigArg),
    /// Show backend status, the tool cache and the HTTP settings.
    #[command(alias = "doctor")]
    Status(ConfigArg),
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => serve::run(args).await,
        Command::Check(args) => check::run(args, false).await,
        Command::Run(args) => run::run(args).await,
        Command::Status(args) => check::run(args, true).await,
        Command::Tools { command } => tools::run(command).await,
        Command::Executions { command } => executions::run(command).await,
        Command::Credentials { command } => credentials::run(command).await,
        Command::Pins { command } => pins::run(command).await,
        Command::Migrate(args) => {
            let config = crate::setup::load_config(args.config.as_deref())?;
            let store = crate::setup::store_handle(&config).await?;
            println!("the store ({}) is migrated", store.engine());
            Ok(ExitCode::SUCCESS)
        }
    }
}
