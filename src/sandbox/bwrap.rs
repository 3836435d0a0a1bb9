//! The bubblewrap runner: the command runs in new mount, PID (and, unless
//! networking is granted, network) namespaces where `/` is read-only, the
//! writable trees are bound back writable, what must stay read-only inside
//! them is bound read-only over them, and `/tmp` is a private tmpfs.

use super::{Mode, Profile};
use crate::exec::Wrap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// bubblewrap's own failures start its messages so; the command's never do
/// unless it imitates them.
pub const FAILURE_MARK: &str = "bwrap: ";

/// A command wrapped in `bwrap`.
#[derive(Debug)]
pub struct Bwrap {
    pub program: PathBuf,
    pub profile: Profile,
    /// Folders under /tmp the command must still see (the workspace, its
    /// working folder), read-only unless a writable tree holds them.
    pub visible: Vec<PathBuf>,
}

impl Wrap for Bwrap {
    fn wrap(&self, argv: Vec<OsString>, cwd: &Path) -> Result<Vec<OsString>, String> {
        let mut out = vec![self.program.clone().into_os_string()];
        out.extend(args(&self.profile, &self.visible, cwd));
        out.push("--".into());
        out.extend(argv);
        Ok(out)
    }

    // The command runs in bwrap's own session and PID namespace: TERM to
    // our group reaches bwrap alone, and a bwrap killed while setting up
    // can leave its namespace's first process running unparented.
    fn kills_tree(&self) -> bool {
        true
    }

    fn env(&self) -> Vec<(OsString, OsString)> {
        if self.profile.mode == Mode::DangerFullAccess {
            return Vec::new();
        }
        vec![("TMPDIR".into(), "/tmp".into())]
    }
}

/// bwrap's options for `profile`, the command starting in `cwd`.
pub fn args(profile: &Profile, visible: &[PathBuf], cwd: &Path) -> Vec<OsString> {
    let mut a = Args::default();
    a.flags(&["--die-with-parent", "--new-session", "--unshare-pid"]);
    if !profile.network {
        a.flags(&["--unshare-net"]);
    }
    let full = profile.mode == Mode::DangerFullAccess;
    a.bind(if full { "--bind" } else { "--ro-bind" }, Path::new("/"));
    a.flags(&["--dev", "/dev", "--proc", "/proc"]);
    if !profile.network {
        // Daemons' sockets (the user's bus, docker, agents) live under /run:
        // without the network, the command reaches none of them.
        a.flags(&["--tmpfs", "/run"]);
    }
    if !full {
        a.flags(&["--tmpfs", "/tmp"]);
        // What a writable bind below brings back need not be bound twice.
        let under_writable = |d: &&PathBuf| profile.writable.iter().any(|w| d.starts_with(w));
        for dir in visible
            .iter()
            .filter(|d| d.starts_with("/tmp") && d.exists() && !under_writable(d))
        {
            a.bind("--ro-bind", dir);
        }
        for dir in &profile.writable {
            a.bind("--bind", dir);
        }
    }
    for path in profile.read_only.iter().filter(|p| p.exists()) {
        // Every folder between the writable tree and the path becomes a
        // mount point of its own, which cannot be renamed away to put a
        // writable copy in the path's place.
        if let Some(root) = profile.writable.iter().find(|w| path.starts_with(w)) {
            for dir in between(root, path) {
                a.bind("--bind", &dir);
            }
        }
        a.bind("--ro-bind", path);
    }
    a.flags(&["--chdir"]);
    a.0.push(cwd.as_os_str().to_os_string());
    a.0
}

/// The folders strictly between `root` and `path`, outermost first.
fn between(root: &Path, path: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .take_while(|d| *d != root && d.starts_with(root))
        .map(Path::to_path_buf)
        .collect();
    out.reverse();
    out
}

/// An argv under construction; a folder bound twice is bound once.
#[derive(Default)]
struct Args(Vec<OsString>, Vec<(String, PathBuf)>);

impl Args {
    fn flags(&mut self, flags: &[&str]) {
        self.0.extend(flags.iter().map(OsString::from));
    }

    fn bind(&mut self, how: &str, path: &Path) {
        let key = (how.to_string(), path.to_path_buf());
        if self.1.contains(&key) {
            return;
        }
        self.1.push(key);
        self.0.push(how.into());
        self.0.push(path.as_os_str().to_os_string());
        self.0.push(path.as_os_str().to_os_string());
    }
}
