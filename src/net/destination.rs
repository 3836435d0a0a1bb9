//! Where a request goes, as the permission kernel names it, and whether an
//! address is one an agent must not reach without an exact grant.
//!
//! A URL is parsed by the WHATWG rules (the `url` crate), the rules browsers
//! and most HTTP stacks follow, so the numeric host forms parsers disagree on
//! (`http://2130706433/`, `http://0x7f.1/`, `http://127.1/`) become the
//! address they mean (127.0.0.1) before anything is judged, and
//! `http://[::ffff:127.0.0.1]/` is classified by the IPv4 address it maps.

use crate::error::{FlowError, FlowResult};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use url::{Host, Url};

/// A checked request target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub url: Url,
    /// What a `net:get`/`net:post` capability names: `host[:port]` for
    /// https, `scheme://host[:port]` for anything else, so a grant for https
    /// does not cover cleartext http. The port appears when it is not the
    /// scheme's default.
    pub resource: String,
    /// `scheme://host[:port]`, what a `net:private` grant names exactly.
    pub origin: String,
    /// The host as the URL spells it after parsing (brackets for IPv6).
    pub host: String,
    /// The address, when the host is a numeric address.
    pub ip: Option<IpAddr>,
    pub port: u16,
}

/// Parses `text` (input field `field`) as an absolute http or https URL
/// without user information.
pub fn parse(field: &str, text: &str) -> FlowResult<Destination> {
    let url = Url::parse(text).map_err(|e| {
        FlowError::invalid_input(
            field,
            format!("{text:?} is not an absolute URL ({e}); write it whole, e.g. https://example.org/page"),
        )
    })?;
    from_url(field, url)
}

