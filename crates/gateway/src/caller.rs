//! Who is calling, as far as stored outputs are concerned: an execution's stored result, logs
//! and error are readable only by the caller that produced them. Over HTTP that is the MCP
//! session (`Mcp-Session-Id`); a stateless (2026-07-28) caller has no session, and its outputs
//! are shared only with other stateless callers, who would still have to guess a 128-bit id.
//! On stdio the caller is the local user, who owns the store anyway. Anyone else is told
//! "not found", exactly as for an id that never existed.
//!
//! The owner is part of the store key, so there is nothing to check that could be forgotten:
//! another caller's key simply names no row.

use rmcp::service::{RequestContext, RoleServer};

/// The owner of what an execution stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The stdio client: the local user.
    Local,
    /// An HTTP client in an MCP session, by a hash of its session id.
    Session(String),
    /// An HTTP client without a session.
    Stateless,
}

impl Caller {
    /// The caller of one request.
    pub fn of(context: &RequestContext<RoleServer>) -> Caller {
        let Some(parts) = context.extensions.get::<http::request::Parts>() else {
            return Caller::Local;
        };
        match parts.headers.get("mcp-session-id") {
            Some(session) => Caller::Session(fnv_hex(session.as_bytes())),
            None => Caller::Stateless,
        }
    }

    /// The store key of `part` of execution `id`.
    pub fn key(&self, id: &str, part: Part) -> String {
        let base = match part {
            Part::Output => id.to_string(),
            Part::Logs | Part::Error => format!("{id}/{}", part.as_str()),
        };
        match self {
            Caller::Local => base,
            Caller::Session(hash) => format!("{base}@{hash}"),
            Caller::Stateless => format!("{base}@http"),
        }
    }
}

/// The parts of an execution's output the store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The whole result.
    Output,
    /// The whole logs.
    Logs,
    /// The whole error message and hint.
    Error,
}

impl Part {
    /// The name in `read_output`'s `part` and in `sandgate://executions/{id}/{part}`.
    pub fn as_str(self) -> &'static str {
        match self {
            Part::Output => "output",
            Part::Logs => "logs",
            Part::Error => "error",
        }
    }

    /// The part named `name`, if there is one.
    pub fn named(name: &str) -> Option<Part> {
        [Part::Output, Part::Logs, Part::Error]
            .into_iter()
            .find(|part| part.as_str() == name)
    }
}

/// FNV-1a, 64 bits, as hex: the session id itself is not kept.
pub(crate) fn fnv_hex(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_caller_has_its_own_keys() {
        let one = Caller::Session(fnv_hex(b"session-one"));
        let two = Caller::Session(fnv_hex(b"session-two"));
        for part in [Part::Output, Part::Logs, Part::Error] {
            let keys = [
                Caller::Local.key("ex-1", part),
                one.key("ex-1", part),
                two.key("ex-1", part),
                Caller::Stateless.key("ex-1", part),
            ];
            for (i, a) in keys.iter().enumerate() {
                for b in &keys[i + 1..] {
                    assert_ne!(a, b);
                }
            }
        }
        assert_eq!(Caller::Local.key("ex-1", Part::Output), "ex-1");
        assert_eq!(Caller::Local.key("ex-1", Part::Logs), "ex-1/logs");
        assert_eq!(Part::named("code"), None);
    }
}
