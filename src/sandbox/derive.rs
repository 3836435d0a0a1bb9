//! The profile a run's static grants give a command. A tree is writable
//! only when `fs:write` covers both the folder itself and everything in it
//! (`fs:write:/w/b` and `fs:write:/w/b/**`), by allow rules, inside the
//! ceiling. A single file (a literal write), a glob no bind can express
//! (`/w/**/*.rs`) and asks open nothing. A deny that names a path or a
//! `DIR/**` tree keeps that path read-only; a deny no bind can express
//! (`**/.env`) leaves the trees open and the enforcement partial, and says
//! so. Whatever the mode, what makes code run later (git's hooks and config),
//! the audit store and the policies' own files stay read-only. Networking
//! opens only with unrestricted `net:get`, `net:post` and `net:private` allow
//! rules (`net:get:*`, ...) and no deny, ask or hook that could narrow them.

use super::{Mode, Profile};
use crate::kernel::pattern::FsShape;
use crate::kernel::policy::Decision;
use crate::kernel::{Action, Capability, StaticView};
use std::path::{Path, PathBuf};

/// Paths inside the workspace and every writable tree that stay read-only
/// whatever the policy says: what makes code run later (git hooks, config,
/// and what redirects git to another config) and the audit record.
pub const ALWAYS_READ_ONLY: &[&str] = &[
    ".git/hooks",
    ".git/config",
    ".git/config.worktree",
    ".git/commondir",
    ".git/info",
    ".git/modules",
    ".git/worktrees",
    ".sluice",
];

/// A name no real file has, to ask whether a tree's contents are covered.
const PROBE: &str = ".sluice-sandbox-probe";

/// The profile `view` grants a command run from `workspace`.
pub fn derive(view: &StaticView, workspace: &Path) -> Profile {
    let mut profile = Profile {
        mode: Mode::ReadOnly,
        writable: Vec::new(),
        read_only: Vec::new(),
        readable: vec![PathBuf::from("/")],
        hidden: Vec::new(),
        network: false,
        tmp: PathBuf::new(),
        partial: Vec::new(),
    };
    if view.failed {
        return profile;
    }
    profile.network = network_open(view);
    if tree_open(view, Path::new("/")) {
        profile.mode = Mode::DangerFullAccess;
        profile.writable = vec![PathBuf::from("/")];
    } else {
        for root in candidates(view, workspace) {
            if !tree_open(view, &root) || profile.writable.iter().any(|w| root.starts_with(w)) {
                continue;
            }
            profile.writable.retain(|w| !w.starts_with(&root));
            profile.writable.push(root);
        }
        if !profile.writable.is_empty() {
            profile.mode = Mode::WorkspaceWrite;
        }
    }
    narrow(view, workspace, &mut profile);
    profile
}

/// Widens `profile` to `mode` for one call, keeping everything that must
/// stay read-only.
pub fn widen(view: &StaticView, workspace: &Path, profile: &mut Profile, mode: Mode) {
    profile.mode = mode;
    profile.writable = match mode {
        Mode::DangerFullAccess => vec![PathBuf::from("/")],
        _ if profile.writable.is_empty() => vec![workspace.to_path_buf()],
        _ => std::mem::take(&mut profile.writable),
    };
    profile.read_only.clear();
    profile.partial.clear();
    narrow(view, workspace, profile);
}

/// The workspace, and every folder an allow rule opens as `DIR/**`.
fn candidates(view: &StaticView, workspace: &Path) -> Vec<PathBuf> {
    let mut out = vec![workspace.to_path_buf()];
    for rule in view.rules.iter().filter(|r| r.decision == Decision::Allow) {
        if let Some(FsShape::Tree(dir)) = rule.pattern.fs_shape() {
            if rule.pattern.selects(Action::FsWrite) {
                out.push(PathBuf::from(dir));
            }
        }
    }
    out.retain(|d| d.is_dir());
    out.iter_mut()
        .for_each(|d| *d = std::fs::canonicalize(&*d).unwrap_or_else(|_| d.clone()));
    out
}

