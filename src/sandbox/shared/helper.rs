//! The helper inside a shared sandbox: the sluice binary itself, started
//! by bubblewrap as the sandbox's first command, serving one socket. For
//! each command it is sent it starts a child that leads a session of its
//! own, takes the three streams it was given, enters its folder, installs
//! the session filter (no `setsid`, no user namespaces, no io_uring) and
//! executes the program; it answers with the child's pidfd once the
//! program runs, and with its wait status when it ends. It reads and
//! copies none of the command's output: the pipes go straight to sluice.
//!
//! The child shares the helper's memory until it executes, so it may
//! allocate nothing: everything it needs is built before it starts.

use super::wire;
use crate::exec::resources::ChildStep;
use nix::libc;
use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set (to the socket's descriptor) in the helper's environment alone.
pub const HELPER_VAR: &str = "SLUICE_SANDBOX_HELPER";

/// Whether this process's executable serves as the helper (see
/// [`serve_if_asked`]): only then do a run's commands share a sandbox.
static SERVES: AtomicBool = AtomicBool::new(false);

/// Called first by a program that links sluice (the `sluice` binary does):
/// when started as a shared sandbox's helper, serves it and exits; else
/// notes that this executable can serve, so a run's confined commands
/// share one sandbox per profile. A program that never calls it still
/// runs every confined command in a sandbox of its own.
pub fn serve_if_asked() {
    let Some(fd) = std::env::var_os(HELPER_VAR) else {
        SERVES.store(true, Ordering::Relaxed);
        return;
    };
    let code = match fd.to_str().and_then(|s| s.parse::<RawFd>().ok()) {
        Some(fd) if fd > 2 => serve(fd),
        _ => 2,
    };
    std::process::exit(code);
}

/// Whether this executable serves as the helper.
pub fn available() -> bool {
    SERVES.load(Ordering::Relaxed)
}

/// One child started and not yet reaped.
struct Child {
    id: u64,
    pid: libc::pid_t,
    pidfd: OwnedFd,
    /// sluice knows its pid: it may be reaped (see [`wire`]).
    acked: bool,
}

/// A landlock ruleset each command restricts itself with, or -1 where the
/// kernel has no landlock. Each restriction makes a landlock domain of the
/// command's own, and landlock lets a process reach another's memory,
/// `/proc` files and descriptors (`/proc/PID/fd`, `environ`) only within
/// its own domain or one nested in it: the run's commands share a PID
/// namespace and a user, yet none can open another's pipes or read its
/// environment. The ruleset handles one right no command is ever given
/// (making block devices), so the domain restricts nothing else.
static DOMAIN: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// Whether [`DOMAIN`] scopes signals too.
static SCOPED: AtomicBool = AtomicBool::new(false);

/// Makes the ruleset of [`DOMAIN`] (close-on-exec); nothing where the
/// kernel cannot.
fn make_domain() {
    #[repr(C)]
    struct RulesetAttr {
        handled_access_fs: u64,
        handled_access_net: u64,
        scoped: u64,
    }
    const MAKE_BLOCK: u64 = 1 << 11;
    // Landlock refuses moving a file to another folder (EXDEV) unless the
    // ruleset handles this right and grants it: granted everywhere.
    const REFER: u64 = 1 << 13;
    const SCOPE_SIGNAL: u64 = 1 << 1;
    let attr = RulesetAttr {
        handled_access_fs: MAKE_BLOCK | REFER,
        handled_access_net: 0,
        scoped: SCOPE_SIGNAL,
    };
    // With signals scoped (landlock ABI 6, Linux 6.12), a command cannot
    // signal what lies outside its domain either: another command, the
    // helper, the child it is forking. An older kernel reads the first
    // field alone.
    let sizes = [
        std::mem::size_of::<RulesetAttr>(),
        std::mem::size_of::<u64>(),
    ];
    for size in sizes {
        // SAFETY: the kernel reads `size` bytes of `attr`.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                size,
                0,
            )
        };
        if fd >= 0 && refer_everywhere(fd as RawFd, REFER) {
            DOMAIN.store(fd as i32, Ordering::Relaxed);
            SCOPED.store(size == sizes[0], Ordering::Relaxed);
            return;
        }
        if fd >= 0 {
            // SAFETY: a ruleset fd of ours, not kept.
            unsafe { libc::close(fd as RawFd) };
        }
    }
}

