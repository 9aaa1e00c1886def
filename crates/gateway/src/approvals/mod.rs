//! Calls a person approves before they run, even from a script.
//!
//! A profile's `approve` and a backend's own `approve` name tools whose calls need a yes from a
//! person. The door asks here before such a call goes out (`Approvals::ask`); the call waits,
//! and with it the script, which parks like any script waiting on a slow tool. The question
//! goes to the person the way the request's client can take it ([`Asking`]): `elicitation/create`
//! on a 2025-11-25 session; an input-required result on a 2026-07-28 request, answered by the
//! client's retry; a task's `input_required` status, answered by `tasks/update`. The console
//! lists the waiting questions to those who may approve them (an admin, or a profile that
//! `approves` the asker's), never to the principal that asked.
//!
//! Yes runs the call. No, the `[approvals] timeout`, a client that cannot be asked, or too many
//! questions waiting make the call reject with `ApprovalDenied`, which the script may catch.
//! Nothing else lets an approval-gated call through: the door holds the call until this says
//! yes. Every question and every answer is an audit line.
//!
//! What is held is bounded: at most `max_waiting_per_caller` questions per caller and
//! `max_waiting` in all, each for at most `timeout`; a question whose call is dropped (its
//! execution cancelled or ended) is removed with it.

mod inbox;
mod question;
pub(crate) mod seal;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sandgate_config::ApprovalsConfig;
use sandgate_sandbox::{CallFailure, FailureKind};

pub use inbox::Inbox;
pub(crate) use question::bounded;
pub use question::{About, Answered, NamedTool, Question, QuestionView, ScriptShown, Verdict};

use crate::caller::{Caller, Principal, Reach};

/// How the person behind one execution's client is asked, and what the client said it can
/// take.
#[derive(Debug, Clone, Default)]
pub enum Asking {
    /// Nobody can be asked: the client declared neither elicitation nor sampling.
    #[default]
    Nobody,
    /// Requests through the client's session (`elicitation/create`,
    /// `sampling/createMessage`), while the call waits.
    Session(rmcp::Peer<rmcp::RoleServer>, Declared),
    /// Through whoever waits on the detached execution (its inbox): a 2026-07-28 client's
    /// retry, or a task's `tasks/get` and `tasks/update`.
    Waiter(Arc<Inbox>, Declared),
}

impl Asking {
    /// How an execution of a caller the request's client reaches as `reach` asks: through
    /// the session while the call waits; a stateless client through `waiter` (the detached
    /// execution's inbox, which its retry or `tasks/get` reads), or nobody when it has none.
    pub(crate) fn of(reach: &Reach, waiter: Option<&Arc<Inbox>>) -> Asking {
        match (reach, waiter) {
            (Reach::Nobody, _) | (Reach::Retry(_), None) => Asking::Nobody,
            (Reach::Session(peer, declared), _) => Asking::Session(peer.clone(), *declared),
            (Reach::Retry(declared), Some(inbox)) => Asking::Waiter(inbox.clone(), *declared),
        }
    }

    /// What the client declared it can take.
    fn declared(&self) -> Declared {
        match self {
            Asking::Nobody => Declared::default(),
            Asking::Session(_, declared) | Asking::Waiter(_, declared) => *declared,
        }
    }
}

pub use crate::caller::Declared;

