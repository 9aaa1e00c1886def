//! The frames between the host and a worker process: 4-byte little-endian length, then JSON
//! (externally tagged enums: `{"Call": {...}}`, which both sides decode without buffering).
//!
//! The worker's stdin and stdout are its only channel. Frames are small and self-describing,
//! so a crash of either side is visible as a short read, and a frame is never trusted beyond
//! its declared length (capped at [`MAX_FRAME_BYTES`]).

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Limits;

/// Largest frame either side accepts.
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// A tool the guest may call, as the worker needs to know it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolBinding {
    /// Backend name as configured.
    pub backend: String,
    /// Tool name as the backend gives it.
    pub name: String,
    /// The backend's JavaScript identifier.
    pub js_backend: String,
    /// The tool's JavaScript identifier.
    pub js_tool: String,
    /// TypeScript declaration, for `__interfaces`.
    #[serde(default)]
    pub declaration: String,
}

/// Host → worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum HostFrame {
    /// Run one execution.
    Run {
        /// The wrapped JavaScript (see `transpile`).
        js: String,
        /// Tools the guest may call; calls name them by index.
        tools: Vec<ToolBinding>,
        /// Names of host functions exposed as globals.
        host_functions: Vec<String>,
        /// The optional `context` global.
        context: Option<Value>,
        /// Limits for this run.
        limits: Limits,
        /// How long the worker may poll for a call's reply before it sleeps (0: sleep at once).
        #[serde(default)]
        reply_spin_micros: u32,
    },
    /// The answer to a [`WorkerFrame::Call`].
    Reply {
        /// The call's id.
        id: u64,
        /// JSON text of the result (a raw MCP result for tools), or the failure.
        result: Result<String, CallFailure>,
    },
    /// Test builds only: ask the locked-down worker to try something forbidden.
    #[cfg(any(test, feature = "test-probes"))]
    Probe {
        /// `open`, `socket`, `exec` or `env`.
        what: String,
    },
}

/// Why a call produced no result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallFailure {
    /// `tool_denied`, `tool_failed`, `timeout`, ...
    pub kind: String,
    /// Message for the guest (becomes the rejected Error's message).
    pub message: String,
}

/// The `name` of the Error a failed call rejects with in the guest, by failure kind.
pub fn failure_error_name(kind: &str) -> &'static str {
    match kind {
        "tool_denied" => "ToolDeniedError",
        "timeout" => "ToolTimeoutError",
        _ => "ToolCallError",
    }
}

/// Which callable a [`WorkerFrame::Call`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", content = "i")]
pub enum Callee {
    /// Index into the run's tools.
    Tool(u32),
    /// Index into the run's host functions.
    Host(u32),
}

/// Worker → host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum WorkerFrame {
    /// The worker is locked down and ready; it reports which protections are active.
    Ready {
        /// Protection name → active.
        protections: Vec<(String, bool)>,
        /// Size of the template image each execution's runtime is copied from, if the worker
        /// uses one (else it builds a runtime per execution). See `engine::Snapshot`.
        #[serde(default)]
        template_bytes: Option<u64>,
    },
    /// The guest called a tool or host function.
    Call {
        /// Call id, unique within the run.
        id: u64,
        /// What is called.
        callee: Callee,
        /// JSON text of the arguments.
        args: String,
    },
    /// A console line.
    Log {
        /// `log`, `info`, `warn`, `error` or `debug`.
        level: String,
        /// The formatted line.
        message: String,
    },
    /// The run finished.
    Done {
        /// The result or the error.
        outcome: Result<String, GuestError>,
        /// What it used.
        stats: RunStats,
    },
    /// Test builds only: the outcome of a [`HostFrame::Probe`].
    #[cfg(any(test, feature = "test-probes"))]
    ProbeResult {
        /// What the attempt returned.
        outcome: Result<String, String>,
    },
}

/// An error raised in the guest, as the worker saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestError {
    /// The worker's classification when it knows better than the message
    /// (`timeout`, `memory`, `stack`, `output_limit`, `internal`), else `None`.
    pub kind: Option<String>,
    /// The error's `name` (e.g. `TypeError`, `ToolError`).
    pub name: String,
    /// The error's message.
    pub message: String,
    /// The QuickJS stack, positions in the wrapped script.
    pub stack: String,
}

/// Resource use of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStats {
    /// QuickJS heap in use at the end, in bytes.
    pub memory_bytes: u64,
    /// Calls made.
    pub calls: u32,
}

/// Writes one frame. Buffered writers are not flushed: the caller decides when frames go out.
pub fn write_frame<W: Write, T: Serialize>(writer: &mut W, frame: &T) -> io::Result<()> {
    let body = serde_json::to_vec(frame).map_err(io::Error::other)?;
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("frame too large"))?;
    writer.write_all(&len.to_le_bytes())?;
    writer.write_all(&body)
}

/// Reads one frame, or `None` at a clean end of stream.
pub fn read_frame<R: Read, T: for<'de> Deserialize<'de>>(reader: &mut R) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match reader.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(io::Error::other(format!(
            "frame of {len} bytes exceeds the {MAX_FRAME_BYTES}-byte limit"
        )));
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body)?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(io::Error::other)
}

/// Encodes one frame into a buffer (length prefix included), for async writers.
pub fn encode_frame<T: Serialize>(frame: &T) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    write_frame(&mut out, frame)?;
    Ok(out)
}
