//! One sandbox per run and profile: the run's first confined command
//! under a profile starts bubblewrap once, with the sluice binary inside
//! as a helper ([`helper`]), and every later command under the same
//! profile is started by that helper instead of a bubblewrap of its own.
//! The namespaces (mounts, PID, network) are made once, so a command costs
//! a fork and an exec; commands of the run share the network namespace
//! (a server one starts is reachable from the next over loopback) and
//! `/tmp`.
//!
//! A profile is the whole bubblewrap command line: a widened call, a
//! policy with other grants, or a tree whose masks changed (a new `.env`)
//! gets a sandbox of its own. Each command still leads a session it
//! cannot leave (the helper's filter refuses `setsid`), so a timeout, a
//! kill and the end of a call stop all of it, as they stop any command
//! leading its own session (see `exec::process`). The output pipes are
//! made by sluice and passed to the command: the helper never copies them.
//!
//! Only an executable that calls [`serve_if_asked`] first can be the
//! helper (the `sluice` binary does); elsewhere, and where the helper
//! cannot start, each command gets a bubblewrap of its own as before.

mod helper;
mod wire;

pub use helper::{available, serve_if_asked};

use super::bwrap::Bwrap;
use crate::exec::{Running, Start, StartFailure, Starter, Wrap};
use nix::libc;
use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long a command may take to start before the sandbox counts as
/// broken (a fork and an exec; the helper answers at once).
const START_WAIT: Duration = Duration::from_secs(30);

/// One shared sandbox: its bubblewrap command line, and the link to its
/// helper once started.
pub struct Shared {
    program: PathBuf,
    args: Vec<OsString>,
    link: OnceLock<Result<Link, String>>,
    /// Whether its network namespace is its own (the network is closed):
    /// a server a command started there is reachable only inside.
    own_network: bool,
    /// When a command last started in it (the run's count of starts).
    used: AtomicU64,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("args", &self.args.len())
            .field("serving", &self.serving())
            .finish()
    }
}

impl Shared {
    /// A sandbox made by `program` with `args` (see [`key`]), not started
    /// yet.
    fn new(program: &Path, args: Vec<OsString>, own_network: bool) -> Shared {
        Shared {
            program: program.to_path_buf(),
            args,
            link: OnceLock::new(),
            own_network,
            used: AtomicU64::new(0),
        }
    }

    /// Whether the helper started and serves.
    pub fn serving(&self) -> bool {
        self.link.get().is_some_and(|l| l.is_ok())
    }

    /// Whether the helper started and then went away (a command killed
    /// it): the run makes a new sandbox for the profile.
    fn ended(&self) -> bool {
        matches!(self.link.get(), Some(Ok(link)) if lock(&link.table).broken.is_some())
    }

    /// The link to the helper, started on first use.
    fn link(&self) -> Result<&Link, &String> {
        self.link
            .get_or_init(|| Link::start(&self.program, &self.args))
            .as_ref()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(Ok(link)) = self.link.get() {
            // The helper reads end of stream and exits, and the sandbox's
            // namespaces with it; the reply thread ends too.
            let _ =
                nix::sys::socket::shutdown(link.sock.as_raw_fd(), nix::sys::socket::Shutdown::Both);
        }
    }
}

/// The bubblewrap command line that makes `bwrap`'s sandbox, less the
/// command: the same for every command under the same profile.
fn key(bwrap: &Bwrap) -> Vec<OsString> {
    super::bwrap::args(&bwrap.profile, &bwrap.visible, &bwrap.masks, Path::new("/"))
}

/// What waits for the helper's answers about one command.
struct Waiter {
    started: Option<SyncSender<Result<u32, StartFailure>>>,
    /// For a connection asked for (frame `connect`): the socket, or errno.
    connected: Option<SyncSender<Result<OwnedFd, i32>>>,
    exit: Option<oneshot::Sender<crate::exec::Ended>>,
    /// Set when the helper says nothing of the command's session is left.
    over: Arc<std::sync::atomic::AtomicBool>,
}

/// The commands waiting for answers, and why no more will come.
#[derive(Default)]
struct Table {
    waiting: HashMap<u64, Waiter>,
    broken: Option<String>,
}

type Replies = Arc<Mutex<Table>>;

/// The right to write a frame: one writer at a time (the callers, and the
/// reply thread's acknowledgements).
type Writer = Arc<Mutex<()>>;

