//! Who may use the gateway, from the config: the HTTP front's tokens (generating one when none
//! is configured) and the audit log.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use sandgate_config::{Config, HttpAuth};
use sandgate_gateway::{AuditLog, HttpAuthOptions, KnownToken};

/// The HTTP front's auth for a listener on `addr`.
///
/// - `auth = "none"` is allowed only on loopback.
/// - Configured tokens are used as they are.
/// - With none configured, a listener beyond loopback is an error; on loopback, sandgate uses
///   the token in its state directory, generating it (0600) and printing it once if absent.
pub fn http_auth(config: &Config, addr: SocketAddr) -> anyhow::Result<(HttpAuthOptions, Notice)> {
    let loopback = addr.ip().is_loopback();
    if config.http.auth == HttpAuth::None {
        anyhow::ensure!(
            loopback,
            "[http] auth = \"none\" is refused for {addr}, which is not loopback: anyone who reaches the port would drive every backend. Configure [[http.tokens]], or listen on 127.0.0.1."
        );
        tracing::warn!(%addr, "HTTP auth is off ([http] auth = \"none\"): any local process can use the gateway");
        return Ok((HttpAuthOptions::default(), Notice::None));
    }
    let oauth = oauth_verifier(config)?;
    let console_login = console_login(config)?;
    let mut tokens: Vec<KnownToken> = config
        .http
        .tokens
        .iter()
        .map(|token| KnownToken {
            digest: token.digest(),
            profile: token.profile.clone(),
            id: token.id(),
        })
        .collect();
    if tokens.is_empty() && oauth.is_some() {
        // Access tokens are the way in; no static token is generated.
        return Ok((
            HttpAuthOptions {
                required: true,
                tokens,
                oauth,
                console_login,
            },
            Notice::None,
        ));
    }
    if tokens.is_empty() {
        anyhow::ensure!(
            loopback,
            "HTTP on {addr} reaches beyond this machine, and no token is configured. Add [[http.tokens]] with token = \"${{SANDGATE_TOKEN}}\" (docs/config.md), or listen on 127.0.0.1."
        );
        let path = token_file(config).context(
            "no [[http.tokens]] and no HOME or XDG_STATE_HOME to keep a generated token in; configure [[http.tokens]]",
        )?;
        let (token, notice) = load_or_generate(&path)?;
        tokens.push(KnownToken::from_secret(&token, "default", "generated"));
        return Ok((
            HttpAuthOptions {
                required: true,
                tokens,
                oauth,
                console_login,
            },
            notice,
        ));
    }
    Ok((
        HttpAuthOptions {
            required: true,
            tokens,
            oauth,
            console_login,
        },
        Notice::None,
    ))
}

/// Remembers every credential `config` holds (plain tokens, backends' headers, env values that
/// read as secrets, issuer client secrets, the credentials key, the store URL), so the one
/// redaction step masks it wherever another party quotes it: in logs, the audit log, records
/// and what the model reads. A reload adds the new ones; the old stay masked.
pub fn remember_secrets(config: &Config) {
    for token in &config.http.tokens {
        if let sandgate_config::TokenSecret::Plain(text) = &token.secret {
            sandgate_redact::remember(text.expose());
        }
    }
    for backend in &config.backends {
        if let sandgate_config::Transport::Http { headers, .. } = &backend.transport {
            for value in headers.values() {
                remember_header(value.expose());
            }
        }
        for (name, value) in &backend.env {
            if names_a_secret(name) || reads_as_credential(value.expose()) {
                sandgate_redact::remember(value.expose());
            }
        }
    }
    if let Some(oauth) = &config.auth.oauth {
        for issuer in &oauth.issuers {
            for client in [&issuer.introspection, &issuer.token_exchange]
                .into_iter()
                .flatten()
            {
                sandgate_redact::remember(client.client_secret.expose());
            }
        }
        if let Some(secret) = oauth
            .console
            .as_ref()
            .and_then(|c| c.client_secret.as_ref())
        {
            sandgate_redact::remember(secret.expose());
        }
    }
    for secret in [&config.credentials.key, &config.store.url]
        .into_iter()
        .flatten()
    {
        sandgate_redact::remember(secret.expose());
    }
}

/// A header value, and the credential after its scheme (`Bearer abc…` is quoted as `abc…` too).
fn remember_header(value: &str) {
    sandgate_redact::remember(value);
    if let Some((_, credential)) = value.split_once(' ') {
        sandgate_redact::remember(credential);
    }
}

