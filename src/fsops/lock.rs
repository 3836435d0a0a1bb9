//! The sibling lock protocol that keeps two writers of one file apart.
//!
//! A writer creates the directory `.sluice-<key>.lock` beside the file before
//! it reads, and removes it when its mutation ends. Directory creation is
//! exclusive on every filesystem sluice supports, so processes on one host, or
//! on several hosts sharing the filesystem, coordinate without a daemon. The
//! key is the file's name case-folded and NFKC-normalised, so names that a
//! case-insensitive or normalising filesystem may treat as one file share a
//! lock; symlink aliases share it because the caller locks the resolved path.
//!
//! A lock is never reclaimed by age: a lock whose owner died stays, and every
//! later writer is refused with the lock's path, for a person to remove once
//! they have looked at the file.

use super::checked::Folder;
use super::path::Target;
use crate::error::{ErrorCode, FlowError, FlowResult};
use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use unicode_normalization::UnicodeNormalization;

/// Keys longer than this are hashed so the lock's name fits NAME_MAX.
const MAX_KEY_BYTES: usize = 200;

/// A held lock; dropping it releases the file.
#[derive(Debug)]
pub struct FileLock {
    /// The folder the lock lives in, held by descriptor: the lock is made,
    /// named and removed there, wherever its path leads meanwhile.
    folder: Folder,
    name: OsString,
    /// Where it is, for messages.
    dir: PathBuf,
}

/// Who holds a lock, as its `owner` file records.
#[derive(Debug, Default, PartialEq)]
struct Owner {
    pid: Option<i32>,
    host: Option<String>,
}

impl FileLock {
    /// Takes the lock of `target` (its resolved path) in `folder`, the
    /// folder holding it as the caller holds it (opened without following
    /// a link), or fails `no_match` naming the busy file and the lock.
    pub fn acquire(folder: &Folder, target: &Target) -> FlowResult<FileLock> {
        let dir = lock_path(&target.real);
        let name = dir.file_name().unwrap_or_default().to_os_string();
        match folder.make(&name) {
            Ok(()) => {
                let lock = FileLock {
                    folder: folder.clone(),
                    name,
                    dir,
                };
                lock.write_owner(target).map_err(|e| {
                    FlowError::new(
                        ErrorCode::CommandFailed,
                        format!("cannot record the owner of lock {}: {e}", lock.dir.display()),
                    )
                })?;
                Ok(lock)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(held(target, folder, &dir)),
            Err(e) => Err(FlowError::new(
                ErrorCode::CommandFailed,
                format!(
                    "cannot create the lock {} for {}: {e}. sluice needs to create a folder beside the file to change it.",
                    dir.display(),
                    target.shown.display()
                ),
            )
            .with("path", target.shown.display().to_string())
            .with("lock", dir.display().to_string())),
        }
    }

    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn write_owner(&self, target: &Target) -> io::Result<()> {
        let mut f = self
            .folder
            .folder(&self.name)?
            .create_new(OsStr::new("owner"), 0o666)?;
        writeln!(f, "pid={}", std::process::id())?;
        writeln!(f, "host={}", hostname())?;
        writeln!(f, "file={}", target.real.display())
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        if let Ok(lock) = self.folder.folder(&self.name) {
            let _ = lock.remove_file(OsStr::new("owner"));
        }
        let _ = self.folder.remove_dir(&self.name);
    }
}

/// The lock directory for the file at canonical path `real`.
pub fn lock_path(real: &Path) -> PathBuf {
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut key: String = name.nfkc().collect::<String>().to_lowercase();
    if key.len() > MAX_KEY_BYTES {
        key = format!("{:016x}", fnv1a(key.as_bytes()));
    }
    real.with_file_name(format!(".sluice-{key}.lock"))
}

/// FNV-1a, fixed across builds so every sluice version agrees on lock names.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    })
}

