//! Executions that run on after their first answer: `call_tool_chain` with `yield_after_ms`.
//!
//! Many MCP clients give up on a call after about a minute, and a script that crawls or waits
//! on a slow API runs longer. With `yield_after_ms`, an execution still running then is
//! answered with its id, its status (`running`), the logs and calls so far, and keeps running
//! here, detached from the request: `wait_execution` waits for it again (and again), returns
//! its result when it is done (the very answer the call would have given), or cancels it.
//!
//! Only the caller that started an execution may wait on it or cancel it: its entry is found
//! by the id and the caller's own key for it (the key its stored output has), so another
//! caller's id names nothing. What is shown of a running execution is bounded
//! ([`MAX_LOG_LINES`], [`MAX_LOG_BYTES`], [`MAX_CALLS`]); at most [`MAX_DETACHED`] are held at
//! once; a finished one is kept [`KEEP_FINISHED`] for its waiter, and after that its record and
//! stored output remain.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use sandgate_sandbox::LogLine;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::approvals::Inbox;
use crate::runtime::Cancellation;

/// The most executions held (running, or finished and waiting for their waiter).
pub const MAX_DETACHED: usize = 10_000;
/// How long a finished execution's answer is kept for `wait_execution`.
pub const KEEP_FINISHED: Duration = Duration::from_secs(15 * 60);
/// The most console lines shown of a running execution (its last ones).
pub const MAX_LOG_LINES: usize = 200;
/// The most bytes of console lines shown of a running execution.
pub const MAX_LOG_BYTES: usize = 64 * 1024;
/// The most calls shown of a running execution (its last ones).
pub const MAX_CALLS: usize = 200;

/// One detached execution.
pub struct Detached {
    id: String,
    /// The caller's key for it: only the same caller finds it.
    owner: String,
    started: Instant,
    started_at_ms: u64,
    finished_at_ms: std::sync::atomic::AtomicU64,
    cancel: CancellationToken,
    /// Set when its owner stopped it (`wait_execution` with `cancel`, `tasks/cancel`).
    stopped: std::sync::atomic::AtomicBool,
    live: Mutex<Live>,
    done: watch::Sender<Option<Arc<CallToolResult>>>,
    /// What it asks a person, for whoever waits on it.
    inbox: Arc<Inbox>,
}

/// What a running execution has done so far.
#[derive(Default)]
struct Live {
    logs: std::collections::VecDeque<LogLine>,
    log_bytes: usize,
    logs_dropped: usize,
    calls: std::collections::VecDeque<Value>,
    calls_total: usize,
    finished_at: Option<Instant>,
}

