//! The supervisor of a landlock-confined command: what landlock does not
//! judge, the command's seccomp filter hands to sluice through a user
//! notification listener, and a thread here decides each call and, when it
//! is allowed, makes it itself:
//!
//! - metadata: `chmod`, `chown`, `utime(n)s`, extended attributes, in all
//!   their forms (by path, relative to a folder fd, on an fd). Allowed on
//!   what the command may write (its write grants), refused (EPERM)
//!   elsewhere: outside the writable trees, on read-only and hidden paths,
//!   on the folders split around them; set-id bits on files are refused
//!   everywhere (a setuid-root binary left behind would give root to
//!   whoever runs it later);
//! - connections to named Unix sockets, on kernels whose landlock cannot
//!   restrict them (before ABI 9): allowed to the sockets the command may
//!   see (its read grants), refused (EACCES) to the others.
//!
//! The call is never continued in the kernel (a second thread of the
//! command could change its arguments between the check and the call):
//! the supervisor reads each argument once from the command's memory,
//! resolves the path itself (from the caller's working folder or folder fd,
//! following symlinks only where the call would, never through /proc's
//! magic links), holds what it found by an `O_PATH` fd, checks where that
//! object really is, and acts on that fd. A symlink swapped, a path buffer
//! rewritten, a folder renamed after the check change nothing. It acts with
//! the command's credentials (this thread lowers its capabilities to none
//! but CAP_SYS_PTRACE, which it needs to read the command's memory), so the
//! kernel's own permission checks are the command's. Before acting it
//! checks that the call is still waiting (`SECCOMP_IOCTL_NOTIF_ID_VALID`),
//! so what it read belonged to the caller and not to a process that took a
//! dead caller's pid.
//!
//! A hard link inside a writable tree to a file elsewhere (which a confined
//! command cannot make: landlock refuses links that would widen access)
//! shares that file's metadata, as it shares its content.
//!
//! One thread per command, ended with the call: it never waits on the
//! command for long (a connect that would block is finished by a helper
//! thread polling in short slices), so stopping it is prompt; when it is
//! gone the kernel fails the command's supervised calls with ENOSYS.

use super::caps;
use nix::libc;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// What a supervised command may do, from the landlock grants: each path
/// with whether it is a folder (its whole tree).
#[derive(Debug)]
pub(crate) struct Rules {
    /// What it may write, so change the metadata of.
    pub changeable: Vec<(PathBuf, bool)>,
    /// What it may see: the named sockets it may connect to lie there.
    pub visible: Vec<(PathBuf, bool)>,
    /// The network is open (abstract sockets are reachable then).
    pub network: bool,
}

impl Rules {
    fn can_change(&self, place: &Place) -> bool {
        match place {
            Place::At(path) => covers(&self.changeable, path),
            // Nobody reaches it by a name any more.
            Place::Unlinked => true,
            Place::Elsewhere => false,
        }
    }

    fn can_see(&self, place: &Place) -> bool {
        matches!(place, Place::At(path) if covers(&self.visible, path))
    }
}

fn covers(grants: &[(PathBuf, bool)], path: &Path) -> bool {
    grants.iter().any(|(granted, is_dir)| {
        if *is_dir {
            path.starts_with(granted)
        } else {
            path == granted
        }
    })
}

// Syscall numbers the libc crate does not name everywhere.
const SYS_FCHMODAT2: i64 = 452;
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;
const SO_DOMAIN: libc::c_int = 39;
const PIDFD_THREAD: libc::c_int = libc::O_EXCL;
const XATTR_NAME_MAX: usize = 255;
const XATTR_SIZE_MAX: u64 = 65536;
const PATH_MAX: usize = 4096;
/// `sizeof(struct sockaddr_storage)`, the longest address `connect` takes.
const SOCKADDR_MAX: u32 = 128;

/// The syscalls the filter hands to the supervisor: the metadata calls,
/// and `connect` when named sockets are supervised.
pub(crate) fn syscalls(sockets: bool) -> Vec<i64> {
    let mut out = Vec::new();
    #[cfg(target_arch = "x86_64")]
    out.extend([
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_utime,
        libc::SYS_utimes,
        libc::SYS_futimesat,
    ]);
    out.extend([
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        SYS_FCHMODAT2,
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_utimensat,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
        SYS_SETXATTRAT,
        SYS_REMOVEXATTRAT,
    ]);
    if sockets {
        out.push(libc::SYS_connect);
    }
    out
}

/// The socket pair the child hands the filter's listener over: the
/// parent's end first. Both close on exec.
pub(crate) fn channel() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: the kernel writes two fds into `fds`.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds are new and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Space for one fd in a control message, aligned as cmsghdr needs.
#[repr(C, align(8))]
struct FdMessage([u8; 24]);

/// A message of the one byte `iov` points at, with room in `control` for
/// one fd (CMSG_SPACE(4) = 24 on 64-bit). No allocation: the child builds
/// one between fork and exec.
fn message(iov: &mut libc::iovec, control: &mut FdMessage) -> libc::msghdr {
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len() as _;
    msg
}

