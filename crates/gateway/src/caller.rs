//! Who is calling: the profile a request acts under (its grants), the token that proved it,
//! and the owner of what its executions store.
//!
//! The profile comes from the HTTP front's token check (an [`Authenticated`] the auth layer
//! puts on the request); stdio clients, and HTTP clients where auth is off, get `default`.
//!
//! An execution's stored result, logs and error are readable only by the caller that produced
//! them. Over HTTP that is the MCP session (`Mcp-Session-Id`) under the same profile; a
//! stateless (2026-07-28) caller has no session, and its outputs are shared only with other
//! stateless callers of its profile, who would still have to guess a 128-bit id. On stdio the
//! caller is the local user, who owns the store anyway. Anyone else is told "not found",
//! exactly as for an id that never existed.
//!
//! The owner and the profile are part of the store key, so there is nothing to check that
//! could be forgotten: another caller's key simply names no row.

use rmcp::service::{RequestContext, RoleServer};
use sandgate_policy::Access;

use crate::profiles::Profiles;

/// Put on an HTTP request by the auth layer once its bearer token matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The token's profile.
    pub profile: String,
    /// How the audit log names it, never the token: a static token's id (its configured name
    /// or digest, `HttpToken::id`), or an access token's subject at its issuer.
    pub name: String,
    /// The SHA-256 of the token: sessions it opens are bound to it (a rotated token, whose
    /// name stays, is another identity). For an access token, the digest of its user, so a
    /// refreshed token continues the user's sessions.
    pub digest: [u8; 32],
    /// The user an access token proved (`iss` plus `sub`, digested): what it stores is its
    /// own, not its profile's.
    pub user: Option<[u8; 32]>,
    /// That user's token and its issuer, for a token exchange (never sent on itself).
    pub grant: Option<std::sync::Arc<UserGrant>>,
}

/// The access token a user proved themselves with, and the issuer that made it: what a token
/// exchange (RFC 8693) presents for a backend's token. It is never sent to a backend itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserGrant {
    /// The issuer that made the token.
    pub issuer: String,
    /// The token (masked when printed).
    pub token: sandgate_config::Secret,
}

/// The owner of what an execution stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// The stdio client: the local user.
    Local,
    /// An HTTP client without a credential, in an MCP session, by a hash of its session id.
    Session(String),
    /// An HTTP client without a credential or a session.
    Stateless,
    /// A user an access token proved, by 128 bits of its identity's digest (the user does not
    /// choose it, so no one can aim at another's): any of the user's sessions.
    User(String),
    /// A static token, by its stable id (`HttpToken::id`): any session that presents it.
    Token(String),
}

/// Who a caller is, whatever door it came through: the one identity everything it owns
/// (`state`, credentials, questions it asked) is keyed by, and which no config edit can hand
/// to another. A static token is its name or its digest (`sandgate_config::HttpToken::id`),
/// never its position; a user is its issuer and subject, digested.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Principal {
    /// The local user: the stdio client.
    Local,
    /// An HTTP client where auth is off: anyone who reaches the loopback port.
    Anonymous,
    /// A static token of `[[http.tokens]]`, by its id.
    Token(String),
    /// A user an identity provider proved, by its id (`sandgate_identity::user_id_of`).
    User(String),
}

impl Principal {
    /// The principal a request proved: its user, else its token, else the local user (stdio)
    /// or an anonymous HTTP client.
    pub fn proved(user: Option<&str>, token: Option<&str>, local: bool) -> Principal {
        match (user, token) {
            (Some(user), _) => Principal::User(user.to_string()),
            (None, Some(token)) => Principal::Token(token.to_string()),
            (None, None) if local => Principal::Local,
            (None, None) => Principal::Anonymous,
        }
    }

    /// How stores key it and the audit log names it: `local`, `anonymous`, `token:ID` or
    /// `user:ID`.
    pub fn key(&self) -> String {
        match self {
            Principal::Local => "local".into(),
            Principal::Anonymous => "anonymous".into(),
            Principal::Token(id) => format!("token:{id}"),
            Principal::User(id) => format!("user:{id}"),
        }
    }

    /// Whether it names one holder of a credential: a token or a user. The local user and an
    /// anonymous HTTP client may be anyone on the machine, so they can vouch for no one else.
    pub fn is_accountable(&self) -> bool {
        matches!(self, Principal::Token(_) | Principal::User(_))
    }
}

