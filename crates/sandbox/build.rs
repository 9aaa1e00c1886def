//! Sets `sandgate_linux` when building for Linux: the crate's items exist only then, and
//! elsewhere it is one `compile_error!` (see `src/lib.rs`).

#![expect(
    clippy::disallowed_methods,
    reason = "a build script reads what Cargo tells it through the environment"
)]
fn main() {
    println!("cargo::rustc-check-cfg=cfg(sandgate_linux)");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-cfg=sandgate_linux");
    }
}
