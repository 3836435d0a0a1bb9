//! Confining host commands: the mode and the writable trees a command gets,
//! derived from the run's static grants, and the runners that enforce them
//! (bubblewrap, else landlock with a seccomp filter). No runner, no command:
//! a confined call never falls back to running unconfined.
//!
//! - [`Profile`]: what one command may do (mode, writable roots, paths kept
//!   read-only inside them, network, private temp storage);
//! - `derive`: the profile the policies' static rules grant;
//! - `bwrap`, `landlock`: the runners;
//! - [`Facts`]: what a confined result reports (`mode`, `network`,
//!   `denied`, `enforcement`, `runnerFailed`).

pub mod bwrap;
mod caches;
mod caps;
mod derive;
mod guard;
mod index;
pub mod landlock;
pub mod limits;
mod lookup;
mod shared;
mod supervise;

pub use guard::Guard;
pub use shared::serve_if_asked;

pub use derive::{derive, hints};

use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

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
#[derive(Debug, Clone)]
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
    /// Paths the policy opened for reading by a name that is a symlink to a
    /// `readable` tree (`/lib` to `usr/lib`): a new root (bubblewrap) needs
    /// the link itself, which programs name (the ELF loader's `/lib64/...`).
    pub links: Vec<PathBuf>,
    /// Existing paths inside the visible trees that the command must not
    /// see at all (what a deny rule names, a deny glob expanded at spawn):
    /// masked by an empty read-only file or folder (bubblewrap), or left out
    /// of every grant (landlock). Sorted, none inside another.
    pub hidden: Vec<PathBuf>,
    /// Deny globs that no mount can express (`**/.env`): the run's
    /// [`Sandbox`] expands them inside the workspace trees at spawn, adding
    /// what they match to `hidden` (a deny on reads) or `read_only` (on
    /// writes alone).
    pub hide_globs: Vec<crate::kernel::pattern::Pattern>,
    /// Variables the command gets from the sandbox: where its private
    /// caches are (pip, cargo, npm, `XDG_CACHE_HOME`).
    pub env: Vec<(String, String)>,
    /// Whether the command may open network sockets (not Unix ones, which
    /// are always allowed).
    pub network: bool,
    /// A private folder for temporary files (TMPDIR), made for the call by
    /// the runner that needs one (landlock; bubblewrap mounts its own /tmp).
    pub tmp: PathBuf,
    /// Why enforcement can only be partial, if it can (results then say
    /// `enforcement = "partial"`).
    pub partial: Vec<String>,
    /// The resources the command may use (the policies' `limits`).
    pub limits: limits::Limits,
}

impl Profile {
    /// A profile in `mode` that opens, keeps and hides nothing yet, with
    /// the network closed and no limits: what a derivation starts from.
    pub(crate) fn nothing(mode: Mode) -> Profile {
        Profile {
            mode,
            writable: Vec::new(),
            read_only: Vec::new(),
            readable: Vec::new(),
            links: Vec::new(),
            hidden: Vec::new(),
            hide_globs: Vec::new(),
            env: Vec::new(),
            network: false,
            tmp: PathBuf::new(),
            partial: Vec::new(),
            limits: limits::Limits::default(),
        }
    }

    /// Whether `path` lies in a tree the command can see.
    pub fn sees(&self, path: &Path) -> bool {
        let visible = |roots: &[PathBuf]| roots.iter().any(|r| path.starts_with(r));
        visible(&self.readable) || visible(&self.writable)
    }

    /// Whether the profile confines nothing, so a command runs without a
    /// sandbox: every file writable (so visible), the network open,
    /// nothing to keep read-only or hidden, and no resource limits (whose
    /// cgroups a command with every file writable could leave).
    pub fn confines_nothing(&self) -> bool {
        let guarded = self.read_only.iter().any(|p| p.exists()) || !self.hidden.is_empty();
        self.mode == Mode::DangerFullAccess && self.network && !guarded && self.limits.is_empty()
    }
}

/// `paths` sorted, without repeats and without any path inside another.
pub fn outermost(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    let mut out: Vec<PathBuf> = Vec::with_capacity(paths.len());
    for p in paths {
        // Sorted, so an ancestor is the last kept path when there is one.
        if out.last().is_none_or(|last| !p.starts_with(last)) {
            out.push(p);
        }
    }
    out
}

/// Whether a confined command could open network sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// It could ([`Profile::network`]).
    Open,
    /// It could not: a connection fails (curl exits 7), which the result
    /// says so the failure has a reason.
    Closed,
}

