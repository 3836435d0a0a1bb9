//! `sluice mcp`: sluice's flows as MCP tools, for the agents teams already
//! use. One run serves the whole process: each `tools/call` becomes a
//! request of the run ([`crate::runtime::Runtime::serve`]), so it passes
//! the one door, the sandbox and the record like a script's call.
//!
//! The protocol is rmcp's (2026-07-28 stateless requests and
//! `server/discover`, and clients that start with `initialize` at
//! 2025-11-25 or 2025-06-18), over stdio or streamable HTTP. The transport
//! runs on a thread of its own; the run (Lua, the pipeline) stays on the
//! caller's thread, and they meet through channels.
//!
//! - `catalog.rs` what is served: tools from the manifest, hints from tiers;
//! - `handler.rs` the protocol handler: list, call, progress, cancellation;
//! - `asks.rs` asks as elicitation, for each protocol era;
//! - `render.rs` an outcome as a tool result;
//! - `http.rs` the HTTP front: loopback, token, Origin;
//! - `peer.rs` whether a connection comes from the run's own processes;
//! - `token.rs` the HTTP token: given, or generated and kept in a file.

mod asks;
mod catalog;
mod handler;
mod http;
mod peer;
mod plan;
mod render;
pub mod token;

pub use catalog::Catalog;
pub use handler::Server;
pub use http::PATH;

use rmcp::ServiceExt;
use std::net::SocketAddr;

/// What the record calls a served run (its script column).
pub const RUN_NAME: &str = "sluice mcp";

/// Where a server listens.
#[derive(Debug, Clone)]
pub enum Transport {
    /// Newline-delimited JSON on standard input and output.
    Stdio,
    /// Streamable HTTP at `http://ADDR/mcp`; clients send
    /// `Authorization: Bearer TOKEN`.
    Http { addr: SocketAddr, token: String },
}

/// Starts `server` on `transport`, on a thread of its own: stdio until its
/// input closes, HTTP until the process ends. An HTTP address is checked
/// and bound before this returns, so a refused or busy address is an error
/// here; the address bound (with the port a `:0` chose) is returned.
pub fn start(
    server: Server,
    transport: Transport,
) -> Result<(std::thread::JoinHandle<()>, Option<SocketAddr>), String> {
    let listener = match &transport {
        Transport::Stdio => None,
        Transport::Http { addr, .. } => {
            let l = std::net::TcpListener::bind(addr)
                .map_err(|e| format!("--http {addr}: cannot listen there: {e}"))?;
            l.set_nonblocking(true)
                .map_err(|e| format!("--http {addr}: {e}"))?;
            Some(l)
        }
    };
    let bound = listener.as_ref().and_then(|l| l.local_addr().ok());
    let thread = std::thread::Builder::new()
        .name("sluice-mcp".into())
        .spawn(move || {
            let tokio = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the MCP transport's runtime starts");
            tokio.block_on(async move {
                match (transport, listener) {
                    (Transport::Http { token, .. }, Some(l)) => {
                        match tokio::net::TcpListener::from_std(l) {
                            Ok(l) => http::serve(server, l, token).await,
                            Err(e) => eprintln!("sluice mcp: cannot listen: {e}"),
                        }
                    }
                    _ => stdio(server).await,
                }
            });
            tokio.shutdown_background();
        })
        .map_err(|e| format!("cannot start the MCP transport's thread: {e}"))?;
    Ok((thread, bound))
}

/// Serves one client on standard input and output until its input closes.
async fn stdio(server: Server) {
    match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => {
            let _ = running.waiting().await;
        }
        Err(e) => eprintln!("sluice mcp: the client did not start a session: {e}"),
    }
}
