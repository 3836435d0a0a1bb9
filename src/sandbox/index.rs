//! What the workspace trees hold that a mount must know of at spawn: the
//! paths a deny glob matches (`**/.env`), which the command must not see,
//! and every repository (`.git` folder or file), whose control files stay
//! read-only and whose appearance after a command is undone.
//!
//! A run scans the same trees before and after every command, so the scan
//! is kept: each folder's entries are remembered with its change time
//! (`ctime`, which a command cannot set back as it can `mtime`), and only
//! folders whose change time moved are read again. A folder changed in the
//! last moments before a scan is read again next time too, since a second
//! change within the clock's granularity would leave its time as it was.
//!
//! A scan is bounded in entries and time; past the bound it stops, and the
//! profile's enforcement is partial, saying so.

use crate::kernel::pattern::Pattern;
use crate::kernel::{Action, Capability};
use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// At most this many entries are read from disk in one scan (folders
/// remembered unchanged cost a `stat` each, not a read).
pub const MAX_ENTRIES: usize = 200_000;
/// At most this many folders are visited in one scan.
pub const MAX_DIRS: usize = 100_000;
/// A scan stops after this long.
pub const MAX_TIME: Duration = Duration::from_millis(500);
/// A folder whose change time is this close to the scan is read again at
/// the next scan.
const RACY: Duration = Duration::from_millis(50);

/// A name no real file has, to ask whether a glob covers a folder whole.
const PROBE: &str = ".sluice-sandbox-probe";

/// What a scan of the workspace trees found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// Paths a deny glob on reads matches (a folder whose contents it
    /// matches whole counts as one path), none inside another.
    pub hidden: Vec<PathBuf>,
    /// Paths a deny glob on writes alone matches, the same way.
    pub kept: Vec<PathBuf>,
    /// Every repository: each `.git` entry (folder or file), and each
    /// folder shaped as git's own (`HEAD`, `objects/`, `refs/`), which git
    /// takes for a bare repository when a command starts in it; sorted.
    pub repos: Vec<PathBuf>,
    /// Why the scan is incomplete: it stopped at a bound.
    pub incomplete: Option<String>,
}

/// The remembered folders of one run's trees.
#[derive(Debug, Default)]
pub struct Index {
    dirs: HashMap<PathBuf, Dir>,
}

#[derive(Debug)]
struct Dir {
    changed: (i64, i64),
    /// Read again at the next scan whatever its change time says.
    racy: bool,
    /// The globs its matches were computed for.
    globs: String,
    /// Laid out as a git directory.
    bare: bool,
    /// The entries a scan looks at again: folders, `.git`, and what a
    /// glob matches (files that are none of these are not kept).
    entries: Vec<Entry>,
}

#[derive(Debug, Clone)]
struct Entry {
    name: OsString,
    kind: Kind,
    /// A deny glob on reads matches it (or, for a folder, everything
    /// inside it).
    hidden: bool,
    /// A deny glob on writes alone matches it, so.
    kept: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    /// Files, links, sockets: never followed.
    Other,
}

impl Index {
    /// Scans `roots` (folders; missing ones are skipped), matching each
    /// path against `globs`: a glob that selects `fs:read` hides, one that
    /// selects only `fs:write` keeps read-only. Does not go into `skip`
    /// (paths hidden already) or into repositories' `.git` folders.
    pub fn scan(&mut self, roots: &[PathBuf], globs: &[Pattern], skip: &[PathBuf]) -> Found {
        let key: Vec<&str> = globs.iter().map(Pattern::as_str).collect();
        let mut walk = Walk {
            globs,
            key: key.join("\n"),
            found: Found::default(),
            seen: 0,
            dirs: 0,
            started: Instant::now(),
            now: SystemTime::now(),
        };
        let mut todo: Vec<PathBuf> = roots.to_vec();
        let mut live: Vec<PathBuf> = Vec::new();
        while let Some(dir) = todo.pop() {
            if let Some(why) = walk.bound() {
                walk.found.incomplete = Some(why);
                break;
            }
            let Some(((entries, bare), fresh)) = self.read(&dir, &walk) else {
                continue;
            };
            live.push(dir.clone());
            walk.dirs += 1;
            if let Some(count) = fresh {
                walk.seen += count;
            }
            if bare {
                walk.found.repos.push(dir.clone());
            }
            for e in entries {
                let path = dir.join(&e.name);
                if e.name == ".git" {
                    walk.found.repos.push(path.clone());
                }
                if e.hidden {
                    walk.found.hidden.push(path);
                    continue;
                }
                if e.kept {
                    walk.found.kept.push(path.clone());
                }
                if e.kind == Kind::Dir && e.name != ".git" && !skip.contains(&path) {
                    todo.push(path);
                }
            }
        }
        if walk.found.incomplete.is_none() {
            // Forget folders that are gone, so the index does not grow for
            // ever over a long run that makes and removes trees.
            let live: std::collections::HashSet<PathBuf> = live.into_iter().collect();
            self.dirs
                .retain(|d, _| live.contains(d) || !roots.iter().any(|r| d.starts_with(r)));
        }
        walk.found.hidden = super::outermost(walk.found.hidden);
        walk.found.kept = super::outermost(walk.found.kept);
        walk.found.repos.sort();
        walk.found
    }

