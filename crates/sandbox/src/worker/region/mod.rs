//! The worker's heap region: one fixed block of address space that a fresh JavaScript runtime
//! is built in once, copied, and copied back before every execution.
//!
//! Building a QuickJS runtime and context with the preamble costs about 300 µs of CPU, and
//! tearing a used one down about 100 µs more, on every execution. Instead the worker builds one
//! *template* runtime while this region is active, so that everything the runtime owns lands
//! here: QuickJS's own memory (see `engine::heap`) and, through [`RegionAllocator`] as the
//! process's global allocator, every Rust object rquickjs and the engine create for it. A copy
//! of the region's used part is then a complete image of a never-used runtime. Each execution
//! runs in the region; afterwards [`restore`] copies the image back, which puts every byte the
//! runtime can reach, the allocator's own bookkeeping included (it lives at the start of the
//! region), exactly where it was before anything ran. No finalizer, no teardown, no rebuild:
//! the next execution starts from the same bytes as the first.
//!
//! The allocator is deliberately simple: size classes an eighth of a power of two apart, a free
//! list per class, and a bump pointer. Free lists never merge, so large blocks would pin their
//! memory: code that made and dropped buffers of ever new sizes grew a worker with a 64 MiB
//! heap limit to 459 MB. So during an execution (once the template is captured), a block of
//! [`BIG_BYTES`] or more gets a mapping of its own, unmapped the moment it is freed, and so
//! does any block when the region is full. Those *big blocks* are listed in a fixed table
//! outside the region, and [`restore`] unmaps whatever an execution left of them: nothing of a
//! run outlives it, and a worker's memory returns to the image plus `TRIM_ABOVE_BYTES`
//! after every execution. When the table is full an allocation fails, which QuickJS reports as
//! running out of memory. Before capture (while the template is built), a full region falls
//! back to the C allocator. Only one thread may use an active region; allocations on every
//! other thread are never placed in it.

mod allocators;

pub use allocators::{LARGE_BLOCK, RegionAllocator, map_large_blocks, return_free_memory};
pub(crate) use allocators::{c_calloc, c_free, c_malloc, c_realloc, c_usable_size};

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use nix::libc;

use crate::error::SandboxError;

/// Address space the worker reserves for its region (within the worker's address-space limit; pages
/// are only backed when used).
pub const REGION_BYTES: usize = 512 << 20;

/// After an execution whose allocations reached this far past the image, the pages beyond the
/// image are handed back to the kernel, so one big execution does not pin its memory.
pub(crate) const TRIM_ABOVE_BYTES: usize = 8 << 20;

/// Bytes before every block's payload: its size class and the payload's offset in the block.
const HEADER: usize = 16;
/// Size classes: 16-byte steps up to 256 bytes, then eight per power of two (so a block wastes
/// at most an eighth of its size, which QuickJS's heap limit counts).
const CLASSES: usize = 16 + 8 * 56;
/// The largest alignment placed in the region (larger ones go to the C allocator).
const MAX_ALIGN: usize = 4096;

/// Blocks of at least this many bytes, made during an execution, get a mapping of their own.
pub const BIG_BYTES: usize = 256 * 1024;
/// Big blocks alive at once, at most (a 64 MiB heap holds at most 256 of [`BIG_BYTES`]).
const BIG_SLOTS: usize = 4096;

static BASE: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);
/// Whether the template has been captured: from then on, what the region's thread allocates
/// belongs to an execution.
static CAPTURED: AtomicBool = AtomicBool::new(false);
/// The big blocks alive: their mappings' start addresses, in `BIG[..BIG_LIVE]`.
static BIG: [AtomicUsize; BIG_SLOTS] = [const { AtomicUsize::new(0) }; BIG_SLOTS];
static BIG_LIVE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread's allocations go to the region.
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
}

/// The allocator's state, at the start of the region (so an image carries it).
#[repr(C)]
struct Meta {
    /// Next unused byte.
    bump: usize,
    /// Free blocks, by class: the first one's address (0 if none); each holds the next.
    free: [usize; CLASSES],
}

