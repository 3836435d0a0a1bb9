//! The landlock runner: the fallback when bubblewrap is absent or cannot
//! create namespaces. Four layers confine the command:
//!
//! - a landlock ruleset: what it may read, list and run (the profile's
//!   readable trees, the writable ones, private temp storage, the usual
//!   devices, `/proc`), entry by entry around hidden paths; what it may
//!   write, entry by entry around read-only and hidden ones; TCP and
//!   abstract Unix sockets when the network is closed;
//! - no capabilities, even for root (a command as root keeps uid 0 and the
//!   permission bits that come with it, nothing more), and a session of its
//!   own it cannot leave, so everything it starts is stopped with it;
//! - a seccomp filter refusing what landlock cannot see: sockets other than
//!   Unix ones when the network is closed, `setsid`, new user namespaces,
//!   io_uring, inode flags;
//! - and, through the same filter, what landlock leaves unchecked is handed
//!   to sluice's supervisor ([`super::supervise`]): metadata changes (mode,
//!   owner, times, extended attributes) and, on kernels without landlock's
//!   Unix socket right (ABI 9), connections to named sockets.
//!
//! Everything that allocates or takes locks (opening paths, building the
//! ruleset and the BPF program) happens in the parent, in [`prepare`]. The
//! parent is multi-threaded, so between fork and exec the child may only
//! make raw syscalls: [`Prepared::apply`] does exactly that.

use super::caps;
use super::supervise::{self, Rules, Supervisor};
use super::{outermost, Enforcement, Mode, Profile};
use crate::exec::{Launch, Wrap};
use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope, ABI,
};
use nix::libc;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The newest ABI whose rights we ask for. The ruleset is built best effort,
/// so rights the running kernel lacks are dropped, not refused.
const NEWEST: ABI = ABI::V10;

/// The first ABI that can restrict connecting to named Unix sockets
/// (`LANDLOCK_ACCESS_FS_RESOLVE_UNIX`); before it the supervisor does.
const RESOLVE_UNIX_ABI: u32 = 9;

/// What every program may use under `/dev`, as bubblewrap's `--dev /dev`
/// gives it, and what it may do there. Never ioctl: on a terminal it would
/// allow TIOCSTI, typing commands into the user's shell. Not `/dev/pts`
/// (the user's own terminals would be among them: no pseudo-terminals under
/// landlock), not `/dev/shm` (shared with every process of the machine).
/// `/dev/tty` opens nothing: the command leads a session without a
/// controlling terminal.
fn devices() -> [(&'static str, BitFlags<AccessFs>); 6] {
    let rw = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    let ro = BitFlags::from(AccessFs::ReadFile);
    [
        ("/dev/null", rw),
        ("/dev/zero", rw),
        ("/dev/full", rw),
        ("/dev/random", ro),
        ("/dev/urandom", ro),
        ("/dev/tty", AccessFs::ReadFile | AccessFs::WriteFile),
    ]
}

/// Why `/proc` is partial under landlock, whatever the profile.
const PROC_GAP: &str = "landlock cannot hide other processes: a command sees in /proc every \
     process of the machine with its command line and state (the kernel refuses it their \
     environment, memory and open files); install bubblewrap for full enforcement";

/// Why hidden and unreadable paths are partial under landlock.
const LOOKUP_GAP: &str = "landlock refuses opening what a command may not read, not looking \
     it up: whether such a path exists, its size and dates, and the names in a hidden \
     folder stay visible; install bubblewrap for full enforcement";

/// What the child must do between fork and exec, prepared in the parent,
/// and what the supervisor checks for it.
#[derive(Debug)]
pub struct Prepared {
    /// The landlock ruleset to enforce.
    ruleset: Option<OwnedFd>,
    /// The seccomp program (see [`filter`]).
    filter: Vec<libc::sock_filter>,
    /// Whether the filter hands calls to the supervisor, which then must
    /// receive the filter's listener before the command can make them
    /// (always, but in this module's tests of the ruleset alone).
    supervised: bool,
    /// Whether this process may empty the bounding set (it has
    /// CAP_SETPCAP), and the highest capability number the kernel knows.
    drop_bounding: bool,
    last_cap: u32,
    rules: Arc<Rules>,
}

// Shared through an Arc with `pre_exec` closures, which must be Send + Sync.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Prepared>();
};

/// Which landlock ABI this kernel offers, or why the runner cannot work
/// here (for `sluice doctor`). Also checks that seccomp filters, and their
/// user notifications, work: the runner needs both.
pub fn probe() -> Result<u32, String> {
    let abi = landlock_abi()?;
    seccomp_available()?;
    Ok(abi)
}

