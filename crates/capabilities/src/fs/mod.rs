//! `fs.readFile`, `fs.writeFile`, `fs.readdir` and `fs.stat`, beneath a granted root.
//!
//! The policy has already refused `..`, absolute paths outside every root and NUL bytes; here
//! the path is resolved by the kernel beneath the root's directory (`openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`), so a symbolic link planted inside a root that
//! points out of it, or a `/proc/self/...` magic link, fails to open instead of leading out.
//! Where `openat2` is missing (Linux before 5.6) each component is opened in turn with
//! `O_NOFOLLOW`, which refuses every symbolic link.
//!
//! Three more rules hold whatever the tree holds:
//! - A root that is not the operator's own (a stored tool's) is itself resolved beneath the
//!   root it was granted under, so a tool root that is a symbolic link cannot lead out.
//! - A path is first looked at with `O_PATH`, which opens nothing for I/O: only a regular
//!   file (or a directory, for `readdir`) is then opened, through that same descriptor. A
//!   FIFO, a socket or a device is refused without blocking in `open(2)`.
//! - A write is decided where the path *resolves*: of the roots that hold the resolved file,
//!   the deepest decides, so a link from a writable root into a read-only one nested in it
//!   does not make the read-only one writable.
//!
//! A hard link is not a link the kernel resolves: one planted in a root is the file itself,
//! and path grants cannot tell (SECURITY.md says how to deploy around it).

use std::path::Path;

use sandgate_policy::{Authorized, FsAccess, deciding_root};
use serde_json::{Value, json};

use crate::error::CapabilityError;

/// Sizes the fs capability keeps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsLimits {
    /// Largest file `readFile` returns, in bytes.
    pub max_read_bytes: u64,
    /// Largest `writeFile`, in bytes.
    pub max_write_bytes: usize,
    /// Most entries `readdir` returns.
    pub max_dir_entries: usize,
}

impl Default for FsLimits {
    fn default() -> Self {
        FsLimits {
            max_read_bytes: 16 * 1024 * 1024,
            max_write_bytes: 16 * 1024 * 1024,
            max_dir_entries: 10_000,
        }
    }
}

/// The file's bytes.
pub fn read_file(
    proof: &Authorized<FsAccess>,
    limits: &FsLimits,
) -> Result<Vec<u8>, CapabilityError> {
    let access = proof.get();
    let fail = |e: std::io::Error| io_error("readFile", proof, &e);
    let found = beneath::locate(access).map_err(fail)?;
    let (kind, size) = beneath::kind(&found).map_err(fail)?;
    if kind != beneath::Kind::File {
        return Err(not_a_file("readFile", access, kind));
    }
    if size > limits.max_read_bytes {
        return Err(CapabilityError::Limit(format!(
            "readFile: {} is {size} bytes, over the {} byte limit",
            shown(access),
            limits.max_read_bytes
        )));
    }
    let file = beneath::reopen(&found, beneath::Open::Read).map_err(fail)?;
    let mut file = std::fs::File::from(file);
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(&mut file, limits.max_read_bytes + 1),
        &mut bytes,
    )
    .map_err(fail)?;
    if bytes.len() as u64 > limits.max_read_bytes {
        return Err(CapabilityError::Limit(format!(
            "readFile: {} grew past the {} byte limit while it was read",
            shown(access),
            limits.max_read_bytes
        )));
    }
    Ok(bytes)
}

