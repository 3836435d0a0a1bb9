//! Launching one foreground command and settling it.
//!
//! Every command runs in its own process group (pgid = its pid), because a
//! shell command forks: killing only the direct child would leave its
//! descendants running and holding our pipes. Termination is always the same
//! two-step: SIGTERM to the group, then SIGKILL to the group when the grace
//! period (measured from the first signal) ends. The grace timer keeps running
//! after the direct child exits, so a descendant that traps TERM still dies.
//!
//! A foreground call leaves no process behind: when the direct child exits on
//! its own, whatever remains of its group gets the same TERM-then-KILL. Work
//! meant to outlive the call belongs in a background job. Reading the pipes
//! stops at the grace deadline, so a daemon that escaped the group (setsid)
//! but kept our pipes cannot hang the call either.
//!
//! A wrapper can do better than a group ([`super::Wrap::own_session`]): the
//! command then leads a session of its own that nothing it starts can leave,
//! and every signal above goes to each process of that session (found in
//! /proc, signalled through a pidfd), whatever group it moved to; "what
//! remains" is then what remains of the session. A wrapper whose runner has
//! its own PID namespace ([`super::Wrap::kills_tree`]) gets its whole tree
//! killed instead.

use super::output::{Captured, Collector};
use super::Spec;
use crate::error::{ErrorCode, FlowError};
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Child;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{sleep_until, Instant};

/// Why a command never started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnFailureKind {
    /// The program does not exist (or a PATH lookup found nothing).
    ProgramNotFound,
    /// The program exists but is not executable, or the cwd is not enterable.
    PermissionDenied,
    /// The working directory does not exist.
    CwdNotFound,
    /// The working directory exists but is not a directory.
    CwdNotDirectory,
    /// The [`super::Wrap`] refused the command (sandbox/container unavailable).
    Wrap,
    Other,
}

/// A spawn failure as a fact of the outcome, with the OS's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnFailure {
    pub kind: SpawnFailureKind,
    pub message: String,
}

/// The outcome of one foreground run. `timed_out` and `aborted` are
/// independent of `exit_code`/`signal` (a command that traps TERM and exits 0
/// after a timeout is still `timed_out`) and mutually exclusive: the first
/// cause to fire wins.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Exit code; `None` when killed by a signal or never started.
    pub exit_code: Option<i32>,
    /// Terminating signal name (`"SIGKILL"`), when killed by one.
    pub signal: Option<String>,
    pub timed_out: bool,
    pub aborted: bool,
    /// The effective timeout applied (after defaulting and capping).
    pub timeout: Duration,
    /// The signal (`"SIGINT"`) whose stop request ended the command: the run
    /// was asked to stop, and sluice killed the command's group at once.
    pub interrupted: Option<String>,
    pub stdout: Captured,
    pub stderr: Captured,
    /// Wall time from launch until the outcome settled.
    pub elapsed: Duration,
    /// The direct child's pid, which is also its process group id.
    #[cfg_attr(not(test), allow(dead_code))]
    pub pid: Option<u32>,
    /// Set when the command never ran; every other field is then empty.
    pub spawn_failure: Option<SpawnFailure>,
    /// How the command's resource limits were enforced and what its
    /// cgroups counted; `None` when it had none (or never ran).
    pub limits: Option<super::resources::Settled>,
}

impl Outcome {
    fn not_started(spec: &Spec, started: Instant) -> Outcome {
        Outcome {
            exit_code: None,
            signal: None,
            timed_out: false,
            aborted: false,
            timeout: spec.timeout,
            interrupted: None,
            stdout: Captured::default(),
            stderr: Captured::default(),
            elapsed: started.elapsed(),
            pid: None,
            spawn_failure: None,
            limits: None,
        }
    }

    /// The status as a shell reports it: the exit code, or 128 plus the
    /// number of the signal that ended the command. `None` if it never ran.
    pub fn shell_status(&self) -> Option<i32> {
        self.exit_code.or_else(|| {
            let sig = self.signal.as_deref()?.parse::<Signal>().ok()?;
            Some(128 + sig as i32)
        })
    }