impl Network {
    /// `open` or `closed`.
    pub fn of(open: bool) -> Network {
        if open {
            Network::Open
        } else {
            Network::Closed
        }
    }
}

/// The sandbox facts a confined result carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Facts {
    pub mode: Mode,
    /// Whether the command could reach the network.
    pub network: Network,
    /// Whether the sandbox refused a file operation (the command exited
    /// nonzero saying so in the runner's words).
    pub denied: bool,
    pub enforcement: Enforcement,
    /// Repositories and git control files the command made, removed when
    /// it ended (see README: they would run code in the user's next `git`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reverted: Vec<PathBuf>,
    /// Why enforcement is partial: what the sandbox could not express.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partial: Vec<String>,
    /// The command's resource limits: each value, what enforced it, and
    /// what the command hit; absent when the policies set none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::exec::resources::Report>,
    /// The runner broke before the command ran.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub runner_failed: bool,
}

/// What the policies keep from commands in folders a container brings in
/// ([`Sandbox::withheld`]): host paths, none inside another of its list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Withheld {
    pub read_only: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    /// Every repository found there (`.git` folders and files, folders
    /// laid out as git's own).
    pub repos: Vec<PathBuf>,
    /// What the derivation could not express (a scan cut short, an
    /// `except` no mount can carve out).
    pub partial: Vec<String>,
}

/// Which runner confines commands: `sluice run --sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Choice {
    /// bubblewrap when it works here, else landlock.
    #[default]
    Auto,
    /// bubblewrap only: where it cannot run, a command that needs the
    /// sandbox fails instead of falling back.
    Bwrap,
    /// The landlock runner only (the kernel's landlock with a seccomp
    /// filter), even where bubblewrap works: where landlock is missing, a
    /// command that needs the sandbox fails.
    Landlock,
}

impl Choice {
    /// Reads a `--sandbox` value: `auto`, `bwrap` (or `bubblewrap`),
    /// `landlock`; `None` for anything else.
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
/// confined command), the folder private temp storage lives in, and what it
/// knows of the workspace trees.
#[derive(Debug)]
pub struct Sandbox {
    choice: Choice,
    runner: std::sync::OnceLock<Result<Runner, String>>,
    tmp_root: PathBuf,
    made: std::sync::atomic::AtomicU64,
    index: Arc<Mutex<index::Index>>,
    masks: std::sync::OnceLock<Result<bwrap::Masks, String>>,
    /// The run's shared sandboxes, one per bubblewrap profile.
    shared: shared::Sandboxes,
    /// Where the paths the policies name lead, as far as no command of
    /// the run can have changed it.
    lookups: Mutex<lookup::Lookups>,
    /// The last profile derived, reused while what it rests on holds.
    derived: Mutex<Option<Derived>>,
}

/// A profile derived, and what it rests on: the policies' loads, the
/// ceiling, the workspace, and what the filesystem said of changing trees.
#[derive(Debug)]
struct Derived {
    generations: Vec<u64>,
    ceiling: Vec<String>,
    workspace: PathBuf,
    checks: lookup::Checks,
    profile: Profile,
}

impl Derived {
    /// What identifies `view`'s rules: the policies' loads and the ceiling.
    fn key(view: &crate::kernel::StaticView) -> (Vec<u64>, Vec<String>) {
        let ceiling = view
            .ceiling
            .iter()
            .map(|c| c.as_str().to_string())
            .collect();
        (view.generations.clone(), ceiling)
    }
}

/// How one command is confined: the wrapper and what its result reports.
#[derive(Debug, Clone)]
pub struct Confined {
    pub wrap: Arc<dyn crate::exec::Wrap>,
    pub runner: &'static str,
    pub mode: Mode,
    /// Whether the command may open network sockets.
    pub network: bool,
    pub enforcement: Enforcement,
    /// Why enforcement is partial.
    pub partial: Vec<String>,
    /// The trees the command sees (readable and writable).
    sees: Vec<PathBuf>,
    /// Undoes the repositories the command makes; `None` when it can
    /// write nothing that matters.
    guard: Option<Arc<guard::Guard>>,
    /// The wrap that starts the command in the run's shared sandbox.
    shared: Option<Arc<shared::InShared>>,
    /// The resources the command may use: the executor enforces them
    /// (give them to its request), the result reports them.
    pub limits: limits::Limits,
}

impl Sandbox {
    pub fn new(choice: Choice, run_id: &str) -> Sandbox {
        Sandbox {
            choice,
            runner: std::sync::OnceLock::new(),
            tmp_root: std::env::temp_dir()
                .join(format!("sluice-tmp-{run_id}-{:016x}", unpredictable())),
            made: std::sync::atomic::AtomicU64::new(0),
            index: Arc::default(),
            masks: std::sync::OnceLock::new(),
            shared: shared::Sandboxes::default(),
            lookups: Mutex::new(lookup::Lookups::remembering()),
            derived: Mutex::new(None),
        }
    }