/// What a client declared it can take from a server mid-request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Declared {
    /// `elicitation/create`: questions to the person (approvals among them).
    pub elicitation: bool,
    /// `sampling/createMessage`: a completion from the client's model.
    pub sampling: bool,
    /// URL-mode `elicitation/create`: a link the person opens (a sign-in to a backend).
    pub url_elicitation: bool,
}

/// How the person behind a request's client can be asked something (an approval, or a
/// backend's own question): what the client declared it can take, in its request's era.
#[derive(Debug, Clone, Default)]
pub enum Reach {
    /// The client declared neither elicitation nor sampling: nobody can be asked.
    #[default]
    Nobody,
    /// A session (2025-11-25): asked with requests through it while the request waits.
    Session(rmcp::Peer<RoleServer>, Declared),
    /// A stateless request (2026-07-28): asked by answering with an input-required result,
    /// which the client's retry answers.
    Retry(Declared),
}

impl Reach {
    /// How the client of the request in `context` can be asked.
    pub fn of(context: &RequestContext<RoleServer>) -> Reach {
        let declared = context
            .client_capabilities()
            .map(|caps| Declared {
                elicitation: caps.elicitation.is_some(),
                sampling: caps.sampling.is_some(),
                url_elicitation: caps.elicitation.as_ref().is_some_and(|e| e.url.is_some()),
            })
            .unwrap_or_default();
        if declared == Declared::default() {
            return Reach::Nobody;
        }
        let stateless = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str());
        if stateless {
            Reach::Retry(declared)
        } else {
            Reach::Session(context.peer.clone(), declared)
        }
    }

    /// The same client asked only through whoever waits on its detached execution, never
    /// through its session.
    pub fn through_waiter(&self) -> Reach {
        match self {
            Reach::Nobody => Reach::Nobody,
            Reach::Session(_, declared) | Reach::Retry(declared) => Reach::Retry(*declared),
        }
    }
}

/// One request's caller.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Whose stored outputs it reads and writes.
    pub owner: Owner,
    /// What it may reach and see.
    pub access: Access,
    /// Who it is: the key of everything it owns beyond its outputs (`state`, credentials,
    /// questions it asked, a user's rate).
    pub principal: Principal,
    /// How the audit log names it: a static token's id, or a user's subject at its issuer.
    pub name: Option<String>,
    /// That user's token and its issuer, for a token exchange.
    pub grant: Option<std::sync::Arc<UserGrant>>,
    /// The trace it acts in: the W3C context its request carried in `_meta`, then the span of
    /// its execution (see `telemetry::traces`).
    pub trace: opentelemetry::Context,
    /// How a person behind its client can be asked.
    pub reach: Reach,
}

impl Caller {
    /// The caller of one request.
    pub fn of(profiles: &Profiles, context: &RequestContext<RoleServer>) -> Caller {
        let trace = crate::telemetry::traces::from_meta(
            context.meta.get_traceparent(),
            context.meta.get_tracestate(),
        );
        let caller = match context.extensions.get::<http::request::Parts>() {
            Some(parts) => Caller::of_http(profiles, parts, trace),
            None => Caller {
                trace,
                ..Caller::local(profiles)
            },
        };
        Caller {
            reach: Reach::of(context),
            ..caller
        }
    }

    /// The caller of one HTTP request, acting in `trace`.
    pub fn of_http(
        profiles: &Profiles,
        parts: &http::request::Parts,
        trace: opentelemetry::Context,
    ) -> Caller {
        let authenticated = parts.extensions.get::<Authenticated>();
        let profile = authenticated.map_or("default", |a| a.profile.as_str());
        let user: Option<String> = authenticated
            .and_then(|a| a.user)
            .map(|digest| sandgate_identity::user_id_of(&digest));
        // A user comes before its token's name (`Principal::proved`), so a user's audit name is
        // never taken for a token.
        let principal = Principal::proved(
            user.as_deref(),
            authenticated.map(|a| a.name.as_str()),
            false,
        );
        Caller {
            // What a caller's executions leave (outputs, executions that run on) is its own
            // across its sessions when a credential names it; without one, its session's.
            owner: match (&principal, parts.headers.get("mcp-session-id")) {
                (Principal::User(user), _) => Owner::User(user.clone()),
                (Principal::Token(token), _) => Owner::Token(token.clone()),
                (_, Some(session)) => Owner::Session(fnv_hex(session.as_bytes())),
                (_, None) => Owner::Stateless,
            },
            principal,
            name: authenticated.map(|a| a.name.clone()),
            grant: authenticated.and_then(|a| a.grant.clone()),
            access: Access::new(profiles.get(profile)),
            trace,
            reach: Reach::Nobody,
        }
    }

