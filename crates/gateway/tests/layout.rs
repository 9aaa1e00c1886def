//! The gateway is built in layers, each using only those below it (ARCHITECTURE.md lists
//! them): the parts, the catalog, the door, the gateway with its bridge, `call_tool_chain`,
//! the MCP surface, and the HTTP front with the console. This test reads the sources, follows
//! every `crate::` and `super::` path to the file it names, and holds three rules:
//!
//! - no file imports a file of a higher layer;
//! - no files import each other in a circle, in any crate, but the two-file circles
//!   `TWO_FILE_CIRCLES` lists with why (a file that imports a re-export of its crate root
//!   imports the root);
//! - no Rust or JavaScript source file under `crates/` is over 800 lines;
//! - no gateway function is over 120 lines, and the `Gateway` hub has at most 12 fields (what
//!   it holds beyond that belongs to one of its parts).
//!
//! The last test builds a small tree with a crossing and a circle of three, and checks both are
//! caught.

#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The gateway's layers: a file's layer is that of the longest prefix of its path (under
/// `src/`) listed here.
const LAYERS: &[(&str, u8)] = &[
    ("admission.rs", 1),
    ("approvals/", 1),
    ("audit.rs", 1),
    ("caller.rs", 1),
    ("clients.rs", 1),
    ("credentials.rs", 1),
    ("detached.rs", 1),
    ("error.rs", 1),
    ("executions.rs", 1),
    ("notice.rs", 1),
    ("pins/", 1),
    ("profiles.rs", 1),
    ("progress.rs", 1),
    ("runtime.rs", 1),
    ("shapes.rs", 1),
    ("signin.rs", 1),
    ("telemetry/", 1),
    ("upkeep.rs", 1),
    ("views.rs", 1),
    ("stored/", 2),
    ("catalogs.rs", 2),
    ("door/", 3),
    ("gateway.rs", 4),
    ("bridge.rs", 4),
    ("stored/run.rs", 4),
    ("chain/", 5),
    ("mcp/", 6),
    ("http/", 7),
    ("console/", 7),
    ("stdio.rs", 7),
    ("lib.rs", 8),
];

/// Every `.rs` file under `dir`.
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
    found.sort();
    found
}

/// The module path of a file under `src` (`chain/mod.rs` and `chain.rs` are `chain`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// The paths a file's code names, each as the module path it starts from plus its segments:
/// `crate::a::b::{c, d::e}` gives `a::b::c` and `a::b::d::e`; `super::x` from `chain::read`
/// gives `chain::x`. Code after `#[cfg(test)]` (unit tests) is not read.
fn named_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let code: String = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or("")
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| l.split(" //").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let (base, skip): (Vec<String>, usize) =
            if rest.starts_with("crate::") && (at == 0 || !is_ident(bytes[at - 1])) {
                (Vec::new(), "crate::".len())
            } else if rest.starts_with("super::") && (at == 0 || !is_ident(bytes[at - 1])) {
                let mut climbs = 0;
                let mut after = rest;
                while let Some(next) = after.strip_prefix("super::") {
                    climbs += 1;
                    after = next;
                }
                // `chain/mod.rs` is module `chain` and `chain/read.rs` is `chain::read`: either
                // way each `super` drops one segment.
                let keep = module.len().saturating_sub(climbs);
                (module[..keep].to_vec(), rest.len() - after.len())
            } else {
                at += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            };
        let tail = &rest[skip..];
        let (paths, used) = expand(tail);
        for path in paths {
            let mut whole = base.clone();
            whole.extend(path);
            found.push(whole);
        }
        at += skip + used.max(1);
    }
    found
}

/// The paths into the file's own child modules (`mod check;` ... `check::run(..)`), which name
/// no `crate::` or `super::`.
fn child_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let children: Vec<&str> = code
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub(crate) mod ")
                .or_else(|| line.strip_prefix("pub mod "))
                .or_else(|| line.strip_prefix("mod "))?;
            rest.strip_suffix(';')
        })
        .collect();
    let mut found = Vec::new();
    for child in children {
        let token = format!("{child}::");
        let bytes = code.as_bytes();
        let named = code
            .match_indices(&token)
            .any(|(at, _)| at == 0 || !is_ident(bytes[at - 1]));
        if named {
            let mut path = module.to_vec();
            path.push(child.to_string());
            found.push(path);
        }
    }
    found
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

