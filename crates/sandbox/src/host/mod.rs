//! The host side of the sandbox: what runs in the gateway's process, and never in a worker.
//!
//! It reads untrusted code without trusting it (`nesting`, `transpile`), recognises the code
//! it can answer without a worker (`single_call`, `direct`), hands the rest to the worker pool
//! (`pool`), and turns what a worker reports into errors a model can act on (`hints`,
//! `stacks`, `result`). Host code may use the worker's modules (to start one, or to read its
//! report); the worker never uses host code.

pub mod direct;
pub mod named_tools;
pub(crate) mod hints;
pub mod nesting;
pub mod normalize;
pub(crate) mod pool;
pub(crate) mod python;
pub(crate) mod python_hints;
pub(crate) mod result;
pub(crate) mod sandbox;
pub mod single_call;
pub(crate) mod stacks;
pub mod tool_file;
pub mod transpile;
