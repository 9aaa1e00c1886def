//! What the `fs` capability costs per call, on a small file in a root of two (a writable root
//! with a read-only one nested in it, as profiles write them): `readFile` (resolve beneath the
//! root, look with `O_PATH`, check it is a regular file, open it through that descriptor,
//! read) and `writeFile` of an existing file (the same, plus deciding writability where the
//! path resolved).
//!
//! Run: `cargo bench -p sandgate-capabilities --bench fs`.

#![allow(missing_docs, clippy::expect_used)]

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use sandgate_capabilities::{FsLimits, Host, StaticResolver};
use sandgate_policy::{Access, FsRoot, Profile};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    std::fs::create_dir(root.join("ro")).expect("ro");
    std::fs::write(root.join("notes.txt"), vec![b'x'; 1024]).expect("file");
    let mut profile = Profile::implicit_default("bench");
    profile.fs = vec![
        FsRoot::configured(root, true),
        FsRoot::configured(root.join("ro"), false),
    ];
    let access = Access::new(Arc::new(profile));
    let limits = FsLimits::default();
    let host = Host::new(Arc::new(StaticResolver::default()));
    let data = vec![b'y'; 1024];
    c.bench_function("fs/read_1k", |b| {
        b.iter(|| {
            let proof = access.authorize_fs("notes.txt", false).expect("granted");
            host.read_file(&proof, &limits).expect("read").len()
        })
    });
    c.bench_function("fs/write_1k", |b| {
        b.iter(|| {
            let proof = access.authorize_fs("notes.txt", true).expect("granted");
            host.write_file(&proof, &data, &limits).expect("written")
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