    /// For a command that a stop request ended (see
    /// [`Outcome::interrupted`]): `e`, the flow's error for a command cut
    /// short (holding what it printed), made the stopped command's:
    /// `timeout`, as for a grep or glob a stop cut short, its message saying
    /// what happened, `interrupted` naming the signal. Else `e` as it is.
    ///
    /// A command its caller cancelled ([`Outcome::aborted`]) is likewise
    /// `timeout`, saying it was cancelled and stopped with the grace a
    /// timeout gets; the pipeline names the cancelled task.
    pub fn stopped(&self, e: FlowError) -> FlowError {
        if self.aborted {
            let after = self.elapsed.as_millis() as u64;
            return FlowError {
                code: ErrorCode::Timeout,
                message: format!(
                    "the command was cancelled by its caller {after} ms after it started and stopped \
                     (TERM, then KILL after the grace period); what it printed so far is in this error's output fields"
                ),
                ..e
            }
            .with("elapsedMs", after);
        }
        let Some(sig) = self.interrupted.as_deref() else {
            return e;
        };
        let after = self.elapsed.as_millis() as u64;
        FlowError {
            code: ErrorCode::Timeout,
            message: format!(
                "the command was stopped because the run was interrupted by {sig}: sluice killed it at once, \
                 {after} ms after it started; what it printed so far is in this error's output fields"
            ),
            ..e
        }
        .with("interrupted", sig)
        .with("elapsedMs", after)
    }

    /// True only for a command that ran to completion and exited 0.
    #[cfg(test)]
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
            && !self.timed_out
            && !self.aborted
            && self.spawn_failure.is_none()
    }
}

fn failure(spec: &Spec, started: Instant, kind: SpawnFailureKind, message: String) -> Outcome {
    let mut out = Outcome::not_started(spec, started);
    out.spawn_failure = Some(SpawnFailure { kind, message });
    out
}

/// Checks the working directory before launch, because the OS reports a
/// missing cwd and a missing program with the same ENOENT.
fn probe_cwd(spec: &Spec) -> Option<(SpawnFailureKind, String)> {
    let shown = spec.cwd.display();
    match std::fs::metadata(&spec.cwd) {
        Ok(m) if m.is_dir() => None,
        Ok(_) => Some((
            SpawnFailureKind::CwdNotDirectory,
            format!("working directory {shown} is not a directory"),
        )),
        Err(e) if e.kind() == ErrorKind::NotFound => Some((
            SpawnFailureKind::CwdNotFound,
            format!("working directory {shown} does not exist"),
        )),
        Err(e) => Some((
            SpawnFailureKind::Other,
            format!("working directory {shown}: {e}"),
        )),
    }
}

/// Groups whose command is wrapped by a runner that needs its whole tree
/// killed (see [`super::Wrap::kills_tree`]), by pgid.
static TREES: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// Commands that lead a session of their own, which nothing they start can
/// leave (see [`super::Wrap::own_session`]), by session id (their pid, and
/// the pgid everything here knows them by).
static SESSIONS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

fn trees() -> std::sync::MutexGuard<'static, Vec<i32>> {
    TREES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every group launched and not yet ended (foreground and background), by
