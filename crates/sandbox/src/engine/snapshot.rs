//! A fresh runtime in the time of a memory copy: the template runtime built once in the
//! worker's heap region, and the image of it that is copied back after every execution.
//!
//! See `crate::region` for why this is sound: everything the template owns, down to the
//! allocator's bookkeeping, lives in the region, and the image is taken before any code runs.
//! The template's Rust handles (runtime, context, preamble function) sit outside the region
//! and are never dropped or changed, so after each copy-back they point at the same, unused
//! runtime again. Executions run with the region active, so what they allocate is discarded
//! with the copy-back; the `Done` frame is sent and dropped before it.

use std::mem::ManuallyDrop;

use super::{Fresh, RunRequest, SharedLink, execute_in, fresh};
use crate::protocol::WorkerFrame;
use crate::region;

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

    /// Runs one execution in the template, hands its `Done` frame to `send`, then copies the
    /// image back, so the next execution finds the runtime exactly as the first one did.
    pub fn run<R>(
        &mut self,
        request: RunRequest,
        link: &SharedLink,
        send: impl FnOnce(&WorkerFrame) -> R,
    ) -> R {
        let done = {
            let _region = region::enter();
            execute_in(&self.template, request, link)
        };
        let sent = send(&done);
        // The frame's blocks are in the region: free them before the region is overwritten.
        drop(done);
        region::restore(&self.image);
        sent
    }
}
