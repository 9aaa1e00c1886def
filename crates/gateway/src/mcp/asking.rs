//! `call_tool_chain` for a 2026-07-28 client that can be asked (it declared elicitation): a
//! script whose call needs a person's approval is answered with an input-required result
//! (SEP-2322) that asks the question, and keeps waiting, parked, on this gateway. The client
//! asks the person and retries the same call with the answers and the `requestState` it was
//! given; the retry hands the answers to the waiting calls and waits on the script again, for
//! its result or its next question.
//!
//! The state is sealed and bound to the caller (`approvals::seal`); what it names is checked
//! again against what waits, so a forged, altered, expired, replayed or borrowed state, or an
//! answer to a question never asked, is refused with nothing run. The parked script lives on
//! the replica that runs it: a retry that reaches another finds no state it can open, and says
//! so (docs/call_tool_chain.md, "Approvals").

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData, InputRequests, InputRequiredResult,
};
use serde_json::Value;

use crate::approvals::seal::{WaitingState, code_digest};
use crate::approvals::{Answerer, owner_of};
use crate::caller::Caller;
use crate::chain::{self, ChainArgs};
use crate::detached::Detached;
use crate::gateway::Gateway;
use crate::runtime::Cancellation;

/// The longest one request waits on a parked script before answering that it still runs is
/// never reached in practice: the script's own time limit ends it first.
const LONGEST_WAIT: Duration = Duration::from_secs(24 * 3600);

/// Answers `call_tool_chain` for a caller that is asked through input-required results.
pub(super) async fn call(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    request: CallToolRequestParams,
    cancel: &Cancellation,
) -> Result<CallToolResponse, ErrorData> {
    let owner = owner_of(caller);
    let approvals = gateway.door().approvals();
    let sent_code = request
        .arguments
        .as_ref()
        .and_then(|a| a.get("code"))
        .map(|code| match code {
            Value::String(text) => code_digest(text),
            other => code_digest(&other.to_string()),
        })
        .unwrap_or_default();
    let detached = match request.request_state.as_deref() {
        Some(sealed) => {
            let state = approvals
                .seal()
                .open(sealed, &owner)
                .map_err(|why| ErrorData::invalid_params(why, None))?;
            // What a person was shown and said yes to is what runs: a retry with other code
            // continues nothing.
            if state.code != sent_code {
                return Err(ErrorData::invalid_params(
                    "this retry's `code` is not the code its requestState's execution runs: a retry sends the same arguments, so what a person approves is what runs. Nothing was answered or run; send the same code with the state, or the new code without one",
                    None,
                ));
            }
            // Answers first: a replay is refused as one, whether or not its execution is held.
            if let Some(responses) = request.input_responses.as_ref() {
                approvals
                    .answer_all(&Answerer::Owner(owner.clone()), &state.questions, responses)
                    .map_err(|why| ErrorData::invalid_params(why, None))?;
            }
            let Some(detached) = chain::detach::find(gateway, caller, &state.execution_id) else {
                return Err(ErrorData::invalid_params(
                    format!(
                        "the execution this requestState continues ({}) no longer waits here: it finished and its answer was collected, or the gateway restarted. Nothing ran; read_output reads what it stored",
                        state.execution_id
                    ),
                    None,
                ));
            };
            detached
        }
        None => {
            if request
                .input_responses
                .as_ref()
                .is_some_and(|r| !r.is_empty())
            {
                return Err(ErrorData::invalid_params(
                    "inputResponses came without the requestState they answer: no question was asked of this call. Nothing ran",
                    None,
                ));
            }
            let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
            let args: ChainArgs = match serde_json::from_value(arguments) {
                Ok(args) => args,
                // Arguments that are not call_tool_chain's: the plain answer says what is wrong.
                Err(_) => {
                    let call = super::handler::ToolCall {
                        name: &request.name,
                        arguments: request.arguments,
                        progress: None,
                    };
                    let answer = super::handler::answer_call(gateway, caller, call, cancel).await;
                    return answer.map(CallToolResponse::Complete);
                }
            };
            chain::launch(gateway, caller, args)
                .map_err(|why| ErrorData::invalid_params(why, None))?
        }
    };
    // `yield_after_ms` holds here as anywhere: past it, the answer is the running snapshot.
    let within = request
        .arguments
        .as_ref()
        .and_then(|a| a.get("yield_after_ms"))
        .and_then(Value::as_u64)
        .map_or(LONGEST_WAIT, Duration::from_millis);
    let started = std::time::Instant::now();
    loop {
        let left = within.saturating_sub(started.elapsed());
        let answer = tokio::select! {
            answer = detached.wait_or_question(left) => answer,
            () = cancel.cancelled() => {
                // A client that goes away while the script runs (not between rounds) cancels
                // it, as it would a call that was never parked.
                detached.cancel();
                detached.wait(Duration::from_secs(5)).await
            }
        };
        if let Some(result) = answer {
            // Its client has the answer; nothing continues it. Held on, every call of a busy
            // client would count against the cap for 15 minutes.
            gateway.detached().forget(detached.id());
            return Ok(CallToolResponse::Complete((*result).clone()));
        }
        // A question answered in the console in between leaves nothing to ask: wait again.
        if let Some(asking) = asked(gateway, &detached, &owner, &sent_code) {
            return Ok(CallToolResponse::InputRequired(asking));
        }
        if started.elapsed() >= within {
            // Still running at the yield: wait_execution (or a retry) continues it.
            return Ok(CallToolResponse::Complete(detached.running_answer()));
        }
        if cancel.is_cancelled() {
            return Err(ErrorData::internal_error("the request was cancelled", None));
        }
    }
}

/// The input-required result that asks what `detached` waits on; `None` when it waits on
/// nothing.
fn asked(
    gateway: &Gateway,
    detached: &Detached,
    owner: &str,
    code: &str,
) -> Option<InputRequiredResult> {
    let approvals = gateway.door().approvals();
    let questions = detached.inbox().questions();
    if questions.is_empty() {
        return None;
    }
    let requests: InputRequests = questions
        .iter()
        .map(|q| (q.id.clone(), q.request()))
        .collect::<BTreeMap<_, _>>();
    let state = WaitingState {
        execution_id: detached.id().to_string(),
        questions: questions.iter().map(|q| q.id.clone()).collect(),
        code: code.to_string(),
    };
    // Long enough to collect the script's result after its questions lapsed.
    let lifetime = approvals.settings().timeout + crate::detached::KEEP_FINISHED;
    let sealed = approvals.seal().seal(&state, owner, lifetime);
    Some(InputRequiredResult::new(Some(requests), Some(sealed)))
}
