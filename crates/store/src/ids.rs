//! Time and identifiers: milliseconds since the epoch, and ids no caller can guess.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A new execution id: the time in milliseconds (so ids sort by time), then 128 bits from
/// the OS's random source, so that no caller can guess another's id (it names their stored
/// outputs).
pub fn new_execution_id() -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("ex-{millis:x}-{:032x}", random_u128())
}

/// A new unguessable id: `prefix`, a dash, and 128 random bits in hex (a question waiting
/// for approval, `ap-…`).
pub fn new_random_id(prefix: &str) -> String {
    format!("{prefix}-{:032x}", random_u128())
}

/// 128 random bits. The OS source does not fail on Linux; were it ever to, the hasher keys the
/// standard library draws from the same source once per process stand in, mixed with a counter.
fn random_u128() -> u128 {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_ok() {
        return u128::from_le_bytes(bytes);
    }
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let keys = std::collections::hash_map::RandomState::new();
    let half = |salt: u64| {
        let mut hasher = keys.build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed) ^ salt);
        hasher.finish()
    };
    (u128::from(half(1)) << 64) | u128::from(half(2))
}
