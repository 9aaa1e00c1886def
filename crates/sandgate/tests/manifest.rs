//! The package's manifest keeps `cargo run` working from the repository root: the package has
//! more than one binary target in the workspace's eyes (the sandbox's worker is another), so
//! without `default-run` the README's `cargo run -- check ...` could not pick one.

#[test]
fn cargo_run_picks_sandgate() {
    let manifest = include_str!("../Cargo.toml");
    assert!(
        manifest
            .lines()
            .any(|line| line.trim() == "default-run = \"sandgate\""),
        "crates/sandgate/Cargo.toml needs default-run = \"sandgate\""
    );
}
