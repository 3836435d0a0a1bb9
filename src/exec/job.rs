//! Background jobs: commands that keep running after the call that started
//! them, for servers, watchers and long builds a workflow checks on later.
//!
//! A job is launched like a foreground command (own process group, closed or
//! fed stdin, scrubbed environment) but has no executor timeout. Its output
//! is read incrementally: each [`Job::read`] returns what arrived since the
//! previous read, never repeating a byte. While nobody reads, at most a
//! budget of unread bytes per stream is kept (the newest); older unread bytes
//! are lost, the next read says `lossy`, and the complete stream is in the
//! spill file it names (once a stream outgrows its budget, every byte of it
//! goes to that file, up to the spill cap).
//!
//! A job ends like a foreground command: when its direct child exits, what
//! is left of its group gets TERM, then KILL after the grace period. When the
//! run ends, [`Jobs::shutdown`] kills and reaps every job still running; if
//! the owner is dropped without that, the groups get KILL at once.

use super::output::Collector;
use super::process::{
    collect_into, end_group, exit_facts, is_remote, launch, signal_group, stop_remote,
    stop_remote_async, Launched,
};
use super::{SpawnFailure, Spec};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};

/// Where a job is in its life. Settles exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Its command has not ended yet (or its group is still being wound
    /// down).
    Running,
    /// Ended by itself; `exit_code` or `signal` says how.
    Exited,
    /// Ended because [`Job::kill`] or the end of the run stopped it.
    Killed,
}

impl Status {
    /// The status as [`crate::Runtime::job_state`] and a script's
    /// `job.status` give it: `"running"`, `"exited"` or `"killed"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Exited => "exited",
            Status::Killed => "killed",
        }
    }
}

/// A job's state at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Running, or how it ended.
    pub status: Status,
    /// The command's exit code once it exited; `None` while it runs and
    /// when a signal ended it.
    pub exit_code: Option<i32>,
    /// The name of the signal that ended the command (`"SIGTERM"`), if one
    /// did.
    pub signal: Option<String>,
    /// What the command's wrapper reports once it settled (a sandbox's
    /// facts: mode, denied, enforcement, runnerFailed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
}

/// How a wrapper describes a settled job, from its status (its exit code,
/// or 128 plus the signal that ended it), the start of its stderr, and its
/// resource limits as they settled.
pub type Facts = Arc<
    dyn Fn(Option<i32>, &str, Option<&super::resources::Settled>) -> serde_json::Value
        + Send
        + Sync,
>;

/// Bytes of stderr kept for [`Facts`] (a runner's own messages come first).
const FACTS_STDERR: usize = 16 * 1024;

/// One incremental read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Delta {
    /// Stdout produced since the previous read.
    pub stdout: String,
    /// Stderr produced since the previous read.
    pub stderr: String,
    /// Unread bytes were lost since the previous read; the spill files hold
    /// the complete streams.
    pub lossy: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_spill_path: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_spill_path: Option<PathBuf>,
}

/// Why a job did not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartError {
    /// The run already has its maximum of live jobs.
    TooMany {
        max: usize,
    },
    Spawn(SpawnFailure),
}

/// One stream of a job: the unread bytes, and a collector that spills the
/// whole stream once it outgrows the budget.
#[derive(Debug)]
struct Stream {
    unread: VecDeque<u8>,
    budget: usize,
    lost: u64,
    whole: Collector,
}

impl Stream {
    fn push(&mut self, data: &[u8]) {
        self.whole.push(data);
        self.unread.extend(data);
        let excess = self.unread.len().saturating_sub(self.budget);
        if excess > 0 {
            self.unread.drain(..excess);
            self.lost += excess as u64;
        }
    }

    /// Takes the unread bytes as text. Until the stream has ended, a
    /// character split across two reads waits for its last bytes.
    fn take(&mut self, ended: bool) -> (String, bool) {
        let bytes = self.unread.make_contiguous();
        let keep = if ended { 0 } else { incomplete_tail(bytes) };
        let n = bytes.len() - keep;
        let text = String::from_utf8_lossy(&bytes[..n]).into_owned();
        self.unread.drain(..n);
        let lossy = self.lost > 0;
        self.lost = 0;
        (text, lossy)
    }
}

/// Bytes at the end of `b` that begin a UTF-8 character not yet complete.
fn incomplete_tail(b: &[u8]) -> usize {
    for back in 1..=3.min(b.len()) {
        let byte = b[b.len() - back];
        if byte & 0xC0 == 0x80 {
            continue;
        }
        let need = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        return if need > back { back } else { 0 };
    }
    0
}

