//! Each user's own credential for a backend: whose it is, where it is kept, and what a call to
//! a per-user backend carries.
//!
//! A credential belongs to an owner: the user an identity provider proved (`user:<id>`), a
//! static token of the config (`token:<name>`), or the local user of stdio (`local`). Its
//! secret is sealed by the [`Vault`] before the store keeps it, and opened only on its way to
//! the backend, in the call's context; it never reaches a script, a result, a log or the
//! model. Opened secrets are kept in memory for a few seconds, so a script's many calls do not
//! each read the store; a secret set or removed through this gateway is seen at once, one set
//! elsewhere (the CLI, another replica) within [`FRESH_FOR`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sandgate_config::{PerUser, Secret, UserSecret};
use sandgate_identity::{Exchanger, Vault};
use sandgate_store::{CredentialEntry, StoreHandle};
use sandgate_upstream::UserConnection;

use futures::future::BoxFuture;

use crate::caller::{Caller, Principal};
use crate::signin::{Keeper, NoToken, SignIns};

/// How long an opened secret (or its absence) is used before the store is read again.
pub const FRESH_FOR: Duration = Duration::from_secs(5);
/// The most opened secrets kept in memory at once.
const MAX_REMEMBERED: usize = 10_000;

/// Why a call to a per-user backend cannot carry its user's credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// The user has none for this backend.
    #[error(
        "backend `{backend}` is reached with each user's own credential, and none is kept for {who}. Add yours in the console (/ui, Credentials), or have the operator run: printf %s \"$SECRET\" | sandgate credentials set {backend} {owner_args}"
    )]
    Missing {
        /// The backend.
        backend: String,
        /// The user, in words.
        who: String,
        /// The CLI's arguments that name this user.
        owner_args: String,
    },
    /// The credential could not be read or opened.
    #[error("your credential for backend `{backend}` cannot be used: {why}")]
    Unusable {
        /// The backend.
        backend: String,
        /// Why.
        why: String,
    },
    /// The backend takes a token exchanged for the caller's, and the caller has none.
    #[error(
        "backend `{backend}` is reached with a token your identity provider exchanges for yours, and this request carries no access token of an [auth.oauth] issuer (a static token or the local user has none to exchange); connect with an access token from your identity provider"
    )]
    NoGrant {
        /// The backend.
        backend: String,
    },
    /// The backend takes each user's own sign-in, and this user has none (or it lapsed).
    #[error(
        "backend `{backend}` is reached with your own sign-in to it, and you have not signed in (or your sign-in lapsed). Sign in: open the console (/ui, Credentials) and press Connect beside `{backend}`"
    )]
    SignIn {
        /// The backend.
        backend: String,
    },
    /// No credential can be kept here.
    #[error(
        "this gateway keeps no such credentials: [credentials] names no key (for stored secrets), or no [[auth.oauth.issuers]] has token_exchange (for exchanged tokens)"
    )]
    NotKept,
}

/// The owner of the local user's credentials (stdio, or HTTP with auth off).
pub const LOCAL_OWNER: &str = "local";

/// The owner of the credentials of the user an identity provider proved with id `user` (see
/// `sandgate_identity::user_id`).
pub fn user_owner(user: &str) -> String {
    Principal::User(user.to_string()).key()
}

/// The owner of the credentials of static token `name`.
pub fn token_owner(name: &str) -> String {
    Principal::Token(name.to_string()).key()
}

/// Who owns a credential, as the store keys it.
pub fn owner_of(caller: &Caller) -> String {
    caller.principal().key()
}

/// The CLI arguments that name `owner` (see [`owner_of`]).
pub fn owner_args(owner: &str) -> String {
    match owner.split_once(':') {
        Some(("user", id)) => format!("--user-id {id}"),
        Some(("token", name)) => format!("--token {name}"),
        _ => "--local".to_string(),
    }
}

/// Opened secrets (or their absence) by owner and backend, with when they were read.
type Opened = HashMap<(String, String), (Option<Secret>, Instant)>;

