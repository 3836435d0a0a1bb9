//! Repositories a command leaves behind. A `.git` folder or a `gitdir:`
//! file that a command makes anywhere in a writable tree, a folder laid out
//! as a git directory (which git takes for a bare repository when started
//! in it), or a control file
//! (`commondir`, `hooks`, `config`, `info`, ...) it adds to a repository
//! that had none, would run the command's code in the user's next ordinary
//! `git status` outside any sandbox. Mounts keep what exists read-only; what
//! is new can only be found afterwards: the trees are scanned when the
//! command ends, and what appeared is removed and reported
//! (`sandbox.denied`, `sandbox.reverted`).
//!
//! A repository is known by its device and inode, not its path: one that
//! moved (its folder renamed where nothing pinned it) is the user's still,
//! and is kept; a copy put by its old name is new. A repository is never
//! removed on a doubt: one the guard cannot tell is new is kept, and the
//! result says so (`sandbox.partial`).

use super::index::Index;
use crate::kernel::control::GIT_CONTROL;
use crate::kernel::pattern::Pattern;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What the trees held when a command started, to compare with when it
/// ends.
#[derive(Debug)]
pub struct Guard {
    roots: Vec<PathBuf>,
    globs: Vec<Pattern>,
    skip: Vec<PathBuf>,
    /// Every repository at the start.
    before: Vec<Known>,
    index: Arc<Mutex<Index>>,
    /// Set once [`Guard::settle`] ran: a command that ended some other way
    /// (a timeout, a cancellation, a runner that broke) is settled when its
    /// guard is dropped.
    settled: std::sync::atomic::AtomicBool,
}

/// A repository at the start of a command.
#[derive(Debug)]
struct Known {
    path: PathBuf,
    /// Its device and inode; `None` when they could not be read.
    id: Option<Id>,
    /// The control paths it lacked (relative to it: `hooks`, `config`),
    /// which the command may not add.
    missing: Vec<&'static str>,
}

/// A file's device and inode: what stays the same when it is renamed.
type Id = (u64, u64);

/// What a command's guard found when it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    /// Repositories and control files the command made, removed.
    pub reverted: Vec<PathBuf>,
    /// Repositories kept though they are not as they were at the start
    /// (moved, or another file in a known one's place that the guard
    /// cannot tell is new), each saying so.
    pub kept: Vec<String>,
}

impl Settled {
    /// Its two lists, for a layer that cannot name this type.
    pub fn parts(self) -> (Vec<PathBuf>, Vec<String>) {
        (self.reverted, self.kept)
    }
}

