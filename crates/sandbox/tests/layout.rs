//! The crate's layout is its security boundary: `worker/` is what runs in a locked-down worker
//! process, `host/` what runs in the gateway, `wire/` what both speak. Nothing in `worker/`
//! may use host code, and `wire/` uses neither side. This test reads the sources and holds
//! every path to that rule.

#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("readable source directory") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found
}

/// Every use of a crate path in `file` that is not allowed by `allowed` prefixes, and every
/// `super::` chain that climbs out of the file's top module.
fn violations(file: &Path, top: &Path, allowed: &[&str]) -> Vec<String> {
    let text = std::fs::read_to_string(file).expect("readable source");
    // How many `super::` a path may take before it leaves the top module: from `top/mod.rs`
    // none, from `top/a.rs` or `top/a/mod.rs` one, from `top/a/b.rs` two.
    let relative = file.strip_prefix(top).expect("under top");
    let mut depth = relative.components().count();
    if relative.file_name().is_some_and(|n| n == "mod.rs") {
        depth -= 1;
    }
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        // An inline module (`mod tests {`) is one level deeper for what follows it.
        let trimmed = code.trim();
        if (trimmed.starts_with("mod ") || trimmed.starts_with("pub mod "))
            && trimmed.ends_with('{')
        {
            depth += 1;
        }
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let path = &rest[at + "crate::".len()..];
            if !allowed.iter().any(|prefix| path.starts_with(prefix)) {
                found.push(format!(
                    "{}:{}: {}",
                    file.display(),
                    number + 1,
                    line.trim()
                ));
            }
            rest = path;
        }
        let mut rest = code;
        while let Some(at) = rest.find("super::") {
            let mut climbs = 0;
            let mut after = &rest[at..];
            while let Some(next) = after.strip_prefix("super::") {
                climbs += 1;
                after = next;
            }
            if climbs >= depth {
                found.push(format!(
                    "{}:{}: `super::` leaves the module: {}",
                    file.display(),
                    number + 1,
                    line.trim()
                ));
            }
            rest = after;
        }
    }
    found
}

#[test]
fn worker_code_never_uses_host_code_and_wire_uses_neither() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    let worker = src.join("worker");
    for file in sources(&worker) {
        problems.extend(violations(
            &file,
            &worker,
            &["wire", "worker", "error::SandboxError"],
        ));
    }
    let wire = src.join("wire");
    for file in sources(&wire) {
        problems.extend(violations(&file, &wire, &["wire"]));
    }
    assert!(
        problems.is_empty(),
        "imports that cross the host/worker boundary:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_check_catches_a_crossing() {
    let dir = std::env::temp_dir().join(format!("sandgate-layout-{}", std::process::id()));
    let nested = dir.join("engine");
    std::fs::create_dir_all(&nested).expect("temp dir");
    std::fs::write(
        nested.join("steps.rs"),
        "use crate::host::hints;\nuse super::super::direct;\nuse super::natives;\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("mod.rs"),
        "use crate::wire::protocol;\nuse super::pool;\n",
    )
    .expect("write");
    let mut found = Vec::new();
    for file in sources(&dir) {
        found.extend(violations(&file, &dir, &["wire", "worker"]));
    }
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found.iter().any(|f| f.contains("crate::host::hints")));
    assert!(found.iter().any(|f| f.contains("super::super::direct")));
    assert!(found.iter().any(|f| f.contains("super::pool")));
}