    /// The entries of `dir` a scan looks at, and whether it is laid out as
    /// a git directory; from memory when it has not changed, else with how
    /// many entries were read from disk.
    #[allow(clippy::type_complexity)]
    fn read(&mut self, dir: &Path, walk: &Walk) -> Option<((Vec<Entry>, bool), Option<usize>)> {
        let meta = std::fs::symlink_metadata(dir).ok()?;
        if !meta.is_dir() {
            return None;
        }
        let changed = (meta.ctime(), meta.ctime_nsec());
        if let Some(known) = self.dirs.get(dir) {
            if known.changed == changed && !known.racy && known.globs == walk.key {
                return Some(((known.entries.clone(), known.bare), None));
            }
        }
        let all: Vec<Entry> = std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| {
                let kind = match e.file_type() {
                    Ok(t) if t.is_dir() => Kind::Dir,
                    _ => Kind::Other,
                };
                let path = e.path();
                Entry {
                    name: e.file_name(),
                    kind,
                    hidden: walk.matches(&path, kind, Action::FsRead),
                    kept: walk.matches(&path, kind, Action::FsWrite),
                }
            })
            .collect();
        let (count, bare) = (all.len(), bare(&all));
        let entries: Vec<Entry> = all
            .into_iter()
            .filter(|e| e.kind == Kind::Dir || e.hidden || e.kept || e.name == ".git")
            .collect();
        self.dirs.insert(
            dir.to_path_buf(),
            Dir {
                changed,
                racy: walk.racy(changed),
                globs: walk.key.clone(),
                bare,
                entries: entries.clone(),
            },
        );
        Some(((entries, bare), Some(count)))
    }
}

/// Whether one of `globs` matches `path` for `action`, or, for a folder
/// (`dir`), all it holds: what a scan asks of each entry, and a caller of a
/// tree's root, which a scan takes as given.
pub fn matches(globs: &[Pattern], path: &Path, dir: bool, action: Action) -> bool {
    let hit = |p: &Path| {
        let cap = Capability::fs(action, p);
        globs.iter().any(|g| g.matches(&cap))
    };
    hit(path) || (dir && hit(&path.join(PROBE)))
}

/// Whether a folder holding `entries` is laid out as a git directory.
fn bare(entries: &[Entry]) -> bool {
    let has = |name: &str, kind: Kind| entries.iter().any(|e| e.name == name && e.kind == kind);
    has("HEAD", Kind::Other) && has("objects", Kind::Dir) && has("refs", Kind::Dir)
}

/// One scan in progress.
struct Walk<'a> {
    globs: &'a [Pattern],
    key: String,
    found: Found,
    seen: usize,
    dirs: usize,
    started: Instant,
    now: SystemTime,
}

