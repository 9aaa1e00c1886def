//! What to say when code ran out of time computing on QuickJS: heavy loops over large data
//! (a substring search over a few thousand files) took 27–36 s there and 1.4 s on V8 in a
//! public benchmark's replay (issue 47). A caller whose profile lets it choose is told to ask
//! for V8; one whose profile does not, what the operator would set.

use sandgate_policy::{EngineGrant, Profile};
use sandgate_sandbox::{Engine, ErrorKind, ExecError, TIMED_OUT_COMPUTING};

/// Adds the engine advice to `error`'s hint when it is a timeout of code that was computing on
/// QuickJS; `v8_running` is whether this gateway runs the V8 engine.
pub(super) fn advise(error: &mut ExecError, engine: Engine, profile: &Profile, v8_running: bool) {
    if error.kind != ErrorKind::Timeout
        || engine != Engine::Quickjs
        || !error.message.contains(TIMED_OUT_COMPUTING)
    {
        return;
    }
    let advice = match (&profile.engine, v8_running) {
        (EngineGrant::Either, true) => {
            "It was computing on QuickJS the whole time, with no call in flight: loops over large data run many times faster on V8. Call again with `engine: \"v8\"`.".to_string()
        }
        _ => format!(
            "It was computing on QuickJS the whole time, with no call in flight: loops over large data run many times faster on V8, which this caller cannot choose. The operator can allow it with `engine = \"any\"` (or `\"v8\"`) under [profiles.{}], and Deno installed ([sandbox] deno; docs/config.md). Meanwhile, do less per execution.",
            profile.name
        ),
    };
    error.hint = Some(match error.hint.take() {
        Some(hint) => format!("{hint} {advice}"),
        None => advice,
    });
}
