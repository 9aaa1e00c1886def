//! `sandgate credentials`: users' own secrets for per-user backends, kept sealed in the store.
//!
//! The operator sets one for a user at the machine; a user sets their own in the console. The
//! secret is read from standard input (never from the command line, where `ps` and the shell's
//! history would show it), sealed with the `[credentials]` key, and never printed back.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, bail};
use sandgate_gateway::credentials::{self, Credentials};

use super::ConfigArg;

/// Whose credential: exactly one of these.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub struct OwnerArgs {
    /// A user of an identity provider: its issuer and subject (`iss` and `sub`), as its tokens
    /// carry them.
    #[arg(long, num_args = 2, value_names = ["ISSUER", "SUBJECT"])]
    user: Option<Vec<String>>,
    /// A user by the id records and errors name it by (32 hex digits).
    #[arg(long)]
    user_id: Option<String>,
    /// A static token of `[[http.tokens]]`: its name, or for an unnamed one the `sha256:…` id
    /// `sandgate status` lists.
    #[arg(long)]
    token: Option<String>,
    /// The local user (stdio, or HTTP with auth off).
    #[arg(long)]
    local: bool,
}

impl OwnerArgs {
    /// The owner as the store keys it (see `sandgate_gateway::credentials::owner_of`).
    fn owner(&self) -> anyhow::Result<String> {
        if let Some(user) = &self.user {
            let [issuer, subject] = user.as_slice() else {
                bail!("--user takes the issuer and the subject");
            };
            return Ok(credentials::user_owner(&sandgate_identity::user_id(
                issuer, subject,
            )));
        }
        if let Some(id) = &self.user_id {
            if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                bail!("--user-id is the 32 hex digits an error or a record names a user by");
            }
            return Ok(credentials::user_owner(&id.to_ascii_lowercase()));
        }
        if let Some(token) = &self.token {
            return Ok(credentials::token_owner(token));
        }
        Ok(credentials::LOCAL_OWNER.to_string())
    }
}

impl OwnerArgs {
    /// A `--token` must name a token of `config` (by its name, or `sha256:…` when unnamed):
    /// a secret kept for an id no token goes by would serve no one, or, if a token of that
    /// name is added later, that one.
    fn check_token(&self, config: &sandgate_config::Config) -> anyhow::Result<()> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        let ids: Vec<String> = config.http.tokens.iter().map(|t| t.id()).collect();
        if !ids.contains(token) {
            bail!(
                "no [[http.tokens]] entry goes by `{token}`: a token goes by its `name`, or, unnamed, by the `sha256:…` id `sandgate status` lists (never by its position). This config's tokens: {}",
                if ids.is_empty() {
                    "none".to_string()
                } else {
                    ids.join(", ")
                }
            );
        }
        Ok(())
    }
}

/// The credentials commands.
#[derive(Debug, clap::Subcommand)]
pub enum CredentialsCommand {
    /// Keep a user's secret for BACKEND, read from standard input.
    Set {
        /// The backend (a per-user one, with `user_secret`).
        backend: String,
        #[command(flatten)]
        owner: OwnerArgs,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Remove a user's secret for BACKEND.
    Remove {
        /// The backend.
        backend: String,
        #[command(flatten)]
        owner: OwnerArgs,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// List the backends a user has a secret for (never the secrets).
    List {
        #[command(flatten)]
        owner: OwnerArgs,
        #[command(flatten)]
        config: ConfigArg,
    },
}

/// Runs a credentials command.
pub async fn run(command: CredentialsCommand) -> anyhow::Result<ExitCode> {
    match command {
        CredentialsCommand::Set {
            backend,
            owner,
            config,
        } => {
            let (credentials, config) = open(&config).await?;
            let takes = config
                .backend(&backend)
                .and_then(|b| b.per_user.as_ref())
                .is_some_and(|p| {
                    matches!(
                        p.secret,
                        sandgate_config::UserSecret::Header { .. }
                            | sandgate_config::UserSecret::Env { .. }
                    )
                });
            if !takes {
                bail!(
                    "backend `{backend}` takes no user's secret: give it user_secret = {{ header = ... }} (HTTP) or {{ env = ... }} (stdio) in the config"
                );
            }
            let mut secret = String::new();
            std::io::stdin()
                .take(sandgate_identity::MAX_SECRET_BYTES as u64 + 2)
                .read_to_string(&mut secret)
                .context("reading the secret from standard input")?;
            let secret = secret.strip_suffix('\n').unwrap_or(&secret);
            let secret = secret.strip_suffix('\r').unwrap_or(secret);
            if secret.is_empty() {
                bail!(
                    "no secret on standard input: printf %s \"$SECRET\" | sandgate credentials set {backend} ..."
                );
            }
            owner.check_token(&config)?;
            let owner = owner.owner()?;
            credentials
                .set(&owner, &backend, secret)
                .await
                .map_err(anyhow::Error::msg)?;
            println!("kept {owner}'s secret for {backend} (sealed)");
            Ok(ExitCode::SUCCESS)
        }
        CredentialsCommand::Remove {
            backend,
            owner,
            config,
        } => {
            let (credentials, _) = open(&config).await?;
            let owner = owner.owner()?;
            if credentials
                .remove(&owner, &backend)
                .await
                .map_err(anyhow::Error::msg)?
            {
                println!("removed {owner}'s secret for {backend}");
                Ok(ExitCode::SUCCESS)
            } else {
                println!("{owner} has no secret for {backend}");
                Ok(ExitCode::FAILURE)
            }
        }
        CredentialsCommand::List { owner, config } => {
            let (credentials, _) = open(&config).await?;
            let owner = owner.owner()?;
            for entry in credentials.list(&owner).await.map_err(anyhow::Error::msg)? {
                println!(
                    "{}\tset {}",
                    entry.backend,
                    super::executions::local_time(entry.updated_at_ms)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The config's credentials, on its store.
async fn open(config: &ConfigArg) -> anyhow::Result<(Credentials, sandgate_config::Config)> {
    let config = crate::setup::load_config(config.config.as_deref())?;
    let vault = crate::setup::vault(&config)?
        .context("the config has no [credentials] section: add one with key = \"${SANDGATE_CREDENTIAL_KEY}\" (docs/config.md)")?;
    let store = crate::setup::store_handle(&config).await?;
    Ok((Credentials::new(Some((vault, store)), None), config))
}
