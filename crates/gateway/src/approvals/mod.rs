//! Calls a person approves before they run, even from a script.
//!
//! A profile's `approve` and a backend's own `approve` name tools whose calls need a yes from a
//! person. The door asks here before such a call goes out ([`Approvals::ask`]); the call waits,
//! and with it the script, which parks like any script waiting on a slow tool. The question
//! goes to the person the way the request's client can take it ([`Asking`]): `elicitation/create`
//! on a 2025-11-25 session; an input-required result on a 2026-07-28 request, answered by the
//! client's retry; a task's `input_required` status, answered by `tasks/update`. The console
//! lists every waiting question, and an admin or the execution's owner may answer there too.
//!
//! Yes runs the call. No, the `[approvals] timeout`, a client that cannot be asked, or too many
//! questions waiting make the call reject with `ApprovalDenied`, which the script may catch.
//! Nothing else lets an approval-gated call through: the door holds the call until this says
//! yes. Every question and every answer is an audit line.
//!
//! What is held is bounded: at most `max_waiting_per_caller` questions per caller and
//! `max_waiting` in all, each for at most `timeout`; a question whose call is dropped (its
//! execution cancelled or ended) is removed with it.

mod question;
pub(crate) mod seal;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sandgate_config::ApprovalsConfig;
use sandgate_sandbox::{CallFailure, FailureKind};
use tokio::sync::oneshot;

pub(crate) use question::bounded;
pub use question::{Question, QuestionView};

use crate::caller::Caller;

/// How the person behind one execution's client is asked.
#[derive(Debug, Clone, Default)]
pub enum Asking {
    /// Nobody can be asked: the client declared no elicitation.
    #[default]
    Nobody,
    /// `elicitation/create` through the client's session, while the call waits.
    Session(rmcp::Peer<rmcp::RoleServer>),
    /// Through whoever waits on the detached execution (its inbox): a 2026-07-28 client's
    /// retry, or a task's `tasks/get` and `tasks/update`.
    Waiter(Arc<Inbox>),
}

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Yes, by whom.
    Approved {
        /// Who answered (`client`, or `console:<profile>`).
        by: String,
    },
    /// No, by whom, and why (what the person said, or that nobody answered).
    Denied {
        /// Who answered.
        by: String,
        /// Why the call does not run.
        why: String,
    },
}

/// Every question waiting for a person, gateway-wide.
#[derive(Debug)]
pub struct Approvals {
    settings: Mutex<ApprovalsConfig>,
    waiting: Mutex<HashMap<String, Arc<Question>>>,
    /// How the questions no longer waiting ended, for a while: a late answer to one that
    /// lapsed is let go, an answer to one answered already is a replay and refused.
    ended: Mutex<HashMap<String, Ended>>,
    seal: seal::StateSeal,
}

/// How a question stopped waiting.
#[derive(Debug, Clone)]
struct Ended {
    owner: String,
    answered: bool,
    at: Instant,
}

/// How long the end of a question is remembered.
const REMEMBER_ENDED: Duration = Duration::from_secs(3600);
/// The most ends remembered.
const MAX_ENDED: usize = 65_536;

impl Approvals {
    /// No question waiting yet, under `settings`.
    pub fn new(settings: ApprovalsConfig) -> Approvals {
        Approvals {
            settings: Mutex::new(settings),
            waiting: Mutex::default(),
            ended: Mutex::default(),
            seal: seal::StateSeal::new(),
        }
    }

    /// Takes the settings of a reloaded config (questions already asked keep their expiry).
    pub fn configure(&self, settings: ApprovalsConfig) {
        *self.settings.lock().unwrap_or_else(PoisonError::into_inner) = settings;
    }