/// Whether a variable's name says it holds a secret (`GITHUB_TOKEN`, `OPENAI_API_KEY`,
/// `DB_PASSWORD`).
fn names_a_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    sandgate_catalog::names_a_secret(&name) || name.ends_with("key") || name.ends_with("_pat")
}

/// Whether a value reads as a credential whatever its variable is called: one long word of
/// letters and digits (not a path, a URL or prose, which masked would only blind the logs).
fn reads_as_credential(value: &str) -> bool {
    value.len() >= 16
        && !value.contains(['/', ' ', ':'])
        && value.bytes().any(|b| b.is_ascii_digit())
        && value.bytes().any(|b| b.is_ascii_alphabetic())
}

/// How sandgate authenticates at an issuer, in the identity crate's words.
fn issuer_client(how: &sandgate_config::OAuthClient) -> sandgate_identity::IssuerClient {
    sandgate_identity::IssuerClient {
        endpoint: how.endpoint.clone(),
        client_id: how.client_id.clone(),
        client_secret: how.client_secret.expose().to_string(),
    }
}

/// The access-token check of `[auth.oauth]`, if configured.
fn oauth_verifier(
    config: &Config,
) -> anyhow::Result<Option<std::sync::Arc<sandgate_identity::Verifier>>> {
    let Some(settings) = oauth_settings(config)? else {
        return Ok(None);
    };
    Ok(Some(std::sync::Arc::new(sandgate_identity::Verifier::new(
        settings,
    )?)))
}

/// The console's login through an issuer (`[auth.oauth.console]`), if configured: the
/// issuer sends the browser back to the origin of `resource`, at `/ui/oauth/callback`.
fn console_login(
    config: &Config,
) -> anyhow::Result<Option<std::sync::Arc<sandgate_identity::ConsoleLogin>>> {
    let (Some(settings), Some(console)) = (
        oauth_settings(config)?,
        config.auth.oauth.as_ref().and_then(|o| o.console.as_ref()),
    ) else {
        return Ok(None);
    };
    let issuer = settings
        .issuers
        .iter()
        .find(|i| i.issuer == console.issuer)
        .cloned()
        .context("[auth.oauth.console] names an issuer [[auth.oauth.issuers]] does not have")?;
    let origin = origin_of(&settings.resource);
    Ok(Some(std::sync::Arc::new(
        sandgate_identity::ConsoleLogin::new(sandgate_identity::LoginSettings {
            issuer,
            client_id: console.client_id.clone(),
            client_secret: console
                .client_secret
                .as_ref()
                .map(|s| s.expose().to_string()),
            scope: console.scope.clone(),
            resource: settings.resource.clone(),
            redirect_uri: format!("{origin}/ui/oauth/callback"),
        })?,
    )))
}

/// The backends each user signs in to (`oauth`), with where the sign-in comes back: the
/// backend's `redirect_uri`, else `[auth.oauth] resource`'s origin and `/ui/connect/callback`.
pub fn sign_ins(config: &Config) -> anyhow::Result<sandgate_gateway::signin::SignIns> {
    let mut backends = Vec::new();
    for backend in &config.backends {
        let (Some(per_user), sandgate_config::Transport::Http { url, .. }) =
            (&backend.per_user, &backend.transport)
        else {
            continue;
        };
        let sandgate_config::UserSecret::OAuth(oauth) = &per_user.secret else {
            continue;
        };
        let redirect_uri = match (&oauth.redirect_uri, &config.auth.oauth) {
            (Some(uri), _) => uri.clone(),
            (None, Some(auth)) => format!("{}/ui/connect/callback", origin_of(&auth.resource)),
            (None, None) => anyhow::bail!(
                "servers.{}.oauth needs redirect_uri (the config check says so)",
                backend.name
            ),
        };
        let client = oauth
            .client_id
            .as_ref()
            .map(|id| sandgate_identity::UpstreamClient {
                client_id: id.clone(),
                client_secret: oauth.client_secret.as_ref().map(|s| s.expose().to_string()),
            });
        let upstream =
            sandgate_identity::UpstreamOAuth::new(sandgate_identity::UpstreamSettings {
                backend: backend.name.clone(),
                resource: url.clone(),
                scope: oauth.scope.clone(),
                client: client.clone(),
                redirect_uri,
            })?;
        backends.push((upstream, client));
    }
    Ok(sandgate_gateway::signin::SignIns::new(backends))
}

/// The scheme and authority of `url`.
fn origin_of(url: &str) -> &str {
    match url.find("://") {
        Some(at) => {
            let rest = &url[at + 3..];
            let end = rest.find('/').map_or(url.len(), |i| at + 3 + i);
            &url[..end]
        }
        None => url,
    }
}

