//! The doors into the region: the process's global allocator ([`RegionAllocator`]) and the
//! `malloc` family QuickJS is given (`c_malloc` and friends). Each sends a block to the region
//! (or a big block of its own) while the region is active on the calling thread, and elsewhere
//! to the allocator that serves the rest of the process: jemalloc for Rust's blocks, the C
//! allocator for QuickJS's. Each block is freed by the allocator that made it, told apart by
//! address. Also the process-wide tuning of those two allocators (`map_large_blocks`) and the
//! hand-back of their free memory (`return_free_memory`).

use std::alloc::{GlobalAlloc, Layout};

use nix::libc;
use tikv_jemallocator::Jemalloc as Outside;

use super::{
    HEADER, active, active_alloc, big_len, big_resize, big_slot, big_free, contains, region_free,
    region_usable,
};

/// Hands the allocators' free memory back to the kernel: Rust's (jemalloc, outside the region),
/// in every thread's arena, and the C allocator's (SQLite's, QuickJS's outside the region).
/// Both keep what a burst of large requests freed for reuse; a gateway that just moved a 16 MiB
/// result would otherwise stay that much larger. Costs a walk of the heaps: call it after large
/// work, not on every request.
#[expect(unsafe_code, reason = "purging and `malloc_trim` only release free pages; they are safe to call at any time.")]
pub fn return_free_memory() {
    // `arena.<MALLCTL_ARENAS_ALL>.purge`: every arena's unused dirty pages, whichever thread
    // freed them. The calling thread's cache goes first, so its blocks are purged too.
    // SAFETY: both names take no value and return none.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            c"thread.tcache.flush".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases free pages; it is safe to call at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Makes the C allocator serve every block of [`LARGE_BLOCK`] or more with a mapping of its
/// own, returned to the kernel when freed. glibc otherwise raises that threshold as large
/// blocks come and go, then serves them from a thread's arena, where a freed block merges into
/// the arena's top, which `malloc_trim` never gives back: after one 15 MB result passed through
/// the gateway's threads, 60 MB stayed resident, more after each repeat. (One arena for all
/// threads also fixed that, but cost 8–14% of HTTP throughput at 10 to 50 clients.) Call it
/// before any thread starts.
#[expect(unsafe_code, reason = "`mallopt` only changes a tuning parameter of the allocator.")]
pub fn map_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only changes a tuning parameter of the allocator.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE_BLOCK as libc::c_int);
    }
}

/// The size from which [`map_large_blocks`] gives a block its own mapping.
pub const LARGE_BLOCK: usize = 512 * 1024;

/// `malloc` for QuickJS: the region (or a big block) while it is active, else the C allocator.
#[expect(unsafe_code, reason = "plain allocation.")]
pub(crate) unsafe fn c_malloc(size: usize) -> *mut u8 {
    if active() {
        // SAFETY: plain allocation.
        if let Some(p) = unsafe { active_alloc(size, HEADER) } {
            return p;
        }
    }
    // SAFETY: plain `malloc`.
    unsafe { libc::malloc(size.max(1)) }.cast()
}

/// `calloc` for QuickJS.
#[expect(unsafe_code, reason = "the region allocator maps, copies and unmaps raw memory that only this worker's allocator owns")]
pub(crate) unsafe fn c_calloc(count: usize, size: usize) -> *mut u8 {
    let Some(total) = count.checked_mul(size) else {
        return std::ptr::null_mut();
    };
    if active() {
        // SAFETY: plain allocation.
        if let Some(p) = unsafe { active_alloc(total, HEADER) } {
            // A reused region block holds old data; a fresh mapping is zero already, and
            // zeroing it would touch every page.
            if !p.is_null() && big_slot(p).is_none() {
                // SAFETY: the block has room for `total` bytes.
                unsafe { std::ptr::write_bytes(p, 0, total) };
            }
            return p;
        }
    }
    // SAFETY: plain `calloc`.
    unsafe { libc::calloc(count.max(1), size.max(1)) }.cast()
}

/// `free` for QuickJS: each block goes back to where it came from.
#[expect(unsafe_code, reason = "the caller passes a live pointer from `c_malloc` and friends.")]
pub(crate) unsafe fn c_free(ptr: *mut u8) {
    if contains(ptr) {
        // SAFETY: the caller passes a live pointer from `c_malloc` and friends.
        unsafe { region_free(ptr) }
    } else if let Some(slot) = big_slot(ptr) {
        big_free(slot);
    } else {
        // SAFETY: as above; not in the region, so it came from the C allocator.
        unsafe { libc::free(ptr.cast()) }
    }
}

