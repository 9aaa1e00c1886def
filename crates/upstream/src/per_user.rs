//! Backends that serve each user over a connection of its own (`per_user`): a process per user
//! for stdio, an MCP session per user for HTTP, each carrying only that user's secret.
//!
//! The shared connection of such a backend still runs: it lists the tools (with the config's
//! own credentials, if any) that the catalog shows. Calls go to the caller's own connection,
//! started on its first call from the backend's config with the user's secret put where the
//! config says (a header, or a variable of the process's environment). A connection is keyed
//! by the backend and the user's id; a user whose secret changed (set again, or an exchanged
//! token renewed) gets a new one, and a backend the config changed starts its users' afresh.
//!
//! The connections are bounded: at most `max_users` per backend (a new user closes the least
//! recently used idle one, or is told the backend is full), closed after `user_idle_timeout`
//! without a call, and counted for `/metrics`. They run under the manager's shutdown, so they
//! end with it. Their tool lists and states are their own: nothing of one user's connection
//! reaches the catalog, the tool cache, or another user.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, JsonObject};
use sandgate_config::{BackendConfig, PerUser, Secret, Transport, UserSecret};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::backend::{Backend, Conn};
use crate::context::{CallContext, UserConnection};
use crate::error::UpstreamError;
use crate::shared::{Shared, Supervised};

/// One user's connection to one backend.
struct Instance {
    /// The configured backend it was made from: another one (a reload) means start afresh.
    base: Arc<Backend>,
    backend: Arc<Backend>,
    supervised: Supervised,
    /// The digest of the secret it carries: another secret means start afresh.
    secret_digest: [u8; 32],
    last_used: Instant,
    in_flight: Arc<AtomicUsize>,
}

impl Instance {
    fn stop(self) {
        self.supervised.stop.cancel();
    }
}

/// Every user's connection to every per-user backend.
pub(crate) struct UserConnections {
    instances: Mutex<HashMap<(String, String), Instance>>,
    /// What the connections' supervisors report into (nowhere that reaches the catalog).
    silent: Arc<Shared>,
    /// The manager's shutdown: the connections end with it.
    shutdown: CancellationToken,
}

impl std::fmt::Debug for UserConnections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserConnections")
            .field("open", &self.lock().len())
            .finish()
    }
}

