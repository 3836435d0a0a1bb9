//! The per-process side: the rlimits a command's child sets before exec,
//! and how a failure they cause shows (a signal, the system's words).

// libc's resource numbers are `u32` with glibc and `i32` with musl: the
// casts are needed on one of them.
#![allow(clippy::unnecessary_cast)]

use super::{Kind, Mechanism};
use nix::libc;

/// The resources sluice sets, as the kernel numbers them.
const RESOURCES: [u32; 4] = [
    libc::RLIMIT_DATA as u32,
    libc::RLIMIT_NPROC as u32,
    libc::RLIMIT_CPU as u32,
    libc::RLIMIT_FSIZE as u32,
];

/// One encoded rlimit: resource (u32), soft and hard (u64 each).
const ENCODED: usize = 4 + 8 + 8;

/// Up to four rlimits, fixed in size so the child needs no allocation.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Set {
    items: [(u32, u64, u64); 4],
    n: usize,
}

impl Set {
    fn push(&mut self, resource: u32, soft: u64, hard: u64) {
        if self.n < self.items.len() {
            self.items[self.n] = (resource, soft, hard);
            self.n += 1;
        }
    }

    fn items(&self) -> &[(u32, u64, u64)] {
        &self.items[..self.n]
    }

    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.n * ENCODED);
        for &(resource, soft, hard) in self.items() {
            out.extend_from_slice(&resource.to_le_bytes());
            out.extend_from_slice(&soft.to_le_bytes());
            out.extend_from_slice(&hard.to_le_bytes());
        }
        out
    }

    /// The set `bytes` encodes; `None` for anything else (a resource
    /// sluice never sets among them).
    pub(super) fn decode(bytes: &[u8]) -> Option<Set> {
        if !bytes.len().is_multiple_of(ENCODED) || bytes.len() / ENCODED > 4 {
            return None;
        }
        let mut set = Set::default();
        for item in bytes.chunks_exact(ENCODED) {
            let resource = u32::from_le_bytes(item[..4].try_into().ok()?);
            if !RESOURCES.contains(&resource) {
                return None;
            }
            let soft = u64::from_le_bytes(item[4..12].try_into().ok()?);
            let hard = u64::from_le_bytes(item[12..].try_into().ok()?);
            set.push(resource, soft, hard);
        }
        Some(set)
    }

    /// Sets each limit, never above the hard limit the child already has
    /// (raising it needs a capability the command must not have): the
    /// errno of the first that fails.
    ///
    /// # Safety
    /// Raw system calls alone: for the child between fork and exec.
    pub(super) unsafe fn apply(&self) -> Result<(), i32> {
        for &(resource, soft, hard) in self.items() {
            let mut now = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(resource as _, &mut now) != 0 {
                return Err(super::errno());
            }
            let hard = hard.min(now.rlim_max);
            let new = libc::rlimit {
                rlim_cur: soft.min(hard),
                rlim_max: hard,
            };
            if libc::setrlimit(resource as _, &new) != 0 {
                return Err(super::errno());
            }
        }
        Ok(())
    }
}

const MIB: u64 = 1 << 20;

/// Adds `kind`'s rlimit for `value` to `set`: what enforces it then, with
/// what that leaves out in `partial`.
pub(super) fn add(set: &mut Set, kind: Kind, value: u64, partial: &mut Vec<String>) -> Mechanism {
    match kind {
        Kind::MemoryMb => {
            let bytes = value.saturating_mul(MIB);
            set.push(libc::RLIMIT_DATA as u32, bytes, bytes);
            partial.push(format!(
                "memoryMb: RLIMIT_DATA bounds each process's private writable memory to {value} MiB, not the \
                 command's whole, and not shared memory or files in a tmpfs (/tmp under bubblewrap)"
            ));
            Mechanism::Rlimit
        }
        Kind::Pids if nix::unistd::getuid().is_root() => {
            partial.push(
                "pids: not enforced: sluice runs as root, whose processes the kernel never holds to RLIMIT_NPROC, \
                 and no pids cgroup could be used"
                    .into(),
            );
            Mechanism::None
        }
        Kind::Pids => {
            set.push(libc::RLIMIT_NPROC as u32, value, value);
            partial.push(format!(
                "pids: RLIMIT_NPROC counts every process and thread of the user on the machine against {value}, \
                 not the command's alone"
            ));
            Mechanism::Rlimit
        }
        Kind::CpuSeconds => {
            // SIGXCPU at the limit; SIGKILL a second later for a process
            // that ignores it.
            set.push(libc::RLIMIT_CPU as u32, value, value.saturating_add(1));
            Mechanism::Rlimit
        }
        Kind::FileSizeMb => {
            let bytes = value.saturating_mul(MIB);
            set.push(libc::RLIMIT_FSIZE as u32, bytes, bytes);
            Mechanism::Rlimit
        }
    }
}

/// What programs print when an allocation fails (Python, libc's strerror
/// of ENOMEM, Rust, C++, Go, the JVM).
const MEMORY_WORDS: [&str; 7] = [
    "MemoryError",
    "Cannot allocate memory",
    "memory allocation of",
    "std::bad_alloc",
    "out of memory",
    "Out of memory",
    "OutOfMemoryError",
];

/// The words of `said` that tell an allocation failed, if any.
pub(super) fn memory_words(said: &str) -> Option<&'static str> {
    MEMORY_WORDS.into_iter().find(|w| said.contains(w))
}

/// Whether `said` tells a fork failed for want of processes (EAGAIN, in
/// libc's words, a shell's, Python's).
pub(super) fn fork_words(said: &str) -> bool {
    [
        "Resource temporarily unavailable",
        "Cannot fork",
        "can't fork",
    ]
    .iter()
    .any(|w| said.contains(w))
}

/// Whether the command ended by SIGXCPU (its status 128 + 24), or a shell
/// said a process of it did.
pub(super) fn cpu_signalled(status: i32, said: &str) -> bool {
    status == 128 + libc::SIGXCPU || said.contains("CPU time limit exceeded")
}

/// How a write past the file size limit showed: SIGXFSZ (status 128 + 25,
/// or a shell's words for it), or EFBIG where the program ignores the
/// signal (Python does).
pub(super) fn file_size_hit(status: i32, said: &str) -> Option<&'static str> {
    if status == 128 + libc::SIGXFSZ || said.contains("File size limit exceeded") {
        return Some("a process wrote past the file size limit and got SIGXFSZ");
    }
    (status != 0 && said.contains("File too large"))
        .then_some("a write failed with EFBIG (File too large)")
}
