//! Building the transport to one backend.
//!
//! A stdio backend is a child process with a clean environment: only what its config lists,
//! plus `PATH` and `HOME` handed in by the binary. Its stdout passes through the inspector in
//! `frames` before rmcp sees it, so every line is bounded and every response gets an answer.
//! Its stderr goes to a ring buffer and to the log, never to the model.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;

use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use sandgate_config::{BackendConfig, Transport};
use tokio::process::{Child, ChildStdin};

use crate::direct_call::Waiting;
use crate::frames::{Incoming, StdoutNoise};
use crate::stderr::StderrRing;

/// Parsed messages waiting between the stdout inspector and rmcp.
const MESSAGES_IN_FLIGHT: usize = 16;

/// A stdio backend's process, leader of a process group of its own: when this is dropped
/// (the backend is restarted, or sandgate stops), the whole group is killed, so a backend
/// started through a wrapper (`npx`, a shell script) leaves no grandchild behind.
pub(crate) struct ChildGroup {
    child: Child,
    /// The run's name in its processes' environment (see `escapees`).
    run: String,
}

impl ChildGroup {
    /// Waits for the leader to exit.
    pub(crate) async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        let leader = self.child.id();
        #[cfg(unix)]
        if let Some(pid) = leader.and_then(|id| i32::try_from(id).ok()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        // The leader is killed (and reaped) by `kill_on_drop` in any case; what left the
        // group is found by its run's name.
        crate::escapees::end(&self.run, leader);
    }
}

/// A running stdio child and what rmcp reads from and writes to.
pub(crate) struct StdioChild {
    pub child: ChildGroup,
    /// The backend's messages, inspected and parsed (see `frames`).
    pub incoming: futures::channel::mpsc::Receiver<Incoming>,
    pub writer: ChildStdin,
    /// The direct tool calls waiting for the inspector to hand them their answers.
    pub waiting: Arc<Waiting>,
    /// Ends when the child's stderr has been read to its end (it closed it, or exited), so a
    /// reason it wrote before exiting is in the ring by then.
    pub stderr_read: tokio::task::JoinHandle<()>,
}

/// Spawns a stdio backend with a clean environment and wires up its stdout filter and stderr
/// capture.
pub(crate) fn spawn_stdio(
    config: &BackendConfig,
    inherited_env: &[(String, String)],
    stderr_ring: Arc<StderrRing>,
    noise: Arc<StdoutNoise>,
    progress: ProgressDispatcher,
) -> std::io::Result<StdioChild> {
    let Transport::Stdio { command, args, cwd } = &config.transport else {
        return Err(std::io::Error::other("not a stdio backend"));
    };
    let run = crate::escapees::new_run();
    crate::escapees::adopt_orphans();
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(inherited_env.iter().map(|(k, v)| (k, v)))
        .envs(config.env.iter().map(|(key, value)| (key, value.expose())))
        .env(crate::escapees::RUN_VAR, &run)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // A group of its own: killed as one (see `ChildGroup`), and a Ctrl-C in sandgate's
    // terminal reaches sandgate, which stops its backends, rather than each backend directly.
    #[cfg(unix)]
    cmd.process_group(0);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let mut child = cmd.spawn()?;
    let (Some(stdout), Some(stdin), Some(stderr)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other(
            "child process pipes were not created",
        ));
    };
    let name = config.name.clone();
    let stderr_read =
        tokio::spawn(async move { crate::stderr::pump(stderr, &name, stderr_ring).await });
    let (inspected, incoming) = futures::channel::mpsc::channel(MESSAGES_IN_FLIGHT);
    let (name, max_bytes) = (config.name.clone(), config.bounds.max_result_bytes);
    let waiting = Waiting::new();
    tokio::spawn(crate::frames::inspect(
        stdout,
        inspected,
        max_bytes,
        noise,
        name,
        waiting.clone(),
        progress,
    ));
    Ok(StdioChild {
        child: ChildGroup { child, run },
        incoming,
        writer: stdin,
        waiting,
        stderr_read,
    })
}

/// Builds the streamable HTTP client transport for an HTTP backend.
pub(crate) fn http_transport(
    config: &BackendConfig,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    let Transport::Http { url, headers } = &config.transport else {
        return Err("not an HTTP backend".into());
    };
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let header = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("header name `{name}` is not valid HTTP"))?;
        let value = http::HeaderValue::from_str(value.expose())
            .map_err(|_| format!("the value of header `{name}` is not valid HTTP"))?;
        custom.insert(header, value);
    }
    // A server that answers 404 for its session (it restarted, or expired it) gets a new
    // session, and the call that met the 404 is sent again, once. A server that answers 400
    // instead is caught by the supervisor's ping after the failed call (`Backend::suspect`).
    let transport_config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
        .custom_headers(custom)
        .reinit_on_expired_session(true);
    Ok(StreamableHttpClientTransport::from_config(transport_config))
}
