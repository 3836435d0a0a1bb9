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

use super::index::Index;
use crate::kernel::pattern::Pattern;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What the trees held when a command started, to compare with when it
/// ends.
#[derive(Debug)]
pub struct Guard {
    roots: Vec<PathBuf>,
    globs: Vec<Pattern>,
    skip: Vec<PathBuf>,
    /// Every `.git` entry at the start.
    before: Vec<PathBuf>,
    /// Control paths of those repositories that did not exist at the start.
    missing: Vec<PathBuf>,
    index: Arc<Mutex<Index>>,
    /// Set once [`Guard::settle`] ran: a command that ended some other way
    /// (a timeout, a cancellation, a runner that broke) is settled when its
    /// guard is dropped.
    settled: std::sync::atomic::AtomicBool,
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
        let missing = repos
            .iter()
            .filter(|r| r.is_dir())
            .flat_map(|r| super::derive::control_paths(r))
            .filter(|p| std::fs::symlink_metadata(p).is_err())
            .collect();
        Guard {
            roots,
            globs,
            skip,
            before: repos,
            missing,
            index,
            settled: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Removes every repository and control file the command made, and
    /// returns their paths (empty when it made none).
    pub fn settle(&self) -> Vec<PathBuf> {
        self.settled
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let found = {
            let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
            index.scan(&self.roots, &self.globs, &self.skip)
        };
        let mut made: Vec<PathBuf> = found
            .repos
            .into_iter()
            .filter(|r| !self.before.contains(r))
            .collect();
        made.extend(
            self.missing
                .iter()
                .filter(|p| std::fs::symlink_metadata(p).is_ok())
                .cloned(),
        );
        made.retain(|p| self.roots.iter().any(|r| p.starts_with(r)) && remove(p));
        made
    }
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
