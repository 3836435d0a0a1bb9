//! The walk of a host tree, folder by folder, by descriptor: the root is
//! opened as the policy checked it (no link on its path), and every folder
//! below it is opened inside the folder that listed it, without following a
//! link. A folder swapped for a link while the walk runs is not entered (it
//! counts as unreadable, "changed"), so nothing outside the checked tree is
//! ever listed or searched, however the tree changes meanwhile. Each path
//! found carries the folder it was listed in, so a search opens it there.
//!
//! Folders wait in one stack shared by the walk's threads: a thread takes
//! the newest, lists it, and pushes the folders it holds. The walk ends when
//! the stack is empty and no thread is listing, or at the deadline.

use super::ignores::{Hostile, Layer};
use super::{fair_name, Found, Kind, Skipped, Tree, BATCH, TICK};
use crate::flows::deadline::Deadline;
use crate::fsops::checked::{self, Folder};
use ignore::gitignore::Gitignore;
use ignore::overrides::Override;
use ignore::Match;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

/// What leaves an entry out of a walk besides the policy: grep's `globs`,
/// the ignore files inside the root and between the workspace and the root,
/// hidden names.
pub(super) struct Rules {
    pub hidden: bool,
    pub use_ignores: bool,
    pub outer: Vec<Gitignore>,
    pub overrides: Option<Override>,
}

impl Rules {
    /// Whether the entry `name` at `path` is left out, the ignore files in
    /// force there being `layer`'s. As ripgrep ranks them: an override
    /// that matches decides; then the ignore files (a `!` rule keeps what
    /// the hidden rule would drop); then hidden names; an outer file's rule
    /// drops what the rest kept.
    fn leave_out(&self, layer: &Layer, path: &Path, name: &OsStr, is_dir: bool) -> bool {
        let mut kept = false;
        if let Some(o) = &self.overrides {
            match o.matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => kept = true,
                Match::None => {}
            }
        }
        if !kept && self.use_ignores {
            match layer.matched(path, is_dir) {
                Match::Ignore(()) => return true,
                Match::Whitelist(()) => kept = true,
                Match::None => {}
            }
        }
        if !kept && !self.hidden && name.as_encoded_bytes().starts_with(b".") {
            return true;
        }
        for gi in &self.outer {
            match gi.matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => break,
                Match::None => {}
            }
        }
        false
    }
}

/// A folder waiting to be listed.
struct Pending {
    open: Opening,
    path: PathBuf,
    /// The ignore files in force in the folder that holds it.
    layer: Arc<Layer>,
}

/// How a waiting folder is reached.
enum Opening {
    /// Already open: the root.
    Held(Folder),
    /// By its name inside the folder that listed it.
    Inside(Folder, OsString),
}

/// The folders waiting, and how many threads are listing one (and may
/// push more).
struct Queue {
    state: Mutex<(Vec<Pending>, usize)>,
    wake: Condvar,
}

impl Queue {
    /// The next folder to list, or `None` once the walk is over.
    fn next(&self, deadline: &Deadline) -> Option<Pending> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if deadline.passed() {
                self.wake.notify_all();
                return None;
            }
            if let Some(p) = state.0.pop() {
                state.1 += 1;
                return Some(p);
            }
            if state.1 == 0 {
                self.wake.notify_all();
                return None;
            }
            state = self
                .wake
                .wait_timeout(state, TICK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A folder listed, with the folders it holds.
    fn done(&self, found: Vec<Pending>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let more = !found.is_empty();
        state.0.extend(found);
        state.1 -= 1;
        if more || state.1 == 0 {
            self.wake.notify_all();
        }
    }
}

/// One walk in progress.
struct Walk<'a, F> {
    tree: &'a Tree,
    rules: Rules,
    deadline: &'a Deadline,
    queue: Queue,
    total: Mutex<Skipped>,
    visit: &'a F,
}

/// A walker thread's own batch and tally, handed on and merged into the
/// walk's when the thread ends.
struct Local<'a, F: Fn(Vec<Found>)> {
    skipped: Skipped,
    total: &'a Mutex<Skipped>,
    batch: Vec<Found>,
    visit: &'a F,
}

impl<F: Fn(Vec<Found>)> Local<'_, F> {
    fn push(&mut self, found: Found) {
        self.batch.push(found);
        if self.batch.len() == BATCH {
            (self.visit)(std::mem::replace(
                &mut self.batch,
                Vec::with_capacity(BATCH),
            ));
        }
    }
}

impl<F: Fn(Vec<Found>)> Drop for Local<'_, F> {
    fn drop(&mut self) {
        if !self.batch.is_empty() {
            (self.visit)(std::mem::take(&mut self.batch));
        }
        let mine = std::mem::take(&mut self.skipped);
        self.total
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(mine);
    }
}

/// Walks `tree` on `walkers` threads (see [`Tree::walk`]).
pub(super) fn walk<F: Fn(Vec<Found>) + Sync>(
    tree: &Tree,
    walkers: usize,
    rules: Rules,
    deadline: &Deadline,
    visit: &F,
) -> Skipped {
    let root = &tree.target.real;
    let mut skipped = Skipped::default();
    let meta = match checked::metadata(root) {
        Ok(m) => m,
        Err(e) => {
            skipped.unreadable_path(tree.unreadable(root, &e));
            return skipped;
        }
    };
    if !meta.is_dir() {
        visit_root_file(tree, meta, visit, &mut skipped);
        return skipped;
    }
    let folder = match Folder::open(root) {
        Ok(f) => f,
        Err(e) => {
            skipped.unreadable_path(tree.unreadable(root, &e));
            return skipped;
        }
    };
    let first = Pending {
        open: Opening::Held(folder),
        path: root.clone(),
        layer: Arc::new(Layer::default()),
    };
    let walk = Walk {
        tree,
        rules,
        deadline,
        queue: Queue {
            state: Mutex::new((vec![first], 0)),
            wake: Condvar::new(),
        },
        total: Mutex::new(skipped),
        visit,
    };
    if walkers <= 1 {
        walk.work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..walkers {
                s.spawn(|| walk.work());
            }
        });
    }
    walk.total.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// A root that is a file: the walk yields it alone.