/// Where a block starts and which class it is, written just before its payload.
#[repr(C)]
struct BlockHeader {
    class: u32,
    /// Payload address minus block start.
    offset: u32,
}

/// A copy of the region's used part, taken by [`capture`].
pub struct Image {
    bytes: Vec<u8>,
}

impl Image {
    /// The image's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The image's size in bytes (what each [`restore`] copies).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the image is empty (it never is: the allocator state is in it).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Whether this process has a region.
pub fn is_mapped() -> bool {
    BASE.load(Ordering::Relaxed) != 0
}

/// A fresh private anonymous read-write mapping of `len` bytes (pages backed only when
/// touched), or `None` if the kernel refuses.
#[expect(unsafe_code, reason = "a new mapping at an address the kernel chooses; nothing else refers to it.")]
fn fresh_mapping(len: usize) -> Option<usize> {
    // SAFETY: a new mapping at an address the kernel chooses; nothing else refers to it.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (base != libc::MAP_FAILED).then_some(base as usize)
}

/// Reserves the region. Once per process, before the worker locks down.
#[expect(unsafe_code, reason = "the region allocator maps, copies and unmaps raw memory that only this worker's allocator owns")]
pub fn map() -> Result<(), SandboxError> {
    if is_mapped() {
        return Ok(());
    }
    let Some(base) = fresh_mapping(REGION_BYTES) else {
        return Err(SandboxError::WorkerStart(format!(
            "cannot reserve the {} MiB heap region: {}",
            REGION_BYTES >> 20,
            std::io::Error::last_os_error()
        )));
    };
    // SAFETY: the mapping is zeroed, writable and large enough for `Meta`, and `base` is
    // page-aligned.
    unsafe { (*(base as *mut Meta)).bump = round_up(base + size_of::<Meta>(), 64) };
    END.store(base + REGION_BYTES, Ordering::Relaxed);
    BASE.store(base, Ordering::Release);
    Ok(())
}

/// Makes this thread's allocations go to the region until the guard is dropped.
pub fn enter() -> Entered {
    let was = ACTIVE.with(|a| a.replace(is_mapped()));
    Entered { was }
}

/// While alive, this thread allocates in the region. See [`enter`].
pub struct Entered {
    was: bool,
}

impl Drop for Entered {
    fn drop(&mut self) {
        ACTIVE.with(|a| a.set(self.was));
    }
}

/// Whether the process's global allocator places this thread's allocations in the region
/// while it is active (true when the binary installs [`RegionAllocator`]).
pub fn serves_global_allocations() -> bool {
    let _region = enter();
    let probe = Box::new(0u64);
    contains(std::ptr::from_ref(probe.as_ref()).cast_mut().cast())
}

/// Copies the region's used part. Call with no allocation from the region in flight that
/// should not be part of the image.
#[expect(unsafe_code, reason = "the region allocator maps, copies and unmaps raw memory that only this worker's allocator owns")]
pub fn capture() -> Option<Image> {
    let base = BASE.load(Ordering::Acquire);
    if base == 0 {
        return None;
    }
    // SAFETY: the region is mapped and `Meta` lives at its start.
    let used = unsafe { (*(base as *const Meta)).bump } - base;
    let mut bytes = Vec::with_capacity(used);
    // SAFETY: `[base, base + used)` is mapped and readable; `bytes` has room for `used` bytes
    // and is fully initialized by the copy.
    unsafe {
        std::ptr::copy_nonoverlapping(base as *const u8, bytes.as_mut_ptr(), used);
        bytes.set_len(used);
    }
    CAPTURED.store(true, Ordering::Relaxed);
    Some(Image { bytes })
}

/// Puts the region back exactly as it was when `image` was captured. Every block allocated
/// since is gone: nothing outside the region may still point into it.
#[expect(unsafe_code, reason = "the region allocator maps, copies and unmaps raw memory that only this worker's allocator owns")]
pub fn restore(image: &Image) {
    let base = BASE.load(Ordering::Acquire);
    if base == 0 {
        return;
    }
    unmap_big_blocks();
    // SAFETY: the region is mapped and `Meta` lives at its start.
    let reached = unsafe { (*(base as *const Meta)).bump };
    let kept = round_up(base + image.bytes.len(), 4096);
    if reached > kept + TRIM_ABOVE_BYTES {
        // SAFETY: `[kept, reached)` is inside the region and unused once the image is back;
        // MADV_DONTNEED on private anonymous memory just drops those pages (they read as zero).
        unsafe {
            libc::madvise(
                kept as *mut libc::c_void,
                round_up(reached, 4096) - kept,
                libc::MADV_DONTNEED,
            );
        }
    }
    // SAFETY: the image came from this region, so it fits, and the regions do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(image.bytes.as_ptr(), base as *mut u8, image.bytes.len());
    }
}