/// A call that needs a person's approval, as the door asks about it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GatedCall<'a> {
    /// The tool, `backend.tool`.
    pub tool: &'a str,
    /// Its arguments' JSON text.
    pub arguments: &'a str,
    /// The rule that asks, and where it is written.
    pub rule: &'a str,
    /// The script's line that makes the call, when known.
    pub line: Option<u32>,
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
        call: GatedCall<'_>,
    ) -> Result<Verdict, CallFailure> {
        let GatedCall {
            tool,
            arguments,
            rule,
            line,
        } = call;
        let denied = |why: String| CallFailure::new(FailureKind::ApprovalDenied, why);
        if !asking.declared().elicitation {
            return Err(denied(format!(
                "`{tool}` needs a person's approval ({rule}), and this client cannot ask one: it declared no elicitation capability. The call did not run. Use a client that supports elicitation, or ask the operator about the rule."
            )));
        }
        let about = About::Approval {
            tool: tool.to_string(),
            arguments: question::shown_arguments(arguments),
            rule: rule.to_string(),
            line,
        };
        let answered = self
            .pose(asking, caller, execution_id, about)
            .await
            .map_err(|why| {
                denied(format!(
                    "`{tool}` needs a person's approval ({rule}), and {why}. The call did not run."
                ))
            })?;
        let verdict = match answered {
            Some(answered) => answered.verdict(),
            None => Verdict::Denied {
                by: "timeout".into(),
                why: format!(
                    "nobody answered within {} s ([approvals] timeout)",
                    self.settings().timeout.as_secs()
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

    /// Asks a person whether `script` may run, and waits for the answer: `Ok` with who said
    /// yes; an `ApprovalDenied` failure says why not (a no, the timeout, a client that cannot
    /// be asked, too many questions waiting), and then none of its code runs.
    pub(crate) async fn ask_script(
        &self,
        asking: &Asking,
        caller: &Caller,
        execution_id: &str,
        script: ScriptShown,
    ) -> Result<String, CallFailure> {
        let rule = script.rule.clone();
        let denied = |why: String| {
            CallFailure::new(
                FailureKind::ApprovalDenied,
                format!(
                    "this script needs a person's approval before it runs ({rule}), and {why}. None of it ran."
                ),
            )
        };
        if !asking.declared().elicitation {
            return Err(denied("this client cannot ask one: it declared no elicitation capability. Use a client that supports elicitation (its question is then also listed on the console's Approvals page, for another person to answer)".into()));
        }
        let answered = self
            .pose(asking, caller, execution_id, About::Script(script))
            .await
            .map_err(denied)?;
        match answered.map(|a| a.verdict()) {
            Some(Verdict::Approved { by }) => Ok(by),
            Some(Verdict::Denied { by, why }) => Err(denied(format!(
                "it was not approved: {why} (answered by {by})"
            ))),
            None => Err(denied(format!(
                "nobody answered within {} s ([approvals] timeout)",
                self.settings().timeout.as_secs()
            ))),
        }
    }

    /// Asks the person behind `asking` to sign in to `backend` at `url`, and waits until
    /// `signed_in` says they have: `Ok` then; a `SignInRequired` failure, with what to do, when
    /// they decline, do not sign in within the timeout, or cannot be asked (their client
    /// declared no URL elicitation).
    pub(crate) async fn ask_sign_in(
        &self,
        asking: &Asking,
        caller: &Caller,
        execution_id: &str,
        backend: &str,
        url: String,
        signed_in: impl Future<Output = ()>,
    ) -> Result<(), CallFailure> {
        let timeout = self.settings().timeout;
        let failure = |why: String| {
            CallFailure::new(
                FailureKind::SignInRequired,
                format!(
                    "backend `{backend}` is reached with your own sign-in, and {why}. The call did not run. Sign in at {url} (the console's Credentials page, Connect beside `{backend}`), then run the code again"
                ),
            )
        };
        if !asking.declared().url_elicitation {
            return Err(failure(
                "you have not signed in; this client cannot show a sign-in link (it declared no URL elicitation)".into(),
            ));
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut signed_in = std::pin::pin!(signed_in);
        let about = About::SignIn {
            backend: backend.to_string(),
            url: url.clone(),
        };
        tokio::select! {
            () = &mut signed_in => return Ok(()),
            answered = self.pose(asking, caller, execution_id, about) => match answered {
                Err(why) => return Err(failure(why)),
                Ok(Some(answered)) if matches!(answered.verdict(), Verdict::Approved { .. }) => {}
                Ok(Some(_)) => return Err(failure("you declined to sign in".into())),
                Ok(None) => {}
            },
        }
        // They opened the link (or the question lapsed): the call waits for the sign-in itself.
        tokio::time::timeout_at(deadline, signed_in)
            .await
            .map_err(|_| {
                failure(format!(
                    "nobody signed in within {} s ([approvals] timeout)",
                    timeout.as_secs()
                ))
            })
    }

    /// Passes a backend's own request during a call (`elicitation/create` or
    /// `sampling/createMessage`) to the person behind the call's client, and waits for the
    /// client's response; refused, with why, when the client cannot take it.
    pub(crate) async fn relay(
        &self,
        asking: &Asking,
        caller: &Caller,
        execution_id: &str,
        backend: &str,
        request: rmcp::model::InputRequest,
    ) -> Result<serde_json::Value, String> {
        let declared = asking.declared();
        let (takes, what, capability) = match &request {
            rmcp::model::InputRequest::Elicitation(_) => (
                declared.elicitation,
                "a question (elicitation/create)",
                "elicitation",
            ),
            rmcp::model::InputRequest::CreateMessage(_) => (
                declared.sampling,
                "a model completion (sampling/createMessage)",
                "sampling",
            ),
            _ => (false, "a list of roots", "roots"),
        };
        if !takes {
            return Err(format!(
                "backend `{backend}` asked the client for {what}, and the client that runs this script declared no {capability} capability, so sandgate cannot pass it on"
            ));
        }
        let about = About::Backend {
            backend: backend.to_string(),
            request: Box::new(request),
        };
        match self.pose(asking, caller, execution_id, about).await? {
            // The client could not ask (its error is the why).
            Some(Answered {
                response: serde_json::Value::Null,
                why: Some(why),
                ..
            }) => Err(why),
            Some(answered) => Ok(answered.response),
            None => Err(format!(
                "the client did not answer backend `{backend}`'s request within {} s ([approvals] timeout)",
                self.settings().timeout.as_secs()
            )),
        }
    }

    /// Puts a question to the person behind `asking` and waits for the answer (`None`: none
    /// came in time); refused when the caller or the gateway has too many waiting already.
    async fn pose(
        &self,
        asking: &Asking,
        caller: &Caller,
        execution_id: &str,
        about: About,
    ) -> Result<Option<Answered>, String> {
        let settings = self.settings();
        let owner = owner_of(caller);
        let (question, answer) = {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            waiting.retain(|_, q| !q.expired());
            let mine = waiting.values().filter(|q| q.owner == owner).count();
            if mine >= settings.max_waiting_per_caller {
                return Err(format!(
                    "{mine} of this caller's questions already wait for an answer ([approvals] max_waiting_per_caller = {}); ask fewer at once: await each before the next",
                    settings.max_waiting_per_caller
                ));
            }
            if waiting.len() >= settings.max_waiting {
                return Err(format!(
                    "this gateway already holds {} questions waiting ([approvals] max_waiting); try again later",
                    waiting.len()
                ));
            }
            let (question, answer) =
                Question::new(caller, owner, execution_id, about, settings.timeout);
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
            Asking::Session(peer, _) => {
                question.send_to_session(peer.clone(), settings.timeout);
            }
            Asking::Waiter(inbox, _) => inbox.asked(question.clone()),
        }
        Ok(tokio::time::timeout(settings.timeout, answer)
            .await
            .ok()
            .and_then(Result::ok))
    }

    /// Answers approval `id` yes or no for someone who may (see [`Answerer`]); refused when it
    /// is not waiting (never asked, already answered, expired), not theirs to answer, or not an
    /// approval (a backend's own question is answered in the client that was asked).
    pub fn answer(&self, id: &str, by: &Answerer, verdict: Verdict) -> Result<(), String> {
        let action = match verdict {
            Verdict::Approved { .. } => "accept",
            Verdict::Denied { .. } => "decline",
        };
        let answered = Answered {
            response: serde_json::json!({ "action": action }),
            by: by.name(),
            why: match verdict {
                Verdict::Denied { why, .. } => Some(why),
                Verdict::Approved { .. } => None,
            },
        };
        self.resolve(id, by, answered, true)
    }

    /// Gives waiting question `id` its answer, if `by` may give it.
    fn resolve(
        &self,
        id: &str,
        by: &Answerer,
        answered: Answered,
        approvals_only: bool,
    ) -> Result<(), String> {
        let question = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned();
        let Some(question) = question
            .filter(|q| !q.expired() && by.may_answer(q) && (!approvals_only || q.is_approval()))
        else {
            return Err(format!(
                "no approval {} waits for your answer: it was never asked, is answered already, expired, or is not yours",
                question::shown_id(id)
            ));
        };
        if question.resolve(answered) {
            self.ended(&question, true);
            Ok(())
        } else {
            Err(format!(
                "approval {} is answered already",
                question::shown_id(id)
            ))
        }
    }

    /// Answers questions with a client's `inputResponses` (by question id), all or none: every
    /// id must be one of `asked` (what the client was asked) and wait for `by`'s answer, and
    /// every response must be the result its request asks for (an elicitation result, or a
    /// sampling result). Nothing is answered when one is not: the client is told which and
    /// why. A late answer to a question that lapsed is let go.
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
        let mut answers = Vec::with_capacity(responses.len());
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
                let question = waiting.get(id).cloned();
                if let Some(question) = question {
                    question.check_response(response).map_err(|why| {
                        format!(
                            "inputResponses[{}] {why}. Nothing was answered",
                            question::shown_id(id)
                        )
                    })?;
                    answers.push((id.clone(), response.clone()));
                }
            }
        }
        let count = answers.len();
        for (id, response) in answers {
            let answered = Answered {
                response,
                by: by.name(),
                why: None,
            };
            // One that expired or was withdrawn in between lapsed already.
            let _ = self.resolve(&id, by, answered, false);
        }
        Ok(count)
    }

    /// The questions `by` may answer, oldest first (at most `limit`).
    pub fn visible(&self, by: &Answerer, limit: usize) -> Vec<QuestionView> {
        let waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let mut shown: Vec<&Arc<Question>> = waiting
            .values()
            // An answered question stays in `waiting` until its call takes the answer: it is
            // not listed again meanwhile (a page reloaded right after an answer showed it).
            .filter(|q| q.is_open() && by.may_answer(q) && q.is_approval())
            .collect();
        shown.sort_by_key(|q| q.asked_at_ms);
        shown
            .into_iter()
            .filter_map(|q| q.view())
            .take(limit)
            .collect()
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

/// Where a backend's own requests during one execution's call go: the person behind the
/// execution's client, through `Approvals::relay`.
#[derive(Debug)]
pub struct AsksFor {
    /// The questions' registry.
    pub approvals: Arc<Approvals>,
    /// How the client is asked.
    pub asking: Asking,
    /// Whose call it is.
    pub caller: Caller,
    /// The execution that made the call.
    pub execution_id: String,
}

impl sandgate_upstream::AskClient for AsksFor {
    fn ask(
        &self,
        backend: &str,
        request: rmcp::model::InputRequest,
    ) -> futures::future::BoxFuture<'static, Result<serde_json::Value, String>> {
        let (approvals, asking, caller, execution_id, backend) = (
            self.approvals.clone(),
            self.asking.clone(),
            self.caller.clone(),
            self.execution_id.clone(),
            backend.to_string(),
        );
        Box::pin(async move {
            approvals
                .relay(&asking, &caller, &execution_id, &backend, request)
                .await
        })
    }
}

/// Who answers a question, and so which questions they may answer.
#[derive(Debug, Clone)]
pub enum Answerer {
    /// The client that runs the execution (its retry or `tasks/update`): the caller's own key.
    /// The person behind it is asked by its own client, as elicitation asks.
    Owner(String),
    /// A console user. An approver answers questions asked under the profiles its own profile
    /// `approves` (an admin, any profile's), and never one its own principal asked: the one
    /// who says yes is not the one who asks, whatever door it comes through.
    Console {
        /// Their profile.
        profile: String,
        /// Who they are.
        principal: Principal,
        /// Whether their profile is an admin's.
        admin: bool,
        /// The profiles whose questions their profile approves (`approves`).
        approves: Vec<String>,
    },
}

impl Answerer {
    fn may_answer(&self, question: &Question) -> bool {
        match self {
            Answerer::Owner(owner) => *owner == question.owner,
            Answerer::Console {
                principal,
                admin,
                approves,
                ..
            } => {
                principal.is_accountable()
                    && *principal != question.asker
                    && (*admin || approves.contains(&question.profile))
            }
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
            Answerer::Console {
                profile, principal, ..
            } => format!("console:{profile}:{}", principal.key()),
        }
    }
}

/// The key that names `caller` as the owner of its questions: its store key and its token, so
/// another caller (another session, profile, user or token) owns none of them.
pub fn owner_of(caller: &Caller) -> String {
    caller.owner_key("")
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
        if let Asking::Waiter(inbox, _) = &self.asking {
            inbox.withdrawn(&self.question.id);
        }
        self.question.close();
        self.approvals.ended(&self.question, false);
    }
}

#[cfg(test)]
mod tests;

/// The most answers one retry or `tasks/update` may carry.
const MAX_ANSWERS: usize = 256;
