//! The profile a run's static grants give a command.
//!
//! Writes: a tree is writable only when `fs:write` covers both the folder
//! itself and everything in it (`fs:write:/w/b` and `fs:write:/w/b/**`), by
//! allow rules, inside the ceiling. A single file (a literal write), a glob
//! no bind can express (`/w/**/*.rs`) and asks open nothing. A deny that
//! names a path or a `DIR/**` tree keeps that path read-only.
//!
//! Reads follow the same rules with `fs:read`, but a folder need not be
//! named for itself: a tree whose contents the policy opens whole
//! (`fs:read:/usr/**`) is visible, and so is a single
//! file an allow rule names; everything else is absent. A deny that names a
//! path or a tree hides it. A deny glob no mount can express (`**/.env`,
//! `${workspace}/**/.git/**`) is handed on in [`Profile::hide_globs`], for
//! the run's sandbox to expand inside the workspace trees at spawn: what it
//! matches is hidden (a deny on reads) or kept read-only (on writes alone).
//!
//! Whatever the mode, what makes code run later (git's hooks and config),
//! the audit store and the policies' own files stay read-only. Networking
//! opens only with unrestricted `net:get`, `net:post` and `net:private`
//! allow rules (`net:get:*`, ...) and no deny, ask or hook that could narrow
//! them.

use super::lookup::Lookups;
use super::{Mode, Profile};
use crate::kernel::control::GIT_CONTROL;
use crate::kernel::pattern::{FsShape, Pattern};
use crate::kernel::policy::Decision;
use crate::kernel::{Action, Capability, StaticView};
use std::path::{Path, PathBuf};

/// The control paths of the repository whose git directory is `repo`
/// (`repo/hooks`, `repo/config`, ...): the kernel's one list
/// ([`GIT_CONTROL`]), which commands may not write either.
pub fn control_paths(repo: &Path) -> Vec<PathBuf> {
    GIT_CONTROL.iter().map(|rel| repo.join(rel)).collect()
}

/// What stays read-only in the workspace and every writable tree whatever
/// the policy says: the repository's control files, which make code run
/// later, and the audit record.
fn always_read_only(base: &Path) -> Vec<PathBuf> {
    let mut paths = control_paths(&base.join(".git"));
    paths.push(base.join(".sluice"));
    paths
}

/// A name no real file has, to ask whether a tree's contents are covered.
const PROBE: &str = ".sluice-sandbox-probe";

/// The profile `view` grants a command run from `workspace`.
pub fn derive(view: &StaticView, workspace: &Path) -> Profile {
    derive_with(view, workspace, &mut Lookups::fresh())
}

/// [`derive`], asking the filesystem through `look` (a run's remembered
/// answers), which learns the trees this profile lets commands write.
pub(super) fn derive_with(view: &StaticView, workspace: &Path, look: &mut Lookups) -> Profile {
    let mut profile = Profile {
        limits: super::limits::Limits::of(&view.limits),
        ..Profile::nothing(Mode::ReadOnly)
    };
    if view.failed {
        return profile;
    }
    profile.network = network_open(view);
    if tree_open(view, Action::FsWrite, Path::new("/")) {
        profile.mode = Mode::DangerFullAccess;
        profile.writable = vec![PathBuf::from("/")];
    } else {
        profile.writable = open_trees(view, Action::FsWrite, workspace, look)
            .into_iter()
            .map(|(dir, _)| dir)
            .collect();
        if !profile.writable.is_empty() {
            profile.mode = Mode::WorkspaceWrite;
        }
    }
    look.writable(&profile.writable);
    visible(view, workspace, &mut profile, look);
    narrow(view, workspace, &mut profile, look);
    profile
}

