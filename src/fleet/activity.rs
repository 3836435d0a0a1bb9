//! The activity of a fleet run: one attempt at it on this worker. The run
//! executes as a `sluice` process of its own (a run owns process-wide
//! state: its signal handlers, its jobs' process groups), started from the
//! bundle's files, recording into the shared record; the activity
//! heartbeats while it lives, and ends it when Temporal cancels the
//! attempt.

use super::bundle::Bundle;
use super::workflow::{Question, SluiceRun, Unknown, Word};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use temporalio_client::{Client, WorkflowHandle};
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// How much of a run's output its outcome keeps: the engine's history
/// holds it.
pub const KEPT: usize = 64 * 1024;

/// When a draining worker's runs must be handed back by: unset until the
/// worker is told to stop. Shared by the worker and its activities.
#[derive(Debug, Clone, Default)]
pub struct Drain(Arc<std::sync::Mutex<Option<std::time::Instant>>>);

impl Drain {
    /// The worker drains: runs still going at `by` are handed back.
    pub fn start(&self, by: std::time::Instant) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(by);
    }

    /// Whether the hand-back time has come.
    fn due(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some_and(|by| std::time::Instant::now() >= by)
    }
}

/// The descriptor a run writes its asks to.
const ASKS_FD: i32 = 3;

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
    /// Set when the worker drains (SIGTERM): when its runs must be
    /// handed back by.
    pub drain: Drain,
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
        // The last attempt's run ended ok, and its report was lost (its
        // worker stopped or died just after): the run is done.
        if let Some((run, status)) = &resume {
            if status == "ok" {
                return Ok(ended_before(run, tries));
            }
        }
        let resume = resume.map(|(run, _)| run);
        let number = i64::from(attempt.attempts_before + tries);
        let mut cmd = self.command(&attempt, (resume.as_deref(), number), files.path())?;
        let relay = Relay {
            workflow: ctx.workflow_handle::<SluiceRun>(),
            pending: Vec::new(),
        };
        let (status, stdout, stderr) = supervise(&ctx, &mut cmd, relay, &self.drain).await?;
        // Not the run's own end: its last process still holds its lease (it
        // has not noticed its worker is gone yet), or this one was killed
        // (its watchdog, when this worker was stopped for longer than its
        // pulse allows): the next attempt resumes it, after Temporal's
        // backoff.
        use std::os::unix::process::ExitStatusExt;
        if status.code() == Some(i32::from(crate::audit::lease::EXIT_TRY_LATER))
            || status.signal().is_some()
        {
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
/// [`HEARTBEAT`]; kills it when Temporal cancels the attempt; relays its
/// asks to `relay`'s workflow and the operator's answers back. Its exit
/// status and the tails of its stdout and stderr.
async fn supervise(
    ctx: &ActivityContext,
    cmd: &mut tokio::process::Command,
    mut relay: Relay,
    drain: &Drain,
) -> Result<(std::process::ExitStatus, String, String), ActivityError> {
    use tokio::io::AsyncWriteExt;
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdin(std::process::Stdio::piped());
    let (mut asks, ask_end) = ask_pipe(cmd)?;
    let mut child = cmd.spawn()?;
    drop(ask_end);
    let mut to_run = child.stdin.take();
    let stdout = tokio::spawn(tail(child.stdout.take()));
    let stderr = tokio::spawn(tail(child.stderr.take()));
    let mut beat = tokio::time::interval(HEARTBEAT);
    let status = loop {
        tokio::select! {
            done = child.wait() => break done?,
            Some(line) = asks.recv() => relay.put(&line).await,
            _ = beat.tick() => {
                let mut say = b".".to_vec();
                say.extend(relay.answers().await);
                if let Some(p) = to_run.as_mut() {
                    let _ = p.write_all(&say).await;
                }
                if ctx.is_cancelled() {
                    stop(&mut child).await;
                    return Err(ActivityError::cancelled());
                }
                if drain.due() {
                    stop(&mut child).await;
                    return Err(ActivityError::application(temporalio_sdk::ApplicationFailure::new(
                        std::io::Error::other("its worker shut down (SIGTERM): the run is handed back to another worker"),
                    )));
                }
                ctx.record_heartbeat(()).await?;
            }
        }
    };
    let stdout = stdout.await.unwrap_or_default();
    Ok((status, stdout, stderr.await.unwrap_or_default()))
}

/// The pipe a run writes its asks to: lines read on a thread of their own,
/// and the write end, which `cmd` gets as descriptor 3 (and this process
/// closes once it has spawned).
fn ask_pipe(
    cmd: &mut tokio::process::Command,
) -> std::io::Result<(tokio::sync::mpsc::Receiver<String>, std::os::fd::OwnedFd)> {
    use std::io::BufRead;
    use std::os::fd::AsRawFd;
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let raw = write.as_raw_fd();
    // SAFETY: dup2 and fcntl are async-signal-safe; nothing else runs
    // between the fork and the exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::dup2(raw, ASKS_FD)?;
            // dup2 onto itself keeps close-on-exec: clear it.
            nix::fcntl::fcntl(
                ASKS_FD,
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
            )?;
            Ok(())
        });
    }
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    std::thread::Builder::new()
        .name("sluice-asks".into())
        .spawn(move || {
            for line in std::io::BufReader::new(std::fs::File::from(read)).lines() {
                let Ok(line) = line else { break };
                if tx.blocking_send(line).is_err() {
                    break;
                }
            }
        })?;
    Ok((rx, write))
}

