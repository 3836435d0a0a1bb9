//! The one HTTP client every network flow uses.
//!
//! Each hop of a request, the first and every redirect, goes through the
//! same steps, in this order:
//!
//! 1. authorize `net:get:RESOURCE` or `net:post:RESOURCE` (see
//!    [`Destination::resource`]) before any DNS or transport; the first hop
//!    was authorized by the pipeline with the call's envelope;
//! 2. resolve the host through the [`Dns`] seam (`localhost` names and
//!    numeric hosts need no lookup); no address is `request_failed`;
//! 3. if any address is private, or one of this machine's own (read from
//!    its interfaces at this moment, in any IPv6 form carrying it), authorize
//!    `net:private:ORIGIN`, which only a rule naming that origin exactly
//!    grants;
//! 4. connect only to those addresses (pinned: the connection cannot be
//!    steered by a second lookup), with the host name kept for `Host` and
//!    TLS, through no proxy; a loopback address inside the run's sandboxes
//!    first, where a server a command started listens ([`super::inside`]);
//! 5. a redirect is followed here, not by the HTTP library, so the next hop
//!    starts again at 1; once a hop leaves the first origin, only plain
//!    headers ([`PLAIN_HEADERS`]: `accept`, `user-agent`, ...) are still
//!    sent: `authorization`, `cookie` and every key or token header stay
//!    behind, for the rest of the chain.
//!
//! One deadline bounds every hop and the body read (`timeout`); a body over
//! [`MAX_BODY`] is `response_too_large`, judged on `content-length` first and
//! then while reading.

use super::destination::{self, is_localhost_name, needs_private_grant, Destination};
use super::dns::{Dns, SystemDns};
use super::inside::{self, Inside};
use super::search::Provider;
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::kernel::gate::Authority;
use crate::kernel::{Action, Capability};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use url::Url;

/// The largest response body read: 5 MiB.
pub const MAX_BODY: u64 = 5 * 1024 * 1024;
/// Seconds a request may take when the caller does not say.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// The most a caller may ask for.
pub const MAX_TIMEOUT_SECS: u64 = 120;

/// Per-run network services: the DNS seam, and the search provider the
/// host bound for `websearch` (none by default).
#[derive(Debug, Clone)]
pub struct Net {
    dns: Arc<dyn Dns>,
    search: Option<Arc<dyn Provider>>,
    /// The network namespace of the run's sandboxes, when it has one.
    inside: Option<Arc<dyn Inside>>,
}

impl Default for Net {
    fn default() -> Self {
        Net::new(Arc::new(SystemDns))
    }
}

/// GET or POST: what the request does, and which capability it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
}

impl Method {
    fn action(self) -> Action {
        match self {
            Method::Get => Action::NetGet,
            Method::Post => Action::NetPost,
        }
    }
}

/// A request about to leave. Its `Debug` shows header names only: their
/// values are often credentials.
#[derive(Clone)]
pub struct Outgoing {
    pub method: Method,
    pub dest: Destination,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub timeout: Duration,
    /// Redirects to follow; 0 returns a 3xx as it came.
    pub max_redirects: usize,
    /// Whether a server inside the run's sandboxes may answer it (see
    /// [`super::inside`]): never for one that carries a credential.
    pub inside: bool,
}

impl fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Outgoing")
            .field("method", &self.method)
            .field("url", &self.dest.url.as_str())
            .field("headers", &names)
            .field("body_bytes", &self.body.as_ref().map(Vec::len))
            .field("timeout", &self.timeout)
            .field("max_redirects", &self.max_redirects)
            .field("inside", &self.inside)
            .finish()
    }
}

/// A response, its body read whole (at most [`MAX_BODY`]).
#[derive(Debug, Clone)]
pub struct Incoming {
    /// Where the last hop went.
    pub url: Url,
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Incoming {
    pub fn content_type(&self) -> Option<&str> {
        self.headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
    }

    /// The body as text, decoded by the charset the content type names
    /// (UTF-8 when it names none); undecodable bytes become U+FFFD.
    pub fn text(&self) -> String {
        let label = self.content_type().and_then(charset);
        let encoding = label
            .and_then(|l| encoding_rs::Encoding::for_label(l.as_bytes()))
            .unwrap_or(encoding_rs::UTF_8);
        encoding.decode(&self.body).0.into_owned()
    }
}

/// A response whose body is still to come ([`Net::open`]).
#[derive(Debug)]
pub struct Opened {
    pub url: Url,
    resp: reqwest::Response,
}

impl Opened {
    pub fn status(&self) -> u16 {
        self.resp.status().as_u16()
    }

