//! Turning a path a user typed into the two paths a flow needs: the one to
//! show back (absolute, as given) and the canonical one that policy checks and
//! I/O use (every existing symlink resolved, including dangling ones).

use crate::error::{ErrorCode, FlowError, FlowResult};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Symlink hops allowed while resolving one path, as in Linux's ELOOP limit.
const MAX_SYMLINK_HOPS: usize = 40;

/// A path named in a flow's input, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Absolute path as the user gave it (relative ones joined to the
    /// workspace); what messages show.
    pub shown: PathBuf,
    /// Canonical absolute path: what capabilities name and I/O touches. For a
    /// path that does not exist yet, its canonical existing prefix plus the rest.
    pub real: PathBuf,
    /// The path ended in `/`: it names a folder, so a file there is
    /// `not_a_directory` and nothing may create a file by that name.
    pub names_folder: bool,
}

#[cfg(test)]
impl Target {
    /// A target whose shown and real paths are both `p` (unit tests).
    pub fn at(p: impl Into<PathBuf>) -> Target {
        let p = p.into();
        Target {
            shown: p.clone(),
            real: p,
            names_folder: false,
        }
    }
}

/// Resolves `given` (the value of input field `field`) against `root`.
pub fn resolve(root: &Path, field: &str, given: &str) -> FlowResult<Target> {
    if given.is_empty() {
        return Err(FlowError::invalid_input(
            field,
            format!(
                "`{field}` is empty: give a path relative to the workspace or an absolute one."
            ),
        ));
    }
    if given.contains('\0') {
        return Err(FlowError::invalid_input(
            field,
            format!("`{field}` contains a NUL byte, which no path may hold."),
        ));
    }
    let shown = absolute(root, Path::new(given));
    // A relative path is walked from the (already canonical) root, so the
    // cost is one lstat per component below it, however deep the root is.
    let (base, rest) = if Path::new(given).is_relative() {
        (root, Path::new(given))
    } else {
        (Path::new("/"), shown.as_path())
    };
    let real = resolve_below(base, rest).map_err(|e| {
        FlowError::new(
            ErrorCode::CommandFailed,
            format!("cannot resolve {}: {e}", shown.display()),
        )
        .with("path", shown.display().to_string())
    })?;
    Ok(Target {
        shown,
        real,
        names_folder: given.len() > 1 && given.ends_with('/'),
    })
}

/// `path` joined to `root` when relative, with `.` components dropped.
fn absolute(root: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        root.join(path)
    };
    joined
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// Resolves every symlink that exists along an absolute `path`, keeping the
/// missing tail lexically, so a write through a dangling link lands on the
/// link's target.
pub fn canonical_lenient(path: &Path) -> io::Result<PathBuf> {
    resolve_below(Path::new("/"), path)
}

