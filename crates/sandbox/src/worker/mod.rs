//! The worker process: lock down, say ready, then serve executions, many at once.
//!
//! The worker talks only over the stdin and stdout it was started with, plus the control page
//! the host shares with it ([`crate::wire::control`]). It duplicates its pipes into plain files,
//! reserves its heap region ([`crate::worker::region`]) and maps the control page before locking down
//! (so no later syscall needs to open or map anything), applies [`crate::worker::lockdown`], builds its
//! template runtime ([`engine::snapshot::Snapshot`]), and only then reads its first frame. The
//! [`Scheduler`] then runs every execution the host sends. A clean end of stdin ends it.

pub mod engine;
pub mod lockdown;
mod parking;
pub mod region;
mod scheduler;
pub mod v8;

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::os::fd::AsFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::wire::protocol::{HostFrame, WorkerFrame, read_frame, write_frame};
use engine::{Link, SharedLink};
use scheduler::{Runtimes, Scheduler};

/// Frames over the worker's own stdin and stdout.
struct StdioLink {
    reader: BufReader<File>,
    writer: BufWriter<File>,
    /// How long to poll for a reply before sleeping (the host allows it when a core is spare).
    reply_spin: Duration,
}

impl Link for StdioLink {
    fn send(&mut self, frame: &WorkerFrame) -> std::io::Result<()> {
        write_frame(&mut self.writer, frame)?;
        self.writer.flush()
    }

    fn send_all(&mut self, frames: &[WorkerFrame]) -> std::io::Result<()> {
        // Several calls started in one turn go out in a single write.
        for frame in frames {
            write_frame(&mut self.writer, frame)?;
        }
        self.writer.flush()
    }

    fn recv(&mut self, timeout: Duration) -> std::io::Result<Option<HostFrame>> {
        if self.reader.buffer().is_empty()
            && !readable(self.reader.get_ref(), self.reply_spin, timeout)?
        {
            return Ok(None);
        }
        match read_frame(&mut self.reader)? {
            Some(frame) => Ok(Some(frame)),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the host closed the connection",
            )),
        }
    }

    fn set_reply_spin(&mut self, spin: Duration) {
        self.reply_spin = spin;
    }
}

/// Whether `file` has input within `timeout`, polling without sleeping for the first `spin`.
fn readable(file: &File, spin: Duration, timeout: Duration) -> std::io::Result<bool> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let started = Instant::now();
    let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLIN)];
    while started.elapsed() < spin.min(timeout) {
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => std::thread::yield_now(),
            Ok(_) => return Ok(true),
            Err(e) => return Err(std::io::Error::from(e)),
        }
    }
    let left = timeout.saturating_sub(started.elapsed());
    let millis = PollTimeout::try_from(left.as_millis().min(i32::MAX as u128) as u64)
        .unwrap_or(PollTimeout::MAX);
    loop {
        match poll(&mut fds, millis) {
            Ok(n) => return Ok(n > 0),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(std::io::Error::from(e)),
        }
    }
}

/// A worker argument that makes it build a runtime for every execution instead of copying
/// one back from a template image (slower; for comparison and as a fallback).
pub const NO_TEMPLATE_ARG: &str = "--no-template";

/// The worker's `main`. Returns the process exit code.
pub fn main() -> i32 {
    // The V8 engine: lock down and become Deno (see `v8`).
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == v8::V8_ARG) {
        return v8::launch(&args);
    }
    let (Ok(stdin), Ok(stdout)) = (
        std::io::stdin().as_fd().try_clone_to_owned(),
        std::io::stdout().as_fd().try_clone_to_owned(),
    ) else {
        return 70;
    };
    // The heap region is reserved before the address-space limit applies; a worker without one
    // still runs, making a fresh runtime for each execution instead of copying one back.
    let _ = crate::worker::region::map();
    // The control page, if the host shared one (a worker without it still runs; the host then
    // cannot stop a computing execution without killing the worker).
    let _ = crate::wire::control::attach();
    let protections = crate::worker::lockdown::apply();
    // Compile the preamble once.
    if engine::warm_up().is_err() {
        return 74;
    }
    // The thread handle is made lazily and kept for the process's life; make it now, outside
    // the region, so no execution can be the one that makes it.
    let _ = std::thread::current();
    let snapshot = if std::env::args_os().any(|a| a == NO_TEMPLATE_ARG) {
        Ok(None)
    } else {
        engine::snapshot::Snapshot::take()
    };
    // A template that cannot be built leaves the worker building a runtime per execution.
    let runtimes = match snapshot {
        Ok(Some(snapshot)) => Runtimes::Snapshot(snapshot),
        Ok(None) | Err(_) => Runtimes::Fresh(engine::fresh().ok()),
    };
    let link = Rc::new(RefCell::new(StdioLink {
        reader: BufReader::with_capacity(1 << 16, File::from(stdin)),
        writer: BufWriter::with_capacity(1 << 16, File::from(stdout)),
        reply_spin: Duration::ZERO,
    }));
    let template_bytes = match &runtimes {
        Runtimes::Snapshot(snapshot) => Some(snapshot.image_bytes() as u64),
        Runtimes::Fresh(_) => None,
    };
    if link
        .borrow_mut()
        .send(&WorkerFrame::Ready {
            protections: protections.active,
            template_bytes,
            fresh_per_run: false,
        })
        .is_err()
    {
        return 71;
    }
    let shared: SharedLink = link;
    Scheduler::new(runtimes, shared).serve()
}

/// Test builds only: tries something the lockdown must forbid, from native code.
#[cfg(any(test, feature = "test-probes"))]
pub(crate) fn probe(what: &str) -> Result<String, String> {
    match what {
        "open" => std::fs::File::open("/etc/hostname")
            .map(|_| "opened /etc/hostname".to_string())
            .map_err(|e| e.to_string()),
        "create" => std::fs::File::create("/tmp/sandgate-probe")
            .map(|_| "created a file".to_string())
            .map_err(|e| e.to_string()),
        "socket" => std::net::TcpStream::connect("127.0.0.1:9")
            .map(|_| "connected".to_string())
            .map_err(|e| e.to_string()),
        "udp" => std::net::UdpSocket::bind("127.0.0.1:0")
            .map(|_| "bound a UDP socket".to_string())
            .map_err(|e| e.to_string()),
        "exec" => std::process::Command::new("/bin/true")
            .status()
            .map(|s| format!("ran /bin/true: {s}"))
            .map_err(|e| e.to_string()),
        #[expect(
            clippy::disallowed_methods,
            reason = "the lockdown probe looks for any environment the worker should not have"
        )]
        "env" => match std::env::vars_os().next() {
            Some((k, _)) => Ok(format!("saw {k:?}")),
            None => Err("the environment is empty".into()),
        },
        other => Err(format!("unknown probe {other}")),
    }
}
