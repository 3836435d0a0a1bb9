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
/// shared and benchmarking space, multicast, reserved and unspecified, and
/// IPv6 forms that carry such an IPv4 address.
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
