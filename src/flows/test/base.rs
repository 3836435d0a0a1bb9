//! `against = "base"`: the same selection run in a checkout of the
//! runner's `baseRef` in a private folder, then in the workspace, and the
//! failures compared by name.
//!
//! The checkout is sluice's own doing, not the caller's command, and it
//! runs nothing of the repository's: git reads the repository's objects
//! and refs, never its configuration (so no filter, `include.path`,
//! fsmonitor, hook, attributes file, credential helper or lazy fetch of
//! it). Each git step runs with a configuration of sluice's making, in a
//! git folder of its own inside the private folder (mode 0700): its
//! `config` written here, the workspace's `HEAD` copied, and the
//! repository's `refs`, `packed-refs`, `logs`, `shallow` and `reftable`
//! linked; the objects are named by `GIT_OBJECT_DIRECTORY`. The
//! environment is emptied but for `PATH`, so neither the system's nor the
//! user's configuration nor variables (`GIT_CONFIG_PARAMETERS`, ...)
//! reach it. The revision is the host's `baseRef`, never the caller's.
//! The files are written by `git read-tree --reset -u`, which applies the
//! tree's own `.gitattributes` for git's built-in conversions (`text`,
//! `eol`, `ident`, `working-tree-encoding`), none of which runs a program;
//! a `filter=` attribute names a driver this configuration does not have,
//! so it is not applied (Git LFS files stay pointer files). Nothing is
//! written into the repository, and the private folder is removed when
//! the comparison ends, however it ends. The checkout has no `.git`.

use super::report::Report;
use crate::error::{FlowError, FlowResult};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A checkout of the base revision, removed on drop.
pub struct Worktree {
    /// The private folder holding the checkout and sluice's git folder.
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

fn failed(message: String) -> FlowError {
    FlowError::new(crate::error::ErrorCode::CommandFailed, message)
}

/// Where a repository's files are, as git finds them from a folder inside
/// its work tree.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Repository {
    /// The work tree's top folder.
    top: PathBuf,
    /// The work tree's git folder (`.git`, or a linked worktree's or a
    /// submodule's, named by a `.git` file).
    git_dir: PathBuf,
    /// Where the objects and the shared refs are: the git folder, or the
    /// one its `commondir` names.
    common: PathBuf,
}

/// The repository `dir` is in, found without running git (git would read
/// the repository's configuration to find it): the nearest folder at or
/// above `dir` holding a `.git` folder, or a `.git` file saying `gitdir:
/// PATH`, that is a git folder; not across a filesystem boundary, as git
/// does not by default. `core.worktree` and `GIT_DIR` are not followed.
fn find(dir: &Path) -> Option<Repository> {
    use std::os::unix::fs::MetadataExt;
    let dir = std::fs::canonicalize(dir).ok()?;
    let device = std::fs::metadata(&dir).ok()?.dev();
    for top in dir.ancestors() {
        if std::fs::metadata(top).ok()?.dev() != device {
            return None;
        }
        let dot = top.join(".git");
        let Ok(meta) = std::fs::symlink_metadata(&dot) else {
            continue;
        };
        let git_dir = if meta.is_file() {
            let text = std::fs::read_to_string(&dot).ok()?;
            let named = text.strip_prefix("gitdir:")?.trim();
            top.join(named)
        } else {
            dot
        };
        if !git_dir.join("HEAD").is_file() {
            continue;
        }
        let common = match std::fs::read_to_string(git_dir.join("commondir")) {
            Ok(named) => git_dir.join(named.trim()),
            Err(_) => git_dir.clone(),
        };
        let canonical = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
        return Some(Repository {
            top: top.to_path_buf(),
            git_dir: canonical(git_dir),
            common: canonical(common),
        });
    }
    None
}

/// git with nothing of the repository's, the system's or the user's
/// configuration, on the git folder `git_dir` of sluice's making.
fn git(git_dir: &Path, objects: &Path) -> Command {
    let home = git_dir.parent().unwrap_or(git_dir);
    let mut c = Command::new("git");
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LC_ALL", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_DIR", git_dir)
        .env("GIT_OBJECT_DIRECTORY", objects)
        .current_dir(home);
    c
}