/// What the policies keep from commands in `mounted` (host folders a
/// container the run starts brings in, canonical), where a mount cannot
/// follow the grants but only keep and hide: the profile of a command that
/// may write and see all of them, narrowed as every profile is (the fixed
/// read-only list under the workspace and each tree, the policies' files,
/// what deny rules name, the deny globs left for expansion).
pub(super) fn for_mounts(
    view: &StaticView,
    workspace: &Path,
    mounted: &[PathBuf],
    look: &mut Lookups,
) -> Profile {
    // A container's commands are not sluice's to limit (README).
    let mut profile = Profile {
        writable: mounted.to_vec(),
        readable: mounted.to_vec(),
        ..Profile::nothing(Mode::WorkspaceWrite)
    };
    look.writable(mounted);
    narrow(view, workspace, &mut profile, look);
    profile
}

/// What a policy author may not expect of the profile `view` gives: each
/// folder an allow rule opens for writing by its contents alone
/// (`fs:write:X/**`) while no rule opens the folder itself (`fs:write:X`),
/// so that commands cannot write in it (a tree is writable only with
/// both), with the rule that would open it. For `sluice policy explain`.
pub fn hints(view: &StaticView, workspace: &Path) -> Vec<String> {
    let writable: Vec<PathBuf> =
        open_trees(view, Action::FsWrite, workspace, &mut Lookups::fresh())
            .into_iter()
            .map(|(dir, _)| dir)
            .collect();
    let mut out = Vec::new();
    for rule in view.rules.iter().filter(|r| r.decision == Decision::Allow) {
        let (Some(FsShape::Tree(dir)), true) = (
            rule.pattern.fs_shape(),
            rule.pattern.selects(Action::FsWrite),
        ) else {
            continue;
        };
        let Ok(real) = std::fs::canonicalize(dir) else {
            continue;
        };
        let entry = Capability::fs(Action::FsWrite, &real);
        if !real.is_dir()
            || writable.iter().any(|w| real.starts_with(w))
            || allowed(view, &entry)
            || denied(view, &entry)
        {
            continue;
        }
        let folder = rule
            .pattern
            .resource()
            .and_then(|r| r.strip_suffix("/**"))
            .unwrap_or(dir);
        let hint = format!(
            "\"{}\" ({}) opens what is in {} but not the folder itself, so commands cannot write there \
             (a tree is writable to commands only when the folder and its contents both are): add p.allow \"fs:write:{folder}\"",
            rule.pattern.as_str(),
            rule.at,
            real.display()
        );
        if !out.contains(&hint) {
            out.push(hint);
        }
    }
    out
}

/// Widens `profile` to `mode` for one call, keeping everything that must
/// stay read-only or hidden.
/// The filesystem is asked through `look`.
pub(super) fn widen(
    view: &StaticView,
    workspace: &Path,
    profile: &mut Profile,
    mode: Mode,
    look: &mut Lookups,
) {
    profile.mode = mode;
    profile.writable = match mode {
        Mode::DangerFullAccess => vec![PathBuf::from("/")],
        _ if profile.writable.is_empty() => vec![workspace.to_path_buf()],
        _ => std::mem::take(&mut profile.writable),
    };
    profile.read_only.clear();
    profile.hidden.clear();
    profile.hide_globs.clear();
    profile.partial.clear();
    look.writable(&profile.writable);
    visible(view, workspace, profile, look);
    narrow(view, workspace, profile, look);
}

/// What the command may see: every path when the policy opens `/` whole
/// (or the command may write everything), else the trees and files allow
/// rules open, and the symlinks that lead to them.
fn visible(view: &StaticView, workspace: &Path, profile: &mut Profile, look: &mut Lookups) {
    profile.links.clear();
    if profile.mode == Mode::DangerFullAccess || tree_open(view, Action::FsRead, Path::new("/")) {
        profile.readable = vec![PathBuf::from("/")];
        return;
    }
    let mut readable: Vec<PathBuf> = open_trees(view, Action::FsRead, workspace, look)
        .into_iter()
        .map(|(dir, _)| dir)
        .collect();
    for given in candidates(view, Action::FsRead, workspace) {
        if !look.is_link(&given) {
            continue;
        }
        let target = look.real(&given);
        if target.is_some_and(|t| readable.iter().any(|r| t.real.starts_with(r))) {
            profile.links.push(given);
        }
    }
    readable.extend(open_files(view, look));
    profile.readable = super::outermost(readable);
}