/// Variables that keep git working where its configuration exists but the
/// command may not read it: git stops at a configuration file it cannot
/// open (EACCES), where under bubblewrap the file is simply not there. The
/// global file then becomes the readable one of the two, or none; the
/// system file is skipped.
pub fn git_config_env(profile: &Profile) -> Vec<(String, String)> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let globals: Vec<PathBuf> = [
        home.map(|h| h.join(".gitconfig")),
        config.map(|c| c.join("git/config")),
    ]
    .into_iter()
    .flatten()
    .filter(|p| p.exists())
    .collect();
    let readable = |p: &Path| profile.sees(p) && !profile.hidden.iter().any(|h| p.starts_with(h));
    let mut env = Vec::new();
    if globals.iter().any(|p| !readable(p)) {
        let kept = globals.iter().find(|p| readable(p));
        let kept = kept.map_or("/dev/null".into(), |p| p.display().to_string());
        env.push(("GIT_CONFIG_GLOBAL".into(), kept));
    }
    let system = Path::new("/etc/gitconfig");
    if system.exists() && !readable(system) {
        env.push(("GIT_CONFIG_NOSYSTEM".into(), "1".into()));
    }
    env
}

/// Builds what [`Prepared::apply`] enforces for `profile`. The reasons are
/// this runner's own (the profile's `partial` ones come on top); the
/// enforcement accounts for both. Fails (so the caller refuses the call)
/// when the kernel cannot enforce the profile at all.
///
/// It also makes this process non-dumpable, once: a command running as the
/// same user could otherwise read sluice's environment (its credentials)
/// and open its files through `/proc/<sluice>`.
pub fn prepare(profile: &Profile) -> Result<(Prepared, Enforcement, Vec<String>), String> {
    shield_process().map_err(|e| format!("cannot keep commands out of sluice's process: {e}"))?;
    seccomp_available()?;
    let grants = Grants::of(profile)?;
    let abi = landlock_abi()?;
    let ruleset = build_ruleset(profile, &grants)?;
    let mut reasons = abi_gaps(abi);
    // Connections to named sockets follow what the command can see: landlock
    // says so itself from ABI 9; before, the supervisor does, and datagram
    // sockets (whose sends name their destination out of seccomp's sight)
    // are refused.
    let sockets = abi < RESOLVE_UNIX_ABI && !sees_everything(profile);
    let rules = Arc::new(Rules {
        changeable: grants.write,
        visible: grants.read,
        network: profile.network,
    });
    let needs = Needs {
        network: profile.network,
        sockets,
    };
    let filter = filter(&needs);
    if filter.len() > libc::BPF_MAXINSNS as usize {
        return Err("seccomp: the filter is too long".to_string());
    }
    reasons.push(PROC_GAP.to_string());
    if !sees_everything(profile) {
        reasons.push(LOOKUP_GAP.to_string());
    }
    let enforcement = if reasons.is_empty() && profile.partial.is_empty() {
        Enforcement::Full
    } else {
        Enforcement::Partial
    };
    let prepared = Prepared {
        ruleset,
        filter,
        supervised: true,
        drop_bounding: caps::has(CAP_SETPCAP),
        last_cap: last_capability(),
        rules,
    };
    Ok((prepared, enforcement, reasons))
}

/// Makes this process non-dumpable (`PR_SET_DUMPABLE 0`), so that a process
/// of the same user without CAP_SYS_PTRACE (every confined command) can
/// neither read its environment, memory and open files through `/proc`,
/// nor attach to it. Idempotent; the binary calls it first thing, and
/// [`prepare`] again for programs that embed sluice. Commands are not
/// affected: exec makes them dumpable again.
pub fn shield_process() -> io::Result<()> {
    // SAFETY: prctl with integer arguments touches no memory of ours.
    check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } as libc::c_long)
}

/// Whether every path is visible: `/` readable, nothing hidden.
fn sees_everything(profile: &Profile) -> bool {
    profile.hidden.is_empty() && profile.readable.iter().any(|r| r == Path::new("/"))
}

