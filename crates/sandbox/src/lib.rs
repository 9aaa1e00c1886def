//! The sandbox: runs untrusted, model-written TypeScript that calls tools.

pub mod engine;
pub mod limits;
pub mod lockdown;
pub mod protocol;
pub mod transpile;
pub mod worker;

pub use limits::{LimitRequest, Limits};
