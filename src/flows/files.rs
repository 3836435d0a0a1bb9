//! Where a file flow's files are: the host's, or, on a host sealed to a
//! container (`SLUICE_BASH_CONTAINER`), the container's.
//!
//! The flows keep one implementation of their semantics (pages, anchors,
//! listings); [`Files`] is the small backend they reach files through, and
//! its container side only moves bytes ([`crate::container::files`]).
//!
//! Container paths are named to the policy as `NAME:/abs/path`
//! (`fs:read:box:/srv/a.py`): no host rule (`fs:read:${workspace}/**`)
//! matches one, unanchored ones (`fs:*:**/.env`) still do, and a rule
//! names the container's (`fs:write:box:/srv/**`).

use super::Context;
use crate::container::files::{self as cf, Kind, Probe};
use crate::container::ContainerFiles;
use crate::error::FlowResult;
use crate::fsops::checked::{self, Folder, Held};
use crate::fsops::{self, atomic, lock::FileLock, path::io_error, text, Target};
use crate::kernel::{Action, Capability};
use std::fs::Metadata;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The files one call acts on.
pub enum Files {
    /// The host's, through `fsops`, in the folders the call holds: each
    /// opened once, without following a link, so every step of the call
    /// acts in the folder the policy checked ([`Held`]).
    Host(Held),
    /// The sealed container's, through its transport.
    Container(ContainerFiles),
}

/// A file as it is before a write: its host metadata (to keep its mode and
/// owner) or, in a container, only that it exists.
pub enum Existing {
    Host(Metadata),
    Container,
}

impl Context {
    /// The container whose files the file flows act on: the sealed one.
    pub fn files_in(&self) -> Option<&str> {
        self.containers.sealed()
    }

    /// Resolves the path of a file flow's input field `field`: on the host
    /// as [`Context::resolve`] does, on a sealed host as a container path,
    /// relative ones under `SLUICE_TEST_CWD` (else `/`), normalised
    /// lexically. The container resolves its symlinks when the call runs
    /// ([`Files::settle`]).
    pub fn resolve_file(&self, field: &str, given: &str) -> FlowResult<Target> {
        if self.files_in().is_none() {
            return self.resolve(field, given);
        }
        if given.is_empty() || given.contains('\0') {
            // The host's resolver words the refusal of these.
            return self.resolve(field, given);
        }
        let base = self.containers.sealed_cwd().unwrap_or("/");
        let path = PathBuf::from(cf::lexical(base, given));
        Ok(Target {
            shown: path.clone(),
            real: path,
            names_folder: given.len() > 1 && given.ends_with('/'),
        })
    }

    /// `real` as capabilities name it: the path itself on the host,
    /// `NAME:/path` for the sealed container's.
    pub fn fs_name(&self, real: &Path) -> PathBuf {
        match self.files_in() {
            None => real.to_path_buf(),
            Some(name) => PathBuf::from(format!("{name}:{}", real.display())),
        }
    }
}

impl Files {
    /// The files of this call: the sealed container's when the pipeline
    /// routed the call there, else the host's.
    pub async fn of(ctx: &Context) -> FlowResult<Files> {
        match ctx.files_in() {
            None => Ok(Files::Host(Held::default())),
            Some(name) => Ok(Files::Container(ContainerFiles::new(
                ctx.container(name).await?,
            ))),
        }
    }

    /// Resolves `t` where its file is: on the host as planned; in the
    /// container through its symlinks, authorizing the canonical path for
    /// `actions` when it differs from the one the call was granted. The
    /// target to use, and (in a container) what is there.
    pub async fn settle(
        &self,
        ctx: &Context,
        t: &Target,
        actions: &[Action],
    ) -> FlowResult<(Target, Option<Probe>)> {
        let Files::Container(c) = self else {
            return Ok((t.clone(), None));
        };
        let (settled, probe) = settle_in(c, ctx, t, actions).await?;
        Ok((settled, Some(probe)))
    }

