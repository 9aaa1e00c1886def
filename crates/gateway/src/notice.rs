//! A served config that changed and did not load, and HTTP a stdio client's process could not
//! serve: told where the user looks.
//!
//! sandgate keeps running the config it has when an edit does not load. That used to be said
//! only on the server's stderr, which a Claude Desktop user never sees: they edit the file and
//! nothing happens. The reason is now kept until a later edit loads, and shown in
//! `sandgate://overview` and the console (to admin profiles), and sent once to every connected
//! client as an MCP log message (`notifications/message`, level `error`).

use std::sync::{PoisonError, RwLock};

use crate::clients::Clients;

/// Why the latest change of the served config did not load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigProblem {
    /// The loader's message: the file, the key and a fix.
    pub message: String,
    /// When it was seen (unix ms).
    pub at_ms: u64,
}

/// The served config's latest problem, while it lasts; and why HTTP is not served by a process
/// that serves its stdio client without it.
#[derive(Debug, Default)]
pub(crate) struct Notice {
    problem: RwLock<Option<ConfigProblem>>,
    http_unserved: RwLock<Option<String>>,
}

impl Notice {
    /// Records that the served config's latest change did not load (`Some`), or that it loads
    /// again (`None`); a new problem is sent to every connected client as a log message.
    pub(crate) async fn config_did_not_load(&self, problem: Option<String>, clients: &Clients) {
        let Some(message) = problem else {
            *self.problem.write().unwrap_or_else(PoisonError::into_inner) = None;
            return;
        };
        let text = format!(
            "sandgate could not load the changed config, so it keeps running the one it had: {message}"
        );
        *self.problem.write().unwrap_or_else(PoisonError::into_inner) = Some(ConfigProblem {
            message: text.clone(),
            at_ms: sandgate_store::now_ms().try_into().unwrap_or(0),
        });
        clients.log_error(&text).await;
    }

    /// Why the served config's latest change did not load, if it did not.
    pub(crate) fn config_problem(&self) -> Option<ConfigProblem> {
        self.problem
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records why this process does not serve the config's HTTP (its port is held): said in
    /// the stdio client's first answer (`initialize`'s instructions) and the overview.
    pub(crate) fn http_not_served(&self, message: String) {
        *self
            .http_unserved
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(message);
    }

    /// Why this process does not serve the config's HTTP, if it does not.
    pub(crate) fn http_problem(&self) -> Option<String> {
        self.http_unserved
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
