//! The control page: one page of memory the host and a worker share, for what cannot wait for
//! a frame.
//!
//! A worker reads frames only between turns, and a turn of CPU-bound code can last until its
//! execution's deadline. Three things cannot wait that long, so they travel through this page
//! instead, as plain atomic words:
//! - the host asks a computing execution to stop (`stopped`, read by the QuickJS interrupt
//!   handler, so a cancelled loop ends within milliseconds without killing the worker and the
//!   other executions on it);
//! - the worker says since when its current turn has run (`turn_started_ns`), so the host
//!   gives new executions to a worker that is not computing, and kills a worker only when one
//!   turn outlives every deadline it could have;
//! - the worker says how many executions it holds and how much memory their parked images
//!   take, for admission.
//!
//! The page is a `memfd` the host maps and passes to the worker as fd [`CONTROL_FD`]; the
//! worker maps it before it locks down. Nothing in it is trusted for safety by the host: a
//! worker that writes nonsense only misleads dispatch, and the host's own limits still hold.

use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use nix::libc;

/// The descriptor the worker finds the page at.
pub const CONTROL_FD: i32 = 3;

const PAGE_BYTES: usize = 4096;

/// The shared words.
#[repr(C)]
#[derive(Debug)]
pub struct ControlPage {
    /// `CLOCK_MONOTONIC` nanoseconds at which the worker's current turn began; 0 while it waits
    /// for input.
    pub turn_started_ns: AtomicU64,
    /// Runs the host wants stopped, each at `run % STOP_SLOTS`: the run's interrupt handler
    /// ends it at its next check. (Slots, not one word: two stops in the same instant must not
    /// overwrite each other.)
    pub stopped: [AtomicU64; STOP_SLOTS],
    /// Executions the worker holds (running, waiting or parked).
    pub executions: AtomicU64,
    /// Bytes of the worker's parked images and of its executions' big blocks.
    pub held_bytes: AtomicU64,
    /// The highest run the worker has started (or skipped): runs arrive in the order they
    /// are numbered.
    pub started_run: AtomicU64,
    /// Runs the worker must skip when it reaches them, each at `run % SKIP_SLOTS`: the host
    /// moved them to another worker while this one was computing. (A slot overwritten before
    /// the worker reached its run only means that run starts here too, unseen: the host no
    /// longer reads its frames.)
    pub skipped: [AtomicU64; SKIP_SLOTS],
}

/// Slots for moved runs on the control page.
pub const SKIP_SLOTS: usize = 256;
/// Slots for runs to stop.
pub const STOP_SLOTS: usize = 64;

// The shared words fit the one page both sides map.
const _: () = assert!(size_of::<ControlPage>() <= PAGE_BYTES);

impl ControlPage {
    /// Host side: `run` is to stop at its next interrupt check.
    pub fn stop(&self, run: u64) {
        self.stopped[(run % STOP_SLOTS as u64) as usize].store(run, Ordering::SeqCst);
    }

    /// Host side: the worker is to skip `run`.
    pub fn skip(&self, run: u64) {
        self.skipped[(run % SKIP_SLOTS as u64) as usize].store(run, Ordering::SeqCst);
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the same clock in every process on the host.
pub fn now_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        (t.tv_sec() as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec() as u64)
    })
}

/// The host's end: the mapping, and the descriptor a new worker inherits.
#[derive(Debug)]
pub struct HostControl {
    page: NonNull<ControlPage>,
    fd: OwnedFd,
}

// SAFETY: the page holds only atomics, and the mapping lives as long as the value.
#[expect(unsafe_code, reason = "the control page is a shared mapping read and written only through atomics")]
unsafe impl Send for HostControl {}
// SAFETY: as above: every access is atomic.
#[expect(unsafe_code, reason = "the control page is a shared mapping read and written only through atomics")]
unsafe impl Sync for HostControl {}

impl HostControl {
    /// A new, zeroed page.
    pub fn new() -> std::io::Result<HostControl> {
        let fd = nix::sys::memfd::memfd_create(
            c"sandgate-control",
            nix::sys::memfd::MFdFlags::MFD_CLOEXEC,
        )?;
        nix::unistd::ftruncate(&fd, PAGE_BYTES as libc::off_t)?;
        let page = map_shared(fd.as_raw_fd())?;
        Ok(HostControl { page, fd })
    }

    /// The shared words.
    pub fn page(&self) -> &ControlPage {
        // SAFETY: the mapping is live, page-aligned, zero-initialized (a valid `ControlPage`)
        // and only ever accessed through atomics.
        #[expect(unsafe_code, reason = "the mapping is live, page-aligned, zero-initialized (a valid `ControlPage`) and only ever accessed through atomics.")]
        unsafe {
            self.page.as_ref()
        }
    }

