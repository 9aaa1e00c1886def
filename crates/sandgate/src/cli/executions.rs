//! `sandgate executions list|show`: the execution records `call_tool_chain` keeps, read from
//! the store of the given config (the gateway may be running: SQLite in WAL mode lets both
//! read and write at once, and PostgreSQL is shared by design).

use std::process::ExitCode;

use anyhow::Context;
use sandgate_store::{ExecutionRecord, StoreHandle};

use super::args::ConfigArg;
use crate::setup;

/// The executions commands.
#[derive(Debug, clap::Subcommand)]
pub enum ExecutionsCommand {
    /// The most recent executions, newest first.
    List {
        #[command(flatten)]
        config: ConfigArg,
        /// How many to show.
        #[arg(long, short = 'n', default_value_t = 20)]
        limit: usize,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One execution with its calls, and its stored output if there is one.
    Show {
        #[command(flatten)]
        config: ConfigArg,
        /// The execution id (from `list`, or `execution_id` in a response).
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: ExecutionsCommand) -> anyhow::Result<ExitCode> {
    match command {
        ExecutionsCommand::List {
            config,
            limit,
            json,
        } => {
            let store = open(&config).await?;
            let records = store.list(limit).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&records)?);
                return Ok(ExitCode::SUCCESS);
            }
            if records.is_empty() {
                println!(
                    "No executions recorded yet. They appear here after call_tool_chain runs."
                );
                return Ok(ExitCode::SUCCESS);
            }
            // Columns as wide as what they hold (an id is 47 characters); `show` takes any
            // unique start of an id.
            let id_width = records.iter().map(|r| r.id.len()).max().unwrap_or(2).max(2);
            let profile_width = records
                .iter()
                .map(|r| r.profile.len())
                .max()
                .unwrap_or(7)
                .max(7);
            println!(
                "{:<30} {:<id_width$} {:<profile_width$} {:<13} {:>10} {:<9} {:>5} {:>10} {:<12}",
                "STARTED", "ID", "PROFILE", "TIER", "MS", "STATUS", "CALLS", "OUTPUT", "ERROR"
            );
            for r in &records {
                println!(
                    "{:<30} {:<id_width$} {:<profile_width$} {:<13} {:>10.1} {:<9} {:>5} {:>10} {:<12}",
                    local_time(r.started_at_ms),
                    r.id,
                    r.profile,
                    r.tier,
                    r.duration_ms,
                    r.status,
                    r.calls,
                    sandgate_output::kb(r.output_bytes as usize),
                    r.error_kind.as_deref().unwrap_or("")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ExecutionsCommand::Show { config, id, json } => {
            let store = open(&config).await?;
            let id = whole_id(&store, &id).await?;
            let record = store.get(&id).await?;
            let output = store.output_any_owner(&id).await.ok();
            if json {
                let value = serde_json::json!({"execution": record, "stored_output": output});
                println!("{}", serde_json::to_string_pretty(&value)?);
                return Ok(ExitCode::SUCCESS);
            }
            print_record(&record);
            match output {
                Some(text) => println!("\nStored full output ({} bytes):\n{text}", text.len()),
                None => {
                    println!("\nNo stored output (the response held all of it, or it expired).")
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The id `typed` starts (a whole id is taken as it is); an error names what matched.
async fn whole_id(store: &StoreHandle, typed: &str) -> anyhow::Result<String> {
    if store.get(typed).await.is_ok() {
        return Ok(typed.to_string());
    }
    let found = store.ids_starting_with(typed, 6).await?;
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => anyhow::bail!(
            "no execution id starts with `{typed}`; `sandgate executions list` shows the recent ones"
        ),
        many => anyhow::bail!(
            "`{typed}` starts {} execution ids ({}{}); type more of it",
            if many.len() > 5 {
                "more than 5".to_string()
            } else {
                many.len().to_string()
            },
            many.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
            if many.len() > 5 { ", …" } else { "" }
        ),
    }
}

async fn open(config: &ConfigArg) -> anyhow::Result<StoreHandle> {
    let config = setup::load_config(config.config.as_deref())?;
    if config.store.backend == sandgate_config::StoreBackend::Sqlite {
        let path = setup::store_path(&config)
            .context("no store file: set [store] path in the config (or HOME)")?;
        if !path.exists() {
            anyhow::bail!(
                "no store at {} yet: it is created when `sandgate serve` first runs with this config",
                path.display()
            );
        }
    }
    setup::store_handle(&config).await
}

fn print_record(r: &ExecutionRecord) {
    println!("execution  {}", r.id);
    println!("profile    {}", r.profile);
    println!("tier       {}", r.tier);
    println!(
        "status     {}{}",
        r.status,
        r.error_kind
            .as_deref()
            .map(|k| format!(" ({k})"))
            .unwrap_or_default()
    );
    println!("duration   {:.1} ms", r.duration_ms);
    println!("started    {}", local_time(r.started_at_ms));
    println!("code hash  {}", r.code_hash);
    println!(
        "output     {} full, {} returned",
        sandgate_output::kb(r.output_bytes as usize),
        sandgate_output::kb(r.returned_bytes as usize)
    );
    println!("calls      {}", r.calls);
    for c in &r.call_rows {
        let state = match c.changed_state {
            Some(true) => "may change state",
            Some(false) => "read-only",
            None => "no annotations",
        };
        let ms = c
            .duration_ms
            .map_or("unfinished".to_string(), |ms| format!("{ms:.1} ms"));
        let at = c
            .started_ms
            .map(|at| format!("+{at:.1} ms  "))
            .unwrap_or_default();
        println!(
            "  {at}{}.{}  {}  {ms}  {} in, {} out  ({state})",
            c.backend,
            c.tool,
            if c.ok { "ok" } else { "failed" },
            sandgate_output::kb(c.args_bytes as usize),
            sandgate_output::kb(c.result_bytes as usize),
        );
        if let Some(error) = &c.error {
            println!("      error: {error}");
        }
        if let Some(arguments) = &c.arguments {
            println!("      arguments: {arguments}");
        }
    }
    match &r.code {
        Some(code) => println!(
            "\nCode ({} bytes; `sandgate tools promote {} --name NAME > NAME.ts` makes it a stored tool's file, to edit and `sandgate tools add`):\n{code}",
            code.len(),
            r.id
        ),
        None => println!("\nCode: not kept (recorded before sandgate kept code, or pruned)."),
    }
}

/// A moment in the local time zone, with its offset.
pub(super) fn local_time(unix_ms: i64) -> String {
    use chrono::TimeZone;
    match chrono::Local.timestamp_millis_opt(unix_ms) {
        chrono::LocalResult::Single(at) | chrono::LocalResult::Ambiguous(at, _) => {
            at.format("%Y-%m-%d %H:%M:%S%.3f %:z").to_string()
        }
        chrono::LocalResult::None => format!("{unix_ms} (unix ms)"),
    }
}