/// Users' credentials: secrets sealed in the store and opened for calls, and tokens the
/// callers' issuers exchange for backends'.
pub struct Credentials {
    /// Where stored secrets are sealed and kept, when `[credentials]` names a key.
    stored: Option<(Arc<Vault>, StoreHandle)>,
    /// What exchanges callers' tokens, when an issuer allows it.
    exchanger: Option<Arc<Exchanger>>,
    /// The backends users sign in to (`crate::signin`), when any.
    signins: Option<Arc<SignIns>>,
    opened: Mutex<Opened>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").finish_non_exhaustive()
    }
}

impl Credentials {
    /// Secrets sealed by `vault` and kept in `store`, when given, and tokens exchanged by
    /// `exchanger`, when given.
    pub fn new(
        stored: Option<(Arc<Vault>, StoreHandle)>,
        exchanger: Option<Arc<Exchanger>>,
    ) -> Credentials {
        Credentials {
            stored,
            exchanger,
            signins: None,
            opened: Mutex::default(),
        }
    }

    /// The same, where users sign in to the backends `signins` names.
    pub fn with_sign_ins(mut self, signins: SignIns) -> Credentials {
        self.signins = Some(Arc::new(signins));
        self
    }

    /// The backends users sign in to, when any.
    pub fn sign_ins(&self) -> Option<&Arc<SignIns>> {
        self.signins.as_ref()
    }

    /// Where stored secrets are, or why there are none.
    fn stored(&self) -> Result<&(Arc<Vault>, StoreHandle), String> {
        self.stored
            .as_ref()
            .ok_or_else(|| CredentialError::NotKept.to_string())
    }

    /// Whether users' own secrets can be kept here.
    pub fn keeps_secrets(&self) -> bool {
        self.stored.is_some()
    }

    /// `text` sealed for `owner` and `purpose` (what only this gateway's replicas can open
    /// again, for that owner and purpose), as URL-safe text.
    pub fn seal_for(&self, owner: &str, purpose: &str, text: &str) -> Result<String, String> {
        use base64::Engine as _;
        let sealed = self
            .stored()?
            .0
            .seal(owner, purpose, text)
            .map_err(|e| e.to_string())?;
        Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sealed))
    }

    /// What [`Credentials::seal_for`] sealed for `owner` and `purpose`; an error for anything
    /// else (altered, another owner's or purpose's, another key's).
    pub fn open_for(&self, owner: &str, purpose: &str, sealed: &str) -> Result<String, String> {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(sealed)
            .map_err(|_| "not sealed text".to_string())?;
        self.stored()?
            .0
            .open(owner, purpose, &bytes)
            .map(|secret| secret.expose().to_string())
            .map_err(|e| e.to_string())
    }

    /// Keeps `secret` as `owner`'s credential for `backend`.
    pub async fn set(&self, owner: &str, backend: &str, secret: &str) -> Result<(), String> {
        let (vault, store) = self.stored()?;
        let sealed = vault
            .seal(owner, backend, secret)
            .map_err(|e| e.to_string())?;
        store
            .put_credential(owner, backend, sealed)
            .await
            .map_err(|e| e.to_string())?;
        self.forget(owner, backend);
        Ok(())
    }

    /// Removes `owner`'s credential for `backend`; whether there was one.
    pub async fn remove(&self, owner: &str, backend: &str) -> Result<bool, String> {
        let removed = self
            .stored()?
            .1
            .remove_credential(owner, backend)
            .await
            .map_err(|e| e.to_string())?;
        self.forget(owner, backend);
        Ok(removed)
    }

    /// The backends `owner` has a credential for (never the secrets).
    pub async fn list(&self, owner: &str) -> Result<Vec<CredentialEntry>, String> {
        self.stored()?
            .1
            .credentials_of(owner)
            .await
            .map_err(|e| e.to_string())
    }

    /// `owner`'s secret for `backend`, if it has one.
    pub(crate) async fn secret(
        &self,
        owner: &str,
        backend: &str,
    ) -> Result<Option<Secret>, String> {
        let key = (owner.to_string(), backend.to_string());
        if let Some((secret, at)) = self.lock().get(&key)
            && at.elapsed() < FRESH_FOR
        {
            return Ok(secret.clone());
        }
        let (vault, store) = self.stored()?;
        let sealed = store
            .credential(owner, backend)
            .await
            .map_err(|e| e.to_string())?;
        let secret = match sealed {
            Some(sealed) => Some(
                vault
                    .open(owner, backend, &sealed)
                    .map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        // A credential the gateway holds now: masked wherever a backend quotes it back.
        if let Some(secret) = &secret {
            sandgate_redact::remember(secret.expose());
        }
        let mut opened = self.lock();
        if opened.len() >= MAX_REMEMBERED {
            opened.clear();
        }
        opened.insert(key, (secret.clone(), Instant::now()));
        Ok(secret)
    }

    /// Whether `owner` keeps a credential for `backend` now, read from the store (another
    /// replica may have just kept it).
    pub(crate) async fn kept_now(&self, owner: &str, backend: &str) -> bool {
        self.forget(owner, backend);
        matches!(self.secret(owner, backend).await, Ok(Some(_)))
    }

    fn forget(&self, owner: &str, backend: &str) {
        self.lock()
            .remove(&(owner.to_string(), backend.to_string()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Opened> {
        self.opened.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Keeper for Credentials {
    fn read<'a>(
        &'a self,
        owner: &'a str,
        backend: &'a str,
    ) -> BoxFuture<'a, Result<Option<Secret>, String>> {
        Box::pin(self.secret(owner, backend))
    }

    fn read_now<'a>(
        &'a self,
        owner: &'a str,
        backend: &'a str,
    ) -> BoxFuture<'a, Result<Option<Secret>, String>> {
        self.forget(owner, backend);
        Box::pin(self.secret(owner, backend))
    }

    fn write<'a>(
        &'a self,
        owner: &'a str,
        backend: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(self.set(owner, backend, text))
    }

    fn forget<'a>(
        &'a self,
        owner: &'a str,
        backend: &'a str,
    ) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(self.remove(owner, backend))
    }
}