impl Prepared {
    /// Runs in the child after fork, before exec: only raw syscalls (no
    /// allocation, no locks), so it is safe in a multi-threaded parent's
    /// `pre_exec`. `channel` is the child's end of [`supervise::channel`],
    /// where the filter's listener goes; it is required when the filter
    /// hands calls to the supervisor (a filter nobody listens to would
    /// block the command's first such call for ever).
    ///
    /// Order matters: a session first (the filter refuses `setsid`), then
    /// no_new_privs (landlock and seccomp need it without CAP_SYS_ADMIN,
    /// and it keeps exec from granting capabilities back), capabilities
    /// dropped, landlock, and the filter last.
    pub fn apply(&self, channel: Option<RawFd>) -> io::Result<()> {
        if self.supervised && channel.is_none() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: setsid takes no arguments. The child is not a process
        // group leader (the executor does not give it a group of its own).
        check(unsafe { libc::setsid() } as libc::c_long)?;
        // SAFETY: prctl with integer arguments touches no memory of ours.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } as libc::c_long)?;
        self.drop_capabilities()?;
        if let Some(fd) = &self.ruleset {
            // SAFETY: the fd is a live landlock ruleset we own; flags 0.
            check(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0) })?;
        }
        let program = libc::sock_fprog {
            // `prepare` keeps the program under BPF_MAXINSNS.
            len: self.filter.len() as libc::c_ushort,
            // The kernel only reads the program.
            filter: self.filter.as_ptr() as *mut libc::sock_filter,
        };
        if !self.supervised {
            // SAFETY: `program` points at our live instructions; the kernel
            // copies them before returning.
            return check(unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &program,
                )
            });
        }
        // Once the supervisor has a call, only a fatal signal interrupts the
        // wait for its answer (a handled one would restart the call, and the
        // supervisor's work on it, over and over); kernels before 5.19 lack
        // the flag.
        let mut flags =
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
        let listener = loop {
            // SAFETY: as above; with NEW_LISTENER the kernel returns a new fd.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    flags,
                    &program,
                )
            };
            if rc >= 0 {
                break rc as RawFd;
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINVAL)
                && flags & libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV != 0
            {
                flags &= !libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
                continue;
            }
            return Err(err);
        };
        let sent = supervise::send_listener(channel.unwrap_or(-1), listener);
        // SAFETY: the listener is ours; the supervisor holds its own copy.
        unsafe { libc::close(listener) };
        sent
    }

    /// Leaves the command no capability, even as root: the bounding set
    /// emptied (when we may), the ambient set cleared, and the effective,
    /// permitted and inheritable sets zeroed. With no_new_privs set, exec
    /// never grants any back (a root exec gets at most what it had).
    fn drop_capabilities(&self) -> io::Result<()> {
        if self.drop_bounding {
            for cap in 0..=self.last_cap {
                // SAFETY: prctl with integer arguments.
                let rc =
                    unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
                if rc < 0 {
                    let err = io::Error::last_os_error();
                    // Past the kernel's last capability: done.
                    if err.raw_os_error() == Some(libc::EINVAL) {
                        break;
                    }
                    return Err(err);
                }
            }
        }
        // SAFETY: prctl with integer arguments.
        let rc = unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            )
        };
        // Kernels before 4.3 have no ambient set: nothing to clear.
        if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            return Err(io::Error::last_os_error());
        }
        caps::set(&[caps::Data::default(); 2])
    }
}

/// Needed to empty the bounding set.
const CAP_SETPCAP: u32 = 8;

/// The highest capability number this kernel knows (`cap_last_cap`).
fn last_capability() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}

/// Turns a raw syscall result into an error from errno (no allocation).
fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The kernel's landlock ABI version, or why landlock is unusable. Asked
/// with a raw syscall: the `landlock` crate keeps its probe private.
fn landlock_abi() -> Result<u32, String> {
    // SAFETY: a null attribute with size 0 and the VERSION flag only asks
    // for the ABI number.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    if version >= 1 {
        return Ok(version as u32);
    }
    let err = io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::ENOSYS) => "landlock is unavailable: this kernel lacks it (it needs Linux 5.13 \
             or later built with CONFIG_SECURITY_LANDLOCK); install bubblewrap instead"
            .to_string(),
        Some(libc::EOPNOTSUPP) => "landlock is unavailable: the kernel has it but it is disabled \
             at boot; add `landlock` to the kernel's `lsm=` parameter, or install bubblewrap"
            .to_string(),
        _ => format!("landlock is unavailable: probing it failed ({err}); install bubblewrap"),
    })
}

/// Whether seccomp filters returning an errno and handing calls to a
/// supervisor work here (a kernel without CONFIG_SECCOMP_FILTER, or one
/// older than 5.0, says no).
fn seccomp_available() -> Result<(), String> {
    for action in [libc::SECCOMP_RET_ERRNO, libc::SECCOMP_RET_USER_NOTIF] {
        // SAFETY: the kernel reads one u32 from `action`.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_GET_ACTION_AVAIL,
                0,
                &action as *const u32,
            )
        };
        check(rc).map_err(|err| {
            format!(
                "seccomp filters with user notification are unavailable ({err}), so the landlock \
                 runner cannot confine commands; use Linux 5.0 or later with \
                 CONFIG_SECCOMP_FILTER, or install bubblewrap"
            )
        })?;
    }
    Ok(())
}