fn lock(table: &Replies) -> std::sync::MutexGuard<'_, Table> {
    table.lock().unwrap_or_else(|e| e.into_inner())
}

/// A started helper: the socket to it, one writer at a time, and the
/// table its replies are sorted into (by the reply thread).
struct Link {
    sock: Arc<OwnedFd>,
    send: Writer,
    table: Replies,
    next: AtomicU64,
    helper: Arc<Helper>,
}

/// The helper process, as sluice watches it: a command of the sandbox runs
/// as its user and can stop it (SIGSTOP), and a stopped helper answers
/// nothing: no command would start, and no command's end be told.
struct Helper {
    /// Its pidfd (from the `ready` frame), when it sent one.
    pidfd: Option<OwnedFd>,
    /// Its pid as this process sees it.
    pid: Option<u32>,
    /// The link's table, marked broken when the sandbox is ended here.
    table: Replies,
    /// The link's socket, shut when the sandbox is ended here: the reply
    /// thread reads end of stream even where the helper could not be
    /// killed (it sent no pidfd).
    sock: Arc<OwnedFd>,
}

impl Helper {
    /// Whether the helper is stopped (by a signal, or traced).
    fn stalled(&self) -> bool {
        let Some(pid) = self.pid else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next());
        matches!(state, Some("T" | "t"))
    }

    /// Ends the sandbox: the helper is killed, and every process of its
    /// PID namespace with it; the reply thread then reads end of stream
    /// and tells every waiter. Through the pidfd, so a pid reused since
    /// is never hit.
    fn end(&self) {
        // At once, so the run's next command gets a new sandbox rather
        // than this one, dying.
        lock(&self.table)
            .broken
            .get_or_insert_with(|| "the run's sandbox ended".into());
        if let Some(fd) = &self.pidfd {
            // SAFETY: a pidfd we own, a signal number, no siginfo, flags 0.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<u8>(),
                    0,
                );
            }
        }
        let _ = nix::sys::socket::shutdown(self.sock.as_raw_fd(), nix::sys::socket::Shutdown::Both);
    }
}

impl Link {
    /// Starts bubblewrap with the helper inside and waits until the helper
    /// serves. The thread that starts bubblewrap stays for the sandbox's
    /// life, reading replies: bubblewrap dies with the thread that started
    /// it (`--die-with-parent`).
    fn start(program: &Path, args: &[OsString]) -> Result<Link, String> {
        use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| format!("cannot make the sandbox's socket: {e}"))?;
        // A helper that reads nothing (stopped) must not hold a caller in
        // a send forever: the send fails, and the sandbox is ended.
        let wait = nix::sys::time::TimeVal::new(START_WAIT.as_secs() as _, 0);
        nix::sys::socket::setsockopt(&ours, nix::sys::socket::sockopt::SendTimeout, &wait)
            .map_err(|e| format!("cannot make the sandbox's socket: {e}"))?;
        let exe = std::fs::File::open("/proc/self/exe")
            .map_err(|e| format!("cannot open sluice's own executable for the sandbox: {e}"))?;
        let sock = Arc::new(ours);
        let table = Replies::default();
        let (ready_tx, ready_rx) = sync_channel(1);
        let send = Writer::default();
        let link = Replying {
            sock: sock.clone(),
            send: send.clone(),
            table: table.clone(),
        };
        let mut command = std::process::Command::new(program);
        command.args(args);
        std::thread::Builder::new()
            .name("sluice-sandbox".into())
            .spawn(move || serve_replies(command, theirs, exe, link, ready_tx))
            .map_err(|e| format!("cannot start the sandbox's thread: {e}"))?;
        let helper = ready_rx
            .recv()
            .map_err(|_| "the sandbox's thread ended before it started".to_string())??;
        Ok(Link {
            sock,
            send,
            table,
            next: AtomicU64::new(1),
            helper,
        })
    }

    /// Starts `command` in the sandbox; `keep` lives as long as it runs.
    fn run(&self, command: Start, keep: crate::exec::Guard) -> Result<Running, StartFailure> {
        let body = body(&command);
        if body.len() > wire::MAX_BODY {
            // Far beyond what the kernel executes, and more than the
            // helper reads: refused here, as exec would refuse it, rather
            // than ending the sandbox and the run's other commands in it.
            return Err(StartFailure::Exec(os_error(libc::E2BIG)));
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (started_tx, started_rx) = sync_channel(1);
        let (exit_tx, exit_rx) = oneshot::channel();
        let over = Arc::<std::sync::atomic::AtomicBool>::default();
        {
            let mut table = lock(&self.table);
            if let Some(why) = &table.broken {
                return Err(StartFailure::Broken(why.clone()));
            }
            let waiter = Waiter {
                started: Some(started_tx),
                connected: None,
                exit: Some(exit_tx),
                over: over.clone(),
            };
            table.waiting.insert(id, waiter);
        }
        let sent = {
            let _one = self.send.lock().unwrap_or_else(|e| e.into_inner());
            let mut fds: Vec<i32> = [&command.stdin, &command.stdout, &command.stderr]
                .map(|f| f.as_raw_fd())
                .to_vec();
            fds.extend(command.bounds.iter().flat_map(|b| b.fds().to_vec()));
            wire::send(self.sock.as_raw_fd(), b'C', id, &body, &fds)
        };
        // Our copies of the pipes' ends close now: the command holds its own.
        drop(command);
        if let Err(e) = sent {
            lock(&self.table).waiting.remove(&id);
            // Part of a frame may have gone: nothing after it would be read
            // right, so this sandbox ends.
            self.helper.end();
            return Err(StartFailure::Broken(format!(
                "cannot reach the run's sandbox: {e}"
            )));
        }
        let pid = self.started(started_rx)?;
        let keep = Box::new(Kept {
            _keep: keep,
            sid: pid as i32,
            helper: self.helper.clone(),
            over,
        });
        Ok(Running {
            pid,
            exit: exit_rx,
            keep,
        })
    }
}

