//! `fetch(url, init)`, run in the host.
//!
//! Every hop is checked before it connects. A host name is first put to the policy as it is
//! written: only a name some entry holds is ever looked up, so code cannot send data out in
//! DNS queries (`<data>.attacker.example`), and a grant of addresses only never resolves a
//! name. The resolver takes the policy's proof of that. Then each address the name resolved
//! to is put to the policy together with the host and port. If any address is
//! refused, the request is refused (a name that resolves to loopback is DNS rebinding, whatever
//! else it resolves to). The connection then goes to exactly the addresses the policy allowed:
//! the HTTP client is pinned to them and never resolves the name itself. Redirects are
//! followed here, one hop at a time, each checked the same way. Sizes, time and the number of
//! redirects are limited.
//!
//! Making an HTTP client costs milliseconds (its TLS setup), so a [`Fetcher`] keeps clients,
//! each pinned to one host and the exact addresses the policy allowed for it: the key says
//! everything about where a client connects, so reusing one (and its idle connections) for
//! another request that the policy allowed to the same addresses reaches nothing new.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandgate_policy::{Access, Authorized, NetLookup, NetTarget, PolicyError};
use url::{Host, Url};

use crate::error::CapabilityError;
use crate::resolve::Resolve;

/// The policy's two questions for each hop of a fetch.
pub trait Authorize: Sync {
    /// May the name `host` be looked up, for a connection to `host:port`?
    fn lookup(&self, host: &str, port: u16) -> Result<Authorized<NetLookup>, PolicyError>;
    /// May `host:port` be reached at the resolved `addr`?
    fn connect(
        &self,
        host: &str,
        port: u16,
        addr: IpAddr,
    ) -> Result<Authorized<NetTarget>, PolicyError>;
}

/// An access answers both from its profile's `net`, unaudited (tests, benchmarks).
impl Authorize for Access {
    fn lookup(&self, host: &str, port: u16) -> Result<Authorized<NetLookup>, PolicyError> {
        self.authorize_lookup(host, port)
    }

    fn connect(
        &self,
        host: &str,
        port: u16,
        addr: IpAddr,
    ) -> Result<Authorized<NetTarget>, PolicyError> {
        self.authorize_net(host, port, addr)
    }
}

/// Request headers the guest may not set: the connection's own (`Host` decides which virtual
/// host behind a shared proxy answers, so a grant for one name would reach others; the rest
/// frame the request and could smuggle a second one).
const FORBIDDEN_HEADERS: [&str; 9] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-connection",
];

/// What `fetch` keeps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// Largest response body, in bytes.
    pub max_response_bytes: usize,
    /// Largest request body, in bytes.
    pub max_request_bytes: usize,
    /// Longest the whole fetch may take, redirects included.
    pub timeout: Duration,
    /// Most redirects followed.
    pub max_redirects: u32,
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits {
            max_response_bytes: 16 * 1024 * 1024,
            max_request_bytes: 4 * 1024 * 1024,
            timeout: Duration::from_secs(30),
            max_redirects: 5,
        }
    }
}

/// What to do with a redirect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Redirect {
    /// Follow it (checked like the first hop). The default.
    #[default]
    Follow,
    /// Fail the fetch.
    Error,
    /// Return the redirect response itself.
    Manual,
}

/// A request as the guest made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    /// The URL.
    pub url: String,
    /// The method (upper case).
    pub method: String,
    /// Header pairs.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Option<Vec<u8>>,
    /// Redirect handling.
    pub redirect: Redirect,
}

/// The response the guest gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse {
    /// The URL of the last hop.
    pub url: String,
    /// The status code.
    pub status: u16,
    /// The status's reason phrase.
    pub status_text: String,
    /// Whether a redirect was followed.
    pub redirected: bool,
    /// Header pairs (names in lower case).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// Clients kept at most; past this the least recently used half is dropped.
const MAX_CLIENTS: usize = 256;

/// A client pinned to one host at the addresses the policy allowed, and when it was last used.
type Pinned = HashMap<(String, Vec<SocketAddr>), (u64, reqwest::Client)>;

/// Runs fetches, keeping HTTP clients pinned to policy-approved addresses.
pub struct Fetcher {
    resolver: Arc<dyn Resolve>,
    clients: Mutex<Pinned>,
    uses: AtomicU64,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher").finish_non_exhaustive()
    }
}

