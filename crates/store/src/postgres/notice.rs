//! What replicas tell each other through PostgreSQL's LISTEN/NOTIFY: the channels, and the
//! notices (a session that ended, of which kind). Both the listener and the writers of
//! notices read this; it reads neither.

/// The channel changes are announced on.
pub(crate) const CHANNEL: &str = "sandgate_changes";
/// The channel events are announced on.
pub(crate) const EVENTS: &str = "sandgate_events";

/// Something a replica announced.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// A session ended (logged out, closed, or its token went).
    SessionEnded {
        /// Which sessions.
        kind: SessionKind,
        /// Its id.
        id: String,
    },
}

impl Notice {
    /// The notice in a payload, if it is one (anything else is ignored).
    pub(super) fn read(channel: &str, payload: &str) -> Option<Notice> {
        if channel != EVENTS {
            return None;
        }
        if let Some(rest) = payload.strip_prefix("session:") {
            let (kind, id) = rest.split_once(':')?;
            return Some(Notice::SessionEnded {
                kind: SessionKind::named(kind)?,
                id: id.to_string(),
            });
        }
        None
    }
}

/// Which sessions: MCP sessions and console logins are kept apart, so an id of one is never
/// taken for the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionKind {
    /// A 2025-11-25 MCP session (`Mcp-Session-Id`).
    Mcp,
    /// A console login (its cookie).
    Console,
}

impl SessionKind {
    /// The name kept in the table and in notices.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Mcp => "mcp",
            SessionKind::Console => "console",
        }
    }

    /// The kind named `name`.
    pub fn named(name: &str) -> Option<SessionKind> {
        match name {
            "mcp" => Some(SessionKind::Mcp),
            "console" => Some(SessionKind::Console),
            _ => None,
        }
    }
}
