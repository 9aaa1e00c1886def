//! Stored tools: TypeScript tools users keep, versioned in the store, listed as `user.<name>`
//! beside the backends' tools and run in the sandbox with only the capabilities they declare.
//!
//! - `loaded.rs` holds a tool's current version, ready to list and run;
//! - `meta.rs` reads and checks a tool's `meta`;
//! - `register.rs` checks a whole tool file before anything is written, and computes the
//!   access a tool runs with (what it declares, cut to what its owner holds at call time);
//! - `write.rs` is the one way a tool is registered (check, then write), for MCP and the CLI;
//! - `run.rs` calls one: input validated before any code runs, the sandbox in tool mode, the
//!   result normalised (`{ok: true, data}`) and checked against `meta.output`.
//!
//! A tool a user an identity provider proved registers is that user's (`owner_of`): only they
//! may update it, within their profile's grants.
//!
//! The gateway keeps the current version of every tool in memory (with its compiled schemas)
//! and reloads them when the store changes, whoever changed it (the CLI is another process).

pub(crate) mod loaded;
mod meta;
mod owner;
mod register;
pub(crate) mod run;
pub(crate) mod watch;
mod write;

pub use loaded::{BACKEND, Loaded, MAX_DEPTH, Tools, load};
pub use meta::{Declared, Meta};
pub(crate) use owner::{owner_of, profile_of_owner};
pub use register::{MAX_TOOL_BYTES, Registration, bad_name, check};
pub use write::{Registered, Registrant, register};
