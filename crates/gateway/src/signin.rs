//! Users signing in to backends (a per-user backend with `oauth`): sandgate as an OAuth 2.1
//! client of each such backend's authorization server (`sandgate_identity::UpstreamOAuth`).
//!
//! A sign-in starts from the console (`/ui/connect/start`, by the logged-in user, for
//! themselves) and comes back to `/ui/connect/callback` on any replica: what it needs on the way
//! (state, PKCE verifier, backend) rides in the browser's cookie, and the client sandgate is at
//! the server (configured, or registered once and kept sealed in the store) is the same on
//! every replica. The tokens are sealed as the user's credential for the backend, refresh
//! token included; a call takes the access token, refreshed first when it is about to expire.
//! A refresh the server refuses forgets the tokens, so the user is asked to sign in again.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;

use sandgate_config::Secret;
use sandgate_identity::{PendingLogin, UpstreamClient, UpstreamOAuth, UpstreamTokens};

/// The owner under which the clients sandgate registered are kept (no principal's key has
/// this form).
const CLIENTS_OWNER: &str = "sandgate:oauth-client";
/// How many locks the refreshes are spread over (by user and backend).
const REFRESH_LOCKS: usize = 64;

/// Where users' tokens and the registered clients are kept, sealed (`Credentials`).
pub trait Keeper: Sync {
    /// What `owner` keeps for `backend`, opened (perhaps as read a few seconds ago).
    fn read<'a>(
        &'a self,
        owner: &'a str,
        backend: &'a str,
    ) -> BoxFuture<'a, Result<Option<Secret>, String>>;
    /// The same, read from the store now.
    fn read_now<'a>(
        &'a self,
        owner: &'a str,
        backend: &'a str,
    ) -> BoxFuture<'a, Result<Option<Secret>, String>>;
    /// Keeps `text` as what `owner` keeps for `backend`.
    fn write<'a>(
        &'a self,
        owner: &'a str,
        backend: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), String>>;
    /// Forgets what `owner` keeps for `backend`.
    fn forget<'a>(
        &'a self,
        owner: &'a str,
        backend: &'a str,
    ) -> BoxFuture<'a, Result<bool, String>>;
}

/// Why a user's token for a backend is not at hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoToken {
    /// The user has not signed in (or their sign-in lapsed): they must now.
    SignIn,
    /// Something else failed: why.
    Failed(String),
}

/// The backends users sign in to, by name.
pub struct SignIns {
    backends: HashMap<String, Arc<UpstreamOAuth>>,
    /// The clients configured (`oauth.client_id`), by backend.
    configured: HashMap<String, UpstreamClient>,
    /// One registration at a time per gateway: two calls that both find no client register
    /// one, not two.
    registering: tokio::sync::Mutex<()>,
    /// One refresh at a time per user and backend: a server that rotates refresh tokens
    /// takes each one once, and may revoke the whole grant when one comes back.
    refreshing: [tokio::sync::Mutex<()>; REFRESH_LOCKS],
}

impl Default for SignIns {
    fn default() -> Self {
        SignIns {
            backends: HashMap::new(),
            configured: HashMap::new(),
            registering: tokio::sync::Mutex::new(()),
            refreshing: std::array::from_fn(|_| tokio::sync::Mutex::new(())),
        }
    }
}

impl SignIns {
    /// Sign-ins to `backends`, each with its configured client when it has one.
    pub fn new(backends: Vec<(UpstreamOAuth, Option<UpstreamClient>)>) -> SignIns {
        let mut signins = SignIns::default();
        for (oauth, client) in backends {
            let name = oauth.settings().backend.clone();
            if let Some(client) = client {
                signins.configured.insert(name.clone(), client);
            }
            signins.backends.insert(name, Arc::new(oauth));
        }
        signins
    }

    /// Whether users sign in to `backend`.
    pub fn has(&self, backend: &str) -> bool {
        self.backends.contains_key(backend)
    }