    pub fn headers(&self) -> &HeaderMap {
        self.resp.headers()
    }

    /// The next piece of the body; `None` at its end. A connection cut
    /// mid-way is `request_failed`.
    pub async fn chunk(&mut self) -> FlowResult<Option<Vec<u8>>> {
        let piece = self.resp.chunk().await.map_err(|e| {
            FlowError::new(
                ErrorCode::RequestFailed,
                format!("reading the response from {} failed: {}", self.url, why(&e)),
            )
        })?;
        Ok(piece.map(|b| b.to_vec()))
    }

    /// The rest of the body, at most [`MAX_BODY`] bytes.
    pub async fn body(self) -> FlowResult<Incoming> {
        read(self.url, self.resp).await
    }
}

/// The `charset` parameter of a content type.
fn charset(content_type: &str) -> Option<&str> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches('"'))
    })
}

impl Net {
    pub fn new(dns: Arc<dyn Dns>) -> Net {
        Net {
            dns,
            search: None,
            inside: None,
        }
    }

    /// This client reaching loopback addresses inside the run's sandboxes
    /// first (see [`super::inside`]).
    pub fn with_inside(mut self, inside: Arc<dyn Inside>) -> Net {
        self.inside = Some(inside);
        self
    }

    /// This client with `provider` answering `websearch`.
    pub fn with_search(mut self, provider: Arc<dyn Provider>) -> Net {
        self.search = Some(provider);
        self
    }

    /// The bound search provider, if any.
    pub fn search(&self) -> Option<&Arc<dyn Provider>> {
        self.search.as_ref()
    }

    /// Sends `req` under the call's gate, following redirects as the module
    /// doc describes.
    pub async fn send(&self, req: Outgoing, auth: &dyn Authority) -> FlowResult<Incoming> {
        let secs = req.timeout.as_secs_f64();
        let deadline = Instant::now() + req.timeout;
        match tokio::time::timeout_at(deadline, self.exchange(req, auth)).await {
            Ok(result) => result,
            Err(_) => Err(FlowError::new(
                ErrorCode::Timeout,
                format!("no complete response within {secs} s; raise `timeout` (seconds, at most {MAX_TIMEOUT_SECS})"),
            )
            .with("timeout", secs)),
        }
    }

    /// Sends `req` once, without following redirects (a 3xx is the
    /// answer), and hands back the response before its body is read, for a
    /// caller that reads it as it arrives (a model's stream). The caller
    /// bounds it in time; the destination checks and pinning are
    /// [`Net::send`]'s.
    pub async fn open(&self, req: Outgoing, auth: &dyn Authority) -> FlowResult<Opened> {
        let addrs = self.addresses(&req.dest, auth).await?;
        let hop = Hop {
            dest: &req.dest,
            addrs: &addrs,
            method: req.method,
            headers: &req.headers,
            crossed: false,
            inside: req.inside,
        };
        let resp = self.transmit(hop, req.body).await?;
        Ok(Opened {
            url: req.dest.url,
            resp,
        })
    }

    async fn exchange(&self, req: Outgoing, auth: &dyn Authority) -> FlowResult<Incoming> {
        let first_origin = req.dest.origin.clone();
        let mut dest = req.dest;
        let mut method = req.method;
        let mut body = req.body;
        let mut hop = 0;
        // Once a hop has left the first origin, credentials stay behind,
        // even if a later hop comes back.
        let mut crossed = false;
        loop {
            if hop > 0 {
                auth.authorize(&Capability {
                    action: method.action(),
                    resource: dest.resource.clone(),
                })?;
            }
            let addrs = self.addresses(&dest, auth).await?;
            crossed |= dest.origin != first_origin;
            let this = Hop {
                dest: &dest,
                addrs: &addrs,
                method,
                headers: &req.headers,
                crossed,
                inside: req.inside,
            };
            let resp = self.transmit(this, body.clone()).await?;
            let status = resp.status().as_u16();
            let location = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(str::to_string);
            match (is_redirect(status), location) {
                (true, Some(loc)) if req.max_redirects > 0 => {
                    if hop == req.max_redirects {
                        return Err(FlowError::new(
                            ErrorCode::RequestFailed,
                            format!(
                                "stopped after {} redirects (the last one from {} to {loc})",
                                hop, dest.url
                            ),
                        ));
                    }
                    dest = next_hop(&dest.url, &loc)?;
                    // 303, and 301/302 after a POST, continue as a GET.
                    if status == 303 || (method == Method::Post && matches!(status, 301 | 302)) {
                        method = Method::Get;
                        body = None;
                    }
                    hop += 1;
                }
                _ => return read(dest.url, resp).await,
            }
        }
    }

