//! Registering a stored tool: everything is checked before anything is written. The code must
//! transpile and export the contract, `meta.input` and `meta.output` must be valid JSON Schema,
//! and every declared capability must be something the registering profile holds. Each
//! problem names its line or its path in `meta`.

use std::path::PathBuf;
use std::sync::Arc;

use sandgate_catalog::{Catalog, ToolRef};
use sandgate_policy::{Access, FsRoot, Grant, HostPattern, NetGrant, Profile, ToolName};
use sandgate_sandbox::tool_file;

use crate::stored::loaded::BACKEND;
use crate::stored::meta::Meta;

/// Longest tool file accepted.
pub const MAX_TOOL_BYTES: usize = 256 * 1024;
/// Longest tool name.
const MAX_NAME: usize = 64;

/// A tool file that passed every check, ready to store.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Its name (callable as `user.<name>`).
    pub name: String,
    /// The file.
    pub code: String,
    /// Its meta.
    pub meta: Meta,
    /// Its meta as JSON text (what the store keeps).
    pub meta_json: String,
    /// What is allowed but likely a mistake, to tell whoever registers it: a declared tool
    /// no backend lists now, a description still the `promote` placeholder.
    pub warnings: Vec<String>,
}

/// Checks `code` as tool `name` for the profile of `access`; every problem is listed.
/// Declared tools are read by `catalog` (a tool named as code calls it is the same tool);
/// declared roots are resolved on disk beneath the registering profile's roots.
pub fn check(
    name: &str,
    code: &str,
    access: &Access,
    catalog: &Catalog,
) -> Result<Registration, Vec<String>> {
    if let Some(problem) = bad_name(name) {
        return Err(vec![problem]);
    }
    if code.len() > MAX_TOOL_BYTES {
        return Err(vec![format!(
            "the file is {} bytes; a stored tool is at most {MAX_TOOL_BYTES}",
            code.len()
        )]);
    }
    let file = tool_file::read(code).map_err(|p| vec![source_problem(&p)])?;
    if let Err(p) = tool_file::transpile(code) {
        return Err(vec![source_problem(&p)]);
    }
    let meta = Meta::from_json(&file.meta).map_err(|problems| {
        problems
            .into_iter()
            .map(|p| format!("line {}: {p}", file.meta_line))
            .collect::<Vec<_>>()
    })?;
    let beyond = beyond_grant(name, &meta, access, catalog);
    if !beyond.is_empty() {
        return Err(beyond);
    }
    let warnings = warnings(&meta, catalog);
    Ok(Registration {
        name: name.to_string(),
        code: code.to_string(),
        meta_json: file.meta.to_string(),
        meta,
        warnings,
    })
}

