//! One worker process as the host holds it: its input (written without ever blocking), its
//! output (read by whichever of its executions leads), the routes from run numbers to the
//! executions waiting for their frames, and its control page.
//!
//! A worker hosts many executions at once, and every frame names its run. There is no reader
//! task: the execution that holds the output's lock reads for all of them, handing other runs'
//! frames over a channel, so a worker with one execution reads exactly as fast as before (and
//! may poll its pipe while a core is spare). Input never blocks: a frame goes straight into the
//! pipe, and what does not fit waits in a queue a task flushes, so a reader is never stuck
//! behind a write while the worker is stuck behind a read.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::output::WorkerOutput;
use crate::error::SandboxError;
use crate::wire::control::{CONTROL_FD, HostControl};
use crate::worker::lockdown::Protections;
use crate::wire::protocol::{ToolBinding, WorkerFrame};

/// How long a new worker has to lock down and report ready.
const SPAWN_TIMEOUT: Duration = Duration::from_secs(10);

/// What reaches a run's driver over its route.
#[derive(Debug)]
pub(crate) enum Routed {
    /// A frame of the run, read by another execution.
    Frame(WorkerFrame),
    /// The worker is computing and has not started the run: run it elsewhere (if nothing of
    /// it has been seen yet).
    Moved,
}

/// Where a run's frames go, how long the run may take, and whether it may still move.
pub(crate) struct Route {
    pub frames: mpsc::UnboundedSender<Routed>,
    pub wall: Duration,
    /// Whether the run may move to another worker (not once it has moved too often).
    pub movable: bool,
}

/// A worker process.
pub(crate) struct WorkerHandle {
    child: Mutex<Child>,
    pub input: Arc<WorkerInput>,
    pub output: Arc<tokio::sync::Mutex<WorkerOutput>>,
    routes: Mutex<HashMap<u64, Route>>,
    pub control: Option<HostControl>,
    next_run: AtomicU64,
    /// Runs started on it over its life.
    pub runs: AtomicU32,
    /// Runs on it now.
    pub in_flight: AtomicUsize,
    /// Why it is gone, once it is.
    gone: Mutex<Option<String>>,
    /// Takes no new runs; ends once its runs have.
    pub retiring: AtomicBool,
    /// Started beyond the pool's base count, while every worker was computing.
    pub elastic: bool,
}

/// What a worker reports when it is ready.
#[derive(Default, Clone)]
pub(crate) struct Reported {
    pub protections: Protections,
    pub template_bytes: Option<u64>,
    /// Every run gets a runtime no run used before (a template copy, or a V8 isolate).
    pub fresh_per_run: bool,
}

impl WorkerHandle {
    /// Sends a new run: numbers it (runs reach the worker in the order they are numbered),
    /// opens its route, and writes the frame `build` makes for that number, given whether the
    /// worker already has the execution's tools. `Ok(None)` if the worker is gone.
    pub fn start_run(
        &self,
        route: Route,
        tools: &Arc<Vec<ToolBinding>>,
        build: impl FnOnce(u64, bool) -> std::io::Result<Vec<u8>>,
    ) -> std::io::Result<Option<u64>> {
        if self.gone().is_some() {
            return Ok(None);
        }
        self.input.send_with(|known| {
            let run = self.next_run.fetch_add(1, Ordering::SeqCst) + 1;
            lock(&self.routes).insert(run, route);
            let same = known
                .as_ref()
                .is_some_and(|sent| Arc::ptr_eq(sent, tools) || sent == tools);
            if !same {
                *known = Some(tools.clone());
            }
            Ok((build(run, same)?, Some(run)))
        })
    }

    /// While the worker computes, moves the runs it has not started to other workers: they
    /// are skipped here and their drivers told to go elsewhere (a driver that has already
    /// seen a frame of its run stays). Returns how many were told.
    pub fn move_unstarted(&self) -> usize {
        let Some(control) = &self.control else {
            return 0;
        };
        let page = control.page();
        let started = page.started_run.load(Ordering::SeqCst);
        let routes = lock(&self.routes);
        let mut moved = 0;
        for (run, route) in routes.iter() {
            if *run > started && route.movable {
                // Marked skipped before the driver is told, so that a run that moves is never
                // also started here.
                page.skip(*run);
                let _ = route.frames.send(Routed::Moved);
                moved += 1;
            }
        }
        moved
    }

    /// Stops routing `run`'s frames (they are dropped from now on).
    pub fn close_route(&self, run: u64) {
        lock(&self.routes).remove(&run);
    }

    /// Hands a frame read by the leading execution to the run it belongs to.
    pub fn route(&self, frame: WorkerFrame) {
        let Some(run) = run_of(&frame) else { return };
        if let Some(route) = lock(&self.routes).get(&run) {
            let _ = route.frames.send(Routed::Frame(frame));
        }
    }