/// What the profile asks that this ABI cannot enforce (files only: the
/// network is closed by seccomp whatever the ABI).
fn abi_gaps(abi: u32) -> Vec<String> {
    let mut gaps = Vec::new();
    if abi < 3 {
        gaps.push(format!(
            "landlock ABI {abi} cannot stop truncating files outside the writable roots \
             (needs Linux 6.2); install bubblewrap for full enforcement"
        ));
    }
    if abi < 5 {
        gaps.push(format!(
            "landlock ABI {abi} cannot restrict ioctl on devices (needs Linux 6.10); \
             install bubblewrap for full enforcement"
        ));
    }
    gaps
}

/// Kernel trees no grant reaches through a tree that holds them: `/dev`
/// (a raw disk would bypass every file rule; only the usual devices are
/// granted), `/proc` (read only, granted on its own: `/proc/sys` written by
/// root without capabilities would change the kernel, a `core_pattern`
/// running a program as root) and `/sys` (never written, `uevent_helper`
/// alike). bubblewrap mounts its own `/dev` and `/proc` and keeps
/// `/proc/sys` read-only; landlock has the machine's, so it leaves them out.
const KERNEL_READS: [&str; 2] = ["/dev", "/proc"];
const KERNEL_WRITES: [&str; 3] = ["/dev", "/proc", "/sys"];

/// What landlock grants, each path with whether it is a folder (granted
/// with everything beneath it). The supervisor checks against the same
/// lists: a command may change the metadata of what it may write, and
/// connect to the named sockets it may see.
#[derive(Debug)]
struct Grants {
    /// Read, list, run: the readable trees, the writable ones and private
    /// temp storage, entry by entry around hidden paths.
    read: Vec<(PathBuf, bool)>,
    /// Folders holding a hidden path: listed only, since a right on a
    /// folder covers everything beneath it.
    listed: Vec<PathBuf>,
    /// Everything: the writable trees and private temp storage, entry by
    /// entry around read-only and hidden paths.
    write: Vec<(PathBuf, bool)>,
}

impl Grants {
    fn of(profile: &Profile) -> Result<Grants, String> {
        let mut grants = Grants {
            read: Vec::new(),
            listed: Vec::new(),
            write: Vec::new(),
        };
        let writable = outermost(writable_roots(profile));
        for root in &writable {
            // A writable tree must exist; landlock cannot grant a name.
            if let Err(e) = std::fs::metadata(root) {
                return Err(cannot_open(root, e));
            }
        }
        let mut readable = profile.readable.clone();
        readable.extend(writable.iter().cloned());
        let mut unseen = profile.hidden.clone();
        unseen.extend(KERNEL_READS.iter().map(PathBuf::from));
        for root in outermost(readable) {
            split(&root, &unseen, &mut grants.read, &mut grants.listed);
        }
        let mut kept = profile.read_only.clone();
        kept.extend(profile.hidden.iter().cloned());
        kept.extend(KERNEL_WRITES.iter().map(PathBuf::from));
        let mut unused = Vec::new();
        for root in &writable {
            split(root, &kept, &mut grants.write, &mut unused);
        }
        Ok(grants)
    }
}

/// Grants `dir` whole, or, when it holds paths to leave out, its entries
/// one by one except those paths (folders holding one are split the same
/// way; the split folder itself goes to `listed`). New entries can then not
/// be made at those levels, only inside the folders granted. Symlinks are
/// never granted (landlock would follow them out of the tree; what they
/// point at is granted or not on its own). A `dir` that is itself left
/// out, or lies in what is, gets nothing; one that does not exist neither.
fn split(dir: &Path, leave: &[PathBuf], out: &mut Vec<(PathBuf, bool)>, listed: &mut Vec<PathBuf>) {
    if leave.iter().any(|p| dir.starts_with(p)) {
        return;
    }
    let Ok(meta) = std::fs::metadata(dir) else {
        return;
    };
    if !meta.is_dir() || !leave.iter().any(|p| p.starts_with(dir)) {
        out.push((dir.to_path_buf(), meta.is_dir()));
        return;
    }
    listed.push(dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() || leave.contains(&path) {
            continue;
        }
        if kind.is_dir() {
            split(&path, leave, out, listed);
        } else {
            out.push((path, false));
        }
    }
}

/// Every tree the command may write: the whole filesystem when files are
/// unconfined, else the writable roots and the private temp folder.
fn writable_roots(profile: &Profile) -> Vec<PathBuf> {
    if profile.mode == Mode::DangerFullAccess {
        return vec![PathBuf::from("/")];
    }
    let mut roots = profile.writable.clone();
    roots.push(profile.tmp.clone());
    roots
}

