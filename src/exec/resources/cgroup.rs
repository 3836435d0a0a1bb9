//! cgroups for commands' memory and pids limits: where this machine lets
//! sluice make them, a pool of them, and what they counted.
//!
//! Where (found once per process, [`find`]):
//!
//! - the unified hierarchy (v2), when a cgroup delegated to sluice offers
//!   the controller to its children: sluice's own cgroup (when it is the
//!   hierarchy's root, or children's controllers are enabled there), else
//!   its parent (sluice's siblings: a systemd slice, as root or within a
//!   user's delegated `user@.service`). sluice never moves itself;
//! - else the controller's own v1 hierarchy, under sluice's cgroup there
//!   (as root on a hybrid machine);
//! - else none: the limit falls back to an rlimit.
//!
//! `SLUICE_CGROUPS=off` in sluice's environment turns cgroups off.
//!
//! Each command gets a set of fresh-looking cgroups (one v2 cgroup with
//! both controllers, or one per v1 hierarchy), named
//! `sluice-<pid>-<n>`. Making and removing them costs more than starting
//! a small command, so a set whose command left nothing behind (no
//! process, under 16 MiB still charged) goes back to a pool for the next
//! command, its counters read as differences; any other is removed, on a
//! thread of its own. Sets left behind by a sluice that was killed are
//! removed by the next one that looks for cgroups.

mod find;

pub use find::{describe, mount_points};

use super::{Kind, Mechanism, ResourceLimits};
use find::found;
use std::io::{ErrorKind, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Which hierarchy a cgroup belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

impl Version {
    /// The file a child writes `0` to, to join a cgroup. In v1, `tasks`:
    /// it moves the writing thread alone, which the kernel does without
    /// its global lock on every process's thread group (`cgroup.procs`
    /// takes that lock, and waits for an RCU grace period when no move
    /// came in the last few milliseconds: ~3 ms a command here); the child
    /// has one thread, so that is the whole process. In v2, where a thread
    /// cannot move between domain cgroups alone, `cgroup.procs`.
    fn join_file(self) -> &'static str {
        match self {
            Version::V1 => "tasks",
            Version::V2 => "cgroup.procs",
        }
    }

    fn mechanism(self) -> Mechanism {
        match self {
            Version::V1 => Mechanism::CgroupV1,
            Version::V2 => Mechanism::CgroupV2,
        }
    }
}

/// Where one controller's cgroups for commands are made.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parent {
    dir: PathBuf,
    version: Version,
}

/// The two controllers sluice uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Memory,
    Pids,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
        }
    }

    fn kind(self) -> Kind {
        match self {
            Controller::Memory => Kind::MemoryMb,
            Controller::Pids => Kind::Pids,
        }
    }

    /// A file a cgroup of this controller has in `version`: its presence
    /// in a new cgroup shows the controller is enabled there.
    fn limit_file(self, version: Version) -> &'static str {
        match (self, version) {
            (Controller::Memory, Version::V1) => "memory.limit_in_bytes",
            (Controller::Memory, Version::V2) => "memory.max",
            (Controller::Pids, _) => "pids.max",
        }
    }
}

/// What this machine offers for each controller, or why nothing.
#[derive(Debug)]
struct Found {
    memory: Result<Parent, String>,
    pids: Result<Parent, String>,
}

impl Found {
    fn of(&self, c: Controller) -> &Result<Parent, String> {
        match c {
            Controller::Memory => &self.memory,
            Controller::Pids => &self.pids,
        }
    }
}

/// A cgroup of a set: its folder, what it enforces, the file a child
/// joins it through ([`Version::join_file`]) open for writing, the limits
/// last written, and what its counters said when the set was last
/// settled.
#[derive(Debug)]
struct Member {
    dir: PathBuf,
    version: Version,
    controllers: Vec<Controller>,
    procs: OwnedFd,
    written: [Option<Option<u64>>; 2],
    baseline: Counts,
}

/// What a set's cgroups counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub oom_kills: u64,
    pub fork_failures: u64,
}

/// One command's cgroups.
#[derive(Debug)]
struct Set {
    members: Vec<Member>,
}

/// Sets whose command left nothing behind, for the next command.
static POOL: Mutex<Vec<Set>> = Mutex::new(Vec::new());

/// Numbers the sets this process makes.
static NEXT: AtomicU64 = AtomicU64::new(0);

fn pool() -> std::sync::MutexGuard<'static, Vec<Set>> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a set may still hold charged and be used again: a command that
/// left more (files in a tmpfs, a large page cache) would count against
/// the next one's memory.
const REUSE_BELOW: u64 = 16 << 20;

/// A command's cgroups, taken from the pool or made, with its limits
/// written. One dropped unsettled (its command's call was dropped) is
/// removed.
#[derive(Debug)]
pub struct Lease {
    set: Option<Set>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(set) = self.set.take() {
            retire(set);
        }
    }
}

/// The cgroups `limits` needs, where this machine has them; `None` when
/// it needs none or none can be had, with why in `partial`.
pub(super) fn lease(limits: &ResourceLimits, partial: &mut Vec<String>) -> Option<Lease> {
    lease_in(found(), limits, partial)
}