/// The run's asks and the operator's answers, through the run's workflow.
struct Relay {
    workflow: Option<WorkflowHandle<Client, SluiceRun>>,
    /// Asks put and not yet answered.
    pending: Vec<String>,
}

impl Relay {
    /// An ask (or a settled one) the run wrote: signalled to the workflow.
    async fn put(&mut self, line: &str) {
        use temporalio_client::WorkflowSignalOptions;
        let (Some(workflow), Ok(v)) = (
            &self.workflow,
            serde_json::from_str::<serde_json::Value>(line),
        ) else {
            return;
        };
        if let Some(id) = v["settled"].as_str() {
            self.pending.retain(|p| p != id);
            let _ = workflow
                .signal(
                    SluiceRun::settled,
                    id.to_string(),
                    WorkflowSignalOptions::default(),
                )
                .await;
            return;
        }
        let now = crate::audit::now_ms();
        let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let question = Question {
            id: text("id"),
            capability: text("capability"),
            flow: text("flow"),
            reason: text("reason"),
            input: text("input"),
            asked_ms: now,
            until_ms: now + v["wait_ms"].as_i64().unwrap_or(0),
        };
        self.pending.push(question.id.clone());
        let _ = workflow
            .signal(SluiceRun::asked, question, WorkflowSignalOptions::default())
            .await;
    }

    /// The answers given to pending asks since last asked, as lines for
    /// the run's standard input.
    async fn answers(&mut self) -> Vec<u8> {
        use temporalio_client::WorkflowQueryOptions;
        let Some(workflow) = &self.workflow else {
            return Vec::new();
        };
        if self.pending.is_empty() {
            return Vec::new();
        }
        let Ok(state) = workflow
            .query(SluiceRun::state, (), WorkflowQueryOptions::default())
            .await
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for reply in state
            .replies
            .iter()
            .filter(|r| self.pending.contains(&r.ask))
        {
            out.extend(serde_json::to_vec(reply).unwrap_or_default());
            out.push(b'\n');
        }
        self.pending
            .retain(|p| !state.replies.iter().any(|r| &r.ask == p));
        out
    }
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

/// The outcome of a run whose newest part `run` ended ok before this
/// attempt: what it printed is in the record, not here.
fn ended_before(run: &str, tries: u32) -> Outcome {
    Outcome {
        status: "ok".into(),
        exit: 0,
        stdout: String::new(),
        stderr: format!(
            "sluice: run {run} had ended ok when its attempt's report was lost (its worker stopped or died \
             just after); what it printed is in the record: sluice audit show {run}\n"
        ),
        attempts: tries,
        unknown: None,
    }
}

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
            let opened = open::to_read(&Location::parse(&audit)?, credentials.as_deref())?;
            read(&*opened.db)
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// The newest run of the chain of resumes from run `id`, and its
    /// status, read from the shared record; `None` when run `id` is not
    /// recorded.
    async fn newest(&self, id: &str) -> Result<Option<(String, String)>, String> {
        let id = id.to_string();
        self.on_record(move |db| {
            use crate::audit::store;
            let newest = match store::is_recorded(db, &id) {
                Ok(false) => return Ok(None),
                Ok(true) => store::newest_resume(db, &id),
                Err(e) => Err(e),
            };
            let run = newest.map_err(|e| e.to_string())?;
            let status: Option<String> = db
                .value(
                    "SELECT status FROM runs WHERE id = ?1",
                    crate::audit::db::vals![&run],
                )
                .map_err(|e| e.to_string())?;
            Ok(Some((run, status.unwrap_or_default())))
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
                cmd.args([
                    "resume",
                    run,
                    "--take-over",
                    "--check-workspace",
                    "--script",
                ])
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
        cmd.arg(format!("--worker-pulse={}", silence.as_millis()))
            .arg(format!("--worker-asks={ASKS_FD}"));
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
