//! Where a patch's files are: the host's (`std::fs`, with sluice's locks)
//! or a sealed container's (through [`ContainerFiles`]). [`super::apply`]
//! keeps every step of a patch (what is checked, in which order, what is
//! undone); this only moves bytes and renames entries, so both places get
//! the same all-or-nothing patch.

use crate::container::files::Kind;
use crate::container::ContainerFiles;
use crate::error::FlowError;
use crate::fsops::{atomic, text, Target};
use std::fs::{self, Metadata};
use std::io;
use std::path::Path;

/// The files a patch acts on.
pub enum Disk<'a> {
    Host,
    Container(&'a ContainerFiles),
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
/// words the host's (`Failed to write file ...`, with the reason).
fn io_of(e: FlowError) -> io::Error {
    io::Error::other(e.message)
}

fn text_of(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

impl Disk<'_> {
    /// What is at `p`, following links; `None` when nothing is.
    pub async fn stat(&self, p: &Path) -> io::Result<Option<Stat>> {
        match self {
            Disk::Host => match fs::metadata(p) {
                Ok(m) => Ok(Some(Stat {
                    dir: m.is_dir(),
                    regular: m.is_file(),
                    len: m.len(),
                    meta: Some(m),
                })),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            },
            Disk::Container(c) => {
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
            Disk::Host => match fs::symlink_metadata(p) {
                Ok(m) => Ok(Some(m.is_dir())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            },
            Disk::Container(_) => Ok(self.stat(p).await?.map(|s| s.dir)),
        }
    }

    pub async fn read(&self, p: &Path) -> io::Result<Vec<u8>> {
        match self {
            Disk::Host => fs::read(p),
            Disk::Container(c) => c.read(&text_of(p)).await.map_err(io_of),
        }
    }

    /// The text file `t` whole, with the checks and errors of
    /// [`text::load`], and its host metadata.
    pub async fn load(&self, t: &Target) -> crate::error::FlowResult<(String, Option<Metadata>)> {
        match self {
            Disk::Host => text::load(t).map(|f| (f.text, Some(f.meta))),
            Disk::Container(c) => {
                let bytes = c.read(&text_of(&t.real)).await?;
                if bytes.len() as u64 > crate::fsops::MAX_FILE_BYTES {
                    return Err(text::too_large(t, bytes.len() as u64));
                }
                Ok((text::decode(t, bytes)?, None))
            }
        }
    }

    /// Replaces `p` with `bytes` atomically, keeping `meta`'s mode on the
    /// host (the container's script keeps the old file's itself).
    pub async fn replace(&self, p: &Path, bytes: &[u8], meta: Option<&Metadata>) -> io::Result<()> {
        match self {
            Disk::Host => atomic::replace(p, bytes, meta),
            Disk::Container(c) => c.write(&text_of(p), bytes).await.map_err(io_of),
        }
    }

    pub async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        match self {
            Disk::Host => fs::rename(from, to),
            Disk::Container(c) => c.rename(&text_of(from), &text_of(to)).await.map_err(io_of),
        }
    }

    pub async fn remove_file(&self, p: &Path) -> io::Result<()> {
        match self {
            Disk::Host => fs::remove_file(p),
            Disk::Container(c) => c.remove(&text_of(p)).await.map_err(io_of),
        }
    }

    pub async fn make_dirs(&self, p: &Path) -> io::Result<()> {
        match self {
            Disk::Host => fs::create_dir_all(p),
            Disk::Container(c) => c.make_dirs(&text_of(p)).await.map_err(io_of),
        }
    }

    pub async fn remove_dir(&self, p: &Path) -> io::Result<()> {
        match self {
            Disk::Host => fs::remove_dir(p),
            Disk::Container(c) => c.remove_dir(&text_of(p)).await.map_err(io_of),
        }
    }

    /// Whether sluice's sibling locks guard these files (the host's).
    pub fn locks(&self) -> bool {
        matches!(self, Disk::Host)
    }
}