/// `malloc_usable_size` for QuickJS.
#[expect(unsafe_code, reason = "the caller passes a live pointer from `c_malloc` and friends.")]
pub(crate) unsafe fn c_usable_size(ptr: *mut u8) -> usize {
    if contains(ptr) {
        // SAFETY: the caller passes a live pointer from `c_malloc` and friends.
        unsafe { region_usable(ptr) }
    } else if let Some(slot) = big_slot(ptr) {
        big_len(slot) - HEADER
    } else {
        // SAFETY: as above.
        unsafe { libc::malloc_usable_size(ptr.cast()) }
    }
}

/// `realloc` for QuickJS. A null result leaves the old block valid.
#[expect(unsafe_code, reason = "the region allocator maps, copies and unmaps raw memory that only this worker's allocator owns")]
pub(crate) unsafe fn c_realloc(ptr: *mut u8, size: usize) -> *mut u8 {
    if let Some(slot) = big_slot(ptr) {
        return big_resize(slot, size);
    }
    if !contains(ptr) && !active() {
        // SAFETY: a C allocator block, resized by the C allocator.
        return unsafe { libc::realloc(ptr.cast(), size.max(1)) }.cast();
    }
    // SAFETY: the caller passes a live pointer from `c_malloc` and friends.
    let old = unsafe { c_usable_size(ptr) };
    if contains(ptr) && size <= old {
        return ptr;
    }
    // SAFETY: a new block, the old contents copied into it, then the old block freed.
    unsafe {
        let moved = c_malloc(size);
        if !moved.is_null() {
            std::ptr::copy_nonoverlapping(ptr, moved, old.min(size));
            c_free(ptr);
        }
        moved
    }
}

/// The process's global allocator in every binary that runs the sandbox worker: jemalloc,
/// except on a thread where the region is active (see the module docs). Blocks are always freed
/// where they came from. jemalloc, not the C allocator, because a request's blocks are often
/// freed on another thread than the one that made them, which glibc serves under its arena's
/// lock: a quarter of the HTTP front's CPU went to glibc's `malloc` and `free` and their locks
/// (docs/BENCHMARKS.md, issue 35). QuickJS's own blocks outside the region still come from the
/// C allocator (`c_malloc` and friends), so each kind is freed by the allocator that made it.
pub struct RegionAllocator;

// SAFETY: region blocks satisfy the layout (size and alignment up to `MAX_ALIGN`, checked in
// `region_alloc`), everything else is jemalloc's; each block is freed by the
// allocator that made it, told apart by address.
#[expect(unsafe_code, reason = "plain allocation.")]
unsafe impl GlobalAlloc for RegionAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if active() {
            // SAFETY: plain allocation.
            if let Some(p) = unsafe { active_alloc(layout.size(), layout.align()) } {
                return p;
            }
        }
        // SAFETY: the caller's layout has a non-zero size.
        let p = unsafe { Outside.alloc(layout) };
        if !p.is_null() {
            crate::worker::heap_count::grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if active() {
            // SAFETY: plain allocation.
            if let Some(p) = unsafe { active_alloc(layout.size(), layout.align()) } {
                // A reused region block holds old data; a fresh mapping is zero already.
                if !p.is_null() && big_slot(p).is_none() {
                    // SAFETY: the block has room for the layout.
                    unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
                }
                return p;
            }
        }
        // SAFETY: as in `alloc`.
        let p = unsafe { Outside.alloc_zeroed(layout) };
        if !p.is_null() {
            crate::worker::heap_count::grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if contains(ptr) {
            // SAFETY: a live region block.
            unsafe { region_free(ptr) }
        } else if let Some(slot) = big_slot(ptr) {
            big_free(slot);
        } else {
            // SAFETY: not in the region, so jemalloc made it with this layout.
            unsafe { Outside.dealloc(ptr, layout) };
            crate::worker::heap_count::shrank(layout.size());
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if let Some(slot) = big_slot(ptr) {
            return big_resize(slot, new_size);
        }
        if !contains(ptr) && !active() {
            // SAFETY: a jemalloc block, resized by jemalloc.
            let moved = unsafe { Outside.realloc(ptr, layout, new_size) };
            if !moved.is_null() {
                crate::worker::heap_count::shrank(layout.size());
                crate::worker::heap_count::grew(new_size);
            }
            return moved;
        }
        if contains(ptr) {
            // SAFETY: a live region block.
            let usable = unsafe { region_usable(ptr) };
            if new_size <= usable {
                return ptr;
            }
        }
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: a new block, the old contents copied into it, then the old block freed.
        unsafe {
            let moved = self.alloc(new_layout);
            if !moved.is_null() {
                std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            moved
        }
    }
}

