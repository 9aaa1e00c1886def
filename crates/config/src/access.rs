//! The access sections of a config: `[profiles.NAME]` (what each kind of caller may reach),
//! `[[http.tokens]]` (which bearer token is which profile), `[http] auth` and `[audit]`.
//!
//! Profiles load straight into the policy crate's [`Profile`], so what the file says is what
//! is enforced; every entry is checked here (host patterns, roots, limits, token profiles).

use std::collections::BTreeMap;
use std::path::PathBuf;

use sandgate_policy::{
    Engine, EngineGrant, FsRoot, Grant, HostPattern, Languages, NetGrant, Profile, ProfileLimits,
    ScriptApproval,
};
use serde_json::{Map, Value};

use sha2::{Digest, Sha256};

use crate::error::ConfigError;
use crate::secret::Secret;
use crate::walker::{Walker, join, kind, opt_bool, opt_string, string_list};

const PROFILE_KEYS: &[&str] = &[
    "engine",
    "tools",
    "deny_tools",
    "net",
    "fs",
    "env",
    "limits",
    "admin",
    "approves",
    "register_tools",
    "approve",
    "state",
    "languages",
    "approve_scripts",
];
const LIMIT_KEYS: &[&str] = &["timeout_ms", "max_calls", "executions_per_minute"];
const FS_KEYS: &[&str] = &["path", "write"];
const TOKEN_KEYS: &[&str] = &["token", "token_sha256", "profile", "name"];
const AUDIT_KEYS: &[&str] = &["path", "arguments"];

/// Whether HTTP clients must present a bearer token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpAuth {
    /// Every request needs a configured (or generated) token. The default.
    #[default]
    Tokens,
    /// No authentication (`auth = "none"`): allowed only on a loopback listener.
    None,
}

/// A token's secret as configured. Its `Debug` never shows the token: a config printed for
/// debugging must not leak it.
#[derive(Clone, PartialEq, Eq)]
pub enum TokenSecret {
    /// The token itself (`token = "${VAR}"`); may hold `${VAR}` until resolved.
    Plain(Secret),
    /// The SHA-256 of the token (`token_sha256 = "hex"`).
    Sha256([u8; 32]),
}

impl std::fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSecret::Plain(secret) => write!(f, "Plain({secret})"),
            TokenSecret::Sha256(_) => f.write_str("Sha256(<digest>)"),
        }
    }
}

/// One `[[http.tokens]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpToken {
    /// The secret.
    pub secret: TokenSecret,
    /// The profile its bearer gets.
    pub profile: String,
    /// Its `name`, if it has one.
    pub name: Option<String>,
}

/// What an unnamed token's id begins with; no configured name may.
pub const DIGEST_ID_PREFIX: &str = "sha256:";

impl HttpToken {
    /// The SHA-256 of the token (of its text once `${VAR}` is resolved).
    pub fn digest(&self) -> [u8; 32] {
        match &self.secret {
            TokenSecret::Plain(text) => Sha256::digest(text.expose().as_bytes()).into(),
            TokenSecret::Sha256(digest) => *digest,
        }
    }

    /// The principal it proves, as everything it owns is keyed (`state`, credentials, tasks,
    /// outputs, approvals, sessions) and the audit log names it: its `name`, else
    /// `sha256:` and the first 64 bits of its digest in hex. Never its position in the list,
    /// which an edit of the config would hand to another token; never the secret.
    pub fn id(&self) -> String {
        match &self.name {
            Some(name) => name.clone(),
            None => digest_id(&self.digest()),
        }
    }
}

/// The id of an unnamed token whose SHA-256 is `digest` (see [`HttpToken::id`]).
pub fn digest_id(digest: &[u8; 32]) -> String {
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{DIGEST_ID_PREFIX}{hex}")
}

/// The audit log (`[audit]`); off unless `path` is set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditConfig {
    /// The JSON-lines file.
    pub path: Option<PathBuf>,
    /// Whether lines carry call arguments (off: no argument values are written).
    pub arguments: bool,
}

/// Smallest length of a configured plain token: shorter ones are guessable.
pub const MIN_TOKEN_CHARS: usize = 16;