/// What `meta` holds that is allowed but likely a mistake.
fn warnings(meta: &Meta, catalog: &Catalog) -> Vec<String> {
    let mut found = Vec::new();
    if meta.description.trim_start().starts_with("TODO") {
        found.push(
            "meta.description still says TODO: models choose tools by their description, so say what the tool does".to_string(),
        );
    }
    // An empty catalog (the CLI before any backend was ever listed) knows nothing to compare.
    for tool in meta
        .capabilities
        .tools
        .iter()
        .filter(|_| !catalog.is_empty())
    {
        if !tool.starts_with("user.") && catalog.resolve(tool).is_err() {
            let near = catalog.suggest(tool, 1);
            found.push(format!(
                "meta.capabilities.tools: no backend lists `{tool}` now{}; calls to it fail until one does",
                near.first()
                    .map(|n| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default()
            ));
        }
    }
    found
}

/// Why `name` cannot name a stored tool, if it cannot.
pub fn bad_name(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    (!ok).then(|| {
        format!(
            "`{name}` is not a stored tool name: use lowercase letters, digits and `_`, starting with a letter, at most {MAX_NAME} characters (it is called as user.{name})"
        )
    })
}

fn source_problem(p: &sandgate_sandbox::transpile::SourceProblem) -> String {
    match &p.hint {
        Some(hint) => format!("line {}:{}: {} ({hint})", p.line, p.column, p.message),
        None => format!("line {}:{}: {}", p.line, p.column, p.message),
    }
}

/// What `meta` declares that `access` does not hold.
fn beyond_grant(name: &str, meta: &Meta, access: &Access, catalog: &Catalog) -> Vec<String> {
    let profile = access.profile();
    let mut problems = Vec::new();
    if meta.capabilities.tools.iter().any(|t| is_itself(t, name)) {
        problems.push(format!(
            "meta.capabilities.tools: `user.{name}` is this tool itself; a tool may not call itself"
        ));
    }
    let mut refuse = |what: String, key: &str| {
        problems.push(format!(
            "meta.capabilities declares {what}, which profile `{}` does not hold ({}.{key} in {}); a stored tool may declare only what its registering profile holds",
            profile.name, profile.key, profile.file
        ));
    };
    for tool in &meta.capabilities.tools {
        if is_itself(tool, name) {
            continue;
        }
        // A declared tool is checked by every name it can be called by: a denial written
        // as the model calls the tool must hold here too.
        let seen = match catalog.resolve(tool) {
            Ok(entry) => access.sees_tool(&crate::views::name_of(entry)),
            Err(_) => sees_written(access, tool),
        };
        if !seen {
            refuse(format!("the tool `{tool}`"), "tools");
        }
    }
    for entry in &meta.capabilities.net {
        let covered = HostPattern::parse(entry).is_ok_and(|p| profile.net.covers(&p));
        if !covered {
            refuse(format!("the host `{entry}`"), "net");
        }
    }
    let mut unresolved = Vec::new();
    for (path, write) in &meta.capabilities.fs {
        let what = if *write { "writing" } else { "reading" };
        let decision = std::path::Path::new(path)
            .is_absolute()
            .then(|| access.authorize_fs(path, *write).ok())
            .flatten();
        match decision {
            None => refuse(format!("{what} `{path}`"), "fs"),
            // Where the root resolves on disk, not only as written: a root that is a link
            // out of the profile's roots (or into a read-only one, for writing) is refused.
            Some(proof) => {
                if let Err(why) = sandgate_capabilities::check_root(&proof) {
                    unresolved.push(format!("meta.capabilities.fs: {what} `{path}`: {why}"));
                }
            }
        }
    }
    for var in &meta.capabilities.env {
        if access.authorize_env(var).is_err() {
            refuse(format!("the variable `{var}`"), "env");
        }
    }
    problems.extend(unresolved);
    problems
}

/// The access a stored tool runs with: exactly what it declares, cut to what its owner's
/// profile holds now (a grant taken from the owner is taken from its tools too). Declared
/// names are read as `catalog` reads them (`everything.get_sum` is `everything.get-sum`), and
/// the owner's grant is asked by every name the tool can be called by. Declared roots resolve
/// beneath the owner's root that grants them, and the owner's roots decide where writes land.
pub(crate) fn tool_access(name: &str, meta: &Meta, owner: &Access, catalog: &Catalog) -> Access {
    let profile = owner.profile();
    let tools: Vec<String> = meta
        .capabilities
        .tools
        .iter()
        .filter_map(|t| match catalog.resolve(t) {
            Ok(entry) => owner
                .sees_tool(&crate::views::name_of(entry))
                .then(|| entry.qualified.clone()),
            Err(_) => sees_written(owner, t).then(|| t.clone()),
        })
        .collect();
    let net = meta
        .capabilities
        .net
        .iter()
        .filter_map(|e| HostPattern::parse(e).ok())
        .filter(|p| profile.net.covers(p))
        .collect();
    // Each root resolves beneath the owner's root that grants it, at every call.
    let fs = meta
        .capabilities
        .fs
        .iter()
        .filter_map(|(path, write)| {
            let granted = owner.authorize_fs(path, *write).ok()?;
            Some(FsRoot {
                path: PathBuf::from(path),
                write: *write,
                within: Some(granted.get().root.clone()),
            })
        })
        .collect();
    let fs_context = profile
        .fs
        .iter()
        .chain(&profile.fs_context)
        .cloned()
        .collect();
    let env = meta
        .capabilities
        .env
        .iter()
        .filter(|v| owner.authorize_env(v).is_ok())
        .cloned()
        .collect();
    Access::new(Arc::new(Profile {
        name: ToolRef::new(BACKEND, name).to_string(),
        key: format!(
            "the stored tool user.{name} (meta.capabilities, owned by profile `{}`)",
            profile.name
        ),
        file: "its file (sandgate tools update)".into(),
        tools: Grant::new(tools, vec![]),
        net: NetGrant::new(net),
        fs,
        fs_context,
        env,
        limits: profile.limits,
        admin: false,
        approves: vec![],
        register_tools: false,
        implicit: false,
        // The owner's approvals hold inside its tools: a stored tool is no way around them.
        approve: profile.approve.clone(),
        // A stored tool keeps no state of its own, and reads none of its caller's.
        state: false,
        engine: Default::default(),
        languages: Default::default(),
        approve_scripts: None,
    }))
}

/// Whether `access` sees the tool `written` names, by its names as written (a declared tool
/// that is in no catalog yet).
fn sees_written(access: &Access, written: &str) -> bool {
    ToolRef::parse(written).is_some_and(|t| access.sees_tool(&ToolName::plain(&t.backend, &t.tool)))
}

/// Whether `written` names the stored tool `name` itself.
fn is_itself(written: &str, name: &str) -> bool {
    ToolRef::parse(written) == Some(ToolRef::new(BACKEND, name))
}

#[cfg(test)]
mod tests {
    use sandgate_policy::Profile;

    use super::*;

    fn reader() -> Access {
        let mut p = Profile::implicit_default("sandgate.toml");
        p.name = "reader".into();
        p.key = "profiles.reader".into();
        p.implicit = false;
        p.tools = Grant::new(vec!["everything.*".into()], vec![]);
        p.env = vec!["HOME".into()];
        Access::new(Arc::new(p))
    }

    const SUM: &str = "export const meta = {\n  description: 'sum',\n  input: { type: 'object', properties: { xs: { type: 'array' } } },\n  capabilities: { tools: ['everything.get_sum'], env: ['HOME'] },\n};\nexport default async function (input, ctx) { return 1; }";

    #[test]
    fn a_good_file_registers_and_each_failure_says_where() {
        let ok = check("sum", SUM, &reader(), &Catalog::default()).expect("registers");
        assert_eq!(ok.meta.capabilities.tools, ["everything.get_sum"]);
        let beyond = check(
            "sum",
            &SUM.replace("everything.get_sum", "memory.create_entities"),
            &reader(),
            &Catalog::default(),
        )
        .expect_err("beyond");
        assert!(
            beyond[0].contains("`memory.create_entities`")
                && beyond[0].contains("profiles.reader.tools"),
            "{beyond:?}"
        );
        let bad_schema = check(
            "sum",
            &SUM.replace("type: 'array'", "type: 'list'"),
            &reader(),
            &Catalog::default(),
        )
        .expect_err("schema");
        assert!(
            bad_schema[0].starts_with("line 1: meta.input.properties.xs.type"),
            "{bad_schema:?}"
        );
        let no_contract = check(
            "sum",
            "export const meta = {};",
            &reader(),
            &Catalog::default(),
        )
        .expect_err("contract");
        assert!(
            no_contract[0].contains("no default export"),
            "{no_contract:?}"
        );
        let broken = check(
            "sum",
            &SUM.replace("return 1;", "return 1 +;"),
            &reader(),
            &Catalog::default(),
        )
        .expect_err("syntax");
        assert!(broken[0].starts_with("line 6:"), "{broken:?}");
        assert!(check("Sum-2", SUM, &reader(), &Catalog::default()).is_err());
        let own = check(
            "sum",
            &SUM.replace("everything.get_sum", "user.sum"),
            &reader(),
            &Catalog::default(),
        )
        .expect_err("self");
        assert!(own.iter().any(|p| p.contains("itself")), "{own:?}");
    }

    #[test]
    fn a_tool_runs_with_what_it_declares_cut_to_its_owner_now() {
        let meta = check("sum", SUM, &reader(), &Catalog::default())
            .expect("registers")
            .meta;
        let access = tool_access("sum", &meta, &reader(), &Catalog::default());
        assert!(access.sees_tool(&ToolName::plain("everything", "get_sum")));
        assert!(
            !access.sees_tool(&ToolName::plain("everything", "echo")),
            "only what it declares"
        );
        let mut narrower = Profile::implicit_default("sandgate.toml");
        narrower.tools = Grant::new(vec!["everything.echo".into()], vec![]);
        let access = tool_access(
            "sum",
            &meta,
            &Access::new(Arc::new(narrower)),
            &Catalog::default(),
        );
        assert!(
            !access.sees_tool(&ToolName::plain("everything", "get_sum")),
            "never more than the owner holds now"
        );
        assert!(access.authorize_env("HOME").is_err());
    }
}