    /// Passes the text file `t` through `feed` a chunk at a time, with
    /// the checks and errors of [`text::stream`] wherever it is, and
    /// returns `state` as `feed` left it. A large file is scanned off the
    /// run's thread ([`off_thread`]), hence the state it moves there.
    pub async fn stream<S: Send + 'static>(
        &self,
        ctx: &Context,
        t: &Target,
        mut state: S,
        feed: fn(&mut S, &[u8]),
    ) -> FlowResult<S> {
        match self {
            Files::Host(_) => {
                let (file, meta) = text::open_checked(t)?;
                let t = t.clone();
                off_thread(meta.len(), move || {
                    text::stream(&t, file, meta, |chunk| feed(&mut state, chunk))?;
                    Ok(state)
                })
                .await
            }
            Files::Container(c) => {
                let (t, bytes) = open_in(c, ctx, t, &[Action::FsRead]).await?;
                off_thread(bytes.len() as u64, move || {
                    let chunk = text::CHUNK_BYTES;
                    text::stream_from(&t, &bytes[..], chunk, |part| feed(&mut state, part))?;
                    Ok(state)
                })
                .await
            }
        }
    }

    /// The text file `t` whole, and what to keep of it when it is
    /// replaced; the target as settled.
    pub async fn load(
        &self,
        ctx: &Context,
        t: &Target,
        actions: &[Action],
    ) -> FlowResult<(Target, String, Existing)> {
        match self {
            Files::Host(held) => {
                check_host(t)?;
                let file = load_host(held, t).await?;
                Ok((t.clone(), file.text, Existing::Host(file.meta)))
            }
            Files::Container(c) => {
                let (t, bytes) = open_in(c, ctx, t, actions).await?;
                let text = decode(&t, bytes).await?;
                Ok((t, text, Existing::Container))
            }
        }
    }

    /// What is at `t` before a write: `None` when nothing is; a folder or
    /// an irregular file is the caller's to refuse (`is_dir` tells).
    pub async fn existing(
        &self,
        ctx: &Context,
        t: &Target,
    ) -> FlowResult<(Target, Option<(Existing, bool)>)> {
        match self {
            Files::Host(held) => match held.metadata(&t.real) {
                Ok(Some(m)) => {
                    let dir = m.is_dir();
                    if !dir {
                        text::check_regular(t, &m)?;
                    }
                    Ok((t.clone(), Some((Existing::Host(m), dir))))
                }
                Ok(None) => Ok((t.clone(), None)),
                Err(e) => Err(io_error(t, "write", e)),
            },
            Files::Container(_) => {
                let (t, probe) = self.settle(ctx, t, &[Action::FsWrite]).await?;
                let Some(found) = probe.and_then(|p| p.found) else {
                    return Ok((t, None));
                };
                let dir = found.kind == Kind::Dir;
                if !dir {
                    text::check_kind(&t, false, found.kind == Kind::File)?;
                }
                Ok((t, Some((Existing::Container, dir))))
            }
        }
    }

    /// The entries of folder `t` (names and kinds: `file`, `directory`,
    /// `symlink`, `other`; links not followed), or `None` when `t` is not a
    /// folder; the target as settled.
    pub async fn entries(
        &self,
        ctx: &Context,
        t: &Target,
    ) -> FlowResult<(Target, Option<Vec<(String, &'static str)>>)> {
        match self {
            Files::Host(_) => {
                let listed = |e| io_error(t, "list", e);
                let meta = checked::metadata(&t.real).map_err(listed)?;
                if !meta.is_dir() {
                    return Ok((t.clone(), None));
                }
                let entries = Folder::open(&t.real)
                    .and_then(|dir| dir.entries())
                    .map_err(listed)?;
                let out = entries
                    .into_iter()
                    .map(|e| {
                        let kind = match e.kind {
                            checked::Kind::Symlink => "symlink",
                            checked::Kind::Dir => "directory",
                            checked::Kind::File => "file",
                            checked::Kind::Other => "other",
                        };
                        (e.name.to_string_lossy().into_owned(), kind)
                    })
                    .collect();
                Ok((t.clone(), Some(out)))
            }
            Files::Container(c) => {
                let (t, probe) = self.settle(ctx, t, &[Action::FsRead]).await?;
                let probe = probe.expect("a container settles with a probe");
                match probe.found {
                    None => return Err(fsops::path::not_found_near(&t, Path::new(&probe.nearest))),
                    Some(f) if f.kind != Kind::Dir => return Ok((t, None)),
                    Some(_) => {}
                }
                let listing = c.list(&probe.real, Some(1)).await?;
                let prefix = format!("{}/", probe.real.trim_end_matches('/'));
                let name = |p: &String| p.strip_prefix(&prefix).unwrap_or(p).to_string();
                let mut out = Vec::new();
                for (paths, kind) in [
                    (&listing.dirs, "directory"),
                    (&listing.files, "file"),
                    (&listing.links, "symlink"),
                    (&listing.other, "other"),
                ] {
                    out.extend(paths.iter().map(|p| (name(p), kind)));
                }
                Ok((t, Some(out)))
            }
        }
    }

    /// Holds the host's lock on `t` while a write is under way, in the
    /// folder the call holds; a container's files have no sibling lock
    /// folder of sluice's.
    pub fn lock(&self, t: &Target) -> FlowResult<Option<FileLock>> {
        match self {
            Files::Host(held) => {
                let (dir, _) = held.parent(&t.real).map_err(|e| io_error(t, "lock", e))?;
                FileLock::acquire(&dir, t).map(Some)
            }
            Files::Container(_) => Ok(None),
        }
    }

    /// Makes the missing folders above `t` (a new file's) where a lock
    /// needs them first: on the host; a container's write makes them.
    pub fn make_parent(&self, t: &Target) -> FlowResult<()> {
        match (self, t.real.parent()) {
            (Files::Host(held), Some(parent)) => held
                .make_all(parent)
                .map(drop)
                .map_err(|e| io_error(t, "create the folders of", e)),
            _ => Ok(()),
        }
    }

    /// Replaces `t` with `bytes` atomically (staged beside it, then renamed
    /// over it), making its missing folders when it is new.
    pub async fn replace(
        &self,
        t: &Target,
        bytes: &[u8],
        existing: Option<&Existing>,
    ) -> FlowResult<()> {
        match self {
            Files::Host(held) => {
                let meta = match existing {
                    Some(Existing::Host(m)) => Some(m),
                    _ => None,
                };
                if meta.is_none() {
                    self.make_parent(t)?;
                }
                let (dir, name) = held.parent(&t.real).map_err(|e| io_error(t, "write", e))?;
                atomic::replace_in(&dir, name, bytes, meta).map_err(|e| io_error(t, "write", e))?;
                written::note(&t.real, Some(bytes));
                Ok(())
            }
            Files::Container(c) => c
                .write(&t.real.to_string_lossy(), bytes)
                .await
                .map_err(|e| e.with("path", t.shown.display().to_string())),
        }
    }
}