fn round_up(n: usize, to: usize) -> usize {
    (n + to - 1) & !(to - 1)
}

fn active() -> bool {
    ACTIVE.with(|a| a.get())
}

fn contains(ptr: *mut u8) -> bool {
    let p = ptr as usize;
    p >= BASE.load(Ordering::Relaxed) && p < END.load(Ordering::Relaxed)
}

/// The class for a payload of `size` bytes (already including alignment slack).
fn class_of(size: usize) -> usize {
    let s = round_up(size.max(16), 16);
    if s <= 256 {
        return s / 16 - 1;
    }
    // `s - 1` lies in [2^k, 2^(k+1)); the class is how many eighths of 2^k it takes.
    let k = (usize::BITS - 1 - (s - 1).leading_zeros()) as usize;
    let steps = ((s - 1) >> (k - 3)) + 1;
    16 + (k - 8) * 8 + (steps - 9)
}

/// The payload capacity of a class.
fn capacity(class: usize) -> usize {
    if class < 16 {
        return (class + 1) * 16;
    }
    let k = (class - 16) / 8 + 8;
    ((class - 16) % 8 + 9) << (k - 3)
}

/// A block for `size` bytes aligned to `align`, or null if the region is full.
#[expect(unsafe_code, reason = "the region allocator maps, copies and unmaps raw memory that only this worker's allocator owns")]
unsafe fn region_alloc(size: usize, align: usize) -> *mut u8 {
    let base = BASE.load(Ordering::Relaxed);
    if base == 0 || align > MAX_ALIGN || size > REGION_BYTES {
        return std::ptr::null_mut();
    }
    let slack = if align > HEADER { align } else { 0 };
    let class = class_of(size + slack);
    // SAFETY: the region is mapped and `Meta` lives at its start; only this thread uses it.
    let meta = unsafe { &mut *(base as *mut Meta) };
    let block = if meta.free[class] != 0 {
        let block = meta.free[class];
        // SAFETY: a free block holds the next free block's address in its first word.
        meta.free[class] = unsafe { *(block as *const usize) };
        block
    } else {
        let block = meta.bump;
        let end = block + HEADER + capacity(class);
        if end > END.load(Ordering::Relaxed) {
            return std::ptr::null_mut();
        }
        meta.bump = end;
        block
    };
    let payload = round_up(block + HEADER, align.max(HEADER));
    // SAFETY: the header's 8 bytes sit just before the payload, inside the block.
    unsafe {
        *((payload - HEADER) as *mut BlockHeader) = BlockHeader {
            class: class as u32,
            offset: (payload - block) as u32,
        };
    }
    payload as *mut u8
}

/// The header of a region block's payload.
#[expect(unsafe_code, reason = "the caller passes a payload from `region_alloc`, which wrote this header.")]
unsafe fn header(ptr: *mut u8) -> (usize, usize) {
    // SAFETY: the caller passes a payload from `region_alloc`, which wrote this header.
    let h = unsafe { &*((ptr as usize - HEADER) as *const BlockHeader) };
    (h.class as usize, h.offset as usize)
}

