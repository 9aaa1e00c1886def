//! Network grants for the host-side `fetch`: which `host[:port]` a profile may reach, and which
//! addresses are too sensitive to reach through a name.
//!
//! The check runs on the address a name resolved to, not on the name, so DNS rebinding and the
//! many spellings of an address (`0x7f000001`, `2130706433`, `[::ffff:127.0.0.1]`) all end at
//! [`classify`]. Loopback, private, link-local, CGNAT, multicast, unspecified and reserved
//! addresses (cloud metadata endpoints among them) are reached only through a grant that names
//! the address itself.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::glob::glob_match;

/// What kind of address a connection would go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// A routable public address.
    Public,
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16, fc00::/7.
    Private,
    /// 169.254/16 (cloud metadata lives here), fe80::/10.
    LinkLocal,
    /// 100.64/10, carrier-grade NAT (some clouds' metadata lives here).
    SharedCgnat,
    /// 224/4, ff00::/8.
    Multicast,
    /// 0.0.0.0/8, `::`: "this host" on most systems.
    Unspecified,
    /// Broadcast, documentation, benchmarking and other reserved ranges.
    Reserved,
}

impl AddressClass {
    /// How the class reads in a denial ("a loopback address").
    pub fn described(self) -> &'static str {
        match self {
            AddressClass::Public => "a public address",
            AddressClass::Loopback => "a loopback address",
            AddressClass::Private => "a private address",
            AddressClass::LinkLocal => "a link-local address (cloud metadata lives there)",
            AddressClass::SharedCgnat => "a carrier-grade NAT address",
            AddressClass::Multicast => "a multicast address",
            AddressClass::Unspecified => "the unspecified address (this host)",
            AddressClass::Reserved => "a reserved address",
        }
    }
}

/// The class of `addr`. IPv4 addresses carried in IPv6 (mapped, compatible, NAT64, 6to4) are
/// classed by the IPv4 address they carry.
pub fn classify(addr: IpAddr) -> AddressClass {
    match addr {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let [a, b, c, _] = ip.octets();
    match (a, b) {
        (0, _) => AddressClass::Unspecified,
        (127, _) => AddressClass::Loopback,
        (10, _) | (192, 168) => AddressClass::Private,
        (172, 16..=31) => AddressClass::Private,
        (169, 254) => AddressClass::LinkLocal,
        (100, 64..=127) => AddressClass::SharedCgnat,
        (224..=239, _) => AddressClass::Multicast,
        (240..=255, _) => AddressClass::Reserved,
        (192, 0) if c == 0 || c == 2 => AddressClass::Reserved,
        (198, 18 | 19) => AddressClass::Reserved,
        (198, 51) if c == 100 => AddressClass::Reserved,
        (203, 0) if c == 113 => AddressClass::Reserved,
        _ => AddressClass::Public,
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    let first = ip.segments()[0];
    if ip.is_unspecified() {
        AddressClass::Unspecified
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if first & 0xfe00 == 0xfc00 {
        AddressClass::Private
    } else if first & 0xffc0 == 0xfe80 {
        AddressClass::LinkLocal
    } else if first & 0xff00 == 0xff00 {
        AddressClass::Multicast
    } else if first == 0x2001 && ip.segments()[1] == 0x0db8 || first & 0xe000 != 0x2000 {
        // Documentation, and everything outside global unicast (2000::/3).
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

/// The IPv4 address an IPv6 address carries: `::ffff:a.b.c.d`, `::a.b.c.d`, `64:ff9b::a.b.c.d`
/// (NAT64) and `2002:aabb:ccdd::` (6to4).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = || Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..5] == [0, 0, 0, 0, 0] && (s[5] == 0xffff || (s[5] == 0 && s[6] != 0)) {
        return Some(tail());
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail());
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

/// One `net` entry: a host (a name, `*.suffix`, or an address) and an optional port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Lowercase host name or pattern, or an address's text (IPv6 without brackets).
    host: String,
    /// The host parsed as an address, when it is one: then it may name a sensitive address.
    literal: Option<IpAddr>,
    /// `None`: any port.
    port: Option<u16>,
    /// The entry as written, for messages.
    written: String,
}

impl HostPattern {
    /// Parses `api.github.com`, `api.github.com:443`, `*.example.com`, `127.0.0.1:8080` or
    /// `[::1]:8080`.
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let written = text.to_string();
        let text = text.trim();
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("`{text}` opens `[` without closing it"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| {
                    format!("`{text}`: write the port after the address as [addr]:port")
                })?),
            };
            (host.to_string(), port)
        } else {
            match text.rsplit_once(':') {
                Some((host, port)) if !host.contains(':') => (host.to_string(), Some(port)),
                Some(_) => (text.to_string(), None),
                None => (text.to_string(), None),
            }
        };
        let port = match port {
            None | Some("*") => None,
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|&p| p > 0)
                    .ok_or_else(|| format!("`{text}` has port `{p}`, which is not 1 to 65535"))?,
            ),
        };
        let host = host.to_ascii_lowercase();
        if host.is_empty()
            || host.contains(['/', '@', '?', '#', ' '])
            || host
                .strip_prefix("*.")
                .unwrap_or(if host == "*" { "" } else { &host })
                .contains('*')
        {
            return Err(format!(
                "`{text}` is not a host pattern: write a host name (`api.github.com`), `*.example.com`, or an address, each with an optional `:port`"
            ));
        }
        let literal = host.parse::<IpAddr>().ok();
        Ok(HostPattern {
            host,
            literal,
            port,
            written,
        })
    }

    fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (self.literal, host.parse::<IpAddr>()) {
            (Some(a), Ok(b)) => a == b,
            (Some(_), Err(_)) => false,
            (None, _) if self.host.starts_with("*.") => {
                glob_match(&self.host, host) && host.len() > self.host.len() - 1
            }
            (None, _) => self.host == "*" || self.host == host,
        }
    }

    /// Whether this (name) entry matches host `name`.
    fn matches_name(&self, name: &str) -> bool {
        self.literal.is_none()
            && if self.host.starts_with("*.") {
                glob_match(&self.host, name) && name.len() > self.host.len() - 1
            } else {
                self.host == "*" || self.host == name
            }
    }

    /// The entry as written.
    pub fn written(&self) -> &str {
        &self.written
    }
}