/// The paths at the start of `text` (after `crate::`), with braces expanded; and how many
/// bytes they took.
fn expand(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut segments = Vec::new();
    let mut at = 0;
    loop {
        let ident: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !ident.is_empty() {
            at += ident.len();
            segments.push(ident);
            if text[at..].starts_with("::") {
                at += 2;
                continue;
            }
            return (vec![segments], at);
        }
        if text[at..].starts_with('{') {
            let mut depth = 0;
            let mut end = at;
            for (i, c) in text[at..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = at + i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let inner = &text[at + 1..end];
            let mut paths = Vec::new();
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        paths.extend(item(&segments, &inner[start..i]));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            paths.extend(item(&segments, &inner[start..]));
            return (paths, end + 1);
        }
        return (vec![segments], at);
    }
}

fn item(prefix: &[String], text: &str) -> Vec<Vec<String>> {
    let text = text.trim();
    if text.is_empty() || text == "self" {
        return if text == "self" {
            vec![prefix.to_vec()]
        } else {
            vec![]
        };
    }
    expand(text)
        .0
        .into_iter()
        .map(|p| prefix.iter().cloned().chain(p).collect())
        .collect()
}

/// The file-to-file imports of the crate under `src`.
fn imports(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let files = sources(src);
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|f| (module_of(src, f), f.clone()))
        .collect();
    let mut graph = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable source");
        let module = module_of(src, file);
        let mut to = BTreeSet::new();
        let mut paths = named_paths(&text, &module);
        paths.extend(child_paths(&text, &module));
        for path in paths {
            // The longest prefix of the path that is a file's module.
            let target = (0..=path.len())
                .rev()
                .find_map(|k| modules.get(&path[..k]))
                .expect("the crate root is a module");
            if target != file {
                to.insert(target.clone());
            }
        }
        graph.insert(file.clone(), to);
    }
    graph
}

/// The circles of files (strongly connected components of two or more, by Tarjan).
fn circles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a PathBuf) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