/// Grants `refer` beneath `/` in `ruleset`: whether it could.
fn refer_everywhere(ruleset: RawFd, refer: u64) -> bool {
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    let Ok(root) = std::fs::File::open("/") else {
        return false;
    };
    let rule = PathBeneath {
        allowed_access: refer,
        parent_fd: root.as_raw_fd(),
    };
    const PATH_BENEATH: libc::c_long = 1;
    // SAFETY: the kernel reads the rule, of its packed size.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            PATH_BENEATH,
            &rule as *const PathBeneath,
            0,
        )
    };
    rc == 0
}

/// Serves `sock` until sluice closes it; the exit status of the helper.
fn serve(sock: RawFd) -> i32 {
    // SAFETY: sluice passed us this descriptor, ours from now on.
    let sock = unsafe { OwnedFd::from_raw_fd(sock) };
    // Nothing the helper holds may reach a command: every descriptor
    // from 3 up closes on exec (the executable's among them).
    // SAFETY: close_range with flags touches no memory.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    make_domain();
    // Commands run as the helper's user: they must not be able to trace
    // it and speak to sluice in its name.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    // Its name in `ps` would be the descriptor it was started through.
    // SAFETY: PR_SET_NAME reads a NUL-terminated name.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"sluice-sandbox".as_ptr(), 0, 0, 0) };
    // The session filter, the filter that keeps a command's hands off the
    // helper's limits (which every later command would inherit), and the
    // one that keeps it from leaving a set-id file behind.
    let filter = [
        super::super::landlock::session_filter(),
        super::super::landlock::limits_filter(),
        super::super::landlock::set_id_filter(),
    ];
    let fd = sock.as_raw_fd();
    // sluice watches the helper through this: a command that stops it
    // (SIGSTOP) ends the sandbox instead of hanging the run.
    // SAFETY: pidfd_open takes a pid and flags.
    let me = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    let me = (me >= 0).then(|| unsafe { OwnedFd::from_raw_fd(me as RawFd) });
    let mine: Vec<RawFd> = me.iter().map(|f| f.as_raw_fd()).collect();
    let apart = [u8::from(
        DOMAIN.load(Ordering::Relaxed) >= 0 && SCOPED.load(Ordering::Relaxed),
    )];
    if wire::send(fd, b'R', 0, &apart, &mine).is_err() {
        return 1;
    }
    drop(me);
    let mut reader = wire::Reader::new(fd);
    let mut children: Vec<Child> = Vec::new();
    loop {
        loop {
            match reader.take() {
                Ok(Some(frame)) if frame.kind == b'A' => {
                    children
                        .iter_mut()
                        .filter(|c| c.id == frame.id)
                        .for_each(|c| c.acked = true);
                }
                Ok(Some(frame)) if frame.kind == b'N' => connect(fd, &frame),
                Ok(Some(frame)) => command(fd, frame, &filter, &mut children),
                Ok(None) => break,
                Err(_) => return 1,
            }
        }
        let ready = wait_for(&sock, &children);
        if ready.socket && !matches!(reader.fill(), Ok(true)) {
            // sluice is gone or done: the sandbox ends with us.
            return 0;
        }
        for index in ready.ended.into_iter().rev() {
            let child = children.swap_remove(index);
            let status = reap(child.pid);
            let mut body = wire::number(status).to_vec();
            body.push(u8::from(session_over(child.pid)));
            let _ = wire::send(fd, b'X', child.id, &body, &[]);
        }
    }
}

/// Whether nothing is left of session `sid` (the sandbox's numbering):
/// the sandbox's `/proc` holds its processes alone, so a look is cheap
/// here, where sluice would read every process of the machine. A look
/// counts only if no process was made in the sandbox while it looked (the
/// last pid handed out is the same before and after): a process that
/// forks and exits in a loop is gone from the listing by the time it is
/// read, under a pid the listing did not hold. A sandbox busy making
/// processes gets no answer but "look yourself".
fn session_over(sid: libc::pid_t) -> bool {
    for _ in 0..3 {
        let before = last_pid();
        if session_seen(sid) {
            return false;
        }
        if before.is_some() && before == last_pid() {
            return true;
        }
    }
    false
}

/// The last pid handed out in the sandbox (`/proc/loadavg`'s fifth field,
/// in the reader's PID namespace).
fn last_pid() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().nth(4)?.parse().ok()
}

/// Whether one look at `/proc` finds a process of session `sid`.
fn session_seen(sid: libc::pid_t) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            return false;
        };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // "pid (comm) state ppid pgrp session ..."; comm may hold ')'.
        let session = text
            .rfind(')')
            .and_then(|i| text[i + 1..].split_whitespace().nth(3))
            .and_then(|s| s.parse::<libc::pid_t>().ok());
        session == Some(sid)
    })
}