#[expect(unsafe_code, reason = "the caller passes a live payload from `region_alloc`.")]
unsafe fn region_free(ptr: *mut u8) {
    // SAFETY: the caller passes a live payload from `region_alloc`.
    let (class, offset) = unsafe { header(ptr) };
    let block = ptr as usize - offset;
    let base = BASE.load(Ordering::Relaxed);
    // SAFETY: the region is mapped; the block is no longer used, so its first word can hold
    // the free list's link.
    unsafe {
        let meta = &mut *(base as *mut Meta);
        *(block as *mut usize) = meta.free[class];
        meta.free[class] = block;
    }
}

#[expect(unsafe_code, reason = "the caller passes a live payload from `region_alloc`.")]
unsafe fn region_usable(ptr: *mut u8) -> usize {
    // SAFETY: the caller passes a live payload from `region_alloc`.
    let (class, offset) = unsafe { header(ptr) };
    HEADER + capacity(class) - offset
}

/// Whether allocations of the region's thread now belong to an execution.
fn in_execution() -> bool {
    CAPTURED.load(Ordering::Relaxed)
}

/// A block for an active region's thread: a big block when it is big (or the region is full)
/// during an execution, else a region block. `None` when the caller should fall back to the C
/// allocator (before capture only); a null block during an execution is a failed allocation.
#[expect(unsafe_code, reason = "plain allocation.")]
unsafe fn active_alloc(size: usize, align: usize) -> Option<*mut u8> {
    let execution = in_execution();
    if execution && size >= BIG_BYTES && align <= HEADER {
        // SAFETY: plain allocation.
        return Some(unsafe { big_alloc(size) });
    }
    // SAFETY: plain allocation.
    let p = unsafe { region_alloc(size, align) };
    if !p.is_null() {
        return Some(p);
    }
    if execution && align <= HEADER {
        // SAFETY: plain allocation.
        return Some(unsafe { big_alloc(size) });
    }
    None
}

/// A mapping of its own for `size` bytes, listed among the big blocks; null if the table is
/// full or the kernel refuses.
#[expect(unsafe_code, reason = "the region allocator maps, copies and unmaps raw memory that only this worker's allocator owns")]
unsafe fn big_alloc(size: usize) -> *mut u8 {
    let Some(len) = size.checked_add(HEADER + 4095).map(|n| n & !4095) else {
        return std::ptr::null_mut();
    };
    let slot = BIG_LIVE.load(Ordering::Relaxed);
    if slot >= BIG_SLOTS {
        return std::ptr::null_mut();
    }
    let Some(base) = fresh_mapping(len) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the mapping is page-aligned and larger than `HEADER`; it starts with its length.
    unsafe { *(base as *mut usize) = len };
    BIG[slot].store(base, Ordering::Relaxed);
    BIG_LIVE.store(slot + 1, Ordering::Relaxed);
    (base + HEADER) as *mut u8
}

/// The slot of the big block whose payload is `ptr`, if it is one.
fn big_slot(ptr: *mut u8) -> Option<usize> {
    let live = BIG_LIVE.load(Ordering::Relaxed);
    if live == 0 {
        return None;
    }
    let base = (ptr as usize).checked_sub(HEADER)?;
    (0..live).find(|&i| BIG[i].load(Ordering::Relaxed) == base)
}

/// The length of the mapping of the big block in `slot`.
#[expect(unsafe_code, reason = "a listed big block's mapping is live and starts with its length.")]
fn big_len(slot: usize) -> usize {
    // SAFETY: a listed big block's mapping is live and starts with its length.
    unsafe { *(BIG[slot].load(Ordering::Relaxed) as *const usize) }
}