/// Sends `listener` over `channel` (SCM_RIGHTS). Runs in the child between
/// fork and exec: raw syscalls on stack memory only.
pub(crate) fn send_listener(channel: RawFd, listener: RawFd) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = FdMessage([0; 24]);
    let msg = message(&mut iov, &mut control);
    // SAFETY: `msg` describes `control`, big enough for one header and one
    // fd (CMSG_SPACE(4) = 24 on 64-bit); the macros only compute pointers
    // into it, and the writes stay inside it.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), listener);
    }
    // SAFETY: every pointer in `msg` is live for the call.
    let rc = unsafe { libc::sendmsg(channel, &msg, libc::MSG_NOSIGNAL) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Takes the listener the child sent (it is there once the spawn has
/// returned: the child sends it before exec).
fn receive_listener(channel: &OwnedFd) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = FdMessage([0; 24]);
    let mut msg = message(&mut iov, &mut control);
    // SAFETY: every pointer in `msg` is live for the call.
    let n = unsafe {
        libc::recvmsg(
            channel.as_raw_fd(),
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled `control` and `msg_controllen`; the macros
    // walk within them.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&msg);
        if header.is_null()
            || (*header).cmsg_level != libc::SOL_SOCKET
            || (*header).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::other("the command sent no listener"));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(header).cast::<RawFd>());
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// A running supervisor. Dropping it stops it: its thread ends (within
/// moments: it never waits on the command for long) and closes the
/// listener, so a process of the command still alive, if any, gets ENOSYS
/// from then on.
pub(crate) struct Supervisor {
    stop: OwnedFd,
    ended: mpsc::Receiver<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts supervising the command that sent its listener on `channel`.
pub(crate) fn start(channel: OwnedFd, rules: Arc<Rules>) -> Result<Supervisor, String> {
    let listener = receive_listener(&channel)
        .map_err(|e| format!("the supervisor did not get the command's listener: {e}"))?;
    drop(channel);
    // SAFETY: eventfd with flags returns a new fd or -1.
    let stop = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if stop < 0 {
        return Err(format!(
            "the supervisor cannot start: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: a new fd, ours.
    let stop = unsafe { OwnedFd::from_raw_fd(stop) };
    let stop_seen = stop
        .try_clone()
        .map_err(|e| format!("the supervisor cannot start: {e}"))?;
    let (ready_tx, ready) = mpsc::channel();
    let (ended_tx, ended) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("sluice-supervisor".into())
        .spawn(move || {
            if let Err(e) = lower_capabilities() {
                let _ = ready_tx.send(Err(e));
                return;
            }
            let _ = ready_tx.send(Ok(()));
            Serve::new(listener, rules).run(&stop_seen);
            let _ = ended_tx.send(());
        })
        .map_err(|e| format!("the supervisor cannot start: {e}"))?;
    match ready.recv() {
        Ok(Ok(())) => Ok(Supervisor {
            stop,
            ended,
            thread: Some(thread),
        }),
        Ok(Err(e)) => Err(format!(
            "the supervisor cannot take the command's credentials: {e}"
        )),
        Err(_) => Err("the supervisor ended before it started".into()),
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from `one` to our eventfd.
        unsafe { libc::write(self.stop.as_raw_fd(), (&one as *const u64).cast(), 8) };
        // Joined when it has ended; a thread stuck in a filesystem that
        // hangs is left to end on its own rather than hang the call.
        if self.ended.recv_timeout(Duration::from_secs(2)).is_ok() {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// Lowers this thread's effective capabilities (credentials are per thread
/// in Linux) to CAP_SYS_PTRACE alone, if it had it: what the supervisor does
/// for the command, the kernel then checks as it would for the command
/// (which has none), except reading its memory and fds.
fn lower_capabilities() -> io::Result<()> {
    const CAP_SYS_PTRACE: u32 = 19;
    let mut data = caps::get()?;
    let keep = data[0].effective & (1 << CAP_SYS_PTRACE);
    data[0].effective = keep;
    data[1].effective = 0;
    caps::set(&data)
}

/// A call's answer: the return value, or an errno. `None`: no answer (the
/// caller is gone, or a helper thread answers later).
type Answer = Option<Result<i64, i32>>;

/// The supervisor's loop over one command's calls.
struct Serve {
    listener: Arc<OwnedFd>,
    rules: Arc<Rules>,
    /// Tells helper threads to give up.
    halt: Arc<AtomicBool>,
    helpers: Vec<std::thread::JoinHandle<()>>,
}

impl Serve {
    fn new(listener: OwnedFd, rules: Arc<Rules>) -> Serve {
        Serve {
            listener: Arc::new(listener),
            rules,
            halt: Arc::new(AtomicBool::new(false)),
            helpers: Vec::new(),
        }
    }

    /// Answers calls until told to stop or until no process uses the filter
    /// any more.
    fn run(mut self, stop: &OwnedFd) {
        // Linux 6.6: the caller hands its CPU straight to this thread and
        // back, instead of two ordinary wake-ups (the round trip is most of
        // a supervised call's cost). Older kernels refuse the flag: fine.
        const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;
        // SAFETY: the kernel reads one u64.
        unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
                &SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
            )
        };
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: self.listener.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: stop.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two live pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if n < 0 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                break;
            }
            if fds[1].revents != 0 {
                break;
            }
            if fds[0].revents & libc::POLLIN != 0 {
                self.one();
            } else if fds[0].revents != 0 {
                // POLLHUP: every process with the filter has ended.
                break;
            }
            self.helpers.retain(|h| !h.is_finished());
        }
        self.halt.store(true, Ordering::Relaxed);
        for helper in self.helpers.drain(..) {
            let _ = helper.join();
        }
    }

    /// Receives one call and answers it.
    fn one(&mut self) {
        // SAFETY: seccomp_notif is plain data; the kernel wants it zeroed.
        let mut call: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the kernel fills `call`.
        let rc = unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut call,
            )
        };
        if rc < 0 {
            // EINTR, or ENOENT: the caller died before we took the call.
            return;
        }
        if let Some(answer) = self.decide(&call) {
            respond(&self.listener, call.id, answer);
        }
    }

    fn decide(&mut self, call: &libc::seccomp_notif) -> Answer {
        let caller = Caller {
            tid: call.pid as i32,
            id: call.id,
            listener: self.listener.clone(),
        };
        let a = call.data.args;
        let nr = call.data.nr as i64;
        let int = |i: usize| a[i] as i32;
        let path = |dirfd: i32, at: u64, follow: bool, empty: bool| Object::Path {
            dirfd,
            at,
            follow,
            empty,
        };
        let cwd = libc::AT_FDCWD;
        let (object, op) = match nr {
            #[cfg(target_arch = "x86_64")]
            libc::SYS_chmod => (path(cwd, a[0], true, false), OpArgs::Mode(a[1] as u32)),
            libc::SYS_fchmod => (Object::Fd(int(0)), OpArgs::Mode(a[1] as u32)),
            libc::SYS_fchmodat => (path(int(0), a[1], true, false), OpArgs::Mode(a[2] as u32)),
            SYS_FCHMODAT2 => match at_flags(int(3)) {
                Ok((follow, empty)) => {
                    (path(int(0), a[1], follow, empty), OpArgs::Mode(a[2] as u32))
                }
                Err(e) => return Some(Err(e)),
            },
            #[cfg(target_arch = "x86_64")]
            libc::SYS_chown | libc::SYS_lchown => (
                path(cwd, a[0], nr == libc::SYS_chown, false),
                OpArgs::Owner(a[1] as u32, a[2] as u32),
            ),
            libc::SYS_fchown => (Object::Fd(int(0)), OpArgs::Owner(a[1] as u32, a[2] as u32)),
            libc::SYS_fchownat => match at_flags(int(4)) {
                Ok((follow, empty)) => (
                    path(int(0), a[1], follow, empty),
                    OpArgs::Owner(a[2] as u32, a[3] as u32),
                ),
                Err(e) => return Some(Err(e)),
            },
            #[cfg(target_arch = "x86_64")]
            libc::SYS_utime => (
                path(cwd, a[0], true, false),
                OpArgs::Times(Times::Utimbuf(a[1])),
            ),
            #[cfg(target_arch = "x86_64")]
            libc::SYS_utimes => (
                path(cwd, a[0], true, false),
                OpArgs::Times(Times::Timevals(a[1])),
            ),
            #[cfg(target_arch = "x86_64")]
            libc::SYS_futimesat => {
                let object = if a[1] == 0 {
                    Object::Fd(int(0))
                } else {
                    path(int(0), a[1], true, false)
                };
                (object, OpArgs::Times(Times::Timevals(a[2])))
            }
            libc::SYS_utimensat => {
                let flags = int(3);
                let object = if a[1] == 0 {
                    // futimens(fd): no path, no flags.
                    if int(0) == cwd {
                        return Some(Err(libc::EFAULT));
                    }
                    if flags != 0 {
                        return Some(Err(libc::EINVAL));
                    }
                    Object::Fd(int(0))
                } else {
                    match at_flags(flags) {
                        Ok((follow, empty)) => path(int(0), a[1], follow, empty),
                        Err(e) => return Some(Err(e)),
                    }
                };
                (object, OpArgs::Times(Times::Timespecs(a[2])))
            }
            libc::SYS_setxattr | libc::SYS_lsetxattr => (
                path(cwd, a[0], nr == libc::SYS_setxattr, false),
                OpArgs::SetXattr {
                    name: a[1],
                    value: a[2],
                    size: a[3],
                    flags: int(4),
                },
            ),
            libc::SYS_fsetxattr => (
                Object::Fd(int(0)),
                OpArgs::SetXattr {
                    name: a[1],
                    value: a[2],
                    size: a[3],
                    flags: int(4),
                },
            ),
            libc::SYS_removexattr | libc::SYS_lremovexattr => (
                path(cwd, a[0], nr == libc::SYS_removexattr, false),
                OpArgs::RemoveXattr { name: a[1] },
            ),
            libc::SYS_fremovexattr => (Object::Fd(int(0)), OpArgs::RemoveXattr { name: a[1] }),
            SYS_SETXATTRAT => match at_flags(int(2)) {
                Ok((follow, empty)) => match xattr_args(&caller, a[4], a[5]) {
                    Ok((value, size, flags)) => (
                        path(int(0), a[1], follow, empty),
                        OpArgs::SetXattr {
                            name: a[3],
                            value,
                            size,
                            flags,
                        },
                    ),
                    Err(e) => return Some(Err(e)),
                },
                Err(e) => return Some(Err(e)),
            },
            SYS_REMOVEXATTRAT => match at_flags(int(2)) {
                Ok((follow, empty)) => (
                    path(int(0), a[1], follow, empty),
                    OpArgs::RemoveXattr { name: a[3] },
                ),
                Err(e) => return Some(Err(e)),
            },
            libc::SYS_connect => return self.connect(&caller, int(0), a[1], a[2] as u32),
            _ => return Some(Err(libc::ENOSYS)),
        };
        metadata(&caller, &self.rules, &object, op)
    }

    /// `connect(fd, addr, len)` made by the supervisor on the command's own
    /// socket: a named Unix socket only if the command can see it (reached
    /// through the fd of what was checked, so no rename or symlink can
    /// redirect it), an abstract one only with the network open.
    fn connect(&mut self, caller: &Caller, fd: i32, addr: u64, len: u32) -> Answer {
        if len > SOCKADDR_MAX {
            return Some(Err(libc::EINVAL));
        }
        let given = match caller.read(addr, len as usize) {
            Ok(bytes) => bytes,
            Err(e) => return Some(Err(e)),
        };
        let socket = match caller.fd(fd) {
            Ok(s) => s,
            Err(e) => return Some(Err(e)),
        };
        if !caller.still_waiting() {
            return None;
        }
        let domain = match int_option(&socket, libc::SOL_SOCKET, SO_DOMAIN) {
            Ok(d) => d,
            Err(e) => return Some(Err(e)),
        };
        // With the network closed the command makes no other socket, but it
        // could be handed one; sluice, not landlocked, must not connect it.
        if domain != libc::AF_UNIX && !self.rules.network {
            return Some(Err(libc::EACCES));
        }
        let named = domain == libc::AF_UNIX
            && given.len() > 2
            && u16::from_ne_bytes([given[0], given[1]]) == libc::AF_UNIX as u16;
        let mut target = given.clone();
        let mut _held = None;
        if named {
            let path = &given[2..];
            if path[0] == 0 {
                if !self.rules.network {
                    // As landlock's scope refuses it.
                    return Some(Err(libc::EPERM));
                }
            } else {
                let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
                let Ok(path) = CString::new(&path[..end]) else {
                    return Some(Err(libc::EINVAL));
                };
                let object = match caller.resolve(libc::AT_FDCWD, &path, true, false) {
                    Ok(o) => o,
                    Err(e) => return Some(Err(e)),
                };
                if !caller.still_waiting() {
                    return None;
                }
                match stat_of(&object) {
                    Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFSOCK => {}
                    Ok(_) => return Some(Err(libc::ECONNREFUSED)),
                    Err(e) => return Some(Err(e)),
                }
                if !self.rules.can_see(&locate(&object)) {
                    return Some(Err(libc::EACCES));
                }
                target = unix_address(&object);
                _held = Some(object);
            }
        }
        let mut pending = Connect {
            socket,
            target,
            _held,
            unix: domain == libc::AF_UNIX,
            flags: 0,
        };
        match pending.first() {
            Ok(None) => Some(Ok(0)),
            Ok(Some(wait)) => {
                let (listener, halt, id) = (self.listener.clone(), self.halt.clone(), caller.id);
                let helper = std::thread::Builder::new()
                    .name("sluice-connect".into())
                    .spawn(move || {
                        if let Some(answer) = pending.finish(wait, &listener, id, &halt) {
                            respond(&listener, id, answer);
                        }
                    });
                match helper {
                    Ok(h) => {
                        self.helpers.push(h);
                        None
                    }
                    Err(_) => Some(Err(libc::EAGAIN)),
                }
            }
            Err(e) => Some(Err(e)),
        }
    }
}

/// The process whose call is being decided.
struct Caller {
    /// The calling thread, as the kernel names it to us.
    tid: i32,
    id: u64,
    listener: Arc<OwnedFd>,
}

impl Caller {
    /// Whether the call still waits for its answer: what was read of the
    /// caller then was its own (its pid was not reused meanwhile).
    fn still_waiting(&self) -> bool {
        id_valid(&self.listener, self.id)
    }

    /// `len` bytes of the caller's memory at `addr`, read once.
    fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>, i32> {
        let mut buf = vec![0u8; len];
        if len == 0 {
            return Ok(buf);
        }
        let n = read_memory(self.tid, addr, &mut buf)?;
        if n < len {
            return Err(libc::EFAULT);
        }
        Ok(buf)
    }

    /// A NUL-terminated string of the caller's at `addr`, at most `max`
    /// bytes before the NUL (else `too_long`), read page by page.
    fn string(&self, addr: u64, max: usize, too_long: i32) -> Result<CString, i32> {
        if addr == 0 {
            return Err(libc::EFAULT);
        }
        let mut out = Vec::new();
        let mut at = addr;
        loop {
            let room = (4096 - (at % 4096)) as usize;
            let want = room.min(max + 1 - out.len());
            let mut buf = vec![0u8; want];
            let n = read_memory(self.tid, at, &mut buf)?;
            if n == 0 {
                return Err(libc::EFAULT);
            }
            if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
                out.extend_from_slice(&buf[..end]);
                return CString::new(out).map_err(|_| libc::EINVAL);
            }
            out.extend_from_slice(&buf[..n]);
            if out.len() > max {
                return Err(too_long);
            }
            at += n as u64;
        }
    }

    /// The caller's fd `fd`, as an fd of ours on the same open file.
    fn fd(&self, fd: i32) -> Result<OwnedFd, i32> {
        let pidfd = pidfd(self.tid)?;
        // SAFETY: pidfd_getfd on a live pidfd returns a new fd (close on
        // exec) or -1.
        let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
        if got < 0 {
            return Err(errno());
        }
        // SAFETY: a new fd, ours.
        Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
    }

    /// The folder a relative path starts from: the caller's working folder,
    /// or its folder fd.
    fn base(&self, dirfd: i32) -> Result<OwnedFd, i32> {
        if dirfd != libc::AT_FDCWD {
            return self.fd(dirfd);
        }
        let cwd = CString::new(format!("/proc/{}/cwd", self.tid)).expect("no NUL");
        open_path(libc::AT_FDCWD, &cwd, libc::O_PATH | libc::O_DIRECTORY, 0).map_err(|e| {
            if e == libc::ENOENT {
                libc::ESRCH
            } else {
                e
            }
        })
    }

    /// What `path` names for the caller, held by an `O_PATH` fd: from its
    /// working folder or `dirfd`, following a last symlink only when
    /// `follow`; `""` is `dirfd` itself when `empty` allows it. Never
    /// through /proc's magic links (which would resolve as sluice), except
    /// the caller's own fds named `/proc/self/fd/N` or `/dev/fd/N`, taken
    /// as that fd.
    fn resolve(&self, dirfd: i32, path: &CStr, follow: bool, empty: bool) -> Result<OwnedFd, i32> {
        let bytes = path.to_bytes();
        if bytes.is_empty() {
            if !empty {
                return Err(libc::ENOENT);
            }
            return self.base(dirfd);
        }
        if follow {
            if let Some(fd) = own_fd_alias(bytes) {
                return self.fd(fd);
            }
        }
        let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
        const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
        if bytes[0] == b'/' {
            return open_path(
                libc::AT_FDCWD,
                path,
                libc::O_PATH | nofollow,
                RESOLVE_NO_MAGICLINKS,
            );
        }
        let base = self.base(dirfd)?;
        open_path(
            base.as_raw_fd(),
            path,
            libc::O_PATH | nofollow,
            RESOLVE_NO_MAGICLINKS,
        )
    }
}

/// `N` when `path` is `/proc/self/fd/N`, `/proc/thread-self/fd/N` or
/// `/dev/fd/N` (how libc reaches an fd by name).
fn own_fd_alias(path: &[u8]) -> Option<i32> {
    let rest = [
        &b"/proc/self/fd/"[..],
        b"/proc/thread-self/fd/",
        b"/dev/fd/",
    ]
    .iter()
    .find_map(|p| path.strip_prefix(*p))?;
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) || rest.len() > 9 {
        return None;
    }
    std::str::from_utf8(rest).ok()?.parse().ok()
}

/// A metadata call's object: an fd of the caller's (`fchmod(fd)`), or a
/// path (`chmod`, `fchmodat(dirfd, path)`, with AT_EMPTY_PATH the fd).
enum Object {
    Fd(i32),
    Path {
        dirfd: i32,
        at: u64,
        follow: bool,
        empty: bool,
    },
}

/// A metadata call's arguments, as pointers into the caller's memory.
enum OpArgs {
    Mode(u32),
    Owner(u32, u32),
    Times(Times),
    SetXattr {
        name: u64,
        value: u64,
        size: u64,
        flags: i32,
    },
    RemoveXattr {
        name: u64,
    },
}

/// Where a times argument points, and in which layout.
enum Times {
    Utimbuf(u64),
    Timevals(u64),
    Timespecs(u64),
}

/// A metadata change, read from the caller once.
enum Op {
    Mode(u32),
    Owner(u32, u32),
    Times(Option<[libc::timespec; 2]>),
    SetXattr {
        name: CString,
        value: Vec<u8>,
        flags: i32,
    },
    RemoveXattr {
        name: CString,
    },
}

/// Follow and AT_EMPTY_PATH from a flags argument; other bits are EINVAL.
fn at_flags(flags: i32) -> Result<(bool, bool), i32> {
    if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
        return Err(libc::EINVAL);
    }
    Ok((
        flags & libc::AT_SYMLINK_NOFOLLOW == 0,
        flags & libc::AT_EMPTY_PATH != 0,
    ))
}

