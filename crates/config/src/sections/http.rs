//! `[http]`: the listener, the names and origins it answers, and its connection limits.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use crate::error::ConfigError;
use crate::model::*;
use crate::walker::{Walker, duration, opt_bool, opt_string, string_list, whole_number};

const HTTP_KEYS: &[&str] = &[
    "listen",
    "allowed_hosts",
    "allowed_origins",
    "header_timeout",
    "body_timeout",
    "max_connections",
    "max_connections_per_ip",
    "max_sessions",
    "session_idle_timeout",
    "drain",
    "auth",
    "tokens",
    "secure_cookies",
];

/// The longest `http.drain`: a shutdown waits up to twice it.
const MAX_DRAIN: Duration = Duration::from_secs(300);

impl Walker<'_> {
    pub(crate) fn http_section(&self, value: Option<&Value>) -> Result<HttpConfig, ConfigError> {
        let Some(value) = value else {
            return Ok(HttpConfig::default());
        };
        let table = self.table("http", value)?;
        self.check_keys("http", table, HTTP_KEYS, &[])?;
        let listen = match opt_string(self, "http.listen", table.get("listen"))? {
            None => None,
            Some(text) => Some(text.parse::<SocketAddr>().map_err(|_| {
                self.invalid(
                    "http.listen",
                    format!("is `{text}`, which is not an IP:port address"),
                    "write it like \"127.0.0.1:8931\"",
                )
            })?),
        };
        let defaults = HttpLimits::default();
        let time = |key: &str, default: Duration| -> Result<Duration, ConfigError> {
            Ok(duration(self, &format!("http.{key}"), table.get(key))?.unwrap_or(default))
        };
        let number = |key: &str, default: usize| {
            whole_number(
                self,
                &format!("http.{key}"),
                table.get(key),
                default,
                1..=1_000_000,
            )
        };
        let limits = HttpLimits {
            header_timeout: time("header_timeout", defaults.header_timeout)?,
            body_timeout: time("body_timeout", defaults.body_timeout)?,
            max_connections: number("max_connections", defaults.max_connections)?,
            max_connections_per_ip: number(
                "max_connections_per_ip",
                defaults.max_connections_per_ip,
            )?,
            max_sessions: number("max_sessions", defaults.max_sessions)?,
            session_idle_timeout: time("session_idle_timeout", defaults.session_idle_timeout)?,
            drain: time("drain", defaults.drain)?,
        };
        if limits.drain > MAX_DRAIN {
            return Err(self.invalid(
                "http.drain",
                format!("is {:?}, over the {MAX_DRAIN:?} a shutdown may wait", limits.drain),
                "a few seconds more than the balancer's health checks need to notice (HAProxy's inter x fall) is enough",
            ));
        }
        let auth = self.http_auth(table.get("auth"))?;
        if auth == crate::access::HttpAuth::None
            && let Some(addr) = listen.filter(|a| !a.ip().is_loopback())
        {
            return Err(self.invalid(
                "http.auth",
                format!("is \"none\" while http.listen is {addr}, which is not loopback"),
                "keep token auth (the default) for a listener other machines reach, or listen on 127.0.0.1",
            ));
        }
        Ok(HttpConfig {
            auth,
            tokens: self.http_tokens(table.get("tokens"))?,
            listen,
            allowed_hosts: string_list(self, "http.allowed_hosts", table.get("allowed_hosts"))?,
            allowed_origins: string_list(
                self,
                "http.allowed_origins",
                table.get("allowed_origins"),
            )?,
            limits,
            secure_cookies: opt_bool(self, "http.secure_cookies", table.get("secure_cookies"))?,
        })
    }
}
