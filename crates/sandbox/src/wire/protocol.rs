//! The frames between the host and a worker process: 4-byte little-endian length, then JSON
//! (externally tagged enums: `{"Log": {...}}`, which both sides decode without buffering),
//! except calls and replies, whose JSON payload travels as raw bytes (see [`Frame`]).
//!
//! The worker's stdin and stdout are its only channel. Frames are small and self-describing,
//! so a crash of either side is visible as a short read, and a frame is never trusted beyond
//! its declared length (capped at [`MAX_FRAME_BYTES`]).

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

pub use crate::wire::fault::{Fault, Nullish};
use serde_json::Value;

use crate::wire::limits::Limits;

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
// `Run` is the large one, sent once per execution and dropped once read; boxing it would add
// an allocation to every run for a saving no frame queue needs.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum HostFrame {
    /// Start one execution. A worker holds many at once; every frame about one names its run.
    Run {
        /// The execution's number on this worker, chosen by the host.
        run: u64,
        /// The wrapped JavaScript (see `transpile`).
        js: String,
        /// Tools the guest may call; calls name them by index. `None`: the same tools as this
        /// worker's previous run (the host sends a set only when it changes, since a gateway's
        /// set can hold hundreds of tools with their declarations).
        tools: Option<Vec<ToolBinding>>,
        /// Names of host functions exposed as globals.
        host_functions: Vec<String>,
        /// Granted environment variables' values (`process.env`, `env.NAME`).
        #[serde(default)]
        env: Vec<(String, Option<String>)>,
        /// The optional `context` global.
        context: Option<Value>,
        /// Limits for this run.
        limits: Limits,
        /// How long the worker may poll for a call's reply before it sleeps (0: sleep at once).
        #[serde(default)]
        reply_spin_micros: u32,
        /// Script or stored tool.
        #[serde(default)]
        mode: RunMode,
    },
    /// The answer to a [`WorkerFrame::Call`].
    Reply {
        /// The run that made the call.
        run: u64,
        /// The call's id.
        id: u64,
        /// JSON text of the result (a raw MCP result for tools), or the failure.
        result: Result<String, CallFailure>,
    },
    /// Stop a run: it ends with a `cancelled` error at once if it is waiting, or at its next
    /// interrupt check if it is computing (see `control`).
    Cancel {
        /// The run to stop.
        run: u64,
    },
    /// Test builds only: ask the locked-down worker to try something forbidden.
    #[cfg(any(test, feature = "test-probes"))]
    Probe {
        /// `open`, `socket`, `exec` or `env`.
        what: String,
    },
}

/// How a run's code is shaped and bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum RunMode {
    /// A script: backends are globals, capabilities too.
    #[default]
    Script,
    /// A stored tool's module: no backend or capability globals; its declared tools and
    /// capabilities are in the object `__ctx` its default export is called with.
    Tool,
}

/// Why a call produced no result: one typed answer from the door to the guest and back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallFailure {
    /// What kind of failure.
    pub kind: FailureKind,
    /// Message for the guest (becomes the rejected Error's message).
    pub message: String,
    /// What the backend was, when the call failed because of it (the hint follows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<BackendCondition>,
}

/// What a backend was when a call failed because of it: carried as data from the gateway, so
/// the hint never reads the backend's English.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendCondition {
    /// On its first connection attempt.
    Starting,
    /// Down, with another attempt scheduled.
    Restarting,
    /// Down with no attempt scheduled (failed, disabled, shutting down).
    Unavailable,
    /// No backend by that name, or no such tool on it.
    Unknown,
}

impl CallFailure {
    /// `self`, failed because its backend was `condition`.
    pub fn because(mut self, condition: BackendCondition) -> Self {
        self.condition = Some(condition);
        self
    }

    /// A failure of `kind`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        CallFailure {
            kind,
            condition: None,
            message: message.into(),
        }
    }
}

