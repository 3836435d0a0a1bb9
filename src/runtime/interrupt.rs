//! Stopping a run cleanly on SIGINT or SIGTERM. The first signal asks the run
//! to stop: a Lua loop notices at its next instruction-count hook, a wait
//! notices within a tick, and the run's futures are dropped between flow
//! steps, so no lock or staging file is left behind. A second signal kills the
//! process at once, for a flow stuck in a blocking call.

use mlua::{HookTriggers, Thread, VmState};
use nix::libc;
use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

/// The signal that asked the run to stop, or 0.
static REQUESTED: AtomicI32 = AtomicI32::new(0);

/// Lua instructions between two checks of the flag.
const CHECK_EVERY: u32 = 10_000;

const FIRST_NOTICE: &[u8] =
    b"\nsluice: stopping at the next flow step; send the signal again to stop at once\n";

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe calls here: write, signal, raise.
    unsafe {
        if REQUESTED.swap(sig, Ordering::SeqCst) == 0 {
            libc::write(2, FIRST_NOTICE.as_ptr().cast(), FIRST_NOTICE.len());
        } else {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

/// Routes SIGINT and SIGTERM to the stop request (the CLI does this; an
/// embedding program may call [`request`] from its own handler instead).
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

/// Asks every run in this process to stop, as if `sig` had arrived.
pub fn request(sig: i32) {
    REQUESTED.store(sig, Ordering::SeqCst);
}

/// The signal that asked for a stop, if any.
pub fn requested() -> Option<i32> {
    match REQUESTED.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// Makes Lua code running on `thread` raise "interrupted" once a stop is
/// requested. mlua keeps one hook per state, bound to one thread, so code in
/// the script's own coroutines is not watched: there the second signal,
/// which kills the process, is what stops a runaway loop.
pub fn watch(thread: &Thread) {
    thread.set_hook(
        HookTriggers::new().every_nth_instruction(CHECK_EVERY),
        |_, _| match requested() {
            Some(sig) => Err(mlua::Error::runtime(format!(
                "interrupted by {}",
                name(sig)
            ))),
            None => Ok(VmState::Continue),
        },
    );
}

/// Resolves once a stop is requested, with the signal number.
pub async fn wait() -> i32 {
    loop {
        if let Some(sig) = requested() {
            return sig;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `SIGINT`, `SIGTERM`, ...
pub fn name(sig: i32) -> String {
    Signal::try_from(sig).map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string())
}
