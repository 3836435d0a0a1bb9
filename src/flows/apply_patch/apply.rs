//! Turning parsed sections into file changes, and making them.
//!
//! [`derive()`] is the pure part: a file's text and its chunks give its new
//! text, as Codex computes it. [`run`] is the filesystem part, in this order:
//!
//! 1. create the missing parent folders of added and moved-to files (the
//!    lock of a file lives beside it);
//! 2. take the lock of every path the patch reads or writes, in a fixed
//!    order; a busy one fails the patch and frees the locks already held;
//! 3. derive every change from the files as they are now, section by
//!    section, so the first failing section (in patch order, as Codex
//!    reports it) fails the patch before anything is written;
//! 4. write every new text atomically, then move every deleted file (and
//!    moved source) aside; if a step fails, undo the steps before it;
//! 5. drop the set-aside files and release the locks.
//!
//! A failed patch leaves every file as it was, and removes the folders step
//! 1 created.

use super::lines::{Replacement, SourceFile};
use super::parser::Chunk;
use super::seek::Finder;
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::flows::files::Files;
use crate::fsops::{checked, lock, lock::FileLock, path, text, Target};
use crate::kernel::Action;
use std::fs::Metadata;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A path named in the patch, resolved.
#[derive(Debug, Clone)]
pub struct Named {
    /// As written in the patch: what the summary shows.
    pub path: String,
    /// Absolute and lexically normalised, as Codex names it in messages.
    pub abs: String,
    pub target: Target,
    /// The directory entry itself: `target.real`, except for a symlink,
    /// which a delete or move removes (its target stays).
    pub entry: PathBuf,
}

/// One section, resolved.
#[derive(Debug, Clone)]
pub enum Op {
    Add {
        to: Named,
        contents: String,
    },
    Delete {
        file: Named,
    },
    Update {
        file: Named,
        chunks: Vec<Chunk>,
        move_to: Option<Named>,
    },
}

impl Op {
    /// Where the section's file is once applied (none for a delete): what
    /// a language server is told changed.
    pub fn now_at(&self) -> Option<PathBuf> {
        match self {
            Op::Add { to, .. } => Some(to.target.real.clone()),
            Op::Delete { .. } => None,
            Op::Update { file, move_to, .. } => {
                Some(move_to.as_ref().unwrap_or(file).target.real.clone())
            }
        }
    }

    /// Paths whose contents the section reads.
    pub fn reads(&self) -> Vec<&Path> {
        match self {
            Op::Add { .. } => vec![],
            Op::Delete { file } => vec![&file.entry],
            Op::Update { file, .. } => vec![&file.target.real],
        }
    }

    /// Paths the section writes, creates or removes.
    pub fn writes(&self) -> Vec<&Path> {
        match self {
            Op::Add { to, .. } => vec![&to.target.real],
            Op::Delete { file } => vec![&file.entry],
            Op::Update {
                file,
                move_to: None,
                ..
            } => vec![&file.target.real],
            Op::Update {
                file,
                move_to: Some(dest),
                ..
            } => vec![&dest.target.real, &file.entry],
        }
    }

    /// Its paths, each with what the section does to it: what a path must
    /// be granted for once it resolves elsewhere.
    pub fn named_mut(&mut self) -> Vec<(&mut Named, &'static [Action])> {
        const READ_WRITE: &[Action] = &[Action::FsRead, Action::FsWrite];
        match self {
            Op::Add { to, .. } => vec![(to, &[Action::FsWrite])],
            Op::Delete { file } => vec![(file, READ_WRITE)],
            Op::Update { file, move_to, .. } => {
                let mut out: Vec<(&mut Named, &'static [Action])> = vec![(file, READ_WRITE)];
                if let Some(dest) = move_to {
                    out.push((dest, &[Action::FsWrite]));
                }
                out
            }
        }
    }

    /// The file a new text is written to when its parent may be missing.
    fn created(&self) -> Option<&Named> {
        match self {
            Op::Add { to, .. } => Some(to),
            Op::Update { move_to, .. } => move_to.as_ref(),
            Op::Delete { .. } => None,
        }
    }
}

/// What a patch changed, as paths written in the patch, in patch order.
#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
}

