//! The host's end of a worker's output pipe: frames read by waiting, or by spinning while a
//! spare core can afford it.
//!
//! A worker answers within microseconds of being asked, but a sleeping reader pays for each
//! answer with a wake-up, and on virtual machines waking a sleeping CPU costs more than the
//! work itself (see docs/BENCHMARKS.md). So while an execution is computing and a core is
//! spare, the host polls the pipe for a few tens of microseconds before it sleeps. The frames
//! are the same length-prefixed JSON either way (see `protocol`).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::process::ChildStdout;

use crate::wire::protocol::{Frame, MAX_FRAME_BYTES, WorkerFrame};

/// Frames from one worker.
pub(crate) struct WorkerOutput {
    pipe: AsyncFd<OwnedFd>,
    read: Buffer,
}

/// Bytes read and not yet decoded are `bytes[start..end]`; the rest is room to read into.
struct Buffer {
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

/// The least room a read gets (the buffer grows for bigger frames).
const READ_CHUNK: usize = 1 << 16;

/// What reading produced: a frame, or why there will be none.
pub(crate) type Next = Option<Result<WorkerFrame, String>>;

impl WorkerOutput {
    /// Takes over a worker's stdout.
    #[expect(unsafe_code, reason = "a worker's output is read through its raw descriptor without blocking")]
    pub(crate) fn new(stdout: ChildStdout) -> io::Result<WorkerOutput> {
        let fd = stdout.into_owned_fd()?;
        let flags = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETFL)?;
        let flags = nix::fcntl::OFlag::from_bits_retain(flags) | nix::fcntl::OFlag::O_NONBLOCK;
        nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFL(flags))?;
        // SAFETY: the `OwnedFd` owns the descriptor, so it stays open and the same for as long
        // as the `AsyncFd` holds it.
        let pipe = unsafe { AsyncFd::register(fd) }.map_err(|e| io::Error::other(e.to_string()))?;
        Ok(WorkerOutput {
            pipe,
            read: Buffer {
                bytes: vec![0; READ_CHUNK],
                start: 0,
                end: 0,
            },
        })
    }

    /// The next frame, sleeping until it comes. Cancel-safe, so it can sit in a `select!`.
    pub(crate) async fn next(&mut self) -> Next {
        loop {
            if let Some(next) = self.read.decoded() {
                return Some(next);
            }
            let mut ready = match self.pipe.readable().await {
                Ok(ready) => ready,
                Err(e) => return Some(Err(format!("cannot wait for the worker's output: {e}"))),
            };
            match ready.try_io(|pipe| self.read.read_from(pipe.get_ref())) {
                Ok(Ok(0)) => return self.read.ended(),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Some(Err(format!("the worker's output failed: {e}"))),
                // Not readable after all: readiness is cleared, wait again.
                Err(_would_block) => {}
            }
        }
    }

    /// Whether a whole frame is already buffered (so reading it will not wait).
    pub(crate) fn has_frame(&self) -> bool {
        self.read.has_frame()
    }

    /// The next frame if it arrives within `budget`, polling the pipe without sleeping.
    /// `None` when the budget runs out first.
    pub(crate) fn spin(&mut self, budget: Duration) -> Option<Next> {
        let started = Instant::now();
        loop {
            if let Some(next) = self.read.decoded() {
                return Some(Some(next));
            }
            // `poll` reads the pipe's state without its lock, so asking often does not slow
            // the worker's write down the way repeated `read`s would.
            if has_input(self.pipe.get_ref()) {
                match self.read.read_from(self.pipe.get_ref()) {
                    Ok(0) => return Some(self.read.ended()),
                    Ok(_) => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Some(Some(Err(format!("the worker's output failed: {e}")))),
                }
            }
            if started.elapsed() >= budget {
                return None;
            }
            std::thread::yield_now();
        }
    }
}

/// Whether the pipe has bytes (or its end) to read, without waiting.
fn has_input(pipe: &OwnedFd) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
    // An error is treated as input, so the read reports it.
    poll(&mut fds, PollTimeout::ZERO).map_or(true, |n| n > 0)
}

