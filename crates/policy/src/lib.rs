//! Grants and decisions: what a caller's code may reach, and why a request was refused.
//!
//! This crate is pure: no I/O, no clock. It is also the only place that can construct
//! [`Authorized`]: the upstream crate's call API takes an `Authorized<ToolCall>`, and the host
//! capabilities take an `Authorized<NetTarget>`, `Authorized<FsAccess>` or `Authorized<EnvRead>`,
//! so the type system guarantees that nothing is reached without a policy decision.
//!
//! A [`Profile`] is a named set of grants from the config (tools, network hosts, file roots,
//! environment names, limits). An [`Access`] is one execution's view of it: the profile,
//! narrowed by what the caller asked to drop (`allow_tools`). Deny always beats allow, and
//! every denial names the rule that refused it and where to change it.

mod decision;
mod fs;
mod glob;
mod net;
mod profile;
mod tools;

pub use decision::{Authorized, PolicyError};
pub use fs::{FsAccess, FsRoot, deciding_root};
pub use glob::glob_match;
pub use net::{AddressClass, HostPattern, NetGrant, NetLookup, NetTarget, classify};
pub use profile::{
    Access, Capability, Engine, EngineGrant, EnvRead, Languages, Profile, ProfileLimits,
    ScriptApproval,
};
pub use tools::{Grant, ToolCall, ToolName};