impl Summary {
    fn of(ops: &[Op]) -> Summary {
        let mut s = Summary::default();
        for op in ops {
            match op {
                Op::Add { to, .. } => s.added.push(to.path.clone()),
                Op::Delete { file } => s.deleted.push(file.path.clone()),
                Op::Update { file, move_to, .. } => s
                    .modified
                    .push(move_to.as_ref().unwrap_or(file).path.clone()),
            }
        }
        s
    }

    /// What Codex prints: additions, then modifications, then deletions.
    pub fn text(&self) -> String {
        let mut out = String::from("Success. Updated the following files:\n");
        for (mark, paths) in [
            ("A", &self.added),
            ("M", &self.modified),
            ("D", &self.deleted),
        ] {
            for p in paths {
                out.push_str(&format!("{mark} {p}\n"));
            }
        }
        out
    }
}

/// Why a chunk does not apply to a file.
#[derive(Debug, PartialEq)]
pub enum Miss {
    /// An `@@` line was not found.
    Context(String),
    /// A chunk's old lines were not found; all of them.
    Lines(Vec<String>),
}

/// The text of a file after `chunks`, or the first chunk that misses.
pub fn derive(contents: &str, chunks: &[Chunk]) -> Result<String, Miss> {
    let mut file = SourceFile::parse(contents);
    let replacements = replacements(&file.texts(), chunks)?;
    file.apply(&replacements);
    Ok(file.into_contents())
}

/// Where each chunk lands, as Codex finds it: chunks in order, each sought
/// after the previous one (its `@@` line first, then its old lines); a chunk
/// that only adds lines adds them at the end of the file.
fn replacements(lines: &[String], chunks: &[Chunk]) -> Result<Vec<Replacement>, Miss> {
    let finder = Finder::new(lines);
    let mut out: Vec<Replacement> = Vec::new();
    let mut from = 0;
    for chunk in chunks {
        if let Some(context) = &chunk.change_context {
            match finder.seek(std::slice::from_ref(context), from, false) {
                Some(i) => from = i + 1,
                None => return Err(Miss::Context(context.clone())),
            }
        }
        if chunk.old_lines.is_empty() {
            out.push((lines.len(), 0, chunk.new_lines.clone()));
            continue;
        }
        let mut old = &chunk.old_lines[..];
        let mut new = &chunk.new_lines[..];
        let mut found = finder.seek(old, from, chunk.is_end_of_file);
        // A final empty line stands for the file's last line ending.
        if found.is_none() && old.last().is_some_and(String::is_empty) {
            old = &old[..old.len() - 1];
            if new.last().is_some_and(String::is_empty) {
                new = &new[..new.len() - 1];
            }
            found = finder.seek(old, from, chunk.is_end_of_file);
        }
        let Some(start) = found else {
            return Err(Miss::Lines(chunk.old_lines.clone()));
        };
        // Context lines stay as the file has them; only the runs between
        // them are replaced.
        let (mut o, mut n) = (0, 0);
        for &(oc, nc) in &chunk.context_lines {
            if oc >= old.len() || nc >= new.len() {
                break;
            }
            if (o, n) != (oc, nc) {
                out.push((start + o, oc - o, new[n..nc].to_vec()));
            }
            (o, n) = (oc + 1, nc + 1);
        }
        if (o, n) != (old.len(), new.len()) {
            out.push((start + o, old.len() - o, new[n..].to_vec()));
        }
        from = start + old.len();
    }
    out.sort_by_key(|r| r.0);
    Ok(out)
}

/// Applies resolved sections all or nothing, on `disk`; see the module
/// doc.
pub async fn run(ops: &[Op], disk: &Files) -> FlowResult<Summary> {
    let mut made = MadeFolders::default();
    let result = run_made(ops, disk, &mut made).await;
    if result.is_err() {
        // After `run_made` returned: its locks are released first.
        made.undo(disk).await;
    }
    result
}

/// Steps 1 to 5 of the module doc; the folders step 1 made are `made`'s.
async fn run_made(ops: &[Op], disk: &Files, made: &mut MadeFolders) -> FlowResult<Summary> {
    let mut parents: Vec<Option<FlowError>> = Vec::with_capacity(ops.len());
    for op in ops {
        parents.push(match op.created() {
            Some(n) => made.parent_of(disk, n).await.err(),
            None => None,
        });
    }
    let _locks = lock_all(ops, disk).await?;
    let mut changes = Vec::new();
    for (op, parent) in ops.iter().zip(parents) {
        if let Some(e) = parent {
            return Err(e);
        }
        changes.extend(change_of(disk, op).await?);
    }
    commit(disk, changes).await?;
    Ok(Summary::of(ops))
}

