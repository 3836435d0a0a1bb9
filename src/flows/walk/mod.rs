//! The tree walker `glob` and `grep` share: a parallel walk of the
//! workspace that honours `.gitignore`, skips what the policy denies
//! (`fs:read:**/.env`) and what cannot be read, and says what it left out.

use super::deadline::Deadline;
use super::field;
use super::Context;

mod descend;
mod ignores;
use crate::fsops::checked::Folder;
use crate::fsops::path::canonical_lenient;
use crate::fsops::Target;
use crate::kernel::gate::Authority;
use crate::kernel::{Action, Capability};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::Override;
use serde_json::Value;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

/// Unreadable paths a notice names before it summarises the rest.
const NAMED_UNREADABLE: usize = 5;

/// How long the calling side waits for the next message before it looks
/// at the deadline again.
pub(crate) const TICK: Duration = Duration::from_millis(20);

/// What the walker (and grep's searching) threads send the calling side:
/// tokio's channel, whose receiving end waits without blocking the run's
/// thread, which every task of the run shares, while the sending end is an
/// ordinary call from any thread.
pub(crate) fn inbox<T>() -> (UnboundedSender<T>, UnboundedReceiver<T>) {
    tokio::sync::mpsc::unbounded_channel()
}

/// Ends the threads of a walk at their next entry when the call waiting
/// for them goes away before they are done: a task cancelled mid-walk
/// drops the call where it waits, and nothing else would tell them. While
/// it lives the walk is a step in flight ([`Finishing`]): a stop request
/// lets it notice at its next tick and record its stopped outcome, where
/// the run's driver would otherwise drop it waiting, unrecorded.
///
/// [`Finishing`]: crate::interrupt::Finishing
pub(crate) struct Abandon<'a>(&'a Deadline, crate::interrupt::Finishing);

impl<'a> Abandon<'a> {
    /// The guard of a walk bounded by `deadline`.
    pub fn new(deadline: &'a Deadline) -> Abandon<'a> {
        Abandon(deadline, crate::interrupt::Finishing::start())
    }
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// What one wait on an [`inbox`] heard.
pub(crate) enum Heard<T> {
    /// The next message, in the order it was sent.
    Message(T),
    /// Nothing for a [`TICK`]: time to look at the deadline again.
    Quiet,
    /// Every sender hung up: the threads are done.
    Closed,
}

/// The next message of `rx`, waiting at most a [`TICK`] for it. The run's
/// other tasks get a turn first: the policy check of what a walk found
/// runs on the run's thread, and a walk hands over batches faster than a
/// tick, so without the turn it would keep the thread until it ended.
pub(crate) async fn hear<T>(rx: &mut UnboundedReceiver<T>) -> Heard<T> {
    tokio::task::yield_now().await;
    match rx.try_recv() {
        Ok(m) => return Heard::Message(m),
        Err(TryRecvError::Disconnected) => return Heard::Closed,
        Err(TryRecvError::Empty) => {}
    }
    match tokio::time::timeout(TICK, rx.recv()).await {
        Ok(Some(m)) => Heard::Message(m),
        Ok(None) => Heard::Closed,
        Err(_) => Heard::Quiet,
    }
}

/// `n` with a comma between each group of three digits.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A tree to walk: the root, the workspace paths are shown against, and the
/// filters of `hidden` and `noIgnore`. Shared by `glob` and `grep`.
pub(crate) struct Tree {
    pub target: Target,
    workspace: PathBuf,
    hidden: bool,
    no_ignore: bool,
}

/// What kind of thing a walk found, other than a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Symlink,
    /// A FIFO, a socket, a device.
    Other,
}

/// One path a walk found.
#[derive(Debug)]
pub(crate) struct Found {
    /// Absolute and canonical up to the last name (the walk follows no
    /// link), which a symlink's [`Kind`] may still point on from.
    pub path: PathBuf,
    /// As the output shows it: relative to the workspace when inside it.
    pub shown: String,
    pub kind: Kind,
    /// The folder it was listed in, held by descriptor (a host walk's): a
    /// search opens the file there, by name, never through a link.
    pub folder: Option<Folder>,
}

impl Found {
    /// The path relative to `root`, `/`-separated (the walk only yields
    /// UTF-8 names).
    pub fn rel<'a>(&'a self, root: &Path) -> &'a str {
        let rel = self.path.strip_prefix(root).unwrap_or(&self.path);
        rel.to_str().unwrap_or_default()
    }

    /// Whether the policy refuses reading it, judged on the path a symlink
    /// resolves to. Outside a call nothing is allowed.
    pub fn denied(&self, ctx: &Context) -> bool {
        if ctx.files_in().is_some() {
            // A container's path, named as its rules name it.
            return refused(ctx, &ctx.fs_name(&self.path));
        }
        let real;
        let path = if self.kind == Kind::Symlink {
            real = canonical_lenient(&self.path).unwrap_or_else(|_| self.path.clone());
            &real
        } else {
            &self.path
        };
        refused(ctx, path)
    }
}