/// Writes `bytes` to the file (created 0600, or truncated), returning the bytes written.
pub fn write_file(
    proof: &Authorized<FsAccess>,
    bytes: &[u8],
    limits: &FsLimits,
) -> Result<usize, CapabilityError> {
    let access = proof.get();
    if !access.write {
        return Err(CapabilityError::BadRequest(
            "writeFile needs a write grant".into(),
        ));
    }
    if bytes.len() > limits.max_write_bytes {
        return Err(CapabilityError::Limit(format!(
            "writeFile: {} bytes is over the {} byte limit",
            bytes.len(),
            limits.max_write_bytes
        )));
    }
    let fail = |e: std::io::Error| io_error("writeFile", proof, &e);
    let file = match beneath::locate(access) {
        Ok(found) => {
            let (kind, _) = beneath::kind(&found).map_err(fail)?;
            if kind != beneath::Kind::File {
                return Err(not_a_file("writeFile", access, kind));
            }
            let resolved = beneath::resolved(&found).map_err(fail)?;
            writable_where_it_resolves(proof, &resolved)?;
            beneath::reopen(&found, beneath::Open::Write).map_err(fail)?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let (dir, name) = beneath::parent(access).map_err(fail)?;
            let resolved = beneath::resolved(&dir).map_err(fail)?.join(&name);
            writable_where_it_resolves(proof, &resolved)?;
            beneath::create(&dir, &name).map_err(|e| match e.raw_os_error() {
                // O_EXCL met a link to nothing, or a name that appeared meanwhile.
                Some(17) => CapabilityError::Io(format!(
                    "writeFile: {} is a symbolic link to a file that does not exist (or appeared while it was written); write to the file's own path",
                    shown(access)
                )),
                _ => fail(e),
            })?
        }
        Err(e) => return Err(fail(e)),
    };
    let mut file = std::fs::File::from(file);
    std::io::Write::write_all(&mut file, bytes).map_err(fail)?;
    Ok(bytes.len())
}

/// The names in the directory, sorted.
pub fn read_dir(
    proof: &Authorized<FsAccess>,
    limits: &FsLimits,
) -> Result<Vec<String>, CapabilityError> {
    let access = proof.get();
    let fail = |e: std::io::Error| io_error("readdir", proof, &e);
    let found = beneath::locate(access).map_err(fail)?;
    let (kind, _) = beneath::kind(&found).map_err(fail)?;
    if kind != beneath::Kind::Directory {
        return Err(CapabilityError::Io(format!(
            "readdir: {} is {}, not a directory",
            shown(access),
            kind.described()
        )));
    }
    let dir = beneath::reopen(&found, beneath::Open::Directory).map_err(fail)?;
    let mut names = beneath::list(dir).map_err(fail)?;
    if names.len() > limits.max_dir_entries {
        return Err(CapabilityError::Limit(format!(
            "readdir: {} holds {} entries, over the {} entry limit",
            shown(access),
            names.len(),
            limits.max_dir_entries
        )));
    }
    names.sort();
    Ok(names)
}

/// `{size, isFile, isDirectory, isSymbolicLink, modifiedMs}` of the path (a symbolic link is
/// described, not followed).
pub fn stat(proof: &Authorized<FsAccess>) -> Result<Value, CapabilityError> {
    let access = proof.get();
    let meta = beneath::stat(access).map_err(|e| io_error("stat", proof, &e))?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as u64);
    Ok(json!({
        "size": meta.len(),
        "isFile": meta.is_file(),
        "isDirectory": meta.is_dir(),
        "isSymbolicLink": meta.file_type().is_symlink(),
        "modifiedMs": modified,
    }))
}

/// Checks that the directory a grant names resolves beneath the root it is granted under
/// and, for a write grant, that it is writable where it resolves: a stored tool's declared
/// root, at registration (every call checks again).
pub fn check_root(proof: &Authorized<FsAccess>) -> Result<(), CapabilityError> {
    let access = proof.get();
    let fail = |e: std::io::Error| io_error("opening", proof, &e);
    let found = beneath::locate(access).map_err(fail)?;
    let (kind, _) = beneath::kind(&found).map_err(fail)?;
    if kind != beneath::Kind::Directory {
        return Err(CapabilityError::Io(format!(
            "{} is {}, not a directory",
            shown(access),
            kind.described()
        )));
    }
    if access.write {
        let resolved = beneath::resolved(&found).map_err(fail)?;
        writable_where_it_resolves(proof, &resolved)?;
    }
    Ok(())
}

/// Refuses a write that resolved to `resolved` unless the deepest root holding it is writable.
/// Only a read-only root can refuse, so the others are resolved only when one holds the path.
fn writable_where_it_resolves(
    proof: &Authorized<FsAccess>,
    resolved: &Path,
) -> Result<(), CapabilityError> {
    let access = proof.get();
    let holding_read_only = access
        .roots
        .iter()
        .filter(|root| !root.write)
        .any(|root| beneath::root_dir(root).is_some_and(|dir| resolved.starts_with(dir)));
    if !holding_read_only {
        return Ok(());
    }
    let dirs = access
        .roots
        .iter()
        .map(|root| (root, beneath::root_dir(root)));
    match deciding_root(resolved, dirs) {
        Some(root) if root.write => Ok(()),
        Some(root) => Err(CapabilityError::Escape(format!(
            "writing `{}` is not allowed: it resolves to {}, beneath the read-only root {} ({})",
            access.relative.display(),
            resolved.display(),
            root.path.display(),
            proof.rule()
        ))),
        None => Err(CapabilityError::Escape(format!(
            "writing `{}` is not allowed: it resolves to {}, beneath none of the granted roots ({})",
            access.relative.display(),
            resolved.display(),
            proof.rule()
        ))),
    }
}

