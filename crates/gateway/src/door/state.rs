//! `state`: what a script keeps between executions, through the door like every capability.
//!
//! Each caller has its own ([`Caller::state_owner`](crate::Caller::state_owner): its user, or
//! its token, or the local user, under its profile), so no caller can name another's keys: the
//! owner comes from who is calling, never from the script. Values are JSON, bounded per value
//! and per caller by the store (`MAX_STATE_*`), and expire after their `ttl`. An answer is
//! `{"value": ...}`, or `null` for none, which the guest reads as `undefined`.

use std::time::Duration;

use sandgate_sandbox::{CallFailure, FailureKind};
use serde_json::Value;

use super::capability::{HostFunction, bad, string_arg};
use super::{Door, Knock};

/// How long a value lasts when `state.set` gives no `ttl`.
pub const DEFAULT_STATE_TTL: Duration = Duration::from_secs(24 * 3600);
/// The longest `ttl` a value may be given.
pub const MAX_STATE_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

impl Door {
    /// Runs `state.*` function `function` for `knock` with `args`; the answer is JSON text.
    pub(super) async fn state(
        &self,
        knock: &Knock,
        function: HostFunction,
        args: &[Value],
    ) -> Result<String, CallFailure> {
        let Some(store) = &self.state else {
            return Err(bad(
                "state is kept in the store, and this gateway runs without one".into(),
            ));
        };
        let owner = knock.caller.state_owner();
        let failed = |e: sandgate_store::StoreError| match e {
            sandgate_store::StoreError::Invalid(why) => bad(why),
            other => CallFailure::new(
                FailureKind::Failed,
                format!("state could not be reached: {other}"),
            ),
        };
        match function {
            HostFunction::StateGet => {
                let key = string_arg(args, 0, "state.get(key)")?;
                Ok(match store.state_get(&owner, &key).await.map_err(failed)? {
                    Some(text) => format!("{{\"value\":{text}}}"),
                    None => "null".into(),
                })
            }
            HostFunction::StateSet => {
                let key = string_arg(args, 0, "state.set(key, value, { ttl })")?;
                let Some(value) = args.get(1) else {
                    return Err(bad(
                        "state.set(key, value, { ttl }) needs a value; to remove a key, use state.delete(key)".into(),
                    ));
                };
                let ttl = ttl_of(args.get(2))?;
                let text = value.to_string();
                store
                    .state_set(&owner, &key, text, ttl.as_millis() as i64)
                    .await
                    .map_err(failed)?;
                Ok("null".into())
            }
            HostFunction::StateDelete => {
                let key = string_arg(args, 0, "state.delete(key)")?;
                let removed = store.state_delete(&owner, &key).await.map_err(failed)?;
                Ok(format!("{{\"value\":{removed}}}"))
            }
            _ => {
                let keys = store.state_keys(&owner).await.map_err(failed)?;
                Ok(serde_json::json!({ "value": keys }).to_string())
            }
        }
    }
}

/// The `ttl` of `state.set`'s options (`{ ttl: seconds }`), or the default.
fn ttl_of(options: Option<&Value>) -> Result<Duration, CallFailure> {
    let usage = "state.set(key, value, { ttl }) takes ttl in seconds";
    let ttl = match options {
        None | Some(Value::Null) => return Ok(DEFAULT_STATE_TTL),
        Some(Value::Object(options)) => match options.get("ttl") {
            None | Some(Value::Null) => return Ok(DEFAULT_STATE_TTL),
            Some(Value::Number(n)) => n.as_f64().unwrap_or(-1.0),
            Some(other) => {
                return Err(bad(format!("{usage}, a number such as 3600; got {other}")));
            }
        },
        Some(other) => {
            return Err(bad(format!(
                "{usage}, passed as an object: {{ ttl: 3600 }}; got {other}"
            )));
        }
    };
    if ttl.is_nan() || ttl <= 0.0 || ttl > MAX_STATE_TTL.as_secs_f64() {
        return Err(bad(format!(
            "{usage}, more than 0 and at most {} (30 days); got {ttl}",
            MAX_STATE_TTL.as_secs()
        )));
    }
    Ok(Duration::from_secs_f64(ttl))
}
