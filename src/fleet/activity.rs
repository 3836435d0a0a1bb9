//! The activity of a fleet run: one attempt at it on this worker. The run
//! executes as a `sluice` process of its own (a run owns process-wide
//! state: its signal handlers, its jobs' process groups), started from the
//! bundle's files, recording into the shared record; the activity
//! heartbeats while it lives, and ends it when Temporal cancels the
//! attempt.

use super::bundle::Bundle;
use super::workflow::{Unknown, Word};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// How much of a run's output its outcome keeps: the engine's history
/// holds it.
pub const KEPT: usize = 64 * 1024;

/// How often a live attempt heartbeats, and pulses to its run.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// How long a run waits for its worker's pulse before it ends itself:
/// within the heartbeat timeout, so a stopped worker's run is gone
/// before Temporal gives the next attempt the run.
fn pulse_silence(heartbeat_timeout: Duration) -> Duration {
    (heartbeat_timeout / 2).max(2 * HEARTBEAT)
}

/// One attempt's input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempt {
    pub bundle: Bundle,
    /// The workflow's heartbeat timeout.
    pub heartbeat_timeout_ms: u64,
    /// The operator's word on the unknown call the last attempt stopped at.
    pub word: Option<Word>,
    /// Attempts the workflow's earlier activities made: this activity's
    /// attempt numbers follow them, so the record's fencing number only
    /// grows.
    pub attempts_before: u32,
}

/// How a run ended, as its workflow's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// `ok` or `failed`, as the record says.
    pub status: String,
    /// The exit status `sluice run` gave.
    pub exit: i32,
    /// What the script printed (its last [`KEPT`] bytes).
    pub stdout: String,
    /// What sluice said on stderr (its last [`KEPT`] bytes).
    pub stderr: String,
    /// The activity's attempts, this one included.
    pub attempts: u32,
    /// The irreversible call of unknown outcome the run stopped at, which
    /// waits for the operator's word.
    pub unknown: Option<Unknown>,
}

/// What a worker's activities need: where the record is, and the sluice
/// binary that runs each attempt.
pub struct FleetActivities {
    pub audit: String,
    pub sluice: PathBuf,
    pub credentials: Option<PathBuf>,
}

#[activities]
impl FleetActivities {
    /// Runs (or, on a later attempt, resumes) the run in the bundle.
    #[activity]
    pub async fn run_attempt(
        self: Arc<Self>,
        ctx: ActivityContext,
        attempt: Attempt,
    ) -> Result<Outcome, ActivityError> {
        attempt.bundle.check().map_err(refused)?;
        let files = tempfile::tempdir()?;
        let tries = ctx.info().attempt.max(1);
        // A later attempt, or one the operator's word starts, continues the
        // newest run of the chain: an earlier attempt may have resumed the
        // run already, and been lost too. (An attempt lost before its run
        // was recorded starts it afresh.)
        let resume = match (tries, attempt.word) {
            (1, None) => None,
            _ => self
                .newest(&attempt.bundle.run)
                .await
                .map_err(std::io::Error::other)?,
        };
        let number = i64::from(attempt.attempts_before + tries);
        let mut cmd = self.command(&attempt, (resume.as_deref(), number), files.path())?;
        let (status, stdout, stderr) = supervise(&ctx, &mut cmd).await?;
        // The run's last process still holds its lease (it has not noticed
        // its worker is gone yet): try again after Temporal's backoff.
        if status.code() == Some(i32::from(crate::audit::lease::EXIT_HELD)) {
            return Err(ActivityError::application(
                temporalio_sdk::ApplicationFailure::new(std::io::Error::other(stderr)),
            ));
        }
        let unknown = match status.success() {
            true => None,
            false => self
                .held(&attempt.bundle.run)
                .await
                .map_err(std::io::Error::other)?,
        };
        Ok(Outcome {
            status: if status.success() { "ok" } else { "failed" }.to_string(),
            exit: status.code().unwrap_or(-1),
            stdout,
            stderr,
            attempts: tries,
            unknown,
        })
    }
}

/// Runs `cmd` to its end, heartbeating and pulsing to it every
/// [`HEARTBEAT`]; kills it when Temporal cancels the attempt. Its exit
/// status and the tails of its stdout and stderr.
async fn supervise(
    ctx: &ActivityContext,
    cmd: &mut tokio::process::Command,
) -> Result<(std::process::ExitStatus, String, String), ActivityError> {
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn()?;
    let mut pulse = child.stdin.take();
    let stdout = tokio::spawn(tail(child.stdout.take()));
    let stderr = tokio::spawn(tail(child.stderr.take()));
    let mut beat = tokio::time::interval(HEARTBEAT);
    let status = loop {
        tokio::select! {
            done = child.wait() => break done?,
            _ = beat.tick() => {
                if let Some(p) = pulse.as_mut() {
                    use tokio::io::AsyncWriteExt;
                    let _ = p.write_all(b".").await;
                }
                if ctx.is_cancelled() {
                    stop(&mut child).await;
                    return Err(ActivityError::cancelled());
                }
                ctx.record_heartbeat(()).await?;
            }
        }
    };
    let stdout = stdout.await.unwrap_or_default();
    Ok((status, stdout, stderr.await.unwrap_or_default()))
}

