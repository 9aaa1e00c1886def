//! The allocator each fresh QuickJS runtime uses: the worker's heap region while it is active,
//! else the C allocator (see `crate::worker::region`), plus a count of the bytes it holds.
//!
//! An execution reports how much heap it used. QuickJS can only say so by walking every
//! object, shape and atom in the runtime (`JS_ComputeMemoryUsage`), which cost tens of
//! microseconds per execution, more than a tenth of a trivial one. Counting as memory is
//! handed out and returned makes the figure free to read.

use std::cell::Cell;
use std::rc::Rc;

use rquickjs::allocator::Allocator;

use crate::worker::region;

/// Bytes currently allocated by one runtime, shared with the engine that reads it.
pub(crate) type HeapCounter = Rc<Cell<usize>>;

/// `region::c_malloc` and friends, counting usable bytes.
pub(crate) struct CountingAllocator {
    live: HeapCounter,
}

#[expect(unsafe_code, reason = "the runtime's allocator hands out and counts raw blocks it owns")]
impl CountingAllocator {
    /// An allocator and the counter it updates.
    pub(crate) fn new() -> (CountingAllocator, HeapCounter) {
        let live = HeapCounter::default();
        (CountingAllocator { live: live.clone() }, live)
    }

    fn gained(&self, ptr: *mut u8) -> *mut u8 {
        if !ptr.is_null() {
            // SAFETY: `ptr` was just returned by `region::c_malloc` or a sibling.
            let size = unsafe { region::c_usable_size(ptr) };
            self.live.set(self.live.get().saturating_add(size));
        }
        ptr
    }
}

// SAFETY: every pointer handed out comes from `region::c_malloc` or a sibling and is returned
// to `region::c_free`; sizes are read with `region::c_usable_size`.
#[expect(unsafe_code, reason = "plain allocation; a null result is passed on, as QuickJS expects.")]
unsafe impl Allocator for CountingAllocator {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        // SAFETY: plain allocation; a null result is passed on, as QuickJS expects.
        self.gained(unsafe { region::c_malloc(size) })
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        // SAFETY: plain zeroed allocation; it checks `count * size` for overflow itself.
        self.gained(unsafe { region::c_calloc(count, size) })
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        // SAFETY: the caller passes a live pointer from this allocator.
        let size = unsafe { region::c_usable_size(ptr) };
        self.live.set(self.live.get().saturating_sub(size));
        // SAFETY: as above; it is not used again.
        unsafe { region::c_free(ptr) }
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        if ptr.is_null() {
            return self.alloc(new_size);
        }
        // SAFETY: the caller passes a live pointer from this allocator.
        let old = unsafe { region::c_usable_size(ptr) };
        // SAFETY: as above. On failure the old block stays valid and counted.
        let moved = unsafe { region::c_realloc(ptr, new_size) };
        if !moved.is_null() {
            self.live.set(self.live.get().saturating_sub(old));
            self.gained(moved);
        }
        moved
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        // SAFETY: the caller passes a live pointer from this allocator.
        unsafe { region::c_usable_size(ptr) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_follows_what_a_runtime_holds() {
        let (allocator, live) = CountingAllocator::new();
        let runtime = rquickjs::Runtime::new_with_alloc(allocator).expect("runtime");
        let context = rquickjs::Context::full(&runtime).expect("context");
        let empty = live.get();
        assert!(
            empty > 100_000,
            "a full context holds its builtins: {empty}"
        );
        let holding = context.with(|ctx| {
            let big: rquickjs::Value = ctx
                .eval("globalThis.keep = 'x'.repeat(1 << 20)")
                .expect("eval");
            drop(big);
            live.get()
        });
        assert!(
            holding >= empty + (1 << 20),
            "{holding} after a 1 MiB string, {empty} before"
        );
        context.with(|ctx| ctx.eval::<(), _>("delete globalThis.keep").expect("eval"));
        runtime.run_gc();
        assert!(
            live.get() < empty + (1 << 20),
            "freed memory is uncounted: {}",
            live.get()
        );
        drop(context);
        drop(runtime);
        assert_eq!(live.get(), 0, "a dropped runtime gives everything back");
    }
}
