//! `against = "base"`: the same selection run in a detached git worktree
//! of the runner's `baseRef`, then in the workspace, and the failures
//! compared by name.
//!
//! The worktree is sluice's own doing, not the caller's command: git runs
//! on the host with a fixed argv (the revision is the host's `baseRef`,
//! never the caller's), with hooks off (`core.hooksPath=/dev/null`, so a
//! `post-checkout` hook the workspace holds never runs), in a private
//! folder (mode 0700) that is removed, with git's record of it, when the
//! comparison ends however it ends.

use super::report::Report;
use crate::error::{FlowError, FlowResult};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A checkout of the base revision, removed on drop.
pub struct Worktree {
    /// The repository's top folder.
    top: PathBuf,
    /// The private folder holding the checkout.
    holder: PathBuf,
    /// The checkout's root.
    root: PathBuf,
    /// The workspace's counterpart inside the checkout (the workspace may
    /// be a folder inside the repository).
    pub workspace: PathBuf,
}

fn refuse(message: String) -> FlowError {
    FlowError::invalid_input("against", message)
}

/// git, with the repository's own configuration unable to run anything.
fn git(top: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-c")
        .arg("core.hooksPath=/dev/null")
        .arg("-c")
        .arg("core.fsmonitor=false")
        .arg("-C")
        .arg(top)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env("GIT_TERMINAL_PROMPT", "0");
    c
}

fn said(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

impl Worktree {
    /// Checks out `base` (a revision of the repository `workspace` is in)
    /// in a private temporary folder, off the run's thread (a checkout of
    /// a large tree takes a while).
    pub async fn make(
        workspace: &Path,
        base: &str,
        started: Option<&Path>,
    ) -> FlowResult<Worktree> {
        let (workspace, base) = (workspace.to_path_buf(), base.to_string());
        let started = started.map(Path::to_path_buf);
        tokio::task::spawn_blocking(move || {
            Worktree::make_now(&workspace, &base, started.as_deref())
        })
        .await
        .map_err(|e| {
            FlowError::new(
                crate::error::ErrorCode::CommandFailed,
                format!("the base worktree could not be made: {e}"),
            )
        })?
    }

    /// Removes the checkout and git's record of it, off the run's thread.
    /// (Dropping it removes it too, on the thread that drops it: a call
    /// cancelled midway.)
    pub async fn remove(self) {
        let _ = tokio::task::spawn_blocking(move || drop(self)).await;
    }

    fn make_now(workspace: &Path, base: &str, started: Option<&Path>) -> FlowResult<Worktree> {
        let out = git(workspace)
            .args(["rev-parse", "--show-toplevel"])
            .output()
            .map_err(|e| {
                refuse(format!(
                    "against = \"base\" needs git, which could not start: {e}"
                ))
            })?;
        if !out.status.success() {
            return Err(refuse(format!("against = \"base\" compares with a git revision, but the workspace {} is not in a git repository ({})", workspace.display(), said(&out))));
        }
        let top = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let top = std::fs::canonicalize(&top).unwrap_or(top);
        // git would run the found repository's configuration (its filters
        // among it) on the host: only the one the run started in.
        if started != Some(top.as_path()) {
            let was = started.map_or("none".to_string(), |p| p.display().to_string());
            return Err(refuse(format!("the workspace's repository is now {} but was {was} when the run started: a repository made since is not checked out (its configuration would run on the host)", top.display())));
        }
        let check = git(&top)
            .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
            .arg(format!("{base}^{{commit}}"))
            .output()
            .map_err(|e| refuse(format!("git could not start: {e}")))?;
        if !check.status.success() {
            return Err(refuse(format!("the runner's baseRef {base:?} is not a commit of the repository at {}; set test.baseRef to a branch, tag or commit that exists", top.display())));
        }
        let holder = private_folder()?;
        let root = holder.join("base");
        let wt = Worktree {
            workspace: root.join(workspace.strip_prefix(&top).unwrap_or(Path::new(""))),
            top,
            holder,
            root,
        };
        let commit = String::from_utf8_lossy(&check.stdout).trim().to_string();
        let add = git(&wt.top)
            .args(["worktree", "add", "--detach", "--quiet"])
            .arg(&wt.root)
            .arg(&commit)
            .output()
            .map_err(|e| refuse(format!("git could not start: {e}")))?;
        if !add.status.success() {
            return Err(FlowError::new(
                crate::error::ErrorCode::CommandFailed,
                format!("git could not check out baseRef {base:?}: {}", said(&add)),
            ));
        }
        Ok(wt)
    }

    /// The checkout's root.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for Worktree {
    fn drop(&mut self) {
        let _ = git(&self.top)
            .args(["worktree", "remove", "--force"])
            .arg(&self.root)
            .output();
        let _ = std::fs::remove_dir_all(&self.holder);
        let _ = git(&self.top).args(["worktree", "prune"]).output();
    }
}

/// The top folder of the repository `workspace` is in, if any.
pub fn repository(workspace: &Path) -> Option<PathBuf> {
    let out = git(workspace)
        .args(["rev-parse", "--show-toplevel"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let top = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    Some(std::fs::canonicalize(&top).unwrap_or(top))
}

/// `$TMPDIR/sluice-base-RANDOM`, mode 0700.
fn private_folder() -> FlowResult<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let tmp = std::fs::canonicalize(std::env::temp_dir()).unwrap_or_else(|_| std::env::temp_dir());
    for _ in 0..8 {
        let dir = tmp.join(format!("sluice-base-{:016x}", random()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(FlowError::new(
                    crate::error::ErrorCode::CommandFailed,
                    format!(
                        "could not make a private folder for the base worktree in {}: {e}",
                        tmp.display()
                    ),
                ))
            }
        }
    }
    Err(FlowError::new(
        crate::error::ErrorCode::CommandFailed,
        "could not make a private folder for the base worktree",
    ))
}

fn random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// The failures of the workspace's run against the base's, by name.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub struct Comparison {
    /// Failing in the workspace, not in the base.
    pub introduced: Vec<String>,
    /// Failing in both.
    pub preexisting: Vec<String>,
    /// Failing in the base, not in the workspace.
    pub fixed: Vec<String>,
}

/// Compares two parsed reports.
pub fn compare(base: &Report, now: &Report) -> Comparison {
    let names =
        |r: &Report| -> BTreeSet<String> { r.failed.iter().map(|f| f.name.clone()).collect() };
    let (before, after) = (names(base), names(now));
    Comparison {
        introduced: after.difference(&before).cloned().collect(),
        preexisting: after.intersection(&before).cloned().collect(),
        fixed: before.difference(&after).cloned().collect(),
    }
}