    /// The profile `view` grants a command run from `workspace` ([`derive`]),
    /// from what the run already knows of the paths the policies name.
    pub fn derive(&self, view: &crate::kernel::StaticView, workspace: &Path) -> Profile {
        let mut look = self.lookups.lock().unwrap_or_else(|e| e.into_inner());
        look.begin();
        look.writable(&[workspace.to_path_buf()]);
        let mut last = self.derived.lock().unwrap_or_else(|e| e.into_inner());
        let (generations, ceiling) = Derived::key(view);
        if let Some(d) = last.as_ref() {
            if d.generations == generations
                && d.ceiling == ceiling
                && d.workspace == workspace
                && look.still(&d.checks)
            {
                return d.profile.clone();
            }
        }
        let profile = derive::derive_with(view, workspace, &mut look);
        *last = Some(Derived {
            generations,
            ceiling,
            workspace: workspace.to_path_buf(),
            checks: look.checks(),
            profile: profile.clone(),
        });
        profile
    }

    /// Widens `profile` to `mode` for one call, keeping everything that
    /// must stay read-only or hidden.
    pub fn widen(
        &self,
        view: &crate::kernel::StaticView,
        workspace: &Path,
        profile: &mut Profile,
        mode: Mode,
    ) {
        let mut look = self.lookups.lock().unwrap_or_else(|e| e.into_inner());
        // An approval may have taken minutes since the derivation: what
        // it learned of changing trees is asked again.
        look.begin();
        derive::widen(view, workspace, profile, mode, &mut look);
    }

    /// What the policies keep from commands in the host folders `mounted`
    /// (canonical) that a container the run starts brings in, expanded as
    /// for a confined command at spawn: the paths to keep read-only (the
    /// fixed list, the policies' files, what deny rules keep from writes),
    /// those to hide (what deny rules keep from reads, deny globs matched
    /// in those folders), every repository there, and why that is partial.
    pub fn withheld(
        &self,
        view: &crate::kernel::StaticView,
        workspace: &Path,
        mounted: &[PathBuf],
    ) -> Withheld {
        let (mut profile, repos) = self.for_mounts(view, workspace, mounted);
        // A scan takes its roots as given; a mount may bring in what a
        // deny glob names itself (`${workspace}/sub/.env`).
        for root in mounted {
            let dir = root.is_dir();
            let globs = &profile.hide_globs;
            if index::matches(globs, root, dir, crate::kernel::Action::FsRead) {
                profile.hidden.push(root.clone());
            } else if index::matches(globs, root, dir, crate::kernel::Action::FsWrite) {
                profile.read_only.push(root.clone());
            }
        }
        Withheld {
            read_only: profile.read_only,
            hidden: profile.hidden,
            repos,
            partial: profile.partial,
        }
    }

    /// What undoes the repositories and git control files a command in a
    /// container the run started makes in the host folders `writable` its
    /// mounts let it write: made when the command starts, settled when it
    /// ends, as for a confined command ([`Guard`]).
    pub fn guard_mounts(
        &self,
        view: &crate::kernel::StaticView,
        workspace: &Path,
        writable: &[PathBuf],
    ) -> Guard {
        let (profile, repos) = self.for_mounts(view, workspace, writable);
        Guard::new(
            writable.to_vec(),
            repos,
            profile.hide_globs,
            profile.hidden,
            self.index.clone(),
        )
    }

    /// The profile of a command that may write and see all of `mounted`
    /// ([`derive::for_mounts`]), its deny globs expanded there, and the
    /// repositories found there.
    fn for_mounts(
        &self,
        view: &crate::kernel::StaticView,
        workspace: &Path,
        mounted: &[PathBuf],
    ) -> (Profile, Vec<PathBuf>) {
        let mut profile = {
            let mut look = self.lookups.lock().unwrap_or_else(|e| e.into_inner());
            look.begin();
            derive::for_mounts(view, workspace, mounted, &mut look)
        };
        let repos = self.expand(&mut profile, mounted);
        (profile, repos)
    }

