//! Profiles and access: a profile is what the config grants one kind of caller; an access is
//! one execution's use of it, possibly narrowed further by the caller. Every decision names the
//! config key that made it, so a denial tells the reader exactly what to edit.

use std::sync::Arc;

use crate::decision::{Authorized, PolicyError};
use crate::fs::FsRoot;
use crate::net::{NetGrant, NetLookup, NetTarget};
use crate::tools::Refusal;
use crate::tools::{Grant, ToolCall, ToolName};

/// Limits a profile puts on each execution; a caller may only lower them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProfileLimits {
    /// Longest an execution may run.
    pub timeout_ms: Option<u64>,
    /// Most tool and capability calls per execution.
    pub max_calls: Option<u32>,
    /// Most executions a caller of this profile may start per minute.
    pub executions_per_minute: Option<u32>,
}

/// A named set of grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Its name (`default`, `reader`, ...).
    pub name: String,
    /// Where it is written, for messages: `profiles.reader in sandgate.toml`.
    pub key: String,
    /// The file it is written in.
    pub file: String,
    /// Tools it may call (and see).
    pub tools: Grant,
    /// Hosts `fetch` may reach.
    pub net: NetGrant,
    /// Roots `fs` may use.
    pub fs: Vec<FsRoot>,
    /// Roots that grant nothing but decide where a write may land: a stored tool's owner's
    /// roots (a write that resolves beneath the owner's read-only root is refused even when
    /// the tool's own root is writable). Empty for a profile from the config.
    pub fs_context: Vec<FsRoot>,
    /// Environment variable names `env.get` may read.
    pub env: Vec<String>,
    /// Per-execution limits.
    pub limits: ProfileLimits,
    /// Sees every profile's executions, outputs and stats, and approves any profile's gated
    /// calls in the console (never its own principal's).
    pub admin: bool,
    /// The profiles whose approval-gated calls its console users may approve (`approves`),
    /// never one their own principal asked.
    pub approves: Vec<String>,
    /// May register and remove stored tools through MCP (`register_tool`, `remove_tool`).
    pub register_tools: bool,
    /// Not written in the config: the default made when no profile is configured.
    pub implicit: bool,
    /// `backend.tool` patterns a person must approve before a call to them runs, even from a
    /// script (`approve`); the backends' own `approve` lists apply as well.
    pub approve: Vec<String>,
    /// Scripts may keep values between executions (`state`, on unless the profile turns it
    /// off): each caller's own, never another's.
    pub state: bool,
    /// Which JavaScript engine runs its executions (`engine`): the sandbox's default, one
    /// engine, or either, chosen per call.
    pub engine: EngineGrant,
    /// The languages its code may be in (`languages`): TypeScript, Python, or both (the
    /// default).
    pub languages: Languages,
    /// Which of its scripts a person approves before they run (`approve_scripts`); `None`
    /// follows `[approvals] scripts`.
    pub approve_scripts: Option<ScriptApproval>,
}

/// Which scripts a person must approve before any of their code runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScriptApproval {
    /// None: only the calls `approve` names wait for a person (the default).
    #[default]
    Never,
    /// Scripts that name a tool `approve` gates, or one that may write (its annotations do
    /// not say `readOnlyHint: true`), or that reach tools in a way the gateway cannot read.
    Writes,
    /// Every script.
    Always,
}

impl ScriptApproval {
    /// The rule named `name` in the config (`never`, `writes`, `always`).
    pub fn named(name: &str) -> Option<ScriptApproval> {
        match name {
            "never" => Some(ScriptApproval::Never),
            "writes" => Some(ScriptApproval::Writes),
            "always" => Some(ScriptApproval::Always),
            _ => None,
        }
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            ScriptApproval::Never => "never",
            ScriptApproval::Writes => "writes",
            ScriptApproval::Always => "always",
        }
    }
}

/// The languages a profile's code may be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Languages {
    /// TypeScript (and JavaScript), on QuickJS or V8.
    pub typescript: bool,
    /// Python, on Monty.
    pub python: bool,
}

impl Default for Languages {
    fn default() -> Self {
        Languages {
            typescript: true,
            python: true,
        }
    }
}

