//! Typed sandgate configuration.
//!
//! sandgate reads two formats: its own `sandgate.toml`, and the `{"mcpServers": {...}}` JSON
//! that Claude Desktop, Claude Code and Cursor already use, so a user can point sandgate at the
//! file they have. Both load into the same [`Config`]. Everything is validated here, at load:
//! a config that loads never fails later for a reason a check could have caught. Errors name the
//! file, the key, the problem and a fix.
//!
//! This crate never reads the process environment. `${VAR}` references in backend `env` and
//! `headers` are resolved by [`Config::resolved`] against a lookup the caller passes in.

mod access;
mod error;
mod interpolate;
mod jsonc;
mod model;
mod parse;
mod secret;
mod sections;
mod servers;
mod suggest;
mod telemetry;
mod walker;

pub use access::{
    AuditConfig, DIGEST_ID_PREFIX, HttpAuth, HttpToken, MIN_TOKEN_CHARS, TokenSecret, digest_id,
};
pub use error::ConfigError;
pub use interpolate::interpolate;
pub use model::{
    BackendBounds, BackendConfig, Config, DEFAULT_CALL_TIMEOUT, DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_MAX_ARGUMENT_BYTES, DEFAULT_MAX_CONCURRENT_CALLS, DEFAULT_MAX_RECORDS,
    DEFAULT_OUTPUT_RETENTION_HOURS, HttpConfig, HttpLimits, MAX_TOOL_NAME_BYTES, OutputConfig,
    PinMode, RateLimitFallback, RecordWrites, StoreBackend, StoreConfig, StoredToolsConfig,
    Transport,
};
pub use parse::{Format, load_file, parse_str};
pub use secret::Secret;
pub use sections::approvals::{
    ApprovalsConfig, DEFAULT_APPROVAL_TIMEOUT, DEFAULT_MAX_WAITING, DEFAULT_MAX_WAITING_PER_CALLER,
};
pub use sections::auth::{
    ACCEPTED_ALGORITHMS, AuthConfig, OAuthClient, OAuthConfig, OAuthConsole, OAuthIssuer, OAuthRule,
};
pub use sections::credentials::{
    CredentialsConfig, DEFAULT_MAX_USERS, DEFAULT_USER_IDLE, PerUser, UpstreamOAuthConfig,
    UserSecret,
};
pub use servers::STORED_TOOLS_BACKEND;
pub use telemetry::TelemetryConfig;
