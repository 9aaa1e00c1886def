//! The V8 engine: a worker process that is Deno. The worker binary, started with
//! [`V8_ARG`] and the path of a `deno` executable, locks itself down for V8 (see
//! [`lockdown`]) and then becomes Deno (`execve`), running `main.js`, which speaks the same
//! frame protocol as the QuickJS worker, so the host's pool, door, limits and hints serve both
//! engines unchanged. Each execution runs in a fresh V8 context (`shell.js`) of an isolate that
//! runs one execution at a time (a Deno Worker), bootstrapped by `guest.js` with the same
//! preamble and web basics as QuickJS.
//!
//! Deno runs with every permission denied (no `--allow-*` flag, `--no-prompt`): the guest's
//! `fetch`, `fs` and `env` are the host's capabilities, reached through the door like every
//! tool call. The sources travel as arguments, so Deno reads no file of ours.

pub mod lockdown;

use std::ffi::CString;

use base64::Engine as _;
use std::path::Path;

use crate::wire::errors;
use crate::wire::protocol::GuestError;
use crate::worker::engine::sources::{PREAMBLE, WEB};

/// The worker argument that selects the V8 engine; the next argument is the `deno` path.
pub const V8_ARG: &str = "--v8";
/// The worker argument that sets each isolate's heap, in MiB (the next argument): a run's own
/// memory limit, when lower, gets an isolate of its own with that heap.
pub const V8_HEAP_ARG: &str = "--v8-heap-mb";

/// The worker's script: the frame codec, then the main thread that runs it on stdin and stdout.
const MAIN: &str = concat!(include_str!("frames.js"), "\n", include_str!("main.js"));
/// The guest bootstrap: what a thrown value becomes and the global's guards, in front of the
/// bootstrap that uses them.
const GUEST: &str = concat!(
    include_str!("errors.js"),
    "\n",
    include_str!("guards.js"),
    "\n",
    include_str!("guest.js")
);
const SHELL: &str = include_str!("shell.js");

/// How long the host waits past a V8 execution's deadline for the worker's own answer (which
/// names the limit that stopped it) before it gives up on it: starting isolates holds Deno's
/// main thread for milliseconds each, so a burst of them can delay that answer.
pub const V8_KILL_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Default heap of one isolate, in MiB (the QuickJS default memory limit).
pub const DEFAULT_HEAP_MB: u64 = 64;

/// The words the limits say, as templates `guest.js` and `main.js` fill in: made from the
/// same functions the QuickJS engine and the host use, so both engines say the same.
fn texts() -> String {
    let fill = |error: GuestError, pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .fold(error.message, |text, (from, to)| text.replace(from, to))
    };
    let timeout = fill(
        errors::timeout_guest_error(7_777_777_701, 7_777_702),
        &[("7777777701", "{wall_ms}"), ("7777702", "{in_flight}")],
    );
    let no_isolate = fill(
        errors::no_isolate_in_time_guest_error(7_777_777_706, 7_777_707),
        &[("7777777706", "{wall_ms}"), ("7777707", "{in_flight}")],
    );
    let output_limit = fill(
        errors::output_limit_guest_error(7_777_777_703, 7_777_777_704),
        &[("7777777703", "{bytes}"), ("7777777704", "{max}")],
    );
    let arguments_too_large = errors::arguments_too_large("{name}", 7_777_777_705, 7 << 20)
        .replace("7777777705", "{bytes}")
        .replace(&(7 << 20).to_string(), "{max}")
        .replace("7 MiB", "{max_mib}");
    serde_json::json!({
        "timeout": timeout,
        "no_isolate": no_isolate,
        "output_limit": output_limit,
        "arguments_too_large": arguments_too_large,
        "promise_in_result": errors::PROMISE_IN_RESULT,
        "no_modules": crate::worker::engine::NO_MODULES,
        "log_line_overhead": crate::wire::limits::LOG_LINE_OVERHEAD_BYTES,
        "max_error_message": 64 * 1024,
        "max_error_stack": 16 * 1024,
    })
    .to_string()
}

/// The worker's `main` with [`V8_ARG`]: lock down, then become Deno. Returns only on failure,
/// with the exit code.
pub fn launch(args: &[String]) -> i32 {
    let value_of = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let Some(deno) = value_of(V8_ARG) else {
        return 64;
    };
    let heap_mb = value_of(V8_HEAP_ARG)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(DEFAULT_HEAP_MB)
        .clamp(16, 4096);
    let deno = Path::new(deno);
    let protections = lockdown::apply(deno);
    let protections = serde_json::to_string(&protections.active).unwrap_or_else(|_| "[]".into());
    // The control page is the QuickJS worker's; Deno gets nothing it does not need.
    let _ = nix::unistd::close(crate::wire::control::CONTROL_FD);
    let main = format!(
        "data:text/javascript;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(MAIN)
    );
    let texts = texts();
    let heap_mb = heap_mb.to_string();
    let argv: Vec<&str> = vec![
        "deno",
        "run",
        "--quiet",
        "--no-prompt",
        "--no-config",
        "--no-lock",
        "--no-remote",
        "--no-npm",
        "--cached-only",
        &main,
        &protections,
        &texts,
        &heap_mb,
        PREAMBLE,
        WEB,
        GUEST,
        SHELL,
    ];
    let (Ok(program), Ok(argv), Ok(env)) = (
        CString::new(deno.as_os_str().as_encoded_bytes()),
        argv.iter()
            .map(|a| CString::new(*a))
            .collect::<Result<Vec<_>, _>>(),
        DENO_ENV
            .iter()
            .map(|a| CString::new(*a))
            .collect::<Result<Vec<_>, _>>(),
    ) else {
        return 65;
    };
    // Only returns on failure.
    let _ = nix::unistd::execve(&program, &argv, &env);
    66
}

/// Deno's whole environment: no update check, no colours in errors, a cache directory that
/// the lockdown leaves unreachable (so nothing is cached across executions or processes), and
/// UTC as the time zone of `Date` and of ICU (guests have V8's own `Intl`), whatever the
/// host's `/etc/localtime` says.
const DENO_ENV: &[&str] = &[
    "DENO_NO_UPDATE_CHECK=1",
    "NO_COLOR=1",
    "DENO_DIR=/nonexistent/sandgate-deno",
    "TZ=UTC",
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_texts_have_their_placeholders() {
        let texts: serde_json::Value = serde_json::from_str(&super::texts()).expect("json");
        assert!(texts["timeout"].as_str().is_some_and(|t| t.contains("{wall_ms}") && t.contains("{in_flight}")));
        assert!(texts["no_isolate"].as_str().is_some_and(|t| t.contains("{wall_ms}") && t.contains("{in_flight}")));
        assert!(texts["output_limit"].as_str().is_some_and(|t| t.contains("{bytes}") && t.contains("{max}")));
        assert!(texts["arguments_too_large"].as_str().is_some_and(|t| t.contains("{name}") && t.contains("{max}") && t.contains("{max_mib}")));
    }
}
