//! The ignore files of a walk, read by descriptor: `.ignore`, `.gitignore`
//! and `.git/info/exclude` of each folder, matched as ripgrep's walker (the
//! `ignore` crate) matches them with `require_git(false)` and no parents:
//! for a path, the innermost folder's file of each kind that says anything
//! decides for that kind, and the kinds rank `.ignore` over `.gitignore`
//! over `exclude`.
//!
//! A file is read only through the folder's descriptor, without following
//! a link, and only when it is a regular file of at most [`MAX_IGNORE_BYTES`]:
//! anything else (a FIFO would hang the walk, a link to `/dev/zero` exhaust
//! it, a link anywhere read a file no rule granted) makes the folder
//! [`Hostile`], and the walk leaves it out, saying so.

use crate::fsops::checked::{Folder, Kind};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use std::ffi::OsStr;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The largest ignore file read.
pub(crate) const MAX_IGNORE_BYTES: u64 = 1 << 20;

/// An ignore file the walk must not read, by its path.
#[derive(Debug)]
pub(crate) struct Hostile(pub PathBuf);

/// The ignore files of one folder and of the folders above it (up to the
/// root of the walk).
#[derive(Debug, Default)]
pub(crate) struct Layer {
    ignore: Option<Gitignore>,
    gitignore: Option<Gitignore>,
    exclude: Option<Gitignore>,
    parent: Option<Arc<Layer>>,
}

impl Layer {
    /// Whether the ignore files say to leave out `path` (in a folder at or
    /// below this layer's), keep it despite a broader rule, or nothing.
    pub fn matched(&self, path: &Path, is_dir: bool) -> Match<()> {
        let (mut ignore, mut gitignore, mut exclude) = (Match::None, Match::None, Match::None);
        let mut at = Some(self);
        while let Some(layer) = at {
            for (slot, matcher) in [
                (&mut ignore, &layer.ignore),
                (&mut gitignore, &layer.gitignore),
                (&mut exclude, &layer.exclude),
            ] {
                if let (true, Some(m)) = (slot.is_none(), matcher) {
                    *slot = m.matched(path, is_dir).map(|_| ());
                }
            }
            at = layer.parent.as_deref();
        }
        ignore.or(gitignore).or(exclude)
    }

    /// The layer of folder `dir` (at `path`) below `parent`, from the
    /// ignore files among its `entries`; `parent` itself when it has none.
    pub fn of(
        parent: &Arc<Layer>,
        dir: &Folder,
        path: &Path,
        entries: &[crate::fsops::checked::Entry],
    ) -> Result<Arc<Layer>, Hostile> {
        let (mut has_ignore, mut has_gitignore, mut has_git) = (false, false, false);
        for e in entries {
            match e.name.as_encoded_bytes() {
                b".ignore" => has_ignore = true,
                b".gitignore" => has_gitignore = true,
                b".git" => has_git = e.kind == Kind::Dir,
                _ => {}
            }
        }
        let read = |name: &str| matcher(path, path, dir, OsStr::new(name));
        let ignore = if has_ignore { read(".ignore")? } else { None };
        let gitignore = if has_gitignore {
            read(".gitignore")?
        } else {
            None
        };
        let exclude = if has_git {
            exclude_of(dir, path)?
        } else {
            None
        };
        if ignore.is_none() && gitignore.is_none() && exclude.is_none() {
            return Ok(parent.clone());
        }
        Ok(Arc::new(Layer {
            ignore,
            gitignore,
            exclude,
            parent: Some(parent.clone()),
        }))
    }
}

/// `.git/info/exclude` of folder `dir` at `path`, when `.git` and `info`
/// are folders (not links) and it is there.
fn exclude_of(dir: &Folder, path: &Path) -> Result<Option<Gitignore>, Hostile> {
    let info = dir
        .folder(OsStr::new(".git"))
        .and_then(|git| git.folder(OsStr::new("info")));
    let Ok(info) = info else {
        return Ok(None);
    };
    let shown = path.join(".git/info");
    matcher(path, &shown, &info, OsStr::new("exclude"))
}

