//! `sandgate pins`: a person's review of the tool definitions the supply-chain guard pinned and
//! holds (issue 49). It reads and writes the store; a running gateway (every replica) follows
//! within two seconds. Each decision is an audit line naming who made it.

use std::process::ExitCode;

use sandgate_gateway::pins::review::{self, Diff, Reviewed};

use super::args::ConfigArg;

/// The pins commands.
#[derive(Debug, clap::Subcommand)]
pub enum PinsCommand {
    /// Every pinned tool and every held change, one tool a line as BACKEND.TOOL, with what the
    /// scan found.
    List {
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// A held change beside the definition pinned before it: description and schemas, line by
    /// line (`-` pinned, `+` served now), and what the scan found.
    Diff {
        /// The held tool, as BACKEND.TOOL.
        tool: String,
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Accept a held change (BACKEND.TOOL), or every held change of BACKEND: its definition
    /// becomes the pin, and agents see and may call it.
    Accept {
        /// BACKEND.TOOL, or BACKEND.
        target: String,
        /// Who decides, for the audit log (default: the login name, `(cli)`).
        #[arg(long)]
        by: Option<String>,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Reject a held change (BACKEND.TOOL), or every held change of BACKEND: it stays held
    /// (calls keep failing with the held error, the pinned definition stays shown), marked
    /// rejected, until the backend serves the pinned definition again or a person accepts.
    Reject {
        /// BACKEND.TOOL, or BACKEND.
        target: String,
        /// Who decides, for the audit log (default: the login name, `(cli)`).
        #[arg(long)]
        by: Option<String>,
        #[command(flatten)]
        config: ConfigArg,
    },
}

/// Runs a pins command.
pub async fn run(command: PinsCommand) -> anyhow::Result<ExitCode> {
    match command {
        PinsCommand::List { json, config } => {
            let config = crate::setup::load_config(config.config.as_deref())?;
            let store = crate::setup::store_handle(&config).await?;
            let rows = review::list(&store).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else if rows.is_empty() {
                println!(
                    "nothing is pinned yet: a backend's tools are pinned the first time `sandgate serve` (or check, tools, run) lists them"
                );
            } else {
                for row in &rows {
                    println!("{}", line(row));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        PinsCommand::Diff { tool, json, config } => {
            let config = crate::setup::load_config(config.config.as_deref())?;
            let store = crate::setup::store_handle(&config).await?;
            let diff = review::diff(&store, &tool).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&diff)?);
            } else {
                print_diff(&diff);
            }
            Ok(ExitCode::SUCCESS)
        }
        PinsCommand::Accept { target, by, config } => decide(target, by, config, true).await,
        PinsCommand::Reject { target, by, config } => decide(target, by, config, false).await,
    }
}

async fn decide(
    target: String,
    by: Option<String>,
    config: ConfigArg,
    accept: bool,
) -> anyhow::Result<ExitCode> {
    let config = crate::setup::load_config(config.config.as_deref())?;
    let store = crate::setup::store_handle(&config).await?;
    let audit = crate::access::audit_log(&config)?;
    let by = by.unwrap_or_else(|| {
        let login = std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .unwrap_or_else(|_| "operator".into());
        format!("{login} (cli)")
    });
    let decided = review::decide(&store, &audit, &target, &by, accept).await?;
    for name in &decided {
        println!(
            "{name}: {} by {by}",
            if accept { "accepted" } else { "rejected" }
        );
    }
    // The audit log writes on its own thread: let it finish before the process ends.
    audit.flush();
    Ok(ExitCode::SUCCESS)
}

/// One tool a line: `BACKEND.TOOL  pinned (first use)`, or `BACKEND.TOOL  held (changed)`, and
/// what the scan found.
fn line(row: &Reviewed) -> String {
    let mut text = format!("{}  {}", sandgate_pins::escaped(&row.name), row.state);
    match (&row.held, &row.pinned_by) {
        (Some(kind), _) => text.push_str(&format!(" ({kind})")),
        (None, Some(by)) => text.push_str(&format!(" ({by})")),
        (None, None) => {}
    }
    if let Some(by) = &row.rejected_by {
        text.push_str(&format!(", rejected by {by}"));
    }
    if !row.findings.is_empty() {
        let findings: Vec<String> = row
            .findings
            .iter()
            .map(|f| format!("{:?} {:?} in {}", f.severity, f.kind, f.place).to_lowercase())
            .collect();
        text.push_str(&format!("  findings: {}", findings.join("; ")));
    }
    text
}

fn print_diff(diff: &Diff) {
    println!(
        "{}: held ({}){}",
        sandgate_pins::escaped(&diff.name),
        diff.held,
        diff.rejected_by
            .as_ref()
            .map(|by| format!(", rejected by {by}"))
            .unwrap_or_default()
    );
    if diff.pinned.is_none() {
        println!("no definition was pinned before: the whole definition is new");
    }
    for finding in &diff.findings {
        println!(
            "finding: {:?} {:?} in {}: {}",
            finding.severity, finding.kind, finding.place, finding.excerpt
        );
    }
    println!("--- pinned\n+++ served now");
    for line in &diff.lines {
        let mark = match line.side {
            "pinned" => '-',
            "served" => '+',
            _ => ' ',
        };
        println!("{mark} {}", line.text);
    }
}
