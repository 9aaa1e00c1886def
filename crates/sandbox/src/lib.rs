//! The sandbox: runs untrusted, model-written TypeScript that calls tools.
//!
//! (Work in progress: TypeScript handling first.)

pub mod transpile;
