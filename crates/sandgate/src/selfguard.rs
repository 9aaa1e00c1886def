//! sandgate never starts itself as a backend.
//!
//! A config that lists sandgate (a Claude Code `.mcp.json` that holds the README's own entry,
//! since the default lookup reads it; or `--config` pointed at the client's file) used to
//! start a sandgate that read the same file and started another, without end: about 100
//! processes in 40 s on 2 cores. Two guards, for every route:
//! - an entry whose command *is* this executable (by path, on `PATH`, or through a link) is
//!   skipped when the config loads, with the reason in its status;
//! - a sandgate started as anyone's backend finds the backend-run variable every backend
//!   child carries ([`sandgate_upstream::BACKEND_RUN_VAR`]) and refuses to start, saying why on
//!   stderr (`sh -c "sandgate serve"`, `npx`, `cargo run`, a copy of the binary). The parent
//!   recognises that line and marks the entry failed, never retried.

use std::path::{Path, PathBuf};

use sandgate_config::{Config, Transport};

/// Refuses to run when this process was started as a sandgate backend: the reason, for
/// stderr (it holds [`sandgate_upstream::SELF_AS_BACKEND`], which the parent looks for).
pub fn started_as_a_backend() -> Option<String> {
    std::env::var_os(sandgate_upstream::BACKEND_RUN_VAR).map(|_| {
        format!(
            "{}: this sandgate was started as a backend of another sandgate (its environment holds {}), and a gateway cannot be its own backend. Remove the entry that runs sandgate from the config.",
            sandgate_upstream::SELF_AS_BACKEND,
            sandgate_upstream::BACKEND_RUN_VAR
        )
    })
}

/// Skips every enabled entry whose command is this very executable, saying why.
pub fn skip_own_entries(config: &mut Config) {
    let Some(own) = std::env::current_exe().ok().and_then(|exe| identity(&exe)) else {
        return;
    };
    let path_var = std::env::var_os("PATH");
    for backend in config.backends.iter_mut().filter(|b| b.enabled) {
        let Transport::Stdio { command, cwd, .. } = &backend.transport else {
            continue;
        };
        let search = backend
            .env
            .get("PATH")
            .map(|path| std::ffi::OsString::from(path.expose()))
            .or_else(|| path_var.clone());
        let found = locate(command, cwd.as_deref(), search.as_deref());
        if found.and_then(|p| identity(&p)) == Some(own) {
            backend.enabled = false;
            backend.skipped = Some(format!(
                "this entry runs sandgate itself (`{command}`), and a gateway cannot be its own backend: each copy would start another. Remove the entry, or point your MCP client at sandgate instead of listing sandgate in its config"
            ));
        }
    }
}

/// The file `command` runs: as written when it holds a `/` (relative to `cwd`), else the first
/// executable of that name on `path`.
fn locate(command: &str, cwd: Option<&Path>, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    if command.contains('/') {
        let written = PathBuf::from(command);
        return Some(match cwd {
            Some(dir) if written.is_relative() => dir.join(written),
            _ => written,
        });
    }
    std::env::split_paths(path?)
        .map(|dir| dir.join(command))
        .find(|candidate| candidate.is_file())
}

/// A file's device and inode (links followed): the same file by any path.
fn identity(path: &Path) -> Option<(u64, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((
        std::os::unix::fs::MetadataExt::dev(&meta),
        std::os::unix::fs::MetadataExt::ino(&meta),
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use super::*;

    #[test]
    fn a_command_is_found_as_written_or_on_path() {
        let dir = tempfile::tempdir().expect("dir");
        let program = dir.path().join("prog");
        std::fs::write(&program, "#!/bin/sh\n").expect("write");
        let path = std::env::join_paths([dir.path()]).expect("path");
        assert_eq!(locate("prog", None, Some(&path)), Some(program.clone()));
        assert_eq!(
            locate("./prog", Some(dir.path()), None),
            Some(dir.path().join("./prog"))
        );
        assert_eq!(locate("missing", None, Some(&path)), None);
        std::os::unix::fs::symlink(&program, dir.path().join("alias")).expect("link");
        assert_eq!(identity(&dir.path().join("alias")), identity(&program));
    }
}