impl Guard {
    /// A guard over `roots`, which held the repositories `repos` when the
    /// command started; the scan after it uses `index` with the same globs
    /// and skipped paths, so it reads only what changed.
    pub fn new(
        roots: Vec<PathBuf>,
        repos: Vec<PathBuf>,
        globs: Vec<Pattern>,
        skip: Vec<PathBuf>,
        index: Arc<Mutex<Index>>,
    ) -> Guard {
        let before = repos
            .into_iter()
            .map(|path| Known {
                id: id(&path).ok(),
                missing: missing(&path),
                path,
            })
            .collect();
        Guard {
            roots,
            globs,
            skip,
            before,
            index,
            settled: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Removes every repository and control file the command made, and
    /// says what it removed, and what it kept that changed.
    pub fn settle(&self) -> Settled {
        self.settled
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let found = {
            let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
            index.scan(&self.roots, &self.globs, &self.skip)
        };
        // What vanished since the scan is neither kept nor removed.
        let now: Vec<(PathBuf, Option<Id>)> = found
            .repos
            .into_iter()
            .filter_map(|r| match id(&r) {
                Ok(i) => Some((r, Some(i))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(_) => Some((r, None)),
            })
            .collect();
        let mut out = Settled::default();
        let mut made: Vec<PathBuf> = Vec::new();
        for (path, at) in &now {
            match self.judge(path, *at, &now) {
                Verdict::Same(k) => made.extend(added(k, path)),
                Verdict::Moved(k) => {
                    out.kept.push(format!(
                        "the repository {} was moved to {} by the command; it is kept there (sluice never removes a repository it knew)",
                        k.path.display(),
                        path.display()
                    ));
                    made.extend(added(k, path));
                }
                Verdict::Doubt(why, k) => {
                    out.kept.push(why);
                    made.extend(k.map(|k| added(k, path)).unwrap_or_default());
                }
                Verdict::New => made.push(path.clone()),
            }
        }
        made.retain(|p| self.roots.iter().any(|r| p.starts_with(r)) && remove(p));
        out.reverted = made;
        out
    }

    /// What repository `path` (of identity `at`, `None` when it cannot be
    /// read) is, among all those found now (`now`).
    fn judge(&self, path: &Path, at: Option<Id>, now: &[(PathBuf, Option<Id>)]) -> Verdict<'_> {
        let by_path = self.before.iter().find(|k| k.path == path);
        // A repository whose identity could not be read at the start is
        // known by its path alone.
        if let Some(k) = by_path.filter(|k| k.id.is_none() || k.id == at) {
            return Verdict::Same(k);
        }
        let still = |k: &Known| now.iter().any(|(p, i)| *p == k.path && *i == k.id);
        if let Some(k) = at.and_then(|i| self.before.iter().find(|k| k.id == Some(i))) {
            if !still(k) {
                return Verdict::Moved(k);
            }
            return Verdict::Doubt(
                format!(
                    "{} is another name for the repository {} (the same device and inode); it is kept",
                    path.display(),
                    k.path.display()
                ),
                None,
            );
        }
        match (by_path, at) {
            (None, Some(_)) => Verdict::New,
            (None, None) => Verdict::Doubt(
                format!(
                    "{} looks like a repository the command made, but it could not be read to be sure; it is kept: check it before running git there",
                    path.display()
                ),
                None,
            ),
            // Another file in a known one's place: new when the one that
            // was there is found elsewhere (moved aside), else perhaps the
            // same repository with an identity that changed.
            (Some(k), _) if at.is_some() && now.iter().any(|(_, i)| *i == k.id) => Verdict::New,
            (Some(k), _) => Verdict::Doubt(
                format!(
                    "{} could not be matched to the repository that was there when the command started (by device and inode); it is kept, but for the control files it lacked then: check it before running git there",
                    path.display()
                ),
                Some(k),
            ),
        }
    }
}

/// What a repository found when a command ended is.
enum Verdict<'a> {
    /// The one known at this path.
    Same(&'a Known),
    /// A known one, at another path.
    Moved(&'a Known),
    /// Made by the command: removed.
    New,
    /// Kept, saying why; the known one at its path, if any, whose missing
    /// control files are still removed.
    Doubt(String, Option<&'a Known>),
}

/// The device and inode of `path`, not followed.
fn id(path: &Path) -> std::io::Result<Id> {
    std::fs::symlink_metadata(path).map(|m| (m.dev(), m.ino()))
}

/// The control paths repository `repo` (a folder) lacks.
fn missing(repo: &Path) -> Vec<&'static str> {
    if !repo.is_dir() {
        return Vec::new();
    }
    GIT_CONTROL
        .iter()
        .copied()
        .filter(|rel| std::fs::symlink_metadata(repo.join(rel)).is_err())
        .collect()
}

/// The control paths known repository `k`, now at `path`, lacked at the
/// start and has now.
fn added(k: &Known, path: &Path) -> Vec<PathBuf> {
    k.missing
        .iter()
        .map(|rel| path.join(rel))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect()
}

impl Drop for Guard {
    /// What a command made is undone however it ended: a timed-out test
    /// run's new repository must not wait for a `git` the host runs later.
    fn drop(&mut self) {
        if !self.settled.load(std::sync::atomic::Ordering::Relaxed) {
            self.settle();
        }
    }
}

/// Removes `path` (a folder with what it holds, or a file or link, never
/// followed); whether it is gone.
fn remove(path: &Path) -> bool {
    let done = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(_) => return false,
    };
    done.is_ok() || std::fs::symlink_metadata(path).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A workspace holding repository `sub/.git` (made by `git init`) and a
    /// guard over it, as a command starts.
    fn guarded() -> (tempfile::TempDir, PathBuf, Guard) {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let git = Command::new("git")
            .args(["init", "-q"])
            .current_dir(ws.join("sub"))
            .output()
            .expect("git is installed (apt-get install -y git)");
        assert!(git.status.success(), "{git:?}");
        let guard = start(&ws);
        (dir, ws, guard)
    }

    fn start(ws: &Path) -> Guard {
        let index = Arc::new(Mutex::new(Index::default()));
        let repos = index
            .lock()
            .unwrap()
            .scan(&[ws.to_path_buf()], &[], &[])
            .repos;
        Guard::new(vec![ws.to_path_buf()], repos, Vec::new(), Vec::new(), index)
    }

    fn sh(ws: &Path, script: &str) {
        let out = Command::new("sh")
            .args(["-c", script])
            .current_dir(ws)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    #[test]
    fn a_repository_made_where_there_was_none_is_removed() {
        let (_dir, ws, guard) = guarded();
        sh(
            &ws,
            "mkdir -p new/.git/hooks && touch new/.git/hooks/pre-commit",
        );
        let settled = guard.settle();
        assert_eq!(settled.reverted, [ws.join("new/.git")]);
        assert!(settled.kept.is_empty());
        assert!(!ws.join("new/.git").exists() && ws.join("sub/.git/HEAD").is_file());
    }

    /// The attack of `tests/container_protections.rs` where nothing pins
    /// the folder: the user's repository renamed aside, a copy with a
    /// hook put by its old name. The copy is new and removed; the user's,
    /// known by device and inode, is kept where it went, and said so.
    #[test]
    fn a_moved_repository_is_kept_and_a_copy_by_its_old_name_removed() {
        let (_dir, ws, guard) = guarded();
        sh(
            &ws,
            "mv sub sub-old && cp -a sub-old sub && echo pwned > sub/.git/hooks/post-checkout",
        );
        let settled = guard.settle();
        assert_eq!(settled.reverted, [ws.join("sub/.git")]);
        assert!(
            ws.join("sub-old/.git/HEAD").is_file(),
            "the user's repository was removed"
        );
        assert!(!ws.join("sub/.git").exists());
        assert_eq!(
            settled.kept,
            [format!(
                "the repository {} was moved to {} by the command; it is kept there (sluice never removes a repository it knew)",
                ws.join("sub/.git").display(),
                ws.join("sub-old/.git").display()
            )]
        );
    }

    /// A moved repository is still held to what it lacked: a control
    /// path it gains where it went is removed, the repository kept.
    #[test]
    fn a_moved_repository_gains_no_control_path_it_lacked() {
        let (_dir, ws, _) = guarded();
        std::fs::remove_dir_all(ws.join("sub/.git/hooks")).unwrap();
        let guard = start(&ws);
        sh(
            &ws,
            "mv sub moved && mkdir moved/.git/hooks && touch moved/.git/hooks/post-checkout",
        );
        let settled = guard.settle();
        assert_eq!(settled.reverted, [ws.join("moved/.git/hooks")]);
        assert!(ws.join("moved/.git/HEAD").is_file());
        assert_eq!(settled.kept.len(), 1, "{:?}", settled.kept);
    }

    /// Another repository in a known one's place, the known one nowhere:
    /// it may be the same one with an identity that changed, so it is
    /// kept, said so, and held to what the one there lacked.
    #[test]
    fn a_repository_in_a_known_ones_place_is_kept_when_in_doubt() {
        let (_dir, ws, _) = guarded();
        std::fs::remove_dir_all(ws.join("sub/.git/hooks")).unwrap();
        let guard = start(&ws);
        sh(
            &ws,
            "cp -a sub/.git g && rm -rf sub/.git && mv g sub/.git && mkdir sub/.git/hooks",
        );
        let settled = guard.settle();
        assert_eq!(settled.reverted, [ws.join("sub/.git/hooks")]);
        assert!(ws.join("sub/.git/HEAD").is_file());
        assert!(
            settled.kept[0].starts_with(&format!(
                "{} could not be matched to the repository that was there",
                ws.join("sub/.git").display()
            )),
            "{:?}",
            settled.kept
        );
    }
}