/// What [`wait_for`] saw ready.
struct Ready {
    socket: bool,
    /// Indexes into the children, ascending.
    ended: Vec<usize>,
}

/// Waits until the socket has bytes or an acknowledged child ended.
fn wait_for(sock: &OwnedFd, children: &[Child]) -> Ready {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = vec![PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
    // One not acknowledged is polled for nothing (no events asked).
    fds.extend(children.iter().map(|c| {
        let events = if c.acked {
            PollFlags::POLLIN
        } else {
            PollFlags::empty()
        };
        PollFd::new(c.pidfd.as_fd(), events)
    }));
    loop {
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => break,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        }
    }
    let hit = |f: &PollFd| {
        f.revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP))
    };
    Ready {
        socket: hit(&fds[0]),
        ended: (1..fds.len())
            .filter(|&i| hit(&fds[i]))
            .map(|i| i - 1)
            .collect(),
    }
}

/// The raw wait status of `pid`, reaped.
fn reap(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    // SAFETY: waitpid writes one int we own.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return libc::SIGKILL;
        }
    }
    status
}

/// A command to start, read from its frame.
struct Command {
    program: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    cwd: CString,
    /// Its rlimits, encoded ([`crate::exec::resources::ChildStep`]).
    rlimits: Vec<u8>,
}

/// Starts the command `frame` asks for and answers `started` or `failed`.
fn command(
    sock: RawFd,
    frame: wire::Frame,
    filter: &[Vec<libc::sock_filter>; 3],
    children: &mut Vec<Child>,
) {
    if frame.kind != b'C' || !(3..=5).contains(&frame.fds.len()) {
        let _ = wire::send(sock, b'F', frame.id, &failure(libc::EINVAL, EXEC), &[]);
        return;
    }
    // A reply that cannot be sent means sluice is gone: the next read of
    // the socket ends the helper.
    let parsed = parse(&frame.body).map_err(|e| (e, EXEC));
    match parsed.and_then(|c| spawn(&c, &frame.fds, filter)) {
        Ok((pid, pidfd)) => {
            let _ = wire::send(
                sock,
                b'S',
                frame.id,
                &wire::number(pid),
                &[pidfd.as_raw_fd()],
            );
            children.push(Child {
                id: frame.id,
                pid,
                pidfd,
                acked: false,
            });
        }
        Err((errno, stage)) => {
            let _ = wire::send(sock, b'F', frame.id, &failure(errno, stage), &[]);
        }
    }
}

/// Opens a TCP connection inside the sandbox's network namespace to the
/// loopback address the frame names, for sluice (a `fetch` to a server a
/// command started), and answers `connected` with the socket or the
/// errno. The connection is begun, not awaited: the helper serves on
/// while sluice waits for it.
fn connect(sock: RawFd, frame: &wire::Frame) {
    let answer = match wire::read_address(&frame.body) {
        Some(addr) if addr.ip().is_loopback() => begin_connect(addr),
        _ => Err(libc::EINVAL),
    };
    let _ = match answer {
        Ok(stream) => wire::send(
            sock,
            b'N',
            frame.id,
            &wire::number(0),
            &[stream.as_raw_fd()],
        ),
        Err(errno) => wire::send(sock, b'N', frame.id, &wire::number(errno), &[]),
    };
}

/// A non-blocking socket connecting to `addr` (connected, or on its way).
fn begin_connect(addr: std::net::SocketAddr) -> Result<OwnedFd, i32> {
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, SockaddrStorage};
    let family = match addr {
        std::net::SocketAddr::V4(_) => AddressFamily::Inet,
        std::net::SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let flags = SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK;
    let fd = socket(family, SockType::Stream, flags, None).map_err(|e| e as i32)?;
    match connect(fd.as_raw_fd(), &SockaddrStorage::from(addr)) {
        Ok(()) | Err(nix::errno::Errno::EINPROGRESS) => Ok(fd),
        Err(e) => Err(e as i32),
    }
}

/// The stages a start fails at (see [`wire`]).
const EXEC: u8 = 0;
const FOLDER: u8 = 1;
const LIMITS: u8 = 2;

/// A `failed` frame's body.
fn failure(errno: i32, stage: u8) -> Vec<u8> {
    let mut body = wire::number(errno).to_vec();
    body.push(stage);
    body
}

