//! Confining host commands: the mode and the writable trees a command gets,
//! derived from the run's static grants, and the runners that enforce them
//! (bubblewrap, else landlock with a seccomp filter). No runner, no command:
//! a confined call never falls back to running unconfined.
//!
//! - [`Profile`]: what one command may do (mode, writable roots, paths kept
//!   read-only inside them, network, private temp storage);
//! - `derive`: the profile the policies' static rules grant;
//! - `bwrap`, `landlock`: the runners;
//! - [`Facts`]: what a confined result reports (`mode`, `denied`,
//!   `enforcement`, `runnerFailed`).

pub mod bwrap;
mod derive;
pub mod landlock;
mod supervise;

pub use derive::{derive, widen};

use serde::Serialize;
use std::path::{Path, PathBuf};

/// How much of the filesystem a command may change (network is separate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Nothing outside private temp storage.
    ReadOnly,
    /// The writable roots (and private temp storage).
    WorkspaceWrite,
    /// Everything: the command runs unconfined for files.
    DangerFullAccess,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::DangerFullAccess => "danger-full-access",
        }
    }

    pub fn parse(text: &str) -> Option<Mode> {
        [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::DangerFullAccess]
            .into_iter()
            .find(|m| m.as_str() == text)
    }
}

/// How completely a runner enforced the profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    Full,
    /// Something the profile asks for, the runner cannot express (a deny
    /// with a wildcard across folders, read-only paths inside a writable
    /// tree under landlock, a landlock ABI without some access right).
    Partial,
}

/// What one confined command may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub mode: Mode,
    /// Trees the command may write (canonical, existing folders). Empty
    /// unless `mode` is `WorkspaceWrite`.
    pub writable: Vec<PathBuf>,
    /// Paths inside writable trees that stay read-only (`.git/hooks`,
    /// `.git/config`, the audit store, paths a deny rule names).
    pub read_only: Vec<PathBuf>,
    /// What the command may see (read, list, run programs from): canonical,
    /// existing folders (whole trees) and files, from the policies' static
    /// `fs:read` allow rules; `/` when every path is readable. The writable
    /// trees and private temp storage are visible too without being listed
    /// here, and each runner adds what every program needs whatever the
    /// policy says (`/dev`'s usual devices, the command's own `/proc`).
    /// Everything else is absent (bubblewrap) or refused (landlock).
    pub readable: Vec<PathBuf>,
    /// Existing paths inside the visible trees that the command must not
    /// see at all (what a deny rule names, a deny glob expanded at spawn):
    /// masked by an empty read-only file or folder (bubblewrap), or left out
    /// of every grant (landlock). Sorted, none inside another.
    pub hidden: Vec<PathBuf>,
    /// Whether the command may open network sockets (not Unix ones, which
    /// are always allowed).
    pub network: bool,
    /// A private folder for temporary files (TMPDIR), made for the call by
    /// the runner that needs one (landlock; bubblewrap mounts its own /tmp).
    pub tmp: PathBuf,
    /// Why enforcement can only be partial, if it can (results then say
    /// `enforcement = "partial"`).
    pub partial: Vec<String>,
}

/// The sandbox facts a confined result carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Facts {
    pub mode: Mode,
    /// Whether the sandbox refused a file operation (the command exited
    /// nonzero saying so in the runner's words).
    pub denied: bool,
    pub enforcement: Enforcement,
    /// The runner broke before the command ran.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub runner_failed: bool,
}

/// Which runner confines commands: `sluice run --sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Choice {
    /// bubblewrap when it works here, else landlock.
    #[default]
    Auto,
    Bwrap,
    Landlock,
}

impl Choice {
    pub fn parse(text: &str) -> Option<Choice> {
        match text {
            "auto" => Some(Choice::Auto),
            "bwrap" | "bubblewrap" => Some(Choice::Bwrap),
            "landlock" => Some(Choice::Landlock),
            _ => None,
        }
    }
}