/// A host name the policy allows `fetch` to look up: an entry names it (or a wildcard that
/// holds it) with a matching port. A grant of addresses only never looks a name up, so code
/// cannot send data out through DNS queries for names the grant does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetLookup {
    /// The host name, as the URL names it.
    pub host: String,
    /// The port the connection would go to.
    pub port: u16,
}

/// A connection the policy allowed: this host name and port, to this address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetTarget {
    /// The host as the URL names it.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The resolved address the connection must go to.
    pub addr: IpAddr,
}

/// A profile's `net` entries. Empty: no network at all.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetGrant {
    patterns: Vec<HostPattern>,
}

impl NetGrant {
    /// A grant of these patterns.
    pub fn new(patterns: Vec<HostPattern>) -> NetGrant {
        NetGrant { patterns }
    }

    /// Whether any host is granted (else `fetch` does not exist in the guest).
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether everything `entry` could reach, some entry of this grant reaches too: a stored
    /// tool may declare only what its owner's profile holds. A sensitive address must be named
    /// by an entry that names it; a wildcard only by a wildcard that contains it.
    pub fn covers(&self, entry: &HostPattern) -> bool {
        self.patterns.iter().any(|p| {
            let port = match (p.port, entry.port) {
                (None, _) => true,
                (Some(a), Some(b)) => a == b,
                (Some(_), None) => false,
            };
            let host = match (entry.literal, p.literal) {
                (Some(a), Some(b)) => same_address(a, b),
                (Some(a), None) => {
                    classify(a) == AddressClass::Public && p.matches_name(&entry.host)
                }
                (None, _) if entry.host == "*" => p.host == "*",
                (None, _) if entry.host.starts_with("*.") => {
                    p.host == "*"
                        || p.host.starts_with("*.") && entry.host[1..].ends_with(&p.host[1..])
                }
                (None, Some(_)) => false,
                (None, None) => p.matches_name(&entry.host),
            };
            port && host
        })
    }

    /// The entries, as written.
    pub fn written(&self) -> Vec<&str> {
        self.patterns.iter().map(HostPattern::written).collect()
    }

    /// The entry that lets the name `host` be looked up for `host:port`, or why none does
    /// (an address-only grant lets no name be looked up).
    pub(crate) fn check_lookup(&self, host: &str, port: u16) -> Result<&str, String> {
        self.patterns
            .iter()
            .find(|p| p.port.is_none_or(|q| q == port) && p.matches_name(host))
            .map(HostPattern::written)
            .ok_or_else(|| {
                format!("`{host}:{port}` matches no entry, so the name is not looked up")
            })
    }

    /// The entry that lets `host:port` reach `addr`, or why none does.
    pub(crate) fn check(&self, host: &str, port: u16, addr: IpAddr) -> Result<&str, String> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let Some(pattern) = self.patterns.iter().find(|p| p.matches(host, port)) else {
            return Err(format!("`{host}:{port}` matches no entry"));
        };
        let class = classify(addr);
        if class == AddressClass::Public {
            return Ok(pattern.written());
        }
        // A sensitive address only through an entry that names it, with a matching port.
        let named = self.patterns.iter().find(|p| {
            p.literal.is_some_and(|l| same_address(l, addr)) && p.port.is_none_or(|q| q == port)
        });
        match named {
            Some(p) => Ok(p.written()),
            None => Err(format!(
                "`{host}` resolves to {addr}, {}, which is reached only through an entry naming the address itself (e.g. \"{}\")",
                class.described(),
                literal_entry(addr, port)
            )),
        }
    }
}

/// Two addresses are the same if they are equal or one is the other carried in IPv6.
fn same_address(a: IpAddr, b: IpAddr) -> bool {
    let plain = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    plain(a) == plain(b)
}

