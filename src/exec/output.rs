//! Bounded output collectors and the private spill folder.
//!
//! A command can print gigabytes; the executor must not hold them in memory,
//! yet a caller that needs the whole stream must be able to get it. So each
//! stream keeps at most its budget in memory (the head and the tail, because
//! the start says what ran and the end says how it ended), and the moment the
//! stream overflows the budget, the complete stream so far and everything
//! after it go to a private file, up to a cap. Once the file is full (or
//! there is none), the bytes between head and tail need not pass through
//! memory: [`drain`] splices them away ([`splice`]).

mod splice;

pub(crate) use splice::{drain, Source};

use std::collections::VecDeque;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Default cap on one spill file: enough for any log a caller will page
/// through, small enough that a runaway command cannot fill the disk.
pub const DEFAULT_SPILL_CAP: u64 = 64 * 1024 * 1024;

/// One private folder (mode 0700) per workflow run holding the spill files of
/// its calls (mode 0600). It lives as long as the run, because results
/// returned to the script point into it; dropping it removes the folder unless
/// [`SpillDir::keep`] was called (the `--keep-spill` switch).
#[derive(Debug)]
pub struct SpillDir {
    path: PathBuf,
    keep: AtomicBool,
    next: AtomicU64,
}

impl SpillDir {
    /// Creates `<temp>/sluice-<run_id>-<pid>-<nanos>` with mode 0700.
    ///
    /// The folder is created with `create` (never `create_all` on the leaf),
    /// so a folder planted at that name by another user makes this fail
    /// instead of leaking output into it.
    pub fn create(run_id: &str) -> std::io::Result<SpillDir> {
        Self::create_in(&std::env::temp_dir(), run_id)
    }

    /// Like [`SpillDir::create`] under an explicit parent folder.
    pub fn create_in(parent: &Path, run_id: &str) -> std::io::Result<SpillDir> {
        let safe: String = run_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = parent.join(format!("sluice-{safe}-{}-{nanos}", std::process::id()));
        DirBuilder::new().mode(0o700).create(&path)?;
        Ok(SpillDir {
            path,
            keep: AtomicBool::new(false),
            next: AtomicU64::new(1),
        })
    }

    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Leave the folder and its files on disk when this owner is dropped.
    pub fn keep(&self) {
        self.keep.store(true, Ordering::Relaxed);
    }

    /// Opens a fresh 0600 file for one stream. `create_new` refuses to follow
    /// or reuse anything already at the name.
    fn open(&self, stream: &str) -> std::io::Result<(PathBuf, File)> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.path.join(format!("{n:04}-{stream}.log"));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        Ok((path, file))
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        if !self.keep.load(Ordering::Relaxed) {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Where a stream that overflowed its budget was written in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spill {
    pub path: PathBuf,
    /// Bytes in the file.
    pub bytes: u64,
    /// False when the stream was longer than the spill cap (the file holds
    /// its first `bytes` bytes) or a write failed.
    pub complete: bool,
}

/// One captured stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first bytes of the stream; the whole stream when nothing was dropped.
    pub head: Vec<u8>,
    /// The last bytes of the stream, empty unless bytes were dropped between.
    pub tail: Vec<u8>,
    /// Every byte the command wrote to this stream (as far as it was read).
    pub total_bytes: u64,
    /// Bytes between `head` and `tail` that are not in memory.
    pub dropped_bytes: u64,
    /// Present when the stream overflowed and a spill folder was given.
    pub spill: Option<Spill>,
    /// Why the spill file could not be written, when it could not.
    pub spill_error: Option<String>,
    /// Reading stopped at the grace deadline while a leftover process still
    /// held the pipe open, so the stream may be longer than `total_bytes`.
    pub cut_short: bool,
    /// Lines in the whole stream, counted as `str::lines` counts them (a
    /// final line without a newline counts; a trailing newline adds none),
    /// so a shaper can say how long the stream was after cutting it.
    /// Counted only for merged output (see [`super::Request::merge_output`]);
    /// 0 otherwise.
    pub lines: u64,
}

impl Captured {
    /// The whole stream, when every byte is in memory.
    #[cfg(test)]
    pub fn complete_bytes(&self) -> Option<&[u8]> {
        (self.dropped_bytes == 0 && !self.cut_short).then_some(&self.head[..])
    }
}

/// The live collector behind a [`Captured`]. Memory never exceeds `budget`
/// bytes of payload: before overflow the whole stream is kept (so the spill
/// file can start with it); after, `budget / 2` head bytes and the rest as a
/// rolling tail.
#[derive(Debug)]
pub(crate) struct Collector {
    name: &'static str,
    budget: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    overflowed: bool,
    dir: Option<std::sync::Arc<SpillDir>>,
    spill_cap: u64,
    file: Option<(PathBuf, File, u64)>,
    spill_error: Option<String>,
    cut_short: bool,
    /// Counting lines reads every byte again, which a gigabyte stream
    /// notices; only shapers that report line counts ask for it.
    count_lines: bool,
    newlines: u64,
    last_byte: u8,
}

impl Collector {
    /// Also count the stream's lines ([`Captured::lines`]).
    pub(crate) fn counting_lines(mut self) -> Self {
        self.count_lines = true;
        self
    }

