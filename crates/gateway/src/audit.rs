//! The audit log: one JSON line per policy decision (`[audit] path`), off by default.
//!
//! A line holds the time, profile, token id (never the token), execution id, what was asked
//! (tool, host or path), the decision and the rule that made it. Argument values appear only
//! with `[audit] arguments = true`. Writing never blocks a call: lines go through a bounded
//! queue to a writer thread, and when the queue is full a line is counted as dropped instead
//! (the count is written as its own line once the writer catches up).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};

use serde_json::{Value, json};

use crate::error::GatewayError;

/// Lines queued for the writer at most.
const QUEUE_LINES: usize = 8192;

/// What a decision was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// A backend tool call (`backend.tool`).
    Tool,
    /// A host-side `fetch` (`host:port`, and the address).
    Net,
    /// A host-side file access (the path).
    Fs,
    /// An `env.get` (the name).
    Env,
    /// Script state (`state.*`), when refused.
    State,
    /// An HTTP request's token check.
    Http,
    /// Reading a stored output.
    Output,
    /// A person's approval of a call: asked, and how it was answered.
    Approval,
    /// A tool definition held by the supply-chain guard, and a person's decision on it.
    Pin,
}

impl Subject {
    fn as_str(self) -> &'static str {
        match self {
            Subject::Tool => "tool",
            Subject::Net => "net",
            Subject::Fs => "fs",
            Subject::Env => "env",
            Subject::State => "state",
            Subject::Http => "http",
            Subject::Output => "output",
            Subject::Approval => "approval",
            Subject::Pin => "pin",
        }
    }
}

/// One decision.
#[derive(Debug, Clone)]
pub struct Decision<'a> {
    /// The caller's profile (`None` for an HTTP request no token matched).
    pub profile: Option<&'a str>,
    /// The token's id.
    pub token_id: Option<&'a str>,
    /// The execution, if any.
    pub execution_id: Option<&'a str>,
    /// What kind of thing was asked for.
    pub subject: Subject,
    /// What was asked for: `memory.read_graph`, `api.github.com:443`, a path, a name.
    pub target: &'a str,
    /// Allowed or denied.
    pub allowed: bool,
    /// The rule that decided.
    pub rule: &'a str,
    /// The call's arguments (written only with `arguments = true`).
    pub arguments: Option<&'a str>,
    /// Not decided yet: a person was asked (`decision: "ask"`).
    pub asked: bool,
}

/// The audit log's sender; cheap to share. A disabled log ignores every decision.
#[derive(Debug, Clone, Default)]
pub struct AuditLog {
    inner: Option<Arc<Inner>>,
}

#[derive(Debug)]
struct Inner {
    lines: SyncSender<String>,
    arguments: bool,
    dropped: AtomicU64,
    path: PathBuf,
    /// Lines handed to the writer, and lines it has written (with a signal for `flush`).
    sent: AtomicU64,
    written: (std::sync::Mutex<u64>, std::sync::Condvar),
}

impl AuditLog {
    /// A log that writes nothing.
    pub fn disabled() -> AuditLog {
        AuditLog { inner: None }
    }

