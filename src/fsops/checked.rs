//! I/O on a path as the policy checked it: never through a symbolic link.
//!
//! A flow resolves the paths of its input when the call is planned
//! ([`super::path::resolve`] follows every link, and the policy is asked
//! about the canonical path) and acts on them after authorization. Meanwhile
//! anything else that runs (a background job, another process) can swap a
//! folder on that path for a link to somewhere no rule grants. A canonical
//! path holds no link, so every open here follows none: a link found now
//! means the tree changed since the check, and the step fails with `ELOOP`
//! ([`changed`]; `path::io_error` words it as `permission_denied`) rather
//! than act elsewhere.
//!
//! A whole path is opened with `openat2(RESOLVE_NO_SYMLINKS)` where the
//! kernel has it (Linux 5.6), else walked from `/` one name at a time with
//! `O_NOFOLLOW`. What follows an open (staging a file and renaming it over
//! the old one, a lock folder, a listing, the next folder of a walk) acts
//! relative to the descriptor of the folder opened, so a swap of that
//! folder's path after the open moves nothing.

use nix::errno::Errno;
use nix::fcntl::{self, AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{self, Mode, SFlag};
use nix::unistd::{self, UnlinkatFlags};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// Whether an I/O error means a link turned up on a checked path: the tree
/// changed since the policy looked at it.
pub fn changed(e: &io::Error) -> bool {
    e.raw_os_error() == Some(nix::libc::ELOOP)
}

/// A folder held by descriptor. Opened on a path without a link, it stays
/// that folder wherever its path leads later; cloning shares the
/// descriptor.
#[derive(Clone, Debug)]
pub struct Folder(Arc<OwnedFd>);

/// What a folder entry is, links not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    /// A FIFO, a socket, a device.
    Other,
}

/// One entry of a folder's listing.
#[derive(Debug)]
pub struct Entry {
    pub name: OsString,
    pub kind: Kind,
}

impl Folder {
    /// The folder at canonical path `real`, no link followed on the way.
    pub fn open(real: &Path) -> io::Result<Folder> {
        open_path(real, OFlag::O_PATH | OFlag::O_DIRECTORY, how()).map(Folder::held)
    }

    /// The folder holding canonical path `real`, and `real`'s last name
    /// (`None` for `/`).
    pub fn parent(real: &Path) -> io::Result<(Folder, Option<&OsStr>)> {
        match (real.parent(), real.file_name()) {
            (Some(parent), Some(name)) => Ok((Folder::open(parent)?, Some(name))),
            _ => Ok((Folder::open(real)?, None)),
        }
    }