/// Folders created for new files, to remove again if the patch fails.
#[derive(Default)]
struct MadeFolders {
    /// Outermost first.
    made: Vec<PathBuf>,
}

impl MadeFolders {
    async fn parent_of(&mut self, disk: &Files, named: &Named) -> FlowResult<()> {
        let Some(parent) = named.target.real.parent() else {
            return Ok(());
        };
        if disk
            .stat(parent)
            .await
            .ok()
            .flatten()
            .is_some_and(|s| s.dir)
        {
            return Ok(());
        }
        let mut missing = Vec::new();
        let mut at = Some(parent);
        while let Some(dir) = at {
            if !matches!(disk.entry(dir).await, Ok(None)) {
                break;
            }
            missing.push(dir.to_path_buf());
            at = dir.parent();
        }
        missing.reverse();
        self.made.extend(missing);
        disk.make_dirs(parent)
            .await
            .map_err(|e| write_failed(named, e))
    }

    /// Removes the folders made, innermost first.
    async fn undo(self, disk: &Files) {
        for dir in self.made.iter().rev() {
            let _ = disk.remove_dir(dir).await;
        }
    }
}

/// Locks every path the sections read or write, once each (paths that
/// share a lock folder share a lock), in the order of their lock folders,
/// each in the folder `disk` holds. A path whose folder does not exist
/// holds no file to protect; a container's files have no locks.
async fn lock_all(ops: &[Op], disk: &Files) -> FlowResult<Vec<FileLock>> {
    if !disk.locks() {
        return Ok(Vec::new());
    }
    let mut wanted: Vec<(PathBuf, Target)> = Vec::new();
    for op in ops {
        for real in op.reads().into_iter().chain(op.writes()) {
            let Some(folder) = real.parent() else {
                continue;
            };
            if !disk
                .stat(folder)
                .await
                .ok()
                .flatten()
                .is_some_and(|s| s.dir)
            {
                continue;
            }
            let shown = named_of(op, real).target.shown.clone();
            let target = Target {
                shown,
                real: real.to_path_buf(),
                names_folder: false,
            };
            wanted.push((lock::lock_path(real), target));
        }
    }
    wanted.sort_by(|a, b| a.0.cmp(&b.0));
    wanted.dedup_by(|a, b| a.0 == b.0);
    let mut held = Vec::with_capacity(wanted.len());
    for (_, target) in &wanted {
        held.extend(disk.lock(target)?);
    }
    Ok(held)
}

/// The named path of `op` that resolved to `real`.
fn named_of<'a>(op: &'a Op, real: &Path) -> &'a Named {
    match op {
        Op::Add { to, .. } => to,
        Op::Delete { file } => file,
        Op::Update { file, move_to, .. } => move_to
            .as_ref()
            .filter(|d| d.target.real == real)
            .unwrap_or(file),
    }
}

/// What a file held before a write, to put back if the patch fails.
enum Before {
    Absent,
    Held(Vec<u8>),
}

/// A new text for one file.
struct Write {
    to: Named,
    text: String,
    /// The metadata of the file replaced, whose mode the new one keeps.
    existing: Option<Metadata>,
    before: Before,
}

enum Change {
    Write(Box<Write>),
    Remove { file: Named },
}

/// The changes one section makes, derived from the files as they are now.
async fn change_of(disk: &Files, op: &Op) -> FlowResult<Vec<Change>> {
    match op {
        Op::Add { to, contents } => Ok(vec![write_to(disk, to, contents.clone()).await?]),
        Op::Delete { file } => {
            check_removable(disk, file).await?;
            Ok(vec![Change::Remove { file: file.clone() }])
        }
        Op::Update {
            file,
            chunks,
            move_to,
        } => {
            let (text, meta) = load(disk, file).await?;
            let new = derive(&text, chunks).map_err(|miss| missed(file, &text, miss))?;
            Ok(match move_to {
                Some(dest) => vec![
                    write_to(disk, dest, new).await?,
                    Change::Remove { file: file.clone() },
                ],
                // Codex rewrites an unchanged file; its bytes are the same.
                None if new == text => vec![],
                None => vec![Change::Write(Box::new(Write {
                    to: file.clone(),
                    text: new,
                    existing: meta,
                    before: Before::Held(text.into_bytes()),
                }))],
            })
        }
    }
}

