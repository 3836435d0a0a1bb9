//! Resource limits for one command: what a policy's `limits` table asks
//! (`memoryMb`, `pids`, `cpuSeconds`, `fileSizeMb`), how each is enforced
//! on this machine, and which the command hit.
//!
//! Each limit has one meaning whatever enforces it, and the strongest
//! mechanism the machine allows:
//!
//! - `memoryMb`: the memory of the whole command, every process of it
//!   together: a memory cgroup (v2 where one is delegated to sluice, else
//!   v1), whose OOM killer ends a process of the command (SIGKILL) at the
//!   limit. Without one, `RLIMIT_DATA` on each process (`partial`: each
//!   process gets the whole budget; shared memory and tmpfs files are not
//!   counted), where an allocation past it fails.
//! - `pids`: the processes and threads of the command at once: a pids
//!   cgroup, where a fork past it fails (EAGAIN). Without one,
//!   `RLIMIT_NPROC` (`partial`: it counts every process of the user), and
//!   nothing at all for root, whom the kernel exempts (`none`).
//! - `cpuSeconds`: the CPU time of each process (`RLIMIT_CPU`): SIGXCPU at
//!   the limit, SIGKILL a second later.
//! - `fileSizeMb`: the largest file a process may make or grow
//!   (`RLIMIT_FSIZE`): SIGXFSZ, or EFBIG where the signal is ignored.
//!
//! A command is bounded before its program runs: the child joins its
//! cgroups and sets its limits between fork and exec ([`ChildStep`]), so
//! nothing it starts is ever outside them, and with no capabilities (both
//! runners drop them) it can lower its limits but never raise them.

mod cgroup;
mod rlimit;

pub use cgroup::{describe as describe_cgroups, mount_points as cgroup_mounts, tidy};

use serde::Serialize;
use std::collections::BTreeMap;
use std::os::fd::RawFd;

/// One limit a policy can set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    MemoryMb,
    Pids,
    CpuSeconds,
    FileSizeMb,
}

impl Kind {
    /// Every limit, in the order results list them.
    pub const ALL: [Kind; 4] = [
        Kind::MemoryMb,
        Kind::Pids,
        Kind::CpuSeconds,
        Kind::FileSizeMb,
    ];

    /// The name a policy and a result give it (`memoryMb`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::MemoryMb => "memoryMb",
            Kind::Pids => "pids",
            Kind::CpuSeconds => "cpuSeconds",
            Kind::FileSizeMb => "fileSizeMb",
        }
    }

    /// The limit a policy names `name`.
    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The smallest value a policy may give: below it the runner itself
    /// could not start the command (bubblewrap's own processes count
    /// toward `pids`, and a shell needs some memory).
    pub fn floor(self) -> u64 {
        match self {
            Kind::MemoryMb => 32,
            Kind::Pids => 8,
            Kind::CpuSeconds | Kind::FileSizeMb => 1,
        }
    }

    /// What the value counts, for messages.
    pub fn unit(self) -> &'static str {
        match self {
            Kind::MemoryMb => "MiB of memory for the whole command",
            Kind::Pids => "processes and threads of the command at once",
            Kind::CpuSeconds => "seconds of CPU time for each process",
            Kind::FileSizeMb => "MiB for any one file a process writes",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A policy's `limits`: each `None` when it sets none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceLimits([Option<u64>; 4]);

impl ResourceLimits {
    pub fn get(&self, kind: Kind) -> Option<u64> {
        self.0[kind.index()]
    }

    pub fn set(&mut self, kind: Kind, value: u64) {
        self.0[kind.index()] = Some(value);
    }

    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }

    /// The limits set, in [`Kind::ALL`]'s order.
    pub fn iter(&self) -> impl Iterator<Item = (Kind, u64)> + '_ {
        Kind::ALL
            .into_iter()
            .filter_map(|k| self.get(k).map(|v| (k, v)))
    }

    /// The stricter of `self` and `other`, limit by limit: several
    /// policies bound a command by the smallest value any of them sets.
    pub fn strictest(self, other: ResourceLimits) -> ResourceLimits {
        let mut out = self;
        for (kind, value) in other.iter() {
            if out.get(kind).is_none_or(|v| value < v) {
                out.set(kind, value);
            }
        }
        out
    }
}

/// What enforces one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Mechanism {
    /// A cgroup of the unified hierarchy delegated to sluice.
    #[serde(rename = "cgroup-v2")]
    CgroupV2,
    /// A cgroup of a legacy (v1) controller's hierarchy.
    #[serde(rename = "cgroup-v1")]
    CgroupV1,
    /// A resource limit of each process (setrlimit).
    #[serde(rename = "rlimit")]
    Rlimit,
    /// Nothing: the machine offers no way to enforce it for this process.
    #[serde(rename = "none")]
    None,
}

