//! Property tests of the `fs` capability against trees an attacker lays out: a writable root
//! with a read-only root nested in it, a directory outside both holding a secret, and links
//! planted in the root that lead anywhere (into the read-only root, out of the root, to `/`,
//! to `/proc/self/root`, to each other). Whatever path code then reads or writes: nothing
//! outside the root is read, and nothing outside the writable part is written. `cargo test`
//! runs a short smoke; `PROPTEST_CASES=5000 cargo test -p sandgate-capabilities --test
//! fs_properties` runs long.

#![allow(clippy::expect_used, missing_docs)]

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use sandgate_capabilities::{FsLimits, Host, StaticResolver};
use sandgate_policy::{Access, FsRoot, Profile};

const SECRET: &str = "s3cret outside";
const KEPT: &str = "kept read-only";

/// Where a planted link points.
fn targets(outside: &Path) -> Vec<String> {
    vec![
        "ro".into(),
        "ro/kept".into(),
        "../outside".into(),
        "../outside/secret".into(),
        outside.display().to_string(),
        outside.join("secret").display().to_string(),
        "/".into(),
        "/proc/self/root".into(),
        ".".into(),
        "..".into(),
        "sub".into(),
        "l0".into(),
        "l1".into(),
        "missing".into(),
    ]
}

/// A path code asks for: components among the links and the names in the tree.
fn path() -> impl Strategy<Value = Vec<&'static str>> {
    proptest::collection::vec(
        prop::sample::select(vec![
            "l0", "l1", "l2", "l3", "ro", "sub", "kept", "secret", "new", "outside",
        ]),
        1..4,
    )
}

/// The files of `dir` and their contents, recursively, without following links.
fn snapshot(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).expect("listed").flatten() {
            let kind = entry.file_type().expect("type");
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                out.push((entry.path().display().to_string(), text));
            }
        }
    }
    out.sort();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn no_path_reads_outside_or_writes_read_only(
        links in proptest::collection::vec(0usize..14, 4),
        asked in path(),
        write in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("ro")).expect("ro");
        std::fs::create_dir_all(root.join("sub")).expect("sub");
        std::fs::create_dir_all(&outside).expect("outside");
        std::fs::write(outside.join("secret"), SECRET).expect("secret");
        std::fs::write(root.join("ro/kept"), KEPT).expect("kept");
        let choices = targets(&outside);
        for (i, &choice) in links.iter().enumerate() {
            std::os::unix::fs::symlink(&choices[choice], root.join(format!("l{i}"))).expect("link");
        }
        let mut profile = Profile::implicit_default("test");
        profile.fs = vec![FsRoot::configured(&root, true), FsRoot::configured(root.join("ro"), false)];
        let access = Access::new(Arc::new(profile));
        let before_outside = snapshot(&outside);
        let before_ro = snapshot(&root.join("ro"));
        let relative = asked.join("/");
        let limits = FsLimits::default();
        let host = Host::new(Arc::new(StaticResolver::default()));
        if let Ok(proof) = access.authorize_fs(&relative, write) {
            if write {
                let _ = host.write_file(&proof, b"written by code", &limits);
            } else if let Ok(bytes) = host.read_file(&proof, &limits) {
                prop_assert!(!String::from_utf8_lossy(&bytes).contains(SECRET), "{relative} read the secret");
            }
        }
        prop_assert_eq!(snapshot(&outside), before_outside, "{} changed a file outside", relative);
        prop_assert_eq!(snapshot(&root.join("ro")), before_ro, "{} changed the read-only root", relative);
    }
}
