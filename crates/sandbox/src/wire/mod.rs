//! What crosses between the host and a worker: the frames (`protocol`), the limits a run
//! carries (`limits`), the page of memory both map (`control`), the words a limit hit is
//! reported in (`errors`), and how text crosses between JavaScript and Rust (`encoding`).
//! Both sides use this module; it uses neither.

pub mod control;
pub mod encoding;
pub mod errors;
pub mod limits;
pub mod protocol;