/// The matcher of ignore file `name` in folder `dir` (at `at`), for paths
/// under `root`; `None` when it is missing or says nothing.
fn matcher(
    root: &Path,
    at: &Path,
    dir: &Folder,
    name: &OsStr,
) -> Result<Option<Gitignore>, Hostile> {
    let file = at.join(name);
    let bytes = match read_small(dir, name) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(()) => return Err(Hostile(file)),
    };
    let mut builder = GitignoreBuilder::new(root);
    add_lines(&mut builder, &file, &bytes);
    Ok(builder.build().ok().filter(|gi| !gi.is_empty()))
}

/// The bytes of `name` in `dir`: `None` when it is not there; `Err` when it
/// is not a regular file of at most [`MAX_IGNORE_BYTES`] (a link included).
pub(crate) fn read_small(dir: &Folder, name: &OsStr) -> Result<Option<Vec<u8>>, ()> {
    let mut file = match dir.open_read(name) {
        Ok(f) => f,
        // As ripgrep: a file that cannot be read adds no rules.
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::PermissionDenied) => {
            return Ok(None)
        }
        Err(_) => return Err(()),
    };
    let meta = file.metadata().map_err(drop)?;
    if !meta.is_file() || meta.len() > MAX_IGNORE_BYTES {
        return Err(());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.by_ref()
        .take(MAX_IGNORE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(drop)?;
    Ok(Some(bytes))
}

/// Adds the lines of ignore file `file` as ripgrep reads them: a leading
/// byte-order mark dropped, `\r\n` and `\n` both ending a line, a line
/// that is not UTF-8 or does not parse skipped.
pub(crate) fn add_lines(builder: &mut GitignoreBuilder, file: &Path, bytes: &[u8]) {
    let mut lines = bytes.split(|&b| b == b'\n').peekable();
    let mut first = true;
    while let Some(line) = lines.next() {
        // A final `\n` ends the last line; it does not start an empty one.
        if line.is_empty() && lines.peek().is_none() {
            break;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Ok(mut line) = std::str::from_utf8(line) else {
            first = false;
            continue;
        };
        if first {
            line = line.trim_start_matches('\u{feff}');
            first = false;
        }
        let _ = builder.add_line(Some(file.to_path_buf()), line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gi(root: &str, text: &str) -> Gitignore {
        let mut b = GitignoreBuilder::new(root);
        add_lines(&mut b, Path::new("/r/.gitignore"), text.as_bytes());
        b.build().unwrap()
    }

    #[test]
    fn lines_end_at_crlf_and_lf_and_a_bom_is_dropped() {
        let g = gi("/r", "\u{feff}*.log\r\nbuild/\n!keep.log\n");
        assert!(g.matched("/r/a.log", false).is_ignore());
        assert!(g.matched("/r/keep.log", false).is_whitelist());
        assert!(g.matched("/r/build", true).is_ignore());
        assert!(g.matched("/r/a.txt", false).is_none());
    }

    #[test]
    fn the_innermost_file_of_a_kind_decides_and_ignore_outranks_gitignore() {
        let outer = Arc::new(Layer {
            gitignore: Some(gi("/r", "*.log\n")),
            ..Layer::default()
        });
        let inner = Layer {
            gitignore: Some(gi("/r/sub", "!keep.log\n")),
            parent: Some(outer.clone()),
            ..Layer::default()
        };
        assert!(inner.matched(Path::new("/r/sub/a.log"), false).is_ignore());
        assert!(inner
            .matched(Path::new("/r/sub/keep.log"), false)
            .is_whitelist());
        let ranked = Layer {
            ignore: Some(gi("/r/sub", "!a.log\n")),
            parent: Some(outer),
            ..Layer::default()
        };
        assert!(ranked
            .matched(Path::new("/r/sub/a.log"), false)
            .is_whitelist());
    }
}
