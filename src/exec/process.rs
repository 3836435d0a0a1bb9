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

use super::output::{Captured, Collector};
use super::Spec;
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
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
    pub stdout: Captured,
    pub stderr: Captured,
    /// Wall time from launch until the outcome settled.
    pub elapsed: Duration,
    /// The direct child's pid, which is also its process group id.
    pub pid: Option<u32>,
    /// Set when the command never ran; every other field is then empty.
    pub spawn_failure: Option<SpawnFailure>,
}

impl Outcome {
    fn not_started(spec: &Spec, started: Instant) -> Outcome {
        Outcome {
            exit_code: None,
            signal: None,
            timed_out: false,
            aborted: false,
            timeout: spec.timeout,
            stdout: Captured::default(),
            stderr: Captured::default(),
            elapsed: started.elapsed(),
            pid: None,
            spawn_failure: None,
        }
    }

    /// True only for a command that ran to completion and exited 0.
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

/// SIGTERM/SIGKILL to the whole group. ESRCH (group already gone) is fine.
/// A pgid of 0 or 1 would mean our own group or init's: never signal those.
fn signal_group(pgid: Pid, sig: Signal) {
    if pgid.as_raw() > 1 {
        let _ = killpg(pgid, sig);
    }
}

/// Whether any live (non-zombie) process remains in the group. `killpg(0)`
/// also counts zombies, which linger when PID 1 does not reap orphans (common
/// in containers), so on Linux a positive answer is confirmed from /proc.
fn group_alive(pgid: Pid) -> bool {
    if pgid.as_raw() <= 1 || killpg(pgid, None) == Err(Errno::ESRCH) {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return true;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if !name.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{name}/stat")) else {
                continue;
            };
            // "pid (comm) state ppid pgrp ..."; comm may hold spaces and ')'.
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            let mut fields = rest.split_whitespace();
            let state = fields.next();
            let pgrp = fields.nth(1);
            if pgrp == Some(pgid.as_raw().to_string().as_str()) && state != Some("Z") {
                return true;
            }
        }
        false
    }
    #[cfg(not(target_os = "linux"))]
    true
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
            signal_group(self.pgid, Signal::SIGKILL);
        }
    }
}

async fn collect(
    mut pipe: impl AsyncRead + Unpin,
    mut collector: Collector,
    mut stop: watch::Receiver<bool>,
) -> Captured {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            r = pipe.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => collector.push(&buf[..n]),
            },
            _ = stop.wait_for(|s| *s) => {
                collector.mark_cut_short();
                break;
            }
        }
    }
    collector.finish()
}

enum Cause {
    Timeout,
    Abort,
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
    if let Some((kind, message)) = probe_cwd(&spec) {
        return failure(&spec, started, kind, message);
    }
    let argv = match &spec.wrap {
        Some(w) => match w.wrap(spec.argv.clone(), &spec.cwd) {
            Ok(argv) if !argv.is_empty() => argv,
            Ok(_) => {
                let msg = "wrapper produced an empty argv".to_string();
                return failure(&spec, started, SpawnFailureKind::Wrap, msg);
            }
            Err(e) => return failure(&spec, started, SpawnFailureKind::Wrap, e),
        },
        None => spec.argv.clone(),
    };

    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .process_group(0)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let program = argv[0].to_string_lossy();
            let kind = match e.kind() {
                ErrorKind::NotFound => SpawnFailureKind::ProgramNotFound,
                ErrorKind::PermissionDenied => SpawnFailureKind::PermissionDenied,
                _ => SpawnFailureKind::Other,
            };
            return failure(&spec, started, kind, format!("cannot start {program}: {e}"));
        }
    };
    let pid = child.id();
    let pgid = Pid::from_raw(pid.unwrap_or(0) as i32);
    let mut guard = GroupGuard {
        pgid,
        armed: pid.is_some(),
    };

    let (stop_tx, stop_rx) = watch::channel(false);
    let stdout = child.stdout.take().expect("stdout piped");
    let stderr = child.stderr.take().expect("stderr piped");
    let out_task = tokio::spawn(collect(
        stdout,
        Collector::new(
            "stdout",
            spec.stdout_budget,
            spec.spill.clone(),
            spec.spill_cap,
        ),
        stop_rx.clone(),
    ));
    let err_task = tokio::spawn(collect(
        stderr,
        Collector::new(
            "stderr",
            spec.stderr_budget,
            spec.spill.clone(),
            spec.spill_cap,
        ),
        stop_rx,
    ));
    // A command that never reads its stdin must not block the call: the
    // writer runs on its own and a broken pipe is ignored.
    let stdin_task = match (child.stdin.take(), spec.stdin.clone()) {
        (Some(mut w), Some(bytes)) => Some(tokio::spawn(async move {
            let _ = w.write_all(&bytes).await;
            let _ = w.shutdown().await;
        })),
        _ => None,
    };

    let deadline = started + spec.timeout;
    let mut abort = spec.abort.clone();
    let abort_fut = async {
        match abort.as_mut() {
            Some(a) => a.aborted().await,
            None => std::future::pending().await,
        }
    };
    let mut cause = None;
    let mut status: Option<std::io::Result<ExitStatus>> = None;
    tokio::select! {
        s = child.wait() => status = Some(s),
        _ = sleep_until(deadline) => cause = Some(Cause::Timeout),
        _ = abort_fut => cause = Some(Cause::Abort),
    }

    // From here on the group is being wound down: TERM now (to the command on
    // a timeout/abort, to its leftovers after a normal exit), KILL at the
    // grace deadline.
    signal_group(pgid, Signal::SIGTERM);
    let grace_deadline = Instant::now() + spec.grace;
    let mut killed = false;
    let status = match status {
        Some(s) => s,
        None => tokio::select! {
            s = child.wait() => s,
            _ = sleep_until(grace_deadline) => {
                signal_group(pgid, Signal::SIGKILL);
                killed = true;
                child.wait().await
            }
        },
    };

    // Pipes: read until every writer closed them, but no longer than the
    // grace deadline (a timer tells the readers to stop where they are).
    let stopper = tokio::spawn(async move {
        sleep_until(grace_deadline).await;
        stop_tx.send_replace(true);
    });
    let (stdout, stderr) = tokio::join!(out_task, err_task);
    stopper.abort();
    let stdout = stdout.unwrap_or_default();
    let stderr = stderr.unwrap_or_default();

    // Leftovers in the group: wait for them to honour TERM until the grace
    // deadline, then KILL, and give the kernel a moment to finish them so the
    // outcome is only reported once nothing of the command is left running.
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
    guard.armed = false;
    if let Some(t) = stdin_task {
        t.abort();
    }

    let (exit_code, signal) = match status {
        Ok(s) => (
            s.code(),
            s.signal().map(|n| {
                Signal::try_from(n)
                    .map(|sig| sig.as_str().to_string())
                    .unwrap_or_else(|_| format!("SIG{n}"))
            }),
        ),
        Err(_) => (None, None),
    };
    Outcome {
        exit_code,
        signal,
        timed_out: matches!(cause, Some(Cause::Timeout)),
        aborted: matches!(cause, Some(Cause::Abort)),
        timeout: spec.timeout,
        stdout,
        stderr,
        elapsed: started.elapsed(),
        pid,
        spawn_failure: None,
    }
}
