//! `sandgate tools list|search|info`: the meta-tools, from a terminal; and the stored-tool
//! commands (`add`, `update`, `import`, `remove`, `show`, `versions`, `rollback`, `export`,
//! `stored`), which `stored.rs` runs.

use std::process::ExitCode;

use sandgate_catalog::{Catalog, TsDecl};

use super::args::ConfigArg;
use crate::setup;

/// Tools subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ToolsCommand {
    /// Every tool, with its one-line description.
    List {
        #[command(flatten)]
        fresh: Fresh,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Tools ranked by how well they match a query.
    Search {
        /// What you want to do, in words.
        query: String,
        /// Most results.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        #[command(flatten)]
        fresh: Fresh,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// One tool's TypeScript declaration and an example call.
    Info {
        /// Qualified, bare or sanitized name.
        name: String,
        #[command(flatten)]
        fresh: Fresh,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Register a stored tool from a TypeScript file (version 1).
    Add(PutArgs),
    /// Register a new version of a stored tool.
    Update(PutArgs),
    /// Register a file `export` wrote (a new tool or a new version).
    Import(PutArgs),
    /// Remove a stored tool's name (its versions are kept).
    Remove {
        /// The tool's name (without `user.`).
        name: String,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// A stored tool's meta and code.
    Show {
        /// The tool's name.
        name: String,
        /// A version other than the current one.
        #[arg(long)]
        version: Option<u32>,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// A stored tool's versions.
    Versions {
        /// The tool's name.
        name: String,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Point a stored tool at an earlier version.
    Rollback {
        /// The tool's name.
        name: String,
        /// The version to point at.
        version: u32,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Print a stored tool's file, as registered (`add` and `import` take it back unchanged).
    Export {
        /// The tool's name.
        name: String,
        /// A version other than the current one.
        #[arg(long)]
        version: Option<u32>,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Every stored tool, with its version and owner.
    Stored(ConfigArg),
    /// Print a tool file made from a past call_tool_chain execution's code, to edit and add.
    Promote {
        /// The execution id (`sandgate executions list`).
        execution_id: String,
        /// The tool's name.
        #[arg(long)]
        name: String,
        #[command(flatten)]
        config: ConfigArg,
    },
}

/// Whether `list`, `search` and `info` ask the backends even when the tool cache knows every
/// one of them.
#[derive(Debug, clap::Args)]
pub struct Fresh {
    /// Start the backends and ask them, instead of answering from the tool cache.
    #[arg(long)]
    fresh: bool,
}

/// Arguments of `add`, `update` and `import`.
#[derive(Debug, clap::Args)]
pub struct PutArgs {
    /// The tool's TypeScript file.
    file: std::path::PathBuf,
    /// Its name (callable as `user.NAME`); default: the file's name.
    #[arg(long)]
    name: Option<String>,
    /// The profile registering it: every capability the tool declares must be one it holds.
    #[arg(long, default_value = "default")]
    profile: String,
    #[command(flatten)]
    config: ConfigArg,
}

pub async fn run(command: ToolsCommand) -> anyhow::Result<ExitCode> {
    use super::stored::{Change, Query, put, query};
    let (config_arg, fresh) = match command {
        ToolsCommand::List {
            ref config,
            ref fresh,
        }
        | ToolsCommand::Search {
            ref config,
            ref fresh,
            ..
        }
        | ToolsCommand::Info {
            ref config,
            ref fresh,
            ..
        } => (config, fresh.fresh),
        ToolsCommand::Add(a) => {
            return put(Change::Add, &a.file, a.name, &a.profile, &a.config).await;
        }
        ToolsCommand::Update(a) => {
            return put(Change::Update, &a.file, a.name, &a.profile, &a.config).await;
        }
        ToolsCommand::Import(a) => {
            return put(Change::Import, &a.file, a.name, &a.profile, &a.config).await;
        }
        ToolsCommand::Remove { name, config } => {
            return query(Query::Remove { name }, &config).await;
        }
        ToolsCommand::Show {
            name,
            version,
            config,
        } => return query(Query::Show { name, version }, &config).await,
        ToolsCommand::Versions { name, config } => {
            return query(Query::Versions { name }, &config).await;
        }
        ToolsCommand::Rollback {
            name,
            version,
            config,
        } => {
            return query(Query::Rollback { name, version }, &config).await;
        }
        ToolsCommand::Export {
            name,
            version,
            config,
        } => return query(Query::Export { name, version }, &config).await,
        ToolsCommand::Stored(config) => return query(Query::List, &config).await,
        ToolsCommand::Promote {
            execution_id,
            name,
            config,
        } => {
            return super::stored::promote(&execution_id, &name, &config).await;
        }
    };
    let config = setup::load_config(config_arg.config.as_deref())?;
    // The tool cache answers at once when it knows every enabled backend (`serve` keeps it);
    // otherwise the backends are started and asked (`npx` servers take seconds each).
    let mut specs = match cached_tools(&config).filter(|_| !fresh) {
        Some(tools) => tools,
        None => {
            let base = setup::open_base(&config).await?;
            let (manager, _calls) = setup::start_backends(&config, &base);
            setup::wait_for_backends(&config, &manager).await?;
            let tools = manager.tools();
            manager.stop(std::time::Duration::from_secs(5)).await;
            tools
        }
    };
    // Stored tools are listed and searched beside the backends', as `user.<name>`.
    if let Ok(store) = setup::store_handle(&config).await {
        let stored = sandgate_gateway::stored::load(store.tools().await.unwrap_or_default());
        specs.extend(stored.values().map(|tool| tool.spec()));
    }
    let catalog = Catalog::new(specs);
    match command {
        ToolsCommand::List { .. } => {
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
        ToolsCommand::Info { ref name, .. } => match catalog.resolve(name) {
            Ok(entry) => {
                let decl = TsDecl::for_entry(entry);
                println!(
                    "{}\n\n{}\nExample:\n{}",
                    entry.qualified, decl.declaration, decl.example
                );
            }
            Err(sandgate_catalog::CatalogError::NotFound { name, suggestions }) => {
                let close = if suggestions.is_empty() {
                    String::new()
                } else {
                    format!(" (did you mean {}?)", suggestions.join(", "))
                };
                eprintln!(
                    "no tool named `{name}`{close}. `sandgate tools search \"what it does\"` finds tools by what they do."
                );
                return Ok(ExitCode::from(1));
            }
            Err(e) => {
                eprintln!("{e}");
                return Ok(ExitCode::from(1));
            }
        },
        // The stored-tool commands returned above.
        _ => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// Every enabled backend's tools from the tool cache, when it holds a list for each of them.
fn cached_tools(config: &sandgate_config::Config) -> Option<Vec<sandgate_catalog::ToolSpec>> {
    let cached = setup::cache_for(config)?.load();
    let mut tools = Vec::new();
    for backend in config.backends.iter().filter(|b| b.enabled) {
        tools.extend(cached.get(&backend.name)?.iter().cloned());
    }
    Some(tools)
}
