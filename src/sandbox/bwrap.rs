//! The bubblewrap runner: the command runs in new mount, PID (and, unless
//! networking is granted, network) namespaces, without capabilities, in a
//! new root that holds only what the profile lets it see: the readable
//! trees bound read-only, the writable trees bound writable, what must stay
//! read-only inside them bound read-only over them, hidden paths masked by
//! an empty read-only file or folder, and a private tmpfs at `/tmp`.
//!
//! # Mount order
//!
//! A bind covers whatever was mounted below its path before it, so the
//! mounts are made in path order, each folder before what lies inside it,
//! and at one path in the order of [`Op`]: visible, then writable, then
//! read-only, then hidden. So nothing writable is ever bound after a
//! read-only path it contains, and the strictest mount of a path is the one
//! that holds.

use super::{Mode, Profile};
use crate::exec::Wrap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// bubblewrap's own failures start its messages so; the command's never do
/// unless it imitates them.
pub const FAILURE_MARK: &str = "bwrap: ";

/// A command wrapped in `bwrap`.
#[derive(Debug, Clone)]
pub struct Bwrap {
    pub program: PathBuf,
    pub profile: Profile,
    /// Folders under /tmp the command must still see (the workspace, its
    /// working folder), read-only unless a writable tree holds them.
    pub visible: Vec<PathBuf>,
    /// What hidden paths are masked with.
    pub masks: Masks,
}

/// An empty file and an empty folder, read-only, that hidden paths are
/// masked with (made once per run, in sluice's private temp folder).
#[derive(Debug, Clone)]
pub struct Masks {
    pub file: PathBuf,
    pub dir: PathBuf,
}

impl Wrap for Bwrap {
    fn wrap(&self, argv: Vec<OsString>, cwd: &Path) -> Result<Vec<OsString>, String> {
        let mut out = vec![self.program.clone().into_os_string()];
        out.extend(args(&self.profile, &self.visible, &self.masks, cwd));
        out.push("--".into());
        out.extend(argv);
        Ok(out)
    }

    /// The filter that keeps the command from leaving a set-id file
    /// behind ([`super::landlock::set_id_filter`]), installed before bwrap
    /// starts so that it holds for everything inside; bubblewrap makes no
    /// set-id file of its own.
    fn pre_exec(&self) -> Option<crate::exec::PreExec> {
        let program = std::sync::Arc::new(super::landlock::set_id_filter());
        let privileged = nix::unistd::geteuid().is_root();
        if !privileged && setuid_program(&self.program) {
            // no_new_privs would stop a set-uid bubblewrap from working;
            // its commands then run as the user, whose set-id files give
            // nothing the user has not.
            return None;
        }
        Some(std::sync::Arc::new(move || {
            // SAFETY: prctl and seccomp with prepared values, between fork
            // and exec.
            unsafe { install(&program, !privileged) }
        }))
    }

    // The command runs in bwrap's own session and PID namespace: TERM to
    // our group reaches bwrap alone, and a bwrap killed while setting up
    // can leave its namespace's first process running unparented.
    fn kills_tree(&self) -> bool {
        true
    }

    fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = self
            .profile
            .env
            .iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        if self.profile.mode != Mode::DangerFullAccess {
            env.push(("TMPDIR".into(), "/tmp".into()));
        }
        env
    }
}

/// Whether `program` is installed set-uid (some systems' bubblewrap).
fn setuid_program(program: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(program).is_ok_and(|m| m.permissions().mode() & 0o4000 != 0)
}

/// Installs `program` as the process's seccomp filter, setting
/// no_new_privs first when `unprivileged` (seccomp needs one or the other).
///
/// # Safety
/// Raw system calls only: for the child between fork and exec.
unsafe fn install(program: &[nix::libc::sock_filter], unprivileged: bool) -> std::io::Result<()> {
    use nix::libc;
    if unprivileged && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    if libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &fprog) < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// One mount (or link) of the new root; the order of the variants is the
/// order at one path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    /// `--ro-bind`: a readable tree or file.
    Visible,
    /// `--symlink TARGET`: a name the policy opened that is a link.
    Link(PathBuf),
    /// `--dev`, `--proc`, `--tmpfs`: a fresh filesystem.
    Fresh(&'static str),
    /// `--bind`: a writable tree, or a folder above a read-only path.
    Writable,
    /// `--ro-bind` over a writable tree.
    ReadOnly,
    /// `--ro-bind` of an empty file or folder.
    Hidden,
}

