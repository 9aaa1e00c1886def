//! One question to a person: an approval of a call (which call, under which rule, for which
//! execution; its arguments bounded, with secrets masked) or of a whole script before it runs
//! (its code bounded, every character no person sees written as its escape, and the tools it
//! names with why each asks), or a backend's own request passed on; how it reaches a session's
//! client; and the one answer it takes.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

// Sampling is deprecated by SEP-2577, but a 2025-11-25 backend may still ask for it, and a
// client that declares it still takes it: sandgate passes it on.
#[allow(deprecated)]
use rmcp::model::CreateMessageResult;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest,
};
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use crate::caller::{Caller, Principal};

/// The sender a question is answered through.
type AnswerSender = oneshot::Sender<Answered>;

/// When a question asked now expires.
fn expiry(timeout: Duration) -> Instant {
    Instant::now() + timeout
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

/// The most characters of a call's arguments a person is shown.
pub const SHOWN_ARGUMENT_CHARS: usize = 2_000;
/// The deepest nesting of arguments shown; deeper values show as `…`.
const SHOWN_DEPTH: usize = 6;
/// The most entries of one array or object shown.
const SHOWN_ENTRIES: usize = 20;
/// What a masked value shows.
const MASK: &str = "•••";

/// What a question is about.
#[derive(Debug, Clone)]
pub enum About {
    /// A call that needs a person's approval.
    Approval {
        /// The tool, `backend.tool`.
        tool: String,
        /// Its arguments as shown: bounded, secrets masked.
        arguments: String,
        /// The rule that asks for approval, and where it is written.
        rule: String,
        /// The line of the script that makes the call, when known.
        line: Option<u32>,
    },
    /// A script a person approves before any of its code runs.
    Script(ScriptShown),
    /// A link the person opens to sign in to a backend, while a call waits for it.
    SignIn {
        /// The backend.
        backend: String,
        /// Where the sign-in starts (the console's Connect).
        url: String,
    },
    /// A backend's own request during a call, passed on to the client.
    Backend {
        /// The backend that asks.
        backend: String,
        /// Its request (boxed: it is far larger than an approval).
        request: Box<InputRequest>,
    },
}

/// A client's answer to a question, and who gave it.
#[derive(Debug, Clone)]
pub struct Answered {
    /// The response, as the request's result (`ElicitResult`, `CreateMessageResult`).
    pub response: Value,
    /// Who answered (`client`, `console:<profile>`).
    pub by: String,
    /// Why, when the answer is a no with a reason of its own.
    pub why: Option<String>,
}

impl Answered {
    /// The verdict it gives an approval: accept is yes (unless its content says
    /// `approve: false`); decline, cancel, or anything else, no.
    pub fn verdict(&self) -> Verdict {
        match serde_json::from_value::<ElicitResult>(self.response.clone()) {
            Ok(result) => match verdict_of(result.action, result.content.as_ref()) {
                Verdict::Approved { .. } => Verdict::Approved {
                    by: self.by.clone(),
                },
                Verdict::Denied { why, .. } => Verdict::Denied {
                    by: self.by.clone(),
                    why: self.why.clone().unwrap_or(why),
                },
            },
            Err(_) => Verdict::Denied {
                by: self.by.clone(),
                why: "the answer was not an elicitation result".into(),
            },
        }
    }
}

/// A question waiting for its answer.
#[derive(Debug)]
pub struct Question {
    /// Its id (`ap-` and 128 random bits): how an answer names it.
    pub id: String,
    /// The execution whose call waits.
    pub execution_id: String,
    /// Who asked (see `owner_of`): who may answer it as its client.
    pub owner: String,
    /// The asker's profile.
    pub profile: String,
    /// Who asked: never the one who may say yes in the console.
    pub asker: Principal,
    /// What it is about.
    pub about: About,
    /// When it was asked (ms since the epoch).
    pub asked_at_ms: u64,
    expires: Instant,
    answer: Mutex<Option<AnswerSender>>,
}

/// An approval as the console lists it.
#[derive(Debug, Clone, Serialize)]
pub struct QuestionView {
    /// Its id.
    pub id: String,
    /// The execution whose call waits.
    pub execution_id: String,
    /// The asker's profile.
    pub profile: String,
    /// Who asked (`token:ID`, `user:ID`, `local`): another principal answers it.
    pub asker: String,
    /// What is approved: `call` (one call) or `script` (a whole script, before it runs).
    pub kind: &'static str,
    /// The tool; for a script, `script (<language>)`.
    pub tool: String,
    /// Its arguments as shown; for a script, its code as shown.
    pub arguments: String,
    /// For a script, the tools it names, each with why it asks.
    pub tools: Vec<String>,
    /// The rule.
    pub rule: String,
    /// The line of the script that makes the call, when known.
    pub line: Option<u32>,
    /// When it was asked (ms since the epoch).
    pub asked_at_ms: u64,
    /// Seconds until it is denied for want of an answer.
    pub expires_in_s: u64,
}

impl Question {
    /// A new question from `caller` (who owns it as `owner`), and where its answer arrives.
    pub(super) fn new(
        caller: &Caller,
        owner: String,
        execution_id: &str,
        about: About,
        timeout: Duration,
    ) -> (Question, oneshot::Receiver<Answered>) {
        let (send, receive) = oneshot::channel();
        let question = Question {
            id: sandgate_store::new_random_id("ap"),
            execution_id: execution_id.to_string(),
            owner,
            profile: caller.profile().to_string(),
            asker: caller.principal(),
            about,
            asked_at_ms: u64::try_from(sandgate_store::now_ms()).unwrap_or(0),
            expires: expiry(timeout),
            answer: Mutex::new(Some(send)),
        };
        (question, receive)
    }

    /// Whether it asks for an approval, of a call or a script (the console answers only
    /// those).
    pub fn is_approval(&self) -> bool {
        matches!(self.about, About::Approval { .. } | About::Script(_))
    }

    /// Whether its time is up.
    pub fn expired(&self) -> bool {
        Instant::now() >= self.expires
    }

    /// Whether it still waits for an answer: not answered, not expired.
    pub fn is_open(&self) -> bool {
        !self.expired()
            && self
                .answer
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
    }

    /// Gives it its answer; `false` when it had one already.
    pub(super) fn resolve(&self, answered: Answered) -> bool {
        let sender = self
            .answer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match sender {
            Some(sender) => sender.send(answered).is_ok(),
            None => false,
        }
    }

    /// Takes no answer any more.
    pub(super) fn close(&self) {
        self.answer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// What the console shows of an approval (`None` for a backend's question).
    pub fn view(&self) -> Option<QuestionView> {
        let (kind, tool, arguments, tools, rule, line) = match &self.about {
            About::Approval {
                tool,
                arguments,
                rule,
                line,
            } => ("call", tool.clone(), arguments.clone(), vec![], rule, *line),
            About::Script(script) => (
                "script",
                format!("script ({})", script.language),
                script.code.clone(),
                script.tools_shown(),
                &script.rule,
                None,
            ),
            About::Backend { .. } | About::SignIn { .. } => return None,
        };
        Some(QuestionView {
            id: self.id.clone(),
            execution_id: self.execution_id.clone(),
            profile: self.profile.clone(),
            asker: self.asker.key(),
            kind,
            tool,
            arguments,
            tools,
            rule: rule.clone(),
            line,
            asked_at_ms: self.asked_at_ms,
            expires_in_s: self
                .expires
                .saturating_duration_since(Instant::now())
                .as_secs(),
        })
    }

    /// The request the client is sent: for an approval, a form with nothing to fill in, where
    /// accept means yes; for a backend's request, that request, its message saying which
    /// backend asks.
    pub fn request(&self) -> InputRequest {
        match &self.about {
            About::Approval {
                tool,
                arguments,
                rule,
                line,
            } => InputRequest::Elicitation(ElicitRequest::new(
                ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: format!(
                        "Approve this call? A script (execution {}{}) wants to call `{tool}` with:\n{arguments}\nIt needs your approval ({rule}). Accept to run it; decline to refuse it.",
                        self.execution_id,
                        line.map(|l| format!(", line {l}")).unwrap_or_default()
                    ),
                    requested_schema: ElicitationSchema::new(Default::default()),
                },
            )),
            About::Script(script) => InputRequest::Elicitation(ElicitRequest::new(
                ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: script.message(&self.execution_id, &self.profile, &self.asker),
                    requested_schema: ElicitationSchema::new(Default::default()),
                },
            )),
            About::SignIn { backend, url } => InputRequest::Elicitation(ElicitRequest::new(
                ElicitRequestParams::UrlElicitationParams {
                    meta: None,
                    message: format!(
                        "Sign in to backend `{backend}`: a script's call to it waits for your sign-in (execution {}). Open the link (logged in to sandgate's console), sign in there, and the call goes on by itself; decline, and the call fails.",
                        self.execution_id
                    ),
                    url: url.clone(),
                    elicitation_id: self.id.clone(),
                },
            )),
            About::Backend { backend, request } => named(backend, (**request).clone()),
        }
    }

    /// Whether `response` is the kind of result this question's request asks for; else what
    /// is wrong with it.
    #[allow(deprecated)]
    pub fn check_response(&self, response: &Value) -> Result<(), String> {
        let fits = match self.request() {
            InputRequest::CreateMessage(_) => {
                serde_json::from_value::<CreateMessageResult>(response.clone()).map(|_| ())
            }
            _ => serde_json::from_value::<ElicitResult>(response.clone()).map(|_| ()),
        };
        fits.map_err(|e| {
            format!(
                "is not the result its request asks for ({}): answer an elicitation with {{\"action\": \"accept\"}} or {{\"action\": \"decline\"}}",
                bounded(&e.to_string(), 200)
            )
        })
    }

    /// Sends it to a session's client (`elicitation/create` or `sampling/createMessage`); the
    /// client's response answers it.
    #[allow(deprecated)]
    pub(super) fn send_to_session(
        self: &std::sync::Arc<Self>,
        peer: rmcp::Peer<rmcp::RoleServer>,
        timeout: Duration,
    ) {
        let question = self.clone();
        tokio::spawn(async move {
            let asked = match question.request() {
                InputRequest::Elicitation(request) => peer
                    .create_elicitation_with_timeout(request.params, Some(timeout))
                    .await
                    .map(|result| serde_json::to_value(result).unwrap_or_default()),
                InputRequest::CreateMessage(request) => peer
                    .create_message(request.params)
                    .await
                    .map(|result| serde_json::to_value(result).unwrap_or_default()),
                _ => return,
            };
            let answered = match asked {
                Ok(response) => Answered {
                    response,
                    by: "client".into(),
                    why: None,
                },
                Err(error) => Answered {
                    response: Value::Null,
                    by: "client".into(),
                    why: Some(format!(
                        "the client could not ask: {}",
                        bounded(&error.to_string(), 300)
                    )),
                },
            };
            question.resolve(answered);
        });
    }
}

