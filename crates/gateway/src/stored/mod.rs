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
mod register;
pub(crate) mod run;
pub(crate) mod watch;
mod write;

pub use loaded::{BACKEND, Loaded, MAX_DEPTH, Tools, load};
pub use meta::{Declared, Meta};
pub use register::{MAX_TOOL_BYTES, Registration, bad_name, check};
pub use write::{Registered, Registrant, register};

/// What separates a profile from a user in an owner (`builder@user:<id>`).
const USER_OWNER: &str = "@user:";

/// Who owns a stored tool `caller` registers: its profile, or, for a user an identity provider
/// proved, that user within its profile (`builder@user:<id>`). Only the owner may update it;
/// it runs within the owner's profile's grants.
pub(crate) fn owner_of(caller: &crate::caller::Caller) -> String {
    match caller.user() {
        Some(user) => format!("{}{USER_OWNER}{user}", caller.profile()),
        None => caller.profile().to_string(),
    }
}

/// The profile whose grants a tool owned by `owner` runs within.
pub(crate) fn profile_of_owner(owner: &str) -> &str {
    owner
        .split_once(USER_OWNER)
        .map_or(owner, |(profile, _)| profile)
}