/// The folders an allow rule opens whole for `action` (the workspace, and
/// every `DIR/**` rule whose folder exists), each canonical with the path
/// the policy named it by; none inside another.
fn open_trees(
    view: &StaticView,
    action: Action,
    workspace: &Path,
    look: &mut Lookups,
) -> Vec<(PathBuf, PathBuf)> {
    let mut out: Vec<(PathBuf, PathBuf)> = Vec::new();
    for given in candidates(view, action, workspace) {
        let Some(found) = look.real(&given) else {
            continue;
        };
        let dir = found.real;
        if !found.dir || !tree_open(view, action, &dir) {
            continue;
        }
        if out.iter().any(|(o, _)| dir.starts_with(o)) {
            continue;
        }
        out.retain(|(o, _)| !o.starts_with(&dir));
        out.push((dir, given));
    }
    out
}

/// The workspace, and every folder an allow rule for `action` opens as
/// `DIR/**`, as the rules name them.
fn candidates(view: &StaticView, action: Action, workspace: &Path) -> Vec<PathBuf> {
    let mut out = vec![workspace.to_path_buf()];
    for rule in allows(view) {
        if let Some(FsShape::Tree(dir)) = rule.fs_shape() {
            if rule.selects(action) {
                out.push(PathBuf::from(dir));
            }
        }
    }
    out
}

/// Existing files (not folders: binding one would show what is in it) that
/// an allow rule names one by one for reading, inside the ceiling.
fn open_files(view: &StaticView, look: &mut Lookups) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for rule in allows(view) {
        let Some(FsShape::Exact(path)) = rule.fs_shape() else {
            continue;
        };
        let Some(found) = look.real(Path::new(path)) else {
            continue;
        };
        let real = found.real;
        let cap = Capability::fs(Action::FsRead, &real);
        if rule.selects(Action::FsRead) && found.file && allowed(view, &cap) && !denied(view, &cap)
        {
            out.push(real);
        }
    }
    out
}

fn allows<'a>(view: &'a StaticView) -> impl Iterator<Item = &'a Pattern> + 'a {
    view.rules
        .iter()
        .filter(|r| r.decision == Decision::Allow)
        .map(|r| &r.pattern)
}

/// Whether `dir` and everything in it are granted for `action` by static
/// allow rules inside the ceiling, with no deny on the folder itself. A
/// folder is readable whole when all it holds is (`DIR/**`), even with no
/// rule naming the folder: a mount cannot show the one without the other,
/// and a command must see the folder it starts in.
fn tree_open(view: &StaticView, action: Action, dir: &Path) -> bool {
    let entry = Capability::fs(action, dir);
    let inside = Capability::fs(action, &dir.join(PROBE));
    (action == Action::FsRead || allowed(view, &entry))
        && in_ceiling(view, &inside)
        && covers_tree(view, action, dir)
        && !denied(view, &entry)
        && !denied(view, &inside)
}

fn in_ceiling(view: &StaticView, cap: &Capability) -> bool {
    view.ceiling.is_empty() || view.ceiling.iter().any(|c| c.matches(cap))
}

fn allowed(view: &StaticView, cap: &Capability) -> bool {
    in_ceiling(view, cap) && allows(view).any(|p| p.matches(cap))
}

fn denied(view: &StaticView, cap: &Capability) -> bool {
    view.rules
        .iter()
        .any(|r| r.decision == Decision::Deny && r.pattern.matches(cap))
}