impl Link {
    /// The helper's answer to a command sent: its pid and pidfd once it
    /// runs. A helper that is stopped, or that gives no answer in
    /// [`START_WAIT`], has its sandbox ended: the command never starts
    /// later, unseen by the call that gave up on it, and the run's next
    /// command gets a new sandbox.
    fn started(
        &self,
        answer: std::sync::mpsc::Receiver<Result<u32, StartFailure>>,
    ) -> Result<u32, StartFailure> {
        use std::sync::mpsc::RecvTimeoutError;
        let since = std::time::Instant::now();
        loop {
            match answer.recv_timeout(WATCH_EVERY) {
                Ok(answer) => return answer,
                Err(RecvTimeoutError::Disconnected) => {
                    let why = lock(&self.table).broken.clone();
                    return Err(StartFailure::Broken(
                        why.unwrap_or_else(|| "the run's sandbox ended".into()),
                    ));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            let stalled = self.helper.stalled();
            if stalled || since.elapsed() >= START_WAIT {
                self.helper.end();
                let why = if stalled {
                    "the run's sandbox was stopped by one of its commands, and ended"
                } else {
                    "the run's sandbox did not start the command in time, and was ended"
                };
                return Err(StartFailure::Broken(why.into()));
            }
        }
    }
}

impl Link {
    /// A TCP connection to the loopback address `addr` made inside the
    /// sandbox's network namespace (connected, or on its way); the errno
    /// when it could not be made there (nothing listens: ECONNREFUSED).
    fn connect(&self, addr: std::net::SocketAddr) -> Result<OwnedFd, i32> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = sync_channel(1);
        {
            let mut table = lock(&self.table);
            if table.broken.is_some() {
                return Err(libc::ECONNREFUSED);
            }
            let waiter = Waiter {
                started: None,
                connected: Some(tx),
                exit: None,
                over: Arc::default(),
            };
            table.waiting.insert(id, waiter);
        }
        let sent = {
            let _one = self.send.lock().unwrap_or_else(|e| e.into_inner());
            wire::send(self.sock.as_raw_fd(), b'N', id, &wire::address(addr), &[])
        };
        if sent.is_err() {
            lock(&self.table).waiting.remove(&id);
            self.helper.end();
            return Err(libc::ECONNREFUSED);
        }
        match rx.recv_timeout(START_WAIT) {
            Ok(answer) => answer,
            Err(_) => {
                lock(&self.table).waiting.remove(&id);
                Err(libc::ETIMEDOUT)
            }
        }
    }
}

/// What a command started in the sandbox keeps alive until every process
/// of its session has ended: the executor drops it once it killed the
/// session (TERM, then KILL) and saw it end.
struct Kept {
    _keep: crate::exec::Guard,
    /// The command's session, by its host pid.
    sid: i32,
    helper: Arc<Helper>,
    /// The helper saw nothing left of the session when the command ended.
    over: Arc<std::sync::atomic::AtomicBool>,
}

/// Scans in a row that must find nothing of a killed session (on a busy
/// machine, where other pids are given out during every scan).
const EMPTY_SCANS: u32 = 8;

/// How long a session killed and not yet seen ended may take to end.
const SETTLE: Duration = Duration::from_millis(300);

impl Drop for Kept {
    /// A process of the session that got away from the kill (one that
    /// forks and exits faster than the session is scanned and killed,
    /// each time under a new pid) would run on in the sandbox after its
    /// call: the sandbox ends instead, with everything in it, as a
    /// bubblewrap of the call's own would have ended with the call.
    ///
    /// Such a process is at any moment under a pid a scan may just have
    /// passed, and it takes a new pid each time: a scan that finds nothing
    /// while no pid was given out on the machine saw all there was; else
    /// the session counts as ended once [`EMPTY_SCANS`] scans in a row
    /// find nothing of it.
    fn drop(&mut self) {
        if self.over.load(Ordering::Relaxed) {
            return;
        }
        let until = std::time::Instant::now() + SETTLE;
        let mut empty = 0;
        loop {
            let before = last_pid();
            if session_left(self.sid) {
                empty = 0;
                if std::time::Instant::now() >= until {
                    self.helper.end();
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            empty += 1;
            if empty >= EMPTY_SCANS || (before.is_some() && before == last_pid()) {
                return;
            }
        }
    }
}

/// The pid the machine gave out last, as /proc/loadavg shows it.
fn last_pid() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().last().map(String::from)
}

/// Whether any process of session `sid` is left, zombies included: the
/// command's own process has been reaped by now, and the sandbox's init
/// reaps the others at once, so a zombie that stays is a trail still
/// being laid (a process that forks and exits in a loop is, at any
/// moment, as likely a zombie as not).
///
/// The newest pids are looked at first: a process that forks and exits in
/// a loop is always among them, and is looked for right after the listing
/// rather than after every older process's.
fn session_left(sid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable_by(|a, b| b.cmp(a));
    pids.into_iter().any(|pid| {
        state_and_session(Path::new(&format!("/proc/{pid}/stat"))).is_some_and(|(_, s)| s == sid)
    })
}

/// The state and session of a process (or thread), from its stat file.
fn state_and_session(stat: &Path) -> Option<(char, i32)> {
    let text = std::fs::read_to_string(stat).ok()?;
    // "pid (comm) state ppid pgrp session ..."; comm may hold ')'.
    let mut fields = text[text.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let session = fields.nth(2)?.parse().ok()?;
    Some((state, session))
}

/// How often a wait on the helper checks that it is not stopped.
const WATCH_EVERY: Duration = Duration::from_millis(50);

/// The `command` frame's body (see [`wire`]).
fn body(command: &Start) -> Vec<u8> {
    let mut out = Vec::new();
    let argv: Vec<&[u8]> = command.argv.iter().map(|a| a.as_bytes()).collect();
    wire::put_list(&mut out, &argv);
    let env: Vec<Vec<u8>> = command
        .env
        .iter()
        .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
        .collect();
    wire::put_list(&mut out, &env);
    wire::put_list(&mut out, &[command.cwd.as_os_str().as_bytes()]);
    let rlimits: Vec<Vec<u8>> = command.bounds.iter().map(|b| b.encoded_rlimits()).collect();
    wire::put_list(&mut out, &rlimits);
    out
}

/// What the reply thread shares with the link: the socket, the right to
/// write on it, and the table replies are sorted into.
struct Replying {
    sock: Arc<OwnedFd>,
    send: Writer,
    table: Replies,
}

/// The reply thread: starts bubblewrap with the helper, says whether it
/// serves, then sorts the helper's replies until it is gone, watching each
/// started command's end (see [`Watched`]).
fn serve_replies(
    mut command: std::process::Command,
    theirs: OwnedFd,
    exe: std::fs::File,
    link: Replying,
    ready: SyncSender<Result<Arc<Helper>, String>>,
) {
    use std::os::unix::process::CommandExt;
    let keep = [theirs.as_raw_fd(), exe.as_raw_fd()];
    command
        .arg("--")
        .arg(format!("/proc/self/fd/{}", exe.as_raw_fd()))
        .env_clear()
        .env(helper::HELPER_VAR, theirs.as_raw_fd().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // SAFETY: fcntl on two descriptors we own; async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            for fd in keep {
                if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    // A group of its own: a terminal's Ctrl-C goes to sluice's group, and
    // must not kill the sandbox (and every command in it) before sluice
    // stops the commands itself and records them stopped.
    command.process_group(0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let _ = ready.send(Err(format!(
                "cannot start bubblewrap for the run's sandbox: {e}"
            )));
            return;
        }
    };
    drop((command, theirs, exe));
    let mut reader = wire::Reader::new(link.sock.as_raw_fd());
    let helper = match reader.next() {
        // Commands kept apart (a landlock domain each, signals scoped)
        // are what makes sharing as safe as a bubblewrap each: without,
        // the run's commands get one each, as before.
        Ok(Some(frame)) if frame.kind == b'R' && frame.body.first() == Some(&1) => {
            let pidfd = frame.fds.into_iter().next();
            let helper = Arc::new(Helper {
                pid: pidfd.as_ref().and_then(host_pid),
                pidfd,
                table: link.table.clone(),
                sock: link.sock.clone(),
            });
            let _ = ready.send(Ok(helper.clone()));
            helper
        }
        Ok(Some(frame)) if frame.kind == b'R' => {
            let _ = child.kill();
            let _ = child.wait();
            let _ = ready.send(Err(
                "this kernel cannot keep the commands of a shared sandbox apart (landlock with scoped signals, Linux 6.12)"
                    .into(),
            ));
            return;
        }
        _ => {
            let _ = child.kill();
            let said = child
                .wait_with_output()
                .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_string())
                .unwrap_or_default();
            let _ = ready.send(Err(format!("the run's sandbox did not start: {said}")));
            return;
        }
    };
    // bubblewrap says nothing more once the helper runs.
    drop(child.stderr.take());
    sort_replies(&mut reader, &link, &helper);
    let mut table = lock(&link.table);
    table.broken = Some("the run's sandbox ended".into());
    // Dropping the senders tells every waiter: no answer will come.
    table.waiting.clear();
    drop(table);
    let _ = child.wait();
}

/// A started command whose end is watched through its pidfd: once it has
/// ended, the helper must tell it (frame `exited`); a helper that is
/// stopped meanwhile, or that does not tell it in [`START_WAIT`], has its
/// sandbox ended, which tells every waiter (the command's call then ends
/// instead of hanging).
struct Watched {
    id: u64,
    pidfd: OwnedFd,
    ended: Option<std::time::Instant>,
}

/// Sorts the helper's replies until the socket ends, and watches the
/// started commands' ends.
fn sort_replies(reader: &mut wire::Reader, link: &Replying, helper: &Helper) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let mut watched: Vec<Watched> = Vec::new();
    loop {
        loop {
            match reader.take() {
                Ok(Some(frame)) => take_reply(frame, link, &mut watched),
                Ok(None) => break,
                Err(_) => return,
            }
        }
        let telling = watched.iter().any(|w| w.ended.is_some());
        // An ended command's pidfd stays ready (and reports a hang-up once
        // reaped): only those still running are polled.
        let running: Vec<usize> = (0..watched.len())
            .filter(|&i| watched[i].ended.is_none())
            .collect();
        let mut fds = vec![PollFd::new(link.sock.as_fd(), PollFlags::POLLIN)];
        fds.extend(
            running
                .iter()
                .map(|&i| PollFd::new(watched[i].pidfd.as_fd(), PollFlags::POLLIN)),
        );
        let wait = if telling {
            PollTimeout::try_from(WATCH_EVERY).unwrap_or(PollTimeout::MAX)
        } else {
            PollTimeout::NONE
        };
        match poll(&mut fds, wait) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return,
        }
        let hit = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
        let socket = hit(&fds[0]);
        let done: Vec<usize> = running
            .iter()
            .zip(&fds[1..])
            .filter(|(_, f)| hit(f))
            .map(|(&i, _)| i)
            .collect();
        drop(fds);
        let now = std::time::Instant::now();
        for i in done {
            watched[i].ended = Some(now);
        }
        if socket && !matches!(reader.fill(), Ok(true)) {
            return;
        }
        // The helper tells a command's end within moments: only one that
        // keeps it waiting is asked about (a look in /proc).
        let waited = |w: &Watched, long| w.ended.is_some_and(|t| now - t >= long);
        let slow = watched.iter().any(|w| waited(w, WATCH_EVERY));
        if slow && (watched.iter().any(|w| waited(w, START_WAIT)) || helper.stalled()) {
            // The socket is shut: the next read ends the loop.
            helper.end();
        }
    }
}

