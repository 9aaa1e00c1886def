//! The upstream crate's one error type. Messages are written for the model that made the call:
//! they say what happened and what to do next, and never include backend stderr or secrets.

use std::time::Duration;

/// Why a backend call did not produce a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UpstreamError {
    /// No backend by that name is configured.
    #[error("no backend named `{backend}` is configured. Known backends: {known}.")]
    UnknownBackend {
        /// The name asked for.
        backend: String,
        /// Comma-separated configured names.
        known: String,
    },
    /// The backend is configured but disabled.
    #[error("backend `{backend}` is disabled in the config. Enable it to use its tools.")]
    Disabled {
        /// The backend.
        backend: String,
    },
    /// The backend did not finish starting within the call's timeout.
    #[error(
        "backend `{backend}` is still starting (waited {waited:?}). Retry in a few seconds; sandgate://backend/{backend} shows its status."
    )]
    StillStarting {
        /// The backend.
        backend: String,
        /// How long the call waited.
        waited: Duration,
    },
    /// The backend is down and not currently retrying (restart budget spent).
    #[error(
        "backend `{backend}` is unavailable: {reason}. Its tools cannot be called until it recovers; sandgate://backend/{backend} shows its status."
    )]
    Unavailable {
        /// The backend.
        backend: String,
        /// Why it is down.
        reason: String,
        /// Whether another attempt is scheduled (it is restarting).
        retrying: bool,
    },
    /// A per-user backend did not accept the connection made with the caller's own credential.
    #[error(
        "backend `{backend}` did not accept the connection made with your own credential: {reason}. If the credential is wrong or expired, set it again (in the console, or `sandgate credentials set {backend}`)"
    )]
    UserConnectionRefused {
        /// The backend.
        backend: String,
        /// What the connection attempt met.
        reason: String,
    },
    /// The tool is not among the backend's exposed tools.
    #[error(
        "backend `{backend}` has no tool `{tool}` (or the config's allow/deny filter hides it). Use search_tools to find the right name."
    )]
    UnknownTool {
        /// The backend.
        backend: String,
        /// The tool asked for.
        tool: String,
    },
    /// The tool is held by the supply-chain guard until a person reviews it (issue 49).
    #[error(
        "`{backend}.{tool}` is held for review: {reason}. Nothing was sent to the backend. An operator reviews it with `sandgate pins diff {backend}.{tool}`, then `sandgate pins accept {backend}.{tool}` or `sandgate pins reject {backend}.{tool}` (or on the console's Pins page); until then use another tool."
    )]
    Held {
        /// The backend.
        backend: String,
        /// The tool.
        tool: String,
        /// Why it is held.
        reason: &'static str,
        /// Whether it changed (else it is new).
        changed: bool,
    },
    /// The call took longer than the timeout.
    #[error("calling `{backend}.{tool}` timed out after {timeout:?}{hint}")]
    Timeout {
        /// The backend.
        backend: String,
        /// The tool.
        tool: String,
        /// The timeout that fired.
        timeout: Duration,
        /// Extra diagnosis, such as non-protocol output seen on the backend's stdout.
        hint: String,
    },
    /// A backend that authorizes each user refused the call's token (HTTP 401), or wants a
    /// wider scope for it (403 `insufficient_scope`): the call never reached the tool.
    #[error(
        "backend `{backend}` refused the authorization of the call to `{tool}`{}; the call did not reach the tool",
        match wider { Some(scope) => format!(" (it wants the scope {scope})"), None => " (HTTP 401)".to_string() }
    )]
    Unauthorized {
        /// The backend.
        backend: String,
        /// The tool.
        tool: String,
        /// The scope it wants, for an `insufficient_scope` refusal that names one.
        wider: Option<String>,
    },
    /// The connection closed while the call was in flight (crash, exit, network).
    #[error(
        "backend `{backend}` went away during the call to `{tool}` ({detail}). {then}; the call may or may not have taken effect, so check before retrying a write."
    )]
    ConnectionLost {
        /// The backend.
        backend: String,
        /// The tool.
        tool: String,
        /// Exit status or transport error.
        detail: String,
        /// What happens to the backend now: restarted after a crash, taken out of the config
        /// by a reload, or restarted by one with its changed entry.
        then: String,
    },
    /// The backend answered, but with a result sandgate does not pass on (too large, too
    /// deep, not UTF-8, not a tool result). The backend stays up.
    #[error(
        "`{backend}.{tool}` answered with a result sandgate cannot pass on: {reason}. The backend is still running."
    )]
    ResultRefused {
        /// The backend.
        backend: String,
        /// The tool.
        tool: String,
        /// What was wrong with the result, and what to do.
        reason: String,
    },
    /// The backend answered with a JSON-RPC error.
    #[error("`{backend}.{tool}` failed: {message}")]
    Protocol {
        /// The backend.
        backend: String,
        /// The tool.
        tool: String,
        /// The backend's error message.
        message: String,
    },
}

/// Most characters of a backend's own error message passed on to the model.
pub(crate) const MAX_BACKEND_MESSAGE_CHARS: usize = 2000;

/// A backend's error message, cut to [`MAX_BACKEND_MESSAGE_CHARS`] with a note of how much
/// was left out.
/// It passes the one redaction step first: a backend's words may quote a credential.
pub(crate) fn bounded(message: &str) -> String {
    let message = sandgate_redact::redact(message);
    let message = message.as_ref();
    match cut_at_chars(message, MAX_BACKEND_MESSAGE_CHARS) {
        None => message.to_string(),
        Some((kept, rest)) => format!(
            "{kept}… ({} more characters not shown)",
            rest.chars().count()
        ),
    }
}

/// `text` split after its first `max` characters, or `None` when it has no more than that:
/// how every text a backend sends is cut to a bound.
pub(crate) fn cut_at_chars(text: &str, max: usize) -> Option<(&str, &str)> {
    text.char_indices()
        .nth(max)
        .map(|(end, _)| text.split_at(end))
}