/// The kinds of call failure. The guest's Error carries the kind's name as `kind`, and the
/// host classifies a guest error by it, never by the Error's `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FailureKind {
    /// The policy refused the call.
    #[serde(rename = "tool_denied")]
    Denied,
    /// The call went out and failed (backend down, bad arguments, result too large, ...).
    #[serde(rename = "tool_failed")]
    Failed,
    /// The call ran out of time.
    #[serde(rename = "timeout")]
    Timeout,
    /// The call was cancelled (by its AbortSignal).
    #[serde(rename = "cancelled")]
    Cancelled,
    /// The call's arguments would pass the execution's memory limit.
    #[serde(rename = "memory")]
    Memory,
    /// A fault in the host.
    #[serde(rename = "internal")]
    Internal,
    /// The call needs a person's approval, and it was not given (no, a timeout, or nobody
    /// could be asked): the guest's `ApprovalDenied`.
    #[serde(rename = "approval_denied")]
    ApprovalDenied,
    /// The tool is held by the supply-chain guard until a person reviews its definition.
    #[serde(rename = "tool_held")]
    Held,
    /// The backend takes each user's own sign-in, and this user did not sign in (in time, or
    /// could not be asked to).
    #[serde(rename = "sign_in_required")]
    SignInRequired,
}

impl FailureKind {
    /// Every kind.
    pub const ALL: [FailureKind; 9] = [
        FailureKind::Denied,
        FailureKind::Failed,
        FailureKind::Timeout,
        FailureKind::Cancelled,
        FailureKind::Memory,
        FailureKind::Internal,
        FailureKind::ApprovalDenied,
        FailureKind::Held,
        FailureKind::SignInRequired,
    ];

    /// The kind's name, as the guest's Error carries it in `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Denied => "tool_denied",
            FailureKind::Failed => "tool_failed",
            FailureKind::Timeout => "timeout",
            FailureKind::Cancelled => "cancelled",
            FailureKind::Memory => "memory",
            FailureKind::Internal => "internal",
            FailureKind::ApprovalDenied => "approval_denied",
            FailureKind::Held => "tool_held",
            FailureKind::SignInRequired => "sign_in_required",
        }
    }

    /// The kind of failure an execution ends in when a call failed this way, uncaught.
    pub fn error_kind(self) -> ErrorKind {
        match self {
            FailureKind::Denied | FailureKind::ApprovalDenied => ErrorKind::ToolDenied,
            FailureKind::Failed => ErrorKind::ToolFailed,
            FailureKind::Timeout => ErrorKind::Timeout,
            FailureKind::Cancelled => ErrorKind::Cancelled,
            FailureKind::Memory => ErrorKind::Memory,
            FailureKind::Internal => ErrorKind::Internal,
            FailureKind::Held => ErrorKind::ToolHeld,
            FailureKind::SignInRequired => ErrorKind::SignInRequired,
        }
    }

    /// The kind named `name` (the inverse of [`FailureKind::as_str`]).
    pub fn named(name: &str) -> Option<FailureKind> {
        FailureKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The `name` of the Error a failed call rejects with in the guest.
    pub fn error_name(self) -> &'static str {
        match self {
            FailureKind::Denied => "ToolDeniedError",
            FailureKind::Timeout => "ToolTimeoutError",
            FailureKind::ApprovalDenied => "ApprovalDenied",
            FailureKind::Held => "ToolHeldError",
            _ => "ToolCallError",
        }
    }
}