/// Bytes of a file from which reading or scanning it moves off the run's
/// thread. Every task of a run shares that thread, so a call that holds it
/// stalls them all; but the hand-off to tokio's blocking threads costs two
/// thread switches, measured here at 25 us on idle cores and up to 1 ms
/// more per call on busy ones, which a small file does not repay. A
/// release build reads and scans 64 MiB in 18 ms (BENCHMARKS.md), so a
/// file under 1 MiB holds the thread under 0.3 ms, below the 1 ms a task's
/// timer (`sluice.sleep`) resolves; a debug build takes about 5 ms a MiB.
pub const OFF_THREAD_BYTES: u64 = 1 << 20;

/// `work` on a host file's (or a container's file's) `len` bytes: on the
/// run's thread when the file is smaller than [`OFF_THREAD_BYTES`], else
/// on tokio's blocking threads while the calling task waits, so the run's
/// other tasks go on meanwhile.
async fn off_thread<T: Send + 'static>(len: u64, work: impl FnOnce() -> T + Send + 'static) -> T {
    if len < OFF_THREAD_BYTES {
        return work();
    }
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => done,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // Only a runtime shutting down cancels a blocking task, and it
            // drops the task that waits on it first.
            Err(e) => unreachable!("a file's read was cancelled: {e}"),
        },
    }
}

