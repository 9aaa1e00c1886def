//! MCP tasks for `call_tool_chain` (the `io.modelcontextprotocol/tasks` extension, SEP-2663):
//! a client that declares the extension gets a task for a script that does not finish at once,
//! and polls it with `tasks/get`, answers its questions with `tasks/update`, and stops it with
//! `tasks/cancel`.
//!
//! A task is a detached execution (`crate::detached`), so it runs on when the client goes
//! away, and only `tasks/cancel`, its own time limit or the gateway stopping ends it. Its id is
//! the execution's id, found only by the caller that started it: another caller's id names no
//! task (`-32602`, as for an id never issued). Its record, logs and stored output are those of
//! any execution; the task itself is kept [`KEEP_FINISHED`] after it ends, as `ttlMs` says.
//! While it runs, `statusMessage` says how long it has run, how many calls finished and its
//! last console line; while a call waits for a person's approval, it is `input_required` with
//! the question in `inputRequests`.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolResponse, CreateTaskResult, DetailedTask, ErrorData, GetTaskResult, InputResponses,
    JsonObject, Task, TaskPayload, TaskStatus,
};
use serde_json::Value;

use crate::approvals::{Answerer, owner_of};
use crate::audit::rfc3339;
use crate::caller::Caller;
use crate::chain::{self, ChainArgs};
use crate::detached::{Detached, KEEP_FINISHED};
use crate::gateway::Gateway;

/// A script that finishes within this is answered at once, without a task (SEP-2663 allows
/// either).
const AT_ONCE: Duration = Duration::from_millis(300);
/// How often a client is asked to poll.
const POLL_INTERVAL_MS: u64 = 1000;

/// Starts `call_tool_chain` as a task for `caller`: its result when it finishes at once, else
/// the task.
pub(super) async fn create(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    arguments: Option<JsonObject>,
) -> Result<Option<CallToolResponse>, ErrorData> {
    let Ok(args) =
        serde_json::from_value::<ChainArgs>(Value::Object(arguments.unwrap_or_default()))
    else {
        // Not call_tool_chain's arguments: the plain call says what is wrong with them.
        return Ok(None);
    };
    let detached =
        chain::launch(gateway, caller, args).map_err(|why| ErrorData::invalid_params(why, None))?;
    if let Some(result) = detached.wait_or_question(AT_ONCE).await {
        // Answered at once, not as a task: nothing will ask for it again.
        gateway.detached().forget(detached.id());
        return Ok(Some(CallToolResponse::Complete((*result).clone())));
    }
    Ok(Some(CallToolResponse::Task(CreateTaskResult::new(task(
        &detached,
        TaskStatus::Working,
    )))))
}

/// `tasks/get`.
pub(super) fn get(
    gateway: &Gateway,
    caller: &Caller,
    task_id: &str,
) -> Result<GetTaskResult, ErrorData> {
    let detached = find(gateway, caller, task_id)?;
    let payload = payload_of(&detached);
    let status = payload.status();
    Ok(GetTaskResult::new(DetailedTask::new(
        task(&detached, status),
        payload,
    )))
}

/// `tasks/update`: the client's answers to the task's questions.
pub(super) fn update(
    gateway: &Gateway,
    caller: &Caller,
    task_id: &str,
    responses: &InputResponses,
) -> Result<(), ErrorData> {
    let detached = find(gateway, caller, task_id)?;
    // What it asked lately, waiting or not: an answer to one that lapsed is let go.
    let asked = detached.inbox().asked_lately();
    gateway
        .door()
        .approvals()
        .answer_all(&Answerer::Owner(owner_of(caller)), &asked, responses)
        .map(|_| ())
        .map_err(|why| ErrorData::invalid_params(why, None))
}

/// `tasks/cancel`: stops the task where it stands (no call starts after); the same empty
/// answer for a task that has ended.
pub(super) fn cancel(gateway: &Gateway, caller: &Caller, task_id: &str) -> Result<(), ErrorData> {
    let detached = find(gateway, caller, task_id)?;
    if detached.finished().is_none() {
        detached.cancel();
    }
    Ok(())
}