/// What a tool call answered: the raw MCP result as JSON text, and whether it is an error
/// result (`isError`). The bridge decides `is_error` once, from the typed result, and every
/// record and count uses that one answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAnswer {
    /// The raw MCP result, as JSON text.
    pub json: String,
    /// Whether the tool answered with `isError: true`.
    pub is_error: bool,
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
        /// uses one (else it builds a runtime per execution). See `engine::snapshot::Snapshot`.
        #[serde(default)]
        template_bytes: Option<u64>,
        /// Whether every run gets a runtime no run used before, whatever the last one did (a
        /// V8 isolate per run): then a run that was stopped or failed leaves nothing behind.
        #[serde(default)]
        fresh_per_run: bool,
    },
    /// The guest called a tool or host function.
    Call {
        /// The run that calls.
        run: u64,
        /// Call id, unique within the worker.
        id: u64,
        /// What is called.
        callee: Callee,
        /// JSON text of the arguments.
        args: String,
        /// Where in the wrapped script the call was made (line, column), when the run asks for
        /// it (`Limits::report_call_sites`).
        #[serde(default)]
        site: Option<(u32, u32)>,
    },
    /// The guest aborted a call it made (its `AbortSignal`): drop it, and cancel it upstream.
    CancelCall {
        /// The run that made the call.
        run: u64,
        /// The call's id.
        id: u64,
    },
    /// A console line.
    Log {
        /// The run that wrote it.
        run: u64,
        /// `log`, `info`, `warn`, `error` or `debug`.
        level: String,
        /// The formatted line.
        message: String,
    },
    /// The run finished.
    Done {
        /// The run.
        run: u64,
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

/// The kinds of failure an execution can end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The code does not parse, or uses `import`/exports the sandbox does not support.
    Syntax,
    /// An exception thrown by the code.
    Runtime,
    /// The wall-time limit.
    Timeout,
    /// The memory limit.
    Memory,
    /// The stack limit (runaway recursion).
    Stack,
    /// A call the policy refused.
    ToolDenied,
    /// A tool call that failed (error result, backend down, timeout) and was not caught.
    ToolFailed,
    /// A call to a tool the supply-chain guard holds until a person reviews its definition.
    ToolHeld,
    /// The result is larger than the output limit.
    OutputLimit,
    /// No worker is free and the queue is full.
    Busy,
    /// A fault of sandgate itself (a worker died, a broken pipe).
    Internal,
    /// The caller cancelled the execution (or the gateway is shutting down); it was stopped
    /// where it stood.
    Cancelled,
    /// The code names a backend that is not ready (still starting, restarting, failed or
    /// disabled), so its tools are absent; the message says when it is tried again.
    Unavailable,
    /// The script needed a person's approval before it ran (`approve_scripts`), and got a
    /// no, or no answer in time: none of it ran.
    ApprovalDenied,
    /// A call to a backend that takes each user's own sign-in, by a user who did not sign in.
    SignInRequired,
}

impl ErrorKind {
    /// The kind's name as it appears in JSON (`tool_failed`, `output_limit`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Syntax => "syntax",
            ErrorKind::Runtime => "runtime",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Memory => "memory",
            ErrorKind::Stack => "stack",
            ErrorKind::ToolDenied => "tool_denied",
            ErrorKind::ToolFailed => "tool_failed",
            ErrorKind::ToolHeld => "tool_held",
            ErrorKind::OutputLimit => "output_limit",
            ErrorKind::Busy => "busy",
            ErrorKind::Internal => "internal",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::ApprovalDenied => "approval_denied",
            ErrorKind::SignInRequired => "sign_in_required",
        }
    }
}

/// An error raised in the guest, as the worker saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestError {
    /// The worker's classification when it knows better than the message (a timeout, the
    /// memory or stack limit, the output limit, a failed call's kind, an internal fault),
    /// else `None`.
    pub kind: Option<ErrorKind>,
    /// The error's `name` (e.g. `TypeError`, `ToolError`).
    pub name: String,
    /// The error's message.
    pub message: String,
    /// The engine's stack, positions in the wrapped script.
    pub stack: String,
    /// What the code reached for and could not use, as the engine that raised the error
    /// classified it (see [`Fault`]); `None` for every other error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<Fault>,
    /// Where in the user's own code it was raised (line, column, from 1), when the engine
    /// knows it without a position map (Python: Monty's traceback is in the user's lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<(u32, u32)>,
}

/// Resource use of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStats {
    /// QuickJS heap in use at the end, in bytes.
    pub memory_bytes: u64,
    /// Calls made.
    pub calls: u32,
}

/// How a frame becomes a frame body and back. Bodies are JSON, except the two frames that carry
/// JSON text from a tool or from the guest (a call's arguments, a call's result): those carry
/// it as raw bytes after a small binary header, so it is never escaped into a JSON string and
/// unescaped again on the other side (two extra passes over every argument and result, each
/// growing with every quote in it). A binary body starts with a byte no JSON text starts with.
pub trait Frame: Sized {
    /// Appends the body.
    fn encode_body(&self, out: &mut Vec<u8>) -> io::Result<()>;
    /// Reads a body.
    fn decode_body(body: &[u8]) -> Result<Self, String>;
}