impl Buffer {
    fn has_frame(&self) -> bool {
        let pending = &self.bytes[self.start..self.end];
        pending
            .get(..4)
            .and_then(|h| <[u8; 4]>::try_from(h).ok())
            .is_some_and(|h| pending.len() >= 4 + u32::from_le_bytes(h) as usize)
    }

    /// The end of the output: clean between frames, else a cut-off frame.
    fn ended(&self) -> Next {
        if self.start == self.end {
            None
        } else {
            Some(Err(
                "the worker's output ended in the middle of a frame".into()
            ))
        }
    }

    /// Decodes one whole frame from the buffer, if there is one.
    fn decoded(&mut self) -> Option<Result<WorkerFrame, String>> {
        let pending = &self.bytes[self.start..self.end];
        let header: [u8; 4] = pending.get(..4)?.try_into().ok()?;
        let len = u32::from_le_bytes(header) as usize;
        if len > MAX_FRAME_BYTES {
            return Some(Err(format!(
                "the worker sent a {len}-byte frame, over the {MAX_FRAME_BYTES}-byte limit"
            )));
        }
        let body = pending.get(4..4 + len)?;
        let frame = WorkerFrame::decode_body(body)
            .map_err(|e| format!("the worker sent a malformed frame: {e}"));
        self.start += 4 + len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Some(frame)
    }

    /// One non-blocking `read` after the buffered bytes: how many came, 0 at the end.
    fn read_from(&mut self, pipe: &OwnedFd) -> io::Result<usize> {
        if self.bytes.len() - self.end < READ_CHUNK {
            // Move the undecoded bytes to the front, and grow if that is not room enough.
            self.bytes.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.bytes.len() - self.end < READ_CHUNK {
                self.bytes.resize(self.end + READ_CHUNK, 0);
            }
        }
        let n = nix::unistd::read(pipe, &mut self.bytes[self.end..])?;
        self.end += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::protocol::encode_frame;

    fn buffer_with(bytes: &[u8]) -> Buffer {
        let mut buffer = Buffer {
            bytes: vec![0; READ_CHUNK],
            start: 0,
            end: bytes.len(),
        };
        buffer.bytes[..bytes.len()].copy_from_slice(bytes);
        buffer
    }

    fn log(message: &str) -> Vec<u8> {
        let frame = WorkerFrame::Log {
            run: 1,
            level: "log".into(),
            message: message.into(),
        };
        encode_frame(&frame).expect("encodes")
    }

    #[test]
    fn frames_decode_only_when_whole_and_in_order() {
        let mut bytes = log("first");
        bytes.extend(log("second"));
        let cut = bytes.len() - 3;
        let mut buffer = buffer_with(&bytes[..cut]);
        assert!(buffer.has_frame());
        assert!(matches!(
            buffer.decoded(),
            Some(Ok(WorkerFrame::Log { message, .. })) if message == "first"
        ));
        assert!(!buffer.has_frame(), "the second frame is cut off");
        assert!(buffer.decoded().is_none());
        assert!(
            buffer.ended().is_some_and(|e| e.is_err()),
            "an end inside a frame is an error"
        );
        buffer.bytes[cut..bytes.len()].copy_from_slice(&bytes[cut..]);
        buffer.end = bytes.len();
        assert!(matches!(
            buffer.decoded(),
            Some(Ok(WorkerFrame::Log { message, .. })) if message == "second"
        ));
        assert!(buffer.ended().is_none(), "a clean end between frames");
    }

    #[test]
    fn oversized_and_malformed_frames_are_errors() {
        let mut buffer = buffer_with(&u32::MAX.to_le_bytes());
        assert!(
            buffer
                .decoded()
                .is_some_and(|f| f.is_err_and(|e| e.contains("limit")))
        );
        let mut garbage = 5u32.to_le_bytes().to_vec();
        garbage.extend(b"nope!");
        let mut buffer = buffer_with(&garbage);
        assert!(
            buffer
                .decoded()
                .is_some_and(|f| f.is_err_and(|e| e.contains("malformed")))
        );
    }
}
