//! The config's sections, one file each, every one read by the same walker (`walker`): a
//! section's reader knows its keys, checks their types and ranges, and names the dotted key
//! and a fix in every error. `parse` reads the root and hands each section its table; the
//! backends (`servers`), the profiles and tokens (`access`) and telemetry have files of their
//! own.

pub mod approvals;
pub mod auth;
pub mod credentials;
mod gateway;
mod http;
mod output;
mod sandbox;
mod store;
mod stored_tools;