/// `setxattrat`'s `struct xattr_args {value, size, flags}` of `size` bytes.
fn xattr_args(caller: &Caller, at: u64, size: u64) -> Result<(u64, u64, i32), i32> {
    const VER0: u64 = 16;
    if size < VER0 {
        return Err(libc::EINVAL);
    }
    if size > 4096 {
        return Err(libc::E2BIG);
    }
    let bytes = caller.read(at, size as usize)?;
    if bytes[VER0 as usize..].iter().any(|&b| b != 0) {
        return Err(libc::E2BIG);
    }
    let word = |i: usize| u64::from_ne_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    let value = word(0);
    let size = u32::from_ne_bytes(bytes[8..12].try_into().expect("4 bytes")) as u64;
    let flags = i32::from_ne_bytes(bytes[12..16].try_into().expect("4 bytes"));
    Ok((value, size, flags))
}

/// Decides and makes one metadata call: read its arguments, resolve its
/// object, check the call still waits, check where the object is, act.
fn metadata(caller: &Caller, rules: &Rules, object: &Object, op: OpArgs) -> Answer {
    let op = match read_op(caller, op) {
        Ok(op) => op,
        Err(e) => return Some(Err(e)),
    };
    let held = match object {
        Object::Fd(fd) => match caller.fd(*fd) {
            // The plain fd forms take no O_PATH fd, as the kernel's.
            Ok(f) if fd_flags(&f).is_ok_and(|fl| fl & libc::O_PATH != 0) => {
                return Some(Err(libc::EBADF))
            }
            Ok(f) => f,
            Err(e) => return Some(Err(e)),
        },
        Object::Path {
            dirfd,
            at,
            follow,
            empty,
        } => {
            let path = match caller.string(*at, PATH_MAX - 1, libc::ENAMETOOLONG) {
                Ok(p) => p,
                Err(e) => return Some(Err(e)),
            };
            match caller.resolve(*dirfd, &path, *follow, *empty) {
                Ok(f) => f,
                Err(e) => return Some(Err(e)),
            }
        }
    };
    if !caller.still_waiting() {
        return None;
    }
    if !rules.can_change(&locate(&held)) {
        return Some(Err(libc::EPERM));
    }
    Some(perform(&held, &op))
}

