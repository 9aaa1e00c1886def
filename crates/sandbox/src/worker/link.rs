//! The worker's one channel: frames over the stdin and stdout it was started with, duplicated
//! into plain files before the lockdown, with a reply poll that may spin briefly before it
//! sleeps. Every engine's worker talks through it.

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::os::fd::AsFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::wire::protocol::{HostFrame, WorkerFrame, read_frame, write_frame};
use crate::worker::engine::Link;

/// Frames over the worker's own stdin and stdout.
pub(crate) struct StdioLink {
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

/// Frames over this process's stdin and stdout, duplicated into plain files (before the
/// lockdown: no later syscall needs to open anything). `None` if they cannot be duplicated.
pub(crate) fn stdio_link() -> Option<Rc<RefCell<StdioLink>>> {
    let (Ok(stdin), Ok(stdout)) = (
        std::io::stdin().as_fd().try_clone_to_owned(),
        std::io::stdout().as_fd().try_clone_to_owned(),
    ) else {
        return None;
    };
    Some(Rc::new(RefCell::new(StdioLink {
        reader: BufReader::with_capacity(1 << 16, File::from(stdin)),
        writer: BufWriter::with_capacity(1 << 16, File::from(stdout)),
        reply_spin: Duration::ZERO,
    })))
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