/// Hands one reply to the command it is about, acknowledging a start.
fn take_reply(frame: wire::Frame, link: &Replying, watched: &mut Vec<Watched>) {
    let id = frame.id;
    match sort(&link.table, frame) {
        Some(pidfd) => {
            watched.push(Watched {
                id,
                pidfd,
                ended: None,
            });
            let _one = link.send.lock().unwrap_or_else(|e| e.into_inner());
            let _ = wire::send(link.sock.as_raw_fd(), b'A', id, &[], &[]);
        }
        None => watched.retain(|w| w.id != id || !told(&link.table, id)),
    }
}

/// Whether the helper told all it will of command `id` (its end, or its
/// failure to start).
fn told(table: &Replies, id: u64) -> bool {
    !lock(table).waiting.contains_key(&id)
}

/// Hands one reply to the command it is about; the pidfd of a command
/// whose start was told, for its end to be watched and its start
/// acknowledged.
fn sort(table: &Replies, frame: wire::Frame) -> Option<OwnedFd> {
    let mut table = lock(table);
    let waiter = table.waiting.get_mut(&frame.id)?;
    let number = wire::read_number(&frame.body).unwrap_or(libc::EIO);
    match frame.kind {
        b'S' => {
            let pidfd = frame.fds.into_iter().next();
            let pid = pidfd.as_ref().and_then(host_pid);
            let answer = pid.ok_or_else(|| {
                StartFailure::Broken("the run's sandbox started a command it cannot name".into())
            });
            if let Some(tx) = waiter.started.take() {
                let _ = tx.send(answer);
            }
            return pidfd;
        }
        b'F' => {
            // A folder the sandbox does not show: bubblewrap of its own
            // says so in its words, as it would have without the helper.
            let failure = match frame.body.get(4) {
                Some(1) => StartFailure::Elsewhere,
                Some(2) => StartFailure::Broken(format!(
                    "the run's sandbox could not put the command under its resource limits (join its cgroups, \
                     set its rlimits): {}",
                    nix::errno::Errno::from_raw(number).desc()
                )),
                _ => StartFailure::Exec(os_error(number)),
            };
            if let Some(tx) = waiter.started.take() {
                let _ = tx.send(Err(failure));
            }
            table.waiting.remove(&frame.id);
        }
        b'N' => {
            let answer = match (number, frame.fds.into_iter().next()) {
                (0, Some(fd)) => Ok(fd),
                (0, None) => Err(libc::EIO),
                (errno, _) => Err(errno),
            };
            if let Some(tx) = waiter.connected.take() {
                let _ = tx.send(answer);
            }
            table.waiting.remove(&frame.id);
        }
        b'X' => {
            let session_over = frame.body.get(4) == Some(&1);
            waiter.over.store(session_over, Ordering::Relaxed);
            if let Some(tx) = waiter.exit.take() {
                let _ = tx.send(crate::exec::Ended {
                    status: number,
                    session_over,
                });
            }
            table.waiting.remove(&frame.id);
        }
        _ => {}
    }
    None
}