impl Fetcher {
    /// A fetcher that resolves names with `resolver`.
    pub fn new(resolver: Arc<dyn Resolve>) -> Fetcher {
        Fetcher {
            resolver,
            clients: Mutex::default(),
            uses: AtomicU64::new(0),
        }
    }

    /// Fetches `request`, asking `authorize` about every address of every hop.
    pub async fn fetch(
        &self,
        request: FetchRequest,
        limits: &FetchLimits,
        authorize: &dyn Authorize,
    ) -> Result<FetchResponse, CapabilityError> {
        fetch(self, request, limits, authorize).await
    }

    /// The client for `host` pinned to `addrs` (a name's, when `domain` is set), made on
    /// first use.
    fn client(
        &self,
        host: &str,
        addrs: &[SocketAddr],
        domain: Option<&str>,
    ) -> Result<reqwest::Client, CapabilityError> {
        let key = (host.to_string(), addrs.to_vec());
        let now = self.uses.fetch_add(1, Ordering::Relaxed);
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((last, client)) = clients.get_mut(&key) {
            *last = now;
            return Ok(client.clone());
        }
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(8);
        if let Some(name) = domain {
            builder = builder.resolve_to_addrs(name, addrs);
        }
        let client = builder
            .build()
            .map_err(|e| CapabilityError::Io(format!("fetch: cannot make an HTTP client: {e}")))?;
        if clients.len() >= MAX_CLIENTS {
            let mut ages: Vec<u64> = clients.values().map(|(n, _)| *n).collect();
            ages.sort_unstable();
            let cutoff = ages[ages.len() / 2];
            clients.retain(|_, (n, _)| *n > cutoff);
        }
        clients.insert(key, (now, client.clone()));
        Ok(client)
    }
}

/// Fetches `request`, asking `authorize` about every address of every hop.
async fn fetch(
    fetcher: &Fetcher,
    request: FetchRequest,
    limits: &FetchLimits,
    authorize: &dyn Authorize,
) -> Result<FetchResponse, CapabilityError> {
    let started = Instant::now();
    if let Some((name, _)) = request
        .headers
        .iter()
        .find(|(k, _)| FORBIDDEN_HEADERS.iter().any(|f| k.eq_ignore_ascii_case(f)))
    {
        return Err(CapabilityError::BadRequest(format!(
            "fetch: the `{name}` header is set by the gateway from the URL and the body, not by code; leave it out (to reach another host, put it in the URL)"
        )));
    }
    if request
        .body
        .as_ref()
        .is_some_and(|b| b.len() > limits.max_request_bytes)
    {
        return Err(CapabilityError::Limit(format!(
            "fetch: the request body is over the {} byte limit",
            limits.max_request_bytes
        )));
    }
    let method = reqwest::Method::from_bytes(request.method.as_bytes()).map_err(|_| {
        CapabilityError::BadRequest(format!("fetch: `{}` is not an HTTP method", request.method))
    })?;
    let mut url = parse_url(&request.url)?;
    let mut hop = Hop {
        method,
        headers: request.headers,
        body: request.body,
    };
    let mut redirected = false;
    for redirects in 0..=limits.max_redirects {
        let left = limits
            .timeout
            .checked_sub(started.elapsed())
            .ok_or_else(|| timed_out(limits))?;
        let response = tokio::time::timeout(left, send(fetcher, &url, &hop, limits, authorize))
            .await
            .map_err(|_| timed_out(limits))??;
        let location = response
            .headers
            .iter()
            .find(|(k, _)| k == "location")
            .map(|(_, v)| v.clone());
        let is_redirect = matches!(response.status, 301 | 302 | 303 | 307 | 308);
        let (true, Some(location)) = (is_redirect, location) else {
            return Ok(FetchResponse {
                redirected,
                ..response
            });
        };
        match request.redirect {
            Redirect::Manual => {
                return Ok(FetchResponse {
                    redirected,
                    ..response
                });
            }
            Redirect::Error => {
                return Err(CapabilityError::BadRequest(format!(
                    "fetch: {} redirected to {location}, and redirect is \"error\"",
                    url
                )));
            }
            Redirect::Follow => {}
        }
        if redirects == limits.max_redirects {
            break;
        }
        let next = url.join(&location).map_err(|_| {
            CapabilityError::BadRequest(format!(
                "fetch: {url} redirected to `{location}`, which is not a URL"
            ))
        })?;
        let next = parse_url(next.as_str())?;
        // 303, and 301/302 after a POST, turn into a GET without a body.
        if response.status == 303
            || (matches!(response.status, 301 | 302) && hop.method == reqwest::Method::POST)
        {
            hop.method = reqwest::Method::GET;
            hop.body = None;
        }
        // Credentials never follow a redirect to another origin.
        if next.origin() != url.origin() {
            hop.headers.retain(|(k, _)| {
                !k.eq_ignore_ascii_case("authorization") && !k.eq_ignore_ascii_case("cookie")
            });
        }
        url = next;
        redirected = true;
    }
    Err(CapabilityError::Limit(format!(
        "fetch: more than {} redirects",
        limits.max_redirects
    )))
}

