//! `sandgate serve`: the gateway itself.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use anyhow::Context;
use sandgate_gateway::{Gateway, HttpOptions};
use sandgate_policy::Grant;
use tokio_util::sync::CancellationToken;

use super::ConfigArg;
use crate::setup;

/// Default port when `--http` gives none.
const DEFAULT_PORT: u16 = 8931;

/// Options of `sandgate serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// Serve streamable HTTP on ADDR (`PORT`, `IP:PORT`; loopback when only a port is given).
    /// With --http, stdio is not served unless --stdio is also given.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8931")]
    http: Option<String>,
    /// Also serve stdio when HTTP is on.
    #[arg(long)]
    stdio: bool,
}

fn parse_addr(text: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse::<SocketAddr>()
        .with_context(|| format!("--http {text:?} is not a port or an IP:PORT address; try --http 127.0.0.1:{DEFAULT_PORT}"))
}

pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = setup::load_config(args.config.config.as_deref())?;
    let http_addr = match &args.http {
        Some(text) => Some(parse_addr(text)?),
        None => config.http.listen,
    };
    let manager = setup::start_backends(&config);
    let gateway = Gateway::new(manager.clone(), Grant::all_tools());
    setup::attach_chain(&config, &gateway).await?;
    let shutdown = CancellationToken::new();
    let mut tasks = tokio::task::JoinSet::new();
    if let Some(addr) = http_addr {
        if !addr.ip().is_loopback() {
            tracing::warn!(%addr, "HTTP is listening beyond loopback; only Host names in http.allowed_hosts are accepted");
        }
        let options = HttpOptions {
            addr,
            allowed_hosts: config.http.allowed_hosts.clone(),
            allowed_origins: config.http.allowed_origins.clone(),
        };
        let (gateway, shutdown) = (gateway.clone(), shutdown.clone());
        tasks.spawn(async move {
            sandgate_gateway::serve_http(gateway, options, shutdown, |bound| {
                tracing::info!("serving MCP over streamable HTTP at http://{bound}/mcp");
            })
            .await
            .map_err(anyhow::Error::from)
        });
    }
    if http_addr.is_none() || args.stdio {
        let gateway = gateway.clone();
        tasks.spawn(async move {
            tracing::info!("serving MCP over stdio");
            sandgate_gateway::serve_stdio(gateway)
                .await
                .map_err(anyhow::Error::from)
        });
    }
    let outcome = tokio::select! {
        done = tasks.join_next() => match done {
            Some(Ok(result)) => result,
            Some(Err(e)) => Err(anyhow::anyhow!("a server task failed: {e}")),
            None => Ok(()),
        },
        _ = shutdown_signal() => Ok(()),
    };
    shutdown.cancel();
    manager.shutdown();
    outcome.map(|()| ExitCode::SUCCESS)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