/// Creates the ruleset fd: files confined to `grants`, TCP and abstract
/// Unix sockets closed unless the network is open.
fn build_ruleset(profile: &Profile, grants: &Grants) -> Result<Option<OwnedFd>, String> {
    let failed = |e: landlock::RulesetError| format!("landlock: building the ruleset failed: {e}");
    // Signals out of the sandbox are refused, as bubblewrap's own pid
    // namespace does.
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(NEWEST))
        .and_then(|r| r.scope(Scope::Signal))
        .map_err(failed)?;
    if !profile.network {
        // Without bubblewrap's network namespace, abstract Unix sockets
        // would reach daemons outside; TCP is also refused by seccomp.
        ruleset = ruleset
            .handle_access(AccessNet::from_all(NEWEST))
            .and_then(|r| r.scope(Scope::AbstractUnixSocket))
            .map_err(failed)?;
    }
    let created = ruleset.create().map_err(failed)?;
    Ok(add_file_rules(created, grants)?.into())
}

/// The grants, the usual devices, and `/proc` (read and listed: every
/// program reads its own there). Of other processes the kernel refuses
/// what needs ptrace access (environment, memory, fds, maps): landlock
/// refuses it outside the sandbox to a command without CAP_SYS_PTRACE, the
/// command has no capability, and sluice is non-dumpable besides.
fn add_file_rules(mut created: RulesetCreated, grants: &Grants) -> Result<RulesetCreated, String> {
    // Connecting to a named Unix socket follows visibility, on kernels
    // that can restrict it.
    let read = AccessFs::from_read(NEWEST) | AccessFs::ResolveUnix;
    for (path, is_dir) in &grants.read {
        created = add_listed(created, path, narrowed(read, *is_dir))?;
    }
    for dir in &grants.listed {
        created = add_listed(created, dir, AccessFs::ReadDir.into())?;
    }
    for (path, is_dir) in &grants.write {
        created = add_listed(created, path, narrowed(AccessFs::from_all(NEWEST), *is_dir))?;
    }
    for (device, access) in devices() {
        // A container may lack some: nothing to allow then.
        if Path::new(device).exists() {
            created = add_path(created, Path::new(device), access)?;
        }
    }
    created = add_path(
        created,
        Path::new("/proc"),
        AccessFs::ReadFile | AccessFs::ReadDir,
    )?;
    Ok(created)
}

/// `access` as a file can take it (a folder takes every right).
fn narrowed(access: BitFlags<AccessFs>, is_dir: bool) -> BitFlags<AccessFs> {
    if is_dir {
        access
    } else {
        access & AccessFs::from_file(NEWEST)
    }
}