/// pgid: what [`kill_all_groups`] ends when the process cannot wind its
/// runs down.
static LIVE: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<i32>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Kills, at once, every process group this process launched that has not
/// ended (and the whole tree of those whose runner needs it). For a process
/// about to exit without unwinding, whose commands would otherwise outlive
/// it (a run's backstop, see `crate::interrupt`).
pub fn kill_all_groups() {
    let groups = live().clone();
    for pgid in groups {
        stop_remote(Pid::from_raw(pgid), Signal::SIGKILL);
        signal_group(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

/// Commands that run elsewhere (see [`super::Wrap::remote`]), by the pgid
/// of their host transport, with how to signal them where they run.
static REMOTES: std::sync::Mutex<Vec<(i32, super::Stop)>> = std::sync::Mutex::new(Vec::new());

fn remotes() -> std::sync::MutexGuard<'static, Vec<(i32, super::Stop)>> {
    REMOTES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Signals a command that runs elsewhere where it runs, blocking until the
/// transport says it was done; nothing for a command that runs here. Comes
/// before the signal to the host's group: once the transport is gone,
/// nothing would stop what it started.
pub(crate) fn stop_remote(pgid: Pid, sig: Signal) {
    let stop = remotes()
        .iter()
        .find(|(g, _)| *g == pgid.as_raw())
        .map(|(_, s)| s.clone());
    if let Some(stop) = stop {
        stop(sig);
    }
}

/// Whether the group's command runs elsewhere (see [`stop_remote`]).
pub(crate) fn is_remote(pgid: Pid) -> bool {
    remotes().iter().any(|(g, _)| *g == pgid.as_raw())
}

/// [`stop_remote`] off the async thread.
pub(crate) async fn stop_remote_async(pgid: Pid, sig: Signal) {
    if is_remote(pgid) {
        let _ = tokio::task::spawn_blocking(move || stop_remote(pgid, sig)).await;
    }
}

fn sessions() -> std::sync::MutexGuard<'static, Vec<i32>> {
    SESSIONS.lock().unwrap_or_else(|e| e.into_inner())
}

/// SIGTERM/SIGKILL to the whole group. ESRCH (group already gone) is fine.
/// A pgid of 0 or 1 would mean our own group or init's: never signal those.
/// A group whose wrapper needs it gets its whole tree killed instead, at
/// once: nothing of a sandbox may outlive the stop. A command leading its
/// own session gets the signal in every process of that session, whatever
/// group it moved to.
pub(crate) fn signal_group(pgid: Pid, sig: Signal) {
    if pgid.as_raw() <= 1 {
        return;
    }
    if trees().contains(&pgid.as_raw()) {
        kill_tree(pgid);
        return;
    }
    if sessions().contains(&pgid.as_raw()) {
        signal_session(pgid.as_raw(), sig);
        return;
    }
    let _ = killpg(pgid, sig);
}

/// Freezes the group's leader (so it starts nothing more), KILLs every
/// process under it, whatever session it moved to, then the group.
fn kill_tree(pgid: Pid) {
    // Only while the leader is the process we started (still in its own
    // group): once it is reaped its pid may belong to someone else.
    if leads(pgid) {
        let _ = nix::sys::signal::kill(pgid, Signal::SIGSTOP);
        for pid in descendants(pgid.as_raw()) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
    let _ = killpg(pgid, Signal::SIGKILL);
}

/// Whether process `pgid` exists and leads group `pgid`.
fn leads(pgid: Pid) -> bool {
    stat(pgid.as_raw()).is_some_and(|s| s.pgrp == pgid.as_raw())
}

/// The processes under `pid`, children first, from every process's parent
/// in /proc (the kernel's per-task `children` lists need
/// CONFIG_PROC_CHILDREN, which many kernels lack).
fn descendants(pid: i32) -> Vec<i32> {
    let all = processes();
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for child in all.iter().filter(|s| s.ppid == p && s.pid != p) {
            out.push(child.pid);
            todo.push(child.pid);
        }
    }
    out
}

/// Sends `sig` to every live process of session `sid`. A KILL goes on
/// until none is left: what forked between two scans is found by the next.
/// Each process is signalled through a pidfd taken after checking, again,
/// that it belongs to the session, so a pid reused meanwhile is never hit.
fn signal_session(sid: i32, sig: Signal) {
    let rounds = if sig == Signal::SIGKILL { 50 } else { 1 };
    for _ in 0..rounds {
        let members: Vec<i32> = processes()
            .into_iter()
            .filter(|s| s.session == sid && runs(s))
            .map(|s| s.pid)
            .collect();
        if members.is_empty() {
            return;
        }
        for pid in members {
            signal_member(pid, sid, sig);
        }
    }
}

/// `sig` to process `pid` if it (still) belongs to session `sid`.
fn signal_member(pid: i32, sid: i32, sig: Signal) {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return;
    }
    // SAFETY: the kernel just gave us this fd; we own it.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) };
    // The pidfd names the process that had `pid` when it was opened; if
    // `pid` now belongs to another process, that one is not ours, and the
    // pidfd's own is gone (the signal then finds nothing).
    if stat(pid).is_none_or(|s| s.session != sid) {
        return;
    }
    // SAFETY: a live pidfd, a signal number, no siginfo, flags 0.
    unsafe {
        nix::libc::syscall(
            nix::libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig as i32,
            std::ptr::null::<u8>(),
            0,
        );
    }
}

/// Whether any live (non-zombie) process remains in session `sid`.
fn session_alive(sid: i32) -> bool {
    processes().iter().any(|s| s.session == sid && runs(s))
}

/// Whether the process `s` describes still runs: it is no zombie, or it
/// is a zombie only in name, its main thread having ended alone while
/// another thread of it goes on (/proc shows it `Z`, and the process lives
/// on, as able as before to hold pipes and to outlive its call).
fn runs(s: &Stat) -> bool {
    s.state != 'Z' || thread_runs(s.pid)
}

/// Whether any thread of process `pid` is not a zombie.
fn thread_runs(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|text| {
                let rest = &text[text.rfind(')')? + 1..];
                rest.split_whitespace().next()?.chars().next()
            })
            .is_some_and(|state| state != 'Z')
    })
}

/// One process as /proc/PID/stat shows it.
struct Stat {
    pid: i32,
    state: char,
    ppid: i32,
    pgrp: i32,
    session: i32,
}

/// Process `pid`'s stat line, parsed.
fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid pgrp session ..."; comm may hold spaces and ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let mut number = || fields.next()?.parse::<i32>().ok();
    Some(Stat {
        pid,
        state,
        ppid: number()?,
        pgrp: number()?,
        session: number()?,
    })
}