fn not_a_file(op: &str, access: &FsAccess, kind: beneath::Kind) -> CapabilityError {
    CapabilityError::Io(format!(
        "{op}: {} is {}; only regular files are read or written",
        shown(access),
        kind.described()
    ))
}

fn shown(access: &FsAccess) -> String {
    access.root.join(&access.relative).display().to_string()
}

fn io_error(op: &str, proof: &Authorized<FsAccess>, error: &std::io::Error) -> CapabilityError {
    let access = proof.get();
    let path = shown(access);
    let why = match error.raw_os_error() {
        // EXDEV from RESOLVE_BENEATH, ELOOP from O_NOFOLLOW or RESOLVE_NO_MAGICLINKS.
        Some(18) | Some(40) => {
            return CapabilityError::Escape(format!(
                "{op} of `{}` is not allowed: it leads out of the root {} ({}) through a symbolic link",
                access.relative.display(),
                access.root.display(),
                proof.rule()
            ));
        }
        _ => match error.kind() {
            std::io::ErrorKind::NotFound => format!("{op}: {path} does not exist"),
            std::io::ErrorKind::PermissionDenied => {
                format!("{op}: the gateway may not access {path}")
            }
            _ => format!("{op}: {path}: {error}"),
        },
    };
    CapabilityError::Io(why)
}

/// Paths opened without leaving a root, and never opened for I/O before their type is known.
#[cfg(target_os = "linux")]
mod beneath;
#[cfg(not(target_os = "linux"))]
mod beneath {
    compile_error!("the fs capability resolves beneath its root with openat2, which is Linux only");
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use std::path::Path;
    use std::sync::Arc;

    use sandgate_policy::{Access, FsRoot, Profile};

    use super::*;

    fn access(root: &Path) -> Access {
        let mut profile = Profile::implicit_default("test");
        profile.fs = vec![FsRoot::configured(root, true)];
        Access::new(Arc::new(profile))
    }