    /// Where a user starts signing in to `backend`: the console's Connect, on the origin the
    /// sign-in comes back to.
    pub fn connect_url(&self, backend: &str, scope: Option<&str>) -> Option<String> {
        let callback = &self.backends.get(backend)?.settings().redirect_uri;
        let origin = callback.strip_suffix("/ui/connect/callback")?;
        let encoded = |text: &str| -> String {
            text.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                        char::from(b).to_string()
                    }
                    other => format!("%{other:02X}"),
                })
                .collect()
        };
        let mut url = format!("{origin}/ui/connect/start?backend={}", encoded(backend));
        if let Some(scope) = scope {
            url.push_str(&format!("&scope={}", encoded(scope)));
        }
        Some(url)
    }

    fn oauth(&self, backend: &str) -> Result<&Arc<UpstreamOAuth>, String> {
        self.backends
            .get(backend)
            .ok_or_else(|| format!("backend `{backend}` takes no sign-in (it has no oauth)"))
    }

    /// sandgate's client at `backend`'s server: configured, kept, or registered now and kept.
    async fn client(&self, keeper: &dyn Keeper, backend: &str) -> Result<UpstreamClient, String> {
        if let Some(client) = self.configured.get(backend) {
            return Ok(client.clone());
        }
        let kept = |text: Option<Secret>| {
            text.and_then(|t| serde_json::from_str::<UpstreamClient>(t.expose()).ok())
        };
        if let Some(client) = kept(keeper.read(CLIENTS_OWNER, backend).await?) {
            return Ok(client);
        }
        let _one = self.registering.lock().await;
        if let Some(client) = kept(keeper.read(CLIENTS_OWNER, backend).await?) {
            return Ok(client);
        }
        let client = self
            .oauth(backend)?
            .register()
            .await
            .map_err(|e| e.to_string())?;
        let text = serde_json::to_string(&client).map_err(|e| e.to_string())?;
        keeper.write(CLIENTS_OWNER, backend, &text).await?;
        Ok(client)
    }

    /// Starts `owner`'s sign-in to `backend` (asking for `scope`, else the configured one):
    /// what the browser keeps, and where it goes.
    pub async fn start(
        &self,
        keeper: &dyn Keeper,
        backend: &str,
        scope: Option<&str>,
    ) -> Result<(PendingLogin, String), String> {
        let client = self.client(keeper, backend).await?;
        self.oauth(backend)?
            .start(&client, scope)
            .await
            .map_err(|e| e.to_string())
    }

    /// Ends `owner`'s sign-in to `backend` with the server's `code`: its tokens, sealed as
    /// the owner's credential for the backend.
    pub async fn finish(
        &self,
        keeper: &dyn Keeper,
        owner: &str,
        backend: &str,
        code: &str,
        pending: &PendingLogin,
    ) -> Result<(), String> {
        let client = self.client(keeper, backend).await?;
        let tokens = self
            .oauth(backend)?
            .redeem(&client, code, pending)
            .await
            .map_err(|e| e.to_string())?;
        keep(keeper, owner, backend, &tokens).await
    }

    /// `owner`'s access token for `backend`, refreshed first when it is about to expire.
    pub async fn token(
        &self,
        keeper: &dyn Keeper,
        owner: &str,
        backend: &str,
    ) -> Result<Secret, NoToken> {
        let tokens = read_tokens(keeper, owner, backend, false).await?;
        if !tokens.due(sandgate_store::now_ms()) {
            // Masked wherever the backend quotes it back, on whichever replica reads it.
            sandgate_redact::remember(&tokens.access_token);
            return Ok(Secret::new(tokens.access_token));
        }
        let _one = self.refreshing[lock_of(owner, backend)].lock().await;
        // Another call may have refreshed them while this one waited (or another replica:
        // the store is read again).
        let tokens = read_tokens(keeper, owner, backend, true).await?;
        if !tokens.due(sandgate_store::now_ms()) {
            return Ok(Secret::new(tokens.access_token));
        }
        let Some(refresh) = tokens.refresh_token.as_deref() else {
            return Err(NoToken::SignIn);
        };
        let client = self
            .client(keeper, backend)
            .await
            .map_err(NoToken::Failed)?;
        let oauth = self.oauth(backend).map_err(NoToken::Failed)?;
        match oauth.refresh(&client, refresh).await {
            Ok(fresh) => {
                keep(keeper, owner, backend, &fresh)
                    .await
                    .map_err(NoToken::Failed)?;
                Ok(Secret::new(fresh.access_token))
            }
            Err(e) => {
                tracing::info!(
                    backend,
                    "a refresh was refused, so the user signs in again: {e}"
                );
                let _ = keeper.forget(owner, backend).await;
                Err(NoToken::SignIn)
            }
        }
    }
}

/// `owner`'s tokens for `backend`, as kept.
async fn read_tokens(
    keeper: &dyn Keeper,
    owner: &str,
    backend: &str,
    now: bool,
) -> Result<UpstreamTokens, NoToken> {
    let read = if now {
        keeper.read_now(owner, backend).await
    } else {
        keeper.read(owner, backend).await
    };
    let Some(text) = read.map_err(NoToken::Failed)? else {
        return Err(NoToken::SignIn);
    };
    serde_json::from_str::<UpstreamTokens>(text.expose()).map_err(|_| NoToken::SignIn)
}

/// Which of the refresh locks `owner`'s tokens for `backend` take.
fn lock_of(owner: &str, backend: &str) -> usize {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (owner, backend).hash(&mut hasher);
    (hasher.finish() % REFRESH_LOCKS as u64) as usize
}

/// Seals `tokens` as `owner`'s credential for `backend`.
async fn keep(
    keeper: &dyn Keeper,
    owner: &str,
    backend: &str,
    tokens: &UpstreamTokens,
) -> Result<(), String> {
    let text = serde_json::to_string(tokens).map_err(|e| e.to_string())?;
    keeper.write(owner, backend, &text).await
}