/// Reads what a metadata call points at.
fn read_op(caller: &Caller, op: OpArgs) -> Result<Op, i32> {
    Ok(match op {
        OpArgs::Mode(m) => Op::Mode(m),
        OpArgs::Owner(u, g) => Op::Owner(u, g),
        OpArgs::Times(t) => Op::Times(read_times(caller, t)?),
        OpArgs::SetXattr {
            name,
            value,
            size,
            flags,
        } => {
            if flags & !(libc::XATTR_CREATE | libc::XATTR_REPLACE) != 0 {
                return Err(libc::EINVAL);
            }
            if size > XATTR_SIZE_MAX {
                return Err(libc::E2BIG);
            }
            Op::SetXattr {
                name: xattr_name(caller, name)?,
                value: caller.read(value, size as usize)?,
                flags,
            }
        }
        OpArgs::RemoveXattr { name } => Op::RemoveXattr {
            name: xattr_name(caller, name)?,
        },
    })
}

fn xattr_name(caller: &Caller, at: u64) -> Result<CString, i32> {
    let name = caller.string(at, XATTR_NAME_MAX, libc::ERANGE)?;
    if name.as_bytes().is_empty() {
        return Err(libc::ERANGE);
    }
    Ok(name)
}

/// The two times a call sets, as `utimensat` takes them (`None`: now).
fn read_times(caller: &Caller, times: Times) -> Result<Option<[libc::timespec; 2]>, i32> {
    let (at, size) = match times {
        Times::Utimbuf(at) | Times::Timevals(at) | Times::Timespecs(at) if at == 0 => {
            return Ok(None)
        }
        Times::Utimbuf(at) => (at, 16),
        Times::Timevals(at) | Times::Timespecs(at) => (at, 32),
    };
    let bytes = caller.read(at, size)?;
    let word = |i: usize| i64::from_ne_bytes(bytes[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    let spec = |sec: i64, nsec: i64| libc::timespec {
        tv_sec: sec as libc::time_t,
        tv_nsec: nsec as _,
    };
    Ok(Some(match times {
        Times::Utimbuf(_) => [spec(word(0), 0), spec(word(1), 0)],
        Times::Timevals(_) => {
            let usec = [word(1), word(3)];
            if usec.iter().any(|u| !(0..1_000_000).contains(u)) {
                return Err(libc::EINVAL);
            }
            [spec(word(0), usec[0] * 1000), spec(word(2), usec[1] * 1000)]
        }
        Times::Timespecs(_) => [spec(word(0), word(1)), spec(word(2), word(3))],
    }))
}

/// Where an object held by `fd` is.
enum Place {
    At(PathBuf),
    /// Removed from every folder (a deleted file still open).
    Unlinked,
    /// Not in a folder at all (a pipe, a socket's inode), or no longer
    /// where its name says.
    Elsewhere,
}

fn locate(fd: &OwnedFd) -> Place {
    let Ok(link) = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) else {
        return Place::Elsewhere;
    };
    if !link.is_absolute() {
        return Place::Elsewhere;
    }
    if !link.as_os_str().as_bytes().ends_with(b" (deleted)") {
        return Place::At(link);
    }
    let Ok(st) = stat_of(fd) else {
        return Place::Elsewhere;
    };
    if st.st_nlink == 0 {
        return Place::Unlinked;
    }
    // Still linked: a name that really ends so, or a name removed while
    // another remains, somewhere we cannot tell.
    match std::fs::symlink_metadata(&link) {
        Ok(m) if same_file(&m, &st) => Place::At(link),
        _ => Place::Elsewhere,
    }
}

fn same_file(m: &std::fs::Metadata, st: &libc::stat) -> bool {
    use std::os::unix::fs::MetadataExt;
    m.dev() == st.st_dev && m.ino() == st.st_ino
}

/// Makes the change on the object held by `fd`, as the command would have.
fn perform(fd: &OwnedFd, op: &Op) -> Result<i64, i32> {
    let kind = stat_of(fd)?.st_mode & libc::S_IFMT;
    let (symlink, folder) = (kind == libc::S_IFLNK, kind == libc::S_IFDIR);
    let by_name = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL");
    let set_id = libc::S_ISUID | libc::S_ISGID;
    let rc = match op {
        // Linux has no mode on symlinks.
        Op::Mode(_) if symlink => return Err(libc::EOPNOTSUPP),
        // A set-id file left in a writable tree runs as its owner for
        // whoever starts it later (a setuid-root binary). Folders may have
        // them: setgid there is group inheritance.
        Op::Mode(mode) if mode & set_id != 0 && !folder => return Err(libc::EPERM),
        // SAFETY: a NUL-terminated path naming our own fd.
        Op::Mode(mode) => unsafe { libc::chmod(by_name.as_ptr(), *mode as libc::mode_t) },
        // SAFETY: our fd, an empty path with AT_EMPTY_PATH.
        Op::Owner(uid, gid) => unsafe {
            libc::fchownat(
                fd.as_raw_fd(),
                c"".as_ptr(),
                *uid,
                *gid,
                libc::AT_EMPTY_PATH,
            )
        },
        Op::Times(times) => {
            let ptr = times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
            // SAFETY: our fd, an empty path, `ptr` null or two timespecs.
            let rc =
                unsafe { libc::utimensat(fd.as_raw_fd(), c"".as_ptr(), ptr, libc::AT_EMPTY_PATH) };
            if rc < 0 && errno() == libc::EINVAL && !symlink {
                // Kernels without AT_EMPTY_PATH here: by our fd's name.
                // SAFETY: as above, with a NUL-terminated path.
                unsafe { libc::utimensat(libc::AT_FDCWD, by_name.as_ptr(), ptr, 0) }
            } else {
                rc
            }
        }
        // Only privileged namespaces take attributes on symlinks, and the
        // command holds no privilege.
        Op::SetXattr { .. } | Op::RemoveXattr { .. } if symlink => return Err(libc::EPERM),
        // SAFETY: NUL-terminated path and name, `value` live for the call.
        Op::SetXattr { name, value, flags } => unsafe {
            libc::setxattr(
                by_name.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                *flags,
            )
        },
        // SAFETY: NUL-terminated path and name.
        Op::RemoveXattr { name } => unsafe { libc::removexattr(by_name.as_ptr(), name.as_ptr()) },
    };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(0)
    }
}

