//! The profile a run's static grants give a command. A tree is writable
//! only when `fs:write` covers both the folder itself and everything in it
//! (`fs:write:/w/b` and `fs:write:/w/b/**`), by allow rules, inside the
//! ceiling. A single file (a literal write), a glob no bind can express
//! (`/w/**/*.rs`) and asks open nothing. A deny inside a writable tree that
//! names a path or a `DIR/**` tree keeps that path read-only; a deny no bind
//! can express (`**/.env`) leaves the tree open and the enforcement partial,
//! and says so. Networking opens only with unrestricted `net:get`, `net:post`
//! and `net:private` allow rules (`net:get:*`, ...).

use super::{Mode, Profile};
use crate::kernel::pattern::{FsShape, Pattern};
use crate::kernel::policy::Decision;
use crate::kernel::{Action, Capability, StaticView};
use std::path::{Path, PathBuf};

/// Folders inside a writable tree that stay read-only whatever the policy
/// says: what makes code run later (git hooks and config) and the record.
const ALWAYS_READ_ONLY: &[&str] = &[".git/hooks", ".git/config", ".sluice"];

/// A name no real file has, to ask whether a tree's contents are covered.
const PROBE: &str = ".sluice-sandbox-probe";

/// The profile `view` grants a command run from `workspace`; `tmp` is the
/// call's private temp folder.
pub fn derive(view: &StaticView, workspace: &Path, tmp: PathBuf) -> Profile {
    let mut profile = Profile {
        mode: Mode::ReadOnly,
        writable: Vec::new(),
        read_only: Vec::new(),
        network: false,
        tmp,
        partial: Vec::new(),
    };
    if view.failed {
        return profile;
    }
    profile.network = network_open(view);
    if tree_open(view, Path::new("/")) {
        profile.mode = Mode::DangerFullAccess;
        return profile;
    }
    for root in candidates(view, workspace) {
        if !tree_open(view, &root) || profile.writable.iter().any(|w| root.starts_with(w)) {
            continue;
        }
        profile.writable.retain(|w| !w.starts_with(&root));
        profile.writable.push(root);
    }
    if !profile.writable.is_empty() {
        profile.mode = Mode::WorkspaceWrite;
        narrow(view, &mut profile);
    }
    if view.hooks && profile.mode != Mode::ReadOnly {
        profile
            .partial
            .push("a policy's decide hook judges calls one by one; inside the sandbox only its static rules hold".into());
    }
    profile
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
    let allowed = |cap: &Capability| {
        (view.ceiling.is_empty() || view.ceiling.iter().any(|c| c.matches(cap)))
            && view
                .rules
                .iter()
                .any(|r| r.decision == Decision::Allow && r.pattern.matches(cap))
    };
    let denied = view.rules.iter().any(|r| {
        r.decision == Decision::Deny && (r.pattern.matches(&entry) || r.pattern.matches(&inside))
    });
    allowed(&entry) && covers_tree(view, dir) && !denied
}

/// Whether an allow rule grants the whole tree under `dir` (`X/**` with X
/// at or above `dir`, or every path), not only some names in it.
fn covers_tree(view: &StaticView, dir: &Path) -> bool {
    view.rules.iter().any(|r| {
        r.decision == Decision::Allow
            && r.pattern.selects(Action::FsWrite)
            && match r.pattern.fs_shape() {
                Some(FsShape::Any) => true,
                Some(FsShape::Tree(top)) => dir.starts_with(top),
                _ => false,
            }
    }) && (view.ceiling.is_empty()
        || view.ceiling.iter().any(|c| {
            c.selects(Action::FsWrite) && matches!(c.fs_shape(), Some(FsShape::Any))
                || matches!(c.fs_shape(), Some(FsShape::Tree(top)) if dir.starts_with(top))
        }))
}

/// Keeps read-only what must stay so inside the writable trees: the fixed
/// list, and what deny rules name there.
fn narrow(view: &StaticView, profile: &mut Profile) {
    for root in profile.writable.clone() {
        for rel in ALWAYS_READ_ONLY {
            profile.read_only.push(root.join(rel));
        }
    }
    for rule in view.rules.iter().filter(|r| r.decision == Decision::Deny) {
        if !rule.pattern.selects(Action::FsWrite) {
            continue;
        }
        match rule.pattern.fs_shape() {
            Some(FsShape::Exact(p)) | Some(FsShape::Tree(p)) => {
                let path = PathBuf::from(p);
                if profile.writable.iter().any(|w| path.starts_with(w)) {
                    profile.read_only.push(path);
                }
            }
            Some(FsShape::Other) if reaches_into(&rule.pattern, &profile.writable) => {
                profile.partial.push(format!(
                    "deny {:?} names paths by a pattern no mount can express; inside the sandbox it holds for nothing",
                    rule.pattern.as_str()
                ));
            }
            _ => {}
        }
    }
    profile.read_only.sort();
    profile.read_only.dedup();
}

/// Whether a deny pattern may match something under the writable trees.
fn reaches_into(pattern: &Pattern, writable: &[PathBuf]) -> bool {
    let text = pattern.as_str();
    let glob = text.rsplit_once(':').map_or(text, |(_, g)| g);
    glob.starts_with("**")
        || writable
            .iter()
            .any(|w| glob.starts_with(&*w.to_string_lossy()) || glob.starts_with("${workspace}"))
}

/// Unrestricted `net:get`, `net:post` and `net:private` allow rules.
fn network_open(view: &StaticView) -> bool {
    let open = |action: &str| {
        let wanted = format!("{action}:*");
        view.rules
            .iter()
            .any(|r| r.decision == Decision::Allow && r.pattern.as_str() == wanted)
            && !view
                .rules
                .iter()
                .any(|r| r.decision == Decision::Deny && r.pattern.as_str().starts_with(action))
            && (view.ceiling.is_empty() || view.ceiling.iter().any(|c| c.as_str() == wanted))
    };
    open("net:get") && open("net:post") && open("net:private")
}

fn write_cap(path: &Path) -> Capability {
    Capability::fs(Action::FsWrite, path)
}
