//! The process executor: runs one command for a flow and reports what
//! happened, without ever hanging the caller or leaking processes, output or
//! credentials.
//!
//! The seam has two steps, kept apart on purpose:
//!
//! 1. [`resolve`] turns a caller's [`Request`] (optional workdir, timeout,
//!    output budget) into a [`Spec`] whose every value is filled from
//!    [`Limits`] and capped, and validates what the caller declared
//!    (`invalid_input` naming the field). Policy checks and audit logs see the
//!    spec, so they see exactly what will run.
//! 2. [`run`] takes only a resolved spec and always returns an [`Outcome`]:
//!    nonzero exits, signals, timeouts, aborts and spawn failures are facts in
//!    the outcome, not errors, so a caller never mistakes a cut-short run for
//!    a clean one.
//!
//! Background jobs ([`job`]) reuse the same `Spec`, process-group handling
//! and collectors; only the foreground timeout does not apply to them. The
//! [`Executor`] is what one run's process flows share: limits, the spill
//! folder, the jobs, and each call's managed `SLUICE_*` facts.
//!
//! A sandbox or a container plugs in at two points: a [`Wrap`] turns the
//! argv into the confined or transported one at launch, and the spec it
//! wraps is fully resolved, so a policy on it sees what will run. In the
//! crate (exec's unit tests do this):
//!
//! ```text
//! use crate::exec::{resolve, run, Limits, Request};
//! let limits = Limits::new("/tmp/w");
//! let spec = resolve(Request::shell("echo hi; exit 3"), &limits)?;
//! let out = run(spec).await;
//! assert_eq!(out.exit_code, Some(3));
//! ```

pub mod env;
mod executor;
pub mod job;
pub mod output;
pub mod piped;
mod process;
pub mod resources;

pub use env::Managed;
pub use executor::{bash_or_sh, Executor, STREAM_BUDGET};
pub use output::{Captured, SpillDir, DEFAULT_SPILL_CAP};
pub use process::{kill_all_groups, run, Outcome, SpawnFailure, SpawnFailureKind};

use crate::error::FlowError;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What to launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandLine {
    /// A program and its arguments, launched directly (no shell parsing).
    Argv(Vec<OsString>),
    /// A shell command string, launched as `<Limits::shell> -c <command>`.
    Shell(String),
}

/// Turns the command's argv into the argv actually launched: the seam where a
/// sandbox runner or a container (`docker exec ...`) wraps the command. It
/// runs after `resolve`, at launch, so the wrapper sees the final argv and
/// working directory; an error is reported as a spawn failure of kind
/// [`SpawnFailureKind::Wrap`], never as a silent unwrapped run.
pub trait Wrap: fmt::Debug + Send + Sync {
    fn wrap(&self, argv: Vec<OsString>, cwd: &Path) -> Result<Vec<OsString>, String>;

    /// Runs in the child between fork and exec (a landlock ruleset, a
    /// seccomp filter): only async-signal-safe calls, no allocation. Asked
    /// by the default [`Wrap::launch`]; a wrapper with per-launch state
    /// implements `launch` instead.
    fn pre_exec(&self) -> Option<PreExec> {
        None
    }

    /// Variables the wrapper adds to the command's environment (`TMPDIR`
    /// for private temp storage).
    fn env(&self) -> Vec<(OsString, OsString)> {
        Vec::new()
    }

    /// Whether stopping the command must kill the wrapper's whole process
    /// tree at once (a runner that moves the command into its own session
    /// and PID namespace, which a signal to the group does not reach).
    fn kills_tree(&self) -> bool {
        false
    }

    /// Whether the wrapper makes the command the leader of a session of its
    /// own that nothing it starts can leave (its `pre_exec` calls `setsid`
    /// and forbids it after): the executor then gives it no process group
    /// first (a group leader cannot start a session), and stopping the
    /// command stops every process of that session.
    fn own_session(&self) -> bool {
        false
    }

    /// What one launch needs, asked once per launch before the fork: the
    /// step the child runs between fork and exec, and what the parent
    /// starts once the child runs. By default [`Wrap::pre_exec`] and
    /// nothing after. An error is a spawn failure of kind
    /// [`SpawnFailureKind::Wrap`]: the command does not run.
    fn launch(&self) -> Result<Launch, String> {
        Ok(Launch {
            pre_exec: self.pre_exec(),
            started: None,
        })
    }