impl Languages {
    /// Whether code in Python (`python`) or TypeScript may run; `Err` says which key decides.
    pub fn allow(self, python: bool, profile_key: &str) -> Result<(), String> {
        let (allowed, asked, other) = if python {
            (self.python, "Python", "TypeScript")
        } else {
            (self.typescript, "TypeScript", "Python")
        };
        if allowed {
            Ok(())
        } else {
            Err(format!(
                "this profile runs no {asked}: send the code in {other}, or ask the operator to add \"{}\" to {profile_key}.languages",
                asked.to_ascii_lowercase()
            ))
        }
    }
}

/// The JavaScript engines a sandbox can run an execution on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// QuickJS (the default).
    #[default]
    Quickjs,
    /// V8 (Deno).
    V8,
}

impl Engine {
    /// The engine named `name` in the config or a call (`quickjs`, `v8`).
    pub fn named(name: &str) -> Option<Engine> {
        match name {
            "quickjs" => Some(Engine::Quickjs),
            "v8" => Some(Engine::V8),
            _ => None,
        }
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Quickjs => "quickjs",
            Engine::V8 => "v8",
        }
    }
}

/// The engine a profile's executions run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineGrant {
    /// The sandbox's default (`[sandbox] engine`); a call may not choose.
    #[default]
    Default,
    /// Always this engine; a call may not choose another.
    Only(Engine),
    /// Either engine: a call chooses with `engine`, else the sandbox's default.
    Either,
}

impl EngineGrant {
    /// The engine an execution runs on, given the sandbox's default and what the call asked
    /// for; `Err` says why a call's choice is refused (naming the key that decides it).
    pub fn decide(
        self,
        default: Engine,
        asked: Option<Engine>,
        profile_key: &str,
    ) -> Result<Engine, String> {
        let given = match self {
            EngineGrant::Default => default,
            EngineGrant::Only(engine) => engine,
            EngineGrant::Either => return Ok(asked.unwrap_or(default)),
        };
        match asked {
            Some(engine) if engine != given => Err(format!(
                "this profile runs code on {} only; `engine: \"{}\"` needs `engine = \"any\"` in {profile_key} (the operator sets it)",
                given.as_str(),
                engine.as_str()
            )),
            _ => Ok(given),
        }
    }
}

impl Profile {
    /// The profile used when the config has none: every tool, and no network, files or
    /// environment (the behaviour before profiles existed, made explicit).
    pub fn implicit_default(file: &str) -> Profile {
        Profile {
            name: "default".into(),
            key: "profiles.default".into(),
            file: file.to_string(),
            tools: Grant::all_tools(),
            net: NetGrant::default(),
            fs: vec![],
            fs_context: vec![],
            env: vec![],
            limits: ProfileLimits::default(),
            admin: true,
            approves: vec![],
            register_tools: false,
            implicit: true,
            approve: vec![],
            state: true,
            engine: Default::default(),
            languages: Default::default(),
            approve_scripts: None,
        }
    }

    /// A profile that grants nothing, written at `key` in `file` (deny by default: the
    /// `default` of a config that names other profiles, or a name no profile has).
    pub fn granting_nothing(name: &str, key: &str, file: &str) -> Profile {
        Profile {
            name: name.to_string(),
            key: key.to_string(),
            file: file.to_string(),
            tools: Grant::default(),
            net: NetGrant::default(),
            fs: vec![],
            fs_context: vec![],
            env: vec![],
            limits: ProfileLimits::default(),
            admin: false,
            approves: vec![],
            register_tools: false,
            implicit: false,
            approve: vec![],
            state: false,
            engine: Default::default(),
            languages: Default::default(),
            approve_scripts: None,
        }
    }

    /// "Only the operator can allow it (ask them): they would add an entry to
    /// profiles.reader.net in sandgate.toml." Said to the operator and to the model alike, and
    /// never as if code could widen its own grant; in the config's own syntax (a JSON config
    /// gets JSON), naming the file but not where it lies (the model never learns the
    /// operator's paths).
    pub(crate) fn fix(&self, key: &str, what: &str) -> String {
        let file = self.file_name();
        match (self.implicit, self.is_json()) {
            (true, false) => format!(
                "No profiles are configured, so the default profile grants every tool and no network, files or environment; only the operator can allow it (ask them): they would add `{key} = [...]` under [profiles.default] in {file}.",
            ),
            (true, true) => format!(
                "No profiles are configured, so the default profile grants every tool and no network, files or environment; only the operator can allow it (ask them): they would add `\"sandgate\": {{\"profiles\": {{\"default\": {{\"{key}\": [...]}}}}}}` to {file}.",
            ),
            (false, _) => format!(
                "Only the operator can allow it (ask them): they would {what} {}.{key} in {file}.",
                self.key
            ),
        }
    }

