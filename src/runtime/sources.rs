//! The Lua source a run runs, as the record keeps it: the script's text
//! (read once, when the run is built, so the text recorded is the text
//! run) and each module its `require` loads from the script's folder,
//! recorded as it loads. A replay or resume of the recorded script loads
//! the recorded texts instead of the files, and says when a file on disk
//! differs from what was recorded.

use crate::audit::recorder::Recorder;
use crate::audit::sources::RecordedModule;
use crate::digest::sha256_hex;
use crate::luastate::{Loader, Wanted};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// Who is told, one line each, that a file on disk differs from the text
/// a replay runs in its place. Default: standard error, after `sluice: `.
#[derive(Clone)]
pub(crate) struct Notes(pub(crate) Arc<dyn Fn(&str) + Send + Sync>);

impl Default for Notes {
    fn default() -> Notes {
        Notes(Arc::new(|note| eprintln!("sluice: {note}")))
    }
}

impl fmt::Debug for Notes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Notes")
    }
}

/// What a run's `require` does with the modules of its folder.
pub(super) struct Sources {
    /// Where each module loaded is recorded (none for an unrecorded run).
    pub recorder: Option<Arc<Recorder>>,
    /// The modules a recorded run loaded, which a replay of its recorded
    /// script loads in place of the files (empty otherwise), and that
    /// run's id.
    pub recorded: (Vec<RecordedModule>, String),
    pub notes: Notes,
}

impl Sources {
    /// The loader `luastate::install_require_with` takes.
    pub fn loader(self) -> Loader {
        let state = Rc::new(Loading {
            sources: self,
            loads: RefCell::default(),
            k: Cell::new(0),
        });
        Box::new(move |w| state.load(w))
    }
}

/// The loader's state: how often each name loaded, how many modules did.
struct Loading {
    sources: Sources,
    loads: RefCell<HashMap<String, usize>>,
    k: Cell<i64>,
}

impl Loading {
    /// The `i`th load of a name takes the recorded run's `i`th load of it,
    /// when there is one; otherwise the file. Either is recorded.
    fn load(&self, w: Wanted) -> mlua::Result<Option<(PathBuf, String)>> {
        let i = {
            let mut loads = self.loads.borrow_mut();
            let n = loads.entry(w.name.to_string()).or_insert(0);
            *n += 1;
            *n - 1
        };
        let (list, run) = &self.sources.recorded;
        let recorded = list.iter().filter(|m| m.name == w.name).nth(i);
        let (path, text) = match (recorded, w.found) {
            (Some(m), found) => {
                self.compare(m, run, found.as_ref());
                let path = found.map_or_else(|| PathBuf::from(&m.path), |(p, _)| p);
                (path, m.text.clone())
            }
            (None, Some(found)) => found,
            (None, None) => return Ok(None),
        };
        self.record(w.name, &path, &text);
        Ok(Some((path, text)))
    }

    /// Says so when the file on disk is not the text run `run` recorded.
    fn compare(&self, m: &RecordedModule, run: &str, found: Option<&(PathBuf, String)>) {
        let then = short(&m.sha256);
        let note = match found {
            Some((path, text)) => {
                let now = sha256_hex(text.as_bytes());
                if now == m.sha256 {
                    return;
                }
                format!(
                    "module {:?}: {} differs from the text run {run} recorded (SHA-256 {then} recorded, {} \
on disk); the recorded text runs",
                    m.name,
                    path.display(),
                    short(&now)
                )
            }
            None => format!(
                "module {:?}: {} is gone (SHA-256 {then} recorded, none on disk); the text run {run} recorded \
runs",
                m.name, m.path
            ),
        };
        (self.sources.notes.0)(&note);
    }

    /// Records module `name`, loaded from `path`, as the run's next one.
    fn record(&self, name: &str, path: &Path, text: &str) {
        let Some(recorder) = &self.sources.recorder else {
            return;
        };
        self.k.set(self.k.get() + 1);
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        recorder.module(self.k.get(), name, &path.display().to_string(), text);
    }
}

/// The first 12 hex digits of a digest, as sluice shows one.
pub(crate) fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// A script file's text, read once when the run is built: `None` for
/// anything but a regular file holding UTF-8 (a FIFO read here would be
/// consumed before the run reads it; a file that is not text is read, and
/// refused, when the run runs it).
pub(super) fn read_script(path: &Path) -> Option<String> {
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// Whether `a` and `b` name one file: the same path, or the same file
/// found through both.
pub(super) fn same_file(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}