/// Every process /proc shows.
fn processes() -> Vec<Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .collect()
}

/// Forgets a group once it has ended.
pub(crate) fn forget_group(pgid: Pid) {
    remotes().retain(|(g, _)| *g != pgid.as_raw());
    trees().retain(|g| *g != pgid.as_raw());
    live().retain(|g| *g != pgid.as_raw());
    sessions().retain(|g| *g != pgid.as_raw());
}

/// Whether any live (non-zombie) process remains in the group (or, for a
/// command leading its own session, in that session). `killpg(0)` also
/// counts zombies, which linger when PID 1 does not reap orphans (common in
/// containers), so on Linux a positive answer is confirmed from /proc.
pub(crate) fn group_alive(pgid: Pid) -> bool {
    if pgid.as_raw() <= 1 {
        return false;
    }
    if sessions().contains(&pgid.as_raw()) {
        return session_alive(pgid.as_raw());
    }
    if killpg(pgid, None) == Err(Errno::ESRCH) {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return true;
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(stat)
            .any(|s| s.pgrp == pgid.as_raw() && runs(&s))
    }
    #[cfg(not(target_os = "linux"))]
    true
}

/// Waits for what is left of a group (which has had TERM) until the grace
/// deadline, then KILLs it, and gives the kernel a moment to finish the
/// killed, so a caller reports an outcome only once nothing of the command
/// is left running. `killed`: the group already had KILL.
pub(crate) async fn end_group(pgid: Pid, grace_deadline: Instant, killed: bool) {
    wind_down(pgid, grace_deadline, killed).await;
    forget_group(pgid);
}

