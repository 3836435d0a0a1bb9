//! The files a policy loaded, its own and its modules': what no run may
//! write (the kernel refuses them to flows, the sandbox keeps them
//! read-only to commands), when one changed on disk, and where that
//! protection cannot hold, so that the policy is refused when it loads: a
//! file with other names (hard links) this user may write, and a file
//! reached through a symlink that lies where commands may write (no runner
//! keeps a link itself read-only: bubblewrap binds what it leads to).

use super::pattern::Pattern;
use super::policy::{Decision, Policy};
use super::{Action, Capability};
use crate::luastate::ModuleFile;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

/// What identifies one version of a file: a replaced file (new inode, new
/// ctime) counts as changed even with the old size and mtime.
pub type Stamp = (SystemTime, i64, i64, u64, u64);

/// The stamp of the file at `path` (followed), if there is one.
pub fn stamp_at(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).ok().and_then(|m| {
        Some((
            m.modified().ok()?,
            m.ctime(),
            m.ctime_nsec(),
            m.ino(),
            m.len(),
        ))
    })
}

/// One file a policy loaded: the policy's own or a module's.
#[derive(Debug, Clone)]
pub struct LoadedFile {
    /// The file as the policy named it (the path given, or a module's
    /// `DIR/NAME.lua`), absolute: what a reload reads.
    named: PathBuf,
    /// Its canonical path, which no run may write.
    real: PathBuf,
    /// How messages name it: `its file`, `its module "helpers" (PATH)`.
    what: String,
    /// When it was loaded.
    stamp: Option<Stamp>,
    /// The symlinks on the way to it as named, when it was loaded.
    links: Vec<PathBuf>,
}

impl LoadedFile {
    fn new(named: PathBuf, what: String) -> LoadedFile {
        LoadedFile {
            real: crate::fsops::path::canonical_lenient(&named).unwrap_or_else(|_| named.clone()),
            stamp: stamp_at(&named),
            links: symlinks_on(&named),
            named,
            what,
        }
    }

    /// Its canonical path.
    pub fn real(&self) -> &Path {
        &self.real
    }

    /// How messages name it.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// The symlinks on the way to it (each where it lies: its folder
    /// canonical), each with how messages name the file.
    pub fn links(&self) -> impl Iterator<Item = (&str, &Path)> + '_ {
        self.links.iter().map(|l| (self.what.as_str(), l.as_path()))
    }

    /// Whether the file its name leads to now is not the one loaded.
    pub fn changed(&self) -> bool {
        stamp_at(&self.named) != self.stamp
    }
}

/// The files of the policy at `file` (absolute, as given): its own, then
/// each of `modules` its `require` loaded.
pub fn of(file: &Path, modules: Vec<ModuleFile>) -> Vec<LoadedFile> {
    let mut files = vec![LoadedFile::new(file.to_path_buf(), "its file".into())];
    for m in modules {
        let named = if m.path.is_absolute() {
            m.path
        } else {
            std::env::current_dir().unwrap_or_default().join(m.path)
        };
        let what = format!("its module {:?} ({})", m.name, named.display());
        files.push(LoadedFile::new(named, what));
    }
    files
}

/// Why one of `files` is open to the run whatever protects its name: it
/// has other names (hard links) and this user may write it, so a command
/// could change it through a name in a folder the run may write.
pub fn shared(files: &[LoadedFile]) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    files.iter().find_map(|f| {
        let names = fs::metadata(&f.real).ok()?.nlink();
        let writable = nix::unistd::access(&f.real, nix::unistd::AccessFlags::W_OK).is_ok();
        let real = f.real.display();
        (names > 1 && writable).then(|| {
            format!(
                "{} ({real}) has {names} names (hard links) and may be written: a command could change it through another name, in a folder the run may write, which no protection of this name covers. Make it a file of its own: cp {real} {real}.new && mv {real}.new {real}",
                f.what,
            )
        })
    })
}

/// The symlinks on the way to `path` (absolute), each where it lies (its
/// folder canonical), the file itself included.
fn symlinks_on(path: &Path) -> Vec<PathBuf> {
    let mut links = Vec::new();
    let mut real = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::Normal(name) => {
                let next = real.join(name);
                let is_link = fs::symlink_metadata(&next).is_ok_and(|m| m.file_type().is_symlink());
                if !is_link {
                    real = next;
                    continue;
                }
                links.push(next.clone());
                match fs::canonicalize(&next) {
                    Ok(target) => real = target,
                    Err(_) => break,
                }
            }
            Component::ParentDir => {
                real.pop();
            }
            _ => {}
        }
    }
    links
}

/// The first file one of `policies` loaded through a symlink that lies
/// where an allow rule of any of them (inside `ceiling`) lets commands
/// write: a command could replace the link, and the policy would load the
/// command's file at its next load. The file flows cannot: they write what
/// a link leads to, which is protected. The policy to blame, and why.
pub fn exposed(policies: &[Policy], ceiling: &[Pattern]) -> Option<(String, String)> {
    for p in policies {
        for (what, link) in p.links() {
            let cap = Capability::fs(Action::FsWrite, link);
            if !ceiling.is_empty() && !ceiling.iter().any(|c| c.matches(&cap)) {
                continue;
            }
            let grant = policies.iter().find_map(|q| {
                q.rules()
                    .iter()
                    .find(|r| r.decision == Decision::Allow && r.pattern.matches(&cap))
                    .map(|r| (q, r))
            });
            if let Some((q, rule)) = grant {
                return Some((p.name(), format!(
                    "policy {}: {what} is reached through the symlink {}, which commands may write where {} of {} grants it (\"{}\"): a command could put a file of its own in the link's place, and the policy would load it. Give the policy by its real path and make its modules files, not links, or keep the links out of what the run may write",
                    p.name(), link.display(), rule.at, q.name(), rule.pattern.as_str()
                )));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each link on the way is named where it lies: after a link, the
    /// walk goes on in what it leads to (and `..` from there).
    #[test]
    fn the_links_on_a_path_are_named_where_they_lie() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir_all(root.join("real/sub")).unwrap();
        fs::write(root.join("real/sub/p.lua"), "").unwrap();
        fs::write(root.join("real/h.lua"), "").unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("ws")).unwrap();
        std::os::unix::fs::symlink(root.join("real/h.lua"), root.join("real/sub/h.lua")).unwrap();
        assert_eq!(symlinks_on(&root.join("ws/sub/p.lua")), [root.join("ws")]);
        assert_eq!(
            symlinks_on(&root.join("ws/sub/h.lua")),
            [root.join("ws"), root.join("real/sub/h.lua")]
        );
        assert_eq!(
            symlinks_on(&root.join("ws/sub/../h.lua")),
            [root.join("ws")]
        );
        assert!(symlinks_on(&root.join("real/sub/p.lua")).is_empty());
    }
}