/// [`text::load_opened`] of a host file in its held folder, off the run's
/// thread when it is large.
async fn load_host(held: &Held, t: &Target) -> FlowResult<text::TextFile> {
    let file = held
        .open_read(&t.real)
        .map_err(|e| io_error(t, "read", e))?;
    let (file, meta) = text::checked_file(t, file)?;
    let t = t.clone();
    off_thread(meta.len(), move || text::load_opened(&t, file, meta)).await
}

/// [`text::decode`] of a container file's bytes, off the run's thread when
/// they are many.
async fn decode(t: &Target, bytes: Vec<u8>) -> FlowResult<String> {
    let t = t.clone();
    off_thread(bytes.len() as u64, move || text::decode(&t, bytes)).await
}

/// [`Files::settle`] in container `c`: `t` through the container's links,
/// the canonical path authorized for `actions` when it is not the one the
/// call was granted; the settled target and what is there.
pub async fn settle_in(
    c: &ContainerFiles,
    ctx: &Context,
    t: &Target,
    actions: &[Action],
) -> FlowResult<(Target, Probe)> {
    let probe = c.probe(&t.real.to_string_lossy()).await?;
    let real = PathBuf::from(&probe.real);
    if real != t.real {
        for &action in actions {
            ctx.authorize(&Capability::fs(action, &ctx.fs_name(&real)))?;
        }
    }
    Ok((Target { real, ..t.clone() }, probe))
}

/// Opens the text file `t` in container `c` once, and authorizes the
/// path of what was opened for `actions` when it is not the one the call
/// was granted (a link on the way), with the text flows' checks, before a
/// byte is used: a swap in the container between the check and the read
/// can only make the call fail. The settled target and the bytes.
pub async fn open_in(
    c: &ContainerFiles,
    ctx: &Context,
    t: &Target,
    actions: &[Action],
) -> FlowResult<(Target, Vec<u8>)> {
    let opened = c
        .open(&t.real.to_string_lossy(), fsops::MAX_FILE_BYTES)
        .await?;
    let real = PathBuf::from(&opened.probe.real);
    if real != t.real {
        for &action in actions {
            ctx.authorize(&Capability::fs(action, &ctx.fs_name(&real)))?;
        }
    }
    let t = Target { real, ..t.clone() };
    check_text(&t, &opened.probe)?;
    let bytes = opened.bytes.unwrap_or_default();
    if bytes.len() as u64 > fsops::MAX_FILE_BYTES {
        return Err(text::too_large(&t, bytes.len() as u64));
    }
    Ok((t, bytes))
}

/// Refuses what the text flows refuse of a host path by its metadata,
/// before a lock is taken on it: nothing there, a file named as a folder,
/// a folder or an irregular file.
pub fn check_host(t: &Target) -> FlowResult<()> {
    let meta = checked::metadata(&t.real).map_err(|e| io_error(t, "edit", e))?;
    if t.names_folder && !meta.is_dir() {
        return Err(fsops::path::not_a_folder(t));
    }
    text::check_regular(t, &meta)
}

/// Refuses, before a byte is read, what the text flows refuse of a
/// container's path: nothing there, a folder where a file was named (or a
/// file where a folder was), an irregular file, a file over the limit.
pub fn check_text(t: &Target, probe: &Probe) -> FlowResult<()> {
    let Some(found) = probe.found else {
        return Err(fsops::path::not_found_near(t, Path::new(&probe.nearest)));
    };
    if t.names_folder && found.kind != Kind::Dir {
        return Err(fsops::path::not_a_folder(t));
    }
    text::check_kind(t, found.kind == Kind::Dir, found.kind == Kind::File)?;
    if found.size > fsops::MAX_FILE_BYTES {
        return Err(text::too_large(t, found.size));
    }
    Ok(())
}

