//! `sandgate serve`: the gateway itself.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use anyhow::Context;
use sandgate_gateway::{HttpOptions, HttpTokens};
use tokio_util::sync::CancellationToken;

use super::args::ConfigArg;
use crate::setup;

/// Default port when `--http` gives none.
const DEFAULT_PORT: u16 = 8931;

/// Options of `sandgate serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// Serve streamable HTTP on ADDR (`PORT`, `IP:PORT`; loopback when only a port is given).
    /// With --http, stdio is not served unless --stdio is also given. (`[http] listen` in the
    /// config serves HTTP beside stdio when a client starts sandgate over stdio.)
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
    // What the file held when it was read: a change made while the gateway starts (before it
    // follows the file) is then a change, not the starting point.
    let path = setup::config_path(args.config.config.as_deref())?;
    let loaded = super::reload::fingerprint(&path);
    let config = setup::load_config_from(&path)?;
    let http_addr = match &args.http {
        Some(text) => Some(parse_addr(text)?),
        None => config.http.listen,
    };
    // Who may use HTTP is settled before anything starts: a listener other machines reach
    // without tokens is an error, not a warning.
    let http_auth = match http_addr {
        Some(addr) => Some(crate::access::http_auth(&config, addr)?),
        None => None,
    };
    let telemetry = crate::telemetry::install(&config.telemetry)?;
    let base = setup::open_base(&config).await?;
    let (manager, calls) = setup::start_backends(&config, &base);
    let runtime = setup::chain_runtime(&config, base.store.clone()).await?;
    let gateway = setup::build_gateway(&config, manager.clone(), calls, runtime, &base).await?;
    let tokens = http_auth
        .as_ref()
        .map(|(auth, _)| HttpTokens::new(auth.clone()));
    let shutdown = CancellationToken::new();
    let mut tasks = tokio::task::JoinSet::new();
    // Settles once HTTP listens or cannot: the stdio client's first answer may then say why it
    // does not.
    let mut http_settled: Option<tokio::sync::oneshot::Receiver<()>> = None;
    // stdio is served without HTTP; beside HTTP when asked (--stdio); and beside the HTTP of
    // the config's `[http] listen` when a client started sandgate over stdio (stdin is no
    // terminal): one config then serves a team's HTTP gateway and a developer's stdio entry.
    // Only an explicit --http serves HTTP alone.
    let serve_stdio =
        http_addr.is_none() || args.stdio || (args.http.is_none() && stdin_is_a_client());
    if let (Some(addr), Some((_, notice)), Some(auth)) = (http_addr, http_auth, tokens.clone()) {
        let options = HttpOptions {
            addr,
            allowed_hosts: config.http.allowed_hosts.clone(),
            allowed_origins: config.http.allowed_origins.clone(),
            limits: config.http.limits,
            auth,
            secure_cookies: config.secure_cookies(),
        };
        let (gateway, shutdown) = (gateway.clone(), shutdown.clone());
        let (settled, listening) = tokio::sync::oneshot::channel::<()>();
        http_settled = Some(listening);
        tasks.spawn(async move {
            let mut settled = Some(settled);
            let served =
                sandgate_gateway::serve_http(gateway.clone(), options, shutdown, |bound| {
                    notice.print(bound);
                    tracing::info!("serving MCP over streamable HTTP at http://{bound}/mcp");
                    if let Some(settled) = settled.take() {
                        let _ = settled.send(());
                    }
                })
                .await;
            match served {
                // Beside stdio, HTTP that cannot listen (another sandgate holds the port) is
                // said, and the stdio client is served all the same: it ends when stdin does.
                Err(e) if serve_stdio => {
                    let problem = format!(
                        "{e}: HTTP is not served by this process; stdio is. Another process (perhaps the HTTP sandgate of this config) holds the port; pass --http ADDR for another, or leave [http] listen out of the stdio client's config"
                    );
                    tracing::error!("{problem}");
                    gateway.http_not_served(problem);
                    // Only now may the stdio client be answered.
                    drop(settled);
                    std::future::pending::<()>().await;
                    Ok(())
                }
                served => served.map_err(anyhow::Error::from),
            }
        });
    }
    if serve_stdio {
        // Someone who ran `sandgate serve` by hand sees a silent terminal: say what it waits
        // for, and the other ways in.
        if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            eprintln!(
                "sandgate is serving MCP over stdio: it waits for an MCP client's messages on this terminal, so typing here does nothing useful.\n\
                 To use it, let an MCP client start it (README: \"Claude Desktop in three steps\"); to look around, `sandgate check` and `sandgate tools search \"...\"`;\n\
                 to serve HTTP and the web console, `sandgate serve --http 127.0.0.1:8931` (then open http://127.0.0.1:8931/ui). Ctrl-C stops it."
            );
        }
        let gateway = gateway.clone();
        tasks.spawn(async move {
            if let Some(listening) = http_settled {
                let _ = tokio::time::timeout(HTTP_SETTLES_WITHIN, listening).await;
            }
            tracing::info!("serving MCP over stdio");
            sandgate_gateway::serve_stdio(gateway)
                .await
                .map_err(anyhow::Error::from)
        });
    }
    let mut signals = Signals::install()?;
    signals.reload = super::reload::follow(
        config.clone(),
        loaded,
        super::reload::Running {
            gateway: gateway.clone(),
            manager,
            tokens,
        },
        http_addr,
        shutdown.clone(),
    );
    let mut signalled = false;
    let outcome = tokio::select! {
        done = tasks.join_next() => match done {
            Some(Ok(result)) => result,
            Some(Err(e)) => Err(anyhow::anyhow!("a server task failed: {e}")),
            None => Ok(()),
        },
        signal = signals.next() => {
            tracing::info!("{signal}: shutting down (a second signal exits at once)");
            signalled = true;
            Ok(())
        }
    };
    // A second SIGINT or SIGTERM while shutting down exits at once.
    tokio::spawn(async move {
        let signal = signals.next().await;
        eprintln!("sandgate: {signal} again: exiting at once");
        sandgate_upstream::kill_every_backend_process();
        std::process::exit(130);
    });
    let drain = config.http.limits.drain;
    if signalled && http_addr.is_some() && !drain.is_zero() {
        drain_http(&gateway, drain).await;
    }
    shutdown.cancel();
    if !gateway.shut_down(SHUTDOWN_GRACE).await {
        tracing::warn!(
            "some backends did not stop within {SHUTDOWN_GRACE:?}; their process groups were killed"
        );
    }
    telemetry.shut_down().await;
    // The stdio reader may still be blocked on stdin; `main` does not wait for it.
    outcome.map(|()| ExitCode::SUCCESS)
}