    /// Steps 2 and 3: the addresses to connect to, after the private check.
    async fn addresses(&self, dest: &Destination, auth: &dyn Authority) -> FlowResult<Vec<IpAddr>> {
        let addrs = match dest.ip {
            Some(ip) => vec![ip],
            None if is_localhost_name(&dest.host) => {
                vec![
                    IpAddr::V4(Ipv4Addr::LOCALHOST),
                    IpAddr::V6(Ipv6Addr::LOCALHOST),
                ]
            }
            None => {
                let found = self.dns.lookup(&dest.host).await.map_err(|e| {
                    FlowError::new(
                        ErrorCode::RequestFailed,
                        format!("cannot resolve {}: {e}", dest.host),
                    )
                    .with("host", dest.host.clone())
                })?;
                if found.is_empty() {
                    return Err(FlowError::new(
                        ErrorCode::RequestFailed,
                        format!("{} resolves to no address", dest.host),
                    )
                    .with("host", dest.host.clone()));
                }
                found
            }
        };
        let private = is_localhost_name(&dest.host)
            || needs_private_grant(&addrs).map_err(|e| {
                FlowError::new(
                    ErrorCode::RequestFailed,
                    format!("{e}, which a request may reach only with a net:private grant: nothing was sent to {}", dest.origin),
                )
            })?;
        if private {
            auth.authorize(&Capability {
                action: Action::NetPrivate,
                resource: dest.origin.clone(),
            })?;
        }
        Ok(addrs)
    }
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

fn next_hop(from: &Url, location: &str) -> FlowResult<Destination> {
    let url = from.join(location).map_err(|e| {
        FlowError::new(
            ErrorCode::RequestFailed,
            format!("{from} redirected to {location:?}, which is not a URL: {e}"),
        )
    })?;
    destination::from_url("url", url).map_err(|e| {
        FlowError::new(
            ErrorCode::RequestFailed,
            format!(
                "{from} redirected somewhere sluice does not go: {}",
                e.message
            ),
        )
    })
}

/// The caller's headers that still go out once a redirect has left the
/// first origin. Everything else stays behind: `authorization` and
/// `cookie`, and any API key or token header, whatever its name.
pub const PLAIN_HEADERS: [&str; 8] = [
    "accept",
    "accept-language",
    "user-agent",
    "content-type",
    "cache-control",
    "pragma",
    "if-none-match",
    "if-modified-since",
];

/// The resolver the HTTP library is given: none. Every name it connects to
/// is pinned to checked addresses; a name that somehow is not fails here
/// instead of being looked up again.
#[derive(Debug)]
struct NoLookup;

impl reqwest::dns::Resolve for NoLookup {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let name = name.as_str().to_string();
        Box::pin(async move {
            Err(format!(
                "{name} was not among the checked addresses; sluice refuses to look it up again"
            )
            .into())
        })
    }
}

/// One hop of a request: where it goes and what it carries.
struct Hop<'a> {
    dest: &'a Destination,
    addrs: &'a [IpAddr],
    method: Method,
    headers: &'a [(String, String)],
    /// The chain left the first origin: only plain headers go.
    crossed: bool,
    /// It may connect inside the run's sandboxes.
    inside: bool,
}