    /// The runner this run uses, or why there is none.
    pub fn runner(&self) -> Result<Runner, String> {
        self.runner.get_or_init(|| detect(self.choice)).clone()
    }

    /// The run's private temp root (0700), made here, by us, or refused: a
    /// folder someone else made first under that name must not become a
    /// grant.
    fn tmp_root(&self) -> std::io::Result<&Path> {
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&self.tmp_root)
        {
            Ok(()) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::AlreadyExists
                    && self.made.load(Ordering::Relaxed) > 0 => {}
            Err(e) => return Err(e),
        }
        self.made.fetch_max(1, Ordering::Relaxed);
        Ok(&self.tmp_root)
    }

    /// A fresh private temp folder (0700) for one command.
    fn private_tmp(&self) -> std::io::Result<PathBuf> {
        use std::os::unix::fs::DirBuilderExt;
        let root = self.tmp_root()?.to_path_buf();
        let n = self.made.fetch_add(1, Ordering::Relaxed);
        let dir = root.join(format!("call-{n}"));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(dir)
    }

    /// A TCP connection to the loopback address `addr` inside the network
    /// namespace of the run's sandboxes, where a server a command of the
    /// run started listens (its network is not the host's); `None` when
    /// nothing there accepts it (no command ran yet, or none listens).
    pub fn connect_inside(&self, addr: std::net::SocketAddr) -> Option<std::net::TcpStream> {
        if !addr.ip().is_loopback() {
            return None;
        }
        self.shared.connect(addr).map(std::net::TcpStream::from)
    }

    /// Whether one of the run's sandboxes serves with a network of its own
    /// (what [`Sandbox::connect_inside`] reaches).
    pub fn serves_inside(&self) -> bool {
        self.shared.serving_inside()
    }

    /// The empty file and folder hidden paths are masked with.
    fn masks(&self) -> Result<bwrap::Masks, String> {
        self.masks
            .get_or_init(|| {
                let made = (|| -> std::io::Result<bwrap::Masks> {
                    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
                    let root = self.tmp_root()?;
                    let masks = bwrap::Masks {
                        file: root.join("mask-file"),
                        dir: root.join("mask-dir"),
                    };
                    std::fs::write(&masks.file, b"")?;
                    std::fs::set_permissions(&masks.file, std::fs::Permissions::from_mode(0o444))?;
                    std::fs::DirBuilder::new().mode(0o555).create(&masks.dir)?;
                    Ok(masks)
                })();
                made.map_err(|e| format!("cannot make the masks for hidden paths: {e}"))
            })
            .clone()
    }

    /// The wrapper for a command under `profile` run for `workspace`;
    /// `None` when the profile confines nothing (every file writable and
    /// visible, the network open, nothing to keep read-only or hidden). No
    /// runner is an error: the command does not run.
    pub fn confine(
        &self,
        mut profile: Profile,
        workspace: &Path,
    ) -> Result<Option<Confined>, String> {
        if !profile.limits.is_empty() {
            // Where a writable tree holds them (every file writable), the
            // command could leave its cgroups or raise their limits.
            profile
                .read_only
                .extend(crate::exec::resources::cgroup_mounts());
        }
        let roots = workspace_trees(&profile, workspace);
        let repos = self.expand(&mut profile, &roots);
        self.expand_elsewhere(&mut profile, &roots);
        let caches = caches::Caches::for_workspace(workspace);
        if profile.mode != Mode::ReadOnly {
            if let Some(dir) = caches.as_ref().and_then(|c| c.make().ok()) {
                if !profile.writable.iter().any(|w| dir.starts_with(w)) {
                    profile.writable.push(dir);
                }
            }
        }
        profile.env = caches.map(|c| c.env()).unwrap_or_default();
        // Whatever made this profile, its commands may write these.
        self.lookups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .writable(&[profile.writable.as_slice(), &[workspace.to_path_buf()]].concat());
        // With every file writable everything is visible too (derive), so
        // only what stays read-only or hidden needs a sandbox then.
        if profile.confines_nothing() {
            return Ok(None);
        }
        let runner = self.runner()?;
        let name = runner.name();
        let mut partial = profile.partial.clone();
        let mut in_shared = None;
        let wrap: Arc<dyn crate::exec::Wrap> = match runner {
            Runner::Bwrap(program) => {
                let own = bwrap::Bwrap {
                    program,
                    // Not the working folder when it lies outside: a cwd of
                    // /tmp would bring the host's /tmp back in.
                    visible: vec![workspace.to_path_buf()],
                    masks: self.masks()?,
                    profile: profile.clone(),
                };
                if shared::available() {
                    let place = self.shared.for_profile(&own);
                    let wrap = Arc::new(shared::InShared::new(place, own));
                    in_shared = Some(wrap.clone());
                    wrap
                } else {
                    Arc::new(own)
                }
            }
            Runner::Landlock => {
                profile.tmp = self
                    .private_tmp()
                    .map_err(|e| format!("cannot make the command's private temp folder: {e}"))?;
                let (prepared, _, reasons) = landlock::prepare(&profile)?;
                partial.extend(reasons);
                let mut env = profile.env.clone();
                env.extend(landlock::git_config_env(&profile));
                Arc::new(landlock::LandlockWrap::new(
                    prepared,
                    profile.tmp.clone(),
                    env,
                ))
            }
        };
        let guard = (profile.mode != Mode::ReadOnly).then(|| {
            Arc::new(guard::Guard::new(
                roots,
                repos,
                profile.hide_globs.clone(),
                profile.hidden.clone(),
                self.index.clone(),
            ))
        });
        Ok(Some(Confined {
            wrap,
            runner: name,
            mode: profile.mode,
            network: profile.network,
            enforcement: if partial.is_empty() {
                Enforcement::Full
            } else {
                Enforcement::Partial
            },
            partial,
            sees: [profile.readable.as_slice(), profile.writable.as_slice()].concat(),
            guard,
            shared: in_shared,
            limits: profile.limits,
        }))
    }

