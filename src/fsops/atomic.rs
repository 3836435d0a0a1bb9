//! Atomic replacement: stage the new bytes in a unique sibling file, give it
//! the old file's permission bits and ownership, then rename it over the
//! target. A failure before the rename leaves the original bytes as they were;
//! a process killed mid-write leaves at most an orphan `.sluice-*.tmp` file.
//! No fsync: this is per-file atomicity, not durability after power loss.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static STAGED: AtomicU64 = AtomicU64::new(0);

/// Replaces the file at canonical path `real` with `bytes`. `existing` is the
/// metadata of the file being replaced, or `None` when creating it.
pub fn replace(real: &Path, bytes: &[u8], existing: Option<&Metadata>) -> io::Result<()> {
    let (tmp, mut file) = stage_file(real)?;
    let result = fill(&mut file, bytes, existing).and_then(|()| {
        drop(file);
        fs::rename(&tmp, real)
    });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn stage_file(real: &Path) -> io::Result<(PathBuf, File)> {
    let name = short_name(real);
    loop {
        let n = STAGED.fetch_add(1, Ordering::Relaxed);
        let tmp = real.with_file_name(format!(".sluice-{name}.{}.{n}.tmp", std::process::id()));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The file's name cut to at most 100 bytes on a character boundary, so the
/// staging name stays within NAME_MAX whatever the script of the name.
fn short_name(real: &Path) -> String {
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let mut end = name.len().min(100);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_string()
}

fn fill(file: &mut File, bytes: &[u8], existing: Option<&Metadata>) -> io::Result<()> {
    file.write_all(bytes)?;
    if let Some(old) = existing {
        // chown before chmod: changing the owner clears set-id bits.
        let staged = file.metadata()?;
        if (staged.uid(), staged.gid()) != (old.uid(), old.gid()) {
            std::os::unix::fs::fchown(&*file, Some(old.uid()), Some(old.gid())).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot keep the file's owner {}:{} ({e}); the original is unchanged",
                        old.uid(),
                        old.gid()
                    ),
                )
            })?;
        }
        file.set_permissions(fs::Permissions::from_mode(old.mode() & 0o7777))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