/// [`add_path`] for what [`split`] found: an entry another process
/// removed since it was listed (a busy `/tmp`'s neighbours) grants nothing,
/// as one missing when listed does, rather than failing the command.
fn add_listed(
    created: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, String> {
    match PathFd::new(path) {
        Ok(fd) => add_fd(created, path, fd, access),
        Err(_) if std::fs::symlink_metadata(path).is_err() => Ok(created),
        Err(e) => Err(cannot_open(path, e)),
    }
}

fn add_path(
    created: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, String> {
    let fd = PathFd::new(path).map_err(|e| cannot_open(path, e))?;
    add_fd(created, path, fd, access)
}

fn cannot_open(path: &Path, e: impl std::fmt::Display) -> String {
    format!(
        "landlock: cannot open {} to allow it ({e}); it must exist",
        path.display()
    )
}

fn add_fd(
    created: RulesetCreated,
    path: &Path,
    fd: PathFd,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, String> {
    created
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| format!("landlock: allowing {} failed: {e}", path.display()))
}

/// What the filter must refuse or hand over besides what it always does.
struct Needs {
    /// The network is open (else every socket but Unix ones is refused).
    network: bool,
    /// Connections to named sockets go to the supervisor, and datagram
    /// Unix sockets are refused.
    sockets: bool,
}

/// `FS_IOC_SETFLAGS` and friends: inode flags (`chattr`), a project id, an
/// inode's generation. Refused whatever the file: landlock does not see
/// them, and toolchains do not need them.
const INODE_FLAG_IOCTLS: [u32; 5] = [
    0x4008_6602, // FS_IOC_SETFLAGS
    0x4004_6602, // FS_IOC32_SETFLAGS
    0x401c_5820, // FS_IOC_FSSETXATTR
    0x4008_7602, // FS_IOC_SETVERSION
    0x4004_7602, // FS_IOC32_SETVERSION
];

/// `__O_TMPFILE`, the bit of O_TMPFILE that is not O_DIRECTORY.
const O_TMPFILE_BIT: u32 = 0o20000000;

/// `file_setattr(2)` (Linux 6.17): inode flags by path.
const SYS_FILE_SETATTR: i64 = 469;

/// One test on a syscall's argument: its low 32 bits, masked, compared.
struct Test {
    arg: u32,
    mask: u32,
    equal: bool,
    value: u32,
    ret: u32,
}

/// The seccomp program, one filter for everything (only one filter of a
/// process may have a listener, and this one needs it):
/// - another architecture's calls kill the process, x32 calls fail with
///   ENOSYS (as on a kernel without x32: the numbers below would not match
///   them);
/// - `setsid` fails (EPERM): the command cannot leave its session;
/// - user namespaces cannot be made (`unshare`, `clone` with
///   CLONE_NEWUSER: EPERM; `clone3`, whose flags seccomp cannot read:
///   ENOSYS, so that libc falls back to `clone`): inside one a command
///   would hold every capability again, over its own namespaces;
/// - io_uring is refused (EACCES): its operations skip seccomp (sockets,
///   connect, extended attributes);
/// - with the network closed, sockets other than Unix ones (EACCES);
/// - with sockets supervised, Unix datagram sockets (EACCES): a datagram
///   names its destination in `sendmsg`'s message header, which seccomp
///   cannot read, and checking it would mean sluice sending every datagram
///   of the command itself, payload, passed fds and credentials included;
///   stream and seqpacket sockets can only reach a named socket through
///   `connect`, which the supervisor checks;
/// - set-id bits on new files (EPERM), `openat2` (ENOSYS);
/// - inode flags (EPERM), and the metadata calls go to the supervisor.
fn filter(needs: &Needs) -> Vec<libc::sock_filter> {
    let errno = |e: i32| libc::SECCOMP_RET_ERRNO | e as u32;
    let (allow, notify) = (libc::SECCOMP_RET_ALLOW, libc::SECCOMP_RET_USER_NOTIF);
    let test = |arg, mask, equal, value: i32, ret| Test {
        arg,
        mask,
        equal,
        value: value as u32,
        ret,
    };
    let mut blocks = session_blocks();
    let socket_tests = || {
        let mut tests = Vec::new();
        if !needs.network {
            tests.push(test(0, !0, false, libc::AF_UNIX, errno(libc::EACCES)));
        } else if needs.sockets {
            tests.push(test(0, !0, false, libc::AF_UNIX, allow));
        }
        if needs.sockets {
            // The type's low bits; SOCK_NONBLOCK and SOCK_CLOEXEC sit above.
            tests.push(test(1, 0xf, true, libc::SOCK_DGRAM, errno(libc::EACCES)));
        }
        tests
    };
    if !socket_tests().is_empty() {
        blocks.push((libc::SYS_socket, socket_tests(), allow));
        blocks.push((libc::SYS_socketpair, socket_tests(), allow));
    }
    blocks.extend(new_set_id_blocks());
    let ioctls = INODE_FLAG_IOCTLS
        .iter()
        .map(|&cmd| test(1, !0, true, cmd as i32, errno(libc::EPERM)))
        .collect();
    blocks.push((libc::SYS_ioctl, ioctls, allow));
    blocks.push((SYS_FILE_SETATTR, vec![], errno(libc::EPERM)));
    for nr in supervise::syscalls(needs.sockets) {
        blocks.push((nr, vec![], notify));
    }
    assemble(&blocks)
}

/// The rules that keep a command in its session and out of new user
/// namespaces and io_uring (see [`filter`]), which the shared sandbox's
/// commands get alone (their namespaces confine the rest).
fn session_blocks() -> Vec<(i64, Vec<Test>, u32)> {
    let errno = |e: i32| libc::SECCOMP_RET_ERRNO | e as u32;
    let new_user = || Test {
        arg: 0,
        mask: libc::CLONE_NEWUSER as u32,
        equal: true,
        value: libc::CLONE_NEWUSER as u32,
        ret: errno(libc::EPERM),
    };
    let allow = libc::SECCOMP_RET_ALLOW;
    vec![
        (libc::SYS_setsid, vec![], errno(libc::EPERM)),
        (libc::SYS_unshare, vec![new_user()], allow),
        (libc::SYS_clone, vec![new_user()], allow),
        (libc::SYS_clone3, vec![], errno(libc::ENOSYS)),
        (libc::SYS_io_uring_setup, vec![], errno(libc::EACCES)),
    ]
}

/// Set-id bits on a new file (by open, creat or mknod) refused (EPERM): a
/// setuid-root binary left in a writable tree would give root to whoever
/// runs it later. `openat2` hides its mode in a struct: ENOSYS, and libc's
/// open never uses it. Folders may have them (setgid is group inheritance):
/// `mkdir` is not filtered.
fn new_set_id_blocks() -> Vec<(i64, Vec<Test>, u32)> {
    let errno = |e: i32| libc::SECCOMP_RET_ERRNO | e as u32;
    let allow = libc::SECCOMP_RET_ALLOW;
    let set_id = libc::S_ISUID | libc::S_ISGID;
    let creating = libc::O_CREAT as u32 | O_TMPFILE_BIT;
    let new_file = |flags: Option<u32>, mode: u32| {
        let mut tests = Vec::new();
        if let Some(arg) = flags {
            // Not creating: allowed whatever the mode argument holds.
            tests.push(Test {
                arg,
                mask: creating,
                equal: true,
                value: 0,
                ret: allow,
            });
        }
        tests.push(Test {
            arg: mode,
            mask: set_id,
            equal: false,
            value: 0,
            ret: errno(libc::EPERM),
        });
        tests
    };
    let mut blocks = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        blocks.push((libc::SYS_open, new_file(Some(1), 2), allow));
        blocks.push((libc::SYS_creat, new_file(None, 1), allow));
        blocks.push((libc::SYS_mknod, new_file(None, 1), allow));
    }
    blocks.push((libc::SYS_openat, new_file(Some(2), 3), allow));
    blocks.push((libc::SYS_mknodat, new_file(None, 2), allow));
    blocks.push((libc::SYS_openat2, vec![], errno(libc::ENOSYS)));
    blocks
}

/// The seccomp program that keeps a command under bubblewrap from leaving
/// a set-id file behind: set-id bits on a new file, and any `chmod` that
/// sets one (EPERM). The landlock runner's supervisor looks at what a
/// `chmod` names and lets a folder have them; seccomp alone cannot tell,
/// so under bubblewrap `chmod g+s` on a folder is refused too (a folder
/// made inside a setgid one still inherits the bit).
pub(super) fn set_id_filter() -> Vec<libc::sock_filter> {
    let errno = |e: i32| libc::SECCOMP_RET_ERRNO | e as u32;
    let allow = libc::SECCOMP_RET_ALLOW;
    let setting = |mode: u32| {
        vec![Test {
            arg: mode,
            mask: libc::S_ISUID | libc::S_ISGID,
            equal: false,
            value: 0,
            ret: errno(libc::EPERM),
        }]
    };
    let mut blocks = new_set_id_blocks();
    #[cfg(target_arch = "x86_64")]
    blocks.push((libc::SYS_chmod, setting(1), allow));
    blocks.push((libc::SYS_fchmod, setting(1), allow));
    blocks.push((libc::SYS_fchmodat, setting(2), allow));
    blocks.push((libc::SYS_fchmodat2, setting(2), allow));
    assemble(&blocks)
}

/// The seccomp program of [`session_blocks`] alone.
pub(super) fn session_filter() -> Vec<libc::sock_filter> {
    assemble(&session_blocks())
}

/// A seccomp program that refuses (EPERM) to set the resource limits of
/// another process: `prlimit64` with a pid and a new limit. Every command
/// of the sandbox is forked by the helper and inherits its limits, and runs
/// as its user: without this, one command could lower the helper's limits
/// (`prlimit --pid <helper> --fsize=0`) and so every later command's. A
/// command's own limits (`ulimit`, `prlimit` on what it starts) stay its
/// own to set, and any process's limits can still be read.
pub(super) fn limits_filter() -> Vec<libc::sock_filter> {
    const ARGS: u32 = 16;
    let (jeq, ret, load) = (bpf_jeq, bpf_ret, bpf_load);
    // The session filter beside it kills any other architecture.
    vec![
        /* 0 */ load(0),
        /* 1 */ jeq(libc::SYS_prlimit64 as u32, 0, 7), // else allow
        /* 2 */ load(ARGS), // pid (a pid_t: its low half)
        /* 3 */ jeq(0, 5, 0), // itself: allow
        /* 4 */ load(ARGS + 16), // the new limit's pointer, low half
        /* 5 */ jeq(0, 0, 2), // set: refuse
        /* 6 */ load(ARGS + 20), // its high half
        /* 7 */ jeq(0, 1, 0), // only read: allow
        /* 8 */ ret(libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        /* 9 */ ret(libc::SECCOMP_RET_ALLOW),
    ]
}

/// A BPF statement.
fn bpf_stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

/// A BPF jump: `jt` ahead when the accumulator equals `k`, else `jf`.
fn bpf_jeq(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// A BPF return of `k`.
fn bpf_ret(k: u32) -> libc::sock_filter {
    bpf_stmt(libc::BPF_RET | libc::BPF_K, k)
}

/// A BPF load of the 32-bit word at `offset` of the syscall's data.
fn bpf_load(offset: u32) -> libc::sock_filter {
    bpf_stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, offset)
}

/// The seccomp program for `blocks`: per syscall, tests in order (the first
/// that holds gives its return), else the block's own return; other
/// syscalls are allowed.
fn assemble(blocks: &[(i64, Vec<Test>, u32)]) -> Vec<libc::sock_filter> {
    const ARCH_OFFSET: u32 = 4;
    const ARGS_OFFSET: u32 = 16;
    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000; // AUDIT_ARCH_X86_64
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000; // AUDIT_ARCH_AARCH64
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    compile_error!("the landlock runner's seccomp filter knows x86_64 and aarch64 only");
    // The arguments' low halves are read as 32-bit words.
    const _: () = assert!(cfg!(target_endian = "little"));

    let (stmt, jeq, ret, load) = (bpf_stmt, bpf_jeq, bpf_ret, bpf_load);

    let mut program = vec![
        load(ARCH_OFFSET),
        jeq(AUDIT_ARCH, 1, 0),
        ret(libc::SECCOMP_RET_KILL_PROCESS),
        load(0),
    ];
    if cfg!(target_arch = "x86_64") {
        const X32_SYSCALL_BIT: u32 = 0x4000_0000;
        program.push(libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        });
        program.push(ret(libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32));
    }
    // The accumulator holds the syscall number until a block matches; a
    // matching block always returns, so the next block needs no reload.
    for (nr, tests, otherwise) in blocks {
        let mut body = Vec::new();
        for t in tests {
            body.push(load(ARGS_OFFSET + 8 * t.arg));
            if t.mask != !0 {
                body.push(stmt(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, t.mask));
            }
            body.push(if t.equal {
                jeq(t.value, 0, 1)
            } else {
                jeq(t.value, 1, 0)
            });
            body.push(ret(t.ret));
        }
        body.push(ret(*otherwise));
        program.push(jeq(*nr as u32, 0, body.len() as u8));
        program.extend(body);
    }
    program.push(ret(libc::SECCOMP_RET_ALLOW));
    program
}

/// A command confined by landlock, seccomp and the supervisor: its argv
/// unchanged, the prepared restrictions applied in the child before exec,
/// in a session of its own that stopping the call kills whole.
pub struct LandlockWrap {
    prepared: Arc<Prepared>,
    tmp: PathBuf,
    /// Variables from the sandbox (the private caches).
    env: Vec<(String, String)>,
}

impl LandlockWrap {
    /// The wrapper applying `prepared`, with `tmp` as the command's TMPDIR
    /// and the sandbox's `env`.
    pub fn new(prepared: Prepared, tmp: PathBuf, env: Vec<(String, String)>) -> LandlockWrap {
        LandlockWrap {
            prepared: Arc::new(prepared),
            tmp,
            env,
        }
    }
}

impl std::fmt::Debug for LandlockWrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LandlockWrap")
            .field("tmp", &self.tmp)
            .finish_non_exhaustive()
    }
}