fn literal_entry(addr: IpAddr, port: u16) -> String {
    match addr {
        IpAddr::V4(v4) => format!("{v4}:{port}"),
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(entries: &[&str]) -> NetGrant {
        NetGrant::new(
            entries
                .iter()
                .map(|e| HostPattern::parse(e).expect(e))
                .collect(),
        )
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect(text)
    }

    #[test]
    fn classes_cover_every_alias_of_sensitive_addresses() {
        for (text, class) in [
            ("127.0.0.1", AddressClass::Loopback),
            ("127.1.2.3", AddressClass::Loopback),
            ("::1", AddressClass::Loopback),
            ("::ffff:127.0.0.1", AddressClass::Loopback),
            ("::127.0.0.1", AddressClass::Loopback),
            ("64:ff9b::7f00:1", AddressClass::Loopback),
            ("2002:7f00:1::", AddressClass::Loopback),
            ("0.0.0.0", AddressClass::Unspecified),
            ("::", AddressClass::Unspecified),
            ("10.1.2.3", AddressClass::Private),
            ("172.31.0.1", AddressClass::Private),
            ("192.168.1.1", AddressClass::Private),
            ("fd00:ec2::254", AddressClass::Private),
            ("169.254.169.254", AddressClass::LinkLocal),
            ("fe80::1", AddressClass::LinkLocal),
            ("100.100.100.200", AddressClass::SharedCgnat),
            ("224.0.0.1", AddressClass::Multicast),
            ("ff02::1", AddressClass::Multicast),
            ("255.255.255.255", AddressClass::Reserved),
            ("8.8.8.8", AddressClass::Public),
            ("2606:4700::1111", AddressClass::Public),
            ("172.32.0.1", AddressClass::Public),
        ] {
            assert_eq!(classify(ip(text)), class, "{text}");
        }
    }

    #[test]
    fn hosts_and_ports_match_their_entries() {
        let g = grant(&["api.github.com:443", "*.example.com", "127.0.0.1:8080"]);
        assert!(g.check("api.github.com", 443, ip("140.82.112.5")).is_ok());
        assert!(g.check("api.github.com", 80, ip("140.82.112.5")).is_err());
        assert!(
            g.check("a.b.example.com", 1234, ip("93.184.216.34"))
                .is_ok()
        );
        assert!(g.check("example.com", 443, ip("93.184.216.34")).is_err());
        assert!(
            g.check("evilexample.com", 443, ip("93.184.216.34"))
                .is_err()
        );
        assert!(g.check("127.0.0.1", 8080, ip("127.0.0.1")).is_ok());
        assert!(g.check("127.0.0.1", 8081, ip("127.0.0.1")).is_err());
    }

    #[test]
    fn a_granted_name_that_resolves_to_a_sensitive_address_is_refused() {
        let g = grant(&["*.example.com", "127.0.0.1:8080"]);
        let err = g.check("rebind.example.com", 8080, ip("127.0.0.1"));
        // 127.0.0.1:8080 is granted literally, so the connection to it is allowed
        // whichever name led there; any other sensitive address is not.
        assert!(err.is_ok());
        let err = g
            .check("rebind.example.com", 80, ip("169.254.169.254"))
            .expect_err("metadata");
        assert!(err.contains("link-local"), "{err}");
        let err = g
            .check("rebind.example.com", 80, ip("::ffff:10.0.0.1"))
            .expect_err("mapped");
        assert!(err.contains("private"), "{err}");
    }

    #[test]
    fn only_names_an_entry_holds_are_looked_up() {
        let literal = grant(&["127.0.0.1:8080", "[::1]"]);
        for name in ["localhost", "data.attacker.example", "127.0.0.1.nip.io"] {
            assert!(literal.check_lookup(name, 8080).is_err(), "{name}");
        }
        let g = grant(&["*.example.com", "api.github.com:443"]);
        assert!(g.check_lookup("a.b.example.com", 1).is_ok());
        assert!(g.check_lookup("api.github.com", 443).is_ok());
        for (name, port) in [
            ("api.github.com", 80),
            ("example.com", 443),
            ("x.attacker.example", 443),
            ("evilexample.com", 443),
        ] {
            assert!(g.check_lookup(name, port).is_err(), "{name}:{port}");
        }
    }

    #[test]
    fn a_grant_covers_only_what_it_reaches() {
        let g = grant(&["api.github.com:443", "*.example.com", "127.0.0.1:8080"]);
        let covered = |e: &str| g.covers(&HostPattern::parse(e).expect(e));
        assert!(covered("api.github.com:443"));
        assert!(!covered("api.github.com"), "any port is more than port 443");
        assert!(covered("a.example.com:80") && covered("*.b.example.com"));
        assert!(!covered("example.com") && !covered("*.com") && !covered("*"));
        assert!(covered("127.0.0.1:8080") && !covered("127.0.0.1:9090") && !covered("10.0.0.1"));
    }

    #[test]
    fn bad_entries_are_refused_with_the_form_to_use() {
        for bad in [
            "",
            "http://x",
            "a*b.com",
            "é*",
            "*.*.x",
            "x.com:0",
            "x.com:99999",
            "[::1",
            "user@x.com",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad}");
        }
        assert!(HostPattern::parse("[::1]:8080").is_ok());
        assert!(HostPattern::parse("::1").is_ok());
    }
}
