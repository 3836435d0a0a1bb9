//! What a profile's derivation asks of the filesystem (where a path the
//! policy names really leads, and what is there), remembered for the run
//! where no command of it could have changed the answer.
//!
//! The policies name system trees by the dozen (`p.programs`), and finding
//! where each leads costs a `readlink` per component: hundreds of system
//! calls a command, for answers a run's commands cannot change. A command
//! changes only what it may write; so an answer is reused while no path its
//! resolution looked at lies in the workspace or in a tree some command of
//! the run was let write ([`Lookups::writable`]). A shared sandbox binds
//! the same trees for its whole life already: the memo adds no staleness a
//! run's own commands could bring about.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Where a path leads: its canonical form and what is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub real: PathBuf,
    pub dir: bool,
    pub file: bool,
}

/// One path's answer and every path its resolution looked at.
#[derive(Debug, Clone)]
struct Answer {
    found: Option<Found>,
    /// Whether the path itself is a symlink.
    link: bool,
    seen: Vec<PathBuf>,
}

/// A run's remembered answers, and the trees where answers cannot be kept.
#[derive(Debug, Default)]
pub struct Lookups {
    answers: HashMap<PathBuf, Answer>,
    /// Answers of the derivation under way, kept for it alone: one
    /// derivation asks of the workspace a dozen times.
    this_time: HashMap<PathBuf, Answer>,
    /// The workspace and every tree a command of the run was let write
    /// (outermost only): what lies there can change between calls.
    changing: Vec<PathBuf>,
    /// Off: every lookup asks the filesystem (a one-off derivation).
    keep: bool,
    /// How many times `changing` grew (and remembered answers went).
    epoch: u64,
}

/// What one derivation learned of changing trees: it still holds while
/// the same paths lead to the same places and no remembered answer went.
#[derive(Debug, Clone)]
pub struct Checks {
    epoch: u64,
    answers: Vec<(PathBuf, Option<Found>, bool)>,
}

impl Lookups {
    /// Lookups that remember nothing.
    pub fn fresh() -> Lookups {
        Lookups::default()
    }

    /// Lookups that remember what no command of the run can change.
    pub fn remembering() -> Lookups {
        Lookups {
            keep: true,
            ..Lookups::default()
        }
    }

    /// Starts a derivation: what it learns of changing trees is its own.
    pub fn begin(&mut self) {
        self.this_time.clear();
    }

    /// Notes trees a command may write (from now on, or did): answers
    /// resting on a path in them are asked again.
    pub fn writable(&mut self, trees: &[PathBuf]) {
        let mut grew = false;
        for tree in trees {
            if !self.changing.iter().any(|c| tree.starts_with(c)) {
                self.changing.retain(|c| !c.starts_with(tree));
                self.changing.push(tree.clone());
                grew = true;
            }
        }
        if grew {
            self.epoch += 1;
            let changing = std::mem::take(&mut self.changing);
            self.answers
                .retain(|_, a| !a.seen.iter().any(|s| under(s, &changing)));
            self.changing = changing;
        }
    }

    /// What the derivation under way learned of changing trees.
    pub fn checks(&self) -> Checks {
        Checks {
            epoch: self.epoch,
            answers: self
                .this_time
                .iter()
                .map(|(p, a)| (p.clone(), a.found.clone(), a.link))
                .collect(),
        }
    }

    /// Whether what `checks` learned still holds: a few lookups instead
    /// of a derivation.
    pub fn still(&self, checks: &Checks) -> bool {
        checks.epoch == self.epoch
            && checks.answers.iter().all(|(path, found, link)| {
                let now = resolve(path);
                now.found == *found && now.link == *link
            })
    }

    /// Where `path` leads, `None` when it leads nowhere.
    pub fn real(&mut self, path: &Path) -> Option<Found> {
        self.answer(path).found
    }

    /// Whether `path` is itself a symlink.
    pub fn is_link(&mut self, path: &Path) -> bool {
        self.answer(path).link
    }

    fn answer(&mut self, path: &Path) -> Answer {
        if let Some(known) = self.answers.get(path).or_else(|| self.this_time.get(path)) {
            return known.clone();
        }
        let answer = resolve(path);
        let lasting = !answer.seen.iter().any(|s| under(s, &self.changing));
        let keep = if self.keep && lasting {
            &mut self.answers
        } else {
            &mut self.this_time
        };
        keep.insert(path.to_path_buf(), answer.clone());
        answer
    }
}

fn under(path: &Path, trees: &[PathBuf]) -> bool {
    trees.iter().any(|t| path.starts_with(t))
}