struct Hop {
    method: reqwest::Method,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

fn timed_out(limits: &FetchLimits) -> CapabilityError {
    CapabilityError::Limit(format!("fetch: no answer within {:?}", limits.timeout))
}

fn parse_url(text: &str) -> Result<Url, CapabilityError> {
    let url = Url::parse(text).map_err(|e| {
        CapabilityError::BadRequest(format!("fetch: `{text}` is not an absolute URL ({e})"))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(CapabilityError::BadRequest(format!(
            "fetch: only http and https URLs are fetched, not {}:",
            url.scheme()
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(CapabilityError::BadRequest(
            "fetch: credentials in the URL are refused; send an Authorization header instead"
                .into(),
        ));
    }
    Ok(url)
}

/// One hop: resolve, authorize every address, connect to the allowed ones only.
async fn send(
    fetcher: &Fetcher,
    url: &Url,
    hop: &Hop,
    limits: &FetchLimits,
    authorize: &dyn Authorize,
) -> Result<FetchResponse, CapabilityError> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| CapabilityError::BadRequest(format!("fetch: {url} has no port")))?;
    // The url crate has already read every spelling of an address (0x7f000001, 2130706433,
    // 017700000001) as the address itself.
    let (host, addrs) = match url.host() {
        Some(Host::Ipv4(ip)) => (ip.to_string(), vec![IpAddr::V4(ip)]),
        Some(Host::Ipv6(ip)) => (ip.to_string(), vec![IpAddr::V6(ip)]),
        Some(Host::Domain(name)) => {
            // Asked before any query leaves: DNS is a channel out.
            let lookup = authorize.lookup(name, port)?;
            let addrs =
                fetcher.resolver.resolve(&lookup).await.map_err(|e| {
                    CapabilityError::Io(format!("fetch: cannot resolve `{name}`: {e}"))
                })?;
            (name.to_string(), addrs)
        }
        None => {
            return Err(CapabilityError::BadRequest(format!(
                "fetch: {url} has no host"
            )));
        }
    };
    if addrs.is_empty() {
        return Err(CapabilityError::Io(format!(
            "fetch: `{host}` has no address"
        )));
    }
    let mut allowed = Vec::with_capacity(addrs.len());
    for addr in addrs {
        let proof = authorize.connect(&host, port, addr)?;
        allowed.push(SocketAddr::new(proof.get().addr, port));
    }
    let domain = match url.host() {
        Some(Host::Domain(name)) => Some(name),
        _ => None,
    };
    let client = fetcher.client(&host, &allowed, domain)?;
    let mut builder = client.request(hop.method.clone(), url.clone());
    for (name, value) in &hop.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    if let Some(body) = &hop.body {
        builder = builder.body(body.clone());
    }
    let request = builder
        .build()
        .map_err(|e| CapabilityError::BadRequest(format!("fetch: {e}")))?;
    let mut response = client
        .execute(request)
        .await
        .map_err(|e| CapabilityError::Io(format!("fetch: {url}: {}", plain(&e))))?;
    let status = response.status();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| CapabilityError::Io(format!("fetch: {url}: {}", plain(&e))))?
    {
        if body.len() + chunk.len() > limits.max_response_bytes {
            return Err(CapabilityError::Limit(format!(
                "fetch: the response from {url} is over the {} byte limit",
                limits.max_response_bytes
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(FetchResponse {
        url: url.to_string(),
        status: status.as_u16(),
        status_text: status.canonical_reason().unwrap_or("").to_string(),
        redirected: false,
        headers,
        body,
    })
}

/// What went wrong, in a few words: the innermost cause of an HTTP client error (`Connection
/// refused (os error 111)`), which says more than the layers around it.
fn plain(error: &reqwest::Error) -> String {
    let mut innermost: &dyn std::error::Error = error;
    while let Some(cause) = innermost.source() {
        innermost = cause;
    }
    if error.is_timeout() {
        return "timed out".into();
    }
    innermost.to_string()
}