/// Every import of a file from a higher layer, as `file -> target`.
fn crossings(src: &Path, graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<String> {
    let layer = |file: &Path| -> u8 {
        let relative = file
            .strip_prefix(src)
            .expect("under src")
            .to_string_lossy()
            .into_owned();
        LAYERS
            .iter()
            .filter(|(prefix, _)| relative.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map_or(0, |(_, layer)| *layer)
    };
    let mut found = Vec::new();
    for (file, targets) in graph {
        for target in targets {
            if layer(target) > layer(file) {
                found.push(format!(
                    "{} (layer {}) -> {} (layer {})",
                    file.display(),
                    layer(file),
                    target.display(),
                    layer(target)
                ));
            }
        }
    }
    found
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

#[test]
fn every_gateway_file_has_a_layer() {
    let src = crate_src("gateway");
    let unplaced: Vec<_> = sources(&src)
        .into_iter()
        .filter(|f| {
            let relative = f.strip_prefix(&src).expect("under src").to_string_lossy();
            !LAYERS
                .iter()
                .any(|(prefix, _)| relative.starts_with(prefix))
        })
        .collect();
    assert!(
        unplaced.is_empty(),
        "files with no layer (add them to LAYERS and ARCHITECTURE.md): {unplaced:?}"
    );
}

#[test]
fn no_gateway_file_imports_a_higher_layer() {
    let src = crate_src("gateway");
    let found = crossings(&src, &imports(&src));
    assert!(
        found.is_empty(),
        "imports that run up the layers:\n{}",
        found.join("\n")
    );
}

/// Every crate of the workspace, by its directory under `crates/`.
fn every_crate() -> Vec<String> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut names: Vec<String> = std::fs::read_dir(&crates)
        .expect("crates/")
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().join("src").is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The two-file circles left, each with why the two files are one unit split in two (paths
/// under `crates/`). The test fails on a circle not listed here, and on a listed pair that is
/// no longer a circle, so the list only shrinks.
const TWO_FILE_CIRCLES: &[(&str, &str, &str)] = &[
    (
        "catalog/src/catalog.rs",
        "catalog/src/search.rs",
        "a catalog builds its search index over its entries",
    ),
    (
        "gateway/src/chain/execute.rs",
        "gateway/src/chain/mod.rs",
        "call_tool_chain's entry point and the execution it runs",
    ),
    (
        "gateway/src/console/logins.rs",
        "gateway/src/console/session.rs",
        "the login store and the session cookie that names a login",
    ),
    (
        "gateway/src/door/capability.rs",
        "gateway/src/door/mod.rs",
        "the door's host-capability half, methods of the door",
    ),
    (
        "gateway/src/mcp/asking.rs",
        "gateway/src/mcp/handler.rs",
        "a question's answer resumes the call the handler parked",
    ),
    (
        "output/src/chunk.rs",
        "output/src/fit.rs",
        "chunking and fitting share the record-identity fields",
    ),
    (
        "output/src/lib.rs",
        "output/src/truncate.rs",
        "the shaping entry point and its last resort",
    ),
    (
        "pins/src/scan.rs",
        "pins/src/scan/rules.rs",
        "the scan and the rules it runs",
    ),
    (
        "policy/src/fs.rs",
        "policy/src/profile.rs",
        "a profile's filesystem roots and the access that holds them",
    ),
    (
        "sandbox/src/host/hints.rs",
        "sandbox/src/host/hints/persisted.rs",
        "one family of hints, split off",
    ),
    (
        "sandbox/src/host/pool/mod.rs",
        "sandbox/src/host/sandbox.rs",
        "the sandbox runs executions on its pool",
    ),
    (
        "sandbox/src/worker/engine/mod.rs",
        "sandbox/src/worker/engine/natives.rs",
        "a run's state and the native functions that act on it",
    ),
    (
        "sandbox/src/worker/region/allocators.rs",
        "sandbox/src/worker/region/mod.rs",
        "the heap region and its allocators",
    ),
    (
        "sandgate/src/access.rs",
        "sandgate/src/setup.rs",
        "setting up a gateway and the access it is set up with",
    ),
    (
        "sandgate/src/cli/credentials.rs",
        "sandgate/src/cli/mod.rs",
        "a command and the shared config argument",
    ),
    (
        "store/src/postgres/mod.rs",
        "store/src/postgres/records.rs",
        "the PostgreSQL store and its record writer task",
    ),
    (
        "store/src/records.rs",
        "store/src/sqlite.rs",
        "the SQLite store and its records' queries",
    ),
    (
        "upstream/src/frames/mod.rs",
        "upstream/src/frames/tool_result.rs",
        "frames and the tool result they carry",
    ),
    (
        "upstream/src/shared.rs",
        "upstream/src/supervisor.rs",
        "what the supervisors share and the supervisor",
    ),
];

#[test]
fn no_circle_of_files_in_any_crate_but_the_two_file_ones_listed() {
    let crates = every_crate();
    assert!(crates.len() >= 14, "{crates:?}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let relative = |p: &PathBuf| {
        let path = p.strip_prefix(&root).unwrap_or(p).display().to_string();
        path.trim_start_matches("../gateway/").to_string()
    };
    let mut found = Vec::new();
    let mut listed_seen = BTreeSet::new();
    for name in &crates {
        for circle in circles(&imports(&crate_src(name))) {
            let files: Vec<String> = circle.iter().map(relative).collect();
            let listed = TWO_FILE_CIRCLES.iter().position(|(a, b, _)| {
                files.len() == 2 && files.contains(&a.to_string()) && files.contains(&b.to_string())
            });
            match listed {
                Some(i) => {
                    listed_seen.insert(i);
                }
                None => found.push(files),
            }
        }
    }
    assert!(
        found.is_empty(),
        "files that import each other in a circle: {found:#?}"
    );
    let gone: Vec<_> = (0..TWO_FILE_CIRCLES.len())
        .filter(|i| !listed_seen.contains(i))
        .map(|i| TWO_FILE_CIRCLES[i])
        .collect();
    assert!(
        gone.is_empty(),
        "listed two-file circles that are no longer circles (take them out): {gone:#?}"
    );
}

#[test]
fn no_source_file_is_over_800_lines() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut long = Vec::new();
    let mut stack = vec![crates];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path
                    .file_name()
                    .is_some_and(|n| n != "target" && n != "node_modules")
                {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs" || e == "js") {
                let lines = std::fs::read_to_string(&path)
                    .map(|t| t.lines().count())
                    .unwrap_or(0);
                if lines > 800 {
                    long.push(format!("{} ({lines} lines)", path.display()));
                }
            }
        }
    }
    assert!(long.is_empty(), "files over 800 lines: {long:#?}");
}

/// The functions of `text` longer than `max` lines, as `name (n lines)`: a function starts at
/// a line that declares one and ends at the first line after it that closes a brace at the
/// declaration's indentation.
fn long_functions(text: &str, max: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let declaration = trimmed
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ")
            .trim_start_matches("async ");
        let Some(rest) = declaration.strip_prefix("fn ") else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let closing = format!("{indent}}}");
        if let Some(end) = lines[i + 1..].iter().position(|l| *l == closing) {
            let n = end + 2;
            if n > max {
                long.push(format!("{name} ({n} lines)"));
            }
        }
    }
    long
}

