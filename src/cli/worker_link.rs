//! A fleet run's process and the worker that started it (hidden flags of
//! `run` and `resume`). The worker writes to the run's standard input: a
//! `.` every heartbeat (its pulse) and, one per line, the operator's
//! answers to the run's questions as JSON (`{"ask", "allow", "for_run",
//! "by"}`). With `--worker-asks FD`, the run writes each ask it cannot answer
//! to descriptor FD as a JSON line (`{"id", "capability", "flow", "reason",
//! "input", "wait_ms"}`), and `{"settled": ID}` when one stops waiting; the
//! worker puts them on the run's workflow, where `sluice asks` and `sluice
//! answer` reach them.

use crate::kernel::approval::{Answer, Approver, Ask};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Write;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// An operator's answer, as the worker passes it on.
struct Reply {
    allow: bool,
    for_run: bool,
    by: String,
}

/// The run's side of the link: questions waiting for answers.
#[derive(Default)]
pub struct Link {
    waiting: Mutex<HashMap<String, SyncSender<Reply>>>,
    asks: Mutex<Option<std::fs::File>>,
    next: std::sync::atomic::AtomicU64,
    /// Who gave the last answer, as [`Approver::who`] names them.
    last: Mutex<Option<String>>,
}

/// Ends this process at once (SIGKILL, as the worker's own death would)
/// when its worker stops writing to standard input for `silence`: a run
/// whose worker was stopped (SIGSTOP) or lost must not go on holding its
/// lease, and must start no call when its worker wakes. With `asks`, the
/// worker puts the run's asks to the operator: the approver returned.
pub fn watch(silence: Duration, asks: Option<i32>) -> Result<Option<Arc<Link>>, String> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::{AsFd, FromRawFd};
    let timeout = PollTimeout::try_from(silence)
        .map_err(|_| format!("--worker-pulse {}: too long", silence.as_millis()))?;
    let link = Arc::new(Link::default());
    if let Some(fd) = asks {
        if nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD).is_err() {
            return Err(format!("--worker-asks {fd}: no such open descriptor"));
        }
        // SAFETY: open (checked above), and the worker passes it for this
        // alone: nothing else in the process owns it.
        let file = unsafe { std::fs::File::from_raw_fd(fd) };
        *lock(&link.asks) = Some(file);
    }
    let reader = link.clone();
    std::thread::Builder::new()
        .name("sluice-pulse".into())
        .spawn(move || {
            let mut line = Vec::new();
            loop {
                let stdin = std::io::stdin();
                let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
                let heard = matches!(poll(&mut fds, timeout), Ok(n) if n > 0);
                let mut piece = [0u8; 4096];
                let read = match heard {
                    true => nix::unistd::read(0, &mut piece).unwrap_or(0),
                    false => 0,
                };
                if read == 0 {
                    silent(silence);
                }
                reader.heard(&piece[..read], &mut line);
            }
        })
        .map_err(|e| format!("cannot watch the worker: {e}"))?;
    Ok(asks.map(|_| link))
}

fn silent(silence: Duration) -> ! {
    eprintln!(
        "sluice: the worker running this run went silent for {} ms (stopped or gone): the run \
ends at once, so another worker can take it over",
        silence.as_millis()
    );
    let _ = nix::sys::signal::kill(nix::unistd::getpid(), nix::sys::signal::Signal::SIGKILL);
    unreachable!("SIGKILL ends the process")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Link {
    /// Bytes from the worker: pulses, and answer lines.
    fn heard(&self, bytes: &[u8], line: &mut Vec<u8>) {
        for &b in bytes {
            match b {
                b'.' if line.is_empty() => {}
                b'\n' => {
                    self.answered(line);
                    line.clear();
                }
                // A line longer than any answer is not one.
                _ if line.len() > 64 * 1024 => line.clear(),
                _ => line.push(b),
            }
        }
    }

    fn answered(&self, line: &[u8]) {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        let Some(id) = v["ask"].as_str() else { return };
        let reply = Reply {
            allow: v["allow"].as_bool() == Some(true),
            for_run: v["for_run"].as_bool() == Some(true),
            by: v["by"].as_str().unwrap_or("an operator").to_string(),
        };
        if let Some(tx) = lock(&self.waiting).remove(id) {
            let _ = tx.try_send(reply);
        }
    }

    fn say(&self, v: Value) -> std::io::Result<()> {
        let mut asks = lock(&self.asks);
        let file = asks
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no link to the worker"))?;
        writeln!(file, "{v}")
    }
}

impl Approver for Link {
    fn ask(&self, ask: &Ask) -> Answer {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let id = format!("ask-{n}");
        let (tx, rx) = sync_channel(1);
        lock(&self.waiting).insert(id.clone(), tx);
        let put = self.say(json!({
            "id": id,
            "capability": ask.capability,
            "flow": ask.flow,
            "reason": ask.reason,
            "input": ask.input,
            "wait_ms": ask.wait.as_millis() as u64,
        }));
        if let Err(e) = put {
            lock(&self.waiting).remove(&id);
            return Answer::Unanswered(format!("the fleet worker could not be told: {e}"));
        }
        match rx.recv_timeout(ask.wait) {
            Ok(reply) => {
                *lock(&self.last) = Some(reply.by.clone());
                match (reply.allow, reply.for_run) {
                    (true, true) => Answer::ForRun,
                    (true, false) => Answer::Once,
                    (false, _) => Answer::No(None),
                }
            }
            Err(_) => {
                lock(&self.waiting).remove(&id);
                let _ = self.say(json!({"settled": id}));
                Answer::Unanswered(format!(
                    "nobody answered with `sluice answer` within {} ms (the policy's askTimeoutMs)",
                    ask.wait.as_millis()
                ))
            }
        }
    }

    fn who(&self) -> String {
        match lock(&self.last).as_deref() {
            Some(by) => format!("{by} (sluice answer)"),
            None => "the fleet's operator (sluice answer)".into(),
        }
    }
}
