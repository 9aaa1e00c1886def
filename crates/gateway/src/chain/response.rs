//! What `call_tool_chain` answers: the result (shaped), the logs, the error with its kind,
//! position and hint, what completed before a failure, and a one-line call summary, as text
//! for the model and the same data as `structuredContent` for programs. The format is
//! documented in docs/call_tool_chain.md and snapshot-tested.
//!
//! Shaping never loses data: when it shortens the result (or the logs), the full text goes to
//! the store first, and the response names where to read it.

use rmcp::model::{CallToolResult, ContentBlock};
use sandgate_catalog::{Catalog, ToolRef};
use sandgate_output::{Shaped, shape};
use sandgate_sandbox::{CallRecord, ErrorKind, ExecError};
use sandgate_store::{CallRow, ExecutionRecord};
use serde_json::{Value, json};

use sandgate_output::OutputConfig;
use sandgate_store::{Commit, StoreHandle};

use super::bounds::{self, may_change_state};
use super::outcome::Outcome;
use crate::caller::{Caller, Part};
use crate::door::HostFunction;

/// Facts about the request the response needs.
pub struct Request<'a> {
    /// The execution id.
    pub id: &'a str,
    /// The code, for its hash.
    pub code: &'a str,
    /// The caller's intent.
    pub intent: Option<&'a str>,
    /// Characters of result the response may hold.
    pub max_chars: usize,
    /// Start time, Unix milliseconds.
    pub started_at_ms: i64,
    /// Who may read what the execution stores.
    pub caller: &'a Caller,
    /// The return types learned for tools that declare none, for the notes.
    pub observed:
        &'a (dyn Fn(&sandgate_catalog::Entry) -> Option<sandgate_catalog::Observed> + Sync),
}

impl Request<'_> {
    /// The store key of one part of this execution's output.
    fn key(&self, part: Part) -> String {
        self.caller.key(self.id, part)
    }
}

/// The URI of an execution's stored result.
pub fn output_uri(id: &str) -> String {
    format!("sandgate://executions/{id}/output")
}

/// A value as the model reads it: strings as they are, anything else as indented JSON.
pub fn render_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// Builds the response, stores what shaping removed, and records the execution.
///
/// The result gets `max_chars`; logs, error, calls and the rest fit in
/// [`bounds::RESPONSE_SLACK`]. `structuredContent` repeats the result only when both copies fit
/// in `max_chars`; otherwise its `result` is null and the whole result is stored (the response
/// names where), so no copy of a large result is sent twice. What it stores comes back as
/// [`Commit`]s, to be waited for before the response (which names them) goes out.
pub fn respond(
    outcome: &Outcome,
    request: &Request,
    catalog: &Catalog,
    store: Option<&StoreHandle>,
    output: &OutputConfig,
) -> Response {
    let stored = store.is_some();
    let mut commits = Vec::new();
    let mut recorded = None;
    let full = outcome.value.as_ref().map(render_value);
    let shaped = full
        .as_deref()
        .map(|text| shape(text, request.intent, request.max_chars, output));
    // The value again in `structuredContent`, when both copies fit in the result's budget.
    let repeated = match (&outcome.value, &shaped) {
        (Some(value), Some(shaped)) if !shaped.reduced() => {
            let compact = serde_json::to_string(value).map_or(usize::MAX, |s| s.chars().count());
            (compact.saturating_add(shaped.text.chars().count()) <= request.max_chars)
                .then(|| value.clone())
        }
        _ => None,
    };
    let result_elsewhere = shaped.is_some() && repeated.is_none();
    if let (Some(store), Some(full)) = (store, &full)
        && result_elsewhere
    {
        commits.push(store.save_output(request.key(Part::Output), full.clone()));
    }
    let logs = bounds::shown_logs(&outcome.logs, request.max_chars);
    if logs.cut
        && let Some(store) = store
    {
        commits.push(store.save_output(request.key(Part::Logs), logs.full.clone()));
    }
    let error = outcome
        .error
        .as_ref()
        .map(|e| shown_error(e, request, store, &mut commits));

    let stopped = outcome
        .error
        .as_ref()
        .filter(|e| !outcome.calls.is_empty() || was_stopped(e))
        .map(|e| stopped_at(e, &outcome.calls, catalog));
    let notes = notes(outcome, request.code, catalog, request.observed);
    let text = Shown {
        shaped: shaped.as_ref(),
        logs: &logs,
        error: error.as_ref(),
        stopped: stopped.as_deref(),
        notes: &notes,
    }
    .text(outcome, request.id, stored);

    let returned_bytes = shaped.as_ref().map_or(0, |s| s.text.len());
    let output = shaped
        .as_ref()
        .map(|s| output_json(s, request.id, stored && result_elsewhere));
    let (listed, calls_left_out) = bounds::listed_calls(&outcome.calls);
    let calls: Vec<Value> = listed.iter().map(|c| call_json(c, catalog)).collect();
    let structured = json!({
        "execution_id": request.id,
        "tier": outcome.tier.as_str(),
        "status": status(outcome),
        "result": repeated,
        "shaped": shaped.as_ref().is_some_and(Shaped::reduced),
        "logs": logs.lines,
        "logs_total": outcome.logs.len(),
        "logs_truncated": logs.cut,
        "calls": calls,
        "calls_total": outcome.calls.len(),
        "calls_left_out": calls_left_out,
        "error": error.as_ref().map(|(e, _)| e),
        "stopped": stopped,
        "notes": notes,
        "duration_ms": round(outcome.duration_ms),
        "output": output,
    });
    if let Some(store) = store {
        let mut record = record(outcome, request, catalog, full.as_deref(), returned_bytes);
        record.shown = Some(text.clone());
        if store.records_before_response() {
            recorded = Some(store.record_waited(record));
        } else {
            store.record(record);
        }
    }
    let mut result = if outcome.error.is_none() {
        CallToolResult::success(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(text)])
    };
    result.structured_content = Some(structured);
    Response {
        result,
        commits,
        recorded,
    }
}