/// What a call by `caller` to per-user `backend` carries: the caller's id, and its secret when
/// the backend takes one (`credentials` is where stored secrets are; `None` keeps none).
pub async fn connection_for(
    credentials: Option<&Credentials>,
    caller: &Caller,
    backend: &str,
    per_user: &PerUser,
) -> Result<UserConnection, CredentialError> {
    let owner = owner_of(caller);
    let secret = match &per_user.secret {
        UserSecret::None => None,
        UserSecret::Header { .. } | UserSecret::Env { .. } => {
            let credentials = credentials.ok_or(CredentialError::NotKept)?;
            let secret = credentials.secret(&owner, backend).await.map_err(|why| {
                CredentialError::Unusable {
                    backend: backend.to_string(),
                    why,
                }
            })?;
            Some(secret.ok_or_else(|| CredentialError::Missing {
                backend: backend.to_string(),
                who: who(caller),
                owner_args: owner_args(&owner),
            })?)
        }
        UserSecret::OAuth(_) => {
            let credentials = credentials.ok_or(CredentialError::NotKept)?;
            let signins = credentials
                .signins
                .as_ref()
                .ok_or(CredentialError::NotKept)?;
            let token = signins
                .token(credentials, &owner, backend)
                .await
                .map_err(|missing| match missing {
                    NoToken::SignIn => CredentialError::SignIn {
                        backend: backend.to_string(),
                    },
                    NoToken::Failed(why) => CredentialError::Unusable {
                        backend: backend.to_string(),
                        why,
                    },
                })?;
            Some(token)
        }
        UserSecret::TokenExchange { audience, scope } => {
            let exchanger = credentials
                .and_then(|c| c.exchanger.as_ref())
                .ok_or(CredentialError::NotKept)?;
            let Some(grant) = &caller.grant else {
                return Err(CredentialError::NoGrant {
                    backend: backend.to_string(),
                });
            };
            let token = exchanger
                .exchange(
                    &grant.issuer,
                    grant.token.expose(),
                    audience,
                    scope.as_deref(),
                )
                .await
                .map_err(|e| CredentialError::Unusable {
                    backend: backend.to_string(),
                    why: e.to_string(),
                })?;
            Some(token)
        }
    };
    Ok(UserConnection { owner, secret })
}

/// The caller, in words for an error it reads.
fn who(caller: &Caller) -> String {
    match &caller.principal {
        Principal::User(user) => format!("you (user {user})"),
        Principal::Token(token) => format!("token `{token}`"),
        Principal::Local | Principal::Anonymous => "the local user".to_string(),
    }
}