/// A command's limits, prepared before it is forked: the cgroups it joins
/// (taken from the pool, limits written) and the rlimits it sets. Kept
/// until every process of the command has ended, then [`Bounds::settle`]d.
#[derive(Debug)]
pub struct Bounds {
    limits: ResourceLimits,
    lease: Option<cgroup::Lease>,
    rlimits: rlimit::Set,
    mechanisms: [Option<Mechanism>; 4],
    partial: Vec<String>,
}

impl Bounds {
    /// Prepares `limits` for one command: a cgroup where the machine
    /// allows one (memory and pids), rlimits for the rest and where it
    /// does not. Never fails: a cgroup that cannot be made leaves its limit
    /// to the fallback, and the reason in [`Settled`]'s `partial`.
    pub fn prepare(limits: ResourceLimits) -> Bounds {
        let mut partial = Vec::new();
        let lease = cgroup::lease(&limits, &mut partial);
        let by_cgroup = |kind| lease.as_ref().and_then(|l| l.mechanism(kind));
        let mut mechanisms = [None; 4];
        let mut rlimits = rlimit::Set::default();
        for (kind, value) in limits.iter() {
            let mechanism = match by_cgroup(kind) {
                Some(m) => m,
                None => rlimit::add(&mut rlimits, kind, value, &mut partial),
            };
            mechanisms[kind.index()] = Some(mechanism);
        }
        Bounds {
            limits,
            lease,
            rlimits,
            mechanisms,
            partial,
        }
    }

    /// What the child does between fork and exec.
    pub fn step(&self) -> ChildStep {
        let mut step = ChildStep::default();
        if let Some(lease) = &self.lease {
            for fd in lease.procs() {
                step.push_fd(fd);
            }
        }
        step.rlimits = self.rlimits;
        step
    }

    /// Once every process of the command has ended: what its cgroups
    /// counted, their return to the pool (or their removal).
    pub fn settle(self) -> Settled {
        let counts = self.lease.map(cgroup::Lease::settle).unwrap_or_default();
        Settled {
            limits: self.limits,
            mechanisms: self.mechanisms,
            partial: self.partial,
            oom_kills: counts.oom_kills,
            fork_failures: counts.fork_failures,
        }
    }
}

/// What the child of a bounded command does between fork and exec: write
/// `0` (itself) into each cgroup's join file (v1's `tasks`, v2's
/// `cgroup.procs`), then set each rlimit. The child has one thread.
/// Only raw system calls on what was prepared: no allocation. A shared
/// sandbox's helper builds its own from the descriptors and the rlimits it
/// was sent ([`ChildStep::with_rlimits`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildStep {
    fds: [RawFd; 2],
    nfds: usize,
    rlimits: rlimit::Set,
}

impl ChildStep {
    /// The step that joins the cgroups `fds` (their join files, open for
    /// writing; at most two) and sets the rlimits `encoded` holds
    /// ([`ChildStep::encoded_rlimits`]); `None` when `encoded` is not one.
    pub fn with_rlimits(fds: &[RawFd], encoded: &[u8]) -> Option<ChildStep> {
        if fds.len() > 2 {
            return None;
        }
        let mut step = ChildStep {
            rlimits: rlimit::Set::decode(encoded)?,
            ..ChildStep::default()
        };
        for &fd in fds {
            step.push_fd(fd);
        }
        Some(step)
    }

    fn push_fd(&mut self, fd: RawFd) {
        if self.nfds < self.fds.len() {
            self.fds[self.nfds] = fd;
            self.nfds += 1;
        }
    }

    /// The cgroups' descriptors the step writes to.
    pub fn fds(&self) -> &[RawFd] {
        &self.fds[..self.nfds]
    }

    /// The rlimits, as bytes for a helper ([`ChildStep::with_rlimits`]).
    pub fn encoded_rlimits(&self) -> Vec<u8> {
        self.rlimits.encode()
    }

    /// Joins the cgroups and sets the rlimits, in the child: the errno of
    /// the first step that failed (the command must then not run, or it
    /// would run unbounded).
    ///
    /// # Safety
    /// Only raw system calls on the prepared values: safe between fork
    /// and exec, where the caller must be.
    pub unsafe fn apply(&self) -> Result<(), i32> {
        for &fd in self.fds() {
            if nix::libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                return Err(errno());
            }
        }
        self.rlimits.apply()
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(nix::libc::EIO)
}

/// A bounded command's limits once it ended: how each was enforced, and
/// what the cgroups counted.
#[derive(Debug, Clone)]
pub struct Settled {
    limits: ResourceLimits,
    mechanisms: [Option<Mechanism>; 4],
    partial: Vec<String>,
    /// Processes the memory cgroup's OOM killer ended.
    oom_kills: u64,
    /// Forks the pids cgroup refused.
    fork_failures: u64,
}

/// One limit a command hit, and how that is known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hit {
    /// The limit's name (`memoryMb`).
    pub limit: &'static str,
    /// What happened, and what says so.
    pub how: String,
}