/// A connect the supervisor makes for the command.
struct Connect {
    socket: OwnedFd,
    /// The address connected to: the command's own, or, for a named
    /// socket, the name of our fd of the socket that was checked.
    target: Vec<u8>,
    /// That fd, held until the connect is done.
    _held: Option<OwnedFd>,
    unix: bool,
    /// The socket's status flags before we made it non-blocking.
    flags: i32,
}

/// What a connect still waits for.
enum Wait {
    /// A TCP handshake under way: the socket turns writable when done.
    Handshake,
    /// A Unix listener's backlog is full: try again, as a blocking connect
    /// would wait for room; until the deadline, if the socket has a send
    /// timeout.
    Room(Option<Instant>),
}

impl Connect {
    /// The first attempt, without blocking: done (`None`) or what remains
    /// to wait for, if the socket is a blocking one.
    fn first(&mut self) -> Result<Option<Wait>, i32> {
        self.flags = fd_flags(&self.socket)?;
        let blocking = self.flags & libc::O_NONBLOCK == 0;
        if blocking {
            set_fd_flags(&self.socket, self.flags | libc::O_NONBLOCK)?;
        }
        let result = self.attempt();
        let wait = match result {
            Err(libc::EINPROGRESS | libc::EALREADY) if blocking => Some(Wait::Handshake),
            Err(libc::EAGAIN) if blocking && self.unix => Some(Wait::Room(
                send_timeout(&self.socket).map(|t| Instant::now() + t),
            )),
            _ => None,
        };
        if wait.is_none() {
            self.restore();
            result?;
        }
        Ok(wait)
    }