/// bwrap's options for `profile`, the command starting in `cwd`.
pub fn args(profile: &Profile, visible: &[PathBuf], masks: &Masks, cwd: &Path) -> Vec<OsString> {
    let mut a: Vec<OsString> = ["--die-with-parent", "--new-session", "--unshare-pid"]
        .map(OsString::from)
        .to_vec();
    if !profile.network {
        a.push("--unshare-net".into());
    }
    // Root in the sandbox would keep CAP_SYS_ADMIN and could remount any
    // read-only bind writable.
    a.extend(["--cap-drop", "ALL"].map(OsString::from));
    for (path, op) in plan(profile, visible) {
        push(&mut a, &path, &op, masks);
    }
    a.push("--chdir".into());
    a.push(cwd.as_os_str().to_os_string());
    a
}

/// Every mount of the new root, in the order they must be made.
fn plan(profile: &Profile, visible: &[PathBuf]) -> Vec<(PathBuf, Op)> {
    let full = profile.mode == Mode::DangerFullAccess;
    let mut ops: Vec<(PathBuf, Op)> = Vec::new();
    let root = PathBuf::from("/");
    if full {
        ops.push((root, Op::Writable));
    } else {
        ops.extend(profile.readable.iter().map(|p| (p.clone(), Op::Visible)));
        ops.push(("/tmp".into(), Op::Fresh("--tmpfs")));
        if profile.readable.contains(&root) {
            // The tmpfs covers what / brought of /tmp: the workspace and
            // the working folder are bound back.
            ops.extend(
                visible
                    .iter()
                    .filter(|d| d.starts_with("/tmp") && d.exists())
                    .map(|d| (d.clone(), Op::Visible)),
            );
        }
        ops.extend(profile.writable.iter().map(|p| (p.clone(), Op::Writable)));
    }
    for link in &profile.links {
        if let Ok(target) = std::fs::read_link(link) {
            ops.push((link.clone(), Op::Link(target)));
        }
    }
    ops.push(("/dev".into(), Op::Fresh("--dev")));
    ops.push(("/proc".into(), Op::Fresh("--proc")));
    if !profile.network {
        // Daemons' sockets (the user's bus, docker, agents) live under /run:
        // without the network, the command reaches none of them.
        ops.push(("/run".into(), Op::Fresh("--tmpfs")));
    }
    for path in super::outermost(profile.read_only.clone()) {
        // Outside the writable trees everything is read-only already, and
        // binding the path would make it visible.
        let Some(root) = profile.writable.iter().find(|w| path.starts_with(w)) else {
            continue;
        };
        if !path.exists() {
            continue;
        }
        // Every folder between the writable tree and the path becomes a
        // mount point of its own, which cannot be renamed away to put a
        // writable copy in the path's place.
        ops.extend(
            crate::fsops::path::between(root, &path)
                .into_iter()
                .map(|d| (d, Op::Writable)),
        );
        ops.push((path, Op::ReadOnly));
    }
    ops.extend(profile.hidden.iter().map(|p| (p.clone(), Op::Hidden)));
    ops.sort();
    ops.dedup();
    // A tree both visible and writable needs only its writable bind.
    let writable: Vec<PathBuf> = ops
        .iter()
        .filter(|(_, op)| *op == Op::Writable)
        .map(|(p, _)| p.clone())
        .collect();
    ops.retain(|(p, op)| *op != Op::Visible || !writable.contains(p));
    ops
}

fn push(a: &mut Vec<OsString>, path: &Path, op: &Op, masks: &Masks) {
    let (flag, source): (&str, Option<&Path>) = match op {
        Op::Visible | Op::ReadOnly => ("--ro-bind", Some(path)),
        Op::Writable => ("--bind", Some(path)),
        Op::Link(target) => ("--symlink", Some(target)),
        Op::Fresh(flag) => (flag, None),
        Op::Hidden if path.is_dir() => ("--ro-bind", Some(&masks.dir)),
        Op::Hidden => ("--ro-bind", Some(&masks.file)),
    };
    a.push(flag.into());
    if let Some(source) = source {
        a.push(source.as_os_str().to_os_string());
    }
    a.push(path.as_os_str().to_os_string());
}