    /// The longest wall time among the runs on it.
    pub fn longest_wall(&self) -> Duration {
        lock(&self.routes)
            .values()
            .map(|r| r.wall)
            .max()
            .unwrap_or_default()
    }

    /// Why the worker is gone, if it is.
    pub fn gone(&self) -> Option<String> {
        lock(&self.gone).clone()
    }

    /// Whether it takes new runs.
    pub fn available(&self) -> bool {
        !self.retiring.load(Ordering::Relaxed) && self.gone().is_none()
    }

    /// Whether it has been in one turn for at least `at_least` (computing, not waiting).
    pub fn computing_for(&self, at_least: Duration) -> bool {
        self.control
            .as_ref()
            .and_then(HostControl::turn_age)
            .is_some_and(|age| age >= at_least)
    }

    /// Asks the worker to stop `run` at its next interrupt check, if it is computing it.
    pub fn request_stop(&self, run: u64) {
        if let Some(control) = &self.control {
            control.page().stop(run);
        }
    }

    /// Kills the process and fails every run on it with `why`: their drivers see their route
    /// close and report what had run. Idempotent.
    pub fn fail(&self, why: String) {
        {
            let mut gone = lock(&self.gone);
            if gone.is_none() {
                *gone = Some(why);
            }
        }
        let _ = lock(&self.child).start_kill();
        lock(&self.routes).clear();
    }

    /// Whether the process has exited (and then fails its runs with its status).
    pub fn check_exited(&self) -> bool {
        let status = lock(&self.child).try_wait();
        match status {
            Ok(Some(status)) => {
                self.fail(format!("the sandbox worker exited ({status})"));
                true
            }
            Ok(None) => false,
            Err(e) => {
                self.fail(format!("the sandbox worker cannot be watched: {e}"));
                true
            }
        }
    }

    /// Kills the process without failing anything (it holds no runs).
    pub fn stop(&self) {
        let _ = lock(&self.child).start_kill();
        let mut gone = lock(&self.gone);
        if gone.is_none() {
            *gone = Some("the sandbox worker was stopped".into());
        }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        lock(&self.child).id()
    }
}

/// The run a worker frame belongs to.
pub(crate) fn run_of(frame: &WorkerFrame) -> Option<u64> {
    match frame {
        WorkerFrame::Call { run, .. }
        | WorkerFrame::CancelCall { run, .. }
        | WorkerFrame::Log { run, .. }
        | WorkerFrame::Done { run, .. } => Some(*run),
        _ => None,
    }
}

/// A worker's stdin: frames written at once when the pipe has room, queued when it has not.
pub(crate) struct WorkerInput {
    pipe: AsyncFd<OwnedFd>,
    state: Mutex<InputState>,
}

struct InputState {
    /// Bytes waiting for room in the pipe, in order.
    queued: std::collections::VecDeque<u8>,
    /// Whether a task is flushing the queue.
    flushing: bool,
    /// The tools last sent to this worker, which it keeps for the next run.
    pub tools: Option<Arc<Vec<ToolBinding>>>,
}

impl WorkerInput {
    #[expect(unsafe_code, reason = "the `OwnedFd` owns the descriptor, so it stays open and the same for as long as the `AsyncFd` holds it.")]
    fn new(fd: OwnedFd) -> std::io::Result<Arc<WorkerInput>> {
        set_nonblocking(&fd)?;
        // SAFETY: the `OwnedFd` owns the descriptor, so it stays open and the same for as long
        // as the `AsyncFd` holds it.
        let pipe =
            unsafe { AsyncFd::register(fd) }.map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Arc::new(WorkerInput {
            pipe,
            state: Mutex::new(InputState {
                queued: Default::default(),
                flushing: false,
                tools: None,
            }),
        }))
    }

    /// Writes `bytes` after everything written before, never waiting. `build` makes the bytes
    /// under the input's lock, given the tools the worker last received (which it may update),
    /// so frames that depend on that go out in the order they were decided.
    pub fn send_with<T>(
        self: &Arc<Self>,
        build: impl FnOnce(&mut Option<Arc<Vec<ToolBinding>>>) -> std::io::Result<(Vec<u8>, T)>,
    ) -> std::io::Result<T> {
        let mut state = lock(&self.state);
        let (bytes, out) = build(&mut state.tools)?;
        self.write_locked(&mut state, &bytes)?;
        Ok(out)
    }

    /// Writes `bytes` after everything written before, never waiting.
    pub fn send(self: &Arc<Self>, bytes: &[u8]) -> std::io::Result<()> {
        let mut state = lock(&self.state);
        self.write_locked(&mut state, bytes)
    }

    fn write_locked(self: &Arc<Self>, state: &mut InputState, bytes: &[u8]) -> std::io::Result<()> {
        let mut written = 0;
        if state.queued.is_empty() {
            while written < bytes.len() {
                match nix::unistd::write(self.pipe.get_ref(), &bytes[written..]) {
                    Ok(n) => written += n,
                    Err(nix::errno::Errno::EAGAIN) => break,
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        if written < bytes.len() {
            state.queued.extend(&bytes[written..]);
            if !state.flushing {
                state.flushing = true;
                let input = self.clone();
                tokio::spawn(async move { input.flush().await });
            }
        }
        Ok(())
    }

    /// Writes the queue out as the pipe makes room.
    async fn flush(self: Arc<Self>) {
        loop {
            let Ok(mut ready) = self.pipe.writable().await else {
                break;
            };
            let mut state = lock(&self.state);
            let (front, _) = state.queued.as_slices();
            match nix::unistd::write(self.pipe.get_ref(), front) {
                Ok(n) => {
                    state.queued.drain(..n);
                }
                Err(nix::errno::Errno::EAGAIN) => ready.clear_ready(),
                Err(nix::errno::Errno::EINTR) => {}
                // The worker is gone; its reader reports why.
                Err(_) => state.queued.clear(),
            }
            if state.queued.is_empty() {
                state.flushing = false;
                return;
            }
        }
        lock(&self.state).flushing = false;
    }
}

fn set_nonblocking(fd: &OwnedFd) -> std::io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = fcntl(fd.as_fd(), FcntlArg::F_GETFL)?;
    let flags = OFlag::from_bits_retain(flags) | OFlag::O_NONBLOCK;
    fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags))?;
    Ok(())
}