/// Whether reading `path` is refused by the policy (never asking anyone).
pub(crate) fn refused(ctx: &Context, path: &Path) -> bool {
    // Not UTF-8: no policy can name it (the walk already skips such names).
    if path.to_str().is_none() {
        return true;
    }
    ctx.refuses(&Capability::fs(Action::FsRead, path))
}

/// What a walk, or a search over it, left out, and why.
#[derive(Debug, Default)]
pub(crate) struct Skipped {
    /// Paths the policy denies.
    pub denied: u64,
    /// Folders and files that could not be read.
    pub unreadable: u64,
    /// Names that are not UTF-8 or hold a control character.
    pub names: u64,
    /// Up to a few unreadable paths with their errors, for the notice.
    pub unreadable_examples: Vec<String>,
}

impl Skipped {
    pub fn add(&mut self, other: Skipped) {
        self.denied += other.denied;
        self.unreadable += other.unreadable;
        self.names += other.names;
        self.unreadable_examples.extend(other.unreadable_examples);
    }

    /// Counts an unreadable path, keeping the first few to name.
    pub fn unreadable_path(&mut self, what: String) {
        self.unreadable += 1;
        self.unreadable_examples.push(what);
        if self.unreadable_examples.len() > 4 * NAMED_UNREADABLE {
            self.unreadable_examples.sort();
            self.unreadable_examples.truncate(NAMED_UNREADABLE);
        }
    }

    /// Sentences for the notice, one per kind of skip that happened.
    pub fn notes(&mut self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.denied > 0 {
            notes.push(format!(
                "Skipped {} the policy denies reading.",
                plural(self.denied, "path")
            ));
        }
        if self.unreadable > 0 {
            self.unreadable_examples.sort();
            self.unreadable_examples.truncate(NAMED_UNREADABLE);
            let more = self.unreadable - self.unreadable_examples.len() as u64;
            let mut named = self.unreadable_examples.join("; ");
            if more > 0 {
                named.push_str(&format!("; and {more} more"));
            }
            notes.push(format!(
                "Skipped {} that could not be read ({named}).",
                plural(self.unreadable, "path")
            ));
        }
        if self.names > 0 {
            notes.push(format!(
                "Skipped {} whose name is not UTF-8 or holds a control character (with anything below it); rename it to reach it.",
                plural(self.names, "path")
            ));
        }
        notes
    }
}

/// `1 path`, `2 paths`.
pub(crate) fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{} {noun}s", thousands(n))
    }
}

/// Whether a name can be shown and named to the policy as it is: UTF-8,
/// without control characters.
pub(crate) fn fair_name(name: &std::ffi::OsStr) -> bool {
    name.to_str()
        .is_some_and(|s| !s.chars().any(char::is_control))
}

impl Tree {
    pub fn new(
        ctx: &Context,
        target: Target,
        hidden: Option<bool>,
        no_ignore: Option<bool>,
    ) -> Tree {
        // A sealed host shows the container's paths against its folder.
        let workspace = match (ctx.files_in(), ctx.containers.sealed_cwd()) {
            (Some(_), cwd) => PathBuf::from(cwd.unwrap_or("/")),
            (None, _) => ctx.workspace.clone(),
        };
        Tree {
            target,
            workspace,
            hidden: hidden.unwrap_or(false),
            no_ignore: no_ignore.unwrap_or(false),
        }
    }