/// A runner that works on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runner {
    Bwrap(PathBuf),
    Landlock,
}

impl Runner {
    pub fn name(&self) -> &'static str {
        match self {
            Runner::Bwrap(_) => "bwrap",
            Runner::Landlock => "landlock",
        }
    }
}

/// Whether bubblewrap is installed and can make its namespaces here.
pub fn probe_bwrap() -> Result<PathBuf, String> {
    let program = find_bwrap().ok_or_else(|| {
        "bubblewrap is not installed (install the Debian package `bubblewrap`: apt-get install bubblewrap)".to_string()
    })?;
    let out = std::process::Command::new(&program)
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-pid",
            "--unshare-net",
        ])
        .args(["--die-with-parent", "--", "/bin/true"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{} cannot start: {e}", program.display()))?;
    if out.status.success() {
        return Ok(program);
    }
    Err(format!(
        "{} cannot create its namespaces here: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// Whether landlock can restrict commands here.
pub fn probe_landlock() -> Result<(), String> {
    landlock::probe().map(|_| ())
}

/// Where bubblewrap is looked for: `$SLUICE_BWRAP` when set (by whoever
/// runs sluice), else the system's own folders, never `PATH`: a `PATH`
/// entry inside a writable tree would let a confined command plant a fake
/// `bwrap` that the next run trusts. A system copy must belong to root and
/// be writable by nobody else.
fn find_bwrap() -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    if let Some(given) = std::env::var_os("SLUICE_BWRAP") {
        let given = PathBuf::from(given);
        return std::fs::metadata(&given)
            .is_ok_and(|m| m.is_file())
            .then_some(given);
    }
    ["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"]
        .iter()
        .map(PathBuf::from)
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.uid() == 0 && m.mode() & 0o022 == 0)
        })
}

/// A run's confinement: the runner it chose (found once, at the first
/// confined command) and the folder private temp storage lives in.
#[derive(Debug)]
pub struct Sandbox {
    choice: Choice,
    runner: std::sync::OnceLock<Result<Runner, String>>,
    tmp_root: PathBuf,
    made: std::sync::atomic::AtomicU64,
}

/// How one command is confined: the wrapper and what its result reports.
#[derive(Debug, Clone)]
pub struct Confined {
    pub wrap: std::sync::Arc<dyn crate::exec::Wrap>,
    pub runner: &'static str,
    pub mode: Mode,
    pub enforcement: Enforcement,
}

impl Sandbox {
    pub fn new(choice: Choice, run_id: &str) -> Sandbox {
        Sandbox {
            choice,
            runner: std::sync::OnceLock::new(),
            tmp_root: std::env::temp_dir()
                .join(format!("sluice-tmp-{run_id}-{:016x}", unpredictable())),
            made: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The runner this run uses, or why there is none.
    pub fn runner(&self) -> Result<Runner, String> {
        self.runner.get_or_init(|| detect(self.choice)).clone()
    }

    /// A fresh private temp folder (0700) for one command.
    fn private_tmp(&self) -> std::io::Result<PathBuf> {
        use std::os::unix::fs::DirBuilderExt;
        let n = self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The root is made here, by us, or it is refused: a folder someone
        // else made first under that name must not become a grant.
        match std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&self.tmp_root)
        {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n > 0 => {}
            Err(e) => return Err(e),
        }
        let dir = self.tmp_root.join(format!("call-{n}"));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(dir)
    }

    /// The wrapper for a command under `profile` run for `workspace`; `None` when the profile confines nothing (every file
    /// writable and the network open). No runner is an error: the command
    /// does not run.
    pub fn confine(
        &self,
        mut profile: Profile,
        workspace: &Path,
    ) -> Result<Option<Confined>, String> {
        // Unconfined only when the grants confine nothing at all: every file,
        // the network, and nothing that must stay read-only (an audit store,
        // git's hooks, a policy file) exists to protect.
        let guarded = profile.read_only.iter().any(|p| p.exists());
        if profile.mode == Mode::DangerFullAccess && profile.network && !guarded {
            return Ok(None);
        }
        let runner = self.runner()?;
        let name = runner.name();
        let mut partial = !profile.partial.is_empty();
        let wrap: std::sync::Arc<dyn crate::exec::Wrap> = match runner {
            Runner::Bwrap(program) => std::sync::Arc::new(bwrap::Bwrap {
                program,
                // Not the working folder when it lies outside: a cwd of /tmp
                // would bring the host's /tmp back in.
                visible: vec![workspace.to_path_buf()],
                profile: profile.clone(),
            }),
            Runner::Landlock => {
                profile.tmp = self
                    .private_tmp()
                    .map_err(|e| format!("cannot make the command's private temp folder: {e}"))?;
                let (prepared, enforcement, _) = landlock::prepare(&profile)?;
                partial |= enforcement == Enforcement::Partial;
                std::sync::Arc::new(landlock::LandlockWrap::new(prepared, profile.tmp.clone()))
            }
        };
        Ok(Some(Confined {
            wrap,
            runner: name,
            mode: profile.mode,
            enforcement: if partial {
                Enforcement::Partial
            } else {
                Enforcement::Full
            },
        }))
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.tmp_root);
    }
}