    /// A wrapper that carries the command somewhere the host's signals and
    /// folders do not reach (a container): how the launched process is set
    /// up instead, from the environment the command would have had. `None`
    /// (the default) for a command that runs here.
    fn remote(&self, _resolved: &[(OsString, OsString)]) -> Option<Remote> {
        None
    }

    /// A wrapper that starts the command itself, in a place it keeps
    /// running (a run's shared sandbox), instead of the executor forking
    /// it: the executor then hands it the argv, cwd, environment and the
    /// three standard streams and reads the output pipes as usual. `None`
    /// (the default) for a command the executor forks. Asked once per
    /// launch, before anything else; a wrapper that cannot start its place
    /// answers `None` and wraps as usual.
    fn starter(&self) -> Option<&dyn Starter> {
        None
    }
}

/// Starts commands somewhere the executor's own fork cannot reach (see
/// [`Wrap::starter`]). The command it starts leads a session of its own
/// that nothing it starts can leave: stopping it stops that session.
pub trait Starter: Send + Sync {
    /// Starts `command`; returns once it runs (its program was executed),
    /// or why it could not start.
    fn start(&self, command: Start) -> Result<Running, StartFailure>;
}

/// One command for a [`Starter`]: what to run and the streams it gets.
pub struct Start {
    pub argv: Vec<OsString>,
    pub cwd: PathBuf,
    /// The command's whole environment.
    pub env: Vec<(OsString, OsString)>,
    pub stdin: std::os::fd::OwnedFd,
    pub stdout: std::os::fd::OwnedFd,
    /// The same pipe as `stdout` when output is merged.
    pub stderr: std::os::fd::OwnedFd,
    /// What the child does before it executes the program: join the
    /// command's cgroups, set its rlimits ([`resources::ChildStep`]).
    pub bounds: Option<resources::ChildStep>,
}

/// A command a [`Starter`] started.
pub struct Running {
    /// Its pid as this process sees it: also its session and group id.
    pub pid: u32,
    /// How it ended; closed without a word if the place it ran in went
    /// away (which ended it).
    pub exit: tokio::sync::oneshot::Receiver<Ended>,
    /// Kept alive until every process of the command has ended.
    pub keep: Guard,
}

/// How a command a [`Starter`] started ended.
#[derive(Debug, Clone, Copy)]
pub struct Ended {
    /// Its raw wait status.
    pub status: i32,
    /// Nothing of its session was left when it ended (the starter looked,
    /// where it runs): the executor need not look for leftovers.
    pub session_over: bool,
}

/// Why a [`Starter`] did not start a command.
#[derive(Debug)]
pub enum StartFailure {
    /// The program could not be executed, or its folder entered (the OS's
    /// error, as a fork-and-exec here would give it).
    Exec(std::io::Error),
    /// The place commands start in is broken.
    Broken(String),
    /// The place cannot take this command (its folder is not there): the
    /// executor wraps and forks it as usual instead, so what the call
    /// reports is the wrapper's own failure, as without a starter.
    Elsewhere,
}

/// How the host launches a command that runs elsewhere (see
/// [`Wrap::remote`]).
pub struct Remote {
    /// The launched process's whole environment, replacing the command's:
    /// the command's entries reach it under the transport's names.
    pub env: Vec<(OsString, OsString)>,
    /// Where the launched process runs on the host: the command's own
    /// folder is not a host folder, so it is neither checked nor entered.
    pub host_cwd: PathBuf,
    /// Signals the command where it runs (the process inside the
    /// container, and what it started), since a signal to the host's
    /// process stops only the transport. Blocking; called on a timeout, a
    /// kill, a cancelled call and the run's end, never on a normal exit.
    pub stop: Stop,
}

/// See [`Remote::stop`].
pub type Stop = Arc<dyn Fn(nix::sys::signal::Signal) + Send + Sync>;

/// A step a [`Wrap`] runs in the child after fork, before exec.
pub type PreExec = Arc<dyn Fn() -> std::io::Result<()> + Send + Sync>;

/// One launch of a wrapped command (see [`Wrap::launch`]).
#[derive(Default)]
pub struct Launch {
    /// Runs in the child between fork and exec: only async-signal-safe
    /// calls, no allocation.
    pub pre_exec: Option<PreExec>,
    /// Runs in the parent once the child started, with its pid (a
    /// supervisor taking over what the child handed it). What it returns
    /// lives until every process of the command has ended, and is dropped
    /// then; an error kills the command before it is reported as started.
    pub started: Option<Started>,
}

