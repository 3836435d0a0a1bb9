//! The DNS seam: how a host name becomes the addresses that are checked and
//! then connected to. The system resolver by default; a fixed map of names
//! to addresses ([`Hosts`]) for tests, embedders and `sluice run --resolve`.
//! Every check runs on what the seam returns, and a request connects only
//! to those addresses, so there is no second lookup to race.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

/// A pending lookup: the addresses, or why there are none.
pub type Lookup<'a> = Pin<Box<dyn Future<Output = Result<Vec<IpAddr>, String>> + Send + 'a>>;

/// Resolves host names.
pub trait Dns: fmt::Debug + Send + Sync {
    /// The addresses `host` resolves to. A request checks them (a private
    /// address needs `net:private`) and connects only to them; an `Err` is
    /// why the name does not resolve, which the failed call's message
    /// quotes. Not asked for IP literals or `localhost` (nor `*.localhost`).
    fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a>;
}

/// The operating system's resolver (getaddrinfo on a blocking thread).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemDns;

impl Dns for SystemDns {
    fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host, 0))
                .await
                .map_err(|e| e.to_string())?;
            let mut ips: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
            ips.dedup();
            Ok(ips)
        })
    }
}

/// A fixed map of names to addresses; names not in it go to the fallback
/// (none: they do not resolve).
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    map: HashMap<String, Vec<IpAddr>>,
    fallback: Option<Arc<dyn Dns>>,
}

impl Hosts {
    /// An empty map that resolves nothing else.
    #[cfg(test)]
    pub fn new() -> Hosts {
        Hosts::default()
    }

    /// An empty map that sends other names to the system resolver.
    pub fn over_system() -> Hosts {
        Hosts {
            map: HashMap::new(),
            fallback: Some(Arc::new(SystemDns)),
        }
    }

    /// `host` resolves to `addrs` (case-insensitive; a trailing dot is
    /// ignored).
    pub fn insert(&mut self, host: &str, addrs: Vec<IpAddr>) {
        self.map.insert(normal(host), addrs);
    }

    /// Adds one `HOST=ADDR[,ADDR...]` entry, the form of `--resolve`.
    pub fn add_entry(&mut self, entry: &str) -> Result<(), String> {
        let (host, addrs) = entry.split_once('=').ok_or_else(|| {
            format!("{entry:?}: write HOST=ADDRESS[,ADDRESS...], e.g. api.test=127.0.0.1")
        })?;
        if host.is_empty() {
            return Err(format!("{entry:?}: the host name is empty"));
        }
        let addrs = addrs
            .split(',')
            .map(|a| {
                let a = a.trim().trim_start_matches('[').trim_end_matches(']');
                a.parse::<IpAddr>()
                    .map_err(|_| format!("{entry:?}: {a:?} is not an IP address"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.insert(host, addrs);
        Ok(())
    }
}

fn normal(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

impl Dns for Hosts {
    fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a> {
        Box::pin(async move {
            if let Some(addrs) = self.map.get(&normal(host)) {
                return Ok(addrs.clone());
            }
            match &self.fallback {
                Some(dns) => dns.lookup(host).await,
                None => Err(format!("{host} is not in the hosts map")),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn hosts_map_resolves_its_names_only() {
        let mut h = Hosts::new();
        h.add_entry("API.test.=127.0.0.1,[::1]").unwrap();
        let got = h.lookup("api.test").await.unwrap();
        assert_eq!(
            got,
            vec![
                "127.0.0.1".parse::<IpAddr>().unwrap(),
                "::1".parse().unwrap()
            ]
        );
        assert!(h.lookup("other.test").await.is_err());
        assert!(h
            .add_entry("x=notanip")
            .unwrap_err()
            .contains("not an IP address"));
        assert!(h
            .add_entry("noequals")
            .unwrap_err()
            .contains("HOST=ADDRESS"));
    }
}
