//! Where this machine lets sluice make cgroups for commands, found once
//! per process (see the parent module): the mounts and sluice's own
//! cgroups read from /proc, v2 where delegated, else v1, each checked by
//! making one; and the sets a killed sluice left behind, removed.

use super::{Controller, Found, Parent, Version};
use crate::exec::resources::{Kind, Mechanism};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What detection reads: the process's cgroups and mounts, and the root
/// the paths they name are under (`/`, or a test's fake tree).
pub(super) struct Host {
    pub(super) cgroups: String,
    pub(super) mountinfo: String,
    pub(super) root: PathBuf,
}

impl Host {
    fn this_process() -> Host {
        let read = |p| std::fs::read_to_string(p).unwrap_or_default();
        Host {
            cgroups: read("/proc/self/cgroup"),
            mountinfo: read("/proc/self/mountinfo"),
            root: PathBuf::from("/"),
        }
    }

    fn at(&self, path: &Path) -> PathBuf {
        self.root.join(path.strip_prefix("/").unwrap_or(path))
    }
}

/// One mount of a cgroup filesystem.
#[derive(Debug)]
pub(super) struct Mount {
    /// The cgroup the mount shows at its mount point.
    pub(super) root: PathBuf,
    pub(super) point: PathBuf,
    pub(super) v2: bool,
    /// The v1 controllers it holds (its super options).
    pub(super) options: Vec<String>,
}

pub(super) fn mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let mut right = right.split(' ');
            let fstype = right.next()?;
            let _source = right.next();
            let options = right.next().unwrap_or_default();
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            Some(Mount {
                root: PathBuf::from(unescape(left.get(3)?)),
                point: PathBuf::from(unescape(left.get(4)?)),
                v2: fstype == "cgroup2",
                options: options.split(',').map(String::from).collect(),
            })
        })
        .collect()
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let mut out = Vec::new();
    let bytes = field.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            if let Ok(n) = u8::from_str_radix(&field[i + 1..i + 4], 8) {
                out.push(n);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every mount point of a cgroup filesystem this process sees (read
/// once): what a bounded command must never be able to write (it could
/// move itself out of its cgroups, or raise their limits).
pub fn mount_points() -> Vec<PathBuf> {
    static POINTS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    POINTS
        .get_or_init(|| {
            let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
            mounts(&mountinfo).into_iter().map(|m| m.point).collect()
        })
        .clone()
}

/// The folder of the cgroup `path` (as /proc/self/cgroup names it) under
/// `mount`, when the mount shows it.
fn folder(host: &Host, mount: &Mount, path: &str) -> Option<PathBuf> {
    let rel = Path::new(path).strip_prefix(&mount.root).ok()?;
    let point = host.at(&mount.point);
    Some(if rel.as_os_str().is_empty() {
        point
    } else {
        point.join(rel)
    })
}

/// The words a cgroup file holds, split on white space.
fn words(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect()
}

fn writable(dir: &Path) -> bool {
    use nix::unistd::{access, AccessFlags};
    access(dir, AccessFlags::W_OK).is_ok()
        && access(&dir.join("cgroup.procs"), AccessFlags::W_OK).is_ok()
}

/// Where `controller` can be had in the unified hierarchy.
pub(super) fn unified(host: &Host, controller: Controller) -> Result<Parent, String> {
    let mount = mounts(&host.mountinfo)
        .into_iter()
        .find(|m| m.v2)
        .ok_or("no cgroup v2 hierarchy is mounted")?;
    let path = host
        .cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("sluice is in no cgroup v2")?;
    let own = folder(host, &mount, path).ok_or("sluice's cgroup v2 is outside the mount")?;
    let name = controller.name();
    let offers = |dir: &Path| {
        words(&dir.join("cgroup.subtree_control"))
            .iter()
            .any(|w| w == name)
    };
    let parent = own
        .parent()
        .filter(|p| p.starts_with(host.at(&mount.point)));
    for dir in std::iter::once(own.as_path()).chain(parent) {
        if offers(dir) && writable(dir) {
            return Ok(Parent {
                dir: dir.to_path_buf(),
                version: Version::V2,
            });
        }
    }
    Err(format!(
        "cgroup v2: neither sluice's cgroup {} nor its parent gives its children the {name} controller where \
         sluice may write (it is delegated to sluice when `cgroup.subtree_control` there lists it and sluice \
         may write the folder: run sluice in a delegated cgroup, e.g. `systemd-run --user --scope -p Delegate=yes sluice ...`)",
        own.display()
    ))
}

/// Where `controller` can be had in its v1 hierarchy.
pub(super) fn legacy(host: &Host, controller: Controller) -> Result<Parent, String> {
    let name = controller.name();
    let mount = mounts(&host.mountinfo)
        .into_iter()
        .find(|m| !m.v2 && m.options.iter().any(|o| o == name))
        .ok_or(format!("no cgroup v1 {name} hierarchy is mounted"))?;
    let path = host
        .cgroups
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers.split(',').any(|c| c == name).then_some(path)
        })
        .ok_or(format!("sluice is in no cgroup v1 {name} hierarchy"))?;
    let dir = folder(host, &mount, path)
        .ok_or(format!("sluice's cgroup v1 {name} is outside the mount"))?;
    if !writable(&dir) {
        return Err(format!(
            "cgroup v1 {name}: sluice may not make cgroups under {} (it needs root there)",
            dir.display()
        ));
    }
    Ok(Parent {
        dir,
        version: Version::V1,
    })
}

