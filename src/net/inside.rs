//! Reaching a server a run's command started: confined commands whose
//! network is closed share a network namespace of the run's own, so a
//! server a background job started listens on *that* loopback, not the
//! host's. A request to a loopback address goes to the host's loopback as
//! before when something there accepts it, and else inside ([`Inside`]):
//! a command cannot shadow a host service that is up. The `net:private`
//! grant for the origin is checked either way, before anything is sent. A
//! request that carries a credential, and a model provider's, never go
//! inside: what a confined command serves must not see a secret.
//!
//! The HTTP library connects by address or to a Unix socket path, so the
//! connection made inside is joined to a Unix socket in a private folder
//! (0700, sluice's alone), which the request is sent through: the HTTP
//! exchange is byte for byte the one made over TCP.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A way into the network namespace of the run's sandboxes.
pub trait Inside: Send + Sync + std::fmt::Debug {
    /// A TCP connection to the loopback address `addr` made inside,
    /// connected or on its way; `None` when nothing there accepts it.
    /// May block briefly (it asks the sandbox).
    fn connect(&self, addr: SocketAddr) -> Option<std::net::TcpStream>;

    /// Whether there is an inside at all (a sandbox of the run serves,
    /// with a network of its own): else nothing is tried.
    fn serving(&self) -> bool;
}

/// How long the joined socket waits for the HTTP library to connect.
const ACCEPT_WAIT: Duration = Duration::from_secs(super::client::MAX_TIMEOUT_SECS);

/// A Unix socket whose one connection is joined to a connection inside;
/// its folder goes when it is dropped (or once the connection is made).
#[derive(Debug)]
pub struct Joined {
    dir: PathBuf,
    path: PathBuf,
}

impl Joined {
    /// The socket's path, for the HTTP library.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Joined {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where a request to `addrs` connects when the run's sandboxes serve and
/// one of the addresses is loopback: the first that accepts on the host,
/// else the first that accepts inside, joined to a fresh Unix socket;
/// `None` when there is no inside, or neither accepts (the request then
/// connects as any other, and fails as it would).
pub async fn route(
    inside: &std::sync::Arc<dyn Inside>,
    addrs: &[SocketAddr],
) -> Option<std::io::Result<Joined>> {
    let loopback: Vec<SocketAddr> = addrs
        .iter()
        .filter(|a| a.ip().is_loopback())
        .copied()
        .collect();
    if loopback.is_empty() || !inside.serving() {
        return None;
    }
    for addr in &loopback {
        if let Ok(tcp) = tokio::net::TcpStream::connect(addr).await {
            return Some(bridge(tcp).await);
        }
    }
    let inside = inside.clone();
    let found =
        tokio::task::spawn_blocking(move || loopback.into_iter().find_map(|a| inside.connect(a)))
            .await
            .ok()??;
    let found = found
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpStream::from_std(found));
    Some(match found {
        Ok(tcp) => bridge(tcp).await,
        Err(e) => Err(e),
    })
}

/// Makes the Unix socket and the task that joins its one connection to
/// `tcp`, once `tcp` is connected.
async fn bridge(mut tcp: tokio::net::TcpStream) -> std::io::Result<Joined> {
    tcp.writable().await?;
    if let Some(e) = tcp.take_error()? {
        return Err(e);
    }
    let dir = private_dir()?;
    let path = dir.join("inside.sock");
    let joined = Joined {
        dir: dir.clone(),
        path: path.clone(),
    };
    let listener = tokio::net::UnixListener::bind(&path)?;
    tokio::spawn(async move {
        let accepted = tokio::time::timeout(ACCEPT_WAIT, listener.accept()).await;
        let _ = std::fs::remove_dir_all(&dir);
        if let Ok(Ok((mut unix, _))) = accepted {
            let _ = tokio::io::copy_bidirectional(&mut unix, &mut tcp).await;
        }
    });
    Ok(joined)
}

/// A new folder only this user can enter, under the temp folder.
fn private_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static MADE: AtomicU64 = AtomicU64::new(0);
    let n = MADE.fetch_add(1, Ordering::Relaxed);
    let nonce = {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(n);
        h.finish()
    };
    let dir = std::env::temp_dir().join(format!(
        "sluice-inside-{}-{n}-{nonce:016x}",
        std::process::id()
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}
