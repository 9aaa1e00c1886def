//! `[auth.oauth]`: the identity providers whose access tokens the HTTP front accepts, beside
//! the static tokens of `[[http.tokens]]`, and the rules that give their users a profile.

use std::time::Duration;

use serde_json::Value;

use crate::error::ConfigError;
use crate::secret::Secret;
use crate::walker::{Walker, duration, opt_string, string_list};

/// Signing algorithms an issuer may be limited to. Shared-secret ones (`HS*`) and `none` are
/// not among them: with them, whoever holds the issuer's public key could sign.
pub const ACCEPTED_ALGORITHMS: &[&str] = &[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// `[auth]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AuthConfig {
    /// `[auth.oauth]`, when access tokens are accepted.
    pub oauth: Option<OAuthConfig>,
}

/// `[auth.oauth]`.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthConfig {
    /// This gateway's resource identifier: its MCP endpoint's URL as clients reach it.
    pub resource: String,
    /// The trusted issuers.
    pub issuers: Vec<OAuthIssuer>,
    /// Claims to profiles, first match wins; none matching is a refusal.
    pub rules: Vec<OAuthRule>,
    /// How far `exp` and `nbf` may be off.
    pub leeway: Duration,
    /// How the web console logs in through an issuer, if it does.
    pub console: Option<OAuthConsole>,
}

/// `[auth.oauth.console]`: the console's login through an issuer (authorization code with
/// PKCE).
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthConsole {
    /// The issuer (one of `issuers`; default the first).
    pub issuer: String,
    /// The console's client id at the issuer.
    pub client_id: String,
    /// Its secret, for a confidential client (`"${VAR}"`); a public client has none.
    pub client_secret: Option<Secret>,
    /// The scope asked for (default `openid`).
    pub scope: String,
}

/// One `[[auth.oauth.issuers]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthIssuer {
    /// Exactly its tokens' `iss`.
    pub issuer: String,
    /// The audience its tokens must carry (default: `resource`).
    pub audience: String,
    /// Accepted algorithms (empty: all of [`ACCEPTED_ALGORITHMS`]).
    pub algorithms: Vec<String>,
    /// Where its keys are, instead of its metadata's `jwks_uri`.
    pub jwks_uri: Option<String>,
    /// How to ask it about opaque tokens (RFC 7662).
    pub introspection: Option<OAuthClient>,
    /// How to exchange a caller's token at it for one a backend accepts (RFC 8693).
    pub token_exchange: Option<OAuthClient>,
}

/// How sandgate authenticates at an issuer, and where (`introspection`, `token_exchange`).
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthClient {
    /// The endpoint, instead of the issuer's metadata's `introspection_endpoint`.
    pub endpoint: Option<String>,
    /// The client sandgate authenticates as.
    pub client_id: String,
    /// Its secret, usually `"${VAR}"`.
    pub client_secret: Secret,
}

/// One `[[auth.oauth.rules]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthRule {
    /// The claim, as a dotted path (`groups`, `realm_access.roles`, `scope`).
    pub claim: String,
    /// The value it must hold.
    pub value: String,
    /// The profile it gives.
    pub profile: String,
}

