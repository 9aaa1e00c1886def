//! The worker process: lock down, say ready, then run executions one at a time.
//!
//! The worker talks only over the stdin and stdout it was started with. It duplicates them
//! into plain files and reserves its heap region ([`crate::region`]) before locking down (so
//! no later syscall needs to open or map anything), applies [`crate::lockdown`], builds its
//! template runtime ([`engine::Snapshot`]), and only then reads its first frame. A clean end
//! of stdin ends it.

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::os::fd::AsFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::{self, Link, RunRequest, SharedLink, ToolSet};
use crate::protocol::{HostFrame, WorkerFrame, read_frame, write_frame};

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

/// Where each execution's never-used runtime comes from.
enum Runtimes {
    /// Copied back from the template's image after every execution (see `engine::Snapshot`).
    Snapshot(engine::Snapshot),
    /// Made anew after every execution, when the process cannot use a snapshot.
    Fresh(Option<engine::Fresh>),
}

impl Runtimes {
    fn template_bytes(&self) -> Option<u64> {
        match self {
            Runtimes::Snapshot(snapshot) => Some(snapshot.image_bytes() as u64),
            Runtimes::Fresh(_) => None,
        }
    }

    /// Runs one execution and sends its result; `Err` holds the exit code if the worker must
    /// stop.
    fn run(&mut self, request: RunRequest, link: &SharedLink) -> Result<(), i32> {
        let send = |done: &WorkerFrame| link.borrow_mut().send(done).map_err(|_| 73);
        match self {
            Runtimes::Snapshot(snapshot) => snapshot.run(request, link, send),
            Runtimes::Fresh(ready) => {
                let fresh = ready
                    .take()
                    .map_or_else(engine::fresh, Ok)
                    .map_err(|_| 75)?;
                let (done, spent) = engine::execute(fresh, request, link);
                send(&done)?;
                // Only now, with the result on its way, tear the used runtime down and make
                // the next one.
                drop(spent);
                *ready = engine::fresh().ok();
                Ok(())
            }
        }
    }
}

/// The worker's `main`. Returns the process exit code.
pub fn main() -> i32 {
    let (Ok(stdin), Ok(stdout)) = (
        std::io::stdin().as_fd().try_clone_to_owned(),
        std::io::stdout().as_fd().try_clone_to_owned(),
    ) else {
        return 70;
    };
    // The heap region is reserved before the address-space limit applies; a worker without one
    // still runs, making a fresh runtime for each execution instead of copying one back.
    let _ = crate::region::map();
    let protections = crate::lockdown::apply();
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
        engine::Snapshot::take()
    };
    // A template that cannot be built leaves the worker building a runtime per execution.
    let mut runtimes = match snapshot {
        Ok(Some(snapshot)) => Runtimes::Snapshot(snapshot),
        Ok(None) | Err(_) => Runtimes::Fresh(engine::fresh().ok()),
    };
    let link = Rc::new(RefCell::new(StdioLink {
        reader: BufReader::with_capacity(1 << 16, File::from(stdin)),
        writer: BufWriter::with_capacity(1 << 16, File::from(stdout)),
        reply_spin: Duration::ZERO,
    }));
    let shared: SharedLink = link.clone();
    if link
        .borrow_mut()
        .send(&WorkerFrame::Ready {
            protections: protections.active,
            template_bytes: runtimes.template_bytes(),
        })
        .is_err()
    {
        return 71;
    }
    // The tools of the last run, kept for the runs that reuse them. Made here, outside the
    // region, so copying the template back never touches it.
    let mut tool_set: Option<Arc<ToolSet>> = None;
    loop {
        let next = read_frame::<_, HostFrame>(&mut link.borrow_mut().reader);
        let frame = match next {
            Ok(Some(frame)) => frame,
            Ok(None) => return 0,
            Err(_) => return 72,
        };
        match frame {
            HostFrame::Run {
                js,
                tools,
                host_functions,
                context,
                limits,
                reply_spin_micros,
            } => {
                link.borrow_mut().reply_spin = Duration::from_micros(reply_spin_micros.into());
                if let Some(tools) = tools {
                    tool_set = Some(Arc::new(ToolSet::new(tools)));
                }
                // The host sends the tools with a worker's first run; without them it broke the
                // protocol.
                let Some(tools) = tool_set.clone() else {
                    return 76;
                };
                let request = RunRequest {
                    js,
                    tools,
                    host_functions,
                    context,
                    limits,
                };
                if let Err(code) = runtimes.run(request, &shared) {
                    return code;
                }
            }
            // A late reply to a call of a finished run.
            HostFrame::Reply { .. } => {}
            #[cfg(any(test, feature = "test-probes"))]
            HostFrame::Probe { what } => {
                if link
                    .borrow_mut()
                    .send(&WorkerFrame::ProbeResult {
                        outcome: probe(&what),
                    })
                    .is_err()
                {
                    return 73;
                }
            }
        }
    }
}

/// Test builds only: tries something the lockdown must forbid, from native code.
#[cfg(any(test, feature = "test-probes"))]
fn probe(what: &str) -> Result<String, String> {
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
        "env" => match std::env::vars_os().next() {
            Some((k, _)) => Ok(format!("saw {k:?}")),
            None => Err("the environment is empty".into()),
        },
        other => Err(format!("unknown probe {other}")),
    }
}