    /// Waits in short slices, giving up when the supervisor stops or the
    /// call no longer waits; `None` then.
    fn finish(self, wait: Wait, listener: &OwnedFd, id: u64, halt: &AtomicBool) -> Answer {
        let answer = loop {
            if halt.load(Ordering::Relaxed) || !id_valid(listener, id) {
                break None;
            }
            match wait {
                Wait::Handshake => {
                    let mut fd = libc::pollfd {
                        fd: self.socket.as_raw_fd(),
                        events: libc::POLLOUT,
                        revents: 0,
                    };
                    // SAFETY: one live pollfd.
                    if unsafe { libc::poll(&mut fd, 1, 50) } > 0 {
                        break Some(
                            match int_option(&self.socket, libc::SOL_SOCKET, libc::SO_ERROR) {
                                Ok(0) => Ok(0),
                                Ok(e) | Err(e) => Err(e),
                            },
                        );
                    }
                }
                Wait::Room(deadline) => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        break Some(Err(libc::EAGAIN));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                    match self.attempt() {
                        Err(libc::EAGAIN) => {}
                        other => break Some(other.map(|()| 0)),
                    }
                }
            }
        };
        self.restore();
        answer
    }

    fn attempt(&self) -> Result<(), i32> {
        // SAFETY: `target` holds a socket address of its length.
        let rc = unsafe {
            libc::connect(
                self.socket.as_raw_fd(),
                self.target.as_ptr().cast(),
                self.target.len() as libc::socklen_t,
            )
        };
        if rc < 0 {
            Err(errno())
        } else {
            Ok(())
        }
    }

    fn restore(&self) {
        if self.flags & libc::O_NONBLOCK == 0 {
            let _ = set_fd_flags(&self.socket, self.flags);
        }
    }
}