/// What is at a path, links followed.
pub struct Stat {
    pub dir: bool,
    /// A regular file (not a device, a socket, a pipe).
    pub regular: bool,
    pub len: u64,
    /// The host's metadata, whose mode a replacement keeps; the container
    /// keeps it by itself.
    pub meta: Option<Metadata>,
}

/// A container's refusal as an I/O error, so the patch words it as it
/// words the host's (`Failed to write file ...`, with the reason), of the
/// kind its code names (a path that moved stays `permission_denied`).
fn io_of(e: crate::error::FlowError) -> io::Error {
    use crate::error::ErrorCode;
    let kind = match e.code {
        ErrorCode::PermissionDenied => io::ErrorKind::PermissionDenied,
        ErrorCode::NotFound => io::ErrorKind::NotFound,
        ErrorCode::NotADirectory => io::ErrorKind::NotADirectory,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e.message)
}

fn text_of(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Path-level steps, for a flow (apply_patch) that keeps its own checks
/// and undo: they move bytes and rename entries, in io terms, so both
/// places get the same all-or-nothing patch.
impl Files {
    /// What is at `p`, following links; `None` when nothing is.
    pub async fn stat(&self, p: &Path) -> io::Result<Option<Stat>> {
        match self {
            Files::Host(held) => Ok(held.metadata(p)?.map(|m| Stat {
                dir: m.is_dir(),
                regular: m.is_file(),
                len: m.len(),
                meta: Some(m),
            })),
            Files::Container(c) => {
                let probe = c.probe(&text_of(p)).await.map_err(io_of)?;
                Ok(probe.found.map(|f| Stat {
                    dir: f.kind == Kind::Dir,
                    regular: f.kind == Kind::File,
                    len: f.size,
                    meta: None,
                }))
            }
        }
    }

    /// Whether the entry `p` exists (a dangling link on the host counts),
    /// and whether it is a folder.
    pub async fn entry(&self, p: &Path) -> io::Result<Option<bool>> {
        match self {
            Files::Host(held) => Ok(held.entry(p)?.map(|m| m.is_dir())),
            Files::Container(_) => Ok(self.stat(p).await?.map(|s| s.dir)),
        }
    }

    pub async fn read(&self, p: &Path) -> io::Result<Vec<u8>> {
        match self {
            Files::Host(held) => {
                let mut file = held.open_read(p)?;
                let len = file.metadata()?.len();
                off_thread(len, move || {
                    let mut bytes = Vec::with_capacity(len as usize);
                    file.read_to_end(&mut bytes).map(|_| bytes)
                })
                .await
            }
            Files::Container(c) => c.read(&text_of(p)).await.map_err(io_of),
        }
    }

    /// The text file `t` whole, with the checks and errors of
    /// [`text::load`], and its host metadata.
    pub async fn load_text(
        &self,
        t: &Target,
    ) -> crate::error::FlowResult<(String, Option<Metadata>)> {
        match self {
            Files::Host(held) => load_host(held, t).await.map(|f| (f.text, Some(f.meta))),
            Files::Container(c) => {
                let bytes = c.read(&text_of(&t.real)).await?;
                if bytes.len() as u64 > crate::fsops::MAX_FILE_BYTES {
                    return Err(text::too_large(t, bytes.len() as u64));
                }
                Ok((decode(t, bytes).await?, None))
            }
        }
    }

    /// Replaces `p` with `bytes` atomically, keeping `meta`'s mode on the
    /// host (the container's script keeps the old file's itself).
    pub async fn replace_path(
        &self,
        p: &Path,
        bytes: &[u8],
        meta: Option<&Metadata>,
    ) -> io::Result<()> {
        match self {
            Files::Host(held) => {
                let (dir, name) = held.parent(p)?;
                atomic::replace_in(&dir, name, bytes, meta)?;
                written::note(p, Some(bytes));
                Ok(())
            }
            Files::Container(c) => c.write(&text_of(p), bytes).await.map_err(io_of),
        }
    }

    pub async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        match self {
            Files::Host(held) => {
                held.rename(from, to)?;
                written::note(from, None);
                written::note_moved(to);
                Ok(())
            }
            Files::Container(c) => c.rename(&text_of(from), &text_of(to)).await.map_err(io_of),
        }
    }

    pub async fn remove_file(&self, p: &Path) -> io::Result<()> {
        match self {
            Files::Host(held) => {
                held.remove_file(p)?;
                written::note(p, None);
                Ok(())
            }
            Files::Container(c) => c.remove(&text_of(p)).await.map_err(io_of),
        }
    }

    pub async fn make_dirs(&self, p: &Path) -> io::Result<()> {
        match self {
            Files::Host(held) => held.make_all(p).map(drop),
            Files::Container(c) => c.make_dirs(&text_of(p)).await.map_err(io_of),
        }
    }

    pub async fn remove_dir(&self, p: &Path) -> io::Result<()> {
        match self {
            Files::Host(held) => held.remove_dir(p),
            Files::Container(c) => c.remove_dir(&text_of(p)).await.map_err(io_of),
        }
    }

    /// Whether sluice's sibling locks guard these files (the host's).
    pub fn locks(&self) -> bool {
        matches!(self, Files::Host(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn only_a_file_of_at_least_off_thread_bytes_is_read_off_the_run_s_thread() {
        let run = std::thread::current().id();
        let on = |len| block_on(off_thread(len, || std::thread::current().id()));
        assert_eq!(on(0), run);
        assert_eq!(on(OFF_THREAD_BYTES - 1), run);
        assert_ne!(on(OFF_THREAD_BYTES), run);
        assert_ne!(on(crate::fsops::MAX_FILE_BYTES), run);
    }

    /// A panic while reading off the thread is the caller's, as it would
    /// have been on it, not a hang or a lost answer.
    #[test]
    fn a_panic_off_the_run_s_thread_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            block_on(off_thread(OFF_THREAD_BYTES, || -> u8 { panic!("boom") }))
        })
        .unwrap_err();
        assert_eq!(caught.downcast_ref::<&str>(), Some(&"boom"));
    }
}

