//! Streamable HTTP: rmcp's service behind a small hyper front that serves
//! `/mcp` alone and checks the bearer token. Loopback by default; any other
//! address needs a token. `Origin` is checked as the spec requires against
//! DNS rebinding: a browser page on another origin gets 403, whatever it
//! resolved the name to.

use super::handler::Server;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// The one path the server answers on.
pub const PATH: &str = "/mcp";

/// Why an address may not be served, before anything is bound: a
/// non-loopback address without a token.
pub fn refuse(addr: &SocketAddr, token: Option<&str>) -> Option<String> {
    if addr.ip().is_loopback() || token.is_some_and(|t| !t.is_empty()) {
        return None;
    }
    Some(format!(
        "--http {addr} is not a loopback address, so anyone who reaches it could call sluice's tools; \
         serve on 127.0.0.1 (the default), or give --token (or SLUICE_MCP_TOKEN) so that clients must send \
         `Authorization: Bearer TOKEN`"
    ))
}

/// The origins a browser page may call from: this machine's own, on any
/// port, and the server's own address.
fn origins(addr: &SocketAddr) -> Vec<String> {
    let mut list: Vec<String> = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if !addr.ip().is_loopback() {
        list.push(format!("http://{addr}"));
    }
    list
}

/// Serves `server` on `listener` until the process ends.
pub async fn serve(server: Server, listener: tokio::net::TcpListener, token: Option<String>) {
    let addr = listener.local_addr().ok();
    let mut config = StreamableHttpServerConfig::default();
    if let Some(addr) = &addr {
        config = config.with_allowed_origins(origins(addr));
        if !addr.ip().is_loopback() {
            // Reached by a name the operator chose: the token, not the
            // Host header, keeps a rebinding page out.
            config = config.disable_allowed_hosts();
        }
    }
    let mcp = StreamableHttpService::new(
        move || Ok(server.fresh()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token: Arc<Option<String>> = Arc::new(token);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (mcp, token) = (mcp.clone(), token.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let (mut mcp, token) = (mcp.clone(), token.clone());
                async move {
                    if let Some(refusal) = front(&req, token.as_deref()) {
                        return Ok::<_, Infallible>(refusal);
                    }
                    tower_service::Service::call(&mut mcp, req).await
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// What the front refuses before rmcp sees a request: another path, a
/// missing or wrong token.
fn front(req: &hyper::Request<Incoming>, token: Option<&str>) -> Option<hyper::Response<Body>> {
    if let Some(expected) = token {
        // The scheme's name is case-insensitive (RFC 9110); the token is not.
        let given = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token);
        if !given.is_some_and(|g| same(g.as_bytes(), expected.as_bytes())) {
            return Some(reply(
                401,
                "this sluice mcp server needs `Authorization: Bearer TOKEN` (the --token it was started with)",
                Some("Bearer"),
            ));
        }
    }
    if req.uri().path() != PATH {
        return Some(reply(404, "sluice mcp serves MCP at /mcp", None));
    }
    None
}

/// Compares a token in time that depends neither on where it differs nor
/// on its length: the two are compared as their SHA-256 digests.
fn same(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (crate::digest::sha256_hex(a), crate::digest::sha256_hex(b));
    a.bytes()
        .zip(b.bytes())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

fn reply(status: u16, text: &str, challenge: Option<&str>) -> hyper::Response<Body> {
    let mut builder = hyper::Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8");
    if let Some(c) = challenge {
        builder = builder.header(hyper::header::WWW_AUTHENTICATE, c);
    }
    builder
        .body(Full::new(Bytes::from(text.to_string())).boxed())
        .expect("a plain response builds")
}

#[cfg(test)]
mod tests {
    use super::{refuse, same};

    #[test]
    fn a_non_loopback_address_needs_a_token_and_loopback_does_not() {
        assert!(refuse(&"0.0.0.0:8080".parse().unwrap(), None).is_some());
        assert!(refuse(&"192.0.2.1:8080".parse().unwrap(), Some("")).is_some());
        assert!(refuse(&"0.0.0.0:8080".parse().unwrap(), Some("t0k")).is_none());
        assert!(refuse(&"127.0.0.1:0".parse().unwrap(), None).is_none());
        assert!(refuse(&"[::1]:0".parse().unwrap(), None).is_none());
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert!(!same(b"", b"a"));
    }
}
