//! Stopping a run on SIGINT or SIGTERM: the first signal ends it within
//! 2 s (the bound tests/interrupt.rs checks), its record sealed.
//!
//! The first signal asks the run to stop, and what the run is doing notices:
//! Lua code on any thread of the script at its next instruction-count hook,
//! a policy decision at its next budget check, a `grep` or `glob` at its next
//! file or buffer, a command at once (sluice kills its process group and the
//! call ends with what it printed so far, recorded as stopped by the
//! signal), and any other wait (a sleep, a request) at once, since the run's
//! future is dropped between flow steps. No new call starts once a stop is
//! asked. The run then ends as usual: background jobs stopped, the record
//! sealed with status `interrupted`.
//!
//! A step that ends by itself at a stop and whose outcome the record should
//! keep (a command being stopped) holds a [`Finishing`] while it runs:
//! [`wait`], which the run's driver drops the run's future on, resolves only
//! once none is left (or [`SETTLE_WITHIN`] after the request), so the
//! outcome is recorded first. A call still in flight when the future is
//! dropped, or when the backstop ends the process, leaves no outcome: the
//! record says it is unknown, as it is.
//!
//! Some code cannot notice: a `__gc` finalizer (Lua runs finalizers with
//! hooks off), a script that catches the interrupt error with `pcall` and
//! goes on, a system call that blocks. For those the CLI arms a backstop: a
//! thread that, [`GRACE`] after the first signal or at a second one, kills
//! every process group the run started, seals the record as `interrupted`
//! through the run's [`super::Closer`], and exits with 128 + the signal,
//! without waiting for the stuck thread. A third signal ends the process as
//! the default action does.
//!
//! The same hook ends the tasks a script's end cancelled ([`ending_tasks`]):
//! a task that catches its cancellation and loops (calling again, or in
//! plain Lua) never waits, so on the one thread the run's tasks share it
//! would keep the cancellation's grace from ever running out. Once the
//! calls under way have had [`ARM_AFTER`] to stop and be recorded, Lua code
//! of a task (its coroutine, or one it made) that reaches the hook raises
//! "cancelled", and from then on every instruction of every task does, so
//! no `pcall` can catch it and go on: the first instruction after the catch
//! raises again, up to the task's own end.

use mlua::Lua;
use nix::libc;
use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The signal that asked the run to stop, or 0.
static REQUESTED: AtomicI32 = AtomicI32::new(0);
/// Stop requests (signals) so far.
static COUNT: AtomicU32 = AtomicU32::new(0);
/// The write end of the backstop's pipe, or -1 while none is armed.
static WAKE: AtomicI32 = AtomicI32::new(-1);
/// Steps in flight that end by themselves at a stop request (see
/// [`Finishing`]).
static FINISHING: AtomicU32 = AtomicU32::new(0);
/// Requests of a served run's callers under way (see [`Serving`]).
static SERVING: AtomicU32 = AtomicU32::new(0);
/// Whether a caller's request was under way when the first stop request
/// came.
static SERVING_AT_STOP: AtomicBool = AtomicBool::new(false);

/// How long after the script's end the cancelled tasks' calls get to stop
/// and be recorded before the tasks' Lua code raises ([`ending_tasks`]).
pub const ARM_AFTER: Duration = Duration::from_millis(200);

thread_local! {
    /// When this thread's run's cancelled tasks start to raise, if it is
    /// ending them.
    static ENDING_TASKS: Cell<Option<Instant>> = const { Cell::new(None) };
    /// The `lua_State`s of the tasks' own coroutines, by address.
    static TASK_THREADS: RefCell<HashSet<usize>> = RefCell::new(HashSet::new());
}

/// Lua instructions between two checks of the flag.
const CHECK_EVERY: i32 = 10_000;

/// How long after the first signal the backstop waits for the run to end by
/// itself.
pub const GRACE: Duration = Duration::from_millis(1000);
/// How long the backstop gives itself to kill and seal before it exits
/// anyway (a record that cannot be written must not keep the process).
const SEAL_WITHIN: Duration = Duration::from_millis(700);

/// How long after a stop request [`wait`] lets the steps that stop by
/// themselves finish and be recorded: a command is killed at once, so this
/// is the time to read what its pipes still hold.
pub const SETTLE_WITHIN: Duration = Duration::from_millis(500);

const FIRST_NOTICE: &[u8] = b"\nsluice: stopping: the running command is killed now, the script stops at its next step, and the record is sealed; send the signal again to stop at once\n";