    /// The descriptor to hand to the worker as [`CONTROL_FD`].
    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// How long the worker's current turn has run, if it is in one.
    pub fn turn_age(&self) -> Option<std::time::Duration> {
        let started = self.page().turn_started_ns.load(Ordering::Relaxed);
        (started != 0).then(|| std::time::Duration::from_nanos(now_ns().saturating_sub(started)))
    }
}

impl Drop for HostControl {
    #[expect(unsafe_code, reason = "the mapping was made in `new` with this length and is not used after.")]
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `new` with this length and is not used after.
        unsafe { libc::munmap(self.page.as_ptr().cast(), PAGE_BYTES) };
    }
}

/// Maps the page behind `fd`, shared and writable.
#[expect(unsafe_code, reason = "a new shared mapping of one page of `fd` at an address the kernel chooses; nothing else refers to it yet, and a bad descriptor fails the call.")]
fn map_shared(fd: i32) -> std::io::Result<NonNull<ControlPage>> {
    // SAFETY: a new shared mapping of one page of `fd` at an address the kernel chooses;
    // nothing else refers to it yet, and a bad descriptor fails the call.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    NonNull::new(base.cast::<ControlPage>())
        .ok_or_else(|| std::io::Error::other("mmap returned null"))
}

static WORKER_PAGE: AtomicPtr<ControlPage> = AtomicPtr::new(std::ptr::null_mut());

/// Worker side: maps the page from [`CONTROL_FD`], if the host passed one, then closes the
/// descriptor. Call before locking down. Returns whether a page is attached.
#[expect(unsafe_code, reason = "the control page is a shared mapping read and written only through atomics")]
pub fn attach() -> bool {
    // The worker may or may not have the descriptor; failure is reported, not assumed.
    let Ok(page) = map_shared(CONTROL_FD) else {
        return false;
    };
    // SAFETY: the descriptor is the worker's own and no longer needed (the mapping stays).
    unsafe { libc::close(CONTROL_FD) };
    WORKER_PAGE.store(page.as_ptr(), Ordering::Release);
    true
}

/// Worker side: the attached page, if any.
pub fn worker_page() -> Option<&'static ControlPage> {
    let page = WORKER_PAGE.load(Ordering::Acquire);
    // SAFETY: set once by `attach` to a live mapping that is never unmapped.
    #[expect(unsafe_code, reason = "set once by `attach` to a live mapping that is never unmapped.")]
    unsafe {
        page.as_ref()
    }
}

/// Worker side: whether the host moved `run` elsewhere before it started.
pub fn skip_requested(run: u64) -> bool {
    worker_page().is_some_and(|page| {
        page.skipped[(run % SKIP_SLOTS as u64) as usize].load(Ordering::SeqCst) == run
    })
}

/// Worker side: `run` has started (or was skipped).
pub fn started(run: u64) {
    if let Some(page) = worker_page() {
        page.started_run.fetch_max(run, Ordering::SeqCst);
    }
}

/// Worker side: whether the host asked `run` to stop.
pub fn stop_requested(run: u64) -> bool {
    worker_page().is_some_and(|page| {
        page.stopped[(run % STOP_SLOTS as u64) as usize].load(Ordering::Relaxed) == run
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_in_the_same_instant_do_not_overwrite_each_other() {
        let control = HostControl::new().expect("page");
        let page = control.page();
        page.stop(7);
        page.stop(8);
        let stopped = |run: u64| {
            page.stopped[(run % STOP_SLOTS as u64) as usize].load(Ordering::Relaxed) == run
        };
        assert!(stopped(7) && stopped(8), "both runs stop");
        assert!(!stopped(9), "a run nobody stopped goes on");
    }

    #[test]
    fn the_page_is_shared_zeroed_and_ages_turns() {
        let control = HostControl::new().expect("page");
        assert_eq!(control.turn_age(), None, "a fresh page: no turn");
        let page = control.page();
        page.turn_started_ns
            .store(now_ns() - 5_000_000, Ordering::Relaxed);
        let age = control.turn_age().expect("in a turn");
        assert!(age >= std::time::Duration::from_millis(5), "{age:?}");
        // A second mapping of the same descriptor sees the same words.
        let other = map_shared(control.fd()).expect("a second mapping");
        page.stop(42);
        // SAFETY: the mapping is live and holds a `ControlPage`.
        #[expect(unsafe_code, reason = "the mapping is live and holds a `ControlPage`.")]
        let seen = unsafe { other.as_ref() }.stopped[42].load(Ordering::Relaxed);
        assert_eq!(seen, 42);
    }
}
