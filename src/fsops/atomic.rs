//! Atomic replacement: stage the new bytes in a unique sibling file, give it
//! the old file's permission bits and ownership, then rename it over the
//! target. The staging file is created private (0600) and gets its final
//! owner and mode before a byte is written, so a private file's new contents
//! are never readable by others, not even while staged. A failure before the rename leaves the original bytes as they were;
//! a process killed mid-write leaves at most an orphan `.sluice-*.tmp` file.
//! No fsync: this is per-file atomicity, not durability after power loss.

use super::checked::Folder;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

static STAGED: AtomicU64 = AtomicU64::new(0);

/// Replaces the file `name` in `dir` with `bytes`, staged and renamed
/// inside that folder's descriptor, so the file lands in the folder that
/// was opened whatever its path leads to meanwhile; a link at `name` is
/// replaced, never written through.
pub fn replace_in(
    dir: &Folder,
    name: &OsStr,
    bytes: &[u8],
    existing: Option<&Metadata>,
) -> io::Result<()> {
    let (tmp, mut file) = stage_file(dir, name)?;
    let result = fill(&mut file, bytes, existing).and_then(|()| {
        drop(file);
        dir.rename(&tmp, dir, name)
    });
    if result.is_err() {
        let _ = dir.remove_file(&tmp);
    }
    result
}

fn stage_file(dir: &Folder, name: &OsStr) -> io::Result<(OsString, File)> {
    let name = short_name(name);
    loop {
        let n = STAGED.fetch_add(1, Ordering::Relaxed);
        let tmp = OsString::from(format!(".sluice-{name}.{}.{n}.tmp", std::process::id()));
        match dir.create_new(&tmp, 0o600) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The file's name cut to at most 100 bytes on a character boundary, so the
/// staging name stays within NAME_MAX whatever the script of the name.
fn short_name(name: &OsStr) -> String {
    let name = name.to_string_lossy();
    let mut end = name.len().min(100);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_string()
}

fn fill(file: &mut File, bytes: &[u8], existing: Option<&Metadata>) -> io::Result<()> {
    let mode = match existing {
        Some(old) => {
            keep_owner(file, old)?;
            old.mode() & 0o7777
        }
        None => 0o666 & !umask(),
    };
    // Set-id bits go on last: a write by a non-root owner clears them.
    file.set_permissions(fs::Permissions::from_mode(mode & 0o777))?;
    file.write_all(bytes)?;
    if mode & 0o7000 != 0 {
        file.set_permissions(fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// Gives the staged file `old`'s owner and group, or fails saying why.
fn keep_owner(file: &File, old: &Metadata) -> io::Result<()> {
    let staged = file.metadata()?;
    if (staged.uid(), staged.gid()) == (old.uid(), old.gid()) {
        return Ok(());
    }
    std::os::unix::fs::fchown(file, Some(old.uid()), Some(old.gid())).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot keep the file's owner {}:{} ({e}); the original is unchanged",
                old.uid(),
                old.gid()
            ),
        )
    })
}

/// The process's umask, read without changing it (so no other thread can
/// create a file under a wrong one meanwhile); 022 if /proc cannot tell.
fn umask() -> u32 {
    static UMASK: OnceLock<u32> = OnceLock::new();
    *UMASK.get_or_init(|| {
        fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Umask:"))
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            })
            .unwrap_or(0o022)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn replace(real: &Path, bytes: &[u8], existing: Option<&Metadata>) -> io::Result<()> {
        let dir = Folder::open(real.parent().unwrap())?;
        replace_in(&dir, real.file_name().unwrap(), bytes, existing)
    }

    #[test]
    fn replaces_contents_and_keeps_mode() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.sh");
        fs::write(&f, "old").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o751)).unwrap();
        let meta = fs::metadata(&f).unwrap();
        replace(&f, b"new", Some(&meta)).unwrap();
        assert_eq!(fs::read_to_string(&f).unwrap(), "new");
        assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o751);
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no staging file left behind");
    }

    #[test]
    fn the_staged_file_is_private_until_it_has_the_final_mode() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("secret");
        fs::write(&f, "old").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
        let folder = Folder::open(dir.path()).unwrap();
        let (tmp, file) = stage_file(&folder, OsStr::new("secret")).unwrap();
        assert_eq!(file.metadata().unwrap().mode() & 0o777, 0o600);
        drop(file);
        fs::remove_file(dir.path().join(tmp)).unwrap();
        replace(&f, b"new", Some(&fs::metadata(&f).unwrap())).unwrap();
        assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o600);
    }

    #[test]
    fn a_new_file_gets_the_umask_mode() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("new");
        replace(&f, b"x", None).unwrap();
        assert_eq!(fs::metadata(&f).unwrap().mode() & 0o777, 0o666 & !umask());
    }

    #[test]
    fn hard_links_keep_the_old_contents() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a");
        fs::write(&f, "old").unwrap();
        fs::hard_link(&f, dir.path().join("b")).unwrap();
        replace(&f, b"new", Some(&fs::metadata(&f).unwrap())).unwrap();
        assert_eq!(fs::read_to_string(dir.path().join("b")).unwrap(), "old");
    }

    #[test]
    fn failure_before_rename_leaves_original_and_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        // Renaming a file over a non-empty directory fails after staging.
        let target = dir.path().join("d");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("keep"), "x").unwrap();
        assert!(replace(&target, b"new", None).is_err());
        assert_eq!(fs::read_to_string(target.join("keep")).unwrap(), "x");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