/// The OS's error `errno` in the words a failed exec here gives, without
/// the number.
fn os_error(errno: i32) -> std::io::Error {
    let kind = std::io::Error::from_raw_os_error(errno).kind();
    std::io::Error::new(kind, nix::errno::Errno::from_raw(errno).desc())
}

/// The pid, as this process sees it, of the process `pidfd` refers to.
fn host_pid(pidfd: &OwnedFd) -> Option<u32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    let pid = info.lines().find_map(|l| l.strip_prefix("Pid:"))?.trim();
    pid.parse::<i64>().ok().filter(|p| *p > 1).map(|p| p as u32)
}

/// A command confined under `bwrap`'s profile in the run's sandbox for it:
/// started by that sandbox's helper, or, where the helper cannot start,
/// wrapped in a bubblewrap of its own.
#[derive(Debug)]
pub struct InShared {
    shared: Arc<Shared>,
    own: Bwrap,
    /// The helper started the command (else its own bubblewrap did).
    placed: std::sync::atomic::AtomicBool,
}

impl InShared {
    pub fn new(shared: Arc<Shared>, own: Bwrap) -> InShared {
        InShared {
            shared,
            own,
            placed: Default::default(),
        }
    }

    /// The bubblewrap of the command's own, for a command that must not
    /// share the run's sandbox.
    pub fn own(&self) -> Bwrap {
        self.own.clone()
    }