#[derive(Debug)]
struct State {
    snapshot: Snapshot,
    kill_requested: bool,
    /// Both pipes are closed (or abandoned): nothing more will arrive.
    ended: bool,
    stdout: Stream,
    stderr: Stream,
    /// The start of stderr, for the wrapper's facts.
    stderr_head: Vec<u8>,
}

/// A running or settled background command.
#[derive(Debug)]
pub struct Job {
    /// The job's number in its run (from 1, in start order; a resumed run
    /// goes on after the numbers its record handed out): the `jobId` the
    /// job operations take.
    pub id: u64,
    /// The pid of the process sluice started (the sandbox runner, for a
    /// confined command), which is also the id of the job's process group.
    pub pid: u32,
    /// The command as the caller gave it, for listings.
    pub command: String,
    pgid: Pid,
    grace: Duration,
    state: Arc<Mutex<State>>,
    done: watch::Receiver<bool>,
}

impl Job {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The job's state now.
    pub fn snapshot(&self) -> Snapshot {
        self.lock().snapshot.clone()
    }

    /// Whether the job has settled: its processes are gone, its output is
    /// read to the end, and its snapshot is final.
    pub fn is_done(&self) -> bool {
        *self.done.borrow()
    }

    /// Output produced since the previous read. Valid after the job settled.
    pub fn read(&self) -> Delta {
        let mut st = self.lock();
        let ended = st.ended;
        let (stdout, lost_out) = st.stdout.take(ended);
        let (stderr, lost_err) = st.stderr.take(ended);
        Delta {
            stdout,
            stderr,
            lossy: lost_out || lost_err,
            stdout_spill_path: st.stdout.whole.spill_path().map(PathBuf::from),
            stderr_spill_path: st.stderr.whole.spill_path().map(PathBuf::from),
        }
    }

    /// Waits until the job settles, at most `timeout` (forever if `None`).
    /// True when it has settled.
    pub async fn wait(&self, timeout: Option<Duration>) -> bool {
        let mut done = self.done.clone();
        let settled = async move {
            let _ = done.wait_for(|d| *d).await;
        };
        match timeout {
            Some(t) => tokio::time::timeout(t, settled).await.is_ok(),
            None => {
                settled.await;
                true
            }
        }
    }

    /// Stops the job: TERM to its group, KILL after the grace period.
    /// False when it had already settled (nothing to do); calling it again
    /// while the job is dying changes nothing.
    pub fn kill(&self) -> bool {
        if self.is_done() {
            return false;
        }
        let mut st = self.lock();
        if st.kill_requested {
            return true;
        }
        st.kill_requested = true;
        drop(st);
        let (pgid, grace, mut done) = (self.pgid, self.grace, self.done.clone());
        // A job in a container is stopped there first: its transport's
        // end would leave what it started running.
        let remote = is_remote(pgid);
        if !remote {
            signal_group(pgid, Signal::SIGTERM);
        }
        tokio::spawn(async move {
            if remote {
                stop_remote_async(pgid, Signal::SIGTERM).await;
                signal_group(pgid, Signal::SIGTERM);
            }
            let settled = done.wait_for(|d| *d);
            if tokio::time::timeout(grace, settled).await.is_err() {
                stop_remote_async(pgid, Signal::SIGKILL).await;
                signal_group(pgid, Signal::SIGKILL);
            }
        });
        true
    }
}

/// The background jobs of one run.
#[derive(Debug)]
pub struct Jobs {
    max_live: usize,
    unread_budget: usize,
    next: AtomicU64,
    table: Mutex<BTreeMap<u64, Arc<Job>>>,
}

/// How many jobs may run at once in one run, by default.
pub const DEFAULT_MAX_LIVE: usize = 16;

impl Jobs {
    /// `unread_budget` bounds each stream's unread bytes.
    pub fn new(max_live: usize, unread_budget: usize) -> Jobs {
        Jobs {
            max_live,
            unread_budget: unread_budget.max(1),
            next: AtomicU64::new(1),
            table: Mutex::new(BTreeMap::new()),
        }
    }