/// What a response shows, each part already within its bounds.
struct Shown<'a> {
    shaped: Option<&'a Shaped>,
    logs: &'a bounds::ShownLogs,
    error: Option<&'a (ExecError, bool)>,
    stopped: Option<&'a str>,
    notes: &'a [String],
}

impl Shown<'_> {
    /// The response's text: the result as shown, the logs, the error with where the
    /// execution stopped, the notes, and the summary line; each cut part says where the rest
    /// is.
    fn text(&self, outcome: &Outcome, id: &str, stored: bool) -> String {
        let mut text = String::new();
        if let Some(shaped) = self.shaped {
            text.push_str(&shaped.text);
            if shaped.reduced() {
                text.push('\n');
                text.push_str(&where_the_rest_is(id, stored, Part::Output));
            }
        }
        if !outcome.logs.is_empty() {
            text.push_str(&format!("\n\n--- logs ({}) ---\n", outcome.logs.len()));
            text.push_str(&self.logs.text);
            if self.logs.cut {
                text.push('\n');
                text.push_str(&where_the_rest_is(id, stored, Part::Logs));
            }
        }
        if let Some((shown, cut)) = self.error {
            text.push_str("\n\n--- error ---\n");
            text.push_str(&error_text(shown));
            if *cut {
                text.push('\n');
                text.push_str(&where_the_rest_is(id, stored, Part::Error));
            }
            if let Some(stopped) = self.stopped {
                text.push('\n');
                text.push_str(stopped);
            }
        }
        for note in self.notes {
            text.push_str("\n\n--- note ---\n");
            text.push_str(note);
        }
        text.push_str("\n\n");
        text.push_str(&summary_line(outcome, id));
        // The text starts with the result as shown (`output.shown_chars` of it), whitespace and
        // all; without a result it starts with the logs or the error.
        if self.shaped.is_some() {
            text
        } else {
            text.trim_start().to_string()
        }
    }
}

/// A response, and the outputs it names on their way to the store.
#[derive(Debug)]
pub struct Response {
    result: CallToolResult,
    commits: Vec<Commit>,
    /// The record's write, when the response waits for it (`[store] records`).
    recorded: Option<Commit>,
}