    /// Whether the run's sandbox started the command: its exit and start
    /// failures are then real, and bubblewrap's words never bubblewrap's.
    pub fn placed(&self) -> bool {
        self.placed.load(Ordering::Relaxed)
    }
}

impl Wrap for InShared {
    fn wrap(&self, argv: Vec<OsString>, cwd: &Path) -> Result<Vec<OsString>, String> {
        self.own.wrap(argv, cwd)
    }

    fn kills_tree(&self) -> bool {
        self.own.kills_tree()
    }

    fn env(&self) -> Vec<(OsString, OsString)> {
        self.own.env()
    }

    fn starter(&self) -> Option<&dyn Starter> {
        self.shared.link().is_ok().then_some(self as &dyn Starter)
    }
}

impl Starter for InShared {
    fn start(&self, command: Start) -> Result<Running, StartFailure> {
        let link = self
            .shared
            .link()
            .map_err(|e| StartFailure::Broken(e.clone()))?;
        let running = link.run(command, Box::new(self.shared.clone()))?;
        self.placed.store(true, Ordering::Relaxed);
        self.shared.used.store(
            STARTS.fetch_add(1, Ordering::Relaxed) + 1,
            Ordering::Relaxed,
        );
        Ok(running)
    }
}

/// Commands started in any shared sandbox: orders them by their last use.
static STARTS: AtomicU64 = AtomicU64::new(0);