/// Counts a call in flight on a user's connection while it lives.
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl UserConnections {
    /// No connections yet; those made will report into `silent` and end with `shutdown`.
    pub(crate) fn new(silent: Arc<Shared>, shutdown: CancellationToken) -> UserConnections {
        UserConnections {
            instances: Mutex::default(),
            silent,
            shutdown,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Instance>> {
        self.instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Calls `tool` of per-user backend `base` on `user`'s own connection, starting it first
    /// if need be.
    pub(crate) async fn call(
        &self,
        base: &Arc<Backend>,
        per_user: &PerUser,
        user: &UserConnection,
        tool: &str,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> Result<CallToolResult, UpstreamError> {
        let (backend, _in_flight) = self.connection(base, per_user, user)?;
        // A user's connection that cannot be made fails the call at once, with the reason:
        // usually the credential, which only the user can mend.
        let within = context
            .limit
            .map_or(backend.config.timeout, |l| l.min(backend.config.timeout));
        let mut state = backend.conn.subscribe();
        if let Ok(Ok(conn)) =
            tokio::time::timeout(within, state.wait_for(|c| !matches!(c, Conn::Starting))).await
            && let Conn::Restarting { reason, .. } | Conn::Failed { reason } = &*conn
        {
            // A backend users sign in to refused the user's token itself (401, or a wider
            // scope wanted): they sign in again. Any other credential is the user's to mend.
            let refused = matches!(per_user.secret, UserSecret::OAuth(_))
                .then(|| {
                    backend
                        .refused_authorization
                        .lock()
                        .ok()
                        .and_then(|held| held.clone())
                })
                .flatten();
            if let Some(wider) = refused {
                return Err(UpstreamError::Unauthorized {
                    backend: base.config.name.clone(),
                    tool: tool.to_string(),
                    wider,
                });
            }
            return Err(UpstreamError::UserConnectionRefused {
                backend: base.config.name.clone(),
                reason: reason.clone(),
            });
        }
        backend.call(tool, arguments, context).await
    }

    /// `user`'s connection to `base`, made or made again as needed, with the call counted in
    /// flight on it.
    fn connection(
        &self,
        base: &Arc<Backend>,
        per_user: &PerUser,
        user: &UserConnection,
    ) -> Result<(Arc<Backend>, InFlight), UpstreamError> {
        let name = &base.config.name;
        let digest = secret_digest(user.secret.as_ref());
        let key = (name.clone(), user.owner.clone());
        let mut instances = self.lock();
        if let Some(instance) = instances.get_mut(&key) {
            if Arc::ptr_eq(&instance.base, base) && instance.secret_digest == digest {
                instance.last_used = Instant::now();
                instance.in_flight.fetch_add(1, Ordering::AcqRel);
                return Ok((
                    instance.backend.clone(),
                    InFlight(instance.in_flight.clone()),
                ));
            }
            if let Some(stale) = instances.remove(&key) {
                stale.stop();
            }
        }
        let open = instances.keys().filter(|(b, _)| b == name).count();
        if open >= per_user.max_users {
            let idlest = instances
                .iter()
                .filter(|((b, _), i)| b == name && i.in_flight.load(Ordering::Acquire) == 0)
                .min_by_key(|(_, i)| i.last_used)
                .map(|(key, _)| key.clone());
            match idlest.and_then(|key| instances.remove(&key)) {
                Some(evicted) => evicted.stop(),
                None => {
                    return Err(UpstreamError::Unavailable {
                        backend: name.clone(),
                        reason: format!(
                            "it serves each user on a connection of their own, and all {} (max_users) are busy with calls; retry shortly, or raise max_users",
                            per_user.max_users
                        ),
                        retrying: true,
                    });
                }
            }
        }
        let config = for_user(&base.config, per_user, user.secret.as_ref());
        let backend = Arc::new(Backend::new(config));
        let supervised = Supervised::start(&backend, &self.silent, &self.shutdown);
        let in_flight = Arc::new(AtomicUsize::new(1));
        tracing::info!(backend = %name, user = %user.owner, "starting a user's own connection");
        instances.insert(
            key,
            Instance {
                base: base.clone(),
                backend: backend.clone(),
                supervised,
                secret_digest: digest,
                last_used: Instant::now(),
                in_flight: in_flight.clone(),
            },
        );
        Ok((backend, InFlight(in_flight)))
    }

    /// Closes the connections idle longer than their backend allows, and those of backends
    /// no longer per-user (or no longer configured, as `still` says).
    pub(crate) fn close_idle(&self, still: &dyn Fn(&str) -> Option<Duration>) {
        let now = Instant::now();
        let mut instances = self.lock();
        let done: Vec<(String, String)> = instances
            .iter()
            .filter(|((backend, _), instance)| match still(backend) {
                None => true,
                Some(idle) => {
                    instance.in_flight.load(Ordering::Acquire) == 0
                        && now.duration_since(instance.last_used) >= idle
                }
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in done {
            if let Some(instance) = instances.remove(&key) {
                tracing::info!(backend = %key.0, user = %key.1, "closing a user's idle connection");
                instance.stop();
            }
        }
    }

    /// How many users' connections each backend has open, by backend name.
    pub(crate) fn counts(&self) -> Vec<(String, usize)> {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for (backend, _) in self.lock().keys() {
            *counts.entry(backend.clone()).or_default() += 1;
        }
        let mut counts: Vec<_> = counts.into_iter().collect();
        counts.sort();
        counts
    }

    /// Stops every user's connection; their supervisors' tasks, to wait for.
    pub(crate) fn stop_all(&self) -> Vec<tokio::task::JoinHandle<()>> {
        self.lock()
            .drain()
            .map(|(_, instance)| {
                instance.supervised.stop.cancel();
                instance.supervised.task
            })
            .collect()
    }
}

/// The backend's config for one user: its secret where the config says it goes.
fn for_user(base: &BackendConfig, per_user: &PerUser, secret: Option<&Secret>) -> BackendConfig {
    let mut config = base.clone();
    let Some(secret) = secret else {
        return config;
    };
    let header = match (&per_user.secret, &mut config.transport) {
        (UserSecret::Env { name }, Transport::Stdio { .. }) => {
            config.env.insert(name.clone(), secret.clone());
            return config;
        }
        (UserSecret::Header { name, format }, Transport::Http { .. }) => {
            (name.as_str(), format.replace("{secret}", secret.expose()))
        }
        (UserSecret::TokenExchange { .. } | UserSecret::OAuth(_), Transport::Http { .. }) => {
            ("Authorization", format!("Bearer {}", secret.expose()))
        }
        _ => return config,
    };
    if let Transport::Http { headers, .. } = &mut config.transport {
        // The user's value replaces the config's own, whatever case the config wrote it in.
        headers.retain(|configured, _| !configured.eq_ignore_ascii_case(header.0));
        headers.insert(header.0.to_string(), Secret::new(header.1));
    }
    config
}

fn secret_digest(secret: Option<&Secret>) -> [u8; 32] {
    match secret {
        Some(secret) => Sha256::digest(secret.expose().as_bytes()).into(),
        None => [0; 32],
    }
}