/// A result's `limits`: the values, how each was enforced, what is
/// partial, and what the command hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Each limit set, by name.
    #[serde(flatten)]
    pub values: BTreeMap<&'static str, u64>,
    /// What enforced each limit, by name.
    pub enforcement: BTreeMap<&'static str, Mechanism>,
    /// What a mechanism could not express of its limit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partial: Vec<String>,
    /// The limits the command hit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hit: Vec<Hit>,
    /// What was hit and how to raise it, in a sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

impl Report {
    /// A report with every field, or the fewest, for schema tests.
    #[cfg(test)]
    pub fn sample(full: bool) -> Report {
        if !full {
            return Report {
                values: BTreeMap::new(),
                enforcement: BTreeMap::new(),
                partial: Vec::new(),
                hit: Vec::new(),
                notice: None,
            };
        }
        Report {
            values: Kind::ALL.iter().map(|k| (k.name(), 64)).collect(),
            enforcement: Kind::ALL
                .iter()
                .map(|k| (k.name(), Mechanism::Rlimit))
                .collect(),
            partial: vec!["memoryMb: per process".into()],
            hit: vec![Hit {
                limit: "pids",
                how: "a fork failed".into(),
            }],
            notice: Some("the command hit limits.pids".into()),
        }
    }
}

impl Settled {
    fn mechanism(&self, kind: Kind) -> Option<Mechanism> {
        self.mechanisms[kind.index()]
    }

    /// The result's `limits` for a command that ended with `status` (its
    /// exit code, or 128 plus the signal that ended it, as a shell gives
    /// it) having printed `said` (its stderr, or its merged output).
    /// `set_by` names the policy each limit came from, for the notice.
    pub fn report(&self, status: i32, said: &str, set_by: &dyn Fn(Kind) -> String) -> Report {
        let hit = self.hits(status, said);
        let notice = (!hit.is_empty()).then(|| self.notice(&hit, set_by));
        Report {
            values: self.limits.iter().map(|(k, v)| (k.name(), v)).collect(),
            enforcement: Kind::ALL
                .into_iter()
                .filter_map(|k| Some((k.name(), self.mechanism(k)?)))
                .collect(),
            partial: self.partial.clone(),
            hit,
            notice,
        }
    }

    /// The limits hit: counted by a cgroup, or told by the signal that
    /// ended the command, or by the words the system gives the failure an
    /// rlimit causes.
    fn hits(&self, status: i32, said: &str) -> Vec<Hit> {
        Kind::ALL
            .into_iter()
            .filter_map(|kind| {
                let how = self.how_hit(kind, self.limits.get(kind)?, status, said)?;
                Some(Hit {
                    limit: kind.name(),
                    how,
                })
            })
            .collect()
    }

    /// How the command hit `kind`, set to `value`, if it did.
    fn how_hit(&self, kind: Kind, value: u64, status: i32, said: &str) -> Option<String> {
        let by = self.mechanism(kind)?;
        let counted = matches!(by, Mechanism::CgroupV1 | Mechanism::CgroupV2);
        let failed = status != 0;
        match kind {
            Kind::MemoryMb if counted => (self.oom_kills > 0).then(|| format!(
                "the memory cgroup's OOM killer ended {} process(es) of the command (SIGKILL) at {value} MiB",
                self.oom_kills
            )),
            Kind::MemoryMb => rlimit::memory_words(said).filter(|_| failed).map(|words| format!(
                "an allocation failed at the per-process RLIMIT_DATA of {value} MiB (the command said {words:?})"
            )),
            Kind::Pids if counted => (self.fork_failures > 0).then(|| format!(
                "the pids cgroup refused {} fork(s) (EAGAIN) at {value} processes and threads",
                self.fork_failures
            )),
            Kind::Pids => (by == Mechanism::Rlimit && failed && rlimit::fork_words(said)).then(|| format!(
                "a fork failed (EAGAIN) under RLIMIT_NPROC of {value}, which counts every process of the user"
            )),
            Kind::CpuSeconds => rlimit::cpu_signalled(status, said).then(|| {
                format!("a process reached {value} s of CPU time and got SIGXCPU (RLIMIT_CPU)")
            }),
            Kind::FileSizeMb => rlimit::file_size_hit(status, said)
                .map(|how| format!("{how} at {value} MiB (RLIMIT_FSIZE)")),
        }
    }

    fn notice(&self, hits: &[Hit], set_by: &dyn Fn(Kind) -> String) -> String {
        let each: Vec<String> = hits
            .iter()
            .filter_map(|h| Kind::parse(h.limit))
            .map(|k| {
                let value = self.limits.get(k).unwrap_or_default();
                format!(
                    "limits.{} = {value} ({}), set by {}: {}; raise it in that policy's `limits` table",
                    k.name(),
                    k.unit(),
                    set_by(k),
                    hits.iter().find(|h| h.limit == k.name()).map_or("", |h| h.how.as_str())
                )
            })
            .collect();
        format!(
            "the command hit its resource limits, so it was stopped or refused, not crashed: {}",
            each.join("; ")
        )
    }
}

#[cfg(test)]
mod tests;
