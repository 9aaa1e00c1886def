//! `[credentials]`, where users' own backend secrets are sealed, and a backend's `per_user`
//! keys: one connection (a process, for stdio) per user, and what of the user's it carries.
//!
//! A user's secret is kept encrypted in the store; the key comes from the environment
//! (`key = "${SANDGATE_CREDENTIAL_KEY}"`) or a file (`key_file`), never from the config file
//! itself. A backend that needs a user's secret names where it goes: a header for an HTTP
//! backend (`user_secret = { header = "Authorization", format = "Bearer {secret}" }`), a
//! variable for a stdio one (`user_secret = { env = "NOTES_TOKEN" }`), or, for an HTTP backend,
//! a token the caller's identity provider exchanges for it (`token_exchange`, RFC 8693).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::ConfigError;
use crate::secret::Secret;
use crate::walker::{Walker, duration, opt_bool, opt_string, whole_number};

/// Where users' secrets are sealed (`[credentials]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CredentialsConfig {
    /// The key, as written (`${VAR}` until resolved): 32 bytes in base64 or hex.
    pub key: Option<Secret>,
    /// A file that holds the key.
    pub key_file: Option<PathBuf>,
}

impl CredentialsConfig {
    /// Whether a key is configured at all.
    pub fn configured(&self) -> bool {
        self.key.is_some() || self.key_file.is_some()
    }
}

/// What a per-user backend carries of its user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserSecret {
    /// Nothing: each user only gets a connection (a process) of their own.
    None,
    /// The user's stored secret in this header of every request (HTTP).
    Header {
        /// The header's name.
        name: String,
        /// Its value, with `{secret}` where the secret goes.
        format: String,
    },
    /// The user's stored secret in this variable of the process's environment (stdio).
    Env {
        /// The variable's name.
        name: String,
    },
    /// A token the caller's issuer exchanges the caller's own token for (RFC 8693), whose
    /// audience is this backend, sent as `Authorization: Bearer` (HTTP).
    TokenExchange {
        /// The audience (or resource) to ask for.
        audience: String,
        /// The scope to ask for, if any.
        scope: Option<String>,
    },
    /// A token the user got by signing in to the backend's own authorization server, with
    /// sandgate as its OAuth client, sent as `Authorization: Bearer` (HTTP).
    OAuth(UpstreamOAuthConfig),
}

/// A backend's `oauth`: how its users sign in to its authorization server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamOAuthConfig {
    /// The scope to ask for; none lets the server decide.
    pub scope: Option<String>,
    /// sandgate's client id at the server; none registers one (RFC 7591).
    pub client_id: Option<String>,
    /// That client's secret (`"${VAR}"`), for a confidential client.
    pub client_secret: Option<Secret>,
    /// Where the server sends the browser back: this gateway's `/ui/connect/callback`, as
    /// browsers reach it; none takes `[auth.oauth] resource`'s origin.
    pub redirect_uri: Option<String>,
}

/// A backend's `per_user` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerUser {
    /// What each user's connection carries.
    pub secret: UserSecret,
    /// The most users' connections open at once (the least recently used idle one is closed
    /// for a new user).
    pub max_users: usize,
    /// How long a user's connection may sit unused before it is closed.
    pub idle_timeout: Duration,
}

/// Default most users' connections per backend.
pub const DEFAULT_MAX_USERS: usize = 64;
/// Default idle time before a user's connection is closed.
pub const DEFAULT_USER_IDLE: Duration = Duration::from_secs(300);

/// The keys of a backend's `oauth` (another client's `oauth`, with keys such as `clientId`,
/// skips the entry instead).
pub(crate) const OAUTH_KEYS: &[&str] = &["scope", "client_id", "client_secret", "redirect_uri"];

/// The backend keys this file reads.
pub(crate) const PER_USER_KEYS: &[&str] = &[
    "per_user",
    "user_secret",
    "token_exchange",
    "oauth",
    "max_users",
    "user_idle_timeout",
];

