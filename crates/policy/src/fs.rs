//! File grants: the roots a profile's `fs` may use, and the decision for one path.
//!
//! The decision here is on the path as written: beneath which root it is, that it holds only
//! normal components (no `..`, no NUL), and whether that root is writable. The host then
//! resolves the path beneath the root with the kernel's help, and decides writability again
//! where the path *resolves*, against every root in [`FsAccess::roots`]: a link inside a
//! writable root that leads into a read-only one nested in it must not make that one writable.
//!
//! A stored tool's roots are granted beneath its owner's: each carries the owner's root it
//! must resolve beneath ([`FsRoot::within`]), so a tool root that is itself a symbolic link
//! cannot lead out of what its owner holds.

use std::path::{Component, Path, PathBuf};

use crate::decision::{Authorized, PolicyError};
use crate::profile::Access;

/// A root the `fs` capability may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsRoot {
    /// An absolute directory.
    pub path: PathBuf,
    /// Whether files beneath it may be written.
    pub write: bool,
    /// The root `path` must resolve beneath, when it is not the operator's own: a stored
    /// tool's root, granted under this root of its owner. `None`: `path` is opened as
    /// written (the operator wrote it in the config).
    pub within: Option<PathBuf>,
}

impl FsRoot {
    /// A root the operator wrote: opened as written.
    pub fn configured(path: impl Into<PathBuf>, write: bool) -> FsRoot {
        FsRoot {
            path: path.into(),
            write,
            within: None,
        }
    }
}

/// A file access the policy allowed: `relative` beneath `root`, which the host must resolve
/// without leaving the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsAccess {
    /// The granted root.
    pub root: PathBuf,
    /// The root `root` itself must resolve beneath (see [`FsRoot::within`]).
    pub within: Option<PathBuf>,
    /// The path beneath it: only normal components (no `..`, no root, no NUL).
    pub relative: PathBuf,
    /// Whether this is a write.
    pub write: bool,
    /// For a write: every root that decides where a write may land (the profile's roots and
    /// its context). Of those that hold the resolved path, the deepest decides; at the same
    /// depth a read-only one wins. Empty for reads.
    pub roots: Vec<FsRoot>,
}

impl Access {
    /// Authorizes reading (or writing) `path`: absolute beneath a granted root, or relative to
    /// the first root. Only normal components are accepted, so `..`, NUL bytes and paths
    /// outside every root are refused here; the host still resolves beneath the root, so a
    /// symbolic link cannot lead out either, and decides writability where the path resolves.
    pub fn authorize_fs(
        &self,
        path: &str,
        write: bool,
    ) -> Result<Authorized<FsAccess>, PolicyError> {
        let p = self.profile();
        let verb = if write { "writing" } else { "reading" };
        let denied = |reason: String, fix: String| PolicyError::Denied {
            what: format!("{verb} `{}`", path.escape_debug()),
            reason,
            fix,
        };
        if p.fs.is_empty() {
            return Err(denied(
                format!("profile `{}` grants no files", p.name),
                p.fix("fs", "add a root to"),
            ));
        }
        if path.contains('\0') {
            return Err(denied(
                format!(
                    "the path holds a NUL byte, which names no file beneath {}.fs",
                    p.key
                ),
                "Pass a path without NUL bytes.".into(),
            ));
        }
        // A relative path is beneath the first root; then, as for an absolute path, the
        // deepest root that holds it decides (so `out/x` in a writable `out` root is writable).
        let requested = match p.fs.first() {
            Some(first) if Path::new(path).is_relative() => first.path.join(path),
            _ => PathBuf::from(path),
        };
        let found =
            p.fs.iter()
                .filter_map(|root| {
                    requested
                        .strip_prefix(&root.path)
                        .ok()
                        .map(|rest| (root, rest))
                })
                .max_by_key(|(root, _)| (root.path.components().count(), !root.write));
        let roots = || {
            p.fs.iter()
                .map(|r| r.path.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some((root, rest)) = found else {
            return Err(denied(
                format!("it is beneath none of {}.fs ({})", p.key, roots()),
                p.fix("fs", "add its directory to"),
            ));
        };
        let mut relative = PathBuf::new();
        for component in rest.components() {
            match component {
                Component::Normal(part) => relative.push(part),
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(denied(
                        format!(
                            "`..` would leave the root {} ({}.fs)",
                            root.path.display(),
                            p.key
                        ),
                        "Name the file by its path beneath the root, without `..`.".into(),
                    ));
                }
            }
        }
        if write && !root.write {
            return Err(denied(
                format!(
                    "the root {} is read-only in {}.fs",
                    root.path.display(),
                    p.key
                ),
                p.fix("fs", "set `write = true` on that root in"),
            ));
        }
        let roots = if write {
            p.fs.iter().chain(&p.fs_context).cloned().collect()
        } else {
            Vec::new()
        };
        Ok(Authorized::new(
            FsAccess {
                root: root.path.clone(),
                within: root.within.clone(),
                relative,
                write,
                roots,
            },
            format!("{}.fs: {}", p.key, root.path.display()),
        ))
    }
}

/// Which of `roots` decides a write that resolved to `resolved`, given each root's resolved
/// directory (`None` where it could not be resolved: it holds nothing): the deepest that holds
/// it, a read-only one winning a tie. `None` when no root holds it.
pub fn deciding_root<'a>(
    resolved: &Path,
    roots: impl IntoIterator<Item = (&'a FsRoot, Option<PathBuf>)>,
) -> Option<&'a FsRoot> {
    roots
        .into_iter()
        .filter_map(|(root, dir)| {
            let dir = dir?;
            resolved
                .starts_with(&dir)
                .then(|| (dir.components().count(), !root.write, root))
        })
        .max_by_key(|(depth, read_only, _)| (*depth, *read_only))
        .map(|(_, _, root)| root)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::profile::Profile;

