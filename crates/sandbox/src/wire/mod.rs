//! What crosses between the host and a worker: the frames (`protocol`), the limits a run
//! carries (`limits`), the page of memory both map (`control`), the words a limit hit is
//! reported in (`errors`), the faults a guest's code meets (`fault`), and how text crosses between JavaScript and Rust (`encoding`).
//! Both sides use this module; it uses neither.

pub mod control;
pub mod encoding;
pub mod errors;
pub mod fault;
pub mod limits;
pub mod protocol;