impl Response {
    /// The response, once every output it names is written. When one could not be written
    /// the response still goes (its result is whole or shortened either way), and says so
    /// in its text: the model is not sent to read what is not there.
    pub async fn committed(self) -> CallToolResult {
        let mut result = self.result;
        // A record that could not be written is held and tried again by the store: the
        // answer still goes, and the log says why it waited.
        if let Some(recorded) = self.recorded
            && let Err(e) = recorded.committed().await
        {
            tracing::warn!("the execution's record is not written yet: {e}");
        }
        for commit in self.commits {
            if let Err(e) = commit.committed().await {
                tracing::warn!("could not store the full output: {e}");
                let note = format!(
                    "\n[the full output could not be stored, so it cannot be read back: {e}]"
                );
                if let Some(ContentBlock::Text(text)) = result.content.first_mut() {
                    text.text.push_str(&note);
                }
                // Nor does the structured answer name it as stored.
                if let Some(output) = result
                    .structured_content
                    .as_mut()
                    .and_then(|s| s.get_mut("output"))
                    .and_then(Value::as_object_mut)
                {
                    output.insert("stored".into(), Value::Bool(false));
                    output.insert("resource".into(), Value::Null);
                    output.insert("not_stored".into(), Value::String(e.to_string()));
                }
            }
        }
        result
    }
}

/// What a successful run most likely got wrong, when its shape says so: it made calls and
/// returned nothing (a forgotten `return`), or calls were still running when it returned (a
/// forgotten `await`; they were stopped). Each note says the fix.
fn notes(
    outcome: &Outcome,
    code: &str,
    catalog: &Catalog,
    observed: &dyn Fn(&sandgate_catalog::Entry) -> Option<sandgate_catalog::Observed>,
) -> Vec<String> {
    let mut notes = Vec::new();
    if outcome.error.is_some() || outcome.calls.is_empty() {
        return notes;
    }
    let running: Vec<&str> = outcome
        .calls
        .iter()
        .filter(|call| call.duration_ms.is_none())
        .map(|call| call.name.as_str())
        .collect();
    if !running.is_empty() {
        let mut names = running.clone();
        names.dedup();
        notes.push(format!(
            "{} call(s) were still running when the script returned, and were stopped ({}): `await` each call, or `await Promise.all([...])` for several.",
            running.len(),
            bounds::bounded(&names.join(", "), 300).0
        ));
    }
    if outcome.value.as_ref().is_none_or(Value::is_null) {
        notes.push(
            super::missing_property::note(code, catalog, observed).unwrap_or_else(|| {
                format!(
                    "the script returned nothing after {} call(s); add `return …` with the value you want back.",
                    outcome.calls.len()
                )
            }),
        );
    }
    notes
}

/// The error as the response shows it (message and hint within their bounds), and whether it
/// was cut; the whole of a cut error is stored as part `error`.
fn shown_error(
    error: &ExecError,
    request: &Request,
    store: Option<&StoreHandle>,
    commits: &mut Vec<Commit>,
) -> (ExecError, bool) {
    let (message, message_cut) = bounds::bounded(&error.message, bounds::ERROR_SHOWN);
    let hint = error
        .hint
        .as_deref()
        .map(|hint| bounds::bounded(hint, bounds::HINT_SHOWN));
    let cut = message_cut || hint.as_ref().is_some_and(|(_, cut)| *cut);
    if cut && let Some(store) = store {
        commits.push(store.save_output(request.key(Part::Error), error_text(error)));
    }
    let shown = ExecError {
        message,
        hint: hint.map(|(hint, _)| hint),
        ..error.clone()
    };
    (shown, cut)
}

fn where_the_rest_is(id: &str, stored: bool, part: Part) -> String {
    let part = part.as_str();
    if stored {
        format!(
            "[Full {part}: read_output {{\"execution_id\": \"{id}\", \"part\": \"{part}\", \"offset\": 0}} or resource sandgate://executions/{id}/{part}]"
        )
    } else {
        format!(
            "[The full {part} was not kept: this gateway has no store. Ask for less, or raise max_output_size]"
        )
    }
}

/// `stored`: the whole result is in the store (because the response does not hold all of it,
/// or holds it only once).
fn output_json(shaped: &Shaped, id: &str, stored: bool) -> Value {
    json!({
        "original_bytes": shaped.original_bytes,
        "returned_bytes": shaped.text.len(),
        "stages": shaped.stages,
        "shown_chars": shaped.text.chars().count(),
        "stored": stored,
        "resource": stored.then(|| output_uri(id)),
    })
}