/// A write of `text` to `to`, replacing whatever file is there.
async fn write_to(disk: &Files, to: &Named, text: String) -> FlowResult<Change> {
    let t = &to.target;
    if t.names_folder {
        return Err(FlowError::new(
            ErrorCode::CommandFailed,
            format!("Failed to write file {}", to.abs),
        )
        .with("path", to.abs.clone()));
    }
    let existing = match disk.stat(&t.real).await {
        Ok(Some(st)) if st.dir => {
            return Err(FlowError::new(
                ErrorCode::IsDirectory,
                format!("Failed to write file {}", to.abs),
            )
            .with("path", to.abs.clone()))
        }
        Ok(Some(st)) => {
            text::check_kind(t, false, st.regular)?;
            Some(st)
        }
        Ok(None) => None,
        Err(e) => return Err(write_failed(to, e)),
    };
    // What is replaced must be readable and of a text file's size, or a
    // failure later in the patch could not put it back (all or nothing).
    let before = match &existing {
        None => Before::Absent,
        Some(st) if st.len > crate::fsops::MAX_FILE_BYTES => {
            return Err(FlowError::new(
                ErrorCode::CommandFailed,
                format!(
                    "Failed to write file {}: it holds {} bytes, more than sluice keeps to restore it if the patch fails; delete it in a patch of its own first",
                    to.abs,
                    st.len
                ),
            )
            .with("path", to.abs.clone()))
        }
        Some(_) => match disk.read(&t.real).await {
            Ok(bytes) => Before::Held(bytes),
            Err(e) => {
                return Err(FlowError::new(
                    ErrorCode::PermissionDenied,
                    format!(
                        "Failed to write file {}: its current contents cannot be read ({e}), so a failed patch could not restore them",
                        to.abs
                    ),
                )
                .with("path", to.abs.clone()))
            }
        },
    };
    Ok(Change::Write(Box::new(Write {
        to: to.clone(),
        text,
        existing: existing.and_then(|st| st.meta),
        before,
    })))
}

fn write_failed(to: &Named, e: io::Error) -> FlowError {
    if checked::changed(&e) {
        return path::changed(&to.target);
    }
    let code = match e.kind() {
        io::ErrorKind::NotADirectory | io::ErrorKind::AlreadyExists => ErrorCode::NotADirectory,
        // A checked folder that no longer leads where it did (a container's).
        io::ErrorKind::PermissionDenied => ErrorCode::PermissionDenied,
        _ => ErrorCode::CommandFailed,
    };
    FlowError::new(code, format!("Failed to write file {}", to.abs))
        .with("path", to.abs.clone())
        .with("reason", e.to_string())
}

/// A delete's target exists and is not a folder.
async fn check_removable(disk: &Files, file: &Named) -> FlowResult<()> {
    let failed = |code| {
        FlowError::new(code, format!("Failed to delete file {}", file.abs))
            .with("path", file.abs.clone())
    };
    match disk.entry(&file.entry).await {
        Ok(Some(true)) => Err(failed(ErrorCode::IsDirectory)),
        Ok(Some(false)) if file.target.names_folder => Err(path::not_a_folder(&file.target)),
        Ok(Some(false)) => Ok(()),
        Ok(None) => Err(failed(ErrorCode::NotFound)),
        Err(e) if checked::changed(&e) => Err(path::changed(&file.target)),
        Err(e) => Err(failed(ErrorCode::CommandFailed).with("reason", e.to_string())),
    }
}