    pub(crate) fn new(
        name: &'static str,
        budget: usize,
        dir: Option<std::sync::Arc<SpillDir>>,
        spill_cap: u64,
    ) -> Self {
        Collector {
            name,
            budget: budget.max(1),
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            overflowed: false,
            dir,
            spill_cap,
            file: None,
            spill_error: None,
            cut_short: false,
            count_lines: false,
            newlines: 0,
            last_byte: b'\n',
        }
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.total += data.len() as u64;
        if self.count_lines {
            self.newlines += memchr::memchr_iter(b'\n', data).count() as u64;
            self.last_byte = data[data.len() - 1];
        }
        if !self.overflowed {
            if self.head.len() + data.len() <= self.budget {
                self.head.extend_from_slice(data);
                return;
            }
            self.overflow(data);
            return;
        }
        self.spill_write(data);
        self.push_tail(data);
    }

    /// First overflow: start the spill file with everything seen so far, then
    /// shrink memory to head + tail.
    fn overflow(&mut self, data: &[u8]) {
        self.overflowed = true;
        if let Some(dir) = self.dir.clone() {
            match dir.open(self.name) {
                Ok((path, file)) => self.file = Some((path, file, 0)),
                Err(e) => self.spill_error = Some(e.to_string()),
            }
        }
        let seen = std::mem::take(&mut self.head);
        self.spill_write(&seen);
        self.spill_write(data);
        // The head is the stream's first bytes, which may reach into the
        // chunk that overflowed (one large write read in one go).
        let head_cap = self.budget / 2;
        let from_seen = head_cap.min(seen.len());
        let from_data = (head_cap - from_seen).min(data.len());
        let mut head = seen[..from_seen].to_vec();
        head.extend_from_slice(&data[..from_data]);
        self.head = head;
        self.push_tail(&seen[from_seen..]);
        self.push_tail(&data[from_data..]);
    }

    fn push_tail(&mut self, data: &[u8]) {
        let cap = self.tail_cap();
        if data.len() >= cap {
            self.tail.clear();
            self.tail.extend(&data[data.len() - cap..]);
            return;
        }
        let excess = (self.tail.len() + data.len()).saturating_sub(cap);
        self.tail.drain(..excess);
        self.tail.extend(data);
    }

    /// Appends to the spill file up to the cap. This is a blocking write on
    /// the async reader; spill files live in the temp folder (page cache), and
    /// a stream only pays it after overflowing its budget.
    fn spill_write(&mut self, data: &[u8]) {
        let Some((_, file, written)) = self.file.as_mut() else {
            return;
        };
        let room = self.spill_cap.saturating_sub(*written) as usize;
        let n = room.min(data.len());
        if n == 0 {
            return;
        }
        match file.write_all(&data[..n]) {
            Ok(()) => *written += n as u64,
            Err(e) => self.spill_failed(&e),
        }
    }

    /// A write to the spill file failed: it keeps what it has (`complete`
    /// will say it is short) and takes nothing more.
    fn spill_failed(&mut self, e: &std::io::Error) {
        self.spill_error = Some(e.to_string());
        if let Some((_, _, written)) = &self.file {
            self.spill_cap = *written;
        }
    }

    /// Whether the next bytes must pass through memory: before the
    /// overflow (the head is made of them), while lines are counted, and
    /// while the spill file takes more (it is written from what is read).
    /// Otherwise [`drain`] may move bytes without reading them, as long as
    /// the stream's last bytes pass ([`Self::tail_cap`]).
    pub(crate) fn needs_bytes(&self) -> bool {
        !self.overflowed || self.count_lines || self.spill_takes_more()
    }

    /// Whether the stream has outgrown its budget (head and tail settled).
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// The spill file has room, and no write to it failed.
    fn spill_takes_more(&self) -> bool {
        let Some((_, _, written)) = &self.file else {
            return false;
        };
        *written < self.spill_cap && self.spill_error.is_none()
    }

    /// Whether lines are counted ([`Collector::counting_lines`]).
    pub(crate) fn counts_lines(&self) -> bool {
        self.count_lines
    }