    /// The local user: the stdio client, under the `default` profile.
    pub fn local(profiles: &Profiles) -> Caller {
        Caller {
            owner: Owner::Local,
            access: Access::new(profiles.get("default")),
            principal: Principal::Local,
            name: None,
            grant: None,
            trace: opentelemetry::Context::new(),
            reach: Reach::Nobody,
        }
    }

    /// A console login acting in the console (its playground, its answers): under `access`,
    /// as the token or user that logged in (`principal`, named `name` in the audit log), with
    /// an owner of its own (`session`, digested) for what its runs store, and no client to ask.
    pub fn of_console(
        access: Access,
        session: &str,
        principal: Principal,
        name: Option<String>,
    ) -> Caller {
        Caller {
            owner: Owner::Session(fnv_hex(format!("console:{session}").as_bytes())),
            access,
            principal,
            name,
            grant: None,
            trace: opentelemetry::Context::new(),
            reach: Reach::Nobody,
        }
    }

    /// The same caller acting under `access` instead (a stored tool's run: its owner's grant
    /// cut to what it declares), still the same principal, owner, trace and reach.
    pub fn acting_under(&self, access: Access) -> Caller {
        Caller {
            access,
            ..self.clone()
        }
    }

    /// The same caller, its questions asked only through whoever waits on its detached
    /// execution (see `Reach::through_waiter`).
    pub fn asked_through_waiter(&self) -> Caller {
        Caller {
            reach: self.reach.through_waiter(),
            ..self.clone()
        }
    }

    /// Who the caller is (see `Principal`).
    pub fn principal(&self) -> Principal {
        self.principal.clone()
    }

    /// The user an identity provider proved, by 128 bits of its digest (hex): what it stores
    /// and its rate are its own.
    pub fn user(&self) -> Option<&str> {
        match &self.principal {
            Principal::User(user) => Some(user),
            _ => None,
        }
    }

    /// The caller's profile name.
    pub fn profile(&self) -> &str {
        &self.access.profile().name
    }

    /// The store key of `part` of execution `id`.
    pub fn key(&self, id: &str, part: Part) -> String {
        let base = part.base_key(id);
        let profile = self.profile();
        match (&self.owner, profile) {
            (Owner::Local, "default") => base,
            (Owner::Local, profile) => format!("{base}@local:{profile}"),
            (Owner::Session(hash), "default") => format!("{base}@{hash}"),
            (Owner::Session(hash), profile) => format!("{base}@{hash}:{profile}"),
            (Owner::Stateless, "default") => format!("{base}@http"),
            (Owner::Stateless, profile) => format!("{base}@http:{profile}"),
            (Owner::User(hash), profile) => format!("{base}@user:{hash}:{profile}"),
            (Owner::Token(id), profile) => format!("{base}@token:{id}:{profile}"),
        }
    }
}

impl Caller {
    /// Whose script state this caller reads and writes: its user (an identity provider's),
    /// or else its token, or else the local user or the HTTP caller without a token, each
    /// under its profile. Not its session, so state outlives sessions and restarts.
    pub fn state_owner(&self) -> String {
        let profile = self.profile();
        match self.principal() {
            // Kept as it always was, so what an open HTTP caller stored stays its own.
            Principal::Anonymous => format!("http:{profile}"),
            principal => format!("{}:{profile}", principal.key()),
        }
    }

    /// The key that names this caller as the owner of what outlives a request (a detached
    /// execution `id`, a question to a person, with `id` empty): its store key and its token,
    /// so another session, profile, user or token owns none of it.
    pub fn owner_key(&self, id: &str) -> String {
        format!(
            "{}#{}",
            self.key(id, Part::Output),
            self.name.as_deref().unwrap_or("")
        )
    }
}

/// The parts of an execution's output the store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The whole result.
    Output,
    /// The whole logs.
    Logs,
    /// The whole error message and hint.
    Error,
}