/// The command in `body`, its program found; an errno when it cannot be.
fn parse(body: &[u8]) -> Result<Command, i32> {
    let mut input = body;
    let lists = (
        wire::take_list(&mut input),
        wire::take_list(&mut input),
        wire::take_list(&mut input),
        wire::take_list(&mut input),
    );
    let (Some(argv), Some(env), Some(cwd), Some(rlimits)) = lists else {
        return Err(libc::EINVAL);
    };
    let c = |bytes: Vec<u8>| CString::new(bytes).map_err(|_| libc::EINVAL);
    let first = argv.first().cloned().ok_or(libc::EINVAL)?;
    let path = env
        .iter()
        .find_map(|e| e.strip_prefix(b"PATH="))
        .unwrap_or(b"/usr/local/bin:/usr/bin:/bin");
    Ok(Command {
        program: c(find(&first, path)?)?,
        argv: argv.into_iter().map(c).collect::<Result<_, _>>()?,
        env: env.into_iter().map(c).collect::<Result<_, _>>()?,
        cwd: c(cwd.into_iter().next().ok_or(libc::EINVAL)?)?,
        rlimits: rlimits.concat(),
    })
}

/// The file `program` names, looked up in `path` as `execvp` would: a
/// name with a slash as it is; else the first executable file of that
/// name, EACCES when only unexecutable ones exist, ENOENT when none does.
fn find(program: &[u8], path: &[u8]) -> Result<Vec<u8>, i32> {
    if program.is_empty() {
        return Err(libc::ENOENT);
    }
    if program.contains(&b'/') {
        return Ok(program.to_vec());
    }
    let mut denied = false;
    for dir in path.split(|&b| b == b':') {
        let dir = if dir.is_empty() { b".".as_slice() } else { dir };
        let candidate = [dir, b"/", program].concat();
        let Ok(meta) = std::fs::metadata(OsStr::from_bytes(&candidate)) else {
            continue;
        };
        let Ok(name) = CString::new(candidate.clone()) else {
            continue;
        };
        // SAFETY: access reads the NUL-terminated name.
        if meta.is_file() && unsafe { libc::access(name.as_ptr(), libc::X_OK) } == 0 {
            return Ok(candidate);
        }
        denied = true;
    }
    Err(if denied { libc::EACCES } else { libc::ENOENT })
}

/// The child's stack: [`become_command`] makes raw system calls alone.
const CHILD_STACK: usize = 64 << 10;

/// What the child of [`spawn`] is handed, built before it exists.
struct Launch<'a> {
    command: &'a Command,
    streams: [RawFd; 3],
    /// Joins the command's cgroups and sets its rlimits.
    bounds: ChildStep,
    filters: &'a [libc::sock_fprog; 3],
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    report: RawFd,
}

/// Starts `command` with `fds` as its streams; its pid and pidfd once the
/// program runs, or the errno that stopped it and where.
///
/// The child shares the helper's memory until it executes (a `vfork`,
/// made with `clone`): copying the helper's page tables for each command,
/// and tearing the copy down at its exec, cost more than the command
/// (`true`) itself. The helper waits meanwhile. A command cannot stop the
/// child to hold it there: the child is outside every command's landlock
/// domain, and the shared sandbox serves only where landlock scopes
/// signals to their domain (see `serve_if_asked`'s `R` frame).
fn spawn(
    command: &Command,
    fds: &[OwnedFd],
    filter: &[Vec<libc::sock_filter>; 3],
) -> Result<(i32, OwnedFd), (i32, u8)> {
    let pointers = |list: &[CString]| -> Vec<*const libc::c_char> {
        list.iter()
            .map(|s| s.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    let (argv, envp) = (pointers(&command.argv), pointers(&command.env));
    let mut report = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into `report`.
    if unsafe { libc::pipe2(report.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err((errno(), EXEC));
    }
    // SAFETY: both are ours now.
    let (read, write) = unsafe {
        (
            OwnedFd::from_raw_fd(report[0]),
            OwnedFd::from_raw_fd(report[1]),
        )
    };
    let cgroups: Vec<RawFd> = fds[3..].iter().map(|f| f.as_raw_fd()).collect();
    let bounds =
        ChildStep::with_rlimits(&cgroups, &command.rlimits).ok_or((libc::EINVAL, LIMITS))?;
    let filters = filter.each_ref().map(|f| libc::sock_fprog {
        len: f.len() as libc::c_ushort,
        filter: f.as_ptr() as *mut libc::sock_filter,
    });
    let launch = Launch {
        command,
        streams: [fds[0].as_raw_fd(), fds[1].as_raw_fd(), fds[2].as_raw_fd()],
        bounds,
        filters: &filters,
        argv: &argv,
        envp: &envp,
        report: write.as_raw_fd(),
    };
    let pid = clone_vfork(&launch)?;
    drop(write);
    let mut said = [0u8; 5];
    // SAFETY: reads at most 5 bytes into `said`; the child has executed or
    // exited, so the pipe holds its word or nothing.
    let n = loop {
        let n = unsafe { libc::read(read.as_raw_fd(), said.as_mut_ptr().cast(), 5) };
        if n >= 0 || errno() != libc::EINTR {
            break n;
        }
    };
    if n == 5 {
        reap(pid);
        let errno = i32::from_ne_bytes(said[..4].try_into().expect("4 bytes"));
        return Err((errno, said[4]));
    }
    // SAFETY: pidfd_open takes a pid and flags.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        let e = errno();
        // SAFETY: our child; kill and reap it.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        reap(pid);
        return Err((e, EXEC));
    }
    // SAFETY: the kernel just gave us this descriptor.
    Ok((pid, unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) }))
}

