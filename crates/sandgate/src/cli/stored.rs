//! `sandgate tools add|update|import|remove|show|versions|rollback|export|stored`: managing
//! stored tools from a terminal. Every change is checked first (`stored::check`) and written in
//! one transaction; a running gateway picks it up within a second.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use sandgate_gateway::{GatewayError, stored};
use sandgate_policy::Access;
use sandgate_store::StoreError;

use super::args::ConfigArg;
use crate::setup;

/// What to do to a stored tool.
#[derive(Debug)]
pub enum Change {
    /// A new tool (the name must be free).
    Add,
    /// A new version of an existing tool.
    Update,
    /// Either: what `export` wrote, back in.
    Import,
}

/// Registers `file` as a new version (of tool `name`, else the file's stem), for `profile`.
pub async fn put(
    change: Change,
    file: &Path,
    name: Option<String>,
    profile: &str,
    config: &ConfigArg,
) -> anyhow::Result<ExitCode> {
    let config = setup::load_config(config.config.as_deref())?;
    let code =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let name = match name {
        Some(name) => name,
        None => file
            .file_stem()
            .and_then(|s| s.to_str())
            .map(|s| s.replace('-', "_"))
            .context("the file has no name to take the tool's from; pass --name")?,
    };
    let Some(owner) = config
        .access_profiles()
        .into_iter()
        .find(|p| p.name == profile)
    else {
        anyhow::bail!(
            "no profile `{profile}` in the config; pass --profile with one of its profiles"
        );
    };
    // Declared tools are read by the tools last listed (the cache), as the gateway reads them.
    let cached = setup::cache_for(&config)
        .map(|cache| cache.load().into_values().flatten().collect())
        .unwrap_or_default();
    let catalog = sandgate_catalog::Catalog::new(cached);
    let store = setup::store_handle(&config).await?;
    let exists = store.tool(&name).await.is_ok();
    match (change, exists) {
        (Change::Add, true) => {
            eprintln!(
                "a stored tool `{name}` exists already; `sandgate tools update {}` makes a new version of it",
                file.display()
            );
            return Ok(ExitCode::from(1));
        }
        (Change::Update, false) => {
            eprintln!(
                "no stored tool `{name}` to update; `sandgate tools add {}` registers it",
                file.display()
            );
            return Ok(ExitCode::from(1));
        }
        _ => {}
    }
    let access = Access::new(Arc::new(owner));
    let registrant = stored::Registrant::Operator { profile };
    let registered =
        match stored::register(&store, registrant, &name, &code, &access, &catalog).await {
            Ok(registered) => registered,
            Err(GatewayError::NotRegistered { problems, .. }) => {
                eprintln!(
                    "{} is not registered (nothing was written):",
                    file.display()
                );
                for problem in problems {
                    eprintln!("  {problem}");
                }
                return Ok(ExitCode::from(1));
            }
            Err(other) => return Err(other.into()),
        };
    println!("user.{name} is at version {}", registered.version);
    for warning in &registered.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The read-only and pointer commands.
#[derive(Debug)]
pub enum Query {
    /// Every stored tool.
    List,
    /// One tool (a version of it).
    Show { name: String, version: Option<u32> },
    /// Its history.
    Versions { name: String },
    /// Point it at an earlier version.
    Rollback { name: String, version: u32 },
    /// Remove the name.
    Remove { name: String },
    /// The file, as registered.
    Export { name: String, version: Option<u32> },
}

pub async fn query(query: Query, config: &ConfigArg) -> anyhow::Result<ExitCode> {
    let config = setup::load_config(config.config.as_deref())?;
    let store = setup::store_handle(&config).await?;
    let found = |r: Result<(), StoreError>| -> anyhow::Result<ExitCode> {
        match r {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(e @ (StoreError::NoTool { .. } | StoreError::NoToolVersion { .. })) => {
                eprintln!("{e}");
                Ok(ExitCode::from(1))
            }
            Err(e) => Err(e.into()),
        }
    };
    match query {
        Query::List => {
            let tools = store.tools().await?;
            if tools.is_empty() {
                println!(
                    "No stored tools. `sandgate tools add FILE.ts` registers one (examples/tools/ has some)."
                );
            }
            for tool in tools {
                let description = serde_json::from_str::<serde_json::Value>(&tool.meta)
                    .ok()
                    .and_then(|m| {
                        m.get("description")
                            .and_then(|d| d.as_str())
                            .map(str::to_string)
                    })
                    .unwrap_or_default();
                println!(
                    "user.{:<30} v{:<4} {:<10} {description}",
                    tool.name, tool.version, tool.owner
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Query::Show { name, version } => found(async {
            let tool = match version {
                Some(v) => store.tool_version(&name, v).await?,
                None => store.tool(&name).await?,
            };
            println!(
                "user.{} version {} (registered by profile `{}`)\nmeta: {}\n\n{}",
                tool.name, tool.version, tool.owner, tool.meta, tool.code
            );
            Ok(())
        }.await),
        Query::Versions { name } => found(async {
            for v in store.tool_versions(&name).await? {
                println!(
                    "v{:<4} {:<12} {}{}",
                    v.version,
                    v.owner,
                    super::executions::local_time(v.created_at_ms),
                    if v.current { "  ← current" } else { "" }
                );
            }
            Ok(())
        }.await),
        Query::Rollback { name, version } => found(async {
            store.rollback_tool(&name, version).await?;
            println!("user.{name} now points at version {version}");
            Ok(())
        }.await),
        Query::Remove { name } => found(async {
            store.remove_tool_as_operator(&name).await?;
            println!(
                "user.{name} is removed (its versions are kept; adding it again continues their numbering)"
            );
            Ok(())
        }.await),
        Query::Export { name, version } => found(async {
            let tool = match version {
                Some(v) => store.tool_version(&name, v).await?,
                None => store.tool(&name).await?,
            };
            print!("{}", tool.code);
            Ok(())
        }.await),
    }
}

/// Prints a tool file made from the code of execution `id`: its code as the tool's body, the
/// backends it used taken from `ctx.tools`, the tools it called declared, and a skeleton
/// `meta` to edit before `sandgate tools add`.
pub async fn promote(id: &str, name: &str, config: &ConfigArg) -> anyhow::Result<ExitCode> {
    if let Some(problem) = stored::bad_name(name) {
        eprintln!("{problem}");
        return Ok(ExitCode::from(1));
    }
    let config = setup::load_config(config.config.as_deref())?;
    let store = setup::store_handle(&config).await?;
    let record = match store.get(id).await {
        Ok(record) => record,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(1));
        }
    };
    let Some(code) = record.code.clone() else {
        eprintln!(
            "execution {id} has no code on record (it ran before sandgate kept code, or its code was pruned)"
        );
        return Ok(ExitCode::from(1));
    };
    print!("{}", tool_file_from(name, id, &code, &record.call_rows));
    Ok(ExitCode::SUCCESS)
}

/// The tool file `promote` prints.
fn tool_file_from(name: &str, id: &str, sent: &str, calls: &[sandgate_store::CallRow]) -> String {
    let code = sandgate_sandbox::normalize::model_code(sent)
        .code
        .into_owned();
    let mut tools: Vec<String> = calls
        .iter()
        .filter(|c| !c.backend.is_empty() && !c.backend.starts_with('('))
        .map(|c| format!("{}.{}", c.backend, c.tool))
        .collect();
    tools.sort();
    tools.dedup();
    let mut backends: Vec<String> = calls
        .iter()
        .filter(|c| !c.backend.is_empty() && !c.backend.starts_with('('))
        .map(|c| sandgate_catalog::sanitize_ident(&c.backend))
        .collect();
    backends.sort();
    backends.dedup();
    let declared = tools
        .iter()
        .map(|t| format!("{t:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let body: String = code
        .lines()
        .map(|line| {
            if line.is_empty() {
                String::new()
            } else {
                format!("  {line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let uses = if backends.is_empty() {
        String::new()
    } else {
        format!("  const {{ {} }} = ctx.tools;\n", backends.join(", "))
    };
    format!(
        "// Promoted from execution {id} (sandgate tools promote). Edit meta (what it does, its\n\
         // input, what it returns), read inputs from `input` instead of constants, then:\n\
         //   sandgate tools add {name}.ts\n\
         export const meta = {{\n  description: \"TODO: say what {name} does\",\n  input: {{ type: \"object\", properties: {{}} }},\n  capabilities: {{ tools: [{declared}] }},\n}};\n\n\
         export default async function (input: any, ctx: any) {{\n{uses}{body}\n}}\n"
    )
}