impl Part {
    /// The name in `read_output`'s `part` and in `sandgate://executions/{id}/{part}`.
    pub fn as_str(self) -> &'static str {
        match self {
            Part::Output => "output",
            Part::Logs => "logs",
            Part::Error => "error",
        }
    }

    /// The key of this part of execution `id` without an owner (the stdio caller's).
    pub fn base_key(self, id: &str) -> String {
        match self {
            Part::Output => id.to_string(),
            Part::Logs | Part::Error => format!("{id}/{}", self.as_str()),
        }
    }

    /// The part named `name`, if there is one.
    pub fn named(name: &str) -> Option<Part> {
        [Part::Output, Part::Logs, Part::Error]
            .into_iter()
            .find(|part| part.as_str() == name)
    }
}

/// FNV-1a, 64 bits, as hex: the session id itself is not kept.
pub(crate) fn fnv_hex(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use sandgate_policy::Profile;

    use super::*;

    /// A caller of `owner` under a profile named `profile` that reaches every tool.
    pub(crate) fn caller(owner: Owner, profile: &str) -> Caller {
        let mut p = Profile::implicit_default("sandgate.toml");
        p.name = profile.to_string();
        Caller {
            principal: if matches!(owner, Owner::Local) {
                Principal::Local
            } else {
                Principal::Anonymous
            },
            access: Access::new(Arc::new(p)),
            owner,
            name: None,
            grant: None,
            trace: opentelemetry::Context::new(),
            reach: Reach::Nobody,
        }
    }

    /// An HTTP request as the auth layer leaves it: `authenticated`, if its token matched.
    fn request(authenticated: Option<Authenticated>) -> http::request::Parts {
        let (mut parts, ()) = http::Request::new(()).into_parts();
        if let Some(authenticated) = authenticated {
            parts.extensions.insert(authenticated);
        }
        parts
    }

    #[test]
    fn a_request_is_its_user_else_its_token_else_anonymous_and_the_audit_names_it() {
        let profiles = Profiles::new(vec![Profile::implicit_default("sandgate.toml")]);
        let of = |authenticated| {
            Caller::of_http(
                &profiles,
                &request(authenticated),
                opentelemetry::Context::new(),
            )
        };
        let token = of(Some(Authenticated {
            profile: "default".into(),
            name: "ci".into(),
            digest: [1; 32],
            user: None,
            grant: None,
        }));
        assert_eq!(token.principal, Principal::Token("ci".into()));
        assert_eq!((token.user(), token.name.as_deref()), (None, Some("ci")));
        // A user is its digest, never the words the audit log names it by.
        let user = of(Some(Authenticated {
            profile: "default".into(),
            name: "ada at https://id.example".into(),
            digest: [2; 32],
            user: Some([2; 32]),
            grant: None,
        }));
        let id = sandgate_identity::user_id_of(&[2; 32]);
        assert_eq!(user.principal, Principal::User(id.clone()));
        assert_eq!(user.user(), Some(id.as_str()));
        assert_eq!(user.name.as_deref(), Some("ada at https://id.example"));
        assert_eq!(user.owner, Owner::User(id));
        let anonymous = of(None);
        assert_eq!(
            (anonymous.principal, anonymous.name),
            (Principal::Anonymous, None)
        );
        assert_eq!(Caller::local(&profiles).principal, Principal::Local);
    }

    #[test]
    fn each_caller_and_profile_has_its_own_keys() {
        let one = Owner::Session(fnv_hex(b"session-one"));
        let two = Owner::Session(fnv_hex(b"session-two"));
        for part in [Part::Output, Part::Logs, Part::Error] {
            let mut keys = vec![];
            for profile in ["default", "reader", "writer"] {
                for owner in [
                    Owner::Local,
                    one.clone(),
                    two.clone(),
                    Owner::Stateless,
                    Owner::Token("ci".into()),
                    Owner::Token("sha256:0123456789abcdef".into()),
                    Owner::User("0123456789abcdef0123456789abcdef".into()),
                ] {
                    keys.push(caller(owner, profile).key("ex-1", part));
                }
            }
            for (i, a) in keys.iter().enumerate() {
                for b in &keys[i + 1..] {
                    assert_ne!(a, b);
                }
            }
        }
        assert_eq!(
            caller(Owner::Local, "default").key("ex-1", Part::Output),
            "ex-1"
        );
        assert_eq!(
            caller(Owner::Local, "default").key("ex-1", Part::Logs),
            "ex-1/logs"
        );
        assert_eq!(Part::named("code"), None);
    }
}