    /// Finds in `roots` what the profile's deny globs hide and the
    /// repositories whose control files stay read-only; returns every
    /// repository found.
    fn expand(&self, profile: &mut Profile, roots: &[PathBuf]) -> Vec<PathBuf> {
        let repos = self.scan_into(
            profile,
            roots,
            "deny globs and new repositories may go unseen there",
        );
        for repo in &repos {
            if !profile.writable.iter().any(|w| repo.starts_with(w)) {
                continue;
            }
            if repo.is_dir() {
                profile.read_only.extend(derive::control_paths(repo));
            } else {
                profile.read_only.push(repo.clone());
            }
        }
        profile.read_only = outermost(std::mem::take(&mut profile.read_only));
        repos
    }

    /// Hides what a deny glob rooted in a folder of its own matches there,
    /// when that folder is visible outside the workspace trees
    /// (`/etc/ssh/ssh_host_*_key`). An unanchored glob (`**/.env`) is
    /// expanded in the workspace trees alone.
    fn expand_elsewhere(&self, profile: &mut Profile, roots: &[PathBuf]) {
        let folders: Vec<PathBuf> = profile
            .hide_globs
            .iter()
            .filter_map(|g| g.fs_folder().map(PathBuf::from))
            .filter(|f| profile.sees(f) && !roots.iter().any(|r| f.starts_with(r)))
            .collect();
        let folders = outermost(folders);
        if !folders.is_empty() {
            self.scan_into(profile, &folders, "deny globs may go unseen there");
        }
    }

    /// Scans `roots` with the run's index and adds to `profile` what its
    /// deny globs hide there and what stays read-only; a scan cut short by
    /// its bounds is noted in `partial`, with `unseen` saying what that
    /// leaves out. Returns the repositories found.
    fn scan_into(&self, profile: &mut Profile, roots: &[PathBuf], unseen: &str) -> Vec<PathBuf> {
        let found = {
            let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
            index.scan(roots, &profile.hide_globs, &profile.hidden)
        };
        if let Some(why) = &found.incomplete {
            profile.partial.push(format!("{why}; {unseen}"));
        }
        let mut hidden = std::mem::take(&mut profile.hidden);
        hidden.extend(found.hidden);
        profile.hidden = outermost(hidden);
        profile.read_only.extend(found.kept);
        profile.read_only = outermost(std::mem::take(&mut profile.read_only));
        found.repos
    }
}

