//! What travels with one tool call besides its arguments: how long it may take, the trace it
//! belongs to (sent in the request's `_meta` as W3C `traceparent`/`tracestate`), where the
//! backend's own progress notifications for it go, and who its own requests go to.

use std::time::Duration;

use rmcp::model::RequestMetaObject;
use sandgate_config::Secret;
use tokio::sync::mpsc;

/// One call's context. The default is no limit beyond the backend's, no trace and no
/// progress.
#[derive(Debug, Default, Clone)]
pub struct CallContext {
    /// The longest the call may take; never longer than the backend's `timeout`.
    pub limit: Option<Duration>,
    /// The W3C `traceparent` and `tracestate` to send.
    pub trace: Option<(String, Option<String>)>,
    /// Where the backend's progress notifications for this call go (rmcp gives each request
    /// its own progress token). A receiver that does not keep up misses some (they are never
    /// waited for).
    pub progress: Option<mpsc::Sender<BackendProgress>>,
    /// Who the call is for, on a backend that serves each user on a connection of its own
    /// (`per_user`); ignored by other backends.
    pub user: Option<UserConnection>,
    /// Where the backend's own requests during the call go (`elicitation/create`,
    /// `sampling/createMessage`): the person behind the call's client (see `asks`).
    pub asks: Option<std::sync::Arc<dyn crate::asks::AskClient>>,
}

/// One progress notification a backend sent for a call.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendProgress {
    /// How far it is.
    pub progress: f64,
    /// Out of how much, when the backend knows.
    pub total: Option<f64>,
    /// What it said it is doing.
    pub message: Option<String>,
}

impl CallContext {
    /// The request's `_meta`, if this call has a trace to send.
    pub(crate) fn meta(&self) -> Option<RequestMetaObject> {
        let (traceparent, tracestate) = self.trace.as_ref()?;
        let mut meta = RequestMetaObject::default();
        meta.set_traceparent(traceparent.as_str());
        if let Some(state) = tracestate {
            meta.set_tracestate(state.as_str());
        }
        Some(meta)
    }
}

/// Who a call is for, on a per-user backend: the user's id, and its secret when the backend
/// takes one.
#[derive(Clone)]
pub struct UserConnection {
    /// The user's id (a user an identity provider proved, a static token, or the local user).
    pub owner: String,
    /// The user's secret for this backend (its own stored one, or an exchanged token).
    pub secret: Option<Secret>,
}

impl std::fmt::Debug for UserConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserConnection")
            .field("owner", &self.owner)
            .field("secret", &self.secret.as_ref().map(|_| "<hidden>"))
            .finish()
    }
}
