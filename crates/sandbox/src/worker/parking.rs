//! Parking an execution: taking its runtime out of the heap region while it waits, so that
//! another execution can run in the region, and putting it back, byte for byte, when it has
//! work again.
//!
//! Every execution on a worker runs in the same region, from the same template image (see
//! `region` and `engine::snapshot::Snapshot`): its runtime is the template's bytes plus what the run
//! changed. An execution that awaits a tool changed few of them, so [`park`] keeps only the
//! pages that differ from the template, and everything the allocator handed out past the
//! template, and resets those pages to the template as it goes. The region is then the
//! never-used template again, ready for the next execution, with no full copy. [`unpark`]
//! writes the kept pages back. The execution's big blocks (mappings of their own, outside the
//! region) leave the allocator's table with it and come back with it.
//!
//! Pages are compared, not tracked: a compare of the template (about 300 KiB) costs less than
//! asking the kernel which pages were written, and needs no syscall the lockdown would have to
//! allow. An execution that waits on a tool typically keeps a few dozen pages.
//!
//! Parked images live outside the region, in the C allocator; call both functions with the
//! region inactive.

use crate::worker::region::{self, Image};

const PAGE: usize = 4096;

/// An execution's runtime, out of the region.
#[derive(Debug, Default)]
pub struct Parked {
    /// Region offsets of the kept pages, in order.
    pages: Vec<u32>,
    /// The kept pages' bytes, [`PAGE`] each, in the same order.
    bytes: Vec<u8>,
    /// The execution's big blocks.
    big: Vec<usize>,
}

/// Why an execution could not be parked: the worker has no memory left for its image.
#[derive(Debug)]
pub struct NoRoom;

impl Parked {
    /// Bytes this parked execution holds: its kept pages and its big blocks.
    pub fn held_bytes(&self) -> usize {
        self.bytes.len() + region::big_block_bytes(&self.big)
    }
}

/// Takes the resident execution out of the region and leaves the template `image` there.
/// On `Err` the region is unchanged: the execution is still resident.
#[expect(unsafe_code, reason = "parking copies pages of the heap region this worker owns")]
pub fn park(image: &Image) -> Result<Parked, NoRoom> {
    let Some((base, bump)) = region::used_span() else {
        return Err(NoRoom);
    };
    let template = image.bytes();
    let used = bump.saturating_sub(base);
    // Pages wholly inside the template are kept only if they differ from it; the page the
    // template ends in, and every page after it up to the bump pointer, are all kept.
    let whole_template_pages = template.len() / PAGE;
    let used_pages = used.div_ceil(PAGE).max(template.len().div_ceil(PAGE));
    let mut pages: Vec<u32> = Vec::new();
    pages
        .try_reserve(used_pages.saturating_sub(whole_template_pages) + 64)
        .map_err(|_| NoRoom)?;
    for page in 0..used_pages {
        let start = page * PAGE;
        let differs = if page < whole_template_pages {
            // SAFETY: `[base + start, base + start + PAGE)` lies within the region's used part.
            let live = unsafe { std::slice::from_raw_parts((base + start) as *const u8, PAGE) };
            live != &template[start..start + PAGE]
        } else {
            true
        };
        if differs {
            if pages.len() == pages.capacity() {
                pages.try_reserve(pages.len()).map_err(|_| NoRoom)?;
            }
            pages.push(page as u32);
        }
    }
    let mut bytes: Vec<u8> = Vec::new();
    bytes
        .try_reserve_exact(pages.len() * PAGE)
        .map_err(|_| NoRoom)?;
    let mut big = Vec::new();
    // Reserve before anything changes, so that no step below can fail half-way.
    big.try_reserve_exact(region::big_blocks())
        .map_err(|_| NoRoom)?;
    for &page in &pages {
        let start = page as usize * PAGE;
        // SAFETY: the page lies within the region (below the bump pointer or inside the
        // template, which is below it too).
        let live = unsafe { std::slice::from_raw_parts((base + start) as *const u8, PAGE) };
        bytes.extend_from_slice(live);
        if start < template.len() {
            let end = (start + PAGE).min(template.len());
            // SAFETY: the template's part of the page, copied back over the region.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    template[start..end].as_ptr(),
                    (base + start) as *mut u8,
                    end - start,
                );
            }
        }
    }
    if region::take_big_blocks(&mut big).is_err() {
        // Reserved above: cannot happen; put the pages back rather than lose the execution.
        unpark_pages(base, &pages, &bytes);
        return Err(NoRoom);
    }
    // What the execution used far past the template is kept in `bytes` now; give the pages back.
    let template_end = base + template.len();
    if bump > template_end + region::TRIM_ABOVE_BYTES {
        region::discard_pages(template_end, bump);
    }
    Ok(Parked { pages, bytes, big })
}

/// Puts a parked execution back into the region, which must hold the template image (nothing
/// else resident).
pub fn unpark(parked: Parked) {
    let Some((base, _)) = region::used_span() else {
        return;
    };
    unpark_pages(base, &parked.pages, &parked.bytes);
    region::put_big_blocks(&parked.big);
}

#[expect(unsafe_code, reason = "every kept page lies within the region, which is mapped and writable.")]
fn unpark_pages(base: usize, pages: &[u32], bytes: &[u8]) {
    for (page, kept) in pages.iter().zip(bytes.chunks_exact(PAGE)) {
        // SAFETY: every kept page lies within the region, which is mapped and writable.
        unsafe {
            std::ptr::copy_nonoverlapping(
                kept.as_ptr(),
                (base + *page as usize * PAGE) as *mut u8,
                PAGE,
            );
        }
    }
}