/// Counts one stop request and wakes the backstop; returns the count. Only
/// async-signal-safe calls: a signal handler calls it.
fn arrive(sig: i32) -> u32 {
    let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
    if n == 1 {
        SERVING_AT_STOP.store(SERVING.load(Ordering::SeqCst) > 0, Ordering::SeqCst);
        REQUESTED.store(sig, Ordering::SeqCst);
    }
    let wake = WAKE.load(Ordering::SeqCst);
    if wake >= 0 && n <= 2 {
        let byte = [n as u8];
        unsafe { libc::write(wake, byte.as_ptr().cast(), 1) };
    }
    n
}

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe calls here: write, signal, raise.
    let n = arrive(sig);
    let armed = WAKE.load(Ordering::SeqCst) >= 0;
    unsafe {
        if n == 1 {
            libc::write(2, FIRST_NOTICE.as_ptr().cast(), FIRST_NOTICE.len());
        } else if n >= 3 || !armed {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

/// Routes SIGINT and SIGTERM to the stop request (the CLI does this).
pub fn install_signal_handlers() -> nix::Result<()> {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        unsafe { signal::sigaction(sig, &action)? };
    }
    Ok(())
}

/// The signal that asked for a stop, if any.
pub fn requested() -> Option<i32> {
    match REQUESTED.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// Makes Lua code on every thread of `lua` (the main state, and every
/// coroutine made after this call, which inherit the hook) raise
/// "interrupted by SIG..." once a stop is requested. The hook is a plain C
/// function rather than mlua's, which watches only the one thread it is set
/// on. Call it before any thread is made.
pub fn watch(lua: &Lua) -> mlua::Result<()> {
    // SAFETY: lua_sethook only stores the hook in the running state; the
    // hook below touches nothing but the stack of the state it is called on.
    unsafe {
        lua.exec_raw::<()>((), |state| {
            mlua::ffi::lua_sethook(
                state,
                Some(stop_hook),
                mlua::ffi::LUA_MASKCOUNT,
                CHECK_EVERY,
            );
        })
    }
}

/// While `on`, from [`ARM_AFTER`] on, Lua code of the tasks on this thread
/// raises "cancelled" where the hook finds it, and then at every
/// instruction. The run's tasks call it around their end
/// (`runtime/tasks.rs`), on the thread that runs them.
pub fn ending_tasks(on: bool) {
    ENDING_TASKS.with(|e| e.set(on.then(|| Instant::now() + ARM_AFTER)));
}

/// Whether the tasks' Lua code raises now ([`ending_tasks`]).
fn tasks_raise() -> bool {
    ENDING_TASKS
        .with(Cell::get)
        .is_some_and(|at| Instant::now() >= at)
}

/// A task's coroutine, `thread` (a `lua_State`'s address, as
/// `mlua::Thread::to_pointer` gives it), known until the guard drops, so
/// that [`ending_tasks`] reaches it.
pub fn task_thread(thread: *const std::ffi::c_void) -> TaskThread {
    let at = thread as usize;
    TASK_THREADS.with(|t| t.borrow_mut().insert(at));
    TaskThread(at)
}

/// Forgets a task's coroutine when dropped ([`task_thread`]).
pub struct TaskThread(usize);

impl Drop for TaskThread {
    fn drop(&mut self) {
        TASK_THREADS.with(|t| t.borrow_mut().remove(&self.0));
    }
}

/// The hook's check, every `count` instructions, on the Lua thread `state`.
unsafe fn hook_every(state: *mut mlua::ffi::lua_State, count: i32) {
    mlua::ffi::lua_sethook(state, Some(stop_hook), mlua::ffi::LUA_MASKCOUNT, count);
}

/// Raises "cancelled" in a task's coroutine (any Lua thread but the main
/// state, where the run's own bookkeeping runs), and makes every task's
/// coroutine (and so each coroutine it makes from now on) check at every
/// instruction: a task looping in a coroutine it made raises as soon as
/// that coroutine gives it back.
unsafe fn end_task(state: *mut mlua::ffi::lua_State) {
    let main = mlua::ffi::lua_pushthread(state) == 1;
    mlua::ffi::lua_pop(state, 1);
    if main {
        return;
    }
    // SAFETY: each address is a live coroutine of a task (its guard is
    // held while the task's future lives), of this state and thread;
    // lua_sethook only stores the hook, as it may even from a signal.
    TASK_THREADS.with(|t| {
        for &at in t.borrow().iter() {
            hook_every(at as *mut mlua::ffi::lua_State, 1);
        }
    });
    hook_every(state, 1);
    mlua::ffi::lua_pushstring(state, c"cancelled: the script ended".as_ptr());
    mlua::ffi::lua_error(state);
}

/// The count hook: raises the interrupt as a Lua error, or ends a
/// cancelled task ([`ending_tasks`]). It runs only between bytecode
/// instructions, never inside a Rust callback, and holds nothing that
/// needs dropping when `lua_error` unwinds past it.
unsafe extern "C-unwind" fn stop_hook(
    state: *mut mlua::ffi::lua_State,
    _: *mut mlua::ffi::lua_Debug,
) {
    let message: &std::ffi::CStr = match REQUESTED.load(Ordering::Relaxed) {
        0 if tasks_raise() => return end_task(state),
        0 => return,
        libc::SIGINT => c"interrupted by SIGINT",
        libc::SIGTERM => c"interrupted by SIGTERM",
        _ => c"interrupted",
    };
    mlua::ffi::lua_pushstring(state, message.as_ptr());
    mlua::ffi::lua_error(state);
}

/// Resolves once a stop is requested and the steps that stop by themselves
/// have finished (at most [`SETTLE_WITHIN`] later), with the signal number:
/// what a run's driver and a sleep wait on.
pub async fn wait() -> i32 {
    let sig = signalled().await;
    let since = Instant::now();
    while FINISHING.load(Ordering::SeqCst) > 0 && since.elapsed() < SETTLE_WITHIN {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    sig
}

/// Resolves as soon as a stop is requested, with the signal number: what a
/// step that stops by itself waits on.
pub async fn signalled() -> i32 {
    loop {
        if let Some(sig) = requested() {
            return sig;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Held by a step that ends by itself at a stop request, from its start
/// until its outcome is handed back (see the module's text): while one is
/// held, [`wait`] does not resolve.
#[derive(Debug)]
pub struct Finishing(());

impl Finishing {
    /// Counts a step in flight until the guard drops.
    pub fn start() -> Finishing {
        FINISHING.fetch_add(1, Ordering::SeqCst);
        Finishing(())
    }
}

impl Drop for Finishing {
    fn drop(&mut self) {
        FINISHING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Held while a served run's caller has a request under way (`sluice
/// mcp`: from the moment the run takes the request up to its answer). A
/// client that ends its session stops the server with a signal (Claude
/// Code and Codex send SIGTERM, or SIGINT, once they are done): one that
/// finds no request under way ends the run as its client meant, not in
/// the middle of anything ([`served_call_at_stop`]).
#[derive(Debug)]
pub struct Serving(());

impl Serving {
    /// Counts a request under way until the guard drops.
    pub fn start() -> Serving {
        SERVING.fetch_add(1, Ordering::SeqCst);
        Serving(())
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        SERVING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether a caller's request was under way ([`Serving`]) when the first
/// stop request came; false when none came.
pub fn served_call_at_stop() -> bool {
    SERVING_AT_STOP.load(Ordering::SeqCst)
}

/// `SIGINT`, `SIGTERM`, ...
pub fn name(sig: i32) -> String {
    Signal::try_from(sig).map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string())
}

/// Arms the backstop (once per process; later calls do nothing). After the
/// first stop request, if the process is still here [`GRACE`] later, or at
/// the second request, `finish(sig, why)` runs on the backstop's thread
/// (kill what the run started, seal its record) and the process exits with
/// the code it returns; if `finish` has not returned within a bound, the
/// process exits all the same, with 128 + the signal.
pub fn arm_backstop(finish: impl FnOnce(i32, &str) -> i32 + Send + 'static) -> std::io::Result<()> {
    if WAKE.load(Ordering::SeqCst) >= 0 {
        return Ok(());
    }
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    WAKE.store(write.into_raw_fd(), Ordering::SeqCst);
    std::thread::Builder::new()
        .name("sluice-backstop".into())
        .spawn(move || backstop(read, finish))?;
    Ok(())
}

/// The backstop's thread. The counters say what happened; the pipe only
/// wakes it (a request that came before the pipe existed wrote nothing, and
/// the first look at the counters finds it).
fn backstop(read: OwnedFd, finish: impl FnOnce(i32, &str) -> i32 + Send + 'static) {
    let fd = read.as_raw_fd();
    let wait = |timeout: Option<Duration>| {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.map_or(-1, |t| {
            libc::c_int::try_from(t.as_millis().max(1)).unwrap_or(libc::c_int::MAX)
        });
        // SAFETY: one valid pollfd; poll and read only fill what they are given.
        if unsafe { libc::poll(&mut pfd, 1, ms) } > 0 {
            let mut byte = 0u8;
            unsafe { libc::read(fd, (&mut byte as *mut u8).cast(), 1) };
        }
    };
    while requested().is_none() {
        wait(None);
    }
    let first = Instant::now();
    let why = loop {
        if COUNT.load(Ordering::SeqCst) >= 2 {
            break "a second signal came".to_string();
        }
        let left = GRACE.saturating_sub(first.elapsed());
        if left.is_zero() {
            break format!(
                "it did not stop within {} ms of the signal (a finalizer, a caught interrupt or a blocked call)",
                GRACE.as_millis()
            );
        }
        wait(Some(left));
    };
    let sig = requested().unwrap_or(libc::SIGTERM);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let _ = std::thread::Builder::new()
        .name("sluice-seal".into())
        .spawn(move || {
            let _ = done_tx.send(finish(sig, &why));
        });
    let code = done_rx.recv_timeout(SEAL_WITHIN).unwrap_or(128 + sig);
    // SAFETY: _exit ends the process without running destructors or atexit
    // handlers, which could wait on the thread that is stuck.
    unsafe { libc::_exit(code) };
}