/// Whether `dir` and everything in it are writable by static allow rules
/// inside the ceiling, with no deny on the folder itself.
fn tree_open(view: &StaticView, dir: &Path) -> bool {
    let entry = write_cap(dir);
    let inside = write_cap(&dir.join(PROBE));
    let in_ceiling =
        |cap: &Capability| view.ceiling.is_empty() || view.ceiling.iter().any(|c| c.matches(cap));
    let allowed = |cap: &Capability| {
        in_ceiling(cap)
            && view
                .rules
                .iter()
                .any(|r| r.decision == Decision::Allow && r.pattern.matches(cap))
    };
    let denied = view.rules.iter().any(|r| {
        r.decision == Decision::Deny && (r.pattern.matches(&entry) || r.pattern.matches(&inside))
    });
    allowed(&entry) && in_ceiling(&inside) && covers_tree(view, dir) && !denied
}

/// Whether an allow rule, and the ceiling, grant the whole tree under
/// `dir` (`X/**` with X at or above `dir`, or every path), not only some
/// names in it.
fn covers_tree(view: &StaticView, dir: &Path) -> bool {
    let whole = |p: &crate::kernel::pattern::Pattern| {
        p.selects(Action::FsWrite)
            && match p.fs_shape() {
                Some(FsShape::Any) => true,
                Some(FsShape::Tree(top)) => dir.starts_with(top),
                _ => false,
            }
    };
    view.rules
        .iter()
        .any(|r| r.decision == Decision::Allow && whole(&r.pattern))
        && (view.ceiling.is_empty() || view.ceiling.iter().any(whole))
}

/// Keeps read-only what must stay so: the fixed list under the workspace
/// and each writable tree, the policies' files, and what deny rules name.
fn narrow(view: &StaticView, workspace: &Path, profile: &mut Profile) {
    let mut bases = vec![workspace.to_path_buf()];
    bases.extend(
        profile
            .writable
            .iter()
            .filter(|w| w.as_os_str() != "/")
            .cloned(),
    );
    for base in &bases {
        for rel in ALWAYS_READ_ONLY {
            profile.read_only.push(base.join(rel));
        }
    }
    profile.read_only.extend(view.files.iter().cloned());
    for rule in view.rules.iter().filter(|r| r.decision == Decision::Deny) {
        if !rule.pattern.selects(Action::FsWrite) {
            continue;
        }
        match rule.pattern.fs_shape() {
            Some(FsShape::Exact(p)) | Some(FsShape::Tree(p)) => profile.read_only.push(PathBuf::from(p)),
            Some(FsShape::Other) if profile.mode != Mode::ReadOnly => profile.partial.push(format!(
                "deny {:?} names paths by a pattern no mount can express; inside the sandbox it holds for nothing",
                rule.pattern.as_str()
            )),
            _ => {}
        }
    }
    // Only what lies in a writable tree needs keeping; the rest is
    // read-only already.
    let writable = profile.writable.clone();
    profile
        .read_only
        .retain(|p| writable.iter().any(|w| p.starts_with(w)));
    profile.read_only.sort();
    profile.read_only.dedup();
    if view.hooks && profile.mode != Mode::ReadOnly {
        profile
            .partial
            .push("a policy's decide hook judges calls one by one; inside the sandbox only its static rules hold".into());
    }
}

/// Unrestricted `net:get`, `net:post` and `net:private` allow rules, inside
/// the ceiling, with no deny, ask or hook that could narrow any of them.
fn network_open(view: &StaticView) -> bool {
    const NET: [Action; 3] = [Action::NetGet, Action::NetPost, Action::NetPrivate];
    let narrowed = view.hooks
        || view
            .rules
            .iter()
            .any(|r| r.decision != Decision::Allow && NET.iter().any(|a| r.pattern.selects(*a)));
    let open = |action: &str| {
        let wanted = format!("{action}:*");
        view.rules
            .iter()
            .any(|r| r.decision == Decision::Allow && r.pattern.as_str() == wanted)
            && (view.ceiling.is_empty() || view.ceiling.iter().any(|c| c.as_str() == wanted))
    };
    !narrowed && open("net:get") && open("net:post") && open("net:private")
}

fn write_cap(path: &Path) -> Capability {
    Capability::fs(Action::FsWrite, path)
}
