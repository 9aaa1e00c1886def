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

    /// The store key of `part` (`output`, `logs` or `error`) of execution `id`, or `None` for
    /// an unknown part.
    pub fn key(&self, id: &str, part: &str) -> Option<String> {
        let base = match part {
            "output" => id.to_string(),
            "logs" => format!("{id}/logs"),
            "error" => format!("{id}/error"),
            _ => return None,
        };
        Some(match self {
            Caller::Local => base,
            Caller::Session(hash) => format!("{base}@{hash}"),
            Caller::Stateless => format!("{base}@http"),
        })
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
        for part in ["output", "logs", "error"] {
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
        assert_eq!(Caller::Local.key("ex-1", "output").as_deref(), Some("ex-1"));
        assert_eq!(Caller::Local.key("ex-1", "code"), None);
    }
}