fn said(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

/// The configuration every git step runs with. `hooksPath`, `fsmonitor`
/// and `attributesFile` are set though nothing else names them, so that
/// no default (`~/.config/git/attributes`) is looked for.
fn config(object_format: &str, ref_storage: Option<&str>) -> String {
    let mut text = format!(
        "[core]\n\trepositoryformatversion = 1\n\tbare = false\n\thooksPath = /dev/null\n\tfsmonitor = false\n\tattributesFile = /dev/null\n\tsymlinks = true\n[extensions]\n\tobjectFormat = {object_format}\n"
    );
    if let Some(storage) = ref_storage {
        text.push_str(&format!("\trefStorage = {storage}\n"));
    }
    text
}

/// The repository's files git needs to resolve a revision, linked into
/// sluice's git folder (those that exist).
const LINKED: &[&str] = &["refs", "packed-refs", "logs", "shallow", "reftable"];

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
        .map_err(|e| failed(format!("the base worktree could not be made: {e}")))?
    }

    /// Removes the checkout, off the run's thread. (Dropping it removes
    /// it too, on the thread that drops it: a call cancelled midway.)
    pub async fn remove(self) {
        let _ = tokio::task::spawn_blocking(move || drop(self)).await;
    }

    fn make_now(workspace: &Path, base: &str, started: Option<&Path>) -> FlowResult<Worktree> {
        let Some(repo) = find(workspace) else {
            return Err(refuse(format!("against = \"base\" compares with a git revision, but the workspace {} is not in a git repository", workspace.display())));
        };
        // The base is the host's revision of the repository the run
        // started in, not of one the run made since.
        if started != Some(repo.top.as_path()) {
            let was = started.map_or("none".to_string(), |p| p.display().to_string());
            return Err(refuse(format!("the workspace's repository is now {} but was {was} when the run started: a repository made since is not the one the host's baseRef names", repo.top.display())));
        }
        let holder = private_folder()?;
        let root = holder.join("base");
        let wt = Worktree {
            workspace: root.join(workspace.strip_prefix(&repo.top).unwrap_or(Path::new(""))),
            holder,
            root,
        };
        let git_dir = wt.holder.join("git");
        own_git_dir(&repo, &git_dir)
            .map_err(|e| failed(format!("could not prepare the base checkout: {e}")))?;
        let objects = repo.common.join("objects");
        let commit = resolve(&git_dir, &objects, base, &repo.top)?;
        std::fs::create_dir(&wt.root)
            .map_err(|e| failed(format!("could not make the base checkout's folder: {e}")))?;
        let out = git(&git_dir, &objects)
            .env("GIT_INDEX_FILE", wt.holder.join("index"))
            .env("GIT_WORK_TREE", &wt.root)
            .args(["read-tree", "--reset", "-u"])
            .arg(&commit)
            .output()
            .map_err(|e| refuse(format!("git could not start: {e}")))?;
        if !out.status.success() {
            let said = said(&out);
            // A partial clone's missing objects: git would fetch them with
            // the repository's remote configuration, which is not read.
            let hint = if said.contains("unable to read") {
                let quote = crate::kernel::shell::quote;
                format!(" (objects the repository lacks, as a partial clone does, are not fetched for the base checkout; fetch them there first: git -C {} archive {} > /dev/null)", quote(&repo.top.display().to_string()), quote(base))
            } else {
                String::new()
            };
            return Err(failed(format!(
                "git could not check out baseRef {base:?}: {said}{hint}"
            )));
        }
        Ok(wt)
    }

    /// The checkout's root.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// Makes `git_dir`, sluice's git folder for `repo`: its own `config`, the