    /// The name of the file the profile is written in, without its directory.
    pub fn file_name(&self) -> &str {
        std::path::Path::new(&self.file)
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or("the config file")
    }

    /// Whether the config is JSON (an `mcpServers` file), whose advice is JSON too.
    fn is_json(&self) -> bool {
        self.file_name().to_ascii_lowercase().ends_with(".json")
    }
}

/// The host capabilities a profile can grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// `fetch` (from `net`).
    Net,
    /// `fs` (from `fs`).
    Fs,
    /// `env` (from `env`).
    Env,
    /// `state` (on unless `state = false`).
    State,
}

impl Capability {
    /// The capability the guest global `name` belongs to.
    pub fn of_global(name: &str) -> Option<Capability> {
        match name {
            "fetch" => Some(Capability::Net),
            "fs" => Some(Capability::Fs),
            "env" => Some(Capability::Env),
            "state" => Some(Capability::State),
            _ => None,
        }
    }

    fn key(self) -> &'static str {
        match self {
            Capability::Net => "net",
            Capability::Fs => "fs",
            Capability::Env => "env",
            Capability::State => "state",
        }
    }
}

/// The environment variable an execution may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvRead {
    /// Its name.
    pub name: String,
}

/// One execution's grants: its profile, narrowed by the caller's `allow_tools`.
#[derive(Debug, Clone)]
pub struct Access {
    profile: Arc<Profile>,
    narrowed: Option<Grant>,
}

impl Access {
    /// The whole of `profile`.
    pub fn new(profile: Arc<Profile>) -> Access {
        Access {
            profile,
            narrowed: None,
        }
    }

    /// Narrowed to the tools `allow` also matches. It can only narrow: a pattern outside the
    /// profile allows nothing more.
    pub fn narrowed_to(mut self, allow: Vec<String>) -> Access {
        self.narrowed = Some(Grant::new(allow, vec![]));
        self
    }

    /// The profile.
    pub fn profile(&self) -> &Arc<Profile> {
        &self.profile
    }

    /// Whether the caller narrowed its profile for this execution (`allow_tools`).
    pub fn is_narrowed(&self) -> bool {
        self.narrowed.is_some()
    }

    /// Whether some tools are hidden (the views must be filtered).
    pub fn sees_every_tool(&self) -> bool {
        self.narrowed.is_none() && self.profile.tools.allows_everything()
    }

    /// Whether the tool `name` (by any of its spellings) is one this access may see and call.
    pub fn sees_tool(&self, name: &ToolName<'_>) -> bool {
        let spellings = name.spellings();
        self.profile.tools.check(&spellings).is_ok()
            && self
                .narrowed
                .as_ref()
                .is_none_or(|g| g.check(&spellings).is_ok())
    }

    /// Whether any tool of the backend `name` (`ident` in code) could be granted: some allow
    /// pattern could match one of its tools, and no narrowing rules it out. For telling a caller
    /// that a backend it may use is not ready, without telling anyone else that it exists.
    pub fn may_reach_backend(&self, name: &str, ident: &str) -> bool {
        let could = |grant: &Grant| {
            grant
                .allowed()
                .iter()
                .any(|pattern| match pattern.split_once('.') {
                    Some((backend, _)) => {
                        crate::glob::glob_match(backend, name)
                            || crate::glob::glob_match(backend, ident)
                    }
                    None => pattern.contains('*'),
                })
        };
        could(&self.profile.tools) && self.narrowed.as_ref().is_none_or(could)
    }

    /// Whether the profile grants `capability` at all (else its global is absent).
    pub fn grants(&self, capability: Capability) -> bool {
        let p = &self.profile;
        match capability {
            Capability::Net => !p.net.is_empty(),
            Capability::Fs => !p.fs.is_empty(),
            Capability::Env => !p.env.is_empty(),
            Capability::State => p.state,
        }
    }