async fn wind_down(pgid: Pid, grace_deadline: Instant, mut killed: bool) {
    if !killed {
        while group_alive(pgid) {
            if Instant::now() >= grace_deadline {
                signal_group(pgid, Signal::SIGKILL);
                killed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    if killed {
        let settle = Instant::now() + Duration::from_millis(200);
        while group_alive(pgid) && Instant::now() < settle {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Kills the group with SIGKILL if the run future is dropped mid-flight, so a
/// cancelled caller never leaks the command.
struct GroupGuard {
    pgid: Pid,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            stop_remote(self.pgid, Signal::SIGKILL);
            signal_group(self.pgid, Signal::SIGKILL);
            forget_group(self.pgid);
        }
    }
}

/// Reads `pipe` into `sink` until end-of-file or until `stop` fires; true
/// when stopped early (a leftover process still held the pipe).
pub(crate) async fn collect_into(
    mut pipe: impl AsyncRead + Unpin,
    mut stop: watch::Receiver<bool>,
    mut sink: impl FnMut(&[u8]),
) -> bool {
    // Most commands print little: a whole pipe's worth is made only once
    // a read fills the first buffer.
    let mut buf = vec![0u8; FIRST_READ_BYTES];
    loop {
        tokio::select! {
            r = pipe.read(&mut buf) => match r {
                Ok(0) | Err(_) => return false,
                Ok(n) => {
                    sink(&buf[..n]);
                    if n == buf.len() && buf.len() < READ_BYTES {
                        buf = vec![0u8; READ_BYTES];
                    }
                }
            },
            _ = stop.wait_for(|s| *s) => return true,
        }
    }
}

async fn collect(
    pipe: Pipe,
    collector: Collector,
    stop: watch::Receiver<bool>,
    tap: Option<super::Tap>,
) -> Captured {
    super::output::drain(pipe, collector, stop, tap).await
}

enum Cause {
    Timeout,
    Abort,
    /// The run was asked to stop, by this signal.
    Interrupt(i32),
}

/// How long a stopped command's pipes are read after its group was killed:
/// what it wrote before the kill is in them already; a process outside the
/// group that still holds one must not hold the stop.
const STOPPED_DRAIN: Duration = Duration::from_millis(200);

/// Waits until `deadline` or a stop request, whichever comes first; true
/// for the stop.
async fn grace_or_stop(deadline: Instant) -> bool {
    tokio::select! {
        _ = sleep_until(deadline) => false,
        _ = crate::interrupt::signalled() => true,
    }
}

/// The output pipes of a launched command.
pub(crate) type Pipe = Box<dyn super::output::Source>;

/// A command that started: its child (whose pid is its process group id),
/// its output pipes, and the writer feeding its stdin.
pub(crate) struct Launched {
    pub child: Proc,
    pub pid: u32,
    pub pgid: Pid,
    pub stdout: Pipe,
    /// `None` when stderr is merged into stdout.
    pub stderr: Option<Pipe>,
    pub stdin_task: Option<JoinHandle<()>>,
    /// The writer of the command's standard input, when the spec keeps it
    /// open for the caller ([`super::piped`]).
    pub stdin: Option<super::piped::Writer>,
    /// What the wrapper keeps alive beside the command (a supervisor):
    /// dropped once every process of the command has ended.
    pub guard: Option<super::Guard>,
    /// The command's resource limits, settled once every process of it
    /// has ended.
    pub bounds: Option<super::resources::Bounds>,
}

/// A launched command's own process: a child of ours, or one a
/// [`super::Starter`] started and reports the end of.
pub(crate) enum Proc {
    Child(Child),
    Started {
        pid: i32,
        exit: tokio::sync::oneshot::Receiver<super::Ended>,
        status: Option<ExitStatus>,
    },
}

impl Proc {
    /// Waits for the process to end (cancel-safe, and again after).
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Proc::Child(child) => child.wait().await,
            Proc::Started { pid, exit, status } => {
                if let Some(s) = status {
                    return Ok(*s);
                }
                // No word: the place it ran in went away, which killed it.
                let raw = match (&mut *exit).await {
                    Ok(ended) => {
                        if ended.session_over {
                            sessions().retain(|s| s != pid);
                        }
                        ended.status
                    }
                    Err(_) => Signal::SIGKILL as i32,
                };
                Ok(*status.insert(ExitStatus::from_raw(raw)))
            }
        }
    }
}

fn wrap_failure(message: String) -> SpawnFailure {
    SpawnFailure {
        kind: SpawnFailureKind::Wrap,
        message,
    }
}

/// The spawn failure of `program` for the OS's error `e`.
fn spawn_failure(program: &std::ffi::OsStr, e: std::io::Error) -> SpawnFailure {
    let kind = match e.kind() {
        ErrorKind::NotFound => SpawnFailureKind::ProgramNotFound,
        ErrorKind::PermissionDenied => SpawnFailureKind::PermissionDenied,
        _ => SpawnFailureKind::Other,
    };
    let program = program.to_string_lossy();
    SpawnFailure {
        kind,
        message: format!("cannot start {program}: {e}"),
    }
}

/// Checks the working directory, applies the wrapper and starts the command
/// in its own process group with a closed (or fed) stdin and piped output.
pub(crate) fn launch(spec: &Spec) -> Result<Launched, SpawnFailure> {
    let remote = spec.wrap.as_ref().and_then(|w| w.remote(&spec.env));
    if remote.is_none() {
        if let Some((kind, message)) = probe_cwd(spec) {
            return Err(SpawnFailure { kind, message });
        }
    }
    // A command carried elsewhere is bounded there, if at all: these
    // limits are the host's.
    let bounds = (remote.is_none() && !spec.limits.is_empty())
        .then(|| super::resources::Bounds::prepare(spec.limits));
    if let Some(starter) = spec.wrap.as_ref().and_then(|w| w.starter()) {
        let step = bounds.as_ref().map(|b| b.step());
        if let Some(mut launched) = launch_started(spec, starter, step)? {
            launched.bounds = bounds;
            return Ok(launched);
        }
    }
    let argv = match &spec.wrap {
        Some(w) => match w.wrap(spec.argv.clone(), &spec.cwd) {
            Ok(argv) if !argv.is_empty() => argv,
            Ok(_) => return Err(wrap_failure("wrapper produced an empty argv".into())),
            Err(e) => return Err(wrap_failure(e)),
        },
        None => spec.argv.clone(),
    };
    let own_session = spec.wrap.as_ref().is_some_and(|w| w.own_session());
    let hooks = match &spec.wrap {
        Some(w) => w.launch().map_err(wrap_failure)?,
        None => super::Launch::default(),
    };
    let spawn_failure = |e: std::io::Error| spawn_failure(&argv[0], e);

    let mut cmd = tokio::process::Command::new(&argv[0]);
    let (host_cwd, env) = match &remote {
        Some(r) => (&r.host_cwd, &r.env),
        None => (&spec.cwd, &spec.env),
    };
    cmd.args(&argv[1..])
        .current_dir(host_cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(if spec.stdin.is_some() || spec.open_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    // Merged output shares one pipe, so the reader sees stdout and stderr
    // in the order the command wrote them, as a terminal would.
    let merged = if spec.merge_output {
        let (reader, writer) = std::io::pipe().map_err(spawn_failure)?;
        let second = writer.try_clone().map_err(spawn_failure)?;
        cmd.stdout(Stdio::from(writer)).stderr(Stdio::from(second));
        Some(reader)
    } else {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        None
    };
    // A command that starts a session of its own leads a new group with
    // it; one that does not gets a group of its own here.
    if !own_session {
        cmd.process_group(0);
    }
    if let Some(w) = &spec.wrap {
        cmd.envs(w.env());
    }
    if let Some(step) = bounds.as_ref().map(|b| b.step()) {
        // First: nothing the wrapper's step starts may be outside them.
        // SAFETY: the step makes raw system calls on prepared values.
        unsafe {
            cmd.pre_exec(move || step.apply().map_err(std::io::Error::from_raw_os_error));
        }
    }
    if let Some(step) = hooks.pre_exec {
        // SAFETY: the step makes only async-signal-safe calls (see
        // `Launch::pre_exec`), as the forked child of a threaded parent must.
        unsafe {
            cmd.pre_exec(move || step());
        }
    }
    let spawned = cmd.spawn();
    // The command object holds our copies of the merged pipe's write end
    // (and the wrapper's per-launch state); they must close now or the
    // reader never sees end-of-file.
    drop(cmd);
    let mut child = spawned.map_err(spawn_failure)?;
    let pid = child.id().unwrap_or(0);
    if own_session && pid > 1 {
        sessions().push(pid as i32);
    }
    let guard = match hooks.started.map(|started| started(pid)) {
        None => None,
        Some(Ok(guard)) => Some(guard),
        Some(Err(why)) => {
            // The command runs but what confines it did not start: it must
            // not go on. Its zombie is reaped when `child` is dropped.
            let pgid = Pid::from_raw(pid as i32);
            signal_group(pgid, Signal::SIGKILL);
            forget_group(pgid);
            let _ = child.start_kill();
            return Err(wrap_failure(why));
        }
    };
    let (stdout, stderr): (Pipe, Option<Pipe>) = match merged {
        Some(reader) => {
            widen(&reader);
            let fd = std::os::fd::OwnedFd::from(reader);
            let rx = tokio::net::unix::pipe::Receiver::from_owned_fd(fd).map_err(spawn_failure)?;
            (Box::new(rx), None)
        }
        None => {
            let stdout = child.stdout.take().expect("stdout piped");
            let stderr = child.stderr.take().expect("stderr piped");
            widen(&stdout);
            widen(&stderr);
            (Box::new(stdout), Some(Box::new(stderr)))
        }
    };
    let stdin: Option<super::piped::Writer> = match spec.open_stdin {
        true => child
            .stdin
            .take()
            .map(|w| Box::new(w) as super::piped::Writer),
        false => None,
    };
    // A command that never reads its stdin must not block the call: the
    // writer runs on its own and a broken pipe is ignored.
    let stdin_task = match (child.stdin.take(), spec.stdin.clone()) {
        (Some(mut w), Some(bytes)) => Some(tokio::spawn(async move {
            let _ = w.write_all(&bytes).await;
            let _ = w.shutdown().await;
        })),
        _ => None,
    };
    if spec.wrap.as_ref().is_some_and(|w| w.kills_tree()) && pid > 1 {
        trees().push(pid as i32);
    }
    if let (Some(r), true) = (remote, pid > 1) {
        remotes().push((pid as i32, r.stop));
    }
    if pid > 1 {
        live().push(pid as i32);
    }
    Ok(Launched {
        child: Proc::Child(child),
        pid,
        pgid: Pid::from_raw(pid as i32),
        stdout,
        stderr,
        stdin_task,
        stdin,
        guard,
        bounds,
    })
}

/// Starts the command through the wrapper's [`super::Starter`]: the
/// pipes are made here and handed over, so the output is read as a
/// child's would be; the command leads its own session. `None` when the
/// starter sends it elsewhere ([`super::StartFailure::Elsewhere`]).
fn launch_started(
    spec: &Spec,
    starter: &dyn super::Starter,
    bounds: Option<super::resources::ChildStep>,
) -> Result<Option<Launched>, SpawnFailure> {
    let program = spec.argv.first().cloned().unwrap_or_default();
    let failed = |e: std::io::Error| spawn_failure(&program, e);
    let (out_reader, out_writer) = std::io::pipe().map_err(failed)?;
    let (err_reader, err_writer) = if spec.merge_output {
        (None, out_writer.try_clone().map_err(failed)?)
    } else {
        let (r, w) = std::io::pipe().map_err(failed)?;
        (Some(r), w)
    };
    let (stdin, stdin_writer) = match &spec.stdin {
        _ if spec.open_stdin => {
            let (r, w) = std::io::pipe().map_err(failed)?;
            (std::os::fd::OwnedFd::from(r), Some(w))
        }
        Some(_) => {
            let (r, w) = std::io::pipe().map_err(failed)?;
            (std::os::fd::OwnedFd::from(r), Some(w))
        }
        None => (
            std::fs::File::open("/dev/null").map_err(failed)?.into(),
            None,
        ),
    };
    let mut env = spec.env.clone();
    if let Some(w) = &spec.wrap {
        env.extend(w.env());
    }
    let started = starter.start(super::Start {
        argv: spec.argv.clone(),
        cwd: spec.cwd.clone(),
        env,
        stdin,
        stdout: out_writer.into(),
        stderr: err_writer.into(),
        bounds,
    });
    let running = match started {
        Ok(running) => running,
        Err(super::StartFailure::Exec(e)) => return Err(failed(e)),
        Err(super::StartFailure::Broken(why)) => return Err(wrap_failure(why)),
        Err(super::StartFailure::Elsewhere) => return Ok(None),
    };
    let pid = running.pid;
    sessions().push(pid as i32);
    live().push(pid as i32);
    let receiver = |r: std::io::PipeReader| -> Result<Pipe, SpawnFailure> {
        widen(&r);
        let fd = std::os::fd::OwnedFd::from(r);
        let rx = tokio::net::unix::pipe::Receiver::from_owned_fd(fd).map_err(failed)?;
        Ok(Box::new(rx))
    };
    let stdout = receiver(out_reader)?;
    let stderr = err_reader.map(receiver).transpose()?;
    let (stdin_writer, open): (_, Option<super::piped::Writer>) = match stdin_writer {
        Some(w) if spec.open_stdin => {
            let fd = std::os::fd::OwnedFd::from(w);
            let tx = tokio::net::unix::pipe::Sender::from_owned_fd(fd).map_err(failed)?;
            (None, Some(Box::new(tx)))
        }
        other => (other, None),
    };
    let stdin_task = match (stdin_writer, spec.stdin.clone()) {
        (Some(w), Some(bytes)) => {
            let fd = std::os::fd::OwnedFd::from(w);
            let mut tx = tokio::net::unix::pipe::Sender::from_owned_fd(fd).map_err(failed)?;
            Some(tokio::spawn(async move {
                let _ = tx.write_all(&bytes).await;
                let _ = tx.shutdown().await;
            }))
        }
        _ => None,
    };
    Ok(Some(Launched {
        child: Proc::Started {
            pid: pid as i32,
            exit: running.exit,
            status: None,
        },
        pid,
        pgid: Pid::from_raw(pid as i32),
        stdout,
        stderr,
        stdin_task,
        stdin: open,
        guard: Some(running.keep),
        bounds: None,
    }))
}

/// Bytes a pipe holds before its writer blocks. Linux's default of 64 KiB
/// makes a fast writer and this reader trade places every 64 KiB; 1 MiB
/// (the unprivileged maximum) lets each side work in long runs. A refusal
/// leaves the default.
const PIPE_BYTES: i32 = 1 << 20;

/// The read buffer: a whole pipe's worth in one call.
pub(crate) const READ_BYTES: usize = 256 << 10;

/// The read buffer a stream starts with.
pub(crate) const FIRST_READ_BYTES: usize = 16 << 10;

fn widen(pipe: &impl std::os::fd::AsFd) {
    #[cfg(target_os = "linux")]
    {
        let _ = nix::fcntl::fcntl(
            pipe.as_fd().as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_BYTES),
        );
    }
}

/// Runs a resolved spec to its end. Never fails: spawn failures, timeouts and
/// aborts are facts of the [`Outcome`].
pub async fn run(spec: Spec) -> Outcome {
    let started = Instant::now();
    if spec.abort.as_ref().is_some_and(|a| a.is_aborted()) {
        let mut out = Outcome::not_started(&spec, started);
        out.aborted = true;
        return out;
    }
    let Launched {
        mut child,
        pid,
        pgid,
        stdout,
        stderr,
        stdin_task,
        guard: wrapper,
        bounds,
        ..
    } = match launch(&spec) {
        Ok(l) => l,
        Err(f) => return failure(&spec, started, f.kind, f.message),
    };
    let mut guard = GroupGuard { pgid, armed: true };

    let (stop_tx, stop_rx) = watch::channel(false);
    let collector = |name, budget| Collector::new(name, budget, spec.spill.clone(), spec.spill_cap);
    let mut out_collector = collector("stdout", spec.stdout_budget);
    if spec.merge_output {
        out_collector = out_collector.counting_lines();
    }
    let out_task = tokio::spawn(collect(
        stdout,
        out_collector,
        stop_rx.clone(),
        spec.tap.clone(),
    ));
    let err_task = stderr.map(|pipe| {
        tokio::spawn(collect(
            pipe,
            collector("stderr", spec.stderr_budget),
            stop_rx,
            spec.tap.clone(),
        ))
    });

    let deadline = started + spec.timeout;
    let mut abort = spec.abort.clone();
    let abort_fut = async {
        match abort.as_mut() {
            Some(a) => a.aborted().await,
            None => std::future::pending().await,
        }
    };
    // Until the outcome is handed back, a stop request waits for it (see
    // crate::interrupt): the record gets what the command did.
    let _finishing = crate::interrupt::Finishing::start();
    let mut cause = None;
    let mut status: Option<std::io::Result<ExitStatus>> = None;
    tokio::select! {
        s = child.wait() => status = Some(s),
        _ = sleep_until(deadline) => cause = Some(Cause::Timeout),
        _ = abort_fut => cause = Some(Cause::Abort),
        sig = crate::interrupt::signalled() => cause = Some(Cause::Interrupt(sig)),
    }
    // A command that the stop's own signal reached (sent to a whole group)
    // ended by it before sluice stopped it: it was stopped all the same.
    if let (None, Some(sig), Some(Ok(s))) = (&cause, crate::interrupt::requested(), &status) {
        if s.signal().is_some() {
            cause = Some(Cause::Interrupt(sig));
        }
    }

    // From here on the group is being wound down: TERM now (to the command on
    // a timeout/abort, to its leftovers after a normal exit), KILL at the
    // grace deadline. A stop request kills at once: the run has 2 s to end.
    let stopped = matches!(cause, Some(Cause::Interrupt(_)));
    let first = if stopped {
        Signal::SIGKILL
    } else {
        Signal::SIGTERM
    };
    if cause.is_some() {
        stop_remote_async(pgid, first).await;
    }
    signal_group(pgid, first);
    let grace_deadline = Instant::now() + if stopped { STOPPED_DRAIN } else { spec.grace };
    let mut killed = stopped;
    let status = match status {
        Some(s) => s,
        None if stopped => child.wait().await,
        None => tokio::select! {
            s = child.wait() => s,
            _ = grace_or_stop(grace_deadline) => {
                stop_remote_async(pgid, Signal::SIGKILL).await;
                signal_group(pgid, Signal::SIGKILL);
                killed = true;
                child.wait().await
            }
        },
    };

    // Pipes: read until every writer closed them, but no longer than the
    // grace deadline (a timer tells the readers to stop where they are).
    // A stop request meanwhile ends what is left of the group at once (what
    // still holds the pipes), and the pipes are read a moment more.
    let stopper = tokio::spawn(async move {
        if grace_or_stop(grace_deadline).await {
            signal_group(pgid, Signal::SIGKILL);
            sleep_until(grace_deadline.min(Instant::now() + STOPPED_DRAIN)).await;
        }
        stop_tx.send_replace(true);
    });
    let stdout = out_task.await.unwrap_or_default();
    let stderr = match err_task {
        Some(task) => task.await.unwrap_or_default(),
        None => Captured::default(),
    };
    stopper.abort();

    // The command's own process has ended, so its outcome is known: a stop
    // request must not wait out the leftovers' grace (the record would
    // lose the outcome), it kills them.
    let stopped_meanwhile = tokio::select! {
        _ = end_group(pgid, grace_deadline, killed) => false,
        _ = crate::interrupt::signalled(), if !killed => true,
    };
    if stopped_meanwhile {
        signal_group(pgid, Signal::SIGKILL);
        end_group(pgid, grace_deadline, true).await;
    }
    guard.armed = false;
    // Nothing of the command is left: what watched over it can stop, and
    // what its cgroups counted is final.
    drop(wrapper);
    let limits = bounds.map(super::resources::Bounds::settle);
    if let Some(t) = stdin_task {
        t.abort();
    }

    let (exit_code, signal) = exit_facts(status.ok());
    Outcome {
        exit_code,
        signal,
        timed_out: matches!(cause, Some(Cause::Timeout)),
        aborted: matches!(cause, Some(Cause::Abort)),
        timeout: spec.timeout,
        interrupted: match cause {
            Some(Cause::Interrupt(sig)) => Some(crate::interrupt::name(sig)),
            _ => None,
        },
        stdout,
        stderr,
        elapsed: started.elapsed(),
        pid: Some(pid),
        spawn_failure: None,
        limits,
    }
}

/// The exit code, or the name of the signal that ended the process
/// (`"SIGKILL"`); neither when the status could not be read.
pub(crate) fn exit_facts(status: Option<ExitStatus>) -> (Option<i32>, Option<String>) {
    let Some(s) = status else {
        return (None, None);
    };
    let signal = s.signal().map(|n| {
        Signal::try_from(n)
            .map(|sig| sig.as_str().to_string())
            .unwrap_or_else(|_| format!("SIG{n}"))
    });
    (s.code(), signal)
}