/// Stops a cancelled run: TERM (sluice records the run interrupted and
/// stops its command), then KILL if it has not ended within [`GRACE`].
async fn stop(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        let pid = nix::unistd::Pid::from_raw(pid as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        if tokio::time::timeout(GRACE, child.wait()).await.is_ok() {
            return;
        }
    }
    let _ = child.kill().await;
}

/// How long a cancelled run has to stop after TERM.
const GRACE: Duration = Duration::from_secs(10);

/// The last [`KEPT`] bytes `from` gives, read to its end.
async fn tail(from: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    use tokio::io::AsyncReadExt;
    let mut all = Vec::new();
    if let Some(mut from) = from {
        let mut piece = [0u8; 8192];
        while let Ok(n) = from.read(&mut piece).await {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&piece[..n]);
            if all.len() > 2 * KEPT {
                all.drain(..all.len() - KEPT);
            }
        }
    }
    let start = all.len().saturating_sub(KEPT);
    String::from_utf8_lossy(&all[start..]).into_owned()
}
impl FleetActivities {
    /// The `sluice run` (first attempt) or `sluice resume --take-over`
    /// (a later one) of `bundle`, its files written into `dir`.
    /// `read` of the shared record, on a thread of its own (the store's
    /// clients block).
    async fn on_record<T: Send + 'static>(
        &self,
        read: impl FnOnce(&dyn crate::audit::db::Db) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        let (audit, credentials) = (self.audit.clone(), self.credentials.clone());
        tokio::task::spawn_blocking(move || {
            use crate::audit::{location::Location, open};
            let at = Location::parse(&audit)?;
            let password = open::password(&at, credentials.as_deref());
            let opened = open::for_reading(&at, password.as_deref())?;
            read(&*opened.db)
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// The newest run of the chain of resumes from run `id`, read from
    /// the shared record; `None` when run `id` is not recorded.
    async fn newest(&self, id: &str) -> Result<Option<String>, String> {
        let id = id.to_string();
        self.on_record(move |db| {
            use crate::audit::store;
            let newest = match store::is_recorded(db, &id) {
                Ok(false) => return Ok(None),
                Ok(true) => store::newest_resume(db, &id),
                Err(e) => Err(e),
            };
            newest.map(Some).map_err(|e| e.to_string())
        })
        .await
    }

    /// The irreversible call of unknown outcome the newest run of run
    /// `id`'s chain stopped at, if it did.
    async fn held(&self, id: &str) -> Result<Option<Unknown>, String> {
        let id = id.to_string();
        self.on_record(move |db| {
            use crate::audit::store;
            let run = store::newest_resume(db, &id).map_err(|e| e.to_string())?;
            let held = store::unknown_irreversible(db, &run).map_err(|e| e.to_string())?;
            Ok(held.map(|(call, flow, input)| Unknown {
                run,
                call,
                flow,
                input,
            }))
        })
        .await
    }

    fn command(
        &self,
        given: &Attempt,
        (resume, number): (Option<&str>, i64),
        dir: &std::path::Path,
    ) -> std::io::Result<tokio::process::Command> {
        let (bundle, heartbeat_timeout_ms) = (&given.bundle, given.heartbeat_timeout_ms);
        let script = dir.join("script.lua");
        std::fs::write(&script, &bundle.script.text)?;
        let mut cmd = tokio::process::Command::new(&self.sluice);
        match resume {
            None => {
                cmd.arg("run").arg(&script).args(["--run-id", &bundle.run]);
            }
            Some(run) => {
                cmd.args(["resume", run, "--take-over", "--script"])
                    .arg(&script);
                match given.word {
                    Some(Word::DidNotRun) => cmd.arg("--retry-unknown"),
                    Some(Word::Ran) => cmd.arg("--unknown-ran"),
                    _ => &mut cmd,
                };
            }
        }
        // Each policy under its own file name (its place in the order
        // keeps two of one name apart), as the record names policies.
        for (i, policy) in bundle.policies.iter().enumerate() {
            let name = std::path::Path::new(&policy.name)
                .file_name()
                .map_or_else(|| "policy.lua".into(), |n| n.to_owned());
            let folder = dir.join(i.to_string());
            std::fs::create_dir(&folder)?;
            let path = folder.join(name);
            std::fs::write(&path, &policy.text)?;
            cmd.arg("--policy").arg(path);
        }
        cmd.args(["--script-name", &bundle.script.name])
            .arg(format!("--lease-attempt={number}"));
        cmd.args(["--audit", &self.audit, "--workspace", &bundle.workspace]);
        let silence = pulse_silence(Duration::from_millis(heartbeat_timeout_ms));
        cmd.arg(format!("--worker-pulse={}", silence.as_millis()));
        if let Some(c) = &self.credentials {
            cmd.arg("--credentials").arg(c);
        }
        cmd.arg("--").args(&bundle.args).kill_on_drop(true);
        // The run dies with its worker: a worker killed leaves no run
        // renewing its lease, so the next attempt can take it over.
        // (The signal comes when the spawning thread ends: one of the
        // runtime's workers, which live as long as the process.)
        // SAFETY: `prctl` is async-signal-safe, and nothing else runs
        // between the fork and the exec.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)
            });
        }
        Ok(cmd)
    }
}

/// A bundle no worker may run: not retried.
fn refused(message: String) -> ActivityError {
    ActivityError::application(temporalio_sdk::ApplicationFailure::non_retryable(message))
}
