//! The sandbox worker process: a locked-down QuickJS runner that talks over stdin/stdout.
//! The host spawns it; it is not meant to be run by hand.

/// Lets the worker build its template runtime in the heap region (see `sandgate_sandbox::region`).
#[global_allocator]
static ALLOCATOR: sandgate_sandbox::region::RegionAllocator =
    sandgate_sandbox::region::RegionAllocator;

fn main() {
    std::process::exit(sandgate_sandbox::worker_main());
}