/// Links followed before a path counts as leading nowhere (the kernel's
/// own limit).
const MAX_LINKS: usize = 40;

/// Resolves `path` component by component as the kernel would, noting
/// every path looked at on the way (the links and what they lead through).
fn resolve(path: &Path) -> Answer {
    let mut seen = Vec::new();
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink());
    let found = walk(path, &mut seen);
    Answer { found, link, seen }
}

fn walk(path: &Path, seen: &mut Vec<PathBuf>) -> Option<Found> {
    if !path.is_absolute() {
        return None;
    }
    let mut todo: Vec<OsString> = parts(path);
    todo.reverse();
    let mut at = PathBuf::from("/");
    let mut links = 0;
    // What `at` is: a folder, a file, or something else.
    let (mut dir, mut file) = (true, false);
    while let Some(part) = todo.pop() {
        if !dir {
            return None;
        }
        if part == ".." {
            // A folder's parent is a folder.
            at.pop();
            continue;
        }
        let next = at.join(&part);
        seen.push(next.clone());
        let meta = std::fs::symlink_metadata(&next).ok()?;
        if !meta.is_symlink() {
            at = next;
            (dir, file) = (meta.is_dir(), meta.is_file());
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return None;
        }
        let target = std::fs::read_link(&next).ok()?;
        if target.is_absolute() {
            at = PathBuf::from("/");
        }
        let mut more = parts(&target);
        more.reverse();
        todo.extend(more);
    }
    Some(Found {
        real: at,
        dir,
        file,
    })
}

/// The names in `path`, `..` kept (it is resolved against where the walk
/// is, as the kernel does), `.` and the root dropped.
fn parts(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn resolves_as_canonicalize_does_through_absolute_relative_and_parent_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::fs::write(root.join("a/b/c/f"), "x").unwrap();
        symlink(root.join("a/b"), root.join("abs")).unwrap();
        symlink("a/b/c", root.join("rel")).unwrap();
        symlink("../..", root.join("a/b/c/up")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        let mut look = Lookups::fresh();
        for p in [
            "abs/c/f",
            "rel/f",
            "rel/up/b/c",
            "a/b/../b/c",
            "abs",
            "rel/up",
        ] {
            let path = root.join(p);
            let want = std::fs::canonicalize(&path).unwrap();
            let got = look.real(&path).unwrap();
            assert_eq!(got.real, want, "{p}");
            assert_eq!(got.dir, want.is_dir(), "{p}");
            assert_eq!(got.file, want.is_file(), "{p}");
        }
        assert_eq!(look.real(&root.join("loop")), None);
        assert_eq!(look.real(&root.join("a/b/c/f/x")), None);
        assert_eq!(look.real(&root.join("nope")), None);
        assert!(look.is_link(&root.join("rel")));
        assert!(!look.is_link(&root.join("a")));
    }

    #[test]
    fn an_answer_resting_on_a_writable_tree_is_asked_again_after_a_command_changed_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (sys, ws) = (root.join("sys"), root.join("ws"));
        std::fs::create_dir_all(sys.join("lib")).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(root.join("secret")).unwrap();
        // A system path that leads through the workspace.
        symlink(ws.join("tool"), sys.join("tool")).unwrap();
        symlink(sys.join("lib"), ws.join("tool")).unwrap();
        let mut look = Lookups::remembering();
        look.writable(std::slice::from_ref(&ws));
        assert_eq!(look.real(&sys.join("tool")).unwrap().real, sys.join("lib"));
        assert_eq!(look.real(&sys.join("lib")).unwrap().real, sys.join("lib"));
        let checks = look.checks();
        assert!(look.still(&checks));
        // A command re-points the link it may write; the next derivation
        // begins.
        std::fs::remove_file(ws.join("tool")).unwrap();
        symlink(root.join("secret"), ws.join("tool")).unwrap();
        assert!(!look.still(&checks), "what a derivation rested on changed");
        look.begin();
        assert_eq!(
            look.real(&sys.join("tool")).unwrap().real,
            root.join("secret"),
            "a resolution through the workspace is never remembered"
        );
        // A path outside is remembered until a command may write there.
        std::fs::remove_dir(sys.join("lib")).unwrap();
        look.begin();
        assert!(look.real(&sys.join("lib")).is_some(), "remembered");
        let checks = look.checks();
        look.writable(std::slice::from_ref(&sys));
        assert!(!look.still(&checks), "a remembered answer went");
        assert_eq!(look.real(&sys.join("lib")), None, "asked again");
    }
}
