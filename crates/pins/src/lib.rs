//! The supply-chain guard's judgement of one tool definition (issue 49). A gateway a team
//! shares is where every backend's tool definitions pass into every agent's context, so it is
//! where a changed definition (a "rug pull") or a poisoned one can be stopped:
//!
//! - [`Definition::digest`] is a digest of what a definition means, to pin it on first sight
//!   and to see when a backend serves another;
//! - `scan` reads every string of a definition for text aimed at the model (instructions to
//!   conceal, to override, to read secrets, to send data elsewhere, to use another server's
//!   tool; hidden or smuggled text), with the usual disguises undone;
//! - [`clean`] and [`clean_json`] take invisible characters and HTML comments out of what a
//!   model is shown, whatever a person decided about the tool;
//! - `decide` says what a backend's listing becomes against its pins: what the catalog
//!   shows, what is held, and what to pin.
//!
//! Nothing here does I/O: the gateway keeps the pins in the store and decides what is held.

pub mod decide;
pub mod digest;
pub mod scan;
pub mod text;

pub use decide::{Decision, Held, HeldKind, Pin, Trust, decide};
pub use digest::Definition;
pub use scan::{Context, Finding, FindingKind, Names, Severity, holds, scan, warm};
pub use text::{Hidden, clean, clean_json, escaped, hidden};