/// An update's file as UTF-8 text, refused with Codex's words when it is
/// missing, a folder or not UTF-8 (and, unlike Codex, when it holds a NUL
/// byte: sluice treats that as binary).
async fn load(disk: &Files, file: &Named) -> FlowResult<(String, Option<Metadata>)> {
    let t = &file.target;
    let failed = |code, reason: &dyn std::fmt::Display| {
        FlowError::new(
            code,
            format!("Failed to read file to update {}: {reason}", file.abs),
        )
        .with("path", file.abs.clone())
    };
    match disk.stat(&t.real).await {
        Ok(Some(st)) if st.dir => {
            let reason = format!("path `{}` is not a file", file.abs);
            return Err(failed(ErrorCode::IsDirectory, &reason));
        }
        Ok(Some(_)) if t.names_folder => return Err(path::not_a_folder(t)),
        Ok(Some(_)) => {}
        Ok(None) => {
            // ENOENT, as the host words it: "No such file or directory".
            let e = io::Error::from_raw_os_error(nix::libc::ENOENT);
            return Err(failed(ErrorCode::NotFound, &e));
        }
        Err(e) if checked::changed(&e) => return Err(path::changed(t)),
        Err(e) => {
            let code = match e.kind() {
                io::ErrorKind::NotFound => ErrorCode::NotFound,
                io::ErrorKind::NotADirectory => ErrorCode::NotADirectory,
                _ => ErrorCode::CommandFailed,
            };
            return Err(failed(code, &e));
        }
    }
    let loaded = disk.load_text(t).await;
    match loaded {
        Ok(loaded) => Ok(loaded),
        Err(e) if e.code == ErrorCode::BinaryFile => {
            let bytes = disk.read(&t.real).await.unwrap_or_default();
            let reason: String = match std::str::from_utf8(&bytes) {
                Err(utf8) => utf8.to_string(),
                Ok(_) => format!(
                    "it holds a NUL byte at byte {}, so it is a binary file; apply_patch changes UTF-8 text only",
                    e.details.get("offset").cloned().unwrap_or_default()
                ),
            };
            let mut refused = failed(ErrorCode::BinaryFile, &reason);
            refused.details.extend(e.details.clone());
            refused
                .details
                .insert("path".into(), file.abs.clone().into());
            Err(refused)
        }
        Err(e) => Err(e),
    }
}

/// `no_match` for a chunk that does not apply, in Codex's words, with the
/// region of the file the missing lines most nearly match.
fn missed(file: &Named, contents: &str, miss: Miss) -> FlowError {
    match miss {
        Miss::Context(context) => FlowError::new(
            ErrorCode::NoMatch,
            format!("Failed to find context '{context}' in {}", file.abs),
        )
        .with("path", file.abs.clone())
        .with("context", context),
        Miss::Lines(lines) => {
            let expected = lines.join("\n");
            let e = FlowError::new(
                ErrorCode::NoMatch,
                format!("Failed to find expected lines in {}:\n{expected}", file.abs),
            )
            .with("path", file.abs.clone())
            .with("expected", expected.clone());
            match crate::flows::region::nearest_region(contents, &expected) {
                Some((start, end)) => {
                    let held: Vec<&str> = contents
                        .split('\n')
                        .skip(start as usize - 1)
                        .take((end - start + 1) as usize)
                        .collect();
                    e.with(
                        "nearest",
                        serde_json::json!({"startLine": start, "endLine": end, "content": held.join("\n")}),
                    )
                }
                None => e,
            }
        }
    }
}

/// What a commit did, to undo it.
enum Done {
    Wrote {
        real: PathBuf,
        existing: Option<Metadata>,
        before: Before,
    },
    SetAside {
        entry: PathBuf,
        aside: PathBuf,
    },
}

static ASIDE: AtomicU64 = AtomicU64::new(0);

/// Writes, then sets removed files aside; undoes both on a failure, or
/// drops the set-aside files on success.
async fn commit(disk: &Files, changes: Vec<Change>) -> FlowResult<()> {
    let mut done = Vec::new();
    let (writes, removes): (Vec<_>, Vec<_>) = changes
        .into_iter()
        .partition(|c| matches!(c, Change::Write(_)));
    let mut result = Ok(());
    for change in writes.into_iter().chain(removes) {
        result = make(disk, change, &mut done).await;
        if result.is_err() {
            break;
        }
    }
    if let Err(e) = result {
        for step in done.into_iter().rev() {
            undo(disk, step).await;
        }
        return Err(e);
    }
    for step in done {
        if let Done::SetAside { aside, .. } = step {
            let _ = disk.remove_file(&aside).await;
        }
    }
    Ok(())
}

