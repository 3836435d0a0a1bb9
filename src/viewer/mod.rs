//! Looking at the record: `sluice audit serve`, a read-only web page of
//! the runs, a run's timeline and calls and each call whole, on either
//! store; and `sluice audit report --html`, the same page as one file that
//! needs no server and no network.
//!
//! - [`http`]: the front (GET only, `Host`, `Origin`, token, the
//!   Content-Security-Policy) and the pool of record connections;
//! - [`api`]: each `/api/...` answer, read through [`crate::audit::browse`]
//!   a page at a time;
//! - [`detail`]: a call's diff, streams, conversation, and the bound on
//!   every value;
//! - [`timeline`]: lanes and bars, merged past a bound;
//! - [`report`]: the one-file report;
//! - `assets/`: the page, its script and its style (plain files, served
//!   as they are: every record value reaches the page as text).

mod api;
mod assets;
mod detail;
mod http;
mod report;
mod timeline;

pub use report::report;

use crate::audit::open::Opened;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// The environment variable that may hold a viewer's token.
pub const ENV_TOKEN: &str = "SLUICE_VIEWER_TOKEN";

/// Serves the record `opened` on `addr` until the process ends; a token
/// is required off loopback. `announce` is told the URL to open.
pub fn serve(
    opened: Opened,
    addr: SocketAddr,
    token: Option<String>,
    announce: impl FnOnce(&str),
) -> Result<(), String> {
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(format!(
            "--http {addr} is not a loopback address, so anyone who reaches it could read the record: give \
             --token TOKEN (or {ENV_TOKEN}), or serve on 127.0.0.1"
        ));
    }
    if let Some(bad) = token.as_deref().and_then(|t| {
        t.chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "-._~".contains(*c)))
    }) {
        return Err(format!(
            "the token holds {bad:?}, which a URL or a cookie would change; give one of letters, digits and \
             - . _ ~ (e.g. `openssl rand -hex 16`)"
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the viewer's runtime: {e}"))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}; choose another --http address"))?;
        let bound = listener
            .local_addr()
            .map_err(|e| format!("cannot tell the address listened on: {e}"))?;
        let url = match &token {
            Some(t) => format!("http://{bound}/?token={t}"),
            None => format!("http://{bound}/"),
        };
        announce(&url);
        let shared = Arc::new(http::Shared {
            addr: bound,
            token,
            opener: opened.again.clone(),
            pool: Mutex::new(vec![opened.db]),
            verdicts: api::Verdicts::default(),
        });
        http::serve(shared, listener).await;
        Ok(())
    })
}
