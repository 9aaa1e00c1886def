//! Following the config file while serving (`sandgate serve`).
//!
//! When the file changes on disk, or on SIGHUP, the backends are brought in line with it:
//! only those whose entries changed are added, removed or restarted, and clients hear
//! `list_changed` as the tool set moves (see `BackendManager::reload`). The profiles and the
//! HTTP tokens are replaced too: a token taken out is refused from the next request on, and
//! the console sessions it opened end. The file is polled once a second by content, so an
//! editor that writes a new file and renames it over the old one is seen like one that writes
//! in place. A file that does not load is reported, and the running config is kept. The other
//! sections are read when sandgate starts; a change to one of them is reported as needing a
//! restart.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sandgate_config::Config;
use sandgate_gateway::{Gateway, HttpTokens};
use sandgate_upstream::BackendManager;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::setup;

/// How often the file is looked at.
const POLL: Duration = Duration::from_secs(1);
/// How long a changed file must stay the same before it is loaded: a file caught while it is
/// being written (truncated, then filled) is not loaded half-written.
const SETTLE: Duration = Duration::from_millis(150);

/// Follows `config`'s file until `shutdown`, from `loaded`, its fingerprint when it was read
/// (so a change made while the gateway started is seen). Returns what SIGHUP pokes to reload
/// at once; `None` when the config did not come from a file.
pub fn follow(
    config: Config,
    loaded: Option<u64>,
    running: Running,
    http_addr: Option<SocketAddr>,
    shutdown: CancellationToken,
) -> Option<Arc<Notify>> {
    let path = config.source.clone()?;
    let now = Arc::new(Notify::new());
    let mut follower = Follower {
        seen: loaded,
        path,
        running: config,
        gateway: running.gateway,
        manager: running.manager,
        tokens: running.tokens,
        http_addr,
    };
    let poke = now.clone();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(POLL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => follower.on_tick().await,
                () = poke.notified() => {
                    tracing::info!("SIGHUP: reloading {}", follower.path.display());
                    follower.seen = fingerprint(&follower.path);
                    follower.reload().await;
                }
                () = shutdown.cancelled() => return,
            }
        }
    });
    Some(now)
}

struct Follower {
    path: PathBuf,
    /// The file's content as last looked at (`None`: it could not be read).
    seen: Option<u64>,
    /// The config the gateway runs.
    running: Config,
    gateway: Arc<Gateway>,
    /// The backends the gateway reads (a reload restarts the entries that changed).
    manager: Arc<BackendManager>,
    /// The HTTP front's tokens, when it serves HTTP.
    tokens: Option<HttpTokens>,
    /// The HTTP listener's address, when there is one (its tokens follow the config).
    http_addr: Option<SocketAddr>,
}

/// What a reload changes: the gateway, its backends and the HTTP front's tokens.
pub struct Running {
    /// The gateway.
    pub gateway: Arc<Gateway>,
    /// Its backends.
    pub manager: Arc<BackendManager>,
    /// The HTTP front's tokens, when it serves HTTP.
    pub tokens: Option<HttpTokens>,
}

impl Follower {
    async fn on_tick(&mut self) {
        let now = fingerprint(&self.path);
        if now == self.seen || now.is_none() {
            return;
        }
        tokio::time::sleep(SETTLE).await;
        if fingerprint(&self.path) != now {
            // Still being written: the next look takes it.
            return;
        }
        self.seen = now;
        tracing::info!("{} changed: reloading", self.path.display());
        self.reload().await;
    }