async fn make(disk: &Files, change: Change, done: &mut Vec<Done>) -> FlowResult<()> {
    match change {
        Change::Write(write) => {
            let Write {
                to,
                text,
                existing,
                before,
            } = *write;
            disk.replace_path(&to.target.real, text.as_bytes(), existing.as_ref())
                .await
                .map_err(|e| write_failed(&to, e))?;
            done.push(Done::Wrote {
                real: to.target.real,
                existing,
                before,
            });
        }
        Change::Remove { file } => {
            let aside = aside_name(disk, &file.entry).await;
            disk.rename(&file.entry, &aside).await.map_err(|e| {
                if checked::changed(&e) {
                    return path::changed(&file.target);
                }
                let code = match e.kind() {
                    io::ErrorKind::PermissionDenied => ErrorCode::PermissionDenied,
                    _ => ErrorCode::CommandFailed,
                };
                FlowError::new(code, format!("Failed to delete file {}", file.abs))
                    .with("path", file.abs.clone())
                    .with("reason", e.to_string())
            })?;
            done.push(Done::SetAside {
                entry: file.entry,
                aside,
            });
        }
    }
    Ok(())
}

async fn undo(disk: &Files, step: Done) {
    match step {
        Done::Wrote {
            real,
            existing,
            before: Before::Held(bytes),
        } => {
            let _ = disk.replace_path(&real, &bytes, existing.as_ref()).await;
        }
        Done::Wrote {
            real,
            before: Before::Absent,
            ..
        } => {
            let _ = disk.remove_file(&real).await;
        }
        Done::SetAside { entry, aside } => {
            let _ = disk.rename(&aside, &entry).await;
        }
    }
}