    fn reader() -> Access {
        let mut profile = Profile::granting_nothing("reader", "profiles.reader", "sandgate.toml");
        profile.fs = vec![
            FsRoot::configured("/srv/data", false),
            FsRoot::configured("/srv/data/out", true),
        ];
        Access::new(Arc::new(profile))
    }

    #[test]
    fn paths_stay_beneath_their_roots() {
        let access = reader();
        let ok = access
            .authorize_fs("/srv/data/a/b.txt", false)
            .expect("read");
        assert_eq!(ok.get().relative, PathBuf::from("a/b.txt"));
        assert_eq!(ok.get().root, PathBuf::from("/srv/data"));
        assert!(ok.get().roots.is_empty(), "a read needs no roots to decide");
        let ok = access.authorize_fs("/srv/data/out/x", true).expect("write");
        assert_eq!(ok.get().root, PathBuf::from("/srv/data/out"));
        assert_eq!(ok.get().roots.len(), 2, "a write carries every root");
        assert!(access.authorize_fs("b.txt", false).is_ok());
        let relative = access
            .authorize_fs("out/made.txt", true)
            .expect("writable root");
        assert_eq!(relative.get().root, PathBuf::from("/srv/data/out"));
        for bad in [
            "/srv/data/../etc/passwd",
            "../etc/passwd",
            "/etc/passwd",
            "/srv/database/x",
            "/proc/self/environ",
            "/srv/data/a\0b",
        ] {
            assert!(access.authorize_fs(bad, false).is_err(), "{bad}");
        }
        let err = access
            .authorize_fs("/srv/data/x", true)
            .expect_err("read-only")
            .to_string();
        assert!(err.contains("read-only"), "{err}");
    }

    #[test]
    fn the_same_root_written_twice_is_read_only_if_either_says_so() {
        let mut profile = Profile::granting_nothing("p", "profiles.p", "sandgate.toml");
        profile.fs = vec![
            FsRoot::configured("/srv/data", true),
            FsRoot::configured("/srv/data", false),
        ];
        let access = Access::new(Arc::new(profile));
        assert!(access.authorize_fs("/srv/data/x", true).is_err());
    }

    #[test]
    fn the_deepest_root_that_holds_the_resolved_path_decides() {
        let rw = FsRoot::configured("/r", true);
        let ro = FsRoot::configured("/r/ro", false);
        let out = FsRoot::configured("/r/ro/out", true);
        let dirs = |root: &FsRoot| Some(root.path.clone());
        let roots = [&rw, &ro, &out];
        let decide = |path: &str| {
            deciding_root(Path::new(path), roots.iter().map(|r| (*r, dirs(r)))).map(|r| r.write)
        };
        assert_eq!(decide("/r/x"), Some(true));
        assert_eq!(decide("/r/ro/x"), Some(false));
        assert_eq!(decide("/r/ro"), Some(false));
        assert_eq!(decide("/r/ro/out/x"), Some(true));
        assert_eq!(
            decide("/r/rox"),
            Some(true),
            "a sibling with a common prefix"
        );
        assert_eq!(decide("/elsewhere"), None);
        // A root that could not be resolved holds nothing.
        let unresolved = [(&ro, None), (&rw, Some(PathBuf::from("/r")))];
        assert_eq!(
            deciding_root(Path::new("/r/ro/x"), unresolved).map(|r| r.write),
            Some(true)
        );
    }
}