impl std::fmt::Debug for Detached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detached")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Detached {
    /// How the execution is cancelled: by `wait_execution`, never by a client going away.
    pub fn cancellation(&self) -> Cancellation {
        Cancellation::new(self.cancel.clone())
    }

    /// Stops the execution where it stands.
    pub fn cancel(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.cancel.cancel();
    }

    /// Whether its owner stopped it.
    pub fn was_stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// When it started, as ms since the epoch.
    pub fn started_at_ms(&self) -> u64 {
        self.started_at_ms
    }

    /// When it finished (ms since the epoch), if it has.
    pub fn finished_at_ms(&self) -> Option<u64> {
        match self
            .finished_at_ms
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            0 => None,
            at => Some(at),
        }
    }

    /// What it has done so far, in one line: time, calls, and its last console line.
    pub fn summary(&self) -> String {
        let live = self.lock();
        let last = live
            .logs
            .back()
            .map(|l| format!("; last log: {}", crate::approvals::bounded(&l.message, 200)))
            .unwrap_or_default();
        format!(
            "running {:.1} s: {} call{} finished{last}",
            self.started.elapsed().as_secs_f64(),
            live.calls_total,
            if live.calls_total == 1 { "" } else { "s" }
        )
    }

    /// When it finished, if it has.
    pub fn finished(&self) -> Option<Arc<CallToolResult>> {
        self.done.borrow().clone()
    }

    /// The questions its calls wait on: whoever waits on it passes them on.
    pub fn inbox(&self) -> &Arc<Inbox> {
        &self.inbox
    }

    /// Waits at most `within` for it to finish or to ask a person something, whichever is
    /// first: its answer, or `None` (see [`Detached::questions`] for what it asks).
    pub async fn wait_or_question(&self, within: Duration) -> Option<Arc<CallToolResult>> {
        let mut asking = self.inbox.subscribe();
        if !self.inbox.questions().is_empty() {
            return self.finished();
        }
        tokio::select! {
            answer = self.wait(within) => answer,
            _ = asking.changed() => self.finished(),
        }
    }

    /// Notes a console line as the code writes it.
    pub fn logged(&self, line: &LogLine) {
        let mut live = self.lock();
        live.log_bytes += line.message.len();
        live.logs.push_back(line.clone());
        while live.logs.len() > MAX_LOG_LINES || live.log_bytes > MAX_LOG_BYTES {
            match live.logs.pop_front() {
                Some(old) => {
                    live.log_bytes -= old.message.len();
                    live.logs_dropped += 1;
                }
                None => break,
            }
        }
    }

    /// Notes a finished call.
    pub fn call_finished(&self, tool: &str, ok: bool, millis: f64) {
        let mut live = self.lock();
        live.calls_total += 1;
        live.calls.push_back(
            json!({"tool": tool, "ok": ok, "duration_ms": (millis * 10.0).round() / 10.0}),
        );
        if live.calls.len() > MAX_CALLS {
            live.calls.pop_front();
        }
    }

    /// The execution's answer: it is done.
    pub fn finish(&self, answer: CallToolResult) {
        self.finished_at_ms.store(
            u64::try_from(sandgate_store::now_ms()).unwrap_or(0),
            std::sync::atomic::Ordering::Relaxed,
        );
        self.lock().finished_at = Some(Instant::now());
        self.done.send_replace(Some(Arc::new(answer)));
    }

    /// Its answer, once it is done, waiting at most `within`.
    pub async fn wait(&self, within: Duration) -> Option<Arc<CallToolResult>> {
        let mut done = self.done.subscribe();
        let waited = tokio::time::timeout(within, done.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(answer)) => answer.clone(),
            _ => self.done.borrow().clone(),
        }
    }

    /// The answer for a client while it still runs: its id, `running`, and what it did so far.
    pub fn running_answer(&self) -> CallToolResult {
        let live = self.lock();
        let elapsed_ms = self.started.elapsed().as_millis() as u64;
        let logs: Vec<Value> = live
            .logs
            .iter()
            .map(|l| json!({"level": l.level, "message": l.message}))
            .collect();
        let calls: Vec<Value> = live.calls.iter().cloned().collect();
        let text = format!(
            "Still running after {:.1} s (execution {}): {} call{} finished so far{}. Call wait_execution({{\"execution_id\": \"{}\"}}) to wait for its result (again, if it is still running then), or wait_execution({{\"execution_id\": \"{}\", \"cancel\": true}}) to stop it.",
            elapsed_ms as f64 / 1000.0,
            self.id,
            live.calls_total,
            if live.calls_total == 1 { "" } else { "s" },
            if logs.is_empty() {
                String::new()
            } else {
                format!(
                    ", {} log line{} (below)",
                    logs.len(),
                    if logs.len() == 1 { "" } else { "s" }
                )
            },
            self.id,
            self.id
        );
        let mut shown = text;
        for line in &live.logs {
            shown.push_str(&format!("\n[{}] {}", line.level, line.message));
        }
        let mut result = CallToolResult::success(vec![rmcp::model::ContentBlock::text(shown)]);
        result.structured_content = Some(json!({
            "execution_id": self.id,
            "status": "running",
            "elapsed_ms": elapsed_ms,
            "logs": logs,
            "logs_dropped": live.logs_dropped,
            "calls": calls,
            "calls_finished": live.calls_total,
        }));
        result
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every detached execution, by id.
#[derive(Debug, Default)]
pub struct DetachedExecutions {
    held: Mutex<HashMap<String, Arc<Detached>>>,
}

impl DetachedExecutions {
    /// Holds execution `id` of the caller whose key for it is `owner`; refused when
    /// [`MAX_DETACHED`] are held.
    pub fn begin(&self, id: &str, owner: String) -> Result<Arc<Detached>, String> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.len() >= MAX_DETACHED {
            held.retain(|_, d| {
                d.lock()
                    .finished_at
                    .is_none_or(|at| at.elapsed() < KEEP_FINISHED)
            });
        }
        if held.len() >= MAX_DETACHED {
            return Err(format!(
                "this gateway already holds {MAX_DETACHED} executions that run on after their answer; wait for some with wait_execution, or run without yield_after_ms"
            ));
        }
        let detached = Arc::new(Detached {
            id: id.to_string(),
            owner,
            started: Instant::now(),
            started_at_ms: u64::try_from(sandgate_store::now_ms()).unwrap_or(0),
            finished_at_ms: std::sync::atomic::AtomicU64::new(0),
            cancel: CancellationToken::new(),
            stopped: std::sync::atomic::AtomicBool::new(false),
            live: Mutex::default(),
            done: watch::Sender::new(None),
            inbox: Arc::default(),
        });
        held.insert(id.to_string(), detached.clone());
        Ok(detached)
    }

    /// Those held whose id and owner key `mine` accepts, oldest first.
    pub fn held_by(&self, mine: impl Fn(&str, &str) -> bool) -> Vec<Arc<Detached>> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let mut found: Vec<Arc<Detached>> = held
            .values()
            .filter(|d| mine(&d.id, &d.owner))
            .cloned()
            .collect();
        found.sort_by_key(|d| d.started_at_ms);
        found
    }

    /// How many are held now.
    pub fn held(&self) -> usize {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Lets go of execution `id` once its answer has reached the one who waited for it and no
    /// one else will ask (a 2026-07-28 call answered in full): it no longer counts against
    /// [`MAX_DETACHED`].
    pub fn forget(&self, id: &str) {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// Execution `id`, if the caller whose key for it is `owner` started it and it is still
    /// held.
    pub fn find(&self, id: &str, owner: &str) -> Option<Arc<Detached>> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.retain(|_, d| {
            d.lock()
                .finished_at
                .is_none_or(|at| at.elapsed() < KEEP_FINISHED)
        });
        held.get(id).filter(|d| d.owner == owner).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_running_execution_shows_is_bounded_to_its_latest() {
        let held = DetachedExecutions::default();
        let detached = held.begin("ex-1", "owner".into()).expect("held");
        for i in 0..1000 {
            detached.logged(&LogLine {
                level: "log".into(),
                message: format!("line {i} {}", "x".repeat(500)),
            });
            detached.call_finished("fake.slow", i % 2 == 0, 1.0);
        }
        let answer = detached.running_answer();
        let shown = answer.structured_content.expect("structured");
        let logs = shown["logs"].as_array().expect("logs");
        let bytes: usize = logs
            .iter()
            .map(|l| l["message"].as_str().unwrap_or_default().len())
            .sum();
        assert!(
            logs.len() <= MAX_LOG_LINES && bytes <= MAX_LOG_BYTES,
            "{} {bytes}",
            logs.len()
        );
        assert!(
            logs.last()
                .and_then(|l| l["message"].as_str())
                .is_some_and(|m| m.starts_with("line 999 "))
        );
        assert_eq!(shown["logs_dropped"], 1000 - logs.len());
        assert_eq!(shown["calls"].as_array().map(Vec::len), Some(MAX_CALLS));
        assert_eq!(shown["calls_finished"], 1000);
    }

    #[test]
    fn only_its_owner_finds_it_and_no_more_than_the_cap_are_held() {
        let held = DetachedExecutions::default();
        held.begin("ex-mine", "mine".into()).expect("held");
        assert!(held.find("ex-mine", "mine").is_some());
        assert!(held.find("ex-mine", "theirs").is_none());
        assert!(held.find("ex-other", "mine").is_none());
        for i in 1..MAX_DETACHED {
            held.begin(&format!("ex-{i}"), "mine".into()).expect("held");
        }
        let refused = held
            .begin("ex-one-more", "mine".into())
            .expect_err("over the cap");
        assert!(refused.contains("wait_execution"), "{refused}");
    }

    #[tokio::test]
    async fn a_finished_execution_answers_its_waiter_at_once() {
        let held = DetachedExecutions::default();
        let detached = held.begin("ex-1", "o".into()).expect("held");
        assert!(detached.wait(Duration::from_millis(10)).await.is_none());
        detached.finish(CallToolResult::success(vec![
            rmcp::model::ContentBlock::text("done"),
        ]));
        let started = Instant::now();
        assert!(detached.wait(Duration::from_secs(10)).await.is_some());
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