/// workspace's `HEAD`, and links to the repository's refs. The object
/// format and ref storage are read from the repository's `config` file by
/// `git config --file`, which follows no `include.path`.
fn own_git_dir(repo: &Repository, git_dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir(git_dir)?;
    std::fs::write(git_dir.join("config"), config("sha1", None))?;
    let read = |key: &str| -> Option<String> {
        let out = git(git_dir, &repo.common.join("objects"))
            .args(["config", "--file"])
            .arg(repo.common.join("config"))
            .args(["--get", key])
            .output()
            .ok()?;
        let value = String::from_utf8_lossy(&out.stdout).trim().to_lowercase();
        (out.status.success() && !value.is_empty()).then_some(value)
    };
    let format = read("extensions.objectformat").unwrap_or_else(|| "sha1".into());
    let storage = read("extensions.refstorage").filter(|s| s != "files");
    std::fs::write(git_dir.join("config"), config(&format, storage.as_deref()))?;
    std::fs::copy(repo.git_dir.join("HEAD"), git_dir.join("HEAD"))?;
    for name in LINKED {
        let theirs = repo.common.join(name);
        if std::fs::symlink_metadata(&theirs).is_ok() {
            std::os::unix::fs::symlink(&theirs, git_dir.join(name))?;
        }
    }
    Ok(())
}

/// The commit `base` names, as the full object name.
fn resolve(git_dir: &Path, objects: &Path, base: &str, top: &Path) -> FlowResult<String> {
    let check = git(git_dir, objects)
        .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{base}^{{commit}}"))
        .output()
        .map_err(|e| {
            refuse(format!(
                "against = \"base\" needs git, which could not start: {e}"
            ))
        })?;
    if !check.status.success() {
        return Err(refuse(format!("the runner's baseRef {base:?} is not a commit of the repository at {}; set test.baseRef to a branch, tag or commit that exists", top.display())));
    }
    Ok(String::from_utf8_lossy(&check.stdout).trim().to_string())
}

impl Drop for Worktree {
    fn drop(&mut self) {
        // Links into the repository are removed, never followed.
        let _ = std::fs::remove_dir_all(&self.holder);
    }
}

/// The top folder of the repository `workspace` is in, if any (found as
/// the base checkout finds it, without running git).
pub fn repository(workspace: &Path) -> Option<PathBuf> {
    find(workspace).map(|r| r.top)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run_git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", said(&out));
    }

    /// A linked worktree (a `.git` file naming `.git/worktrees/NAME`, whose
    /// `commondir` leads back) is found from a folder inside it, and its
    /// base is its own `HEAD`, resolved through the shared refs.
    #[test]
    fn a_linked_worktrees_base_is_its_own_head() {
        let dir = tempfile::tempdir().unwrap();
        let main = std::fs::canonicalize(dir.path()).unwrap().join("main");
        std::fs::create_dir(&main).unwrap();
        run_git(&main, &["init", "-q", "-b", "main"]);
        std::fs::write(main.join("a.txt"), "main\n").unwrap();
        run_git(&main, &["add", "."]);
        run_git(&main, &["commit", "-q", "-m", "main"]);
        let linked = main.parent().unwrap().join("linked");
        run_git(
            &main,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "side",
                linked.to_str().unwrap(),
            ],
        );
        std::fs::create_dir(linked.join("sub")).unwrap();
        std::fs::write(linked.join("a.txt"), "side\n").unwrap();
        run_git(&linked, &["commit", "-q", "-am", "side"]);
        let found = find(&linked.join("sub")).expect("found");
        assert_eq!(found.top, linked);
        assert_eq!(found.git_dir, main.join(".git/worktrees/linked"));
        assert_eq!(found.common, main.join(".git"));
        let wt = Worktree::make_now(&linked.join("sub"), "HEAD", Some(&linked)).unwrap();
        assert_eq!(wt.workspace, wt.root().join("sub"));
        let text = std::fs::read_to_string(wt.root().join("a.txt")).unwrap();
        assert_eq!(text, "side\n");
        assert!(!wt.root().join(".git").exists());
        let holder = wt.holder.clone();
        drop(wt);
        assert!(!holder.exists());
        // Nothing was written into the repository.
        assert!(main.join("a.txt").exists());
        assert_eq!(
            std::fs::read_to_string(main.join("a.txt")).unwrap(),
            "main\n"
        );
    }

    /// Outside any repository, nothing is found.
    #[test]
    fn a_folder_outside_any_repository_has_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(find(dir.path()), None);
    }
}