impl Walker<'_> {
    /// `[profiles]`: `prefix` is `profiles` or `sandgate.profiles`.
    pub(crate) fn profiles_section(
        &self,
        prefix: &str,
        value: Option<&Value>,
    ) -> Result<Vec<Profile>, ConfigError> {
        let Some(value) = value else {
            return Ok(vec![]);
        };
        let table = self.table(prefix, value)?;
        let mut profiles = Vec::new();
        for (name, entry) in table {
            let key = join(prefix, name);
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(self.invalid(
                    &key,
                    "is not a usable profile name",
                    "use letters, digits, `_` and `-`",
                ));
            }
            profiles.push(self.profile(&key, name, self.table(&key, entry)?)?);
        }
        Ok(profiles)
    }

    fn profile(
        &self,
        key: &str,
        name: &str,
        table: &Map<String, Value>,
    ) -> Result<Profile, ConfigError> {
        self.check_keys(key, table, PROFILE_KEYS, &[])?;
        let sub = |k: &str| format!("{key}.{k}");
        let patterns = |k: &str| -> Result<Vec<String>, ConfigError> {
            let list = string_list(self, &sub(k), table.get(k))?;
            for pattern in &list {
                if !pattern.contains('.') && pattern != "*" {
                    return Err(self.invalid(
                        &sub(k),
                        format!("has `{pattern}`, which names no backend"),
                        "write patterns over backend.tool, e.g. \"memory.read_*\" or \"github.*\"",
                    ));
                }
            }
            Ok(list)
        };
        let tools = Grant::new(patterns("tools")?, patterns("deny_tools")?);
        let net = string_list(self, &sub("net"), table.get("net"))?
            .iter()
            .map(|entry| {
                HostPattern::parse(entry).map_err(|why| {
                    self.invalid(
                        &sub("net"),
                        why,
                        "write \"api.github.com:443\" or \"*.example.com\"",
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let env = string_list(self, &sub("env"), table.get("env"))?;
        for var in &env {
            if var.is_empty() || var.contains(['=', '\0', '*']) {
                return Err(self.invalid(
                    &sub("env"),
                    format!("has `{var}`, which is not an environment variable name"),
                    "list exact names such as \"GITHUB_TOKEN\"; patterns are not accepted",
                ));
            }
        }
        Ok(Profile {
            name: name.to_string(),
            key: key.to_string(),
            file: self.file.to_string(),
            tools,
            net: NetGrant::new(net),
            fs: self.fs_roots(&sub("fs"), table.get("fs"))?,
            fs_context: vec![],
            env,
            limits: self.profile_limits(&sub("limits"), table.get("limits"))?,
            admin: opt_bool(self, &sub("admin"), table.get("admin"))?.unwrap_or(false),
            approves: string_list(self, &sub("approves"), table.get("approves"))?,
            register_tools: opt_bool(self, &sub("register_tools"), table.get("register_tools"))?
                .unwrap_or(false),
            implicit: false,
            approve: patterns("approve")?,
            state: opt_bool(self, &sub("state"), table.get("state"))?.unwrap_or(true),
            engine: self.engine_grant(&sub("engine"), table.get("engine"))?,
            languages: self.languages(&sub("languages"), table.get("languages"))?,
            approve_scripts: self
                .script_approval(&sub("approve_scripts"), table.get("approve_scripts"))?,
        })
    }

    /// A profile's `languages`: `["typescript"]`, `["python"]` or both (the default).
    fn languages(&self, key: &str, value: Option<&Value>) -> Result<Languages, ConfigError> {
        if value.is_none() {
            return Ok(Languages::default());
        }
        let names = string_list(self, key, value)?;
        let mut languages = Languages {
            typescript: false,
            python: false,
        };
        for name in &names {
            match name.as_str() {
                "typescript" => languages.typescript = true,
                "python" => languages.python = true,
                other => {
                    return Err(self.invalid(
                        key,
                        format!("holds \"{other}\""),
                        "list \"typescript\", \"python\" or both",
                    ));
                }
            }
        }
        if names.is_empty() {
            return Err(self.invalid(key, "is empty", "list \"typescript\", \"python\" or both"));
        }
        Ok(languages)
    }

    /// A profile's `engine`: `"quickjs"`, `"v8"`, or `"any"` (a call chooses).
    /// Which scripts a person approves before they run: `never`, `writes` or `always`.
    pub(crate) fn script_approval(
        &self,
        key: &str,
        value: Option<&Value>,
    ) -> Result<Option<ScriptApproval>, ConfigError> {
        match opt_string(self, key, value)?.as_deref() {
            None => Ok(None),
            Some(name) => ScriptApproval::named(name).map(Some).ok_or_else(|| {
                self.invalid(
                    key,
                    format!("is \"{name}\""),
                    "write \"never\", \"writes\" (scripts that name a tool that may write or that `approve` gates) or \"always\"",
                )
            }),
        }
    }

    fn engine_grant(&self, key: &str, value: Option<&Value>) -> Result<EngineGrant, ConfigError> {
        match opt_string(self, key, value)?.as_deref() {
            None => Ok(EngineGrant::Default),
            Some("any") => Ok(EngineGrant::Either),
            Some(name) => Engine::named(name).map(EngineGrant::Only).ok_or_else(|| {
                self.invalid(
                    key,
                    format!("is \"{name}\""),
                    "write \"quickjs\", \"v8\", or \"any\" (a call then chooses with `engine`)",
                )
            }),
        }
    }

    fn fs_roots(&self, key: &str, value: Option<&Value>) -> Result<Vec<FsRoot>, ConfigError> {
        let Some(value) = value else {
            return Ok(vec![]);
        };
        let form = |path: &str| {
            self.in_syntax(
                &format!("[{{ path = {path:?}, write = false }}]"),
                &format!(r#"[{{"path": {path:?}, "write": false}}]"#),
            )
        };
        let list = value.as_array().ok_or_else(|| {
            self.invalid(
                key,
                format!("must be a list of roots, found {}", kind(value)),
                format!("write it like {}", form("/srv/data")),
            )
        })?;
        list.iter()
            .enumerate()
            .map(|(i, entry)| {
                let at = format!("{key}[{i}]");
                // A bare path: the one form a newcomer writes first.
                if let Some(path) = entry.as_str() {
                    return Err(self.invalid(
                        &at,
                        "is a bare path; each root is an object with its path and whether code may write there",
                        format!("write it like {}", form(path)),
                    ));
                }
                let table = self.table(&at, entry)?;
                self.check_keys(&at, table, FS_KEYS, &[])?;
                let path = opt_string(self, &format!("{at}.path"), table.get("path"))?.ok_or_else(
                    || self.invalid(&at, "has no `path`", "add path = \"/srv/data\""),
                )?;
                if path.is_empty() || path.contains('\0') {
                    return Err(self.invalid(
                        &format!("{at}.path"),
                        "is empty",
                        "name a directory",
                    ));
                }
                Ok(FsRoot::configured(
                    PathBuf::from(path),
                    opt_bool(self, &format!("{at}.write"), table.get("write"))?.unwrap_or(false),
                ))
            })
            .collect()
    }

    fn profile_limits(
        &self,
        key: &str,
        value: Option<&Value>,
    ) -> Result<ProfileLimits, ConfigError> {
        let Some(value) = value else {
            return Ok(ProfileLimits::default());
        };
        let table = self.table(key, value)?;
        self.check_keys(key, table, LIMIT_KEYS, &[])?;
        let number = |k: &str, max: u64| -> Result<Option<u64>, ConfigError> {
            match table.get(k) {
                None => Ok(None),
                Some(v) => match v.as_u64() {
                    Some(n) if (1..=max).contains(&n) => Ok(Some(n)),
                    _ => Err(self.invalid(
                        &format!("{key}.{k}"),
                        format!("is {v}"),
                        format!("use a whole number from 1 to {max}"),
                    )),
                },
            }
        };
        let small = |n: Option<u64>| n.map(|n| u32::try_from(n).unwrap_or(u32::MAX));
        Ok(ProfileLimits {
            timeout_ms: number("timeout_ms", 86_400_000)?,
            max_calls: small(number("max_calls", 1_000_000)?),
            executions_per_minute: small(number("executions_per_minute", 1_000_000)?),
        })
    }

    /// `http.auth`.
    pub(crate) fn http_auth(&self, value: Option<&Value>) -> Result<HttpAuth, ConfigError> {
        match opt_string(self, "http.auth", value)?.as_deref() {
            None | Some("token") => Ok(HttpAuth::Tokens),
            Some("none") => Ok(HttpAuth::None),
            Some(other) => Err(self.invalid(
                "http.auth",
                format!("is `{other}`"),
                "use \"token\" (the default: clients need a bearer token) or \"none\" (loopback only)",
            )),
        }
    }

    /// `[[http.tokens]]`.
    pub(crate) fn http_tokens(&self, value: Option<&Value>) -> Result<Vec<HttpToken>, ConfigError> {
        let Some(value) = value else {
            return Ok(vec![]);
        };
        let list = value.as_array().ok_or_else(|| {
            self.invalid(
                "http.tokens",
                format!("must be a list of tokens, found {}", kind(value)),
                "write [[http.tokens]] tables with token = \"${VAR}\" and profile = \"name\"",
            )
        })?;
        list.iter()
            .enumerate()
            .map(|(i, entry)| {
                let at = format!("http.tokens[{i}]");
                let table = self.table(&at, entry)?;
                self.check_keys(&at, table, TOKEN_KEYS, &[])?;
                let plain = opt_string(self, &format!("{at}.token"), table.get("token"))?;
                let hashed = opt_string(self, &format!("{at}.token_sha256"), table.get("token_sha256"))?;
                let secret = match (plain, hashed) {
                    (Some(token), None) => TokenSecret::Plain(Secret::from(token)),
                    (None, Some(hex)) => TokenSecret::Sha256(sha256_hex(&hex).ok_or_else(|| {
                        self.invalid(
                            &format!("{at}.token_sha256"),
                            "is not 64 hexadecimal digits",
                            "write the SHA-256 of the token as hex, e.g. from `printf %s \"$TOKEN\" | sha256sum`",
                        )
                    })?),
                    _ => {
                        return Err(self.invalid(
                            &at,
                            "needs exactly one of `token` and `token_sha256`",
                            "write token = \"${SANDGATE_TOKEN}\", or token_sha256 = \"<hex>\"",
                        ));
                    }
                };
                let profile = opt_string(self, &format!("{at}.profile"), table.get("profile"))?
                    .unwrap_or_else(|| "default".into());
                let name = opt_string(self, &format!("{at}.name"), table.get("name"))?;
                if let Some(name) = &name
                    && (name.is_empty() || name.starts_with(DIGEST_ID_PREFIX))
                {
                    return Err(self.invalid(
                        &format!("{at}.name"),
                        format!("is `{name}`"),
                        format!("give it a name of its own that does not begin with `{DIGEST_ID_PREFIX}` (unnamed tokens go by their digest so)"),
                    ));
                }
                Ok(HttpToken { secret, profile, name })
            })
            .collect()
    }

    /// `[audit]`.
    pub(crate) fn audit_section(
        &self,
        prefix: &str,
        value: Option<&Value>,
    ) -> Result<AuditConfig, ConfigError> {
        let Some(value) = value else {
            return Ok(AuditConfig::default());
        };
        let table = self.table(prefix, value)?;
        self.check_keys(prefix, table, AUDIT_KEYS, &[])?;
        Ok(AuditConfig {
            path: opt_string(self, &format!("{prefix}.path"), table.get("path"))?
                .map(PathBuf::from),
            arguments: opt_bool(self, &format!("{prefix}.arguments"), table.get("arguments"))?
                .unwrap_or(false),
        })
    }

    /// Checks what spans sections: every token's profile exists, and names are unique.
    pub(crate) fn check_access(
        &self,
        profiles: &[Profile],
        tokens: &[HttpToken],
    ) -> Result<(), ConfigError> {
        let names: BTreeMap<&str, ()> = profiles.iter().map(|p| (p.name.as_str(), ())).collect();
        for profile in profiles {
            if let Some(unknown) = profile
                .approves
                .iter()
                .find(|name| !names.contains_key(name.as_str()))
            {
                let list: Vec<&str> = names.keys().copied().collect();
                return Err(self.invalid(
                    &format!("{}.approves", profile.key),
                    format!("names `{unknown}`, which is not a profile"),
                    format!(
                        "list profiles whose gated calls it approves: {}",
                        list.join(", ")
                    ),
                ));
            }
        }
        let mut ids = BTreeMap::new();
        for (i, token) in tokens.iter().enumerate() {
            let known = names.contains_key(token.profile.as_str())
                || (profiles.is_empty() && token.profile == "default");
            if !known {
                let list: Vec<&str> = names.keys().copied().collect();
                return Err(self.invalid(
                    &format!("http.tokens[{i}].profile"),
                    format!("names `{}`, which is not a profile", token.profile),
                    if list.is_empty() {
                        "leave it out (the default profile) or add that [profiles.NAME] section"
                            .to_string()
                    } else {
                        format!("use one of: {}", list.join(", "))
                    },
                ));
            }
            let Some(name) = &token.name else { continue };
            if ids.insert(name.clone(), ()).is_some() {
                return Err(self.invalid(
                    &format!("http.tokens[{i}].name"),
                    format!("`{name}` names two tokens"),
                    "give each token its own name",
                ));
            }
        }
        Ok(())
    }
}

impl Walker<'_> {
    /// Every `[[auth.oauth.rules]]` profile is one the config has.
    pub(crate) fn check_rule_profiles(
        &self,
        profiles: &[Profile],
        rules: &[crate::sections::auth::OAuthRule],
    ) -> Result<(), ConfigError> {
        for (i, rule) in rules.iter().enumerate() {
            let known = profiles.iter().any(|p| p.name == rule.profile)
                || (profiles.is_empty() && rule.profile == "default");
            if !known {
                let list: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
                return Err(self.invalid(
                    &format!("auth.oauth.rules[{i}].profile"),
                    format!("names `{}`, which is not a profile", rule.profile),
                    format!(
                        "add [profiles.{}], or use one of: {}",
                        rule.profile,
                        list.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn sha256_hex(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}