/// Where `controller`'s cgroups can be made: v2, else v1, each checked by
/// making (and removing) a cgroup there that has the controller's files.
fn place(host: &Host, controller: Controller) -> Result<Parent, String> {
    let v2 = unified(host, controller).and_then(|p| probe(p, controller));
    v2.or_else(|v2_why| {
        legacy(host, controller)
            .and_then(|p| probe(p, controller))
            .map_err(|v1_why| format!("{v2_why}; {v1_why}"))
    })
}

/// `parent` if a cgroup made there has `controller`'s files.
fn probe(parent: Parent, controller: Controller) -> Result<Parent, String> {
    let dir = parent.dir.join(format!(
        "sluice-{}-probe-{}",
        std::process::id(),
        controller.name()
    ));
    std::fs::create_dir(&dir)
        .or_else(|e| match e.kind() {
            ErrorKind::AlreadyExists => Ok(()),
            _ => Err(e),
        })
        .map_err(|e| format!("cannot make a cgroup under {}: {e}", parent.dir.display()))?;
    let has = dir.join(controller.limit_file(parent.version)).exists();
    let _ = std::fs::remove_dir(&dir);
    if !has {
        return Err(format!(
            "a cgroup made under {} has no {} controller",
            parent.dir.display(),
            controller.name()
        ));
    }
    Ok(parent)
}

/// The environment variable that turns cgroups off.
const SWITCH: &str = "SLUICE_CGROUPS";

fn detect(host: &Host) -> Found {
    if std::env::var_os(SWITCH).is_some_and(|v| v == "off") {
        let off = || Err(format!("{SWITCH}=off in sluice's environment"));
        return Found {
            memory: off(),
            pids: off(),
        };
    }
    let found = Found {
        memory: place(host, Controller::Memory),
        pids: place(host, Controller::Pids),
    };
    for parent in [&found.memory, &found.pids].into_iter().flatten() {
        sweep(&parent.dir);
    }
    found
}

/// Removes the sets a sluice that is gone left under `dir` (killed before
/// it could remove them); a set still holding a process stays.
pub(super) fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("sluice-"))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

static FOUND: OnceLock<Found> = OnceLock::new();

pub(super) fn found() -> &'static Found {
    FOUND.get_or_init(|| detect(&Host::this_process()))
}

/// What enforces each limit on this machine, and where or why, for
/// `sluice doctor`: memory and pids by the cgroups found, the others by
/// rlimits.
pub fn describe() -> Vec<(Kind, Mechanism, String)> {
    let found = found();
    let mut out = Vec::new();
    for c in [Controller::Memory, Controller::Pids] {
        out.push(match found.of(c) {
            Ok(p) => (c.kind(), p.version.mechanism(), p.dir.display().to_string()),
            Err(why) if c == Controller::Pids && nix::unistd::getuid().is_root() => (
                c.kind(),
                Mechanism::None,
                format!("no pids cgroup ({why}), and root is exempt from RLIMIT_NPROC"),
            ),
            Err(why) => (c.kind(), Mechanism::Rlimit, format!("no cgroup: {why}")),
        });
    }
    for kind in [Kind::CpuSeconds, Kind::FileSizeMb] {
        out.push((kind, Mechanism::Rlimit, "per process".into()));
    }
    out
}
