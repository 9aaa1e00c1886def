//! The `Host` and `Origin` check every route passes (the console's, `/metrics` and `/mcp`
//! alike), before anything else reads the request.
//!
//! A web page can make a browser send requests to a loopback port under a name the attacker
//! controls (DNS rebinding): the request then carries that name in `Host`, and an `Origin`
//! that matches it. So `Host` must be a name this gateway is reached by (loopback, or
//! `[http] allowed_hosts`), and an `Origin`, when a browser sends one, must be an allowed
//! origin or the gateway's own at an allowed `Host`. The health probes are the one exception:
//! they take no input and say only "ok" or "ready", and orchestrators probe by address.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};

/// Which names and origins the front answers.
#[derive(Debug, Clone)]
pub(crate) struct Front {
    /// The allowed hosts, read once (a missing port matches any); an entry that is no host
    /// allows nothing.
    hosts: Vec<Authority>,
    /// `scheme://host[:port]` entries; `:*` matches any port.
    origins: Vec<String>,
}

/// A host and an optional port, normalised for comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

/// A `Host` header's value (or an origin's authority) as host and port; `None` when it is not
/// one (user info included).
fn authority(text: &str) -> Option<Authority> {
    let parsed = http::uri::Authority::try_from(text.trim()).ok()?;
    // User info, or a port that is not a number.
    let after_host = &parsed.as_str()[parsed.host().len()..];
    if parsed.as_str().contains('@') || (!after_host.is_empty() && parsed.port_u16().is_none()) {
        return None;
    }
    Some(Authority {
        host: normalized(parsed.host()),
        port: parsed.port_u16(),
    })
}

/// An allowed host as configured: `host`, `host:port`, or a bare IPv6 address (`::1`).
fn allowed_authority(text: &str) -> Option<Authority> {
    let text = text.trim();
    if text.matches(':').count() > 1 && !text.starts_with('[') {
        return Some(Authority {
            host: normalized(text),
            port: None,
        });
    }
    authority(text)
}

fn normalized(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

impl Front {
    /// The front for `hosts` (`host` or `host:port` entries) and `origins`.
    pub(crate) fn new(hosts: &[String], origins: Vec<String>) -> Front {
        Front {
            hosts: hosts.iter().filter_map(|h| allowed_authority(h)).collect(),
            origins,
        }
    }

    /// Whether `host` (a `Host` header's value) is a name this gateway is reached by.
    fn host_allowed(&self, host: &str) -> bool {
        let Some(host) = authority(host) else {
            return false;
        };
        self.hosts.iter().any(|allowed| {
            allowed.host == host.host && allowed.port.is_none_or(|p| Some(p) == host.port)
        })
    }

    /// Whether `origin` may send requests: an allowed origin, or the gateway's own (the scheme
    /// and the already checked `Host`).
    fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        if origin == format!("http://{host}") || origin == format!("https://{host}") {
            return true;
        }
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        let Some(asked) = authority(rest) else {
            return false;
        };
        self.origins.iter().any(|allowed| {
            let Some((a_scheme, a_rest)) = allowed.split_once("://") else {
                return false;
            };
            if !a_scheme.eq_ignore_ascii_case(scheme) {
                return false;
            }
            match a_rest.strip_suffix(":*") {
                Some(any_port) => authority(any_port).is_some_and(|a| a.host == asked.host),
                None => authority(a_rest).is_some_and(|a| {
                    let default = match scheme {
                        "https" => 443,
                        _ => 80,
                    };
                    a.host == asked.host
                        && a.port.unwrap_or(default) == asked.port.unwrap_or(default)
                }),
            }
        })
    }
}

/// The middleware (see the module docs).
pub(crate) async fn check(
    State(front): State<Arc<Front>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()))
        .unwrap_or("");
    if !front.host_allowed(host) {
        return forbidden(
            "the Host header is not a name this gateway answers to (DNS rebinding is refused); reach it at a loopback address, or add the name to [http] allowed_hosts",
        );
    }
    let mut origins = headers.get_all(header::ORIGIN).iter();
    match (origins.next(), origins.next()) {
        (None, _) => {}
        (Some(origin), None) if origin.to_str().is_ok_and(|o| front.origin_allowed(o, host)) => {}
        _ => {
            return forbidden(
                "the Origin header is another site's; add the origin to [http] allowed_origins if this page may use the gateway",
            );
        }
    }
    next.run(request).await
}

fn forbidden(why: &'static str) -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("Forbidden: {why}\n"),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn front() -> Front {
        Front::new(
            &[
                "localhost".into(),
                "127.0.0.1".into(),
                "::1".into(),
                "gateway.corp:8443".into(),
            ],
            vec!["http://localhost:*".into(), "https://app.corp".into()],
        )
    }

    #[test]
    fn hosts_are_names_the_gateway_answers_to() {
        let f = front();
        for ok in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1:9",
            "[::1]:8080",
            "gateway.corp:8443",
        ] {
            assert!(f.host_allowed(ok), "{ok}");
        }
        for bad in [
            "",
            "attacker.example",
            "attacker.example:8080",
            "localhost.attacker.example",
            "gateway.corp",
            "gateway.corp:80",
            "127.0.0.2",
            "user@localhost",
            "localhost:notaport",
        ] {
            assert!(!f.host_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn origins_are_allowed_ones_or_the_gateways_own() {
        let f = front();
        assert!(f.origin_allowed("http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(f.origin_allowed("http://localhost:1234", "127.0.0.1:8080"));
        assert!(f.origin_allowed("https://app.corp", "127.0.0.1:8080"));
        assert!(f.origin_allowed("https://app.corp:443", "127.0.0.1:8080"));
        for bad in [
            "null",
            "http://attacker.example",
            "http://127.0.0.1:9999",
            "https://app.corp:8443",
            "http://app.corp",
            "file://",
        ] {
            assert!(!f.origin_allowed(bad, "127.0.0.1:8080"), "{bad}");
        }
    }
}
