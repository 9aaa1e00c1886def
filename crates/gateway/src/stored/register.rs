//! Registering a stored tool: everything is checked before anything is written. The code must
//! transpile and export the contract, `meta.input` and `meta.output` must be valid JSON Schema,
//! and every declared capability must be something the registering profile holds. Each
//! problem names its line or its path in `meta`.

use std::path::PathBuf;
use std::sync::Arc;

use sandgate_policy::{Access, FsRoot, Grant, HostPattern, NetGrant, Profile};
use sandgate_sandbox::tool_file;

use super::meta::Meta;

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
}

/// Checks `code` as tool `name` for the profile of `access`; every problem is listed.
pub fn check(name: &str, code: &str, access: &Access) -> Result<Registration, Vec<String>> {
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
    let beyond = beyond_grant(name, &meta, access);
    if !beyond.is_empty() {
        return Err(beyond);
    }
    Ok(Registration {
        name: name.to_string(),
        code: code.to_string(),
        meta_json: file.meta.to_string(),
        meta,
    })
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
fn beyond_grant(name: &str, meta: &Meta, access: &Access) -> Vec<String> {
    let profile = access.profile();
    let mut problems = Vec::new();
    if meta
        .capabilities
        .tools
        .iter()
        .any(|t| *t == format!("user.{name}"))
    {
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
        if *tool == format!("user.{name}") {
            continue;
        }
        if !access.sees_tool(tool) {
            refuse(format!("the tool `{tool}`"), "tools");
        }
    }
    for entry in &meta.capabilities.net {
        let covered = HostPattern::parse(entry).is_ok_and(|p| profile.net.covers(&p));
        if !covered {
            refuse(format!("the host `{entry}`"), "net");
        }
    }
    for (path, write) in &meta.capabilities.fs {
        if !std::path::Path::new(path).is_absolute() || access.authorize_fs(path, *write).is_err() {
            let what = if *write { "writing" } else { "reading" };
            refuse(format!("{what} `{path}`"), "fs");
        }
    }
    for var in &meta.capabilities.env {
        if access.authorize_env(var).is_err() {
            refuse(format!("the variable `{var}`"), "env");
        }
    }
    problems
}

/// The access a stored tool runs with: exactly what it declares, cut to what its owner's
/// profile holds now (a grant taken from the owner is taken from its tools too). Declared
/// names are read as a catalog reads them (`everything.get_sum` is `everything.get-sum`), by
/// `original`, which gives a tool's qualified name as its backend gives it.
pub(crate) fn tool_access(
    name: &str,
    meta: &Meta,
    owner: &Access,
    original: impl Fn(&str) -> Option<String>,
) -> Access {
    let profile = owner.profile();
    let tools: Vec<String> = meta
        .capabilities
        .tools
        .iter()
        .map(|t| original(t).unwrap_or_else(|| t.clone()))
        .filter(|t| owner.sees_tool(t))
        .collect();
    let net = meta
        .capabilities
        .net
        .iter()
        .filter_map(|e| HostPattern::parse(e).ok())
        .filter(|p| profile.net.covers(p))
        .collect();
    let fs = meta
        .capabilities
        .fs
        .iter()
        .filter(|(path, write)| owner.authorize_fs(path, *write).is_ok())
        .map(|(path, write)| FsRoot {
            path: PathBuf::from(path),
            write: *write,
        })
        .collect();
    let env = meta
        .capabilities
        .env
        .iter()
        .filter(|v| owner.authorize_env(v).is_ok())
        .cloned()
        .collect();
    Access::new(Arc::new(Profile {
        name: format!("user.{name}"),
        key: format!(
            "the stored tool user.{name} (meta.capabilities, owned by profile `{}`)",
            profile.name
        ),
        file: "its file (sandgate tools update)".into(),
        tools: Grant::new(tools, vec![]),
        net: NetGrant::new(net),
        fs,
        env,
        limits: profile.limits,
        admin: false,
        register_tools: false,
        implicit: false,
    }))
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
        let ok = check("sum", SUM, &reader()).expect("registers");
        assert_eq!(ok.meta.capabilities.tools, ["everything.get_sum"]);
        let beyond = check(
            "sum",
            &SUM.replace("everything.get_sum", "memory.create_entities"),
            &reader(),
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
        )
        .expect_err("schema");
        assert!(
            bad_schema[0].starts_with("line 1: meta.input.properties.xs.type"),
            "{bad_schema:?}"
        );
        let no_contract = check("sum", "export const meta = {};", &reader()).expect_err("contract");
        assert!(
            no_contract[0].contains("no default export"),
            "{no_contract:?}"
        );
        let broken =
            check("sum", &SUM.replace("return 1;", "return 1 +;"), &reader()).expect_err("syntax");
        assert!(broken[0].starts_with("line 6:"), "{broken:?}");
        assert!(check("Sum-2", SUM, &reader()).is_err());
        let own = check(
            "sum",
            &SUM.replace("everything.get_sum", "user.sum"),
            &reader(),
        )
        .expect_err("self");
        assert!(own.iter().any(|p| p.contains("itself")), "{own:?}");
    }

    #[test]
    fn a_tool_runs_with_what_it_declares_cut_to_its_owner_now() {
        let meta = check("sum", SUM, &reader()).expect("registers").meta;
        let access = tool_access("sum", &meta, &reader(), |_| None);
        assert!(access.sees_tool("everything.get_sum"));
        assert!(
            !access.sees_tool("everything.echo"),
            "only what it declares"
        );
        let mut narrower = Profile::implicit_default("sandgate.toml");
        narrower.tools = Grant::new(vec!["everything.echo".into()], vec![]);
        let access = tool_access("sum", &meta, &Access::new(Arc::new(narrower)), |_| None);
        assert!(
            !access.sees_tool("everything.get_sum"),
            "never more than the owner holds now"
        );
        assert!(access.authorize_env("HOME").is_err());
    }
}