    /// What a container's `find` listed under the root (its files, links
    /// and the rest; folders only hold them), filtered as the host walk
    /// filters each entry: `overrides` (grep's `globs`) first, then hidden
    /// names unless `hidden` or an override whitelists them, then `.git`
    /// and `.sluice` always, then unfair names, counted once for the
    /// folder that holds them. The container's ignore files are not read.
    pub fn found_in(
        &self,
        listing: &crate::container::files::Listing,
        overrides: Option<&Override>,
    ) -> (Vec<Found>, Skipped) {
        let mut skipped = Skipped::default();
        let mut verdicts: HashMap<PathBuf, bool> = HashMap::new();
        verdicts.insert(self.target.real.clone(), true);
        let mut dirs: Vec<&String> = listing.dirs.iter().collect();
        // Parents before children: a folder's verdict is its parent's first.
        dirs.sort_by_key(|d| d.len());
        for d in dirs {
            let path = PathBuf::from(d);
            let ok = self.admits(&path, true, overrides, &verdicts, &mut skipped);
            verdicts.insert(path, ok);
        }
        let mut out = Vec::new();
        let kinds = [
            (&listing.files, Kind::File),
            (&listing.links, Kind::Symlink),
            (&listing.other, Kind::Other),
        ];
        for (paths, kind) in kinds {
            for p in paths {
                let path = PathBuf::from(p);
                if !self.admits(&path, false, overrides, &verdicts, &mut skipped) {
                    continue;
                }
                let Some(shown) = self.show(&path) else {
                    skipped.names += 1;
                    continue;
                };
                out.push(Found {
                    path,
                    shown,
                    kind,
                    folder: None,
                });
            }
        }
        (out, skipped)
    }

    /// Whether the walk would yield (or, for a folder, enter) `path`, given
    /// the verdicts on the folders above it; counts an unfair name.
    fn admits(
        &self,
        path: &Path,
        is_dir: bool,
        overrides: Option<&Override>,
        verdicts: &HashMap<PathBuf, bool>,
        skipped: &mut Skipped,
    ) -> bool {
        if *path == self.target.real {
            return true;
        }
        let parent_ok = path
            .parent()
            .is_some_and(|p| verdicts.get(p).copied().unwrap_or(false));
        let Some(name) = path.file_name() else {
            return false;
        };
        if !parent_ok {
            return false;
        }
        let whitelisted = match overrides.map(|o| o.matched(path, is_dir)) {
            Some(ignore::Match::Ignore(_)) => return false,
            Some(ignore::Match::Whitelist(_)) => true,
            _ => false,
        };
        if !whitelisted && !self.hidden && name.to_string_lossy().starts_with('.') {
            return false;
        }
        if name == ".git" || name == ".sluice" {
            return false;
        }
        if !fair_name(name) {
            skipped.names += 1;
            return false;
        }
        true
    }

    /// How `path` (absolute, inside the root) is shown.
    fn show(&self, path: &Path) -> Option<String> {
        let shown = match path.strip_prefix(&self.workspace) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel,
            _ => path,
        };
        shown.to_str().map(str::to_string)
    }

    /// The ignore files of the folders between the workspace and the root
    /// (the workspace included, the root not), innermost first, each as one
    /// matcher; nothing when the root is not strictly inside the workspace.
    pub fn outer_ignores(&self, ctx: &Context) -> Vec<Gitignore> {
        let root = &self.target.real;
        if self.no_ignore || !root.starts_with(&self.workspace) || *root == self.workspace {
            return vec![];
        }
        let mut out = Vec::new();
        for dir in root.ancestors().skip(1) {
            if !dir.starts_with(&self.workspace) {
                break;
            }
            let mut builder = GitignoreBuilder::new(dir);
            let mut any = false;
            let Ok(folder) = Folder::open(dir) else {
                continue;
            };
            // Later lines win: `.ignore` over `.gitignore`, as inside the root.
            for name in [".gitignore", ".ignore"] {
                let file = dir.join(name);
                if refused(ctx, &file) {
                    continue;
                }
                // Read as the walk reads one: by the folder's descriptor, a
                // regular file of at most 1 MiB, never through a link.
                if let Ok(Some(bytes)) = ignores::read_small(&folder, OsStr::new(name)) {
                    // A bad line is skipped; the rest of the file counts.
                    ignores::add_lines(&mut builder, &file, &bytes);
                    any = true;
                }
            }
            if any {
                if let Ok(gi) = builder.build() {
                    if !gi.is_empty() {
                        out.push(gi);
                    }
                }
            }
        }
        out
    }

    /// Walks the tree on `walkers` threads, with `outer` from [`Tree::outer_ignores`],
    /// and hands `visit`, in batches, every path that is not a folder (the root itself, when it is a file), from several threads,
    /// in no particular order, until the walk ends or `deadline` passes. Returns what it skipped as unreadable or
    /// badly named; policy checks are the caller's, on its own thread. Folders are listed by descriptor, never
    /// through a link ([`descend`]).
    pub fn walk(
        &self,
        walkers: usize,
        outer: Vec<Gitignore>,
        overrides: Option<Override>,
        deadline: &Deadline,
        visit: impl Fn(Vec<Found>) + Sync,
    ) -> Skipped {
        let rules = descend::Rules {
            hidden: self.hidden,
            use_ignores: !self.no_ignore,
            outer,
            overrides,
        };
        descend::walk(self, walkers, rules, deadline, &visit)
    }

    fn hostile_note(&self, file: &Path) -> String {
        let shown = self
            .show(file)
            .unwrap_or_else(|| file.display().to_string());
        format!("{shown}: an ignore file that is not a regular file under 1 MiB; its folder was not searched")
    }
}