impl Walk<'_> {
    fn bound(&self) -> Option<String> {
        if self.seen > MAX_ENTRIES || self.dirs > MAX_DIRS {
            return Some(format!(
                "the workspace trees hold more than {MAX_ENTRIES} new entries or {MAX_DIRS} folders, so they were \
                 searched only in part (what was read is remembered: a later command goes further)"
            ));
        }
        let spent = self.started.elapsed();
        (spent > MAX_TIME).then(|| {
            format!(
                "searching the workspace trees took longer than {} ms, so they were searched only in part",
                MAX_TIME.as_millis()
            )
        })
    }

    /// Whether a glob matches `path` for `action`, or, for a folder, all
    /// it holds.
    fn matches(&self, path: &Path, kind: Kind, action: Action) -> bool {
        matches(self.globs, path, kind == Kind::Dir, action)
    }

    fn racy(&self, (secs, nanos): (i64, i64)) -> bool {
        let changed =
            UNIX_EPOCH + Duration::new(secs.max(0) as u64, nanos.clamp(0, 999_999_999) as u32);
        match self.now.duration_since(changed) {
            Ok(age) => age < RACY,
            Err(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::pattern::Vars;

    fn glob(text: &str, ws: &Path) -> Pattern {
        Pattern::parse(text, &Vars::new(ws.to_path_buf())).unwrap()
    }

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(t.path()).unwrap();
        for d in [
            "a/b",
            "c",
            "repo/.git/objects",
            "n/.env.d",
            "bare/objects",
            "bare/refs",
        ] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        for f in [
            ".env",
            "a/b/.env",
            "a/x.txt",
            "c/.git",
            "n/.env.d/k",
            "bare/HEAD",
        ] {
            std::fs::write(ws.join(f), "s").unwrap();
        }
        (t, ws)
    }

    #[test]
    fn a_scan_finds_what_a_glob_hides_and_every_repository() {
        let (_t, ws) = tree();
        let globs = [glob("fs:*:**/.env", &ws), glob("fs:read:**/.env.d/**", &ws)];
        let found = Index::default().scan(std::slice::from_ref(&ws), &globs, &[]);
        assert_eq!(
            found.hidden,
            vec![ws.join(".env"), ws.join("a/b/.env"), ws.join("n/.env.d")]
        );
        assert_eq!(
            found.repos,
            vec![ws.join("bare"), ws.join("c/.git"), ws.join("repo/.git")]
        );
        assert_eq!(found.incomplete, None);
    }

    #[test]
    fn a_new_match_is_found_by_the_next_scan_even_within_the_clock_granularity() {
        let (_t, ws) = tree();
        let globs = [glob("fs:*:**/.env", &ws)];
        let mut index = Index::default();
        let first = index.scan(std::slice::from_ref(&ws), &globs, &[]);
        std::fs::write(ws.join("c/.env"), "s").unwrap();
        let second = index.scan(std::slice::from_ref(&ws), &globs, &[]);
        assert!(!first.hidden.contains(&ws.join("c/.env")));
        assert!(second.hidden.contains(&ws.join("c/.env")), "{second:?}");
    }

    #[test]
    fn an_unchanged_tree_is_answered_from_memory() {
        let (_t, ws) = tree();
        let globs = [glob("fs:*:**/.env", &ws)];
        let mut index = Index::default();
        let first = index.scan(std::slice::from_ref(&ws), &globs, &[]);
        std::thread::sleep(RACY * 2);
        index.scan(std::slice::from_ref(&ws), &globs, &[]);
        assert!(index.dirs.values().all(|d| !d.racy));
        // A file put in behind the index's back, with the folder's times
        // forged back, is still seen: ctime cannot be forged.
        let dir = ws.join("a");
        let before = std::fs::metadata(&dir).unwrap();
        std::fs::write(dir.join(".env"), "s").unwrap();
        let times = std::fs::FileTimes::new().set_modified(before.modified().unwrap());
        std::fs::File::open(&dir).unwrap().set_times(times).unwrap();
        let third = index.scan(std::slice::from_ref(&ws), &globs, &[]);
        assert!(third.hidden.contains(&dir.join(".env")));
        assert_eq!(first.repos, third.repos);
    }

    #[test]
    fn paths_already_hidden_are_not_searched() {
        let (_t, ws) = tree();
        let globs = [glob("fs:*:**/.env", &ws)];
        let found = Index::default().scan(std::slice::from_ref(&ws), &globs, &[ws.join("a")]);
        assert!(!found.hidden.contains(&ws.join("a/b/.env")));
    }
}