    async fn reload(&mut self) {
        let config = match setup::load_config(Some(&self.path)) {
            Ok(config) => config,
            Err(e) => {
                tracing::error!(
                    "the changed config did not load, so sandgate keeps running the one it has: {e:#}"
                );
                // Also where the user looks: the overview, the console, and their client.
                self.gateway
                    .config_did_not_load(Some(format!("{e:#}")))
                    .await;
                return;
            }
        };
        self.gateway.config_did_not_load(None).await;
        let restart_needed = sections_needing_restart(&self.running, &config);
        let oauth_changed = self.running.auth != config.auth;
        let tokens_changed = self.running.http.tokens != config.http.tokens
            || self.running.http.auth != config.http.auth
            || oauth_changed;
        if let (true, Some(addr), Some(tokens)) = (tokens_changed, self.http_addr, &self.tokens) {
            match crate::access::http_auth(&config, addr) {
                Ok((mut auth, _)) => {
                    // Unchanged issuers keep their fetched keys and the users they have seen
                    // (whose sessions live while their tokens do).
                    if !oauth_changed {
                        auth.oauth = tokens.current().oauth.clone();
                        auth.console_login = tokens.current().console_login.clone();
                    }
                    let count = auth.tokens.len();
                    tokens.replace(auth);
                    tracing::info!("config reloaded: HTTP tokens replaced ({count} known)");
                }
                Err(e) => {
                    tracing::error!(
                        "the changed HTTP tokens were not taken, so the running ones stay: {e:#}"
                    );
                    return;
                }
            }
        }
        if self.running.profiles != config.profiles {
            self.gateway
                .replace_profiles(config.access_profiles())
                .await;
            tracing::info!("config reloaded: profiles replaced");
        }
        if self.running.approvals != config.approvals {
            self.gateway.door().approvals().configure(config.approvals);
            tracing::info!("config reloaded: [approvals] taken");
        }
        let reloaded = self.manager.reload(&config).await;
        if let Some(wait) = config.startup_wait {
            self.gateway.set_startup_wait(wait);
        }
        if reloaded.changed_anything() {
            tracing::info!("config reloaded: backends {reloaded}");
        } else {
            tracing::info!("config reloaded: no backend changed");
        }
        if !restart_needed.is_empty() {
            tracing::warn!(
                "{} changed in {}; sandgate reads {} only when it starts, so restart it for the change to take effect",
                restart_needed.join(", "),
                self.path.display(),
                if restart_needed.len() == 1 {
                    "that section"
                } else {
                    "those sections"
                }
            );
        }
        self.running = config;
    }
}

/// The sections that differ and are read only at start: all but the backends, the profiles,
/// the tokens and `startup_wait`, which apply at once.
fn sections_needing_restart(running: &Config, loaded: &Config) -> Vec<&'static str> {
    let listener = |c: &Config| sandgate_config::HttpConfig {
        tokens: Vec::new(),
        auth: Default::default(),
        ..c.http.clone()
    };
    // Who signs in where is read once, when the gateway starts (`access::sign_ins`).
    let sign_ins = |c: &Config| -> Vec<(String, sandgate_config::UpstreamOAuthConfig)> {
        c.backends
            .iter()
            .filter_map(|b| match &b.per_user.as_ref()?.secret {
                sandgate_config::UserSecret::OAuth(oauth) => Some((b.name.clone(), oauth.clone())),
                _ => None,
            })
            .collect()
    };
    let checks: [(&'static str, bool); 8] = [
        (
            "[http] (other than tokens and auth)",
            listener(running) != listener(loaded),
        ),
        ("[sandbox]", running.sandbox != loaded.sandbox),
        ("[output]", running.output != loaded.output),
        ("[store]", running.store != loaded.store),
        ("[audit]", running.audit != loaded.audit),
        (
            "[stored_tools]",
            running.stored_tools != loaded.stored_tools,
        ),
        (
            "[gateway] cache_file",
            running.cache_file != loaded.cache_file,
        ),
        (
            "a backend's oauth (who signs in where)",
            sign_ins(running) != sign_ins(loaded),
        ),
    ];
    checks
        .into_iter()
        .filter_map(|(section, changed)| changed.then_some(section))
        .collect()
}

/// A hash of the file's bytes, or `None` when it cannot be read or is empty (in the middle of
/// being replaced or written, say: an empty config would stop every backend).
pub fn fingerprint(path: &std::path::Path) -> Option<u64> {
    let bytes = std::fs::read(path).ok().filter(|b| !b.is_empty())?;
    let mut hasher = DefaultHasher::new();
    bytes.hash(&mut hasher);
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::sections_needing_restart;

    fn config(scope: &str) -> sandgate_config::Config {
        let text = format!(
            "[servers.notes]\nurl = \"https://notes.example.com/mcp\"\noauth = {{ scope = \"{scope}\", redirect_uri = \"https://gw.example.com/ui/connect/callback\" }}\n\n[credentials]\nkey = \"${{SANDGATE_CREDENTIAL_KEY}}\"\n"
        );
        sandgate_config::parse_str(&text, sandgate_config::Format::Toml, "t")
            .unwrap_or_else(|e| panic!("the test config loads: {e}"))
    }

    #[test]
    fn a_changed_oauth_is_read_only_at_start_and_says_so() {
        assert!(sections_needing_restart(&config("notes:read"), &config("notes:read")).is_empty());
        let changed = sections_needing_restart(&config("notes:read"), &config("notes:write"));
        assert_eq!(changed, vec!["a backend's oauth (who signs in where)"]);
    }
}