fn lease_in(found: &Found, limits: &ResourceLimits, partial: &mut Vec<String>) -> Option<Lease> {
    let mut wanted = false;
    for c in [Controller::Memory, Controller::Pids] {
        if limits.get(c.kind()).is_none() {
            continue;
        }
        match found.of(c) {
            Ok(_) => wanted = true,
            Err(why) => partial.push(format!(
                "{}: no {} cgroup could be used ({why})",
                c.kind().name(),
                c.name()
            )),
        }
    }
    if !wanted {
        return None;
    }
    let taken = pool().pop();
    let mut set = match taken {
        Some(set) => set,
        None => match make(found) {
            Ok(set) => set,
            Err(why) => {
                partial.push(format!("cgroups: {why}; rlimits instead"));
                return None;
            }
        },
    };
    if let Err(why) = set.write(limits) {
        retire(set);
        partial.push(format!("cgroups: {why}; rlimits instead"));
        return None;
    }
    Some(Lease { set: Some(set) })
}

/// A new set: a cgroup per distinct parent, holding every controller
/// found there.
fn make(found: &Found) -> Result<Set, String> {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut members: Vec<Member> = Vec::new();
    for c in [Controller::Memory, Controller::Pids] {
        let Ok(parent) = found.of(c) else { continue };
        if let Some(m) = members
            .iter_mut()
            .find(|m| m.dir.parent() == Some(parent.dir.as_path()))
        {
            m.controllers.push(c);
            continue;
        }
        let dir = parent
            .dir
            .join(format!("sluice-{}-{n}", std::process::id()));
        let made = make_member(&dir, parent.version, c);
        match made {
            Ok(m) => members.push(m),
            Err(e) => {
                retire(Set { members });
                return Err(format!("cannot make cgroup {}: {e}", dir.display()));
            }
        }
    }
    Ok(Set { members })
}

fn make_member(dir: &Path, version: Version, c: Controller) -> std::io::Result<Member> {
    std::fs::create_dir(dir)?;
    let procs = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join(version.join_file()));
    let procs = match procs {
        Ok(f) => OwnedFd::from(f),
        Err(e) => {
            let _ = std::fs::remove_dir(dir);
            return Err(e);
        }
    };
    Ok(Member {
        dir: dir.to_path_buf(),
        version,
        controllers: vec![c],
        procs,
        written: [None, None],
        baseline: Counts::default(),
    })
}

fn put(dir: &Path, file: &str, value: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join(file))?;
    f.write_all(value.as_bytes())
}

impl Member {
    fn has(&self, c: Controller) -> bool {
        self.controllers.contains(&c)
    }

    /// Writes `limit` (`None`: no limit) for `c`, unless written already.
    fn write(&mut self, c: Controller, limit: Option<u64>) -> Result<(), String> {
        let slot = &mut self.written[c as usize];
        if *slot == Some(limit) {
            return Ok(());
        }
        let fail = |file: &str, e: std::io::Error| {
            format!("cannot write {}: {e}", self.dir.join(file).display())
        };
        match (c, self.version) {
            (Controller::Memory, Version::V1) => {
                let bytes = limit.map_or("-1".to_string(), |mb| (mb << 20).to_string());
                write_v1_memory(&self.dir, &bytes).map_err(|(f, e)| fail(f, e))?;
            }
            (Controller::Memory, Version::V2) => {
                let bytes = limit.map_or("max".to_string(), |mb| (mb << 20).to_string());
                put(&self.dir, "memory.max", &bytes).map_err(|e| fail("memory.max", e))?;
                // Swap would let a command hold more than its limit.
                if self.dir.join("memory.swap.max").exists() {
                    let swap = if limit.is_some() { "0" } else { "max" };
                    put(&self.dir, "memory.swap.max", swap)
                        .map_err(|e| fail("memory.swap.max", e))?;
                }
            }
            (Controller::Pids, _) => {
                let n = limit.map_or("max".to_string(), |n| n.to_string());
                put(&self.dir, "pids.max", &n).map_err(|e| fail("pids.max", e))?;
            }
        }
        *slot = Some(limit);
        Ok(())
    }

    /// What the counters say now.
    fn counts(&self) -> Counts {
        let read = |file: &str, key: &str| -> u64 {
            self.read(file)
                .lines()
                .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
                .unwrap_or(0)
        };
        let mut counts = Counts::default();
        if self.has(Controller::Memory) {
            counts.oom_kills = match self.version {
                Version::V1 => read("memory.oom_control", "oom_kill "),
                Version::V2 => read("memory.events", "oom_kill "),
            };
        }
        if self.has(Controller::Pids) {
            counts.fork_failures = read("pids.events", "max ");
        }
        counts
    }