/// Unmaps the big block in `slot` and takes it off the table.
#[expect(unsafe_code, reason = "the mapping is live and nothing uses it any more.")]
fn big_free(slot: usize) {
    let base = BIG[slot].load(Ordering::Relaxed);
    let len = big_len(slot);
    // SAFETY: the mapping is live and nothing uses it any more.
    unsafe { libc::munmap(base as *mut libc::c_void, len) };
    let last = BIG_LIVE.load(Ordering::Relaxed) - 1;
    BIG[slot].store(BIG[last].load(Ordering::Relaxed), Ordering::Relaxed);
    BIG[last].store(0, Ordering::Relaxed);
    BIG_LIVE.store(last, Ordering::Relaxed);
}

/// Grows or shrinks the big block in `slot` to hold `size` bytes, moving it if it must;
/// null (the block unchanged) if the kernel refuses.
#[expect(unsafe_code, reason = "the region allocator maps, copies and unmaps raw memory that only this worker's allocator owns")]
fn big_resize(slot: usize, size: usize) -> *mut u8 {
    let base = BIG[slot].load(Ordering::Relaxed);
    let old = big_len(slot);
    let Some(len) = size.checked_add(HEADER + 4095).map(|n| n & !4095) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the mapping is live; MREMAP_MAYMOVE keeps its contents wherever it ends up.
    let moved = unsafe { libc::mremap(base as *mut libc::c_void, old, len, libc::MREMAP_MAYMOVE) };
    if moved == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    // SAFETY: the (moved) mapping starts with its length.
    unsafe { *(moved as *mut usize) = len };
    BIG[slot].store(moved as usize, Ordering::Relaxed);
    (moved as usize + HEADER) as *mut u8
}

/// Unmaps every big block: what an execution left is gone with it.
fn unmap_big_blocks() {
    while BIG_LIVE.load(Ordering::Relaxed) > 0 {
        big_free(BIG_LIVE.load(Ordering::Relaxed) - 1);
    }
}

/// How many big blocks are alive.
pub fn big_blocks() -> usize {
    BIG_LIVE.load(Ordering::Relaxed)
}

/// The region's start and how far its allocator has handed out memory (the bump pointer), if
/// this process has a region.
#[expect(unsafe_code, reason = "the region is mapped and `Meta` lives at its start.")]
pub(crate) fn used_span() -> Option<(usize, usize)> {
    let base = BASE.load(Ordering::Acquire);
    // SAFETY: the region is mapped and `Meta` lives at its start.
    (base != 0).then(|| (base, unsafe { (*(base as *const Meta)).bump }))
}

/// Takes every big block off the table, into `into`: the caller now keeps them (for a parked
/// execution) and must [`put_big_blocks`] them back before that execution runs again. `Err`
/// when `into` cannot grow.
pub(crate) fn take_big_blocks(
    into: &mut Vec<usize>,
) -> Result<(), std::collections::TryReserveError> {
    let live = BIG_LIVE.load(Ordering::Relaxed);
    into.try_reserve_exact(live)?;
    for slot in BIG.iter().take(live) {
        into.push(slot.swap(0, Ordering::Relaxed));
    }
    BIG_LIVE.store(0, Ordering::Relaxed);
    Ok(())
}

/// Puts a parked execution's big blocks back on the (empty) table.
pub(crate) fn put_big_blocks(blocks: &[usize]) {
    let live = BIG_LIVE.load(Ordering::Relaxed);
    for (slot, &base) in BIG.iter().skip(live).zip(blocks) {
        slot.store(base, Ordering::Relaxed);
    }
    BIG_LIVE.store((live + blocks.len()).min(BIG_SLOTS), Ordering::Relaxed);
}

/// The bytes mapped for big blocks listed in `blocks`.
#[expect(unsafe_code, reason = "a big block's mapping is live and starts with its length.")]
pub(crate) fn big_block_bytes(blocks: &[usize]) -> usize {
    blocks
        .iter()
        // SAFETY: a big block's mapping is live and starts with its length.
        .map(|&base| unsafe { *(base as *const usize) })
        .sum()
}