    /// The refusal of code that used `global`, a capability the profile does not grant.
    pub fn refuse_absent(&self, global: &str, capability: Capability) -> PolicyError {
        let p = &self.profile;
        if capability == Capability::State {
            return PolicyError::Denied {
                what: format!("using `{global}`"),
                reason: format!(
                    "profile `{}` keeps no state between executions ({}.state is false), so this execution has no `{global}`",
                    p.name, p.key
                ),
                fix: format!(
                    "Pass what the next execution needs back through your reply, or ask the operator to set state = true in {} in {}.",
                    p.key,
                    p.file_name()
                ),
            };
        }
        let (what, key) = match capability {
            Capability::Net => ("network", "net"),
            Capability::Fs => ("files", "fs"),
            Capability::Env => ("environment variables", "env"),
            Capability::State => ("state", "state"),
        };
        PolicyError::Denied {
            what: format!("using `{global}`"),
            reason: format!(
                "profile `{}` grants no {what} ({}.{key} is empty), so this execution has no `{global}`",
                p.name, p.key
            ),
            fix: p.fix(capability.key(), "add an entry to"),
        }
    }

    /// Authorizes a tool call, or says which rule refused it and where to change it.
    pub fn authorize_tool(&self, call: ToolCall) -> Result<Authorized<ToolCall>, PolicyError> {
        let spellings = call.name().spellings();
        let qualified = &spellings.first;
        let p = &self.profile;
        let denied = |reason: String, fix: String| PolicyError::Denied {
            what: format!("calling `{qualified}`"),
            reason,
            fix,
        };
        let rule = match p.tools.check(&spellings) {
            Ok(rule) => format!("{}.tools: {rule}", p.key),
            Err(Refusal::Denied(rule)) => {
                return Err(denied(
                    format!("it matches `{rule}` in {}.deny_tools", p.key),
                    p.fix("deny_tools", "remove that pattern from"),
                ));
            }
            Err(Refusal::NotAllowed) => {
                let patterns = p.tools.allowed();
                let reason = if patterns.is_empty() {
                    format!("profile `{}` grants no tools", p.name)
                } else {
                    format!(
                        "it matches none of {}.tools ({})",
                        p.key,
                        patterns.join(", ")
                    )
                };
                return Err(denied(reason, p.fix("tools", "add a pattern to")));
            }
        };
        if let Some(narrow) = &self.narrowed
            && narrow.check(&spellings).is_err()
        {
            return Err(denied(
                format!(
                    "this execution's allow_tools ({}) leaves it out",
                    narrow.allowed().join(", ")
                ),
                "allow_tools only narrows the profile for one call_tool_chain; leave it out, or add a pattern to it, to reach this tool.".into(),
            ));
        }
        Ok(Authorized::new(call, rule))
    }

    /// The rule that makes a person approve `call` before it runs, by any of the tool's
    /// spellings: a pattern of this profile's `approve`, else one of `backend_rules` (the
    /// backend's own `approve`, qualified, written at `servers.BACKEND`). `None`: no approval.
    pub fn approval_rule(&self, call: &ToolCall, backend_rules: &[String]) -> Option<String> {
        if self.profile.approve.is_empty() && backend_rules.is_empty() {
            return None;
        }
        let spellings = call.name().spellings();
        if let Some(rule) = self
            .profile
            .approve
            .iter()
            .find(|p| spellings.matched_by(p))
        {
            return Some(format!("{}.approve: {rule}", self.profile.key));
        }
        backend_rules
            .iter()
            .find(|p| spellings.matched_by(p))
            .map(|rule| format!("servers.{}.approve: {rule}", call.backend))
    }

    /// Authorizes looking up the name `host` for a connection to `host:port`: only names an
    /// entry holds are ever resolved (DNS is a channel out).
    pub fn authorize_lookup(
        &self,
        host: &str,
        port: u16,
    ) -> Result<Authorized<NetLookup>, PolicyError> {
        let p = &self.profile;
        let host = host.to_ascii_lowercase();
        match p.net.check_lookup(&host, port) {
            Ok(entry) => {
                let rule = format!("{}.net: {entry}", p.key);
                Ok(Authorized::new(NetLookup { host, port }, rule))
            }
            Err(why) => Err(self.refuse_net(&host, port, &why)),
        }
    }

