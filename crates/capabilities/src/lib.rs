//! Host-side capabilities for guest code: `fetch`, `fs` and `env`.
//!
//! The guest has no ambient authority; these are the only ways its code reaches the network,
//! files or the environment, and only when its profile grants them. This crate does the I/O;
//! the policy decides. Every operation takes the policy's proof (`Authorized<…>`), and `fetch`
//! asks the policy again for every address it would connect to and every redirect it would
//! follow, so what the guest can reach is exactly what the grant names. Every operation is a
//! method of [`Host`]; whoever holds it (the gateway's door) is the only caller.

mod env;
mod error;
mod fetch;
// `openat2` and `RESOLVE_BENEATH` are Linux's; sandgate builds on Linux only (the sandbox
// crate says so with one clear error elsewhere).
#[cfg(target_os = "linux")]
mod fs;
mod host;
mod resolve;

pub use error::CapabilityError;
pub use fetch::{Authorize, FetchLimits, FetchRequest, FetchResponse, Redirect};
#[cfg(target_os = "linux")]
pub use fs::{FsLimits, check_root};
pub use host::Host;
pub use resolve::{BoxFuture, Resolve, StaticResolver, SystemResolver};
