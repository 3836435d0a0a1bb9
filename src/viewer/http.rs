//! The viewer's HTTP front: GET only, the page's three files and the
//! JSON API, each answer with a strict Content-Security-Policy. A browser
//! page of another origin is kept out as `sluice mcp` keeps it out: on a
//! loopback address the `Host` must be the server's own (DNS rebinding),
//! an `Origin` must be the server's own, and on any other address a token
//! is needed (given once as `?token=`, then kept in a cookie).

use super::api::{self, Reader, Verdicts};
use super::assets;
use crate::audit::db::Db;
use crate::audit::replay::Opener;
use crate::flows::Registry;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// The policy every answer carries: the page's own script and style, its
/// own API, nothing inline, no frames, no forms.
pub const CSP: &str =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Connections kept for the next requests; more are opened while many
/// requests are read at once, and closed after.
const POOLED: usize = 4;

/// The cookie a token is kept in once given.
const COOKIE: &str = "sluice_viewer";

/// What every request's answer reads through.
pub struct Shared {
    /// The address the server listens on.
    pub addr: SocketAddr,
    /// The token a request must carry; `None` on loopback without one.
    pub token: Option<String>,
    /// Connections to the record, kept for the next request.
    pub pool: Mutex<Vec<Box<dyn Db + Send>>>,
    /// What opens another.
    pub opener: Opener,
    pub verdicts: Verdicts,
}

thread_local! {
    /// What the record's readers ask of the flows (an input's gist, a
    /// plan): the registry is built once per reading thread, as it is
    /// not shared between threads.
    static FACTS: Registry = Registry::standard();
}

/// Serves `shared` on `listener` until the process ends.
pub async fn serve(shared: Arc<Shared>, listener: tokio::net::TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(respond(shared, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// One request's answer.
async fn respond(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    if let Some(refusal) = front(&shared, &req) {
        return refusal;
    }
    let path = req.uri().path().to_string();
    let query: HashMap<String, String> =
        url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    if let (Some(token), Some(_)) = (query.get("token"), &shared.token) {
        return welcome(token, &path, &query);
    }
    if let Some((kind, body)) = assets::file(&path) {
        return reply(200, kind, Bytes::from_static(body));
    }
    if !path.starts_with("/api/") {
        return text(404, &format!("no page {path}; the viewer is at /"));
    }
    let answered = tokio::task::spawn_blocking(move || read(&shared, &path, &query)).await;
    match answered {
        Ok(Ok(v)) => reply(200, "application/json", Bytes::from(v.to_string())),
        Ok(Err((status, why))) => text(status, &why),
        Err(e) => text(500, &format!("the reader failed: {e}")),
    }
}

/// Reads an API answer through a pooled connection.
fn read(
    shared: &Shared,
    path: &str,
    query: &HashMap<String, String>,
) -> Result<serde_json::Value, api::Refusal> {
    let pooled = shared.pool.lock().ok().and_then(|mut p| p.pop());
    let db = match pooled {
        Some(db) => db,
        None => (shared.opener)().map_err(|e| (503, format!("cannot open the record: {e}")))?,
    };
    let answer = FACTS.with(|facts| {
        let reader = Reader {
            db: &*db,
            facts,
            verdicts: &shared.verdicts,
        };
        api::answer(&reader, path, query)
    });
    // A connection that failed (a PostgreSQL server restarted) is dropped:
    // the next request opens a fresh one.
    let failed = matches!(&answer, Err((status, _)) if *status >= 500);
    if !failed {
        if let Ok(mut p) = shared.pool.lock() {
            if p.len() < POOLED {
                p.push(db);
            }
        }
    }
    answer
}

/// What is refused before a request is read: another method, a foreign
/// `Host` or `Origin`, a missing token.
fn front(shared: &Shared, req: &Request<Incoming>) -> Option<Response<Body>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Some(text(
            405,
            "the viewer is read-only: it answers GET alone, and nothing it serves changes the record",
        ));
    }
    let header = |name: hyper::header::HeaderName| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let host = header(hyper::header::HOST);
    if shared.addr.ip().is_loopback() && !own_host(&host, shared.addr.port()) {
        return Some(text(
            403,
            &format!(
                "Host {host:?} is not this server's own name; open http://127.0.0.1:{}/ (a page on another \
                 name could be a DNS rebinding attack)",
                shared.addr.port()
            ),
        ));
    }
    let origin = header(hyper::header::ORIGIN);
    if !origin.is_empty() && origin != format!("http://{host}") {
        return Some(text(
            403,
            &format!("a page of {origin} may not read this viewer; open it at http://{host}/"),
        ));
    }
    let expected = shared.token.as_deref()?;
    let query_token = req
        .uri()
        .query()
        .into_iter()
        .flat_map(|q| url::form_urlencoded::parse(q.as_bytes()))
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned());
    let given = query_token
        .or_else(|| cookie(&header(hyper::header::COOKIE)))
        .or_else(|| bearer(&header(hyper::header::AUTHORIZATION)));
    match given {
        Some(g) if crate::digest::same_secret(g.as_bytes(), expected.as_bytes()) => None,
        _ => Some(text(
            401,
            "this viewer needs its token: open the URL `sluice audit serve` printed (it ends in ?token=...), \
             or send `Authorization: Bearer TOKEN`",
        )),
    }
}