impl Wrap for LandlockWrap {
    fn wrap(&self, argv: Vec<OsString>, _cwd: &Path) -> Result<Vec<OsString>, String> {
        Ok(argv)
    }

    fn launch(&self) -> Result<Launch, String> {
        let prepared = self.prepared.clone();
        if !prepared.supervised {
            return Ok(Launch {
                pre_exec: Some(Arc::new(move || prepared.apply(None))),
                started: None,
            });
        }
        let (ours, theirs) = supervise::channel()
            .map_err(|e| format!("cannot make the supervisor's channel: {e}"))?;
        let theirs = Arc::new(theirs);
        let child_end = theirs.clone();
        let rules = prepared.rules.clone();
        Ok(Launch {
            pre_exec: Some(Arc::new(move || {
                prepared.apply(Some(child_end.as_raw_fd()))
            })),
            started: Some(Box::new(move |_pid| {
                drop(theirs);
                let supervisor: Supervisor = supervise::start(ours, rules)?;
                Ok(Box::new(supervisor) as crate::exec::Guard)
            })),
        })
    }

    fn own_session(&self) -> bool {
        true
    }

    fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env = vec![("TMPDIR".into(), self.tmp.clone().into_os_string())];
        env.extend(self.env.iter().map(|(k, v)| (k.into(), v.into())));
        env
    }
}

#[cfg(test)]
mod tests;
