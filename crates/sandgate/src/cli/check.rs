//! `sandgate check` and `sandgate status`: connect to every backend and report.

use std::process::ExitCode;

use sandgate_catalog::Catalog;
use sandgate_upstream::BackendState;

use super::args::ConfigArg;
use crate::setup;

pub async fn run(args: ConfigArg, detailed: bool) -> anyhow::Result<ExitCode> {
    let config = setup::load_config(args.config.as_deref())?;
    println!(
        "config: {} ({} backend(s))",
        setup::describe(&config),
        config.backends.len()
    );
    let base = setup::open_base(&config).await?;
    let (manager, _calls) = setup::start_backends(&config, &base);
    setup::wait_for_backends(&config, &manager).await?;
    let statuses = manager.statuses();
    let catalog = Catalog::new(manager.tools());
    let width = statuses
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(7)
        .max(7);
    println!(
        "\n{:width$}  {:9}  {:10}  {:>5}  note",
        "backend", "transport", "state", "tools"
    );
    let mut healthy = true;
    for s in &statuses {
        let state = serde_json::to_value(s.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let note = s.last_error.clone().unwrap_or_else(|| {
            s.protocol_version
                .clone()
                .map(|v| format!("MCP {v}"))
                .unwrap_or_default()
        });
        println!(
            "{:width$}  {:9}  {:10}  {:>5}  {note}",
            s.name,
            s.transport,
            state,
            s.tools.len()
        );
        // An entry sandgate skipped (it says why) is not ready; one the config disables is fine.
        healthy &= s.state == BackendState::Ready
            || (s.state == BackendState::Disabled && s.last_error.is_none());
    }
    // Tools of backends that are not ready come from the tool cache: known, not reachable.
    let reachable: usize = statuses
        .iter()
        .filter(|s| s.state == BackendState::Ready)
        .map(|s| s.tools.len())
        .sum();
    let cached = catalog.len().saturating_sub(reachable);
    if cached > 0 {
        println!(
            "\n{reachable} tools reachable ({cached} more known from the tool cache, of backends that are not ready)."
        );
    } else {
        println!("\n{reachable} tools reachable.");
    }
    for c in catalog.collisions() {
        println!(
            "note: {:?} all sanitize to `{}`; `{}` is reachable as `{}`",
            c.names,
            c.identifier,
            c.names.last().map(String::as_str).unwrap_or(""),
            c.assigned
        );
    }
    for s in &statuses {
        for p in &s.tool_problems {
            println!("note: {}: tool `{}` {}", s.name, p.tool, p.problem);
        }
    }
    if detailed {
        match setup::cache_for(&config) {
            Some(cache) => println!("tool cache: {}", cache.path().display()),
            None => println!("tool cache: off (no HOME or XDG_CACHE_HOME)"),
        }
        match config.http.listen {
            // What the file configures: `serve --http ADDR` may serve HTTP for a config that
            // has no `[http] listen`, so "off" said something this command cannot know.
            Some(addr) => println!(
                "http: [http] listen = {addr} (hosts: loopback{}; origins: loopback{})",
                extra(&config.http.allowed_hosts),
                extra(&config.http.allowed_origins)
            ),
            None => println!(
                "http: not in this config (no [http] listen; `serve --http ADDR` serves HTTP anyway)"
            ),
        }
        report_access(&config);
        report_pins(&config, &base.store).await;
        healthy &= report_sandbox(&config).await;
    }
    // Why a backend is down is often only in what it printed: shown to the operator here (never
    // to models).
    for s in statuses
        .iter()
        .filter(|s| s.state != BackendState::Ready && s.state != BackendState::Disabled)
    {
        let tail = manager.stderr_tail(&s.name);
        if !tail.is_empty() {
            println!(
                "\nlast stderr of {} (operators only; never shown to models):",
                s.name
            );
            for line in tail.iter().rev().take(10).rev() {
                println!("  {line}");
            }
        }
    }
    manager.stop(std::time::Duration::from_secs(5)).await;
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The supply-chain guard: each backend's pin mode, what is pinned and held, and the findings
/// that hold nothing (warnings).
async fn report_pins(config: &sandgate_config::Config, store: &sandgate_store::StoreHandle) {
    let modes: Vec<String> = config
        .backends
        .iter()
        .map(|b| format!("{} {}", b.name, b.pin.as_str()))
        .collect();
    println!("pins: {}", modes.join(", "));
    let rows = match sandgate_gateway::pins::review::list(store).await {
        Ok(rows) => rows,
        Err(e) => {
            println!("  cannot read the pins: {e}");
            return;
        }
    };
    let held: Vec<&sandgate_gateway::pins::review::Reviewed> =
        rows.iter().filter(|r| r.state == "held").collect();
    println!(
        "  {} pinned, {} held for review{}",
        rows.len() - held.len(),
        held.len(),
        if held.is_empty() {
            ""
        } else {
            " (`sandgate pins list`, `sandgate pins diff BACKEND.TOOL`)"
        }
    );
    for row in &held {
        println!(
            "  held: {} ({})",
            sandgate_pins::escaped(&row.name),
            row.held.as_deref().unwrap_or("")
        );
    }
    for row in rows.iter().filter(|r| r.state == "pinned") {
        for finding in &row.findings {
            println!(
                "  warning: {}: {:?} in {}: {}",
                sandgate_pins::escaped(&row.name),
                finding.kind,
                finding.place,
                finding.excerpt
            );
        }
    }
}

/// Who may use the gateway: HTTP auth, the tokens (by name, never their value), each profile's
/// grants, and the audit log.
fn report_access(config: &sandgate_config::Config) {
    let tokens: Vec<String> = config
        .http
        .tokens
        .iter()
        .map(|t| format!("{} → {}", t.id(), t.profile))
        .collect();
    match (config.http.auth, tokens.is_empty()) {
        (sandgate_config::HttpAuth::None, _) => println!("http auth: off (loopback only)"),
        (_, true) => println!(
            "http auth: bearer token (none configured: one is generated at the first `serve --http`)"
        ),
        (_, false) => println!("http auth: bearer tokens {}", tokens.join(", ")),
    }
    for p in config.access_profiles() {
        let list = |items: Vec<String>| {
            if items.is_empty() {
                "none".to_string()
            } else {
                items.join(", ")
            }
        };
        println!(
            "profile {}{}: tools {}; deny {}; net {}; fs {}; env {}",
            p.name,
            if p.admin { " (admin)" } else { "" },
            list(p.tools.allowed().to_vec()),
            list(p.tools.denied().to_vec()),
            list(p.net.written().into_iter().map(String::from).collect()),
            list(
                p.fs.iter()
                    .map(|r| format!(
                        "{}{}",
                        r.path.display(),
                        if r.write { " (write)" } else { "" }
                    ))
                    .collect()
            ),
            list(p.env.clone()),
        );
    }
    match &config.audit.path {
        Some(path) => println!("audit log: {}", path.display()),
        None => println!("audit log: off ([audit] path)"),
    }
}

/// Starts the sandbox's workers and says what they run with. `false` if they cannot start.
async fn report_sandbox(config: &sandgate_config::Config) -> bool {
    match setup::start_sandbox(config).await {
        Ok(sandbox) => {
            let runtimes = match sandbox.template_bytes() {
                Some(bytes) => format!(
                    "each execution's runtime copied back from a {} KiB template image",
                    bytes.div_ceil(1024)
                ),
                None => "a runtime built for each execution".to_string(),
            };
            println!("sandbox: {runtimes}");
            let listed = |protections: &sandgate_sandbox::Protections| {
                protections
                    .active
                    .iter()
                    .map(|(name, on)| format!("{name} {}", if *on { "on" } else { "OFF" }))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            println!("sandbox protections: {}", listed(sandbox.protections()));
            let default = config.sandbox.engine.as_str();
            match (sandbox.v8_protections(), setup::deno_path(config)) {
                (Some(protections), Ok(deno)) => {
                    println!(
                        "v8 engine: Deno at {}, an isolate per execution (default engine: {default})",
                        deno.display()
                    );
                    println!("v8 engine protections: {}", listed(protections));
                }
                _ => println!(
                    "v8 engine: off (default engine: {default}; [sandbox] engine or a profile's engine starts it)"
                ),
            }
            sandbox.shutdown().await;
            true
        }
        Err(e) => {
            println!("sandbox: cannot start: {e:#}");
            false
        }
    }
}

fn extra(list: &[String]) -> String {
    if list.is_empty() {
        String::new()
    } else {
        format!(", {}", list.join(", "))
    }
}