impl Net {
    /// Step 4: one HTTP exchange pinned to the hop's addresses; to a
    /// loopback one inside the run's sandboxes when a server there
    /// accepts it.
    async fn transmit(&self, hop: Hop<'_>, body: Option<Vec<u8>>) -> FlowResult<reqwest::Response> {
        let dest = hop.dest;
        // No timeout of its own: the call's one deadline (in `Net::send`)
        // bounds this exchange and the body read, and reports `timeout`.
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(NoLookup));
        let pinned: Vec<SocketAddr> = hop
            .addrs
            .iter()
            .map(|ip| SocketAddr::new(*ip, dest.port))
            .collect();
        let joined = match &self.inside {
            Some(inside) if hop.inside => inside::route(inside, &pinned).await,
            _ => None,
        };
        let joined = joined.transpose().map_err(|e| {
            FlowError::new(
                ErrorCode::RequestFailed,
                format!(
                    "request to {} failed: cannot reach the run's sandbox: {e}",
                    dest.origin
                ),
            )
        })?;
        if let Some(joined) = &joined {
            builder = builder.unix_socket(joined.path());
        } else if dest.ip.is_none() {
            builder = builder.resolve_to_addrs(&dest.host, &pinned);
        }
        let client = builder.build().map_err(|e| failed(dest, &e))?;
        let mut rb = match hop.method {
            Method::Get => client.get(dest.url.clone()),
            Method::Post => client.post(dest.url.clone()),
        };
        for (name, value) in hop.headers {
            if hop.crossed && !PLAIN_HEADERS.iter().any(|p| name.eq_ignore_ascii_case(p)) {
                continue;
            }
            rb = rb.header(name.as_str(), value.as_str());
        }
        if let Some(body) = body {
            rb = rb.body(body);
        }
        // `joined` lives until the library has connected through it.
        let sent = rb.send().await.map_err(|e| failed(dest, &e));
        drop(joined);
        sent
    }
}

fn failed(dest: &Destination, e: &reqwest::Error) -> FlowError {
    if e.is_timeout() {
        return FlowError::new(
            ErrorCode::Timeout,
            format!("{} did not answer in time", dest.origin),
        );
    }
    FlowError::new(
        ErrorCode::RequestFailed,
        format!("request to {} failed: {}", dest.origin, why(e)),
    )
    .with("url", dest.url.to_string())
}

/// The chain of sources says why (refused, reset, TLS); the URL has no
/// user information and headers are never part of it.
fn why(e: &reqwest::Error) -> String {
    let mut why = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        why = format!("{why}: {s}");
        src = s.source();
    }
    why
}

/// The body, at most [`MAX_BODY`] bytes.
async fn read(url: Url, mut resp: reqwest::Response) -> FlowResult<Incoming> {
    let too_large = |what: String| {
        FlowError::new(
            ErrorCode::ResponseTooLarge,
            format!("the response from {url} is {what}, over the 5 MiB limit"),
        )
        .with("limit", MAX_BODY)
    };
    if let Some(len) = resp.content_length().filter(|n| *n > MAX_BODY) {
        return Err(too_large(format!("{len} bytes (content-length)")));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| {
        FlowError::new(
            ErrorCode::RequestFailed,
            format!("reading the response from {url} failed: {e}"),
        )
    })? {
        if body.len() as u64 + chunk.len() as u64 > MAX_BODY {
            return Err(too_large("more than 5 MiB".into()));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Incoming {
        url,
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body,
    })
}

/// Checks caller-given headers: names and values HTTP can carry, and none
/// sluice sets itself. The error names `headers.<name>`.
pub fn check_headers(
    headers: &std::collections::BTreeMap<String, String>,
) -> FlowResult<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (name, value) in headers {
        let field = format!("headers.{name}");
        if HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(FlowError::invalid_input(
                &field,
                format!("{name:?} is not a valid header name"),
            ));
        }
        if HeaderValue::from_str(value).is_err() {
            return Err(FlowError::invalid_input(&field, format!("the value of {name} holds characters a header cannot carry (control characters or newlines)")));
        }
        let reserved = ["host", "content-length", "transfer-encoding", "connection"];
        if reserved.iter().any(|r| name.eq_ignore_ascii_case(r)) {
            return Err(FlowError::invalid_input(
                &field,
                format!("{name} is set by sluice from the URL and body; drop it"),
            ));
        }
        out.push((name.clone(), value.clone()));
    }
    Ok(out)
}

/// A timeout in seconds from a flow's input: default 30, at most 120.
pub fn timeout(field: &str, secs: Option<f64>) -> FlowResult<Duration> {
    match secs {
        None => Ok(Duration::from_secs(DEFAULT_TIMEOUT_SECS)),
        Some(s) if s.is_nan() || s <= 0.0 || !s.is_finite() => Err(FlowError::invalid_input(
            field,
            format!("{field} is in seconds and must be above 0 (default {DEFAULT_TIMEOUT_SECS}, at most {MAX_TIMEOUT_SECS})"),
        )),
        Some(s) => Ok(Duration::from_secs_f64(s.min(MAX_TIMEOUT_SECS as f64))),
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Method::Get => "GET",
            Method::Post => "POST",
        })
    }
}
