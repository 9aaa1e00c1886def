//! `yield_after_ms` and `wait_execution`: an execution that outlives its first answer (see
//! `crate::detached` for why, and what is kept of it).
//!
//! The execution runs on a task of its own, detached from the request: the request waits for
//! it `yield_after_ms`, and answers with its result if it is done by then, or with its id and
//! what it did so far if it is not. Either way the execution is the same one, with the same
//! record and result. `wait_execution` waits on it again, or cancels it; nothing but that, or
//! the gateway stopping, or its own time limit, stops it (a client that goes away does not).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Deserialize;

use crate::caller::Caller;
use crate::detached::Detached;
use crate::gateway::Gateway;
use crate::runtime::Cancellation;

/// How long `wait_execution` waits when no `timeout_ms` is given.
pub const DEFAULT_WAIT_MS: u64 = 25_000;
/// The longest `wait_execution` waits in one call.
pub const MAX_WAIT_MS: u64 = 300_000;
/// How long a cancelled execution is waited for before the answer says it is stopping.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// `wait_execution`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    /// The id `call_tool_chain` answered with.
    pub execution_id: String,
    /// How long to wait for it to finish (default 25 s, at most 300 s).
    pub timeout_ms: Option<u64>,
    /// Stop it instead, and answer with how it ended.
    pub cancel: Option<bool>,
}

/// Runs an execution of `caller`'s detached (`start` runs it, given its entry and id), and
/// answers after at most `after`: its result, or that it is still running.
pub(super) async fn yielding(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    after: Duration,
    cancel: &Cancellation,
    start: impl FnOnce(Arc<Detached>, String) -> BoxFuture<'static, CallToolResult>,
) -> CallToolResult {
    let detached = match launch(gateway, caller, start) {
        Ok(detached) => detached,
        Err(message) => return CallToolResult::error(vec![ContentBlock::text(message)]),
    };
    // The request's own cancel ends only this wait: the execution runs on, for wait_execution.
    let waited = tokio::select! {
        answer = detached.wait(after) => answer,
        () = cancel.cancelled() => None,
    };
    match waited {
        Some(answer) => (*answer).clone(),
        None => detached.running_answer(),
    }
}

/// Starts an execution of `caller`'s detached from the request (`start` runs it, given its
/// entry and id): its entry, already running; refused when too many are held.
pub(crate) fn launch(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    start: impl FnOnce(Arc<Detached>, String) -> BoxFuture<'static, CallToolResult>,
) -> Result<Arc<Detached>, String> {
    let id = sandgate_store::new_execution_id();
    let detached = gateway.detached().begin(&id, caller.owner_key(&id))?;
    let running = start(detached.clone(), id);
    let finishing = detached.clone();
    tokio::spawn(async move {
        finishing.finish(running.await);
    });
    Ok(detached)
}

/// The detached execution `id` of `caller`'s, if it is held.
pub(crate) fn find(gateway: &Gateway, caller: &Caller, id: &str) -> Option<Arc<Detached>> {
    gateway.detached().find(id, &caller.owner_key(id))
}

/// `wait_execution`: waits for a detached execution of `caller`'s, or cancels it.
pub async fn wait_execution(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: WaitArgs,
    cancel: &Cancellation,
) -> Result<CallToolResult, String> {
    let id = args.execution_id.trim();
    let Some(detached) = find(gateway, caller, id) else {
        return Err(format!(
            "no execution {id} runs on for this caller. wait_execution finds the executions this caller started with yield_after_ms (a caller is its token or user, in any of its sessions; without auth, its MCP session), and keeps a finished one {} minutes (its record and any stored output remain: read_output reads them)",
            crate::detached::KEEP_FINISHED.as_secs() / 60
        ));
    };
    if args.cancel == Some(true) {
        detached.cancel();
        return Ok(match detached.wait(CANCEL_GRACE).await {
            Some(answer) => (*answer).clone(),
            None => detached.running_answer(),
        });
    }
    let within = Duration::from_millis(
        args.timeout_ms
            .unwrap_or(DEFAULT_WAIT_MS)
            .clamp(1, MAX_WAIT_MS),
    );
    let waited = tokio::select! {
        answer = detached.wait(within) => answer,
        () = cancel.cancelled() => None,
    };
    Ok(match waited {
        Some(answer) => (*answer).clone(),
        None => detached.running_answer(),
    })
}
