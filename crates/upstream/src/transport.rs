//! Building the transport to one backend.
//!
//! A stdio backend is a child process with a clean environment: only what its config lists,
//! plus `PATH` and `HOME` handed in by the binary. Its stdout passes through a filter before
//! rmcp sees it: a line that is not a JSON-RPC message (a stray `console.log`, a banner) is
//! counted and logged instead of silently dropped, so a call that then times out can say why.
//! Its stderr goes to a ring buffer and to the log, never to the model.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use sandgate_config::{BackendConfig, Transport};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::{Child, ChildStdin};

use crate::stderr::StderrRing;

/// Largest single stdout line accepted from a backend (a tool result is one line).
const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// The most buffer the stdout filter keeps between lines.
const KEPT_LINE_CAPACITY: usize = 1024 * 1024;
/// Buffer between the stdout filter and rmcp.
const PIPE_BYTES: usize = 256 * 1024;

/// Counts stdout lines that were not protocol messages.
#[derive(Debug, Default)]
pub(crate) struct StdoutNoise {
    lines: AtomicU64,
}

impl StdoutNoise {
    /// Number of non-protocol lines seen so far.
    pub(crate) fn count(&self) -> u64 {
        self.lines.load(Ordering::Relaxed)
    }
}

/// A stdio backend's process, leader of a process group of its own: when this is dropped
/// (the backend is restarted, or sandgate stops), the whole group is killed, so a backend
/// started through a wrapper (`npx`, a shell script) leaves no grandchild behind.
pub(crate) struct ChildGroup {
    child: Child,
}

impl ChildGroup {
    /// Waits for the leader to exit.
    pub(crate) async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.child.id().and_then(|id| i32::try_from(id).ok()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        // The leader is killed (and reaped) by `kill_on_drop` in any case.
    }
}

/// A running stdio child and the pipes rmcp should use.
pub(crate) struct StdioChild {
    pub child: ChildGroup,
    pub reader: DuplexStream,
    pub writer: ChildStdin,
}

/// Spawns a stdio backend with a clean environment and wires up its stdout filter and stderr
/// capture.
pub(crate) fn spawn_stdio(
    config: &BackendConfig,
    inherited_env: &[(String, String)],
    stderr_ring: Arc<StderrRing>,
    noise: Arc<StdoutNoise>,
) -> std::io::Result<StdioChild> {
    let Transport::Stdio { command, args, cwd } = &config.transport else {
        return Err(std::io::Error::other("not a stdio backend"));
    };
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(inherited_env.iter().map(|(k, v)| (k, v)))
        .envs(&config.env)
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
    tokio::spawn(async move { crate::stderr::pump(stderr, &name, stderr_ring).await });
    let (mut filtered, reader) = tokio::io::duplex(PIPE_BYTES);
    let name = config.name.clone();
    tokio::spawn(async move {
        let mut stdout = BufReader::with_capacity(64 * 1024, stdout);
        let mut line = Vec::with_capacity(4096);
        loop {
            line.clear();
            // A huge line (a large result) must not pin its buffer for the backend's life.
            if line.capacity() > KEPT_LINE_CAPACITY {
                line = Vec::with_capacity(4096);
            }
            match (&mut stdout)
                .take(MAX_LINE_BYTES as u64)
                .read_until(b'\n', &mut line)
                .await
            {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let first = line.iter().find(|b| !b.is_ascii_whitespace());
            match first {
                None => continue,
                Some(b'{') | Some(b'[') => {
                    if !line.ends_with(b"\n") {
                        line.push(b'\n');
                    }
                    if filtered.write_all(&line).await.is_err() {
                        break;
                    }
                }
                Some(_) => {
                    noise.lines.fetch_add(1, Ordering::Relaxed);
                    let shown = String::from_utf8_lossy(&line[..line.len().min(200)]);
                    tracing::warn!(backend = %name, "backend wrote a non-MCP line to stdout (MCP servers must log to stderr): {}", shown.trim_end());
                }
            }
        }
    });
    Ok(StdioChild {
        child: ChildGroup { child },
        reader,
        writer: stdin,
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
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| format!("the value of header `{name}` is not valid HTTP"))?;
        custom.insert(header, value);
    }
    let transport_config =
        StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
    Ok(StreamableHttpClientTransport::from_config(transport_config))
}