const RAW_REPLY: u8 = b'R';
const RAW_CALL: u8 = b'C';

impl Frame for HostFrame {
    fn encode_body(&self, out: &mut Vec<u8>) -> io::Result<()> {
        match self {
            HostFrame::Reply { run, id, result } => {
                out.push(RAW_REPLY);
                out.extend_from_slice(&run.to_le_bytes());
                out.extend_from_slice(&id.to_le_bytes());
                match result {
                    Ok(json) => {
                        out.push(0);
                        out.extend_from_slice(json.as_bytes());
                    }
                    Err(failure) => {
                        out.push(1);
                        serde_json::to_writer(&mut *out, failure).map_err(io::Error::other)?;
                    }
                }
                Ok(())
            }
            other => serde_json::to_writer(out, other).map_err(io::Error::other),
        }
    }

    fn decode_body(body: &[u8]) -> Result<Self, String> {
        match body.split_first() {
            Some((&RAW_REPLY, rest)) => {
                let (run, rest) = split_u64(rest)?;
                let (id, rest) = split_u64(rest)?;
                let result = match rest.split_first() {
                    Some((0, json)) => Ok(utf8(json)?),
                    Some((1, failure)) => Err(serde_json::from_slice(failure)
                        .map_err(|e| format!("malformed call failure: {e}"))?),
                    _ => return Err("malformed reply frame".into()),
                };
                Ok(HostFrame::Reply { run, id, result })
            }
            _ => serde_json::from_slice(body).map_err(|e| e.to_string()),
        }
    }
}

impl Frame for WorkerFrame {
    fn encode_body(&self, out: &mut Vec<u8>) -> io::Result<()> {
        match self {
            WorkerFrame::Call {
                run,
                id,
                callee,
                args,
                site,
            } => {
                out.push(RAW_CALL);
                out.extend_from_slice(&run.to_le_bytes());
                out.extend_from_slice(&id.to_le_bytes());
                let (kind, index) = match callee {
                    Callee::Tool(i) => (0u8, i),
                    Callee::Host(i) => (1u8, i),
                };
                out.push(kind);
                out.extend_from_slice(&index.to_le_bytes());
                // Line 0 is no site: positions are 1-based.
                let (line, column) = site.unwrap_or((0, 0));
                out.extend_from_slice(&line.to_le_bytes());
                out.extend_from_slice(&column.to_le_bytes());
                out.extend_from_slice(args.as_bytes());
                Ok(())
            }
            other => serde_json::to_writer(out, other).map_err(io::Error::other),
        }
    }

    fn decode_body(body: &[u8]) -> Result<Self, String> {
        match body.split_first() {
            Some((&RAW_CALL, rest)) => {
                let (run, rest) = split_u64(rest)?;
                let (id, rest) = split_u64(rest)?;
                let (kind, rest) = rest.split_first().ok_or("malformed call frame")?;
                let (index, rest) = rest.split_at_checked(4).ok_or("malformed call frame")?;
                let index = u32::from_le_bytes(index.try_into().map_err(|_| "malformed call")?);
                let (line, rest) = rest.split_at_checked(4).ok_or("malformed call frame")?;
                let (column, args) = rest.split_at_checked(4).ok_or("malformed call frame")?;
                let line = u32::from_le_bytes(line.try_into().map_err(|_| "malformed call")?);
                let column = u32::from_le_bytes(column.try_into().map_err(|_| "malformed call")?);
                let callee = match kind {
                    0 => Callee::Tool(index),
                    1 => Callee::Host(index),
                    _ => return Err("malformed call frame".into()),
                };
                Ok(WorkerFrame::Call {
                    run,
                    id,
                    callee,
                    args: utf8(args)?,
                    site: (line > 0).then_some((line, column)),
                })
            }
            _ => serde_json::from_slice(body).map_err(|e| e.to_string()),
        }
    }
}

fn split_u64(bytes: &[u8]) -> Result<(u64, &[u8]), String> {
    let (head, rest) = bytes.split_at_checked(8).ok_or("frame cut short")?;
    let value = u64::from_le_bytes(head.try_into().map_err(|_| "frame cut short")?);
    Ok((value, rest))
}