/// The trees a command's results can change and a deny glob is expanded
/// in: the workspace and every writable tree but `/` (with every file
/// writable, the workspace alone).
fn workspace_trees(profile: &Profile, workspace: &Path) -> Vec<PathBuf> {
    let mut roots = vec![workspace.to_path_buf()];
    roots.extend(
        profile
            .writable
            .iter()
            .filter(|w| w.as_os_str() != "/")
            .cloned(),
    );
    outermost(roots)
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.tmp_root);
        // The cgroups kept for the run's next commands.
        crate::exec::resources::tidy();
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
    /// Puts `req` under this confinement: its wrapper, and its resource
    /// limits for the executor to enforce.
    pub fn attach(&self, req: &mut crate::exec::Request) {
        req.wrap = Some(self.wrap.clone());
        req.limits = self.limits.values;
    }

    /// The facts of a command that ran: whether the sandbox refused a file
    /// operation, judged from its exit and what it printed, in this
    /// runner's words, what of the command's making was undone, and how its
    /// resource limits (`limits`, as the executor settled them) held.
    /// Called once, when the command has ended.
    pub fn facts(
        &self,
        exit_code: i32,
        stderr: &str,
        limits: Option<&crate::exec::resources::Settled>,
    ) -> Facts {
        let words: &[&str] = match self.runner {
            "bwrap" => &["Read-only file system"],
            _ => &["Permission denied", "Operation not permitted"],
        };
        let settled = self.guard.as_ref().map(|g| g.settle()).unwrap_or_default();
        let reverted = settled.reverted;
        Facts {
            mode: self.mode,
            network: Network::of(self.network),
            denied: !reverted.is_empty()
                || (exit_code != 0 && words.iter().any(|w| stderr.contains(w))),
            enforcement: self.enforcement,
            reverted,
            partial: [self.partial.clone(), settled.kept].concat(),
            limits: limits.map(|s| self.limits.report(s, exit_code, stderr)),
            runner_failed: false,
        }
    }

    /// Whether the runner broke before the command ran (bubblewrap says so
    /// in its own words and exits 1), other than for a missing program.
    pub fn runner_failed(&self, exit_code: i32, stderr: &str) -> bool {
        self.runner == "bwrap"
            && !self.in_shared()
            && exit_code == 1
            && stderr.starts_with(bwrap::FAILURE_MARK)
            && self.missing_program(stderr).is_none()
    }

    /// Why `program` (a name looked up in `PATH`, or a path) cannot start
    /// in the sandbox though it exists here: the policy does not let
    /// commands read where it is. `None` when that is not why.
    pub fn unseen(&self, program: &str, path_var: Option<&str>) -> Option<String> {
        let found = if program.contains('/') {
            Some(PathBuf::from(program))
        } else {
            std::env::split_paths(path_var.unwrap_or_default())
                .map(|d| d.join(program))
                .find(|p| p.is_file())
        }?;
        let real = std::fs::canonicalize(&found).ok()?;
        if self.sees.iter().any(|s| real.starts_with(s)) {
            return None;
        }
        Some(format!(
            "{} exists, but the policy does not let commands read {}; add `p.programs` (the system trees and toolchains) \
             or an fs:read rule for that folder to the policy's rules",
            found.display(),
            real.parent().unwrap_or(&real).display()
        ))
    }

    /// The same confinement in a sandbox of the command's own, never the
    /// run's shared one: for a command handed a credential, whose
    /// environment the run's other commands (a background job started
    /// earlier) could otherwise read in `/proc`, as processes of one user
    /// in one PID namespace.
    pub fn alone(self) -> Confined {
        let Some(own) = self.shared.as_ref().map(|s| s.own()) else {
            return self;
        };
        Confined {
            wrap: Arc::new(own),
            shared: None,
            ..self
        }
    }

    /// Whether the command was started in the run's shared sandbox, whose
    /// helper reports its real exit and start failures (bubblewrap's own
    /// words then never come from bubblewrap).
    pub fn in_shared(&self) -> bool {
        self.shared.as_ref().is_some_and(|s| s.placed())
    }

    /// The system's message when bubblewrap could not start the program
    /// itself (`bwrap: execvp nope: No such file or directory`): the same
    /// as a launch of a missing program without the sandbox.
    pub fn missing_program<'a>(&self, stderr: &'a str) -> Option<(&'a str, &'a str)> {
        if self.in_shared() {
            return None;
        }
        let rest = stderr.strip_prefix("bwrap: execvp ")?;
        rest.trim_end().split_once(": ")
    }

    /// The signal that ended the command when the runner reports it only as
    /// an exit of 128 + its number (bubblewrap does, as a shell would).
    pub fn signal(&self, exit_code: i32) -> Option<String> {
        if self.runner != "bwrap" || self.in_shared() || !(129..=128 + 64).contains(&exit_code) {
            return None;
        }
        nix::sys::signal::Signal::try_from(exit_code - 128)
            .ok()
            .map(|s| s.as_str().to_string())
    }
}