    /// A small cgroup file (a count, a few lines): one read, where
    /// `read_to_string` would ask its size and read twice; every command
    /// settles several.
    fn read(&self, file: &str) -> String {
        use std::io::Read;
        let mut buf = [0u8; 1024];
        let n = std::fs::File::open(self.dir.join(file))
            .and_then(|mut f| f.read(&mut buf))
            .unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    /// The bytes of memory still charged here.
    fn charged(&self) -> Option<u64> {
        let file = match self.version {
            Version::V1 => "memory.usage_in_bytes",
            Version::V2 => "memory.current",
        };
        self.read(file).trim().parse().ok()
    }
}

impl Set {
    /// Whether the command left nothing in the set: no process (nor a
    /// zombie nobody reaped, which `pids.current` still counts though
    /// `cgroup.procs` no longer lists it: the processes of the command
    /// are in every cgroup of the set, so one count is enough), and
    /// little memory charged.
    fn clean(&self) -> bool {
        let empty = match self.members.iter().find(|m| m.has(Controller::Pids)) {
            Some(m) => m.read("pids.current").trim() == "0",
            None => self
                .members
                .iter()
                .all(|m| m.read("cgroup.procs").trim().is_empty()),
        };
        empty
            && self
                .members
                .iter()
                .filter(|m| m.has(Controller::Memory))
                .all(|m| m.charged().is_some_and(|b| b < REUSE_BELOW))
    }
}

/// v1's memory limit with its memory+swap twin (which must never be below
/// it): the order that keeps that true whether the limit rises or falls.
fn write_v1_memory(dir: &Path, bytes: &str) -> Result<(), (&'static str, std::io::Error)> {
    let both = dir.join("memory.memsw.limit_in_bytes").exists();
    let limit =
        |v: &str| put(dir, "memory.limit_in_bytes", v).map_err(|e| ("memory.limit_in_bytes", e));
    let swap = |v: &str| {
        put(dir, "memory.memsw.limit_in_bytes", v).map_err(|e| ("memory.memsw.limit_in_bytes", e))
    };
    if !both {
        return limit(bytes);
    }
    // Lowering: the limit first; raising: memory+swap first.
    if limit(bytes).is_ok() {
        return swap(bytes);
    }
    swap(bytes)?;
    limit(bytes)
}

impl Set {
    fn write(&mut self, limits: &ResourceLimits) -> Result<(), String> {
        for m in &mut self.members {
            for c in m.controllers.clone() {
                m.write(c, limits.get(c.kind()))?;
            }
        }
        Ok(())
    }
}

impl Lease {
    /// The cgroup mechanism enforcing `kind`, if one does.
    pub fn mechanism(&self, kind: Kind) -> Option<Mechanism> {
        let c = [Controller::Memory, Controller::Pids]
            .into_iter()
            .find(|c| c.kind() == kind)?;
        let m = self.members().iter().find(|m| m.has(c))?;
        matches!(m.written[c as usize], Some(Some(_))).then_some(m.version.mechanism())
    }

    /// The file each cgroup is joined through, for the child.
    pub fn procs(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.members().iter().map(|m| m.procs.as_raw_fd())
    }

    fn members(&self) -> &[Member] {
        self.set.as_ref().map_or(&[], |s| s.members.as_slice())
    }

    /// Once the command has ended: what its cgroups counted while it ran,
    /// and the set back in the pool, or removed.
    pub fn settle(mut self) -> Counts {
        let Some(mut set) = self.set.take() else {
            return Counts::default();
        };
        let mut counted = Counts::default();
        for m in &mut set.members {
            let now = m.counts();
            counted.oom_kills += now.oom_kills.saturating_sub(m.baseline.oom_kills);
            counted.fork_failures += now.fork_failures.saturating_sub(m.baseline.fork_failures);
            m.baseline = now;
        }
        if set.clean() {
            pool().push(set);
        } else {
            retire(set);
        }
        counted
    }
}

/// Removes a set on a thread of its own: a cgroup goes once the last of
/// its processes has been reaped, which may take a moment after its
/// command's end.
fn retire(set: Set) {
    if set.members.is_empty() {
        return;
    }
    let dirs: Vec<PathBuf> = set.members.into_iter().map(|m| m.dir).collect();
    let removing = std::thread::Builder::new()
        .name("sluice-cgroup".into())
        .spawn({
            let dirs = dirs.clone();
            move || remove_all(&dirs, Duration::from_secs(10))
        });
    if removing.is_err() {
        remove_all(&dirs, Duration::ZERO);
    }
}

fn remove_all(dirs: &[PathBuf], patience: Duration) {
    let until = std::time::Instant::now() + patience;
    let mut left: Vec<&PathBuf> = dirs.iter().collect();
    loop {
        left.retain(|d| std::fs::remove_dir(d).is_err_and(|e| e.kind() != ErrorKind::NotFound));
        if left.is_empty() || std::time::Instant::now() >= until {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Removes the pooled sets: at the end of a run, so no cgroup outlives the
/// process that made it.
pub fn tidy() {
    let sets: Vec<Set> = pool().drain(..).collect();
    for set in sets {
        let dirs: Vec<PathBuf> = set.members.into_iter().map(|m| m.dir).collect();
        remove_all(&dirs, Duration::ZERO);
    }
}

#[cfg(test)]
mod tests;