/// What exchanges callers' tokens for per-user backends', when an issuer of `[auth.oauth]`
/// allows it.
pub fn token_exchanger(
    config: &Config,
) -> anyhow::Result<Option<std::sync::Arc<sandgate_identity::Exchanger>>> {
    let Some(settings) = oauth_settings(config)? else {
        return Ok(None);
    };
    Ok(sandgate_identity::Exchanger::new(&settings.issuers)?.map(std::sync::Arc::new))
}

/// `[auth.oauth]` in the identity crate's words, if configured.
fn oauth_settings(config: &Config) -> anyhow::Result<Option<sandgate_identity::OAuthSettings>> {
    let Some(oauth) = &config.auth.oauth else {
        return Ok(None);
    };
    let issuers = oauth
        .issuers
        .iter()
        .map(|issuer| {
            let algorithms = if issuer.algorithms.is_empty() {
                sandgate_identity::DEFAULT_ALGORITHMS.to_vec()
            } else {
                issuer
                    .algorithms
                    .iter()
                    .map(|name| sandgate_identity::parse_algorithm(name))
                    .collect::<Result<_, _>>()?
            };
            Ok(sandgate_identity::IssuerSettings {
                issuer: issuer.issuer.clone(),
                audience: issuer.audience.clone(),
                algorithms,
                jwks_uri: issuer.jwks_uri.clone(),
                introspection: issuer.introspection.as_ref().map(issuer_client),
                token_exchange: issuer.token_exchange.as_ref().map(issuer_client),
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let settings = sandgate_identity::OAuthSettings {
        resource: oauth.resource.clone(),
        issuers,
        rules: oauth
            .rules
            .iter()
            .map(|rule| sandgate_identity::ClaimRule {
                claim: rule.claim.clone(),
                value: rule.value.clone(),
                profile: rule.profile.clone(),
            })
            .collect(),
        leeway: oauth.leeway,
    };
    Ok(Some(settings))
}

/// What to tell the user about the generated token once the listener is bound.
#[derive(Debug, Clone)]
pub enum Notice {
    /// Nothing: tokens are configured, or auth is off.
    None,
    /// Where the token generated earlier is.
    Stored(PathBuf),
    /// The token just generated, printed this once.
    Generated { token: String, path: PathBuf },
}

impl Notice {
    /// Prints the notice to stderr for a listener bound at `addr`.
    pub fn print(&self, addr: SocketAddr) {
        match self {
            Notice::None => {}
            Notice::Stored(path) => eprintln!(
                "sandgate: HTTP clients need the bearer token in {} (generated at the first start)",
                path.display()
            ),
            Notice::Generated { token, path } => eprintln!(
                "sandgate: HTTP clients need a bearer token. This one was generated and stored in {} (mode 0600); it is shown only now:\n\n    {token}\n\nPut it in your client's config, e.g. .mcp.json:\n\n    {{\"mcpServers\": {{\"sandgate\": {{\"type\": \"http\", \"url\": \"http://{addr}/mcp\", \"headers\": {{\"Authorization\": \"Bearer {token}\"}}}}}}}}\n",
                path.display()
            ),
        }
    }
}

/// The audit log `[audit]` asks for (or none).
pub fn audit_log(config: &Config) -> anyhow::Result<AuditLog> {
    match &config.audit.path {
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            Ok(AuditLog::open(path, config.audit.arguments)?)
        }
        None => Ok(AuditLog::disabled()),
    }
}

/// Where the generated token lives: one per config file, beside the store.
fn token_file(config: &Config) -> Option<PathBuf> {
    crate::setup::per_config_file(
        config,
        "XDG_STATE_HOME",
        ".local/state",
        "http-token",
        "txt",
    )
}

fn load_or_generate(path: &Path) -> anyhow::Result<(String, Notice)> {
    if let Ok(text) = std::fs::read_to_string(path) {
        let token = text.trim().to_string();
        if token.len() >= sandgate_config::MIN_TOKEN_CHARS {
            return Ok((token, Notice::Stored(path.to_path_buf())));
        }
    }
    let mut bytes = [0u8; 32];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").context("cannot read /dev/urandom")?,
        &mut bytes,
    )
    .context("cannot read /dev/urandom")?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    writeln!(file, "{token}").with_context(|| format!("cannot write {}", path.display()))?;
    let notice = Notice::Generated {
        token: token.clone(),
        path: path.to_path_buf(),
    };
    Ok((token, notice))
}