/// Starts the child of [`spawn`] on a stack of its own, sharing memory
/// with the helper, which resumes once the child executed or exited. The
/// helper's signals are blocked meanwhile, so no handler of its runs on
/// the child's stack; the child unblocks them before it executes.
fn clone_vfork(launch: &Launch) -> Result<libc::pid_t, (i32, u8)> {
    extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `Launch` borrowed for the clone, alive
        // while the helper waits for this child's exec.
        let l = unsafe { &*(arg as *const Launch) };
        // SAFETY: a child sharing memory with a helper that waits.
        unsafe { become_command(l, l.argv, l.envp) }
    }
    let mut stack = vec![0u8; CHILD_STACK];
    // SAFETY: one past the end of the stack buffer, rounded down to 16.
    let top = unsafe { stack.as_mut_ptr().add(CHILD_STACK) } as usize & !15;
    // SAFETY: sigset functions write the sets we own.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut was: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut was);
    }
    // SAFETY: the child runs `child` on `stack`, alive until clone returns
    // (CLONE_VFORK: after the child's exec or exit).
    let pid = unsafe {
        libc::clone(
            child,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            launch as *const Launch as *mut libc::c_void,
        )
    };
    let failed = errno();
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &was, std::ptr::null_mut()) };
    drop(stack);
    if pid < 0 {
        return Err((failed, EXEC));
    }
    Ok(pid)
}

/// The child's side of [`spawn`]: never returns. Only raw system calls:
/// its cgroups and rlimits first (nothing of it is ever outside them), a
/// session of its own (the filter then forbids another), the streams, the
/// folder, default signal handling, no new privileges, the filter, then
/// the program; on any failure the errno goes to `report`.
///
/// # Safety
/// Called in the child of [`clone_vfork`], whose parent waits.
unsafe fn become_command(
    launch: &Launch,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
) -> ! {
    let (command, streams, filters, report) = (
        launch.command,
        &launch.streams,
        launch.filters,
        launch.report,
    );
    let fail_with = |report: RawFd, errno: i32, stage: u8| -> ! {
        let e = errno.to_ne_bytes();
        let said = [e[0], e[1], e[2], e[3], stage];
        libc::write(report, said.as_ptr().cast(), 5);
        libc::_exit(127)
    };
    let fail = |report: RawFd, stage: u8| -> ! { fail_with(report, errno(), stage) };
    if let Err(e) = launch.bounds.apply() {
        fail_with(report, e, LIMITS);
    }
    if libc::setsid() < 0 {
        fail(report, EXEC);
    }
    for (target, &fd) in streams.iter().enumerate() {
        if libc::dup2(fd, target as RawFd) < 0 {
            fail(report, EXEC);
        }
    }
    if libc::chdir(command.cwd.as_ptr()) < 0 {
        fail(report, FOLDER);
    }
    let mut all: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut all);
    libc::sigprocmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
    // Rust's runtime ignores SIGPIPE; a command must get the default.
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 {
        fail(report, EXEC);
    }
    let domain = DOMAIN.load(Ordering::Relaxed);
    if domain >= 0 && libc::syscall(libc::SYS_landlock_restrict_self, domain, 0) < 0 {
        fail(report, EXEC);
    }
    for filter in filters {
        let filter: *const libc::sock_fprog = filter;
        if libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, filter) < 0 {
            fail(report, EXEC);
        }
    }
    libc::execve(command.program.as_ptr(), argv.as_ptr(), envp.as_ptr());
    fail(report, EXEC)
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
