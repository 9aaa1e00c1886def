//! `fs.readFile`, `fs.writeFile`, `fs.readdir` and `fs.stat`, beneath a granted root.
//!
//! The policy has already refused `..`, absolute paths outside every root and NUL bytes; here
//! the path is resolved by the kernel beneath the root's directory (`openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`), so a symbolic link planted inside a root that
//! points out of it, or a `/proc/self/...` magic link, fails to open instead of leading out.
//! Where `openat2` is missing (Linux before 5.6) each component is opened in turn with
//! `O_NOFOLLOW`, which refuses every symbolic link.

use sandgate_policy::{Authorized, FsAccess};
use serde_json::{Value, json};

use crate::CapabilityError;

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
    let file = beneath::open(&access.root, &access.relative, beneath::Open::Read)
        .map_err(|e| io_error("readFile", proof, &e))?;
    let mut file = std::fs::File::from(file);
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > limits.max_read_bytes {
        return Err(CapabilityError::Limit(format!(
            "readFile: {} is {size} bytes, over the {} byte limit",
            shown(access),
            limits.max_read_bytes
        )));
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(&mut file, limits.max_read_bytes + 1),
        &mut bytes,
    )
    .map_err(|e| io_error("readFile", proof, &e))?;
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
    let file = beneath::open(&access.root, &access.relative, beneath::Open::Write)
        .map_err(|e| io_error("writeFile", proof, &e))?;
    let mut file = std::fs::File::from(file);
    std::io::Write::write_all(&mut file, bytes).map_err(|e| io_error("writeFile", proof, &e))?;
    Ok(bytes.len())
}

/// The names in the directory, sorted.
pub fn read_dir(
    proof: &Authorized<FsAccess>,
    limits: &FsLimits,
) -> Result<Vec<String>, CapabilityError> {
    let access = proof.get();
    let dir = beneath::open(&access.root, &access.relative, beneath::Open::Directory)
        .map_err(|e| io_error("readdir", proof, &e))?;
    let mut names = beneath::list(dir).map_err(|e| io_error("readdir", proof, &e))?;
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
    let meta =
        beneath::stat(&access.root, &access.relative).map_err(|e| io_error("stat", proof, &e))?;
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

/// `Path` helpers that never leave a root.
#[cfg(target_os = "linux")]
mod beneath {
    use std::os::fd::OwnedFd;
    use std::path::Path;

    use rustix::fs::{Mode, OFlags, ResolveFlags};

    /// How to open.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Open {
        Read,
        Write,
        Directory,
    }

    fn flags(how: Open) -> (OFlags, Mode) {
        match how {
            Open::Read => (OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()),
            Open::Write => (
                OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC,
                Mode::RUSR | Mode::WUSR,
            ),
            Open::Directory => (
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            ),
        }
    }

    fn root_dir(root: &Path) -> std::io::Result<OwnedFd> {
        Ok(rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }

    /// Opens `relative` beneath `root`.
    pub(super) fn open(root: &Path, relative: &Path, how: Open) -> std::io::Result<OwnedFd> {
        let dir = root_dir(root)?;
        let target = if relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            relative
        };
        let (oflags, mode) = flags(how);
        match rustix::fs::openat2(
            &dir,
            target,
            oflags,
            mode,
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        ) {
            Err(rustix::io::Errno::NOSYS) => open_by_components(&dir, target, oflags, mode),
            other => Ok(other?),
        }
    }

    /// The fallback: each component opened in turn, refusing every symbolic link.
    pub(super) fn open_by_components(
        dir: &OwnedFd,
        relative: &Path,
        oflags: OFlags,
        mode: Mode,
    ) -> std::io::Result<OwnedFd> {
        let parts: Vec<_> = relative
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .collect();
        let mut current = rustix::io::dup(dir)?;
        for (i, part) in parts.iter().enumerate() {
            let std::path::Component::Normal(name) = part else {
                return Err(std::io::Error::from_raw_os_error(18));
            };
            let last = i + 1 == parts.len();
            let (flags, mode) = if last {
                (oflags | OFlags::NOFOLLOW, mode)
            } else {
                (
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
            };
            current = rustix::fs::openat(&current, *name, flags, mode)?;
        }
        if parts.is_empty() {
            current = rustix::fs::openat(&current, ".", oflags, mode)?;
        }
        Ok(current)
    }

    /// The entries of an open directory, without `.` and `..`.
    pub(super) fn list(dir: OwnedFd) -> std::io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::read_from(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name != "." && name != ".." {
                names.push(name);
            }
        }
        Ok(names)
    }

    /// The metadata of `relative` beneath `root`, not following a final symbolic link.
    pub(super) fn stat(root: &Path, relative: &Path) -> std::io::Result<std::fs::Metadata> {
        let (parent, name) = match (relative.parent(), relative.file_name()) {
            (Some(parent), Some(name)) => (parent, Some(name)),
            _ => (relative, None),
        };
        let dir = open(root, parent, Open::Directory)?;
        let fd = match name {
            Some(name) => rustix::fs::openat(
                &dir,
                name,
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?,
            None => dir,
        };
        std::fs::File::from(fd).metadata()
    }
}

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
        profile.fs = vec![FsRoot {
            path: root.to_path_buf(),
            write: true,
        }];
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
}