/// The most characters of a script's code a person is shown; the tools it names are read from
/// all of it.
pub const SHOWN_CODE_CHARS: usize = 8_000;
/// The most tools a question lists.
const SHOWN_TOOLS: usize = 50;

/// A script as a person is asked about it.
#[derive(Debug, Clone)]
pub struct ScriptShown {
    /// Its code as shown: escaped, bounded, and saying how much was left out.
    pub code: String,
    /// Its language (`typescript`, `python`).
    pub language: &'static str,
    /// The tools it names (`backend.tool`), each with why it asks, when it does.
    pub tools: Vec<NamedTool>,
    /// It reaches tools in a way the gateway cannot read, so it may call tools not listed.
    pub unsure: bool,
    /// The rule that asks, and where it is written.
    pub rule: String,
}

/// A tool a script names, as the question lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedTool {
    /// `backend.tool`.
    pub tool: String,
    /// Why it asks: the `approve` rule that gates it, or that it may write; `None` when it
    /// only reads.
    pub why: Option<String>,
}

impl ScriptShown {
    /// A script as shown: `code` with its hidden characters escaped and cut to
    /// `SHOWN_CODE_CHARS`.
    pub fn new(
        code: &str,
        language: &'static str,
        tools: Vec<NamedTool>,
        unsure: bool,
        rule: String,
    ) -> ScriptShown {
        let escaped = sandgate_pins::escaped(code);
        let total = escaped.chars().count();
        let mut shown = bounded(&escaped, SHOWN_CODE_CHARS);
        if total > SHOWN_CODE_CHARS {
            shown.push_str(&format!(
                "\n[{} more characters not shown; the tools below are read from all of it]",
                total - SHOWN_CODE_CHARS
            ));
        }
        ScriptShown {
            code: shown,
            language,
            tools,
            unsure,
            rule,
        }
    }