    #[test]
    fn files_are_read_written_listed_and_described_beneath_the_root() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path();
        let a = access(root);
        let limits = FsLimits::default();
        let path = root.join("notes.txt");
        let proof = a
            .authorize_fs(path.to_str().expect("utf8"), true)
            .expect("granted");
        assert_eq!(write_file(&proof, b"hello", &limits).expect("written"), 5);
        let proof = a.authorize_fs("notes.txt", false).expect("granted");
        assert_eq!(read_file(&proof, &limits).expect("read"), b"hello");
        std::fs::create_dir(root.join("sub")).expect("mkdir");
        let proof = a
            .authorize_fs(root.to_str().expect("utf8"), false)
            .expect("granted");
        assert_eq!(
            read_dir(&proof, &limits).expect("listed"),
            ["notes.txt", "sub"]
        );
        let proof = a.authorize_fs("notes.txt", false).expect("granted");
        let info = stat(&proof).expect("stat");
        assert_eq!(info["size"], 5);
        assert_eq!(info["isFile"], true);
    }

    #[test]
    fn a_symlink_planted_in_the_root_does_not_lead_out() {
        let outside = tempfile::tempdir().expect("dir");
        std::fs::write(outside.path().join("secret"), "s3cret").expect("write");
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("link")).expect("link");
        std::os::unix::fs::symlink(outside.path(), root.join("dirlink")).expect("link");
        std::os::unix::fs::symlink("/proc/self/root/etc/passwd", root.join("magic")).expect("link");
        std::fs::write(root.join("inside"), "fine").expect("write");
        std::os::unix::fs::symlink("inside", root.join("good")).expect("link");
        let a = access(root);
        let limits = FsLimits::default();
        for name in ["link", "dirlink/secret", "magic"] {
            let proof = a
                .authorize_fs(name, false)
                .expect("the policy sees a normal path");
            let err = read_file(&proof, &limits).expect_err(name).to_string();
            assert!(err.contains("leads out of the root"), "{name}: {err}");
        }
        let proof = a.authorize_fs("link", true).expect("granted");
        assert!(write_file(&proof, b"x", &limits).is_err());
        assert_eq!(
            std::fs::read_to_string(outside.path().join("secret")).expect("read"),
            "s3cret"
        );
        // A link that stays inside the root is followed.
        let proof = a.authorize_fs("good", false).expect("granted");
        assert_eq!(read_file(&proof, &limits).expect("read"), b"fine");
    }

    #[test]
    fn the_fallback_refuses_every_symlink() {
        let outside = tempfile::tempdir().expect("dir");
        std::fs::write(outside.path().join("secret"), "s3cret").expect("write");
        let dir = tempfile::tempdir().expect("dir");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("dirlink")).expect("link");
        std::fs::write(dir.path().join("plain"), "ok").expect("write");
        let root = rustix::fs::open(
            dir.path(),
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .expect("root");
        let read = rustix::fs::OFlags::RDONLY;
        assert!(
            beneath::open_by_components(
                &root,
                Path::new("dirlink/secret"),
                read,
                rustix::fs::Mode::empty()
            )
            .is_err()
        );
        assert!(
            beneath::open_by_components(&root, Path::new("plain"), read, rustix::fs::Mode::empty())
                .is_ok()
        );
    }

    #[test]
    fn size_limits_hold() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("big"), vec![b'x'; 2048]).expect("write");
        let a = access(dir.path());
        let small = FsLimits {
            max_read_bytes: 1024,
            max_write_bytes: 1024,
            max_dir_entries: 1,
        };
        let proof = a.authorize_fs("big", false).expect("granted");
        assert!(
            read_file(&proof, &small)
                .expect_err("too big")
                .to_string()
                .contains("1024 byte limit")
        );
        let proof = a.authorize_fs("out", true).expect("granted");
        assert!(write_file(&proof, &[0; 2048], &small).is_err());
    }

    fn profile_of(roots: Vec<FsRoot>, context: Vec<FsRoot>) -> Access {
        let mut profile = Profile::implicit_default("test");
        profile.fs = roots;
        profile.fs_context = context;
        Access::new(Arc::new(profile))
    }

    #[test]
    fn a_link_into_a_read_only_root_nested_in_a_writable_one_does_not_write() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path();
        std::fs::create_dir(root.join("ro")).expect("mkdir");
        std::fs::write(root.join("ro/kept"), "kept").expect("write");
        std::os::unix::fs::symlink("ro/kept", root.join("to-file")).expect("link");
        std::os::unix::fs::symlink("ro", root.join("to-dir")).expect("link");
        let a = profile_of(
            vec![
                FsRoot::configured(root, true),
                FsRoot::configured(root.join("ro"), false),
            ],
            vec![],
        );
        let limits = FsLimits::default();
        for path in ["to-file", "to-dir/kept", "to-dir/new"] {
            let proof = a.authorize_fs(path, true).expect("writable as written");
            let err = write_file(&proof, b"overwritten", &limits)
                .expect_err(path)
                .to_string();
            assert!(err.contains("read-only root"), "{path}: {err}");
        }
        assert_eq!(
            std::fs::read_to_string(root.join("ro/kept")).expect("read"),
            "kept"
        );
        assert!(!root.join("ro/new").exists());
        // Plain writes in the writable root still work, through links that stay in it.
        std::os::unix::fs::symlink("plain", root.join("to-plain")).expect("link");
        std::fs::write(root.join("plain"), "old").expect("write");
        let proof = a.authorize_fs("to-plain", true).expect("granted");
        assert_eq!(write_file(&proof, b"new", &limits).expect("written"), 3);
        assert_eq!(
            std::fs::read_to_string(root.join("plain")).expect("read"),
            "new"
        );
        let proof = a.authorize_fs("made", true).expect("granted");
        assert_eq!(write_file(&proof, b"x", &limits).expect("created"), 1);
    }

    #[test]
    fn a_fifo_or_a_socket_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join("fifo").as_path(),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .expect("mkfifo");
        let _socket = std::os::unix::net::UnixListener::bind(root.join("socket")).expect("socket");
        std::os::unix::fs::symlink("fifo", root.join("to-fifo")).expect("link");
        let a = access(root);
        let limits = FsLimits::default();
        for name in ["fifo", "to-fifo", "socket"] {
            let proof = a.authorize_fs(name, false).expect("granted");
            let err = read_file(&proof, &limits).expect_err(name).to_string();
            assert!(err.contains("only regular files"), "{name}: {err}");
            let proof = a.authorize_fs(name, true).expect("granted");
            let err = write_file(&proof, b"x", &limits)
                .expect_err(name)
                .to_string();
            assert!(err.contains("only regular files"), "{name}: {err}");
            let proof = a.authorize_fs(name, false).expect("granted");
            assert!(read_dir(&proof, &limits).is_err(), "{name}");
        }
        // It was never opened: a reader would still be the first to open it.
        let proof = a.authorize_fs("fifo", false).expect("granted");
        assert_eq!(stat(&proof).expect("stat")["isFile"], false);
    }

    #[test]
    fn a_stored_tool_root_resolves_beneath_its_owners_root() {
        let outside = tempfile::tempdir().expect("dir");
        std::fs::write(outside.path().join("secret"), "s3cret").expect("write");
        let dir = tempfile::tempdir().expect("dir");
        let owner = dir.path();
        std::fs::create_dir(owner.join("data")).expect("mkdir");
        std::fs::write(owner.join("data/mine"), "mine").expect("write");
        std::os::unix::fs::symlink(outside.path(), owner.join("out-link")).expect("link");
        std::os::unix::fs::symlink("/", owner.join("slash")).expect("link");
        std::os::unix::fs::symlink("/proc/self/root", owner.join("proc-root")).expect("link");
        std::os::unix::fs::symlink("data", owner.join("in-link")).expect("link");
        let tool_root = |name: &str, write: bool| FsRoot {
            path: owner.join(name),
            write,
            within: Some(owner.to_path_buf()),
        };
        let owner_roots = vec![FsRoot::configured(owner, true)];
        let limits = FsLimits::default();
        for name in ["out-link", "slash", "proc-root"] {
            let tool = profile_of(vec![tool_root(name, true)], owner_roots.clone());
            for path in ["secret", "etc/passwd"] {
                let target = owner.join(name).join(path);
                let proof = tool
                    .authorize_fs(target.to_str().expect("utf8"), false)
                    .expect("as written");
                let err = read_file(&proof, &limits).expect_err(name).to_string();
                assert!(err.contains("leads out of the root"), "{name}: {err}");
                let proof = tool
                    .authorize_fs(target.to_str().expect("utf8"), true)
                    .expect("as written");
                assert!(write_file(&proof, b"x", &limits).is_err(), "{name}");
            }
            // And the registration check says so too.
            let owner_access = profile_of(owner_roots.clone(), vec![]);
            let proof = owner_access
                .authorize_fs(owner.join(name).to_str().expect("utf8"), true)
                .expect("as written");
            assert!(check_root(&proof).is_err(), "{name}");
        }
        assert_eq!(
            std::fs::read_to_string(outside.path().join("secret")).expect("read"),
            "s3cret"
        );
        // A tool root that is a link within its owner's root works.
        let tool = profile_of(vec![tool_root("in-link", false)], owner_roots.clone());
        let target = owner.join("in-link/mine");
        let proof = tool
            .authorize_fs(target.to_str().expect("utf8"), false)
            .expect("granted");
        assert_eq!(read_file(&proof, &limits).expect("read"), b"mine");
    }

    #[test]
    fn a_stored_tool_writes_only_where_its_owner_may() {
        let dir = tempfile::tempdir().expect("dir");
        let owner = dir.path();
        std::fs::create_dir_all(owner.join("ro")).expect("mkdir");
        std::fs::create_dir_all(owner.join("work")).expect("mkdir");
        std::os::unix::fs::symlink("../ro", owner.join("work/to-ro")).expect("link");
        let owner_roots = vec![
            FsRoot::configured(owner, true),
            FsRoot::configured(owner.join("ro"), false),
        ];
        let tool = profile_of(
            vec![FsRoot {
                path: owner.join("work"),
                write: true,
                within: Some(owner.to_path_buf()),
            }],
            owner_roots,
        );
        let target = owner.join("work/to-ro/x");
        let proof = tool
            .authorize_fs(target.to_str().expect("utf8"), true)
            .expect("as written");
        // `..` in a link is beneath the tool's root only if it stays there.
        assert!(write_file(&proof, b"x", &FsLimits::default()).is_err());
        assert!(!owner.join("ro/x").exists());
    }
}