/// A URL already parsed (a redirect's target) as a destination.
pub fn from_url(field: &str, mut url: Url) -> FlowResult<Destination> {
    // `example.org.` is `example.org` to DNS and TLS; one spelling keeps a
    // policy's deny rule for the name from being stepped around.
    if let Some(Host::Domain(d)) = url.host() {
        if d.len() > 1 && d.ends_with('.') {
            let bare = d.trim_end_matches('.').to_string();
            if url.set_host(Some(&bare)).is_err() {
                return Err(FlowError::invalid_input(
                    field,
                    "the URL's host is not valid",
                ));
            }
        }
    }
    if !matches!(url.scheme(), "http" | "https") {
        return Err(FlowError::invalid_input(
            field,
            format!(
                "{url} uses the scheme {:?}; only http and https can be fetched",
                url.scheme()
            ),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(FlowError::invalid_input(
            field,
            "the URL carries user information (user:password@); send credentials in a header instead",
        ));
    }
    let (host, ip) = match url.host() {
        Some(Host::Domain(d)) => (d.to_ascii_lowercase(), None),
        Some(Host::Ipv4(a)) => (a.to_string(), Some(IpAddr::V4(a))),
        // As the URL serializes it (`[::ffff:7f00:1]`), so a policy names
        // the origin the way the URL prints.
        Some(Host::Ipv6(a)) => (
            url.host_str().unwrap_or_default().to_string(),
            Some(IpAddr::V6(a)),
        ),
        None => return Err(FlowError::invalid_input(field, "the URL has no host")),
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let explicit = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    let resource = if url.scheme() == "https" {
        format!("{host}{explicit}")
    } else {
        format!("{}://{host}{explicit}", url.scheme())
    };
    let origin = format!("{}://{host}{explicit}", url.scheme());
    Ok(Destination {
        url,
        resource,
        origin,
        host,
        ip,
        port,
    })
}

/// `localhost` and every name under `.localhost` mean this machine whatever
/// DNS says (RFC 6761), so they are private before any lookup.
pub fn is_localhost_name(host: &str) -> bool {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    h == "localhost" || h.ends_with(".localhost")
}

/// Whether an address is private: loopback, private networks, link-local,
/// shared and benchmarking space, documentation ranges, the 6to4 relay
/// anycast, multicast, reserved and unspecified, and IPv6 forms that carry
/// such an IPv4 address.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => private_v4(a),
        IpAddr::V6(a) => private_v6(a),
    }
}

fn private_v4(a: Ipv4Addr) -> bool {
    let [o1, o2, o3, _] = a.octets();
    o1 == 0
        || o1 == 10
        || o1 == 127
        || (o1 == 169 && o2 == 254)
        || (o1 == 172 && (16..=31).contains(&o2))
        || (o1 == 192 && o2 == 168)
        || (o1 == 192 && o2 == 0 && o3 == 0)
        // Documentation (TEST-NET-1, -2, -3): no public host is there, so a
        // machine that has one has it on its own network.
        || (o1 == 192 && o2 == 0 && o3 == 2)
        || (o1 == 198 && o2 == 51 && o3 == 100)
        || (o1 == 203 && o2 == 0 && o3 == 113)
        // The deprecated 6to4 relay anycast.
        || (o1 == 192 && o2 == 88 && o3 == 99)
        || (o1 == 100 && (64..=127).contains(&o2))
        || (o1 == 198 && (18..=19).contains(&o2))
        || o1 >= 224
}

fn private_v6(a: Ipv6Addr) -> bool {
    let seg = a.segments();
    if a.is_loopback() || a.is_unspecified() {
        return true;
    }
    if teredo_server(a).is_some_and(private_v4) {
        return true;
    }
    if let Some(v4) = embedded_v4(a) {
        return private_v4(v4);
    }
    // The local-use NAT64 prefix translates to whatever its operator chose.
    if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2] == 1 {
        return true;
    }
    (seg[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (seg[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (seg[0] & 0xff00) == 0xff00 // multicast ff00::/8
        || (seg[0] & 0xffc0) == 0xfec0 // deprecated site-local fec0::/10
        || (seg[0] == 0x2001 && seg[1] == 0x0db8) // documentation 2001:db8::/32
        || (seg[0] == 0x3fff && seg[1] < 0x1000) // documentation 3fff::/20
        || (seg[0] == 0x2001 && seg[1] == 2 && seg[2] == 0) // benchmarking 2001:2::/48
}

/// Whether a request to one of `addrs` needs an exact `net:private` grant:
/// a private address ([`is_private`]) or one of this machine's own
/// ([`LocalAddrs::now`], read only when no address is private already).
/// `Err` says why the machine's addresses could not be read; the request
/// must not go then.
pub fn needs_private_grant(addrs: &[IpAddr]) -> Result<bool, String> {
    if addrs.iter().any(|a| is_private(*a)) {
        return Ok(true);
    }
    let local = LocalAddrs::now()?;
    Ok(addrs.iter().any(|a| local.holds(*a)))
}

/// The addresses this machine's interfaces hold at one moment, IPv4 and
/// IPv6 (link-local and global alike).
///
/// Read afresh for every check (each request and each redirect hop): an
/// address added while a run goes on counts from its next request. A read
/// is one `getifaddrs` call, a netlink dump: about 45 µs with four
/// interfaces (measured in a debug build), small beside the connection it
/// guards, and made only when no address is private by its range. A cache
/// would be stale exactly when an address has just been added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalAddrs(Vec<IpAddr>);

impl LocalAddrs {
    /// The machine's addresses now.
    pub fn now() -> Result<LocalAddrs, String> {
        let found = nix::ifaddrs::getifaddrs()
            .map_err(|e| format!("cannot list this machine's own addresses (getifaddrs: {e})"))?;
        let addrs = found.filter_map(|i| i.address).filter_map(|a| {
            match (a.as_sockaddr_in(), a.as_sockaddr_in6()) {
                (Some(v4), _) => Some(IpAddr::V4(v4.ip())),
                (_, Some(v6)) => Some(IpAddr::V6(v6.ip())),
                _ => None,
            }
        });
        Ok(LocalAddrs::from_addrs(addrs))
    }

    /// A set given whole, for tests and embedders.
    pub fn from_addrs(addrs: impl IntoIterator<Item = IpAddr>) -> LocalAddrs {
        let mut list: Vec<IpAddr> = addrs.into_iter().collect();
        list.sort();
        list.dedup();
        LocalAddrs(list)
    }

    /// The addresses, sorted.
    #[cfg(test)]
    pub fn addrs(&self) -> &[IpAddr] {
        &self.0
    }

    /// Whether `ip` is one of the machine's addresses, or an IPv6 form
    /// carrying one (mapped, compatible, NAT64, 6to4, Teredo), which
    /// reaches the same host.
    pub fn holds(&self, ip: IpAddr) -> bool {
        let embedded = match ip {
            IpAddr::V6(a) => embedded_v4(a).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        self.0.contains(&ip) || embedded.is_some_and(|v4| self.0.contains(&v4))
    }
}

/// The IPv4 address an IPv6 address stands for: mapped (`::ffff:a.b.c.d`),
/// compatible (`::a.b.c.d`) and the NAT64 well-known prefix
/// (`64:ff9b::a.b.c.d`), all of which reach the IPv4 host.
fn embedded_v4(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = a.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    let v4 = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0, 0, _, _] => Some(tail),
        // SIIT's IPv4-translated form.
        [0, 0, 0, 0, 0xffff, 0, _, _] => Some(tail),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(tail),
        // 6to4 carries the IPv4 address right after its prefix.
        [0x2002, hi, lo, ..] => Some(v4(hi, lo)),
        // Teredo carries the client's address, inverted, at the end.
        [0x2001, 0, ..] => Some(v4(!s[6], !s[7])),
        _ => None,
    }
}

/// Teredo also names its server; a private one is as bad as a private client.
fn teredo_server(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = a.segments();
    (s[0] == 0x2001 && s[1] == 0)
        .then(|| Ipv4Addr::new((s[2] >> 8) as u8, s[2] as u8, (s[3] >> 8) as u8, s[3] as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn every_private_range_is_private() {
        for a in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "127.0.0.1",
            "127.255.255.254",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "192.0.0.8",
            "100.64.0.1",
            "100.127.255.255",
            "198.18.0.1",
            "198.19.255.255",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "::ffff:0:a9fe:a9fe",
            "2002:0a00:0001::",
            "2002:c0a8:0101::1",
            "2001:0:4136:e378:8000:63bf:f5ff:fffe",
            "2001:0:0a00:0001:8000:63bf:3fff:fdd2",
            "64:ff9b:1::8.8.8.8",
            "192.0.2.0",
            "192.0.2.2",
            "192.0.2.255",
            "198.51.100.1",
            "203.0.113.255",
            "192.88.99.1",
            "2001:db8::1",
            "2001:db8:ffff::1",
            "3fff::1",
            "3fff:fff:ffff::1",
            "2001:2::1",
            "::ffff:192.0.2.2",
            "::c000:202",
            "64:ff9b::c000:202",
            "2002:c000:202::1",
            "::ffff:203.0.113.7",
        ] {
            assert!(is_private(ip(a)), "{a} should be private");
        }
    }

    #[test]
    fn public_addresses_are_not_private() {
        for a in [
            "1.1.1.1",
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "198.17.255.255",
            "198.20.0.1",
            "192.0.1.1",
            "223.255.255.255",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:0808:0808::1",
            "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
            // Beside the documentation ranges and the 6to4 relay anycast.
            "192.0.1.255",
            "192.0.3.0",
            "198.51.99.255",
            "198.51.101.0",
            "203.0.112.255",
            "203.0.114.0",
            "192.88.98.255",
            "192.88.100.0",
            "2001:db7:ffff::1",
            "2001:db9::1",
            "3fff:1000::1",
            "3ffe:ffff::1",
            "2001:3::1",
        ] {
            assert!(!is_private(ip(a)), "{a} should be public");
        }
    }

    #[test]
    fn numeric_host_forms_mean_the_address_they_name() {
        for text in [
            "http://2130706433/",
            "http://0x7f.1/",
            "http://127.1/",
            "http://0177.0.0.1/",
            "http://127.0.0.1./",
        ] {
            let d = parse("url", text).unwrap();
            assert_eq!(d.ip, Some(ip("127.0.0.1")), "{text}");
            assert_eq!(d.resource, "http://127.0.0.1", "{text}");
        }
        let d = parse("url", "http://[::ffff:127.0.0.1]:8080/x").unwrap();
        assert!(is_private(d.ip.unwrap()));
        assert_eq!(d.origin, "http://[::ffff:7f00:1]:8080");
    }

    #[test]
    fn numeric_forms_of_a_documentation_address_mean_it() {
        for text in [
            "http://3221225986/",
            "http://0300.0.02.02/",
            "http://0xc0.0x0.0x2.0x2/",
            "http://0xc0000202/",
            "http://192.0.514/",
            "http://192.514/",
        ] {
            let d = parse("url", text).unwrap();
            assert_eq!(d.ip, Some(ip("192.0.2.2")), "{text}");
            assert!(is_private(d.ip.unwrap()), "{text}");
        }
    }

    #[test]
    fn the_machine_s_own_addresses_and_every_form_carrying_one_are_held() {
        let local = LocalAddrs::from_addrs([ip("100.128.0.1"), ip("2606:4700::7")]);
        for a in [
            "100.128.0.1",
            "::ffff:100.128.0.1",
            "::100.128.0.1",
            "::ffff:0:100.128.0.1",
            "64:ff9b::100.128.0.1",
            "2002:6480:1::1",
            "2001:0:4136:e378:8000:63bf:9b7f:fffe",
            "2606:4700::7",
        ] {
            assert!(local.holds(ip(a)), "{a} is this machine");
        }
        for a in [
            "100.128.0.2",
            "::ffff:100.128.0.2",
            "2606:4700::8",
            "8.8.8.8",
        ] {
            assert!(!local.holds(ip(a)), "{a} is not this machine");
        }
    }

    #[test]
    fn the_machine_s_addresses_are_read_from_its_interfaces() {
        let local = LocalAddrs::now().unwrap();
        assert!(local.holds(ip("127.0.0.1")), "{local:?}");
        // Whatever ranges they are in, every one of them needs the grant.
        for a in local.addrs() {
            assert!(needs_private_grant(&[*a]).unwrap(), "{a}");
        }
    }

    #[test]
    fn resources_name_the_scheme_unless_https_and_the_port_unless_default() {
        let r = |u: &str| parse("url", u).unwrap().resource;
        assert_eq!(r("https://Example.ORG/a?b"), "example.org");
        assert_eq!(r("https://example.org:8443/"), "example.org:8443");
        assert_eq!(r("http://example.org/"), "http://example.org");
        assert_eq!(r("http://example.org:80/"), "http://example.org");
        assert_eq!(r("http://example.org:8080/"), "http://example.org:8080");
        let o = parse("url", "https://example.org/x").unwrap().origin;
        assert_eq!(o, "https://example.org");
        let dotted = parse("url", "https://Example.ORG./x").unwrap();
        assert_eq!(dotted.resource, "example.org");
        assert_eq!(dotted.url.as_str(), "https://example.org/x");
    }

    #[test]
    fn bad_urls_are_invalid_input_naming_the_field() {
        for bad in [
            "example.org/page",
            "/relative",
            "ftp://example.org/",
            "file:///etc/passwd",
            "https://user:pw@example.org/",
            "https://user@example.org/",
        ] {
            let e = parse("url", bad).unwrap_err();
            assert_eq!(e.code, crate::error::ErrorCode::InvalidInput, "{bad}");
            assert_eq!(e.details["field"], "url", "{bad}");
        }
    }

    #[test]
    fn localhost_names() {
        for h in ["localhost", "LOCALHOST", "localhost.", "a.b.localhost"] {
            assert!(is_localhost_name(h), "{h}");
        }
        for h in ["localhost.example.org", "notlocalhost", "example.org"] {
            assert!(!is_localhost_name(h), "{h}");
        }
    }
}