/// A number nobody can guess from the run's id.
fn unpredictable() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}

fn detect(choice: Choice) -> Result<Runner, String> {
    match choice {
        Choice::Bwrap => probe_bwrap().map(Runner::Bwrap),
        Choice::Landlock => probe_landlock().map(|()| Runner::Landlock),
        Choice::Auto => probe_bwrap().map(Runner::Bwrap).or_else(|bwrap| {
            probe_landlock().map(|()| Runner::Landlock).map_err(|landlock| {
                format!(
                    "no sandbox runner works on this machine, so commands cannot run confined. bubblewrap: {bwrap}. \
                     landlock: {landlock}"
                )
            })
        }),
    }
}

impl Confined {
    /// The facts of a command that ran: whether the sandbox refused a file
    /// operation, judged from its exit and what it printed, in this
    /// runner's words.
    pub fn facts(&self, exit_code: i32, stderr: &str) -> Facts {
        let words: &[&str] = match self.runner {
            "bwrap" => &["Read-only file system"],
            _ => &["Permission denied", "Operation not permitted"],
        };
        Facts {
            mode: self.mode,
            denied: exit_code != 0 && words.iter().any(|w| stderr.contains(w)),
            enforcement: self.enforcement,
            runner_failed: false,
        }
    }

    /// Whether the runner broke before the command ran (bubblewrap says so
    /// in its own words and exits 1), other than for a missing program.
    pub fn runner_failed(&self, exit_code: i32, stderr: &str) -> bool {
        self.runner == "bwrap"
            && exit_code == 1
            && stderr.starts_with(bwrap::FAILURE_MARK)
            && self.missing_program(stderr).is_none()
    }

    /// The system's message when bubblewrap could not start the program
    /// itself (`bwrap: execvp nope: No such file or directory`): the same
    /// as a launch of a missing program without the sandbox.
    pub fn missing_program<'a>(&self, stderr: &'a str) -> Option<(&'a str, &'a str)> {
        let rest = stderr.strip_prefix("bwrap: execvp ")?;
        rest.trim_end().split_once(": ")
    }

    /// The signal that ended the command when the runner reports it only as
    /// an exit of 128 + its number (bubblewrap does, as a shell would).
    pub fn signal(&self, exit_code: i32) -> Option<String> {
        if self.runner != "bwrap" || !(129..=128 + 64).contains(&exit_code) {
            return None;
        }
        nix::sys::signal::Signal::try_from(exit_code - 128)
            .ok()
            .map(|s| s.as_str().to_string())
    }
}