/// Whether standard input is an MCP client's end: a pipe or a socket, as a client that starts
/// sandgate gives it. A terminal is a person; `/dev/null` or a closed stdin is a service
/// manager or a container (stdio there would end at once, and the gateway with it).
fn stdin_is_a_client() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileTypeExt;
    let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(fd)
        .metadata()
        .is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_socket())
}

/// A drained shutdown (`[http] drain`): the gateway says it is not ready and closes each
/// connection after its response, while serving as before for `drain`, so a balancer takes it
/// out of rotation without a request lost; then executions in flight get up to `drain` more
/// to finish before the rest of the shutdown cancels them.
async fn drain_http(gateway: &sandgate_gateway::Gateway, drain: std::time::Duration) {
    gateway.begin_drain();
    tracing::info!("draining for {drain:?}: /readyz says 503 while requests are still served");
    tokio::time::sleep(drain).await;
    let waited = std::time::Instant::now();
    while gateway.executions_running() > 0 && waited.elapsed() < drain {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    if gateway.executions_running() > 0 {
        tracing::warn!(
            running = gateway.executions_running(),
            "executions still running after the drain are cancelled"
        );
    }
}

/// How long shutting down may take before sandgate exits anyway (the whole shutdown stays
/// within 2 s: this, then the runtime's own short grace in `main`).
/// How long the stdio client's first answer waits for the config's HTTP to listen or fail
/// (binding a port takes a moment; this bounds a stuck one).
const HTTP_SETTLES_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_millis(1200);

/// SIGINT and SIGTERM (which stop sandgate) and SIGHUP (which must not: a terminal that closes
/// or a supervisor that sends it to the group would otherwise kill the gateway; it reloads the
/// config instead, see `reload`).
struct Signals {
    /// Poked on SIGHUP; `None` when there is no config file to reload.
    reload: Option<std::sync::Arc<tokio::sync::Notify>>,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> anyhow::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                reload: None,
                interrupt: signal(SignalKind::interrupt()).context("cannot handle SIGINT")?,
                terminate: signal(SignalKind::terminate()).context("cannot handle SIGTERM")?,
                hangup: signal(SignalKind::hangup()).context("cannot handle SIGHUP")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals { reload: None })
    }

    /// The next stopping signal's name; SIGHUPs before it reload the config.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        loop {
            tokio::select! {
                _ = self.interrupt.recv() => return "SIGINT",
                _ = self.terminate.recv() => return "SIGTERM",
                _ = self.hangup.recv() => match &self.reload {
                    Some(reload) => reload.notify_one(),
                    None => tracing::info!("SIGHUP: there is no config file to reload; sandgate keeps serving (stop it with SIGINT or SIGTERM)"),
                },
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}