/// Like [`canonical_lenient`] for `rest` taken from `base`, which must
/// already be canonical (`..` and absolute links may still leave it).
fn resolve_below(base: &Path, rest: &Path) -> io::Result<PathBuf> {
    let mut out = base.to_path_buf();
    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_front(&mut pending, rest);
    let mut hops = 0;
    let mut missing = false;
    while let Some(part) = pending.pop_front() {
        match part.to_str() {
            Some("/") => out = PathBuf::from("/"),
            Some("..") => {
                out.pop();
                // Back above the missing part, what follows exists again and
                // its links must be followed, or `gone/../link/x` would slip
                // past the check through `link`.
                missing = missing && fs::symlink_metadata(&out).is_err();
            }
            _ if missing => out.push(&part),
            _ => {
                let next = out.join(&part);
                match fs::symlink_metadata(&next) {
                    Ok(m) if m.file_type().is_symlink() => {
                        hops += 1;
                        if hops > MAX_SYMLINK_HOPS {
                            return Err(io::Error::other("too many levels of symbolic links"));
                        }
                        match fs::read_link(&next) {
                            Ok(to) => push_front(&mut pending, &to),
                            // No longer a link (swapped meanwhile): look
                            // at the name again; a swap in a loop runs out
                            // of hops like a link loop.
                            Err(e) if e.raw_os_error() == Some(nix::libc::EINVAL) => {
                                pending.push_front(part)
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(_) => out = next,
                    Err(e) if is_missing(&e) => {
                        missing = true;
                        out = next;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(out)
}

/// Not there: absent, or under something that is not a folder.
fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

fn push_front(pending: &mut VecDeque<OsString>, path: &Path) {
    for c in path.components().rev() {
        match c {
            Component::RootDir => pending.push_front("/".into()),
            Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => pending.push_front("..".into()),
            Component::Normal(n) => pending.push_front(n.to_os_string()),
        }
    }
}

/// The closest ancestor of `path` that exists and is a directory.
pub fn nearest_existing_folder(path: &Path) -> PathBuf {
    let mut cur = path.parent();
    while let Some(dir) = cur {
        if dir.is_dir() {
            return dir.to_path_buf();
        }
        cur = dir.parent();
    }
    PathBuf::from("/")
}

/// The folders strictly between `root` and `path` (inside it), outermost
/// first: where a mount over `path` must be pinned so that no folder above
/// it can be renamed away (a mount point cannot be: `EBUSY`).
pub fn between(root: &Path, path: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .take_while(|d| *d != root && d.starts_with(root))
        .map(Path::to_path_buf)
        .collect();
    out.reverse();
    out
}

/// `not_found` for `target`, naming the nearest existing folder.
pub fn not_found(target: &Target) -> FlowError {
    // From the resolved path, so `a/../b` and links name a real folder.
    not_found_near(target, &nearest_existing_folder(&target.real))
}

/// `not_found` for `target`, naming `nearest`, the closest existing folder
/// wherever the path was looked up (the host, a container).
pub fn not_found_near(target: &Target, nearest: &Path) -> FlowError {
    FlowError::new(
        ErrorCode::NotFound,
        format!(
            "{} does not exist. The nearest existing folder is {}; list it with ls to see what it holds.",
            target.shown.display(),
            nearest.display()
        ),
    )
    .with("path", target.shown.display().to_string())
    .with("nearest", nearest.display().to_string())
}

/// `permission_denied` for a path that changed under the call: it now
/// leads through a symbolic link that was not there when the policy checked
/// it, so nothing was done to it.
pub fn changed(target: &Target) -> FlowError {
    FlowError::new(
        ErrorCode::PermissionDenied,
        format!(
            "{} changed while the call ran: the path the policy checked ({}) now leads through a symbolic link, \
             which sluice does not follow, so nothing was done to it. Look at it with ls, then retry the call.",
            target.shown.display(),
            target.real.display()
        ),
    )
    .with("path", target.shown.display().to_string())
    .with("checked", target.real.display().to_string())
}

/// `not_a_directory` for a path written with a trailing `/` that is a file.
pub fn not_a_folder(target: &Target) -> FlowError {
    FlowError::new(
        ErrorCode::NotADirectory,
        format!(
            "{}/ ends in a slash, so it names a folder, but it is a file. Drop the slash to name the file.",
            target.shown.display()
        ),
    )
    .with("path", target.shown.display().to_string())
}

/// Maps an I/O error on `target` to the flow error a caller can act on.
pub fn io_error(target: &Target, doing: &str, e: io::Error) -> FlowError {
    if super::checked::changed(&e) {
        return changed(target);
    }
    match e.kind() {
        io::ErrorKind::NotFound => not_found(target),
        io::ErrorKind::NotADirectory => FlowError::new(
            ErrorCode::NotADirectory,
            format!(
                "{}: a part of this path is a file, not a folder.",
                target.shown.display()
            ),
        )
        .with("path", target.shown.display().to_string()),
        _ => FlowError::new(
            ErrorCode::CommandFailed,
            format!("cannot {doing} {}: {e}", target.shown.display()),
        )
        .with("path", target.shown.display().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn the_folders_between_a_root_and_a_path_are_listed_outermost_first() {
        let between = |r: &str, p: &str| between(Path::new(r), Path::new(p));
        assert_eq!(
            between("/w", "/w/a/b/c.lua"),
            [PathBuf::from("/w/a"), PathBuf::from("/w/a/b")]
        );
        assert!(between("/w", "/w/.git").is_empty());
        assert!(between("/w", "/other/a/b").is_empty());
        assert!(between("/w", "/w").is_empty());
    }

    #[test]
    fn relative_paths_join_the_root_and_resolve_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir(root.join("real")).unwrap();
        symlink(root.join("real"), root.join("link")).unwrap();
        let t = resolve(&root, "path", "./link/new/../f.txt").unwrap();
        assert_eq!(t.shown, root.join("link/new/../f.txt"));
        assert_eq!(t.real, root.join("real/f.txt"));
    }

    #[test]
    fn dangling_link_resolves_to_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        symlink("sub/target.txt", root.join("dangling")).unwrap();
        let t = resolve(&root, "path", "dangling").unwrap();
        assert_eq!(t.real, root.join("sub/target.txt"));
    }

    #[test]
    fn link_loops_fail() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        symlink("b", root.join("a")).unwrap();
        symlink("a", root.join("b")).unwrap();
        assert_eq!(
            resolve(&root, "path", "a").unwrap_err().code,
            ErrorCode::CommandFailed
        );
    }

    #[test]
    fn empty_and_nul_paths_are_invalid_input_naming_the_field() {
        let e = resolve(Path::new("/"), "path", "").unwrap_err();
        assert_eq!(
            (e.code, &e.details["field"]),
            (ErrorCode::InvalidInput, &"path".into())
        );
        let e = resolve(Path::new("/"), "path", "a\0b").unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
    }

    #[test]
    fn nearest_folder_skips_missing_parents() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        assert_eq!(nearest_existing_folder(&root.join("x/y/z.txt")), root);
    }
}
