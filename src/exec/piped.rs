//! A long-lived command the caller talks to over its standard streams (a
//! language server): launched as every command is (the spec resolved, its
//! environment scrubbed, its wrapper and resource limits applied, its own
//! process group), but with standard input left open for the caller and
//! no timeout: it lives until the caller stops it, and dropping it kills
//! its whole group.

use super::process::{end_group, forget_group, launch, signal_group, Launched, Pipe, Proc};
use super::{SpawnFailure, Spec};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// The writer of a piped command's standard input.
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// A reader of one of its output streams.
pub type Reader = Box<dyn AsyncRead + Send + Unpin>;

/// A running piped command.
pub struct Piped {
    /// Its standard input; dropping it closes the pipe.
    pub stdin: Option<Writer>,
    pub stdout: Option<Reader>,
    pub stderr: Option<Reader>,
    pid: u32,
    child: Proc,
    /// What the wrapper keeps beside the command, and its resource limits:
    /// both held until the command has ended.
    _guard: Option<super::Guard>,
    _bounds: Option<super::resources::Bounds>,
    ended: bool,
}

impl std::fmt::Debug for Piped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Piped").field("pid", &self.pid).finish()
    }
}

impl Spec {
    /// The spec with standard input kept open for the caller, for
    /// [`spawn`]; whatever stdin bytes it had are not written.
    pub fn with_open_stdin(self) -> Spec {
        Spec {
            open_stdin: true,
            stdin: None,
            ..self
        }
    }
}

/// Starts `spec` (made with [`Spec::with_open_stdin`]) and hands back its
/// streams. The spec's timeout does not apply: the caller stops it.
pub fn spawn(spec: Spec) -> Result<Piped, SpawnFailure> {
    let spec = spec.with_open_stdin();
    let Launched {
        child,
        pid,
        stdout,
        stderr,
        stdin,
        guard,
        bounds,
        ..
    } = launch(&spec)?;
    let reader = |p: Pipe| -> Reader { Box::new(p) };
    Ok(Piped {
        stdin,
        stdout: Some(reader(stdout)),
        stderr: stderr.map(reader),
        pid,
        child,
        _guard: guard,
        _bounds: bounds,
        ended: false,
    })
}

impl Piped {
    /// Stops the command: its standard input closed, then TERM to its
    /// group after `patience` if it has not ended by itself, then KILL
    /// after `grace`; returns once nothing of it runs.
    pub async fn stop(mut self, patience: Duration, grace: Duration) {
        self.stdin = None;
        let pgid = self.pgid();
        let by_itself = tokio::time::timeout(patience, self.child.wait()).await;
        if by_itself.is_err() {
            signal_group(pgid, Signal::SIGTERM);
            let killed = tokio::time::timeout(grace, self.child.wait())
                .await
                .is_err();
            if killed {
                signal_group(pgid, Signal::SIGKILL);
                let _ = self.child.wait().await;
            }
        }
        // What the command left in its group goes with it.
        signal_group(pgid, Signal::SIGKILL);
        end_group(pgid, tokio::time::Instant::now(), true).await;
        self.ended = true;
    }

    fn pgid(&self) -> Pid {
        Pid::from_raw(self.pid as i32)
    }
}

impl Drop for Piped {
    fn drop(&mut self) {
        if !self.ended {
            let pgid = self.pgid();
            signal_group(pgid, Signal::SIGKILL);
            forget_group(pgid);
        }
    }
}