fn visit_root_file<F: Fn(Vec<Found>)>(
    tree: &Tree,
    meta: std::fs::Metadata,
    visit: &F,
    skipped: &mut Skipped,
) {
    let path = tree.target.real.clone();
    let Some(shown) = tree.show(&path) else {
        skipped.names += 1;
        return;
    };
    let kind = if meta.is_file() {
        Kind::File
    } else {
        Kind::Other
    };
    let folder = Folder::parent(&path).ok().map(|(f, _)| f);
    visit(vec![Found {
        path,
        shown,
        kind,
        folder,
    }]);
}

impl<F: Fn(Vec<Found>) + Sync> Walk<'_, F> {
    /// One thread's share: folders from the stack until the walk is over.
    fn work(&self) {
        let mut mine = Local {
            skipped: Skipped::default(),
            total: &self.total,
            batch: Vec::with_capacity(BATCH),
            visit: self.visit,
        };
        while let Some(pending) = self.queue.next(self.deadline) {
            let below = self.list(pending, &mut mine);
            self.queue.done(below);
        }
    }

    /// Lists one folder: hands on what it holds that is not a folder, and
    /// returns the folders to list next.
    fn list(&self, p: Pending, mine: &mut Local<'_, F>) -> Vec<Pending> {
        let Some((dir, entries, layer)) = self.open(p.open, &p.path, p.layer, mine) else {
            return vec![];
        };
        let mut below = Vec::new();
        for entry in entries {
            if self.deadline.passed() {
                break;
            }
            let path = p.path.join(&entry.name);
            if let Some(folder) = self.take(entry, path, &dir, &layer, mine) {
                below.push(folder);
            }
        }
        below
    }

    /// A waiting folder opened (inside the one that listed it, never
    /// through a link), its entries and the ignore files in force in it;
    /// `None`, counted, when it cannot be read or holds a hostile ignore
    /// file.
    fn open(
        &self,
        open: Opening,
        path: &Path,
        above: Arc<Layer>,
        mine: &mut Local<'_, F>,
    ) -> Option<(Folder, Vec<checked::Entry>, Arc<Layer>)> {
        let unreadable = |mine: &mut Local<'_, F>, e: &io::Error| {
            mine.skipped.unreadable_path(self.tree.unreadable(path, e));
        };
        let dir = match open {
            Opening::Held(dir) => dir,
            Opening::Inside(parent, name) => match parent.folder(&name) {
                Ok(dir) => dir,
                Err(e) => {
                    unreadable(mine, &e);
                    return None;
                }
            },
        };
        let entries = match dir.entries() {
            Ok(entries) => entries,
            Err(e) => {
                unreadable(mine, &e);
                return None;
            }
        };
        if !self.rules.use_ignores {
            return Some((dir, entries, above));
        }
        match Layer::of(&above, &dir, path, &entries) {
            Ok(layer) => Some((dir, entries, layer)),
            Err(Hostile(file)) => {
                mine.skipped.unreadable_path(self.tree.hostile_note(&file));
                None
            }
        }
    }

    /// One entry of a folder being listed: left out (by a rule, as `.git`
    /// and `.sluice` always are, or by its name, counted), handed on, or,
    /// a folder, returned to be listed next.
    fn take(
        &self,
        entry: checked::Entry,
        path: PathBuf,
        dir: &Folder,
        layer: &Arc<Layer>,
        mine: &mut Local<'_, F>,
    ) -> Option<Pending> {
        let is_dir = entry.kind == checked::Kind::Dir;
        if self.rules.leave_out(layer, &path, &entry.name, is_dir) {
            return None;
        }
        // The repository's internals and sluice's audit store are never
        // part of a listing or a search.
        if entry.name == ".git" || entry.name == ".sluice" {
            return None;
        }
        if !fair_name(&entry.name) {
            mine.skipped.names += 1;
            return None;
        }
        if is_dir {
            return Some(Pending {
                open: Opening::Inside(dir.clone(), entry.name),
                path,
                layer: layer.clone(),
            });
        }
        let Some(shown) = self.tree.show(&path) else {
            mine.skipped.names += 1;
            return None;
        };
        let kind = match entry.kind {
            checked::Kind::File => Kind::File,
            checked::Kind::Symlink => Kind::Symlink,
            _ => Kind::Other,
        };
        mine.push(Found {
            path,
            shown,
            kind,
            folder: Some(dir.clone()),
        });
        None
    }
}

impl Tree {
    /// `shown path: reason` for a folder or file the walk could not read.
    fn unreadable(&self, path: &Path, e: &io::Error) -> String {
        let shown = self
            .show(path)
            .unwrap_or_else(|| path.display().to_string());
        if checked::changed(e) {
            return format!("{shown}: changed during the walk (a symbolic link now), not followed");
        }
        format!("{shown}: {e}")
    }
}