    /// The tools as listed: `backend.tool (why)`, at most `SHOWN_TOOLS`, and a line for a
    /// script that reaches tools it does not name.
    pub fn tools_shown(&self) -> Vec<String> {
        let mut shown: Vec<String> = self
            .tools
            .iter()
            .take(SHOWN_TOOLS)
            .map(|t| match &t.why {
                Some(why) => format!("{} ({why})", t.tool),
                None => format!("{} (reads only)", t.tool),
            })
            .collect();
        if self.tools.len() > SHOWN_TOOLS {
            shown.push(format!("… {} more", self.tools.len() - SHOWN_TOOLS));
        }
        if self.unsure {
            shown.push(
                "and tools it reaches by names computed as it runs: any tool it may call".into(),
            );
        }
        shown
    }

    /// The question's text, as a client shows it.
    pub fn message(&self, execution_id: &str, profile: &str, asker: &Principal) -> String {
        let tools = self.tools_shown();
        let tools = if tools.is_empty() {
            "none".to_string()
        } else {
            tools.join("; ")
        };
        format!(
            "Approve this script before it runs? {} asks, under profile `{profile}` (execution {execution_id}). It needs your approval ({}). The {} code:\n{}\nTools it names: {tools}.\nAccept to run exactly this code; decline, and none of it runs.",
            asker.key(),
            self.rule,
            self.language,
            self.code,
        )
    }