fn call_json(call: &CallRecord, catalog: &Catalog) -> Value {
    json!({
        "tool": call.name,
        "ok": call.ok,
        "finished": call.duration_ms.is_some(),
        "duration_ms": call.duration_ms.map(round),
        "changed_state": may_change_state(catalog, &call.name),
        "error": call.error.as_deref().map(bounds::call_error),
    })
}

fn error_text(error: &ExecError) -> String {
    let kind = error.kind.as_str();
    let at = match (error.line, error.column) {
        (Some(line), Some(column)) => format!(" at line {line}:{column}"),
        (Some(line), None) => format!(" at line {line}"),
        _ => String::new(),
    };
    let mut text = format!("{kind}{at}: {}", error.message);
    if let Some(hint) = &error.hint {
        text.push_str(&format!("\nhint: {hint}"));
    }
    text
}

/// Whether the execution was cut off from outside (rather than failing in its own code).
fn was_stopped(error: &ExecError) -> bool {
    matches!(
        error.kind,
        ErrorKind::Timeout | ErrorKind::Memory | ErrorKind::Internal | ErrorKind::Cancelled
    )
}

/// `ok`, `cancelled` (the caller stopped it), or `error`.
pub(crate) fn status(outcome: &Outcome) -> &'static str {
    match &outcome.error {
        None => "ok",
        Some(e) if e.kind == ErrorKind::Cancelled => "cancelled",
        Some(_) => "error",
    }
}

/// Where a failed execution stopped: what completed, what was still running, and which
/// completed calls may have changed state, so a retry does not repeat a write.
fn stopped_at(error: &ExecError, calls: &[CallRecord], catalog: &Catalog) -> String {
    let finished: Vec<&CallRecord> = calls.iter().filter(|c| c.duration_ms.is_some()).collect();
    let running: Vec<&str> = calls
        .iter()
        .filter(|c| c.duration_ms.is_none())
        .map(|c| c.name.as_str())
        .collect();
    let place = match error.line {
        Some(line) => format!("at line {line}"),
        None => "before finishing".to_string(),
    };
    let failed = finished.iter().filter(|c| !c.ok).count();
    let mut text = format!(
        "Stopped {place} after {} completed call(s)",
        finished.len() - failed
    );
    if failed > 0 {
        text.push_str(&format!(" and {failed} failed call(s)"));
    }
    if !running.is_empty() {
        text.push_str(&format!(
            "; still running and abandoned: {}",
            bounds::names(running.into_iter().map(str::to_string))
        ));
    }
    text.push('.');
    let writes = bounds::writes(&finished, catalog);
    if !writes.is_empty() {
        text.push_str(&format!(
            "\nCompleted calls that may have changed state — do not repeat them blindly on retry: {}.",
            bounds::names(writes.into_iter())
        ));
    }
    text
}

/// `[sandbox · 3 calls: memory.read_graph ok 2.1ms, … · 14.2 ms · ex-…]`
fn summary_line(outcome: &Outcome, id: &str) -> String {
    let calls = match outcome.calls.len() {
        0 => "no calls".to_string(),
        n => {
            let listed: Vec<String> = outcome
                .calls
                .iter()
                .take(5)
                .map(|c| match c.duration_ms {
                    Some(ms) => format!(
                        "{} {} {:.1}ms",
                        c.name,
                        if c.ok { "ok" } else { "failed" },
                        ms
                    ),
                    None => format!("{} unfinished", c.name),
                })
                .collect();
            let more = if n > 5 {
                format!(", +{} more", n - 5)
            } else {
                String::new()
            };
            format!(
                "{n} call{}: {}{more}",
                if n == 1 { "" } else { "s" },
                listed.join(", ")
            )
        }
    };
    format!(
        "[{} · {calls} · {:.1} ms · {id}]",
        outcome.tier.as_str(),
        outcome.duration_ms
    )
}