/// Whether an allow rule, and the ceiling, grant the whole tree under
/// `dir` for `action` (`X/**` with X at or above `dir`, or every path), not
/// only some names in it.
fn covers_tree(view: &StaticView, action: Action, dir: &Path) -> bool {
    let whole = |p: &Pattern| {
        p.selects(action)
            && match p.fs_shape() {
                Some(FsShape::Any) => true,
                Some(FsShape::Tree(top)) => dir.starts_with(top),
                _ => false,
            }
    };
    allows(view).any(whole) && (view.ceiling.is_empty() || view.ceiling.iter().any(whole))
}

/// Keeps read-only what must stay so (the fixed list under the workspace
/// and each writable tree, the policies' files, what deny rules name) and
/// hides what deny rules name for reading.
fn narrow(view: &StaticView, workspace: &Path, profile: &mut Profile, look: &mut Lookups) {
    let mut bases = vec![workspace.to_path_buf()];
    bases.extend(
        profile
            .writable
            .iter()
            .filter(|w| w.as_os_str() != "/")
            .cloned(),
    );
    for base in &bases {
        profile.read_only.extend(always_read_only(base));
    }
    profile.read_only.extend(view.files.iter().cloned());
    for rule in view.rules.iter().filter(|r| r.decision == Decision::Deny) {
        deny(&rule.pattern, profile, look);
        if let Some(note) = uncarved(rule, profile) {
            profile.partial.push(note);
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
    let hidden = std::mem::take(&mut profile.hidden);
    profile.hidden = super::outermost(hidden.into_iter().filter(|p| profile.sees(p)).collect());
    if view.hooks && profile.mode != Mode::ReadOnly {
        profile
            .partial
            .push("a policy's decide hook judges calls one by one; inside the sandbox only its static rules hold".into());
    }
}

/// What one deny rule takes away: a path or tree it names stays read-only
/// (writes) and is hidden (reads); a glob is kept for expansion at spawn.
fn deny(pattern: &Pattern, profile: &mut Profile, look: &mut Lookups) {
    let reads = pattern.selects(Action::FsRead);
    let writes = pattern.selects(Action::FsWrite);
    match pattern.fs_shape() {
        Some(FsShape::Exact(p)) | Some(FsShape::Tree(p)) => {
            let found = look.real(Path::new(p));
            let exists = found.is_some();
            let path = found.map_or_else(|| PathBuf::from(p), |f| f.real);
            if writes {
                profile.read_only.push(path.clone());
            }
            if reads && exists {
                profile.hidden.push(path);
            }
        }
        Some(FsShape::Other) if reads || writes => profile.hide_globs.push(pattern.clone()),
        _ => {}
    }
}

/// Why a deny's `except` does not reach commands, when it would matter:
/// the sandbox withholds the whole of what the deny names (a mount cannot
/// hide a tree but one subtree of it), so an excepted path a command could
/// otherwise write or see stays read-only or hidden to it. The kernel,
/// and with it every file flow, follows the except.
fn uncarved(rule: &crate::kernel::policy::Rule, profile: &Profile) -> Option<String> {
    let reached = rule.except.iter().find(|e| {
        let path = match e.fs_shape() {
            Some(FsShape::Exact(p)) | Some(FsShape::Tree(p)) => Some(PathBuf::from(p)),
            Some(FsShape::Other) => e.fs_folder().map(PathBuf::from),
            Some(FsShape::Any) => Some(PathBuf::from("/")),
            None => return false,
        };
        let Some(path) = path else { return true };
        let writes = e.selects(Action::FsWrite)
            && profile
                .writable
                .iter()
                .any(|w| path.starts_with(w) || w.starts_with(&path));
        writes || (e.selects(Action::FsRead) && profile.sees(&path))
    })?;
    Some(format!(
        "the deny \"{}\" ({}) excepts \"{}\", which the sandbox cannot carve out of it: commands get all of what the deny names withheld (read-only, or hidden), the except included; the file flows follow the except",
        rule.pattern.as_str(),
        rule.at,
        reached.as_str()
    ))
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