/// The 2025-11-25 revision's `tasks/result` and `tasks/list`, for a session that declared the
/// extension (the 2026-07-28 revision removed both, so a stateless request gets `-32601`):
/// the result of a task once it ends (waiting for it, as that revision says), and this caller's
/// tasks, a page at a time. `None`: not one of them.
pub(super) async fn legacy(
    gateway: &Gateway,
    caller: &Caller,
    method: &str,
    params: Option<&Value>,
    cancel: &crate::runtime::Cancellation,
) -> Option<Result<Value, ErrorData>> {
    let text = |key: &str| {
        params
            .and_then(|p| p.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    match method {
        "tasks/result" => Some(
            async {
                let id = text("taskId").ok_or_else(|| {
                    ErrorData::invalid_params("tasks/result needs params.taskId", None)
                })?;
                let detached = find(gateway, caller, &id)?;
                let result = tokio::select! {
                    result = detached.wait(Duration::from_secs(24 * 3600)) => result,
                    () = cancel.cancelled() => None,
                }
                .ok_or_else(|| ErrorData::internal_error("the request was cancelled", None))?;
                let mut answer = serde_json::to_value(&*result).unwrap_or_default();
                if let Value::Object(map) = &mut answer {
                    map.insert(
                        "_meta".into(),
                        serde_json::json!({"io.modelcontextprotocol/related-task": {"taskId": id}}),
                    );
                }
                Ok(answer)
            }
            .await,
        ),
        "tasks/list" => Some((|| {
            let from: usize = match text("cursor") {
                None => 0,
                Some(cursor) => cursor.parse().map_err(|_| {
                    ErrorData::invalid_params(
                        format!(
                            "unknown cursor {:?}: pass the nextCursor of the previous page",
                            crate::approvals::bounded(&cursor, 40)
                        ),
                        None,
                    )
                })?,
            };
            let mine = gateway
                .detached()
                .held_by(|id, owner| owner == caller.owner_key(id));
            let page: Vec<Value> = mine
                .iter()
                .skip(from)
                .take(LIST_PAGE)
                .map(|d| {
                    let status = match d.finished() {
                        Some(result) if d.was_stopped() && result.is_error == Some(true) => {
                            TaskStatus::Cancelled
                        }
                        Some(_) => TaskStatus::Completed,
                        None if !d.inbox().questions().is_empty() => TaskStatus::InputRequired,
                        None => TaskStatus::Working,
                    };
                    serde_json::to_value(task(d, status)).unwrap_or_default()
                })
                .collect();
            let mut answer = serde_json::json!({ "tasks": page });
            if from + LIST_PAGE < mine.len() {
                answer["nextCursor"] = Value::String((from + LIST_PAGE).to_string());
            }
            Ok(answer)
        })()),
        _ => None,
    }
}

/// Tasks in one page of `tasks/list`.
const LIST_PAGE: usize = 100;

/// What `detached` is as a task now: its result, its questions, or that it works or was
/// cancelled.
fn payload_of(detached: &Detached) -> TaskPayload {
    match detached.finished() {
        Some(result) if detached.was_stopped() && result.is_error == Some(true) => {
            TaskPayload::Cancelled
        }
        Some(result) => TaskPayload::Completed {
            result: match serde_json::to_value(&*result) {
                Ok(Value::Object(object)) => object,
                _ => JsonObject::new(),
            },
        },
        None => {
            let questions = detached.inbox().questions();
            if questions.is_empty() {
                TaskPayload::Working
            } else {
                TaskPayload::InputRequired {
                    input_requests: questions
                        .iter()
                        .map(|q| (q.id.clone(), q.request()))
                        .collect(),
                }
            }
        }
    }
}

/// Task `id` of `caller`'s, or the error for an id it does not have.
fn find(gateway: &Gateway, caller: &Caller, id: &str) -> Result<Arc<Detached>, ErrorData> {
    chain::detach::find(gateway, caller, id).ok_or_else(|| {
        ErrorData::invalid_params(
            format!(
                "no task {} of yours is kept here: tasks are found only by the caller that started them, for {} minutes after they end (their records and stored outputs remain: read_output reads them)",
                crate::approvals::bounded(&format!("{id:?}"), 90),
                KEEP_FINISHED.as_secs() / 60
            ),
            None,
        )
    })
}

/// The task `detached` is, in `status`.
fn task(detached: &Detached, status: TaskStatus) -> Task {
    let updated = detached
        .finished_at_ms()
        .unwrap_or_else(|| u64::try_from(sandgate_store::now_ms()).unwrap_or(0));
    let task = Task::new(
        detached.id(),
        status,
        rfc3339(detached.started_at_ms()),
        rfc3339(updated),
    )
    .with_ttl_ms(u64::try_from(KEEP_FINISHED.as_millis()).unwrap_or(u64::MAX))
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    match status {
        TaskStatus::Working => task.with_status_message(detached.summary()),
        TaskStatus::InputRequired => {
            task.with_status_message("a call waits for a person's approval (inputRequests)")
        }
        _ => task,
    }
}