    /// The folder at canonical path `real`, making the missing ones on the
    /// way (as `mkdir -p`), each inside the one before it.
    pub fn make_all(real: &Path) -> io::Result<Folder> {
        match Folder::open(real) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            done => return done,
        }
        let mut at = Folder::open(Path::new("/"))?;
        for name in names(real)? {
            at = match at.folder(name) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => match at.make(name) {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                    _ => at.folder(name)?,
                },
                other => other?,
            };
        }
        Ok(at)
    }

    fn held(fd: OwnedFd) -> Folder {
        Folder(Arc::new(fd))
    }

    fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// The folder `name` inside this one; a link there is [`changed`].
    pub fn folder(&self, name: &OsStr) -> io::Result<Folder> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        match fcntl::openat(Some(self.raw()), name, flags, Mode::empty()) {
            Ok(fd) => Ok(Folder::held(owned(fd))),
            // O_PATH opens a link itself, which then is not a folder.
            Err(Errno::ENOTDIR) if self.is_swapped(name) => Err(loop_error()),
            Err(e) => Err(e.into()),
        }
    }

    /// `name` opened for reading, without blocking (a FIFO reads as empty
    /// instead of waiting for a writer); a link there is [`changed`].
    pub fn open_read(&self, name: &OsStr) -> io::Result<File> {
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = fcntl::openat(Some(self.raw()), name, flags, Mode::empty())?;
        Ok(File::from(owned(fd)))
    }

    /// What `name` is, a link as a link; `None` when nothing is there.
    pub fn entry(&self, name: &OsStr) -> io::Result<Option<Metadata>> {
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        match fcntl::openat(Some(self.raw()), name, flags, Mode::empty()) {
            Ok(fd) => File::from(owned(fd)).metadata().map(Some),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// A new file `name` (it must not exist yet) with permission bits
    /// `mode` (before the umask), opened for writing.
    pub fn create_new(&self, name: &OsStr, mode: u32) -> io::Result<File> {
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = fcntl::openat(
            Some(self.raw()),
            name,
            flags,
            Mode::from_bits_truncate(mode),
        )?;
        Ok(File::from(owned(fd)))
    }

    /// Makes the folder `name` (mode 0777 before the umask).
    pub fn make(&self, name: &OsStr) -> io::Result<()> {
        Ok(stat::mkdirat(
            Some(self.raw()),
            name,
            Mode::from_bits_truncate(0o777),
        )?)
    }

    /// Renames `from` here to `to` in folder `dest`. A link at `to` is
    /// replaced, never followed.
    pub fn rename(&self, from: &OsStr, dest: &Folder, to: &OsStr) -> io::Result<()> {
        Ok(fcntl::renameat(
            Some(self.raw()),
            from,
            Some(dest.raw()),
            to,
        )?)
    }

    /// Removes the file (or link) `name`.
    pub fn remove_file(&self, name: &OsStr) -> io::Result<()> {
        Ok(unistd::unlinkat(
            Some(self.raw()),
            name,
            UnlinkatFlags::NoRemoveDir,
        )?)
    }

    /// Removes the empty folder `name`.
    pub fn remove_dir(&self, name: &OsStr) -> io::Result<()> {
        Ok(unistd::unlinkat(
            Some(self.raw()),
            name,
            UnlinkatFlags::RemoveDir,
        )?)
    }

    /// The folder's entries, `.` and `..` left out, in the order the
    /// filesystem lists them.
    pub fn entries(&self) -> io::Result<Vec<Entry>> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let mut dir = nix::dir::Dir::openat(Some(self.raw()), ".", flags, Mode::empty())?;
        let mut out = Vec::new();
        for entry in dir.iter() {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsStr::from_bytes(name);
            let kind = match entry.file_type() {
                Some(t) => kind_of_type(t),
                None => self.kind_of(name)?,
            };
            out.push(Entry {
                name: name.to_os_string(),
                kind,
            });
        }
        Ok(out)
    }

    /// What `name` is, asked of the filesystem (a listing that did not say).
    fn kind_of(&self, name: &OsStr) -> io::Result<Kind> {
        let st = stat::fstatat(Some(self.raw()), name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
        let fmt = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        Ok(match fmt {
            SFlag::S_IFREG => Kind::File,
            SFlag::S_IFDIR => Kind::Dir,
            SFlag::S_IFLNK => Kind::Symlink,
            _ => Kind::Other,
        })
    }

    /// Whether `name`, which an open just found not to be a folder, is a
    /// link or a folder now: a link then, or swapped since, so the tree is
    /// changing under the call. Asked after the fact, a file that is still
    /// a file keeps its own error.
    fn is_swapped(&self, name: &OsStr) -> bool {
        matches!(self.kind_of(name), Ok(Kind::Symlink | Kind::Dir))
    }
}

fn kind_of_type(t: nix::dir::Type) -> Kind {
    match t {
        nix::dir::Type::File => Kind::File,
        nix::dir::Type::Directory => Kind::Dir,
        nix::dir::Type::Symlink => Kind::Symlink,
        _ => Kind::Other,
    }
}

/// The regular file (or whatever is there) at canonical path `real`,
/// opened for reading without blocking and without following a link.
pub fn open_read(real: &Path) -> io::Result<File> {
    let fd = open_path(real, OFlag::O_RDONLY | OFlag::O_NONBLOCK, how())?;
    Ok(File::from(fd))
}

/// What is at canonical path `real`; a link anywhere on it, the last name
/// included, is [`changed`].
pub fn metadata(real: &Path) -> io::Result<Metadata> {
    let fd = open_path(real, OFlag::O_PATH, how())?;
    let meta = File::from(fd).metadata()?;
    if meta.file_type().is_symlink() {
        return Err(loop_error());
    }
    Ok(meta)
}

/// The folders one call acts in, each opened once (without following a
/// link) the first time the call needs it: every later step of the call (a
/// lock, a staged file, a rename, a file put back when a patch fails)
/// happens in the folder it opened first, whatever its path leads to
/// meanwhile. So a step cannot fail, or land elsewhere, halfway through a
/// call because the tree changed after the call began.
#[derive(Debug, Default)]
pub struct Held(Mutex<HashMap<PathBuf, Folder>>);

impl Held {
    /// The folder at canonical path `dir`, opened the first time.
    pub fn folder(&self, dir: &Path) -> io::Result<Folder> {
        if let Some(f) = self.lock().get(dir) {
            return Ok(f.clone());
        }
        let f = Folder::open(dir)?;
        Ok(self.lock().entry(dir.to_path_buf()).or_insert(f).clone())
    }

    /// [`Held::folder`], making it and the missing folders above it first
    /// ([`Folder::make_all`]).
    pub fn make_all(&self, dir: &Path) -> io::Result<Folder> {
        if let Some(f) = self.lock().get(dir) {
            return Ok(f.clone());
        }
        let f = Folder::make_all(dir)?;
        Ok(self.lock().entry(dir.to_path_buf()).or_insert(f).clone())
    }

    /// The folder holding canonical path `p`, and `p`'s name in it.
    pub fn parent<'p>(&self, p: &'p Path) -> io::Result<(Folder, &'p OsStr)> {
        match (p.parent(), p.file_name()) {
            (Some(dir), Some(name)) => Ok((self.folder(dir)?, name)),
            _ => Err(io::ErrorKind::IsADirectory.into()),
        }
    }

    /// `p` opened for reading in its held folder ([`Folder::open_read`]).
    pub fn open_read(&self, p: &Path) -> io::Result<File> {
        let (dir, name) = self.parent(p)?;
        dir.open_read(name)
    }

    /// What is at `p`, a link there being [`changed`]; `None` when nothing
    /// is (nor, perhaps, its folder).
    pub fn metadata(&self, p: &Path) -> io::Result<Option<Metadata>> {
        match self.entry(p)? {
            Some(m) if m.file_type().is_symlink() => Err(loop_error()),
            found => Ok(found),
        }
    }

    /// What the entry `p` is, a link as a link; `None` when nothing is
    /// there (nor, perhaps, its folder).
    pub fn entry(&self, p: &Path) -> io::Result<Option<Metadata>> {
        let (dir, name) = match self.parent(p) {
            Ok(found) => found,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        dir.entry(name)
    }

    /// Renames `from` to `to`, each in its held folder.
    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from_dir, from_name) = self.parent(from)?;
        let (to_dir, to_name) = self.parent(to)?;
        from_dir.rename(from_name, &to_dir, to_name)
    }

    /// Removes the file (or link) `p` from its held folder.
    pub fn remove_file(&self, p: &Path) -> io::Result<()> {
        let (dir, name) = self.parent(p)?;
        dir.remove_file(name)
    }

    /// Removes the empty folder `p` from its held folder.
    pub fn remove_dir(&self, p: &Path) -> io::Result<()> {
        let (dir, name) = self.parent(p)?;
        dir.remove_dir(name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Folder>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How a whole path is opened: `openat2` where the kernel has it, else
/// the walk. A parameter so tests can run both on one kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    Openat2,
    Walk,
}

/// What this kernel was found to offer: 0 not asked yet, 1 `openat2`, 2
/// the walk.
static OPENAT2: AtomicU8 = AtomicU8::new(0);

fn how() -> How {
    match OPENAT2.load(Ordering::Relaxed) {
        2 => How::Walk,
        _ => How::Openat2,
    }
}

/// Opens canonical path `real` with `flags`, following no link.
fn open_path(real: &Path, flags: OFlag, how: How) -> io::Result<OwnedFd> {
    if !real.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not an absolute path", real.display()),
        ));
    }
    if how == How::Openat2 {
        match openat2(real, flags) {
            // Not on this kernel (or filtered by a seccomp profile): the
            // walk from now on.
            Err(Errno::ENOSYS | Errno::EPERM | Errno::E2BIG) => {
                OPENAT2.store(2, Ordering::Relaxed);
            }
            done => {
                OPENAT2.store(1, Ordering::Relaxed);
                return done.map(owned).map_err(io::Error::from);
            }
        }
    }
    walk_open(real, flags)
}