/// Paths a walker thread hands on at once: enough to spare the threads
/// waking each other for every file, few enough to keep them all busy.
const BATCH: usize = 32;

/// The cores this process may use (asked once: the answer reads cgroup
/// files).
pub(crate) fn threads() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The audit's one-line gist of an input: the pattern it looks for, and
/// where when it says: glob's and grep's, which walk the same trees.
pub fn summary(input: &Value) -> String {
    let Some(pattern) = input.get("pattern").and_then(Value::as_str) else {
        return input.to_string();
    };
    match input.get("root").and_then(Value::as_str) {
        Some(root) => format!("{pattern} in {root}"),
        None => pattern.to_string(),
    }
}

/// The output fields `glob` and `grep` share: what the walk skipped, by why.
pub(crate) fn skipped_fields() -> [(&'static str, Value); 3] {
    [
        ("skippedDenied", field("integer", "Paths the policy denies, left out and only counted here.")),
        ("skippedUnreadable", field("integer", "Entries that could not be read (no permission, vanished mid-walk); the notice names the first few.")),
        ("skippedNames", field("integer", "Names that are not UTF-8 or hold a control character, skipped with what is below them.")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// The calling side's loops end at `Closed`: it must come only after
    /// every message sent, each once and in order, however the sending
    /// thread races the waits; `Quiet` only once a tick passed empty.
    #[test]
    fn a_walk_s_inbox_hands_over_every_message_in_order_before_it_says_closed() {
        runtime().block_on(async {
            let (tx, mut rx) = inbox::<u32>();
            let t = std::time::Instant::now();
            assert!(matches!(hear(&mut rx).await, Heard::Quiet));
            assert!(t.elapsed() >= TICK);
            std::thread::spawn(move || (0..1000).for_each(|i| tx.send(i).unwrap()));
            let mut got = Vec::new();
            loop {
                match hear(&mut rx).await {
                    Heard::Message(m) => got.push(m),
                    Heard::Quiet => {}
                    Heard::Closed => break,
                }
            }
            assert_eq!(got, (0..1000).collect::<Vec<_>>());
        });
    }

    /// A message already waiting is not handed over before the run's other
    /// tasks had a turn: a walk's batches come faster than they are checked.
    #[test]
    fn hearing_a_waiting_message_gives_the_other_tasks_a_turn_first() {
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime(), async {
            let (tx, mut rx) = inbox::<u32>();
            tx.send(7).unwrap();
            let ran = std::rc::Rc::new(std::cell::Cell::new(false));
            let other = ran.clone();
            tokio::task::spawn_local(async move { other.set(true) });
            assert!(matches!(hear(&mut rx).await, Heard::Message(7)));
            assert!(ran.get(), "the other task had no turn");
        });
    }

    /// Dropping the call that waits on a walk stops the walk's threads:
    /// they see the deadline passed at their next entry.
    #[test]
    fn an_abandoned_walk_s_deadline_has_passed() {
        let deadline = Deadline::after(Some(60_000));
        let theirs = deadline.clone();
        assert!(!theirs.passed());
        drop(Abandon::new(&deadline));
        assert!(theirs.passed());
    }

    #[test]
    fn glob_thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn glob_fair_names_are_utf8_without_control_characters() {
        assert!(fair_name(OsStr::new("a b-ü.txt")));
        assert!(!fair_name(OsStr::new("a\nb")));
        assert!(!fair_name(OsStr::new("a\x1b[31mb")));
        assert!(!fair_name(OsStr::new("a\u{85}b")));
        assert!(!fair_name(OsStr::from_bytes(b"a\xffb")));
    }

    #[test]
    fn glob_skipped_notes_name_the_first_unreadable_paths() {
        let mut s = Skipped::default();
        for i in (0..30).rev() {
            s.unreadable_path(format!("d{i:02}: Permission denied"));
        }
        s.denied = 1;
        let notes = s.notes();
        assert_eq!(notes[0], "Skipped 1 path the policy denies reading.");
        assert_eq!(
            notes[1],
            "Skipped 30 paths that could not be read (d00: Permission denied; d01: Permission denied; \
             d02: Permission denied; d03: Permission denied; d04: Permission denied; and 25 more)."
        );
    }
}
