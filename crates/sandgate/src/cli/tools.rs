//! `sandgate tools list|search|info`: the meta-tools, from a terminal.

use std::process::ExitCode;

use sandgate_catalog::{Catalog, TsDecl};

use super::ConfigArg;
use crate::setup;

/// Tools subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ToolsCommand {
    /// Every tool, with its one-line description.
    List(ConfigArg),
    /// Tools ranked by how well they match a query.
    Search {
        /// What you want to do, in words.
        query: String,
        /// Most results.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// One tool's TypeScript declaration and an example call.
    Info {
        /// Qualified, bare or sanitized name.
        name: String,
        #[command(flatten)]
        config: ConfigArg,
    },
}

pub async fn run(command: ToolsCommand) -> anyhow::Result<ExitCode> {
    let config_arg = match &command {
        ToolsCommand::List(c) => c,
        ToolsCommand::Search { config, .. } | ToolsCommand::Info { config, .. } => config,
    };
    let config = setup::load_config(config_arg.config.as_deref())?;
    let manager = setup::start_backends(&config);
    setup::wait_for_backends(&config, &manager).await?;
    let catalog = Catalog::new(manager.tools());
    manager.shutdown();
    match command {
        ToolsCommand::List(_) => {
            for entry in catalog.entries() {
                println!("{:40} {}", entry.qualified, entry.summary());
            }
        }
        ToolsCommand::Search { query, limit, .. } => {
            let hits = catalog.search_index().search(&query, limit);
            if hits.is_empty() {
                eprintln!("no tool matches {query:?}");
                return Ok(ExitCode::from(1));
            }
            for hit in hits {
                let entry = &catalog.entries()[hit.entry];
                println!(
                    "{:40} {:6.2}  {}\n    {}",
                    entry.qualified,
                    hit.score,
                    entry.summary(),
                    TsDecl::for_entry(entry).signature
                );
            }
        }
        ToolsCommand::Info { name, .. } => match catalog.resolve(&name) {
            Ok(entry) => {
                let decl = TsDecl::for_entry(entry);
                println!(
                    "{}\n\n{}\nExample:\n{}",
                    entry.qualified, decl.declaration, decl.example
                );
            }
            Err(e) => {
                eprintln!("{e}");
                return Ok(ExitCode::from(1));
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}