    /// Appends to `path` (created 0600 if absent), with argument values if `arguments`.
    pub fn open(path: &Path, arguments: bool) -> Result<AuditLog, GatewayError> {
        let file = open_append(path).map_err(|cause| GatewayError::Audit {
            path: path.to_path_buf(),
            cause,
        })?;
        let (lines, queue) = sync_channel::<String>(QUEUE_LINES);
        let inner = Arc::new(Inner {
            lines,
            arguments,
            dropped: AtomicU64::new(0),
            path: path.to_path_buf(),
            sent: AtomicU64::new(0),
            written: Default::default(),
        });
        let shared = Arc::downgrade(&inner);
        std::thread::Builder::new()
            .name("sandgate-audit".into())
            .spawn(move || {
                let mut out = std::io::BufWriter::new(file);
                // A line may carry another party's words (an issuer's refusal, a backend's
                // error): each passes the one redaction step here, off the caller's path.
                while let Ok(line) = queue.recv() {
                    let _ = writeln!(out, "{}", sandgate_redact::redact(&line));
                    let mut lines = 1;
                    // Write what else is queued, then flush once.
                    while let Ok(line) = queue.try_recv() {
                        let _ = writeln!(out, "{}", sandgate_redact::redact(&line));
                        lines += 1;
                    }
                    if let Some(inner) = shared.upgrade() {
                        let dropped = inner.dropped.swap(0, Ordering::Relaxed);
                        if dropped > 0 {
                            let note = json!({"time": now_rfc3339(), "dropped": dropped});
                            let _ = writeln!(out, "{note}");
                        }
                    }
                    let _ = out.flush();
                    if let Some(inner) = shared.upgrade() {
                        let (count, signal) = &inner.written;
                        *count
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) += lines;
                        signal.notify_all();
                    }
                }
            })
            .map_err(|cause| GatewayError::Audit {
                path: path.to_path_buf(),
                cause,
            })?;
        Ok(AuditLog { inner: Some(inner) })
    }

    /// Whether decisions are written.
    pub fn enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// The file, when enabled.
    pub fn path(&self) -> Option<&Path> {
        self.inner.as_ref().map(|i| i.path.as_path())
    }

    /// Waits (at most two seconds) until every line recorded so far is written: for a command
    /// that records a decision and then exits.
    pub fn flush(&self) {
        let Some(inner) = &self.inner else {
            return;
        };
        let sent = inner.sent.load(Ordering::SeqCst);
        let (count, signal) = &inner.written;
        let written = count
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ =
            signal.wait_timeout_while(written, std::time::Duration::from_secs(2), |w| *w < sent);
    }

    /// Records one decision, without waiting.
    pub fn record(&self, decision: &Decision<'_>) {
        let Some(inner) = &self.inner else {
            return;
        };
        let mut line = json!({
            "time": now_rfc3339(),
            "profile": decision.profile,
            "token": decision.token_id,
            "execution_id": decision.execution_id,
            "kind": decision.subject.as_str(),
            "target": decision.target,
            "decision": match (decision.asked, decision.allowed) {
                (true, _) => "ask",
                (false, true) => "allow",
                (false, false) => "deny",
            },
            "rule": decision.rule,
        });
        if inner.arguments
            && let (Some(arguments), Value::Object(map)) = (decision.arguments, &mut line)
        {
            map.insert("arguments".into(), Value::String(arguments.to_string()));
        }
        match inner.lines.try_send(line.to_string()) {
            Ok(()) => {
                inner.sent.fetch_add(1, Ordering::SeqCst);
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                inner.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// UTC time now as RFC 3339 with milliseconds.
fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(u64::try_from(now.as_millis()).unwrap_or(u64::MAX))
}

/// `ms` since the epoch as RFC 3339 UTC with milliseconds, without a date crate.
pub(crate) fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        ms % 1000
    )
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_781), (2026, 11, 24));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn a_writer_that_cannot_keep_up_never_holds_a_decision_up() {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let fifo = dir.path().join("audit.fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        // A reader that never reads: the pipe fills after 64 KiB and the writer thread blocks.
        const O_NONBLOCK: i32 = 0o4000;
        let _reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(O_NONBLOCK)
            .open(&fifo)
            .expect("reader");
        let log = AuditLog::open(&fifo, false).expect("opens");
        let decision = Decision {
            profile: Some("reader"),
            token_id: Some("ci"),
            execution_id: Some("ex-1"),
            subject: Subject::Tool,
            target: "memory.read_graph",
            allowed: true,
            rule: "profiles.reader.tools: memory.read_*",
            arguments: None,
            asked: false,
        };
        // Far more than the pipe and the queue hold: every call returns (a blocking one would
        // hang this test), and what did not fit is counted as dropped.
        for _ in 0..(QUEUE_LINES * 4) {
            log.record(&decision);
        }
        let dropped = log
            .inner
            .as_ref()
            .map_or(0, |i| i.dropped.load(Ordering::Relaxed));
        assert!(dropped > 0, "nothing was dropped, so something waited");
    }

    #[test]
    fn lines_name_the_decision_and_never_the_arguments_unless_asked() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.jsonl");
        let lines_written = |path: &Path, at_least: usize| {
            for _ in 0..500 {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                if text.lines().count() >= at_least {
                    return text;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            String::new()
        };
        for (i, arguments) in [false, true].into_iter().enumerate() {
            let log = AuditLog::open(&path, arguments).expect("opens");
            log.record(&Decision {
                profile: Some("reader"),
                token_id: Some("ci"),
                execution_id: Some("ex-1"),
                subject: Subject::Tool,
                target: "memory.create_entities",
                allowed: false,
                rule: "it matches none of profiles.reader.tools (memory.read_*)",
                arguments: Some("{\"secret\":\"s3cret\"}"),
                asked: false,
            });
            // Each log's own thread writes its line; wait for it, so the lines keep their order.
            lines_written(&path, i + 1);
            drop(log);
        }
        let text = lines_written(&path, 2);
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["decision"], "deny");
        assert_eq!(lines[0]["token"], "ci");
        assert_eq!(lines[0]["target"], "memory.create_entities");
        assert!(lines[0].get("arguments").is_none(), "{text}");
        assert_eq!(lines[1]["arguments"], "{\"secret\":\"s3cret\"}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