#[test]
fn no_gateway_function_is_over_120_lines() {
    let mut long = Vec::new();
    for file in sources(&crate_src("gateway")) {
        let text = std::fs::read_to_string(&file).expect("readable source");
        for function in long_functions(&text, 120) {
            long.push(format!("{}: {function}", file.display()));
        }
    }
    assert!(long.is_empty(), "functions over 120 lines: {long:#?}");
    // The check itself finds a long function, and only that one.
    let body = "    let x = 1;\n".repeat(130);
    let sample = format!("fn short() {{\n}}\n\npub(crate) async fn long() {{\n{body}}}\n");
    assert_eq!(long_functions(&sample, 120), ["long (132 lines)"]);
}

#[test]
fn the_gateway_hub_has_at_most_12_fields() {
    let text =
        std::fs::read_to_string(crate_src("gateway").join("gateway.rs")).expect("gateway.rs");
    let start = text
        .find("pub struct Gateway {")
        .expect("gateway.rs declares the Gateway");
    let body = &text[start..];
    let end = body.find("\n}").expect("the struct ends");
    let fields = body[..end]
        .lines()
        .skip(1)
        .filter(|l| {
            let t = l.trim();
            !t.starts_with("//") && !t.starts_with("#[") && t.ends_with(',') && t.contains(':')
        })
        .count();
    assert!(
        fields <= 12,
        "Gateway has {fields} fields: move some into a part"
    );
    assert!(
        fields >= 6,
        "the count read the struct wrong: {fields} fields"
    );
}

#[test]
fn the_checks_catch_a_crossing_and_a_circle() {
    let src = std::env::temp_dir().join(format!("sandgate-layout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(src.join("door")).expect("temp dir");
    std::fs::create_dir_all(src.join("chain")).expect("temp dir");
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).expect("write");
    // A child module named without `crate::` is followed too: lib.rs -> views.rs.
    write(
        "lib.rs",
        "mod door;\nmod chain;\nmod views;\nfn f() -> views::View { views::View }\n",
    );
    // The door (layer 3) reaches up into the chain (layer 5) through a braced import.
    write(
        "door/mod.rs",
        "use crate::{views::View, chain::read::stored};\n",
    );
    write("views.rs", "pub struct View;\n");
    // chain/mod.rs -> chain/read.rs -> chain/route.rs -> chain/mod.rs: a circle of three.
    write("chain/mod.rs", "use super::chain::read::X;\n");
    write(
        "chain/read.rs",
        "use super::route::Y;\n#[cfg(test)]\nmod tests { use crate::door::Z; }\n",
    );
    write("chain/route.rs", "fn f() { crate::chain::g(); }\n");

    let graph = imports(&src);
    let root_imports = graph.get(&src.join("lib.rs")).cloned().unwrap_or_default();
    let crossing = crossings(&src, &graph);
    let found = circles(&graph);
    std::fs::remove_dir_all(&src).ok();
    assert_eq!(crossing.len(), 1, "{crossing:#?}");
    assert!(
        crossing[0].contains("door/mod.rs (layer 3) -> "),
        "{crossing:#?}"
    );
    assert!(
        crossing[0].contains("chain/read.rs (layer 5)"),
        "{crossing:#?}"
    );
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].len(), 3, "{found:#?}");
    assert!(
        root_imports.contains(&src.join("views.rs")),
        "{root_imports:?}"
    );
}