/// A Unix address naming our fd of a socket (`/proc/self/fd/N`): the
/// kernel follows it to that very socket, whatever became of its name.
fn unix_address(held: &OwnedFd) -> Vec<u8> {
    let mut out = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    out.extend_from_slice(format!("/proc/self/fd/{}", held.as_raw_fd()).as_bytes());
    out.push(0);
    out
}

/// The send timeout a Unix socket's blocking connect honours, if set.
fn send_timeout(socket: &OwnedFd) -> Option<Duration> {
    let mut tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    let mut len = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `tv`.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&mut tv as *mut libc::timeval).cast(),
            &mut len,
        )
    };
    let t = Duration::from_secs(tv.tv_sec.max(0) as u64)
        + Duration::from_micros(tv.tv_usec.max(0) as u64);
    (rc == 0 && !t.is_zero()).then_some(t)
}

fn int_option(fd: &OwnedFd, level: i32, name: i32) -> Result<i32, i32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `value`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(value)
    }
}

fn fd_flags(fd: &OwnedFd) -> Result<i32, i32> {
    // SAFETY: F_GETFL on a live fd.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        Err(errno())
    } else {
        Ok(flags)
    }
}

fn set_fd_flags(fd: &OwnedFd, flags: i32) -> Result<(), i32> {
    // SAFETY: F_SETFL on a live fd.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) } < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

fn stat_of(fd: &OwnedFd) -> Result<libc::stat, i32> {
    // SAFETY: stat is plain data; the kernel fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: our fd, an empty path with AT_EMPTY_PATH, `st` writable.
    let rc = unsafe {
        libc::fstatat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            &mut st,
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(st)
    }
}

/// `struct open_how` (the libc crate's cannot be built outside it).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `openat2(dirfd, path, flags | O_CLOEXEC, resolve)`.
fn open_path(dirfd: RawFd, path: &CStr, flags: i32, resolve: u64) -> Result<OwnedFd, i32> {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve,
    };
    // SAFETY: a NUL-terminated path and a live open_how of its size.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            path.as_ptr(),
            &how,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: a new fd, ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// A pidfd for thread `tid` (its own, where the kernel has thread pidfds,
/// else its process's).
fn pidfd(tid: i32) -> Result<OwnedFd, i32> {
    let open = |pid: i32, flags: i32| {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
        if fd < 0 {
            Err(errno())
        } else {
            // SAFETY: a new fd, ours.
            Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
        }
    };
    match open(tid, PIDFD_THREAD) {
        Err(libc::EINVAL) => open(thread_group(tid).ok_or(libc::ESRCH)?, 0),
        other => other,
    }
}

/// The process thread `tid` belongs to.
fn thread_group(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

/// Reads the caller's memory (as much as is mapped, from `addr` on).
fn read_memory(tid: i32, addr: u64, buf: &mut [u8]) -> Result<usize, i32> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` covers our live buffer; the kernel checks `remote`.
    let n = unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) };
    if n < 0 {
        Err(errno())
    } else {
        Ok(n as usize)
    }
}

fn id_valid(listener: &OwnedFd, id: u64) -> bool {
    // SAFETY: the kernel reads one u64.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id,
        ) == 0
    }
}

/// Answers call `id`. ENOENT from the kernel: the caller is gone.
fn respond(listener: &OwnedFd, id: u64, answer: Result<i64, i32>) {
    let mut response = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: 0,
    };
    match answer {
        Ok(v) => response.val = v,
        Err(e) => response.error = -e,
    }
    // SAFETY: the kernel reads `response`.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut response,
        )
    };
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