    /// The refusal of a fetch to `host:port` for `why`, naming the grant and its fix.
    fn refuse_net(&self, host: &str, port: u16, why: &str) -> PolicyError {
        let p = &self.profile;
        PolicyError::Denied {
            what: format!("fetch to `{host}:{port}`"),
            reason: if p.net.is_empty() {
                format!("profile `{}` grants no network", p.name)
            } else {
                format!("{why} in {}.net ({})", p.key, p.net.written().join(", "))
            },
            fix: p.fix("net", "add the host to"),
        }
    }

    /// Authorizes a connection to `host:port` at the resolved `addr`.
    pub fn authorize_net(
        &self,
        host: &str,
        port: u16,
        addr: std::net::IpAddr,
    ) -> Result<Authorized<NetTarget>, PolicyError> {
        let p = &self.profile;
        match p.net.check(host, port, addr) {
            Ok(entry) => Ok(Authorized::new(
                NetTarget {
                    host: host.to_string(),
                    port,
                    addr,
                },
                format!("{}.net: {entry}", p.key),
            )),
            Err(why) => Err(self.refuse_net(host, port, &why)),
        }
    }

    /// Authorizes reading the environment variable `name`.
    pub fn authorize_env(&self, name: &str) -> Result<Authorized<EnvRead>, PolicyError> {
        let p = &self.profile;
        if p.env.iter().any(|n| n == name) {
            return Ok(Authorized::new(
                EnvRead {
                    name: name.to_string(),
                },
                format!("{}.env: {name}", p.key),
            ));
        }
        Err(PolicyError::Denied {
            what: format!("reading the environment variable `{}`", name.escape_debug()),
            reason: if p.env.is_empty() {
                format!("profile `{}` grants no environment variables", p.name)
            } else {
                format!("it is not in {}.env ({})", p.key, p.env.join(", "))
            },
            fix: p.fix("env", "add the name to"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::HostPattern;

    fn reader() -> Arc<Profile> {
        Arc::new(Profile {
            name: "reader".into(),
            key: "profiles.reader".into(),
            file: "sandgate.toml".into(),
            tools: Grant::new(
                vec!["memory.read_*".into(), "fs.read_*".into()],
                vec!["fs.read_media_file".into()],
            ),
            net: NetGrant::new(vec![
                HostPattern::parse("api.github.com:443").expect("entry"),
            ]),
            fs: vec![
                FsRoot::configured("/srv/data", false),
                FsRoot::configured("/srv/data/out", true),
            ],
            fs_context: vec![],
            env: vec!["GITHUB_TOKEN".into()],
            limits: ProfileLimits::default(),
            admin: false,
            approves: vec![],
            register_tools: false,
            implicit: false,
            approve: vec![],
            state: false,
            engine: Default::default(),
            languages: Default::default(),
            approve_scripts: None,
        })
    }

    #[test]
    fn an_approval_rule_matches_any_spelling_and_says_where_it_is_written() {
        let mut profile = (*reader()).clone();
        profile.approve = vec!["github.merge_*".into()];
        let access = Access::new(Arc::new(profile));
        let merge = ToolCall::new("github", "merge-pull-request")
            .called_in_code("github", "merge_pull_request");
        assert_eq!(
            access.approval_rule(&merge, &[]).as_deref(),
            Some("profiles.reader.approve: github.merge_*")
        );
        let delete = ToolCall::new("db", "delete_rows");
        assert_eq!(access.approval_rule(&delete, &[]), None);
        assert_eq!(
            access
                .approval_rule(&delete, &["db.delete_*".into()])
                .as_deref(),
            Some("servers.db.approve: db.delete_*")
        );
        assert_eq!(Access::new(reader()).approval_rule(&merge, &[]), None);
    }

    #[test]
    fn a_tool_denial_names_the_rule_and_where_to_change_it() {
        let access = Access::new(reader());
        let ok = access
            .authorize_tool(ToolCall::new("memory", "read_graph"))
            .expect("allowed");
        assert_eq!(ok.rule(), "profiles.reader.tools: memory.read_*");
        let err = access
            .authorize_tool(ToolCall::new("memory", "create_entities"))
            .expect_err("denied")
            .to_string();
        assert!(
            err.contains("none of profiles.reader.tools (memory.read_*, fs.read_*)"),
            "{err}"
        );
        assert!(
            err.contains("profiles.reader.tools in sandgate.toml"),
            "{err}"
        );
        let err = access
            .authorize_tool(ToolCall::new("fs", "read_media_file"))
            .expect_err("denied")
            .to_string();
        assert!(
            err.contains("`fs.read_media_file` in profiles.reader.deny_tools"),
            "{err}"
        );
    }

    #[test]
    fn allow_tools_narrows_and_never_widens() {
        let access = Access::new(reader()).narrowed_to(vec!["memory.*".into(), "github.*".into()]);
        assert!(
            access
                .authorize_tool(ToolCall::new("memory", "read_graph"))
                .is_ok()
        );
        assert!(
            access
                .authorize_tool(ToolCall::new("fs", "read_file"))
                .is_err()
        );
        let err = access
            .authorize_tool(ToolCall::new("github", "create_issue"))
            .expect_err("not widened")
            .to_string();
        assert!(err.contains("profiles.reader.tools"), "{err}");
        assert!(!access.sees_tool(&ToolName::plain("github", "create_issue")));
        assert!(!access.sees_every_tool());
    }

    #[test]
    fn a_backend_is_reachable_when_a_pattern_could_name_its_tools() {
        let access = Access::new(reader());
        assert!(access.may_reach_backend("memory", "memory"));
        assert!(access.may_reach_backend("fs", "fs"));
        assert!(!access.may_reach_backend("github", "github"));
        let narrowed = Access::new(reader()).narrowed_to(vec!["fs.*".into()]);
        assert!(!narrowed.may_reach_backend("memory", "memory"));
        let all = Access::new(Arc::new(Profile::implicit_default("sandgate.toml")));
        assert!(all.may_reach_backend("my-server", "my_server"));
    }

    #[test]
    fn env_and_net_are_granted_by_name_only() {
        let access = Access::new(reader());
        assert!(access.authorize_env("GITHUB_TOKEN").is_ok());
        let err = access
            .authorize_env("HOME")
            .expect_err("denied")
            .to_string();
        assert!(
            err.contains("profiles.reader.env in sandgate.toml"),
            "{err}"
        );
        assert!(access.authorize_lookup("api.github.com", 443).is_ok());
        assert!(access.authorize_lookup("API.GitHub.com", 443).is_ok());
        assert!(access.authorize_lookup("api.github.com", 80).is_err());
        assert!(
            access
                .authorize_lookup("leak.attacker.example", 443)
                .is_err()
        );
        let public = "140.82.112.5".parse().expect("ip");
        assert!(access.authorize_net("api.github.com", 443, public).is_ok());
        assert!(access.authorize_net("example.com", 443, public).is_err());
        let none = Access::new(Arc::new(Profile::implicit_default("sandgate.toml")));
        let err = none
            .authorize_net("example.com", 443, public)
            .expect_err("no net")
            .to_string();
        assert!(err.contains("grants no network"), "{err}");
        assert!(err.contains("[profiles.default]"), "{err}");
    }
}

#[cfg(test)]
mod engine_tests {
    use super::{Engine, EngineGrant};

    #[test]
    fn a_call_chooses_its_engine_only_where_the_profile_allows_either() {
        let key = "profiles.p in sandgate.toml";
        let either = EngineGrant::Either;
        assert_eq!(
            either.decide(Engine::Quickjs, None, key),
            Ok(Engine::Quickjs)
        );
        assert_eq!(
            either.decide(Engine::Quickjs, Some(Engine::V8), key),
            Ok(Engine::V8)
        );
        let default = EngineGrant::Default;
        assert_eq!(default.decide(Engine::V8, None, key), Ok(Engine::V8));
        assert_eq!(
            default.decide(Engine::V8, Some(Engine::V8), key),
            Ok(Engine::V8)
        );
        let refused = default
            .decide(Engine::Quickjs, Some(Engine::V8), key)
            .expect_err("a profile without `engine = \"any\"` keeps its engine");
        assert!(
            refused.contains(key) && refused.contains("\"any\""),
            "{refused}"
        );
        let only = EngineGrant::Only(Engine::V8);
        assert_eq!(only.decide(Engine::Quickjs, None, key), Ok(Engine::V8));
        assert!(
            only.decide(Engine::Quickjs, Some(Engine::Quickjs), key)
                .is_err()
        );
    }
}
