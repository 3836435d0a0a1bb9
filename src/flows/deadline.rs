//! When a walk or a search stops before its end: its `timeoutMs` ran out,
//! or the run was asked to stop (SIGINT, SIGTERM). `grep` and `glob` check
//! a deadline at every entry, file and read buffer, on every thread, and
//! return what they found so far in a `timeout` error.

use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::interrupt;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `timeoutMs` when not given: a minute.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// The largest `timeoutMs`: ten minutes, as for commands.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// Checks a `timeoutMs` field: 1 to [`MAX_TIMEOUT_MS`].
pub(crate) fn check_timeout(value: Option<u64>) -> FlowResult<()> {
    match value {
        Some(0) => Err(FlowError::invalid_input(
            "timeoutMs",
            format!("`timeoutMs` must be at least 1 (default {DEFAULT_TIMEOUT_MS}, a minute)."),
        )),
        Some(ms) if ms > MAX_TIMEOUT_MS => Err(FlowError::invalid_input(
            "timeoutMs",
            format!(
                "`timeoutMs` is at most {MAX_TIMEOUT_MS} (ten minutes), got {ms}; narrow `root` or the pattern instead."
            ),
        )),
        _ => Ok(()),
    }
}

/// Why a walk or search stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// `timeoutMs` ran out.
    Timeout,
    /// The run was asked to stop, by this signal.
    Interrupted(i32),
}

/// A call's deadline, shared by the threads that work for it: once any of
/// them sees it pass, all of them stop.
#[derive(Debug, Clone)]
pub(crate) struct Deadline {
    at: Instant,
    ms: u64,
    stopped: Arc<AtomicBool>,
}

impl Deadline {
    /// `ms` from now (`None`: [`DEFAULT_TIMEOUT_MS`]).
    pub fn after(ms: Option<u64>) -> Deadline {
        let ms = ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        Deadline {
            at: Instant::now() + Duration::from_millis(ms),
            ms,
            stopped: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether to stop now; cheap enough to ask per entry.
    pub fn passed(&self) -> bool {
        if self.stopped.load(Ordering::Relaxed) {
            return true;
        }
        if interrupt::requested().is_some() || Instant::now() >= self.at {
            self.stopped.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// The time left before it passes (zero once it has): what a call that
    /// waits on another process (a container's exec) may wait at most.
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// Makes it pass now, for every thread that looks at it.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// Why it passed, once [`Deadline::passed`] said so.
    pub fn why(&self) -> Stop {
        match interrupt::requested() {
            Some(sig) => Stop::Interrupted(sig),
            None => Stop::Timeout,
        }
    }

    /// The `timeout` error of `flow` that stopped early: `what` says what it
    /// got through (`"searched 12 files"`), `found` is its output so far,
    /// whose fields the error carries as they are (`matches`, `paths`,
    /// `total`, ...), and `narrow` says how to finish next time.
    pub fn error(&self, flow: &str, what: &str, found: Value, narrow: &str) -> FlowError {
        let message = match self.why() {
            Stop::Timeout => format!(
                "{flow} stopped at its timeoutMs of {} ms, having {what}; what it found so far is in this error, \
                 in the fields a finished call returns. {narrow}, or raise timeoutMs (at most {MAX_TIMEOUT_MS}).",
                self.ms
            ),
            Stop::Interrupted(sig) => format!(
                "{flow} stopped because the run was interrupted by {}, having {what}; what it found so far is in this error.",
                interrupt::name(sig)
            ),
        };
        let mut err = FlowError::new(ErrorCode::Timeout, message);
        if let Value::Object(fields) = found {
            for (k, v) in fields {
                if k != "code" && k != "message" {
                    err = err.with(&k, v);
                }
            }
        }
        let err = err.with("timeoutMs", self.ms);
        match self.why() {
            Stop::Interrupted(sig) => err.with("interrupted", interrupt::name(sig)),
            Stop::Timeout => err,
        }
    }
}