impl Walker<'_> {
    pub(crate) fn auth_section(&self, value: Option<&Value>) -> Result<AuthConfig, ConfigError> {
        let Some(value) = value else {
            return Ok(AuthConfig::default());
        };
        let table = self.table("auth", value)?;
        self.check_keys("auth", table, &["oauth"], &[])?;
        let Some(oauth) = table.get("oauth") else {
            return Ok(AuthConfig::default());
        };
        let oauth = self.table("auth.oauth", oauth)?;
        self.check_keys(
            "auth.oauth",
            oauth,
            &["resource", "issuers", "rules", "leeway", "console"],
            &[],
        )?;
        let resource = opt_string(self, "auth.oauth.resource", oauth.get("resource"))?
            .ok_or_else(|| {
                self.invalid(
                    "auth.oauth.resource",
                    "is missing".to_string(),
                    "set it to this gateway's MCP URL as clients reach it, like \"https://gw.example.com/mcp\"",
                )
            })?;
        let leeway = duration(self, "auth.oauth.leeway", oauth.get("leeway"))?
            .unwrap_or(Duration::from_secs(30));
        if leeway > Duration::from_secs(300) {
            return Err(self.invalid(
                "auth.oauth.leeway",
                format!("is {leeway:?}"),
                "keep it at most 5 minutes: it lets expired tokens in for that long",
            ));
        }
        let issuers = self.list("auth.oauth.issuers", oauth.get("issuers"), |key, table| {
            self.check_keys(
                key,
                table,
                &[
                    "issuer",
                    "audience",
                    "algorithms",
                    "jwks_uri",
                    "introspection",
                    "token_exchange",
                ],
                &[],
            )?;
            let issuer = opt_string(self, &format!("{key}.issuer"), table.get("issuer"))?
                .ok_or_else(|| {
                    self.invalid(
                        &format!("{key}.issuer"),
                        "is missing".to_string(),
                        "write the issuer exactly as its tokens' iss claim",
                    )
                })?;
            let algorithms =
                string_list(self, &format!("{key}.algorithms"), table.get("algorithms"))?;
            for name in &algorithms {
                if !ACCEPTED_ALGORITHMS.contains(&name.as_str()) {
                    return Err(self.invalid(
                        &format!("{key}.algorithms"),
                        format!("holds {name:?}"),
                        format!(
                            "use some of {} (shared-secret HS* and none are refused)",
                            ACCEPTED_ALGORITHMS.join(", ")
                        ),
                    ));
                }
            }
            Ok(OAuthIssuer {
                audience: opt_string(self, &format!("{key}.audience"), table.get("audience"))?
                    .unwrap_or_else(|| resource.clone()),
                algorithms,
                jwks_uri: opt_string(self, &format!("{key}.jwks_uri"), table.get("jwks_uri"))?,
                introspection: match table.get("introspection") {
                    None => None,
                    Some(value) => Some(self.issuer_client(
                        &format!("{key}.introspection"),
                        value,
                        "INTROSPECTION_SECRET",
                    )?),
                },
                token_exchange: match table.get("token_exchange") {
                    None => None,
                    Some(value) => Some(self.issuer_client(
                        &format!("{key}.token_exchange"),
                        value,
                        "EXCHANGE_SECRET",
                    )?),
                },
                issuer,
            })
        })?;
        if issuers.is_empty() {
            return Err(self.invalid(
                "auth.oauth.issuers",
                "is empty".to_string(),
                "add [[auth.oauth.issuers]] with issuer = \"https://your-idp/...\"",
            ));
        }
        let rules = self.list("auth.oauth.rules", oauth.get("rules"), |key, table| {
            self.check_keys(key, table, &["claim", "value", "profile"], &[])?;
            let field = |name: &str| -> Result<String, ConfigError> {
                opt_string(self, &format!("{key}.{name}"), table.get(name))?
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| {
                        self.invalid(
                            &format!("{key}.{name}"),
                            "is missing".to_string(),
                            "a rule is claim = \"groups\", value = \"eng\", profile = \"builder\"",
                        )
                    })
            };
            Ok(OAuthRule {
                claim: field("claim")?,
                value: field("value")?,
                profile: field("profile")?,
            })
        })?;
        let console = match oauth.get("console") {
            None => None,
            Some(value) => Some(self.console_login(value, &issuers)?),
        };
        Ok(AuthConfig {
            oauth: Some(OAuthConfig {
                resource,
                issuers,
                rules,
                leeway,
                console,
            }),
        })
    }

    fn console_login(
        &self,
        value: &Value,
        issuers: &[OAuthIssuer],
    ) -> Result<OAuthConsole, ConfigError> {
        let key = "auth.oauth.console";
        let table = self.table(key, value)?;
        self.check_keys(
            key,
            table,
            &["issuer", "client_id", "client_secret", "scope"],
            &[],
        )?;
        let issuer = match opt_string(self, &format!("{key}.issuer"), table.get("issuer"))? {
            Some(issuer) if issuers.iter().any(|i| i.issuer == issuer) => issuer,
            Some(issuer) => {
                return Err(self.invalid(
                    &format!("{key}.issuer"),
                    format!("is {issuer:?}, not one of [[auth.oauth.issuers]]"),
                    "name one of the issuers exactly, or leave it out for the first",
                ));
            }
            None => issuers
                .first()
                .map(|i| i.issuer.clone())
                .unwrap_or_default(),
        };
        let client_id = opt_string(self, &format!("{key}.client_id"), table.get("client_id"))?
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                self.invalid(
                    &format!("{key}.client_id"),
                    "is missing".to_string(),
                    "register the console at the issuer (redirect URI: the gateway's origin + /ui/oauth/callback) and give its client id",
                )
            })?;
        Ok(OAuthConsole {
            issuer,
            client_id,
            client_secret: opt_string(
                self,
                &format!("{key}.client_secret"),
                table.get("client_secret"),
            )?
            .map(Secret::from),
            scope: opt_string(self, &format!("{key}.scope"), table.get("scope"))?
                .unwrap_or_else(|| "openid".to_string()),
        })
    }

    fn issuer_client(
        &self,
        key: &str,
        value: &Value,
        secret_var: &str,
    ) -> Result<OAuthClient, ConfigError> {
        let table = self.table(key, value)?;
        self.check_keys(key, table, &["endpoint", "client_id", "client_secret"], &[])?;
        let field = |name: &str, fix: &str| -> Result<String, ConfigError> {
            opt_string(self, &format!("{key}.{name}"), table.get(name))?
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    self.invalid(&format!("{key}.{name}"), "is missing".to_string(), fix)
                })
        };
        Ok(OAuthClient {
            endpoint: opt_string(self, &format!("{key}.endpoint"), table.get("endpoint"))?,
            client_id: field(
                "client_id",
                "the client id sandgate has at the issuer, to ask about or exchange tokens",
            )?,
            client_secret: Secret::from(field(
                "client_secret",
                &format!("write client_secret = \"${{{secret_var}}}\" (from the environment)"),
            )?),
        })
    }

    /// An array of tables at `key`, each read by `read` with its own key (`key[i]`).
    fn list<T>(
        &self,
        key: &str,
        value: Option<&Value>,
        read: impl Fn(&str, &serde_json::Map<String, Value>) -> Result<T, ConfigError>,
    ) -> Result<Vec<T>, ConfigError> {
        let Some(value) = value else {
            return Ok(vec![]);
        };
        let items = value.as_array().ok_or_else(|| {
            self.invalid(
                key,
                "must be a list of tables".to_string(),
                format!("write each one as [[{key}]]"),
            )
        })?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let item_key = format!("{key}[{i}]");
                read(&item_key, self.table(&item_key, item)?)
            })
            .collect()
    }
}
