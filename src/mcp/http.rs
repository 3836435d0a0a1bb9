//! Streamable HTTP: rmcp's service behind a small hyper front that serves
//! `/mcp` alone, checks the bearer token (there always is one) and refuses
//! the connections of the run's own processes. `Origin` is checked as the
//! spec requires against DNS rebinding: a browser page on another origin
//! gets 403, whatever it resolved the name to. A session's end (DELETE) is
//! answered 200, as the official clients expect.

use super::handler::Server;
use super::peer::{of_the_run, Holder};
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

/// Serves `server` on `listener` until the process ends; every request
/// must carry `token`.
pub async fn serve(server: Server, listener: tokio::net::TcpListener, token: String) {
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
    let token: Arc<String> = Arc::new(token);
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let (mcp, token) = (mcp.clone(), token.clone());
        tokio::spawn(async move {
            let holder = match stream.local_addr() {
                Ok(local) => tokio::task::spawn_blocking(move || of_the_run(peer, local))
                    .await
                    .unwrap_or_else(|e| Holder::Unknown(format!("its check failed ({e})"))),
                Err(e) => Holder::Unknown(format!("its address is not known ({e})")),
            };
            let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let (mut mcp, token, holder) = (mcp.clone(), token.clone(), holder.clone());
                async move {
                    if let Some(refusal) = front(&req, &token, &holder) {
                        return Ok::<_, Infallible>(refusal);
                    }
                    let ends_session = req.method() == hyper::Method::DELETE;
                    let mut reply = tower_service::Service::call(&mut mcp, req).await?;
                    if ends_session && reply.status() == hyper::StatusCode::ACCEPTED {
                        // rmcp answers a session's end 202 Accepted; the
                        // official clients take 200 (or 204) as ended and
                        // warn at anything else.
                        *reply.status_mut() = hyper::StatusCode::OK;
                    }
                    Ok(reply)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// What the front refuses before rmcp sees a request: any request of a
/// connection one of the run's own processes holds, or whose holder
/// nobody can tell ([`Holder`]), a missing or wrong token, another path.
fn front(
    req: &hyper::Request<Incoming>,
    expected: &str,
    holder: &Holder,
) -> Option<hyper::Response<Body>> {
    match holder {
        Holder::Outside => {}
        Holder::Run(pid) => {
            return Some(reply(
                403,
                &format!(
                    "this connection comes from a process this sluice mcp run started (pid {pid}): the run's own \
                     commands cannot call its tools nor answer its questions"
                ),
                None,
            ))
        }
        Holder::Unknown(why) => {
            return Some(reply(
                403,
                &format!(
                    "sluice mcp cannot tell whether this connection comes from a process its run started, so it \
                     refuses it: {why}. Connect from a process of the user the server runs as, outside the run, \
                     and keep the connection open until it is answered"
                ),
                None,
            ))
        }
    }
    // The scheme's name is case-insensitive (RFC 9110); the token is not.
    let given = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token);
    if !given.is_some_and(|g| crate::digest::same_secret(g.as_bytes(), expected.as_bytes())) {
        return Some(reply(
            401,
            "this sluice mcp server needs `Authorization: Bearer TOKEN`: the --token (or SLUICE_MCP_TOKEN) it was \
             started with, or the one it generated, shown on its standard error and kept in the file it named there",
            Some("Bearer"),
        ));
    }
    if req.uri().path() != PATH {
        return Some(reply(404, "sluice mcp serves MCP at /mcp", None));
    }
    None
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