/// A run's shared sandboxes, by profile. Those no command uses beyond the
/// most recent few are let go (their helper and namespaces end).
#[derive(Debug, Default)]
pub struct Sandboxes(Mutex<Vec<Arc<Shared>>>);

/// Idle sandboxes a run keeps for profiles it may use again.
const KEPT: usize = 4;

impl Sandboxes {
    /// A TCP connection to the loopback address `addr` inside the network
    /// namespace of one of the run's sandboxes whose network is its own,
    /// where a server one of its commands started listens: tried from the
    /// sandbox used last, and `None` when nothing accepts it in any. No
    /// sandbox is started for it.
    pub fn connect(&self, addr: std::net::SocketAddr) -> Option<OwnedFd> {
        let mut serving = self.inside();
        serving.sort_by_key(|s| std::cmp::Reverse(s.used.load(Ordering::Relaxed)));
        serving
            .iter()
            .find_map(|s| s.link().ok()?.connect(addr).ok())
    }

    /// Whether a sandbox of the run serves with a network of its own.
    pub fn serving_inside(&self) -> bool {
        !self.inside().is_empty()
    }

    /// The run's sandboxes that serve with a network of their own.
    fn inside(&self) -> Vec<Arc<Shared>> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|s| s.own_network && s.serving() && !s.ended())
            .cloned()
            .collect()
    }

    /// The run's sandbox for `bwrap`'s profile, made (not started) if new.
    pub fn for_profile(&self, bwrap: &Bwrap) -> Arc<Shared> {
        let args = key(bwrap);
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|s| !s.ended());
        let same = |s: &&Arc<Shared>| s.program == bwrap.program && s.args == args;
        if let Some(found) = all.iter().find(same) {
            return found.clone();
        }
        let made = Arc::new(Shared::new(&bwrap.program, args, !bwrap.profile.network));
        all.push(made.clone());
        let surplus = all.len().saturating_sub(KEPT);
        let mut idle_seen = 0;
        // Oldest first; one held only here is idle.
        all.retain(|s| {
            let idle = Arc::strong_count(s) == 1;
            idle_seen += usize::from(idle);
            !(idle && idle_seen <= surplus)
        });
        made
    }
}
