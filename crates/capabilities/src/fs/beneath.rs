//! Paths opened without leaving a root, and never opened for I/O before their type is known:
//! the system calls behind the `fs` capability (`openat2` beneath a root, `O_PATH` looks,
//! reopening through `/proc/self/fd`, the component-by-component fallback).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use sandgate_policy::{FsAccess, FsRoot};

/// What to open a located path for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Open {
    Read,
    Write,
    Directory,
}

/// What a located path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Directory,
    Fifo,
    Socket,
    Device,
    Other,
}

impl Kind {
    pub(super) fn described(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Directory => "a directory",
            Kind::Fifo => "a FIFO (named pipe)",
            Kind::Socket => "a socket",
            Kind::Device => "a device",
            Kind::Other => "not a regular file",
        }
    }
}

const LOOK: OFlags = OFlags::PATH.union(OFlags::CLOEXEC);
const LOOK_DIR: OFlags = LOOK.union(OFlags::DIRECTORY);
/// EXDEV: what `RESOLVE_BENEATH` answers for a path that would leave its root.
const LEAVES_ROOT: i32 = 18;

/// A root's directory, looked at (`O_PATH`): as the operator wrote it, or resolved beneath
/// the root it was granted under.
fn open_root(path: &Path, within: Option<&Path>) -> io::Result<OwnedFd> {
    match within {
        None => Ok(rustix::fs::open(path, LOOK_DIR, Mode::empty())?),
        Some(outer) => {
            let outer_dir = rustix::fs::open(outer, LOOK_DIR, Mode::empty())?;
            let inner = path
                .strip_prefix(outer)
                .map_err(|_| io::Error::from_raw_os_error(LEAVES_ROOT))?;
            resolve(&outer_dir, inner, LOOK_DIR, Mode::empty())
        }
    }
}

/// Where `root` resolves, or `None` when it cannot be opened (then it holds nothing).
pub(super) fn root_dir(root: &FsRoot) -> Option<PathBuf> {
    let dir = open_root(&root.path, root.within.as_deref()).ok()?;
    resolved(&dir).ok()
}

/// `relative` beneath `dir`: symbolic links are followed only while they stay beneath it.
fn resolve(dir: &OwnedFd, relative: &Path, oflags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
    let target = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    match rustix::fs::openat2(
        dir,
        target,
        oflags,
        mode,
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    ) {
        Err(rustix::io::Errno::NOSYS) => open_by_components(dir, target, oflags, mode),
        other => Ok(other?),
    }
}

/// The access's path, looked at (`O_PATH`: nothing is opened for I/O, so a FIFO does not
/// block), beneath its root.
pub(super) fn locate(access: &FsAccess) -> io::Result<OwnedFd> {
    let root = open_root(&access.root, access.within.as_deref())?;
    resolve(&root, &access.relative, LOOK, Mode::empty())
}

/// The directory a new file would go in (looked at, beneath the root), and its name.
pub(super) fn parent(access: &FsAccess) -> io::Result<(OwnedFd, OsString)> {
    let name = access
        .relative
        .file_name()
        .ok_or_else(|| io::Error::from(io::ErrorKind::IsADirectory))?;
    let parent = access.relative.parent().unwrap_or(Path::new(""));
    let root = open_root(&access.root, access.within.as_deref())?;
    let dir = resolve(&root, parent, LOOK_DIR, Mode::empty())?;
    Ok((dir, name.to_os_string()))
}

/// What a located path is, and its size.
pub(super) fn kind(found: &OwnedFd) -> io::Result<(Kind, u64)> {
    let stat = rustix::fs::fstat(found)?;
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    let kind = match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Directory,
        FileType::Fifo => Kind::Fifo,
        FileType::Socket => Kind::Socket,
        FileType::CharacterDevice | FileType::BlockDevice => Kind::Device,
        _ => Kind::Other,
    };
    Ok((kind, size))
}

/// This process's `/proc/self/fd`, opened once: the kernel's own names for descriptors,
/// and the way to open the very file a looked-at descriptor holds.
fn own_fds() -> io::Result<&'static OwnedFd> {
    static FDS: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    FDS.get_or_init(|| rustix::fs::open("/proc/self/fd", LOOK_DIR, Mode::empty()).ok())
        .as_ref()
        .ok_or_else(|| io::Error::other("/proc is not mounted, and the fs capability needs it"))
}

/// Where a located path resolved: the kernel's own name for the descriptor.
pub(super) fn resolved(found: &OwnedFd) -> io::Result<PathBuf> {
    let name = rustix::fs::readlinkat(own_fds()?, found.as_raw_fd().to_string(), Vec::new())?;
    Ok(PathBuf::from(
        <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(name.into_bytes()),
    ))
}

/// Opens the very file a located descriptor holds (through `/proc/self/fd`, so nothing
/// can be swapped in between), for `how`.
pub(super) fn reopen(found: &OwnedFd, how: Open) -> io::Result<OwnedFd> {
    let flags = OFlags::CLOEXEC
        | OFlags::NONBLOCK
        | OFlags::NOCTTY
        | match how {
            Open::Read => OFlags::RDONLY,
            Open::Write => OFlags::WRONLY | OFlags::TRUNC,
            Open::Directory => OFlags::RDONLY | OFlags::DIRECTORY,
        };
    Ok(rustix::fs::openat(
        own_fds()?,
        found.as_raw_fd().to_string(),
        flags,
        Mode::empty(),
    )?)
}

/// Creates `name` in `dir` (0600): a new regular file, never through a link.
pub(super) fn create(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::EXCL
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::CLOEXEC,
        Mode::RUSR | Mode::WUSR,
    )?)
}

/// The fallback: each component opened in turn, refusing every symbolic link.
pub(super) fn open_by_components(
    dir: &OwnedFd,
    relative: &Path,
    oflags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let parts: Vec<_> = relative
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect();
    let mut current = rustix::io::dup(dir)?;
    for (i, part) in parts.iter().enumerate() {
        let std::path::Component::Normal(name) = part else {
            return Err(io::Error::from_raw_os_error(LEAVES_ROOT));
        };
        let last = i + 1 == parts.len();
        let (flags, mode) = if last {
            (oflags | OFlags::NOFOLLOW, mode)
        } else {
            (LOOK_DIR | OFlags::NOFOLLOW, Mode::empty())
        };
        current = rustix::fs::openat(&current, *name, flags, mode)?;
    }
    if parts.is_empty() {
        current = rustix::fs::openat(&current, ".", oflags, mode)?;
    }
    Ok(current)
}

/// The entries of an open directory, without `.` and `..`.
pub(super) fn list(dir: OwnedFd) -> io::Result<Vec<String>> {
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

/// The metadata of the access's path beneath its root, not following a final symbolic
/// link.
pub(super) fn stat(access: &FsAccess) -> io::Result<std::fs::Metadata> {
    let relative = &access.relative;
    let (parent, name) = match (relative.parent(), relative.file_name()) {
        (Some(parent), Some(name)) => (parent, Some(name)),
        _ => (relative.as_path(), None),
    };
    let root = open_root(&access.root, access.within.as_deref())?;
    let dir = resolve(&root, parent, LOOK_DIR, Mode::empty())?;
    let fd = match name {
        Some(name) => rustix::fs::openat(&dir, name, LOOK | OFlags::NOFOLLOW, Mode::empty())?,
        None => dir,
    };
    std::fs::File::from(fd).metadata()
}