fn held(target: &Target, folder: &Folder, dir: &Path) -> FlowError {
    let owner = read_owner(folder, dir);
    let shown = target.shown.display();
    let base = |msg: String| {
        FlowError::new(ErrorCode::NoMatch, msg)
            .with("path", shown.to_string())
            .with("lock", dir.display().to_string())
    };
    match owner.pid {
        Some(pid) if owner_is_dead(&owner) => base(format!(
            "{shown} is locked by {}, left by process {pid}, which is no longer running. \
             sluice never reclaims a lock by age: stop every writer of this file, inspect its contents, \
             then remove only that lock folder and retry.",
            dir.display()
        ))
        .with("stale", true)
        .with("pid", pid),
        Some(pid) => base(format!(
            "{shown} is busy: another writer (process {pid}) holds the lock {}. Re-read the file and retry after it finishes.",
            dir.display()
        ))
        .with("busy", true),
        // A writer between creating the lock and naming itself, or one that
        // died right there: only a person can tell which.
        None => base(format!(
            "{shown} is busy: another writer holds the lock {}. Re-read the file and retry after it finishes. \
             The lock names no owner: if no sluice process is changing the file, a crash left it; remove that folder.",
            dir.display()
        ))
        .with("busy", true),
    }
}

fn read_owner(folder: &Folder, dir: &Path) -> Owner {
    let mut text = String::new();
    if let Some(name) = dir.file_name() {
        let file = folder
            .folder(name)
            .and_then(|lock| lock.open_read(OsStr::new("owner")));
        if let Ok(mut f) = file {
            // An owner file is three short lines; more is not ours.
            let _ = Read::by_ref(&mut f).take(4096).read_to_string(&mut text);
        }
    }
    let mut owner = Owner::default();
    for line in text.lines() {
        match line.split_once('=') {
            Some(("pid", v)) => owner.pid = v.parse().ok(),
            Some(("host", v)) => owner.host = Some(v.to_string()),
            _ => {}
        }
    }
    owner
}

/// True only when the owner was on this host and its process is gone; an
/// owner we cannot check is treated as alive.
fn owner_is_dead(owner: &Owner) -> bool {
    let (Some(pid), Some(host)) = (owner.pid, owner.host.as_deref()) else {
        return false;
    };
    if host != hostname() || pid <= 0 {
        return false;
    }
    matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn target(p: &Path) -> Target {
        Target::at(p)
    }

    fn acquire(t: &Target) -> FlowResult<FileLock> {
        FileLock::acquire(&Folder::open(t.real.parent().unwrap()).unwrap(), t)
    }

    #[test]
    fn case_and_normalisation_variants_share_a_lock() {
        let a = lock_path(Path::new("/w/README.md"));
        assert_eq!(a, PathBuf::from("/w/.sluice-readme.md.lock"));
        assert_eq!(lock_path(Path::new("/w/readme.MD")), a);
        // "é" precomposed and decomposed.
        assert_eq!(
            lock_path(Path::new("/w/caf\u{e9}")),
            lock_path(Path::new("/w/cafe\u{301}"))
        );
        let long = "x".repeat(250);
        let name = lock_path(Path::new(&format!("/w/{long}")));
        assert!(name.file_name().unwrap().len() < 40, "{name:?}");
    }

    #[test]
    fn second_acquire_is_busy_and_release_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let t = target(&dir.path().join("f.txt"));
        let held_lock = acquire(&t).unwrap();
        let e = acquire(&t).unwrap_err();
        assert_eq!(e.code, ErrorCode::NoMatch);
        assert_eq!(e.details["busy"], true);
        assert_eq!(e.details["lock"], held_lock.path().display().to_string());
        drop(held_lock);
        assert!(!lock_path(&t.real).exists());
        acquire(&t).unwrap();
    }

    #[test]
    fn lock_of_a_dead_process_is_stale_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let t = target(&dir.path().join("f.txt"));
        let lock = lock_path(&t.real);
        fs::create_dir(&lock).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        fs::write(
            lock.join("owner"),
            format!("pid={dead}\nhost={}\n", hostname()),
        )
        .unwrap();
        let e = acquire(&t).unwrap_err();
        assert_eq!(e.details["stale"], true);
        assert!(e.message.contains(&lock.display().to_string()));
        assert!(lock.exists(), "a stale lock is never reclaimed");
    }
}