/// What the file flows of one call wrote on the host: each path with the
/// SHA-256 of the bytes it now holds (`None`: removed). The pipeline
/// collects them around a call ([`written::collect`]) and records them
/// with its outcome, so a run taken over elsewhere can check the shared
/// workspace still holds what the run wrote (`sluice resume
/// --check-workspace`). A container's files are not noted: the host
/// cannot see them.
pub mod written {
    use std::cell::RefCell;
    use std::path::Path;

    tokio::task_local! {
        static WRITTEN: RefCell<Vec<(String, Option<String>)>>;
    }

    /// Runs `work` (one call), noting what it writes: its result, and the
    /// paths written in order.
    pub async fn collect<T>(
        work: impl std::future::Future<Output = T>,
    ) -> (T, Vec<(String, Option<String>)>) {
        WRITTEN
            .scope(RefCell::new(Vec::new()), async {
                let out = work.await;
                (out, WRITTEN.with(|w| w.take()))
            })
            .await
    }

    /// `path` now holds `bytes` (`None`: it was removed).
    pub fn note(path: &Path, bytes: Option<&[u8]>) {
        let hash = bytes.map(crate::digest::sha256_hex);
        let _ = WRITTEN.try_with(|w| {
            w.borrow_mut()
                .push((path.to_string_lossy().into_owned(), hash))
        });
    }

    /// `path` is where a file was moved to: its bytes as they are now.
    pub fn note_moved(path: &Path) {
        if WRITTEN.try_with(|_| ()).is_ok() {
            let bytes = std::fs::read(path).ok();
            note(path, bytes.as_deref());
        }
    }
}