/// Hands the pages of the region from `from` to `to` back to the kernel (they read as zero).
#[expect(unsafe_code, reason = "`[from, to)` lies in the region and holds nothing anyone reads again.")]
pub(crate) fn discard_pages(from: usize, to: usize) {
    let (from, to) = (round_up(from, 4096), round_up(to, 4096));
    if to > from && contains(from as *mut u8) {
        // SAFETY: `[from, to)` lies in the region and holds nothing anyone reads again.
        unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_DONTNEED) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_every_size_with_little_waste() {
        for size in (1..5000).chain([1 << 20, (1 << 20) + 1, 300 << 20, REGION_BYTES]) {
            let class = class_of(size);
            let cap = capacity(class);
            assert!(cap >= size, "class {class} holds {cap} < {size}");
            assert_eq!(cap % 16, 0, "capacities keep blocks 16-byte aligned");
            if size > 16 {
                assert!(cap < size + size / 8 + 16, "{size} → {cap}: too much waste");
            }
            if class > 0 {
                assert!(
                    capacity(class - 1) < size.max(16),
                    "{size} fits a smaller class"
                );
            }
        }
        assert!(class_of(REGION_BYTES) < CLASSES);
    }

    /// The C-style functions QuickJS uses, on a real region: placement, reuse, growth,
    /// fallback, and an image that puts the bookkeeping back. (The global allocator is not
    /// installed in test binaries; the worker tests cover it.)
    #[test]
    #[expect(unsafe_code, reason = "every pointer below comes from these functions and is freed once.")]
    fn the_region_allocates_reuses_falls_back_and_restores() {
        map().expect("region");
        let in_region = |p: *mut u8| contains(p);
        // SAFETY: every pointer below comes from these functions and is freed once.
        unsafe {
            let outside = c_malloc(100);
            assert!(!in_region(outside), "inactive: the C allocator");
            let _region = enter();
            let image = capture().expect("image");

            let a = c_malloc(100);
            assert!(in_region(a));
            assert!(c_usable_size(a) >= 100);
            std::ptr::write_bytes(a, 7, 100);
            c_free(a);
            let b = c_malloc(99);
            assert_eq!(a, b, "a freed block of the same class is reused");

            let zeroed = c_calloc(10, 10);
            assert!(
                (0..100).all(|i| *zeroed.add(i) == 0),
                "calloc zeroes reused blocks"
            );

            std::ptr::write_bytes(b, 9, 90);
            let grown = c_realloc(b, 10_000);
            assert!(in_region(grown));
            assert!(
                (0..90).all(|i| *grown.add(i) == 9),
                "realloc keeps the contents"
            );

            let adopted = c_realloc(outside, 200);
            assert!(
                in_region(adopted),
                "a C block resized while active moves in"
            );

            let huge = c_malloc(REGION_BYTES + 1);
            assert!(
                !huge.is_null() && !in_region(huge),
                "too big: the C allocator"
            );
            c_free(huge);

            // After capture, big blocks get mappings of their own, freed at once.
            let big = c_malloc(BIG_BYTES);
            assert!(
                !big.is_null() && !in_region(big),
                "a big block is not in the region"
            );
            assert_eq!(big_blocks(), 1);
            assert!(c_usable_size(big) >= BIG_BYTES);
            std::ptr::write_bytes(big, 3, BIG_BYTES);
            let bigger = c_realloc(big, 4 * BIG_BYTES);
            assert!(
                (0..BIG_BYTES).all(|i| *bigger.add(i) == 3),
                "resizing keeps contents"
            );
            assert_eq!(big_blocks(), 1);
            c_free(bigger);
            assert_eq!(big_blocks(), 0, "freed at once");
            let left = c_calloc(1, 2 * BIG_BYTES);
            assert!((0..2 * BIG_BYTES).all(|i| *left.add(i) == 0));
            assert_eq!(big_blocks(), 1);

            c_free(grown);
            c_free(zeroed);
            c_free(adopted);
            restore(&image);
            assert_eq!(big_blocks(), 0, "restore unmaps what a run left");
            let again = c_malloc(100);
            assert_eq!(
                again, a,
                "the image puts the bump pointer and free lists back"
            );
        }
    }
}
