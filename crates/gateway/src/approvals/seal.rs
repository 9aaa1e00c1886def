//! The request state of a 2026-07-28 input-required result, sealed.
//!
//! A stateless client answers an approval by retrying its `tools/call` with the answers and the
//! `requestState` it was given. That state comes back from the client, so it is untrusted: it
//! is sealed here (HMAC-SHA256, rmcp's `RequestStateCodec`) with a key made when the process
//! starts, bound to the caller that was asked (its owner key is the associated data), and
//! stamped with an expiry. A state that was forged or altered, that another caller presents,
//! that has expired, or that another replica (or this one before a restart) sealed does not
//! open. What it names is checked again against what waits: an answer for a question that is
//! not waiting (never asked, answered already) is refused, so a replayed state runs nothing.

use std::time::Duration;

use rmcp::model::{RequestStateCodec, RequestStateError, SealOptions};
use serde::{Deserialize, Serialize};

/// What a sealed state holds: the execution that waits, and the questions it asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitingState {
    /// The execution's id.
    #[serde(rename = "e")]
    pub execution_id: String,
    /// The ids of the questions the client was asked.
    #[serde(rename = "q")]
    pub questions: Vec<String>,
    /// The digest of the code the execution runs ([`code_digest`]): a retry must send the
    /// same code, so what a person approved is what runs.
    #[serde(rename = "c", default)]
    pub code: String,
}

/// The digest a sealed state binds the code by (SHA-256, first 16 bytes, hex).
pub fn code_digest(code: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(code.as_bytes())[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Seals and opens [`WaitingState`]s with this process's key.
pub struct StateSeal {
    codec: RequestStateCodec,
}

impl std::fmt::Debug for StateSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateSeal(<key>)")
    }
}

impl StateSeal {
    /// A seal with a fresh random key.
    pub fn new() -> StateSeal {
        let mut key = [0u8; 32];
        if getrandom::fill(&mut key).is_err() {
            // The OS source does not fail on Linux; were it ever to, the ids' source stands in.
            let more = sandgate_store::new_random_id("k");
            key.copy_from_slice(&more.as_bytes()[2..34]);
        }
        // 32 bytes: the length `RequestStateCodec::MIN_KEY_LENGTH` asks for, checked below.
        const _: () = assert!(RequestStateCodec::MIN_KEY_LENGTH <= 32);
        StateSeal {
            codec: RequestStateCodec::new_unchecked(key.to_vec()),
        }
    }

    /// `state`, sealed for `owner`, valid for `lifetime`.
    pub fn seal(&self, state: &WaitingState, owner: &str, lifetime: Duration) -> String {
        let options = SealOptions::new()
            .associated_data(owner.as_bytes())
            .ttl(lifetime);
        self.codec
            .seal_json_with(state, &options)
            .unwrap_or_default()
    }

    /// The state `sealed` holds, if this process sealed it for `owner` and it has not expired;
    /// else why not, as a client may read it.
    pub fn open(&self, sealed: &str, owner: &str) -> Result<WaitingState, String> {
        if sealed.len() > 4096 {
            return Err("requestState is longer than any this gateway issues".into());
        }
        self.codec
            .open_json_with::<WaitingState>(sealed, owner.as_bytes())
            .map_err(|error| match error {
                RequestStateError::Expired => "requestState has expired: the questions it answered were denied for want of an answer; run the code again".to_string(),
                _ => "requestState could not be verified: it was altered, belongs to another caller, or was issued by another gateway process (another replica, or this one before a restart). Nothing ran; run the code again".to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> WaitingState {
        WaitingState {
            execution_id: "ex-1".into(),
            questions: vec!["ap-1".into()],
            code: code_digest("return 1"),
        }
    }

    #[test]
    fn a_state_opens_only_for_its_caller_unaltered_and_in_time() {
        let seal = StateSeal::new();
        let sealed = seal.seal(&state(), "alice", Duration::from_secs(60));
        assert_eq!(seal.open(&sealed, "alice"), Ok(state()));
        assert!(seal.open(&sealed, "bob").is_err());
        let mut altered = sealed.clone().into_bytes();
        let at = altered.len() / 2;
        altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(altered).expect("ascii");
        assert!(seal.open(&altered, "alice").is_err());
        assert!(
            StateSeal::new().open(&sealed, "alice").is_err(),
            "another process's key"
        );
        let short = seal.seal(&state(), "alice", Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(20));
        let expired = seal.open(&short, "alice").expect_err("expired");
        assert!(expired.contains("expired"), "{expired}");
        assert!(seal.open(&"x".repeat(10_000), "alice").is_err());
    }
}
