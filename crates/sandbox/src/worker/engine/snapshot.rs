//! A fresh runtime in the time of a memory copy: the template runtime built once in the
//! worker's heap region, and the image of it that is copied back after every execution.
//!
//! See `crate::worker::region` for why this is sound: everything the template owns, down to the
//! allocator's bookkeeping, lives in the region, and the image is taken before any code runs.
//! The template's Rust handles (runtime, context, preamble function) sit outside the region
//! and are never dropped or changed, so after each copy-back they point at the same, unused
//! runtime again. Executions run with the region active, so what they allocate is discarded
//! with the copy-back; the `Done` frame is sent and dropped before it. A worker holds many
//! executions in this one region by parking the ones that wait (see `parking`).

use std::mem::ManuallyDrop;

use super::{Fresh, fresh};
use crate::worker::region;

/// The template runtime and its image.
pub struct Snapshot {
    /// Never dropped: its memory belongs to the region, which is overwritten, not freed.
    template: ManuallyDrop<Fresh>,
    image: region::Image,
}

impl Snapshot {
    /// Builds the template in the heap region and copies it. `Ok(None)` when this process
    /// cannot use a snapshot: it has no region, or its global allocator is not
    /// [`region::RegionAllocator`] (then Rust objects of the runtime would live outside it).
    pub fn take() -> Result<Option<Snapshot>, String> {
        if !region::is_mapped() || !region::serves_global_allocations() {
            return Ok(None);
        }
        let template = {
            let _region = region::enter();
            let template = fresh()?;
            // What building the template left unreachable is not copied into every run.
            template.runtime.run_gc();
            template
        };
        let Some(image) = region::capture() else {
            return Ok(None);
        };
        Ok(Some(Snapshot {
            template: ManuallyDrop::new(template),
            image,
        }))
    }

    /// The bytes copied back after each execution.
    pub fn image_bytes(&self) -> usize {
        self.image.len()
    }

    /// The template runtime. Its handles point into the region, so they serve whichever
    /// execution's image is resident there; call its steps with the region entered.
    pub fn runtime(&self) -> &Fresh {
        &self.template
    }

    /// The template's image, for parking executions (see `parking`).
    pub fn image(&self) -> &region::Image {
        &self.image
    }

    /// Puts the never-used template back after a run has ended and its `Done` frame has been
    /// sent and dropped (its blocks are in the region).
    pub fn reset(&self) {
        region::restore(&self.image);
    }
}