    /// `n` bytes that were discarded unread (the spill file, if any, is
    /// full): counted, never kept. The caller reads at least
    /// [`Self::tail_cap`] bytes after them when the stream has them, which
    /// refill the tail; until then the tail is empty rather than holding
    /// bytes from before the gap, so head, tail and `dropped_bytes` stay
    /// true of the stream even when reading stops early.
    pub(crate) fn skipped(&mut self, n: u64) {
        self.total += n;
        self.tail.clear();
    }

    /// How many of the stream's last bytes the tail keeps.
    pub(crate) fn tail_cap(&self) -> usize {
        self.budget - self.budget / 2
    }

    /// The spill file, once the stream has overflowed into one.
    pub(crate) fn spill_path(&self) -> Option<&Path> {
        self.file.as_ref().map(|(path, _, _)| path.as_path())
    }

    pub(crate) fn mark_cut_short(&mut self) {
        self.cut_short = true;
    }

    pub(crate) fn finish(self) -> Captured {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let spill = self.file.map(|(path, _file, bytes)| Spill {
            path,
            bytes,
            complete: bytes == self.total,
        });
        Captured {
            dropped_bytes: self.total - kept,
            head: self.head,
            tail: self.tail.into_iter().collect(),
            total_bytes: self.total,
            spill,
            spill_error: self.spill_error,
            cut_short: self.cut_short,
            lines: self.newlines + u64::from(self.last_byte != b'\n'),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    #[test]
    fn under_budget_keeps_everything() {
        let mut c = Collector::new("stdout", 10, None, 100);
        c.push(b"hello");
        c.push(b"world");
        let cap = c.finish();
        assert_eq!(cap.complete_bytes(), Some(&b"helloworld"[..]));
        assert_eq!(cap.dropped_bytes, 0);
        assert!(cap.spill.is_none());
    }

    #[test]
    fn overflow_keeps_head_and_tail_and_spills_whole_stream() {
        let parent = tempfile::tempdir().unwrap();
        let dir = Arc::new(SpillDir::create_in(parent.path(), "t/1").unwrap());
        let mut c = Collector::new("stdout", 8, Some(dir.clone()), 1000);
        for chunk in [&b"abcdef"[..], b"ghij", b"klmnop"] {
            c.push(chunk);
        }
        let cap = c.finish();
        assert_eq!(cap.head, b"abcd");
        assert_eq!(cap.tail, b"mnop");
        assert_eq!(cap.total_bytes, 16);
        assert_eq!(cap.dropped_bytes, 8);
        assert!(cap.complete_bytes().is_none());
        let spill = cap.spill.unwrap();
        assert!(spill.complete);
        assert_eq!(std::fs::read(&spill.path).unwrap(), b"abcdefghijklmnop");
        let mode = std::fs::metadata(&spill.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dmode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(dmode & 0o777, 0o700);
        assert!(!dir
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .contains('/'));
    }

    #[test]
    fn one_chunk_past_the_budget_keeps_its_first_bytes_as_the_head() {
        let mut c = Collector::new("stdout", 8, None, 100);
        c.push(b"ab");
        c.push(b"cdefghijklmnop");
        let cap = c.finish();
        assert_eq!(cap.head, b"abcd");
        assert_eq!(cap.tail, b"mnop");
        assert_eq!(cap.dropped_bytes, 8);
        let mut c = Collector::new("stdout", 8, None, 100);
        c.push(b"abcdefghij");
        let cap = c.finish();
        assert_eq!((&cap.head[..], &cap.tail[..]), (&b"abcd"[..], &b"ghij"[..]));
        assert_eq!(cap.dropped_bytes, 2);
    }

    #[test]
    fn spill_stops_at_cap() {
        let parent = tempfile::tempdir().unwrap();
        let dir = Arc::new(SpillDir::create_in(parent.path(), "cap").unwrap());
        let mut c = Collector::new("stderr", 4, Some(dir), 10);
        c.push(&[b'x'; 25]);
        let cap = c.finish();
        let spill = cap.spill.unwrap();
        assert_eq!(spill.bytes, 10);
        assert!(!spill.complete);
        assert_eq!(cap.total_bytes, 25);
    }

    #[test]
    fn spill_dir_removed_on_drop_unless_kept() {
        let parent = tempfile::tempdir().unwrap();
        let gone = SpillDir::create_in(parent.path(), "a").unwrap();
        let gone_path = gone.path().to_path_buf();
        drop(gone);
        assert!(!gone_path.exists());
        let kept = SpillDir::create_in(parent.path(), "b").unwrap();
        kept.keep();
        let kept_path = kept.path().to_path_buf();
        drop(kept);
        assert!(kept_path.is_dir());
    }
}