impl Walker<'_> {
    pub(crate) fn credentials_section(
        &self,
        key: &str,
        value: Option<&Value>,
    ) -> Result<CredentialsConfig, ConfigError> {
        let Some(value) = value else {
            return Ok(CredentialsConfig::default());
        };
        let table = self.table(key, value)?;
        self.check_keys(key, table, &["key", "key_file"], &[])?;
        let config = CredentialsConfig {
            key: opt_string(self, &format!("{key}.key"), table.get("key"))?.map(Secret::from),
            key_file: opt_string(self, &format!("{key}.key_file"), table.get("key_file"))?
                .map(PathBuf::from),
        };
        match (&config.key, &config.key_file) {
            (Some(_), Some(_)) => Err(self.invalid(
                key,
                "has both `key` and `key_file`".to_string(),
                "keep one: key = \"${SANDGATE_CREDENTIAL_KEY}\", or key_file = \"/run/secrets/sandgate-key\"",
            )),
            (None, None) => Err(self.invalid(
                key,
                "names no key".to_string(),
                "add key = \"${SANDGATE_CREDENTIAL_KEY}\" (32 random bytes in base64: `openssl rand -base64 32`), or key_file",
            )),
            (Some(secret), None)
                if !secret.expose().starts_with("${") =>
            {
                Err(self.invalid(
                    &format!("{key}.key"),
                    "is written in the file".to_string(),
                    "the key must not sit beside the config: write key = \"${SANDGATE_CREDENTIAL_KEY}\" and set it in the environment, or use key_file",
                ))
            }
            _ => Ok(config),
        }
    }

    /// A backend's `per_user` keys (`path` is the backend's key), for a stdio backend when
    /// `stdio` is true.
    pub(crate) fn per_user(
        &self,
        path: &str,
        table: &Map<String, Value>,
        stdio: bool,
    ) -> Result<Option<PerUser>, ConfigError> {
        let key = |k: &str| format!("{path}.{k}");
        let flag = opt_bool(self, &key("per_user"), table.get("per_user"))?;
        let given: Vec<&str> = ["user_secret", "token_exchange", "oauth"]
            .into_iter()
            .filter(|k| table.contains_key(*k))
            .collect();
        if given.len() > 1 {
            return Err(self.invalid(
                path,
                format!("has both `{}` and `{}`", given[0], given[1]),
                "keep one: a user's stored secret, a token exchanged for the caller's, or the user's own sign-in (oauth)",
            ));
        }
        let secret = match given.first().copied() {
            Some("user_secret") => {
                Some(self.user_secret(&key("user_secret"), &table["user_secret"], stdio)?)
            }
            Some("token_exchange") => Some(self.token_exchange(
                &key("token_exchange"),
                &table["token_exchange"],
                stdio,
            )?),
            Some(_) => Some(self.upstream_oauth(&key("oauth"), &table["oauth"], stdio)?),
            None => None,
        };
        let wants = flag.unwrap_or(secret.is_some());
        if !wants {
            if secret.is_some() {
                return Err(self.invalid(
                    &key("per_user"),
                    "is false, but the backend carries each user's secret",
                    "set per_user = true (each user gets a connection of their own), or remove user_secret / token_exchange",
                ));
            }
            for only in ["max_users", "user_idle_timeout"] {
                if table.contains_key(only) {
                    return Err(self.invalid(
                        &key(only),
                        "applies only to per-user backends",
                        "set per_user = true, or remove it",
                    ));
                }
            }
            return Ok(None);
        }
        let idle_timeout = duration(
            self,
            &key("user_idle_timeout"),
            table.get("user_idle_timeout"),
        )?
        .unwrap_or(DEFAULT_USER_IDLE);
        if idle_timeout < Duration::from_secs(1) {
            return Err(self.invalid(
                &key("user_idle_timeout"),
                format!("is {idle_timeout:?}"),
                "give at least 1s",
            ));
        }
        Ok(Some(PerUser {
            secret: secret.unwrap_or(UserSecret::None),
            max_users: whole_number(
                self,
                &key("max_users"),
                table.get("max_users"),
                DEFAULT_MAX_USERS,
                1..=10_000,
            )?,
            idle_timeout,
        }))
    }

    fn user_secret(
        &self,
        key: &str,
        value: &Value,
        stdio: bool,
    ) -> Result<UserSecret, ConfigError> {
        let table = self.table(key, value)?;
        self.check_keys(key, table, &["header", "format", "env"], &[])?;
        let header = opt_string(self, &format!("{key}.header"), table.get("header"))?;
        let format = opt_string(self, &format!("{key}.format"), table.get("format"))?;
        let env = opt_string(self, &format!("{key}.env"), table.get("env"))?;
        match (header, env) {
            (Some(name), None) if !stdio => {
                if name.is_empty()
                    || !name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                {
                    return Err(self.invalid(
                        &format!("{key}.header"),
                        format!("is {name:?}, not a header name"),
                        "write a name such as \"Authorization\" or \"X-Api-Key\"",
                    ));
                }
                let format = format.unwrap_or_else(|| "{secret}".to_string());
                if format.matches("{secret}").count() != 1 {
                    return Err(self.invalid(
                        &format!("{key}.format"),
                        format!("is {format:?}"),
                        "hold {secret} exactly once, e.g. \"Bearer {secret}\"",
                    ));
                }
                Ok(UserSecret::Header { name, format })
            }
            (None, Some(name)) if stdio => {
                if format.is_some() {
                    return Err(self.invalid(
                        &format!("{key}.format"),
                        "applies only to a header".to_string(),
                        "remove it: the variable holds the secret as it is",
                    ));
                }
                if name.is_empty()
                    || name.starts_with(|c: char| c.is_ascii_digit())
                    || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    return Err(self.invalid(
                        &format!("{key}.env"),
                        format!("is {name:?}, not a variable name"),
                        "write a name such as \"GITHUB_TOKEN\"",
                    ));
                }
                Ok(UserSecret::Env { name })
            }
            _ if stdio => Err(self.invalid(
                key,
                "does not name a variable".to_string(),
                "a stdio backend takes the secret in its environment: user_secret = { env = \"NOTES_TOKEN\" }",
            )),
            _ => Err(self.invalid(
                key,
                "does not name a header".to_string(),
                "an HTTP backend takes the secret in a header: user_secret = { header = \"Authorization\", format = \"Bearer {secret}\" }",
            )),
        }
    }

    /// A refusal of `key` on a stdio backend, which takes a stored secret instead.
    fn http_only(&self, key: &str, stdio: bool) -> Result<(), ConfigError> {
        if stdio {
            return Err(self.invalid(
                key,
                "applies only to HTTP backends".to_string(),
                "a stdio backend takes a stored secret: user_secret = { env = \"NOTES_TOKEN\" }",
            ));
        }
        Ok(())
    }

    fn upstream_oauth(
        &self,
        key: &str,
        value: &Value,
        stdio: bool,
    ) -> Result<UserSecret, ConfigError> {
        self.http_only(key, stdio)?;
        let table = self.table(key, value)?;
        self.check_keys(key, table, OAUTH_KEYS, &[])?;
        let sub = |k: &str| format!("{key}.{k}");
        let client_id = opt_string(self, &sub("client_id"), table.get("client_id"))?;
        let client_secret =
            opt_string(self, &sub("client_secret"), table.get("client_secret"))?.map(Secret::from);
        if client_secret.is_some() && client_id.is_none() {
            return Err(self.invalid(
                &sub("client_secret"),
                "is given without client_id".to_string(),
                "name the client too (client_id = \"sandgate\"), or remove both to have sandgate register one",
            ));
        }
        if let Some(secret) = &client_secret
            && !secret.expose().starts_with("${")
        {
            return Err(self.invalid(
                &sub("client_secret"),
                "is written in the file".to_string(),
                "write client_secret = \"${NOTES_CLIENT_SECRET}\" and set it in the environment",
            ));
        }
        let redirect_uri = opt_string(self, &sub("redirect_uri"), table.get("redirect_uri"))?;
        let callback = |uri: &str| {
            (uri.starts_with("https://") || uri.starts_with("http://"))
                && uri.ends_with("/ui/connect/callback")
        };
        if redirect_uri.as_deref().is_some_and(|uri| !callback(uri)) {
            return Err(self.invalid(
                &sub("redirect_uri"),
                format!("is {:?}", redirect_uri.unwrap_or_default()),
                "give this gateway's callback as browsers reach it, e.g. \"https://gateway.example.com/ui/connect/callback\"",
            ));
        }
        Ok(UserSecret::OAuth(UpstreamOAuthConfig {
            scope: opt_string(self, &sub("scope"), table.get("scope"))?,
            client_id,
            client_secret,
            redirect_uri,
        }))
    }

    fn token_exchange(
        &self,
        key: &str,
        value: &Value,
        stdio: bool,
    ) -> Result<UserSecret, ConfigError> {
        self.http_only(key, stdio)?;
        let table = self.table(key, value)?;
        self.check_keys(key, table, &["audience", "scope"], &[])?;
        let audience = opt_string(self, &format!("{key}.audience"), table.get("audience"))?
            .filter(|a| !a.is_empty())
            .ok_or_else(|| {
                self.invalid(
                    &format!("{key}.audience"),
                    "is missing".to_string(),
                    "name the backend as its issuer knows it, e.g. audience = \"https://notes.internal/mcp\"",
                )
            })?;
        Ok(UserSecret::TokenExchange {
            audience,
            scope: opt_string(self, &format!("{key}.scope"), table.get("scope"))?,
        })
    }
}
