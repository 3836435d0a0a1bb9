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
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |items: &[&std::ffi::OsStr]| a.extend(items.iter().map(|s| s.to_os_string()));
    push(&[
        "--die-with-parent".as_ref(),
        "--new-session".as_ref(),
        "--unshare-pid".as_ref(),
    ]);
    if !profile.network {
        push(&["--unshare-net".as_ref()]);
    }
    let root: &std::ffi::OsStr = if profile.mode == Mode::DangerFullAccess {
        "--bind".as_ref()
    } else {
        "--ro-bind".as_ref()
    };
    push(&[root, "/".as_ref(), "/".as_ref()]);
    push(&[
        "--dev".as_ref(),
        "/dev".as_ref(),
        "--proc".as_ref(),
        "/proc".as_ref(),
    ]);
    if profile.mode == Mode::DangerFullAccess {
        // Every file is the command's to write, /tmp included.
        push(&["--chdir".as_ref(), cwd.as_os_str()]);
        return a;
    }
    push(&["--tmpfs".as_ref(), "/tmp".as_ref()]);
    // What a writable bind below brings back need not be bound twice.
    let under_writable = |d: &&PathBuf| profile.writable.iter().any(|w| d.starts_with(w));
    for dir in visible
        .iter()
        .filter(|d| d.starts_with("/tmp") && d.exists() && !under_writable(d))
    {
        push(&["--ro-bind".as_ref(), dir.as_os_str(), dir.as_os_str()]);
    }
    for dir in &profile.writable {
        push(&["--bind".as_ref(), dir.as_os_str(), dir.as_os_str()]);
    }
    for path in profile.read_only.iter().filter(|p| p.exists()) {
        push(&["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()]);
    }
    push(&["--chdir".as_ref(), cwd.as_os_str()]);
    a
}