/// The parent's side of a launch, given the child's pid.
pub type Started = Box<dyn FnOnce(u32) -> Result<Guard, String> + Send>;

/// Something a wrapper keeps alive beside a command until it has ended.
pub type Guard = Box<dyn Send>;

/// The simplest wrapper: a fixed argv prefix (`["nice", "-n", "10"]`).
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix(pub Vec<OsString>);

#[cfg(test)]
impl Wrap for Prefix {
    fn wrap(&self, argv: Vec<OsString>, _cwd: &Path) -> Result<Vec<OsString>, String> {
        let mut out = self.0.clone();
        out.extend(argv);
        Ok(out)
    }
}

/// The caller's side of cancellation: [`AbortHandle::abort`] kills the command
/// (TERM to its group, KILL after the grace period). A watch channel rather
/// than a oneshot, so one handle can cancel many calls and be cloned into
/// background jobs later.
#[derive(Debug, Clone)]
pub struct AbortHandle(Arc<watch::Sender<bool>>);

/// The executor's side of cancellation, carried in the request and spec.
#[derive(Debug, Clone)]
pub struct AbortSignal(watch::Receiver<bool>);

/// A connected handle and signal.
pub fn abort_pair() -> (AbortHandle, AbortSignal) {
    let (tx, rx) = watch::channel(false);
    (AbortHandle(Arc::new(tx)), AbortSignal(rx))
}

impl AbortHandle {
    pub fn abort(&self) {
        self.0.send_replace(true);
    }
}

impl AbortSignal {
    pub fn is_aborted(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves when aborted; never resolves if the handle is dropped unfired
    /// (dropping the handle is not a request to cancel).
    pub async fn aborted(&mut self) {
        if self.0.wait_for(|v| *v).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// What sees a foreground command's output as it arrives, beside the
/// capture (both streams, each piece as read): a caller that shows a long
/// command's progress. Called on the reader's task, so it must not block.
#[derive(Clone)]
pub struct Tap(pub Arc<TapFn>);

/// What a [`Tap`] calls with each piece of output.
pub type TapFn = dyn Fn(&[u8]) + Send + Sync;

impl fmt::Debug for Tap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Tap")
    }
}

/// A caller's request: everything optional is filled by [`resolve`].
#[derive(Debug, Clone)]
pub struct Request {
    pub command: CommandLine,
    /// Working directory; relative paths are taken from `Limits::default_cwd`.
    pub cwd: Option<PathBuf>,
    /// Declared environment entries (trusted callers only; see [`env`](mod@env)).
    pub env: BTreeMap<String, String>,
    /// Bytes written to stdin, then closed. `None` means stdin is closed from
    /// the start, so a command that reads it gets EOF instead of hanging.
    pub stdin: Option<Vec<u8>>,
    /// Per-call timeout override; capped at `Limits::max_timeout`.
    pub timeout: Option<Duration>,
    /// In-memory stdout budget in bytes; capped at `Limits::max_output_bytes`.
    /// Stderr always uses `Limits::default_output_bytes`.
    pub output_budget: Option<usize>,
    pub abort: Option<AbortSignal>,
    /// The managed `SLUICE_*` facts of this call.
    pub managed: Managed,
    /// The run's spill folder; without one, overflowing output is dropped
    /// (and counted) instead of spilled.
    pub spill: Option<Arc<SpillDir>>,
    pub wrap: Option<Arc<dyn Wrap>>,
    /// Send stderr into the stdout stream, interleaved in the order the
    /// command wrote them (as a terminal shows them); `stderr` stays empty.
    pub merge_output: bool,
    /// Sees the output as it arrives ([`Tap`]); the capture is the same
    /// with or without it.
    pub tap: Option<Tap>,
    /// The policy's resource limits for the command ([`resources`]).
    pub limits: resources::ResourceLimits,
}

impl Request {
    pub fn new(command: CommandLine) -> Self {
        Request {
            command,
            cwd: None,
            env: BTreeMap::new(),
            stdin: None,
            timeout: None,
            output_budget: None,
            abort: None,
            managed: Managed::default(),
            spill: None,
            wrap: None,
            merge_output: false,
            tap: None,
            limits: resources::ResourceLimits::default(),
        }
    }

    #[cfg(test)]
    pub fn shell(command: impl Into<String>) -> Self {
        Self::new(CommandLine::Shell(command.into()))
    }