    /// The settings in force.
    pub fn settings(&self) -> ApprovalsConfig {
        *self.settings.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Seals and opens the request state of 2026-07-28 input-required results.
    pub(crate) fn seal(&self) -> &seal::StateSeal {
        &self.seal
    }

    /// Asks a person whether `call` (already allowed by the policy) may run, and waits for the
    /// answer: `Ok` runs it; an `ApprovalDenied` failure says why not. Dropping the returned
    /// future withdraws the question.
    pub(crate) async fn ask(
        &self,
        asking: &Asking,
        caller: &Caller,
        execution_id: &str,
        tool: &str,
        arguments: &str,
        rule: &str,
    ) -> Result<Verdict, CallFailure> {
        let settings = self.settings();
        let denied = |why: String| CallFailure::new(FailureKind::ApprovalDenied, why);
        if let Asking::Nobody = asking {
            return Err(denied(format!(
                "`{tool}` needs a person's approval ({rule}), and this client cannot ask one: it declared no elicitation capability. The call did not run. Use a client that supports elicitation (or MCP tasks), or ask the operator about the rule."
            )));
        }
        let owner = owner_of(caller);
        let (question, answer) = {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            waiting.retain(|_, q| !q.expired());
            let mine = waiting.values().filter(|q| q.owner == owner).count();
            if mine >= settings.max_waiting_per_caller {
                return Err(denied(format!(
                    "`{tool}` needs a person's approval ({rule}), and {mine} of this caller's questions already wait for an answer ([approvals] max_waiting_per_caller = {}). The call did not run. Ask fewer approvals at once: await each before the next.",
                    settings.max_waiting_per_caller
                )));
            }
            if waiting.len() >= settings.max_waiting {
                return Err(denied(format!(
                    "`{tool}` needs a person's approval ({rule}), and this gateway already holds {} questions waiting ([approvals] max_waiting). The call did not run; try again later.",
                    waiting.len()
                )));
            }
            let (question, answer) = Question::new(
                caller,
                owner,
                execution_id,
                tool,
                arguments,
                rule,
                settings.timeout,
            );
            let question = Arc::new(question);
            waiting.insert(question.id.clone(), question.clone());
            (question, answer)
        };
        // Withdrawn however this ends: answered, timed out, or dropped with its execution.
        let _withdraw = Withdraw {
            approvals: self,
            question: question.clone(),
            asking: asking.clone(),
        };
        match asking {
            Asking::Nobody => {}
            Asking::Session(peer) => {
                question.send_to_session(peer.clone(), settings.timeout);
            }
            Asking::Waiter(inbox) => inbox.asked(question.clone()),
        }
        let verdict = match tokio::time::timeout(settings.timeout, answer).await {
            Ok(Ok(verdict)) => verdict,
            Ok(Err(_)) | Err(_) => Verdict::Denied {
                by: "timeout".into(),
                why: format!(
                    "nobody answered within {} s ([approvals] timeout)",
                    settings.timeout.as_secs()
                ),
            },
        };
        match verdict {
            Verdict::Approved { .. } => Ok(verdict),
            Verdict::Denied { by, why } => Err(denied(format!(
                "`{tool}` was not approved ({rule}): {why} (answered by {by}). The call did not run."
            ))),
        }
    }

    /// Answers question `id` for someone who may (see [`Answerer`]); refused when it is not
    /// waiting (never asked, already answered, expired) or not theirs to answer.
    pub fn answer(&self, id: &str, by: &Answerer, verdict: Verdict) -> Result<(), String> {
        let question = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned();
        let Some(question) = question.filter(|q| !q.expired() && by.may_answer(q)) else {
            return Err(format!(
                "no approval {} waits for your answer: it was never asked, is answered already, expired, or is not yours",
                question::shown_id(id)
            ));
        };
        if question.resolve(verdict) {
            self.ended(&question, true);
            Ok(())
        } else {
            Err(format!(
                "approval {} is answered already",
                question::shown_id(id)
            ))
        }
    }

    /// Answers questions with a client's `inputResponses` (each an `elicitation/create`
    /// result, by question id), all or none: every id must be one of `asked` (what the client
    /// was asked) and wait for `by`'s answer, and every response must be an elicitation
    /// result. Nothing is answered when one is not: the client is told which and why.
    pub fn answer_all(
        &self,
        by: &Answerer,
        asked: &[String],
        responses: &std::collections::BTreeMap<String, serde_json::Value>,
    ) -> Result<usize, String> {
        if responses.len() > MAX_ANSWERS {
            return Err(format!(
                "inputResponses holds {} answers; at most {MAX_ANSWERS} questions are ever asked at once",
                responses.len()
            ));
        }
        let mut verdicts = Vec::with_capacity(responses.len());
        {
            let waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            let ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
            for (id, response) in responses {
                let waits = asked.contains(id)
                    && waiting
                        .get(id)
                        .is_some_and(|q| !q.expired() && by.may_answer(q));
                if !waits {
                    match ended
                        .get(id)
                        .filter(|e| asked.contains(id) && by.owns(&e.owner))
                    {
                        // Too late: the call was denied for want of an answer, or withdrawn.
                        Some(Ended {
                            answered: false, ..
                        }) => continue,
                        Some(Ended { answered: true, .. }) => {
                            return Err(format!(
                                "inputResponses answers {} again: it was answered already, and each question takes one answer. Nothing was answered",
                                question::shown_id(id)
                            ));
                        }
                        None => {
                            return Err(format!(
                                "inputResponses answers {}, which this execution never asked. Nothing was answered",
                                question::shown_id(id)
                            ));
                        }
                    }
                }
                let result: rmcp::model::ElicitResult =
                    serde_json::from_value(response.clone()).map_err(|e| {
                        format!(
                            "inputResponses[{}] is not an elicitation result ({}): answer with {{\"action\": \"accept\"}} or {{\"action\": \"decline\"}}. Nothing was answered",
                            question::shown_id(id),
                            question::bounded(&e.to_string(), 200)
                        )
                    })?;
                verdicts.push((
                    id.clone(),
                    question::verdict_of(result.action, result.content.as_ref()),
                ));
            }
        }
        let count = verdicts.len();
        for (id, verdict) in verdicts {
            // One that expired or was withdrawn in between is denied already.
            let _ = self.answer(&id, by, verdict);
        }
        Ok(count)
    }

    /// The questions `by` may answer, oldest first (at most `limit`).
    pub fn visible(&self, by: &Answerer, limit: usize) -> Vec<QuestionView> {
        let waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let mut shown: Vec<&Arc<Question>> = waiting
            .values()
            .filter(|q| !q.expired() && by.may_answer(q))
            .collect();
        shown.sort_by_key(|q| q.asked_at_ms);
        shown.into_iter().take(limit).map(|q| q.view()).collect()
    }

    /// Notes how `question` stopped waiting (the first note holds).
    fn ended(&self, question: &Question, answered: bool) {
        let mut ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        if ended.len() >= MAX_ENDED {
            ended.retain(|_, e| e.at.elapsed() < REMEMBER_ENDED);
        }
        if ended.len() >= MAX_ENDED {
            ended.clear();
        }
        ended.entry(question.id.clone()).or_insert(Ended {
            owner: question.owner.clone(),
            answered,
            at: Instant::now(),
        });
    }

    /// How many questions wait now.
    pub fn waiting_count(&self) -> usize {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// The questions one detached execution's calls wait on, for whoever waits on it to pass on.
#[derive(Debug)]
pub struct Inbox {
    questions: Mutex<Vec<Arc<Question>>>,
    /// Bumped whenever a question is asked, so a waiter wakes to pass it on.
    asking: tokio::sync::watch::Sender<u64>,
}

impl Default for Inbox {
    fn default() -> Self {
        Inbox {
            questions: Mutex::default(),
            asking: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Inbox {
    /// Notes a question; whoever waits is woken.
    pub fn asked(&self, question: Arc<Question>) {
        self.questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(question);
        self.asking.send_modify(|n| *n += 1);
    }

    /// Forgets question `id`: answered, expired or withdrawn.
    pub fn withdrawn(&self, id: &str) {
        self.questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|q| q.id != id);
    }

    /// The questions waiting now, oldest first.
    pub fn questions(&self) -> Vec<Arc<Question>> {
        self.questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|q| q.is_open())
            .cloned()
            .collect()
    }

    /// Wakes when a question is asked after this call.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.asking.subscribe()
    }
}

/// Who answers a question, and so which questions they may answer.
#[derive(Debug, Clone)]
pub enum Answerer {
    /// The client that runs the execution (its retry or `tasks/update`): the caller's own key.
    Owner(String),
    /// A console user: an admin answers any question; anyone else, those asked under their
    /// profile by their own user (or, for a token's login, by no user).
    Console {
        /// Their profile.
        profile: String,
        /// The user an identity provider proved, if any.
        user: Option<String>,
        /// Whether their profile is an admin's.
        admin: bool,
    },
}

impl Answerer {
    fn may_answer(&self, question: &Question) -> bool {
        match self {
            Answerer::Owner(owner) => *owner == question.owner,
            Answerer::Console {
                profile,
                user,
                admin,
            } => *admin || (*profile == question.profile && *user == question.user),
        }
    }

    /// Whether this is the client whose questions `owner` names.
    fn owns(&self, owner: &str) -> bool {
        matches!(self, Answerer::Owner(mine) if mine == owner)
    }

    /// How the audit log names the answerer.
    pub fn name(&self) -> String {
        match self {
            Answerer::Owner(_) => "client".into(),
            Answerer::Console { profile, .. } => format!("console:{profile}"),
        }
    }
}

/// The key that names `caller` as the owner of its questions: its store key and its token, so
/// another caller (another session, profile, user or token) owns none of them.
pub fn owner_of(caller: &Caller) -> String {
    format!(
        "{}#{}",
        caller.key("", crate::caller::Part::Output),
        caller.token_id.as_deref().unwrap_or("")
    )
}

/// Removes a question from those waiting when its ask ends, however it ends.
struct Withdraw<'a> {
    approvals: &'a Approvals,
    question: Arc<Question>,
    asking: Asking,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        self.approvals
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.question.id);
        if let Asking::Waiter(inbox) = &self.asking {
            inbox.withdrawn(&self.question.id);
        }
        self.question.resolve(Verdict::Denied {
            by: "gateway".into(),
            why: "the call was withdrawn".into(),
        });
        self.approvals.ended(&self.question, false);
    }
}

/// When a question asked now expires.
fn expiry(timeout: Duration) -> Instant {
    Instant::now() + timeout
}

#[cfg(test)]
mod tests;

/// The most answers one retry or `tasks/update` may carry.
const MAX_ANSWERS: usize = 256;

/// The sender a question is answered through.
type AnswerSender = oneshot::Sender<Verdict>;