/// An unused sibling name for a file set aside before it is removed (in a
/// container, unused by its process id and a counter).
async fn aside_name(disk: &Files, entry: &Path) -> PathBuf {
    let name = entry
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut end = name.len().min(100);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    loop {
        let n = ASIDE.fetch_add(1, Ordering::Relaxed);
        let aside = entry.with_file_name(format!(
            ".sluice-{}.{}.{n}.del",
            &name[..end],
            std::process::id()
        ));
        if !disk.locks() || !matches!(disk.entry(&aside).await, Ok(Some(_))) {
            return aside;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parser::{parse_patch, Hunk};
    use super::*;
    use std::fs;

    /// The chunks of a one-section update patch `body`.
    fn chunks(body: &str) -> Vec<Chunk> {
        let text = format!("*** Begin Patch\n*** Update File: f\n{body}\n*** End Patch");
        match parse_patch(&text).unwrap().remove(0) {
            Hunk::UpdateFile { chunks, .. } => chunks,
            other => panic!("{other:?}"),
        }
    }

    fn apply(contents: &str, body: &str) -> Result<String, Miss> {
        derive(contents, &chunks(body))
    }

    #[test]
    fn several_chunks_apply_in_order() {
        let file = "line1\nline2\nline3\nline4\n";
        let out = apply(file, "@@\n-line2\n+changed2\n@@\n-line4\n+changed4").unwrap();
        assert_eq!(out, "line1\nchanged2\nline3\nchanged4\n");
    }

    #[test]
    fn a_context_line_narrows_where_the_chunk_lands() {
        let file = "fn a() {\n  x\n}\nfn b() {\n  x\n}\n";
        let out = apply(file, "@@ fn b() {\n-  x\n+  y").unwrap();
        assert_eq!(out, "fn a() {\n  x\n}\nfn b() {\n  y\n}\n");
        assert_eq!(
            apply(file, "@@ fn c() {\n-  x\n+  y"),
            Err(Miss::Context("fn c() {".into()))
        );
    }

    #[test]
    fn end_of_file_anchors_at_the_end() {
        assert_eq!(
            apply("a\nb\nc\nb\n", "@@\n-b\n+B\n*** End of File").unwrap(),
            "a\nb\nc\nB\n"
        );
        assert_eq!(apply("a\nb\nc\nb\n", "@@\n-b\n+B").unwrap(), "a\nB\nc\nb\n");
        assert_eq!(
            apply("a\nb\nc\nd\n", "@@\n-b\n+B\n*** End of File"),
            Err(Miss::Lines(vec!["b".into()]))
        );
    }

    #[test]
    fn the_four_passes_and_context_lines_keep_the_files_text() {
        // Trailing whitespace: the context line keeps it, the changed line not.
        assert_eq!(
            apply("a  \nb \nc\n", "@@\n a\n-b\n+B").unwrap(),
            "a  \nB\nc\n"
        );
        // Surrounding whitespace.
        assert_eq!(
            apply("    foo\nbar\n", "@@\n-foo\n+baz").unwrap(),
            "baz\nbar\n"
        );
        // Typographic punctuation.
        let file = "say \u{201C}hi\u{201D} \u{2014} ok\nnext\n";
        assert_eq!(
            apply(file, "@@\n-say \"hi\" - ok\n+said").unwrap(),
            "said\nnext\n"
        );
    }

    #[test]
    fn a_chunk_that_only_adds_lines_adds_them_at_the_end() {
        assert_eq!(apply("a\nb\nc\n", "@@ a\n+X").unwrap(), "a\nb\nc\nX\n");
        assert_eq!(apply("a\nb\nc", "@@\n+X").unwrap(), "a\nb\nc\nX\n");
        assert_eq!(apply("", "@@\n+x\n+y").unwrap(), "x\ny\n");
    }

    #[test]
    fn a_trailing_empty_line_stands_for_the_final_newline() {
        assert_eq!(apply("a\nb", "@@\n-b\n-\n+B\n+").unwrap(), "a\nB\n");
        assert_eq!(apply("", "@@\n-\n+x").unwrap(), "x\n");
        assert_eq!(
            apply("a\n", "@@\n-q\n-\n+b"),
            Err(Miss::Lines(vec!["q".into(), "".into()]))
        );
    }

    #[test]
    fn line_endings_survive_and_new_lines_take_the_files_own() {
        assert_eq!(
            apply("a\r\nb\r\nc\r\n", "@@\n a\n-b\n+B").unwrap(),
            "a\r\nB\r\nc\r\n"
        );
        assert_eq!(
            apply("a\nb\r\nc\n", "@@\n-c\n+C\n+D").unwrap(),
            "a\nb\r\nC\nD\n"
        );
        assert_eq!(apply("a\rb\rc", "@@\n-a\n+A").unwrap(), "A\rb\rc\r");
    }

    #[test]
    fn an_unchanged_update_keeps_the_text() {
        assert_eq!(apply("a\nb\n", "@@\n a\n b").unwrap(), "a\nb\n");
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn named(p: &Path) -> Named {
        Named {
            path: p.display().to_string(),
            abs: p.display().to_string(),
            target: Target::at(p),
            entry: p.to_path_buf(),
        }
    }

    #[test]
    fn a_failed_commit_undoes_the_writes_and_removals_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let (a, n, x) = (
            dir.path().join("a.txt"),
            dir.path().join("n.txt"),
            dir.path().join("x.txt"),
        );
        fs::write(&a, "old\n").unwrap();
        fs::write(&x, "x\n").unwrap();
        let write = |to: &Path, before| {
            Change::Write(Box::new(Write {
                to: named(to),
                text: "new\n".into(),
                existing: fs::metadata(to).ok(),
                before,
            }))
        };
        let changes = vec![
            write(&a, Before::Held(b"old\n".to_vec())),
            write(&n, Before::Absent),
            Change::Remove { file: named(&x) },
            Change::Remove {
                file: named(&dir.path().join("gone.txt")),
            },
        ];
        let e = block_on(commit(&Files::Host(Default::default()), changes)).unwrap_err();
        assert_eq!(e.code, ErrorCode::CommandFailed);
        assert_eq!(fs::read_to_string(&a).unwrap(), "old\n");
        assert_eq!(fs::read_to_string(&x).unwrap(), "x\n");
        assert!(!n.exists());
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_commit_removes_the_set_aside_files() {
        let dir = tempfile::tempdir().unwrap();
        let x = dir.path().join("x.txt");
        fs::write(&x, "x\n").unwrap();
        block_on(commit(
            &Files::Host(Default::default()),
            vec![Change::Remove { file: named(&x) }],
        ))
        .unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn summary_text_groups_additions_modifications_deletions() {
        let s = Summary {
            added: vec!["n.txt".into(), "./o.txt".into()],
            modified: vec!["f.txt".into(), "./sub//m.txt".into()],
            deleted: vec!["g.txt".into()],
        };
        assert_eq!(
            s.text(),
            "Success. Updated the following files:\nA n.txt\nA ./o.txt\nM f.txt\nM ./sub//m.txt\nD g.txt\n"
        );
    }
}