    fn table(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<Job>>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Numbers new jobs after `id`: a resumed run's recorded job handles
    /// keep naming the jobs of the run they came from, never a new one.
    pub fn number_after(&self, id: u64) {
        self.next.fetch_max(id + 1, Ordering::Relaxed);
    }

    pub fn get(&self, id: u64) -> Option<Arc<Job>> {
        self.table().get(&id).cloned()
    }

    /// Every job of the run, oldest first.
    pub fn list(&self) -> Vec<Arc<Job>> {
        self.table().values().cloned().collect()
    }

    pub fn live(&self) -> usize {
        self.table().values().filter(|j| !j.is_done()).count()
    }

    /// Launches `spec` as a job. Must be called inside a Tokio runtime.
    #[cfg(test)]
    pub fn start(&self, spec: Spec, command: String) -> Result<Arc<Job>, StartError> {
        self.start_with(spec, command, None)
    }

    /// Launches `spec` as a job, with the wrapper's facts computed when it
    /// settles. Must be called inside a Tokio runtime.
    pub fn start_with(
        &self,
        spec: Spec,
        command: String,
        facts: Option<Facts>,
    ) -> Result<Arc<Job>, StartError> {
        if self.live() >= self.max_live {
            return Err(StartError::TooMany { max: self.max_live });
        }
        let launched = launch(&spec).map_err(StartError::Spawn)?;
        let stream = |name| Stream {
            unread: VecDeque::new(),
            budget: self.unread_budget,
            lost: 0,
            whole: Collector::new(name, self.unread_budget, spec.spill.clone(), spec.spill_cap),
        };
        let state = Arc::new(Mutex::new(State {
            snapshot: Snapshot {
                status: Status::Running,
                exit_code: None,
                signal: None,
                sandbox: None,
            },
            kill_requested: false,
            ended: false,
            stdout: stream("stdout"),
            stderr: stream("stderr"),
            stderr_head: Vec::new(),
        }));
        let (done_tx, done) = watch::channel(false);
        let job = Arc::new(Job {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            pid: launched.pid,
            command,
            pgid: launched.pgid,
            grace: spec.grace(),
            state: state.clone(),
            done,
        });
        tokio::spawn(settle(launched, state, spec.grace(), done_tx, facts));
        self.table().insert(job.id, job.clone());
        Ok(job)
    }

    /// Kills every job still running and waits until each has settled
    /// (its processes reaped). Call it when the run ends.
    pub async fn shutdown(&self) {
        let jobs = self.list();
        for job in &jobs {
            job.kill();
        }
        for job in &jobs {
            job.wait(None).await;
        }
    }
}

impl Drop for Jobs {
    /// The owner went away without [`Jobs::shutdown`]: no job may outlive
    /// the run, so every live group gets KILL now.
    fn drop(&mut self) {
        for job in self.table().values() {
            if !job.is_done() {
                job.lock().kill_requested = true;
                stop_remote(job.pgid, Signal::SIGKILL);
                signal_group(job.pgid, Signal::SIGKILL);
            }
        }
    }
}

/// Drives one job to its end: pumps both pipes into the state, waits for
/// the direct child, winds down its group, and publishes the outcome.
async fn settle(
    launched: Launched,
    state: Arc<Mutex<State>>,
    grace: Duration,
    done: watch::Sender<bool>,
    facts: Option<Facts>,
) {
    let Launched {
        mut child,
        pgid,
        stdout,
        stderr,
        stdin_task,
        guard: wrapper,
        bounds,
        ..
    } = launched;
    let (stop_tx, stop_rx) = watch::channel(false);
    let pump = |pipe, is_stdout: bool, stop| {
        let state = state.clone();
        tokio::spawn(collect_into(pipe, stop, move |chunk: &[u8]| {
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            if !is_stdout && st.stderr_head.len() < FACTS_STDERR {
                let room = FACTS_STDERR - st.stderr_head.len();
                st.stderr_head
                    .extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            let stream = if is_stdout {
                &mut st.stdout
            } else {
                &mut st.stderr
            };
            stream.push(chunk);
        }))
    };
    let out_task = pump(stdout, true, stop_rx.clone());
    let err_task = stderr.map(|p| pump(p, false, stop_rx));

    let status = child.wait().await.ok();
    signal_group(pgid, Signal::SIGTERM);
    let grace_deadline = Instant::now() + grace;
    let stopper = tokio::spawn(async move {
        sleep_until(grace_deadline).await;
        stop_tx.send_replace(true);
    });
    let _ = out_task.await;
    if let Some(t) = err_task {
        let _ = t.await;
    }
    stopper.abort();
    end_group(pgid, grace_deadline, false).await;
    // Nothing of the command is left: what watched over it can stop, and
    // what its cgroups counted is final.
    drop(wrapper);
    let limits = bounds.map(super::resources::Bounds::settle);
    if let Some(t) = stdin_task {
        t.abort();
    }
    let (exit_code, signal) = exit_facts(status);
    let shell_status = exit_code.or_else(|| {
        let sig = signal.as_deref()?.parse::<Signal>().ok()?;
        Some(128 + sig as i32)
    });
    {
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        st.ended = true;
        let said = String::from_utf8_lossy(&st.stderr_head).into_owned();
        let sandbox = facts.map(|f| f(shell_status, &said, limits.as_ref()));
        st.snapshot = Snapshot {
            status: if st.kill_requested {
                Status::Killed
            } else {
                Status::Exited
            },
            exit_code,
            signal,
            sandbox,
        };
    }
    done.send_replace(true);
}