fn utf8(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "a frame carries text that is not UTF-8".into())
}

/// Writes one frame. Buffered writers are not flushed: the caller decides when frames go out.
pub fn write_frame<W: Write, T: Frame>(writer: &mut W, frame: &T) -> io::Result<()> {
    let mut body = Vec::with_capacity(128);
    frame.encode_body(&mut body)?;
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("frame too large"))?;
    writer.write_all(&len.to_le_bytes())?;
    writer.write_all(&body)
}

/// Reads one frame, or `None` at a clean end of stream.
pub fn read_frame<R: Read, T: Frame>(reader: &mut R) -> io::Result<Option<T>> {
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
    T::decode_body(&body).map(Some).map_err(io::Error::other)
}

/// Encodes one frame into a buffer (length prefix included), for async writers.
pub fn encode_frame<T: Frame>(frame: &T) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    write_frame(&mut out, frame)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Frame>(frame: &T) -> T {
        let bytes = encode_frame(frame).expect("encodes");
        read_frame(&mut bytes.as_slice())
            .expect("decodes")
            .expect("a frame")
    }

    #[test]
    fn calls_and_replies_carry_their_json_as_raw_bytes() {
        let args = r#"{"q":"a \"quoted\" line\nwith ünïcode","n":[1,2]}"#;
        let call = WorkerFrame::Call {
            run: 9,
            id: 7,
            callee: Callee::Host(3),
            args: args.into(),
            site: Some((12, 5)),
        };
        let bytes = encode_frame(&call).expect("encodes");
        assert_eq!(bytes[4], b'C');
        assert!(
            bytes.windows(args.len()).any(|w| w == args.as_bytes()),
            "the arguments are not escaped"
        );
        assert!(matches!(
            round_trip(&call),
            WorkerFrame::Call { run: 9, id: 7, callee: Callee::Host(3), args: a, site: Some((12, 5)) } if a == args
        ));
        let unsited = WorkerFrame::Call {
            run: 1,
            id: 2,
            callee: Callee::Tool(0),
            args: "{}".into(),
            site: None,
        };
        assert!(matches!(round_trip(&unsited), WorkerFrame::Call { site: None, .. }));

        let ok = HostFrame::Reply {
            run: 3,
            id: u64::MAX,
            result: Ok(args.into()),
        };
        assert!(matches!(
            round_trip(&ok),
            HostFrame::Reply { run: 3, id: u64::MAX, result: Ok(r) } if r == args
        ));
        let failed = HostFrame::Reply {
            run: 4,
            id: 1,
            result: Err(CallFailure::new(FailureKind::Denied, "no").because(BackendCondition::Restarting)),
        };
        assert!(matches!(
            round_trip(&failed),
            HostFrame::Reply { run: 4, id: 1, result: Err(f) }
                if f.kind == FailureKind::Denied && f.condition == Some(BackendCondition::Restarting)
        ));
        // Other frames stay JSON, so a stand-in worker can speak plain JSON.
        let log = WorkerFrame::Log {
            run: 1,
            level: "log".into(),
            message: "hi".into(),
        };
        assert_eq!(encode_frame(&log).expect("encodes")[4], b'{');
    }

    #[test]
    fn json_calls_still_decode_and_broken_binary_frames_are_errors() {
        let json =
            br#"{"Call": {"run": 2, "id": 1, "callee": {"k": "Tool", "i": 0}, "args": "{}"}}"#;
        assert!(matches!(
            WorkerFrame::decode_body(json),
            Ok(WorkerFrame::Call {
                id: 1,
                callee: Callee::Tool(0),
                ..
            })
        ));
        for broken in [
            &b"C"[..],
            b"C\x01\x00",
            b"C\x02\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x00\x00{}",
        ] {
            assert!(WorkerFrame::decode_body(broken).is_err(), "{broken:?}");
        }
        let run = b"\x02\x00\x00\x00\x00\x00\x00\x00";
        for tail in [&b"\x00\xff"[..], b"\x07"] {
            let body = [&b"R"[..], run, b"\x01\x00\x00\x00\x00\x00\x00\x00", tail].concat();
            assert!(HostFrame::decode_body(&body).is_err(), "{body:?}");
        }
    }
}
