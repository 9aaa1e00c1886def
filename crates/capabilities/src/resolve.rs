//! Name resolution for `fetch`, behind a trait so tests control what a name resolves to
//! (a name that resolves to loopback, a name with many addresses) without touching the
//! machine's DNS. A resolver takes the policy's proof that the name may be looked up, so no
//! name the grant does not hold is ever sent to DNS.

use std::collections::BTreeMap;
use std::net::IpAddr;

use sandgate_policy::{Authorized, NetLookup};

/// A pinned, boxed, sendable future.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Resolves a host name to addresses.
pub trait Resolve: Send + Sync {
    /// The addresses the approved name has.
    fn resolve(
        &self,
        lookup: &Authorized<NetLookup>,
    ) -> BoxFuture<'_, std::io::Result<Vec<IpAddr>>>;
}

/// The system's resolver (`getaddrinfo`, through tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(
        &self,
        lookup: &Authorized<NetLookup>,
    ) -> BoxFuture<'_, std::io::Result<Vec<IpAddr>>> {
        let NetLookup { host, port } = lookup.get().clone();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), port)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// Fixed answers, for tests: a name not in the map does not resolve.
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    names: BTreeMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    /// A resolver that answers `name` with `addrs`.
    pub fn with(mut self, name: &str, addrs: &[IpAddr]) -> Self {
        self.names.insert(name.to_ascii_lowercase(), addrs.to_vec());
        self
    }
}

impl Resolve for StaticResolver {
    fn resolve(
        &self,
        lookup: &Authorized<NetLookup>,
    ) -> BoxFuture<'_, std::io::Result<Vec<IpAddr>>> {
        let found = self
            .names
            .get(&lookup.get().host.to_ascii_lowercase())
            .cloned();
        Box::pin(async move {
            found.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such name"))
        })
    }
}