/// Starts one worker, with a control page, and waits for it to report ready.
#[expect(unsafe_code, reason = "the worker's pipes are set non-blocking through their raw descriptors")]
pub(crate) async fn spawn(
    program: &PathBuf,
    args: &[String],
    elastic: bool,
) -> Result<(Arc<WorkerHandle>, Reported), SandboxError> {
    let spawn_error = |source: std::io::Error| SandboxError::Spawn {
        program: program.clone(),
        source,
    };
    // A worker without a control page still runs; the host then cannot stop a computing
    // execution without killing its worker.
    let control = HostControl::new().ok();
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // A pipe of its own, never the gateway's (see `stderr`).
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // A group of its own: a Ctrl-C in the gateway's terminal reaches the gateway, which
        // cancels and stops its workers, rather than killing them under running executions.
        .process_group(0);
    if let Some(fd) = control.as_ref().map(HostControl::fd) {
        // SAFETY: between fork and exec the closure only calls `dup2` and `fcntl`, which are
        // async-signal-safe, on descriptors the child already has.
        unsafe {
            command.pre_exec(move || {
                if fd == CONTROL_FD {
                    // `dup2` onto itself keeps close-on-exec: clear it instead.
                    if nix::libc::fcntl(fd, nix::libc::F_SETFD, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if nix::libc::dup2(fd, CONTROL_FD) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = command.spawn().map_err(spawn_error)?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(spawn_error(std::io::Error::other("no pipes")));
    };
    if let Some(stderr) = child.stderr.take() {
        super::stderr::relay(stderr, child.id());
    }
    let output = WorkerOutput::new(stdout).map_err(spawn_error)?;
    let input =
        WorkerInput::new(stdin.into_owned_fd().map_err(spawn_error)?).map_err(spawn_error)?;
    let worker = Arc::new(WorkerHandle {
        child: Mutex::new(child),
        input,
        output: Arc::new(tokio::sync::Mutex::new(output)),
        routes: Mutex::new(HashMap::new()),
        control,
        next_run: AtomicU64::new(0),
        runs: AtomicU32::new(0),
        in_flight: AtomicUsize::new(0),
        gone: Mutex::new(None),
        retiring: AtomicBool::new(false),
        elastic,
    });
    let ready = {
        let mut output = worker.output.lock().await;
        tokio::time::timeout(SPAWN_TIMEOUT, output.next()).await
    };
    match ready {
        Ok(Some(Ok(WorkerFrame::Ready {
            protections,
            template_bytes,
            fresh_per_run,
        }))) => Ok((
            worker,
            Reported {
                protections: Protections {
                    active: protections,
                },
                fresh_per_run: fresh_per_run || template_bytes.is_some(),
                template_bytes,
            },
        )),
        Ok(other) => {
            worker.stop();
            Err(SandboxError::WorkerStart(format!(
                "expected a Ready frame, got {other:?}"
            )))
        }
        Err(_) => {
            worker.stop();
            Err(SandboxError::WorkerStart(format!(
                "no Ready frame within {SPAWN_TIMEOUT:?}"
            )))
        }
    }
}

/// Locks `mutex`, taking the data of one a panicking holder poisoned (every holder leaves it
/// whole).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
