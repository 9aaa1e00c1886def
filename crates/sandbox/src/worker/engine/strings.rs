//! Reading JavaScript strings in Rust without trusting them: a lone surrogate becomes U+FFFD
//! (as `toWellFormed` would make it) instead of failing the conversion, and what the worker
//! keeps of a guest's text is bounded before it is copied anywhere.

use rquickjs::{Ctx, Value};

use crate::wire::encoding::{head_and_tail, well_formed_json};

/// The most of one error message the worker reports; the response shows less, and the whole
/// report is stored (see the gateway's response).
pub(crate) const MAX_ERROR_MESSAGE_BYTES: usize = 64 * 1024;
/// The most of one error's stack the worker reports.
pub(crate) const MAX_ERROR_STACK_BYTES: usize = 16 * 1024;

/// `value` as a Rust string if it is a JavaScript string, lone surrogates replaced.
pub(crate) fn lossy<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> Option<String> {
    let string = value.as_string()?;
    if let Ok(text) = string.to_string() {
        return Some(text);
    }
    // Not valid UTF-8 only because of lone surrogates: JSON.stringify (the engine's own, not
    // the guest's global) escapes them, and the escapes are then made well-formed.
    let json = ctx.json_stringify(value.clone()).ok()??.to_string().ok()?;
    serde_json::from_str(&well_formed_json(&json)).ok()
}

/// [`lossy`], cut to `max_bytes` (head and tail) when longer.
pub(crate) fn lossy_bounded<'js>(
    ctx: &Ctx<'js>,
    value: &Value<'js>,
    max_bytes: usize,
) -> Option<String> {
    lossy(ctx, value).map(|text| {
        if text.len() <= max_bytes {
            text
        } else {
            head_and_tail(&text, max_bytes).into_owned()
        }
    })
}