    /// The tools named, `backend.tool`.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.tool.clone()).collect()
    }
}

/// A backend's request, its message saying which backend asks.
fn named(backend: &str, request: InputRequest) -> InputRequest {
    match request {
        InputRequest::Elicitation(mut elicit) => {
            if let ElicitRequestParams::FormElicitationParams { message, .. }
            | ElicitRequestParams::UrlElicitationParams { message, .. } = &mut elicit.params
            {
                *message = format!("[backend {backend} asks] {message}");
            }
            InputRequest::Elicitation(elicit)
        }
        other => other,
    }
}

/// The verdict an elicitation's answer gives: accept is yes (unless its content says
/// `approve: false`); decline and cancel are no.
pub fn verdict_of(action: ElicitationAction, content: Option<&Value>) -> Verdict {
    let by = "client".to_string();
    match action {
        ElicitationAction::Accept
            if content
                .and_then(|c| c.get("approve"))
                .and_then(Value::as_bool)
                != Some(false) =>
        {
            Verdict::Approved { by }
        }
        ElicitationAction::Accept => Verdict::Denied {
            by,
            why: "the person answered no".into(),
        },
        ElicitationAction::Decline => Verdict::Denied {
            by,
            why: "the person declined".into(),
        },
        _ => Verdict::Denied {
            by,
            why: "the person cancelled the question".into(),
        },
    }
}

/// A call's arguments as a person is shown them: secrets masked, nesting and entries bounded,
/// at most [`SHOWN_ARGUMENT_CHARS`] characters.
pub fn shown_arguments(arguments: &str) -> String {
    let value: Value = serde_json::from_str(arguments)
        .unwrap_or_else(|_| Value::String(bounded(arguments, SHOWN_ARGUMENT_CHARS)));
    let masked = masked(&value, 0);
    let text = serde_json::to_string_pretty(&masked).unwrap_or_default();
    bounded(&text, SHOWN_ARGUMENT_CHARS)
}

/// `value` with secrets masked and its size bounded.
fn masked(value: &Value, depth: usize) -> Value {
    if depth >= SHOWN_DEPTH {
        return Value::String("…".into());
    }
    match value {
        Value::Object(map) => {
            let mut shown = Map::new();
            for (key, value) in map.iter().take(SHOWN_ENTRIES) {
                let value = if sandgate_catalog::names_a_secret(key) {
                    Value::String(MASK.into())
                } else {
                    masked(value, depth + 1)
                };
                shown.insert(bounded(key, 100), value);
            }
            if map.len() > SHOWN_ENTRIES {
                shown.insert(
                    "…".into(),
                    Value::String(format!("{} more keys", map.len() - SHOWN_ENTRIES)),
                );
            }
            Value::Object(shown)
        }
        Value::Array(items) => {
            let mut shown: Vec<Value> = items
                .iter()
                .take(SHOWN_ENTRIES)
                .map(|v| masked(v, depth + 1))
                .collect();
            if items.len() > SHOWN_ENTRIES {
                shown.push(Value::String(format!(
                    "… {} more",
                    items.len() - SHOWN_ENTRIES
                )));
            }
            Value::Array(shown)
        }
        Value::String(text) if secret_value(text) => Value::String(MASK.into()),
        Value::String(text) => Value::String(bounded(text, 500)),
        other => other.clone(),
    }
}

/// Whether a value looks like a secret whatever its key: a credential scheme, a known token
/// prefix, a JWT, or `name=value` where the name is a secret's.
fn secret_value(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.starts_with("bearer ")
        || lower.starts_with("basic ")
        || lower.starts_with("eyj")
        || [
            "token=",
            "token:",
            "password=",
            "passwd=",
            "secret=",
            "api_key=",
            "apikey=",
        ]
        .iter()
        .any(|assignment| lower.contains(assignment))
        || [
            "ghp_",
            "gho_",
            "ghs_",
            "github_pat_",
            "sk-",
            "xoxb-",
            "xoxp-",
            "akia",
        ]
        .iter()
        .any(|prefix| lower.starts_with(prefix))
}

/// `text`, cut to at most `max` characters with `…` when cut.
pub(crate) fn bounded(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

/// An id from a client, as a message may show it.
pub(super) fn shown_id(id: &str) -> String {
    format!("{:?}", bounded(id, 80))
}