/// Whether `host` names this loopback server: `127.0.0.1`, `localhost`
/// or `[::1]`, on its port.
fn own_host(host: &str, port: u16) -> bool {
    ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .any(|name| host.eq_ignore_ascii_case(&format!("{name}:{port}")))
}

/// The token in a `Cookie` header.
fn cookie(header: &str) -> Option<String> {
    header
        .split(';')
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

/// The token of `Authorization: Bearer TOKEN`.
fn bearer(header: &str) -> Option<String> {
    let (scheme, token) = header.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
}

/// A right token given in the URL: kept in a cookie, and the same address
/// loaded again without it (its other parameters kept), so the token stays
/// out of the history and of any link.
fn welcome(token: &str, path: &str, query: &HashMap<String, String>) -> Response<Body> {
    let rest: Vec<(&String, &String)> = query.iter().filter(|(k, _)| *k != "token").collect();
    let location = if rest.is_empty() {
        path.to_string()
    } else {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        q.extend_pairs(rest);
        format!("{path}?{}", q.finish())
    };
    let mut r = text(303, "signed in; loading the viewer");
    let headers = r.headers_mut();
    if let Ok(v) = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/").parse() {
        headers.insert(hyper::header::SET_COOKIE, v);
    }
    if let Ok(v) = location.parse() {
        headers.insert(hyper::header::LOCATION, v);
    }
    r
}

fn text(status: u16, body: &str) -> Response<Body> {
    reply(
        status,
        "text/plain; charset=utf-8",
        Bytes::from(body.to_string()),
    )
}

/// An answer with the headers every answer carries.
fn reply(status: u16, kind: &str, body: Bytes) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, kind)
        .header("Content-Security-Policy", CSP)
        .header("X-Content-Type-Options", "nosniff")
        .header("Referrer-Policy", "no-referrer")
        .header("Cache-Control", "no-store")
        .header("Cross-Origin-Resource-Policy", "same-origin")
        .body(Full::new(body).boxed())
        .expect("a plain response builds")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_loopback_names_on_the_servers_port_are_its_own_host() {
        assert!(own_host("127.0.0.1:8080", 8080));
        assert!(own_host("LOCALHOST:8080", 8080));
        assert!(own_host("[::1]:8080", 8080));
        assert!(!own_host("127.0.0.1:8081", 8080));
        assert!(!own_host("evil.example:8080", 8080));
        assert!(!own_host("127.0.0.1", 8080));
    }

    #[test]
    fn a_token_in_the_url_becomes_a_cookie_and_the_address_is_loaded_again_without_it() {
        let query: HashMap<String, String> = [("token", "T1"), ("flow", "bash")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let r = welcome("T1", "/api/runs/x/calls", &query);
        assert_eq!(r.status(), 303);
        let h = |k| r.headers().get(k).unwrap().to_str().unwrap().to_string();
        assert_eq!(h(hyper::header::LOCATION), "/api/runs/x/calls?flow=bash");
        assert_eq!(
            h(hyper::header::SET_COOKIE),
            "sluice_viewer=T1; HttpOnly; SameSite=Strict; Path=/"
        );
    }

    #[test]
    fn the_token_is_read_from_its_cookie_or_a_bearer_header() {
        assert_eq!(cookie("a=b; sluice_viewer=T1; c=d"), Some("T1".into()));
        assert_eq!(cookie("sluice_viewerx=T1"), None);
        assert_eq!(bearer("bearer T2"), Some("T2".into()));
        assert_eq!(bearer("Basic T2"), None);
    }
}