    #[cfg(test)]
    pub fn argv<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Self::new(CommandLine::Argv(
            argv.into_iter().map(Into::into).collect(),
        ))
    }
}

/// Executor configuration: defaults and caps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub default_cwd: PathBuf,
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    pub default_output_bytes: usize,
    pub max_output_bytes: usize,
    /// Time between SIGTERM and SIGKILL to the group, and the longest the
    /// executor waits for pipes after the direct child exits.
    pub grace: Duration,
    pub spill_cap: u64,
    /// The shell for [`CommandLine::Shell`].
    pub shell: PathBuf,
}

impl Limits {
    pub fn new(default_cwd: impl Into<PathBuf>) -> Self {
        Limits {
            default_cwd: default_cwd.into(),
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
            default_output_bytes: 32 * 1024,
            max_output_bytes: 1024 * 1024,
            grace: Duration::from_secs(3),
            spill_cap: DEFAULT_SPILL_CAP,
            shell: PathBuf::from("/bin/sh"),
        }
    }
}

/// A fully resolved command: every value the executor acts on is here.
///
/// Fields are private so that [`resolve`] is the only way to make one: a
/// spec that exists has passed validation, its env has been scrubbed, and its
/// timeout and budgets are capped.
#[derive(Debug, Clone)]
pub struct Spec {
    argv: Vec<OsString>,
    cwd: PathBuf,
    env: Vec<(OsString, OsString)>,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
    stdout_budget: usize,
    stderr_budget: usize,
    grace: Duration,
    spill_cap: u64,
    abort: Option<AbortSignal>,
    spill: Option<Arc<SpillDir>>,
    wrap: Option<Arc<dyn Wrap>>,
    merge_output: bool,
    tap: Option<Tap>,
    limits: resources::ResourceLimits,
    /// Standard input stays open for the caller to write ([`piped`]).
    open_stdin: bool,
}

impl Spec {
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// The spec with `tap` seeing its output as it arrives ([`Tap`]).
    pub fn with_tap(self, tap: Tap) -> Spec {
        Spec {
            tap: Some(tap),
            ..self
        }
    }
}

/// Fills and caps a request using the harness's own environment as the
/// ambient source of the bootstrap allowlist.
pub fn resolve(request: Request, limits: &Limits) -> Result<Spec, FlowError> {
    resolve_with_ambient(request, limits, std::env::vars_os())
}

/// [`resolve`] with an explicit ambient environment (tests, embedders).
pub fn resolve_with_ambient(
    request: Request,
    limits: &Limits,
    ambient: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<Spec, FlowError> {
    let argv = match request.command {
        CommandLine::Argv(argv) => {
            if argv.is_empty() || argv[0].is_empty() {
                return Err(FlowError::invalid_input(
                    "argv",
                    "argv needs at least a program name",
                ));
            }
            argv
        }
        CommandLine::Shell(cmd) => {
            if cmd.contains('\0') {
                return Err(FlowError::invalid_input(
                    "command",
                    "command contains a NUL byte",
                ));
            }
            vec![limits.shell.clone().into(), "-c".into(), cmd.into()]
        }
    };
    env::validate(&request.env)?;
    let timeout = match request.timeout {
        Some(t) if t.is_zero() => {
            return Err(FlowError::invalid_input(
                "timeout",
                "timeout must be positive",
            ))
        }
        Some(t) => t.min(limits.max_timeout),
        None => limits.default_timeout.min(limits.max_timeout),
    };
    let stdout_budget = match request.output_budget {
        Some(0) => {
            return Err(FlowError::invalid_input(
                "output_budget",
                "output budget must be positive",
            ))
        }
        Some(n) => n.min(limits.max_output_bytes),
        None => limits.default_output_bytes,
    };
    let cwd = match request.cwd {
        Some(p) if p.is_absolute() => p,
        Some(p) => limits.default_cwd.join(p),
        None => limits.default_cwd.clone(),
    };
    Ok(Spec {
        argv,
        cwd,
        env: env::build(ambient, &request.env, &request.managed),
        stdin: request.stdin,
        timeout,
        stdout_budget,
        stderr_budget: limits.default_output_bytes,
        grace: limits.grace,
        spill_cap: limits.spill_cap,
        abort: request.abort,
        spill: request.spill,
        wrap: request.wrap,
        merge_output: request.merge_output,
        tap: request.tap,
        limits: request.limits,
        open_stdin: false,
    })
}

#[cfg(test)]
mod job_tests;
#[cfg(test)]
mod tests;