/// The record of an execution that has just started (see [`sandgate_store::RUNNING`]); the
/// finished record replaces it.
pub(super) fn running_record(
    id: &str,
    started_at_ms: i64,
    tier: super::route::Tier,
    code: &str,
    caller: &crate::caller::Caller,
) -> ExecutionRecord {
    ExecutionRecord {
        id: id.to_string(),
        started_at_ms,
        tier: tier.as_str().to_string(),
        code_hash: code_hash(code),
        code: Some(code.to_string()),
        duration_ms: 0.0,
        status: sandgate_store::RUNNING.to_string(),
        calls: 0,
        output_bytes: 0,
        returned_bytes: 0,
        error_kind: None,
        profile: caller.profile().to_string(),
        user: caller.user().map(str::to_string),
        call_rows: Vec::new(),
        shown: None,
        error_line: None,
    }
}

fn record(
    outcome: &Outcome,
    request: &Request,
    catalog: &Catalog,
    full: Option<&str>,
    returned_bytes: usize,
) -> ExecutionRecord {
    ExecutionRecord {
        id: request.id.to_string(),
        started_at_ms: request.started_at_ms,
        tier: outcome.tier.as_str().to_string(),
        code_hash: code_hash(request.code),
        code: Some(request.code.to_string()),
        duration_ms: outcome.duration_ms,
        status: status(outcome).to_string(),
        calls: outcome.calls.len() as u32,
        output_bytes: full.map_or(0, str::len) as u64,
        returned_bytes: returned_bytes as u64,
        error_kind: outcome.error.as_ref().map(|e| e.kind.as_str().to_string()),
        profile: request.caller.profile().to_string(),
        user: request.caller.user().map(str::to_string),
        call_rows: call_rows(&outcome.calls, catalog),
        shown: None,
        error_line: outcome.error.as_ref().and_then(|e| e.line),
    }
}

/// An execution's calls as the store keeps them: each tool by its backend and original name
/// (a capability under `(capability)`), and whether it may have changed state.
pub fn call_rows(calls: &[CallRecord], catalog: &Catalog) -> Vec<CallRow> {
    calls
        .iter()
        .map(|c| {
            let (backend, tool) = if HostFunction::named(&c.name).is_some() {
                (HostFunction::RECORD_BACKEND.to_string(), c.name.clone())
            } else {
                catalog
                    .resolve(&c.name)
                    .map(|e| (e.spec.backend.clone(), e.spec.name.clone()))
                    .unwrap_or_else(|_| match ToolRef::parse(&c.name) {
                        Some(written) => (written.backend, written.tool),
                        None => (String::new(), c.name.clone()),
                    })
            };
            CallRow {
                backend,
                tool,
                duration_ms: c.duration_ms,
                ok: c.ok,
                changed_state: may_change_state(catalog, &c.name),
                args_bytes: c.args_bytes as u64,
                result_bytes: c.result_bytes as u64,
                started_ms: Some(c.started_ms),
                error: c.error.clone(),
                arguments: c.arguments.clone(),
            }
        })
        .collect()
}

/// FNV-1a of the code: groups repeated executions without keeping the code.
pub fn code_hash(code: &str) -> String {
    crate::caller::fnv_hex(code.as_bytes())
}

fn round(ms: f64) -> f64 {
    (ms * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_output_whose_write_failed_is_not_named_as_stored() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("shortened")]);
        result.structured_content = Some(json!({
            "output": {"stored": true, "resource": "sandgate://output/ex-1", "shown_chars": 9}
        }));
        let failed = sandgate_store::StoreError::Unavailable("connection refused".into());
        let response = Response {
            result,
            commits: vec![Commit::finished(Err(failed))],
            recorded: None,
        };
        let answered = response.committed().await;
        let Some(ContentBlock::Text(text)) = answered.content.first() else {
            panic!("no text");
        };
        assert!(text.text.contains("cannot be read back"), "{}", text.text);
        let output = &answered.structured_content.expect("structured")["output"];
        assert_eq!(output["stored"], json!(false));
        assert_eq!(output["resource"], Value::Null);
        assert!(
            output["not_stored"]
                .as_str()
                .is_some_and(|s| s.contains("connection refused"))
        );
    }

    #[tokio::test]
    async fn an_output_written_stays_named() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("shortened")]);
        result.structured_content = Some(json!({"output": {"stored": true}}));
        let response = Response {
            result,
            commits: vec![Commit::finished(Ok(()))],
            recorded: None,
        };
        let answered = response.committed().await;
        assert_eq!(
            answered.structured_content.expect("structured")["output"]["stored"],
            json!(true)
        );
    }
}