fn openat2(real: &Path, flags: OFlag) -> Result<RawFd, Errno> {
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    loop {
        // EAGAIN: a rename raced the lookup; it is safe to ask again.
        match fcntl::openat2(nix::libc::AT_FDCWD, real, how) {
            Err(Errno::EAGAIN | Errno::EINTR) => continue,
            done => return done,
        }
    }
}

/// The walk from `/`: each folder opened inside the one before it with
/// `O_NOFOLLOW`, the last name with `flags`.
fn walk_open(real: &Path, flags: OFlag) -> io::Result<OwnedFd> {
    let names = names(real)?;
    let root = fcntl::openat(
        None,
        "/",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let mut at = Folder::held(owned(root));
    let Some((last, before)) = names.split_last() else {
        let fd = fcntl::openat(Some(at.raw()), ".", flags | OFlag::O_CLOEXEC, Mode::empty())?;
        return Ok(owned(fd));
    };
    for name in before {
        at = at.folder(name)?;
    }
    let fd = match fcntl::openat(
        Some(at.raw()),
        *last,
        flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ENOTDIR) if at.is_swapped(last) => return Err(loop_error()),
        Err(e) => return Err(e.into()),
    };
    let fd = owned(fd);
    // O_PATH with O_NOFOLLOW opens a link itself instead of refusing it.
    if flags.contains(OFlag::O_PATH) && File::from(fd.try_clone()?).metadata()?.is_symlink() {
        return Err(loop_error());
    }
    Ok(fd)
}

/// The names of canonical path `real`, which holds no `.` or `..`.
fn names(real: &Path) -> io::Result<Vec<&OsStr>> {
    let mut out = Vec::new();
    for c in real.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(n) => out.push(n),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a canonical path", real.display()),
                ))
            }
        }
    }
    Ok(out)
}

fn loop_error() -> io::Error {
    io::Error::from_raw_os_error(nix::libc::ELOOP)
}

fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by the kernel to this call alone.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

#[cfg(test)]
mod tests;
