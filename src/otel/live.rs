//! `sluice run --otlp URL`: the run's spans sent while it runs, by a
//! thread of its own with its own read connection to the run's record.
//! About every second it sends a span for each call whose outcome was
//! written since; when the run has ended, the rest (a call still without
//! an outcome then has an unknown one), the tasks and the run.
//!
//! The run never waits for it and never fails because of it: the thread
//! reads what the recorder has already committed, and the first failure to
//! send is said once on stderr, after which the thread sends nothing more
//! (`sluice audit export RUN --otlp URL` sends the whole run again, as the
//! same trace and spans).

use super::call::call_span;
use super::send::Sender;
use super::span::{Span, Value};
use super::tree::{run_span, Tasks};
use crate::audit::db::Db;
use crate::audit::follow;
use crate::audit::replay::Opener;
use std::collections::BTreeSet;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the thread looks for calls whose outcome was written.
const POLL: Duration = Duration::from_secs(1);

/// The exporter of one run, running.
pub struct Live {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

/// Starts exporting run `run_id`, read through connections `readers`
/// opens, to `sender`; `content` as `--otlp-content` says.
pub fn start(readers: Opener, run_id: &str, sender: Sender, content: bool) -> Result<Live, String> {
    let (stop, stopped) = mpsc::channel();
    let mut follow = Follow::new(run_id, content);
    let thread = std::thread::Builder::new()
        .name("otlp-export".to_string())
        .spawn(move || follow.run(&readers, &sender, &stopped))
        .map_err(|e| format!("cannot start the OpenTelemetry export: {e}"))?;
    Ok(Live { stop, thread })
}

impl Live {
    /// Sends what is left once the run has ended (its record closed), and
    /// waits for it to be sent.
    pub fn finish(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// Why the thread stopped sending.
enum Stop {
    /// The receiver failed a request.
    Send(String),
    /// The record could not be read at the end, when nothing can wait.
    Record(String),
}

/// What the thread knows of the run so far.
struct Follow {
    run_id: String,
    content: bool,
    /// Every call before this chain position has been sent.
    low: i64,
    /// Calls at or past `low` that have been sent.
    sent: BTreeSet<i64>,
    tasks: Tasks,
    calls: i64,
    /// The run's resource, once the run has been read.
    resource: Option<Vec<(&'static str, Value)>>,
}

impl Follow {
    fn new(run_id: &str, content: bool) -> Follow {
        Follow {
            run_id: run_id.to_string(),
            content,
            low: 1,
            sent: BTreeSet::new(),
            tasks: Tasks::default(),
            calls: 0,
            resource: None,
        }
    }

    /// The thread's life: a step a second until told the run has ended,
    /// then the last step; the first failure is said and ends it.
    fn run(&mut self, readers: &Opener, sender: &Sender, stopped: &mpsc::Receiver<()>) {
        let mut db: Option<Box<dyn Db + Send>> = None;
        loop {
            let ended = !matches!(stopped.recv_timeout(POLL), Err(RecvTimeoutError::Timeout));
            let step = match connection(&mut db, readers) {
                Ok(conn) => self.step(conn, sender, ended),
                Err(e) => Err(Stop::Record(e)),
            };
            match step {
                Ok(()) if ended => return,
                Ok(()) => {}
                // A record that cannot be read mid-run (a PostgreSQL
                // server restarting) is tried again at the next step.
                Err(Stop::Record(_)) if !ended => db = None,
                Err(stop) => return self.say(stop, sender.url()),
            }
        }
    }

    /// Sends the spans of calls settled since the last step; once the run
    /// has `ended`, of every call left, then the tasks' and the run's.
    fn step(&mut self, db: &dyn Db, sender: &Sender, ended: bool) -> Result<(), Stop> {
        let run = follow::run(db, &self.run_id).map_err(Stop::Record)?;
        let resource = self
            .resource
            .get_or_insert_with(|| super::resource(&run))
            .clone();
        let mut spans: Vec<Span> = Vec::new();
        follow::calls_from(db, &self.run_id, self.low, !ended, &mut |c| {
            if self.sent.insert(c.n) {
                let s = call_span(&self.run_id, &c, self.content, run.ended_ms);
                self.tasks.add(&c.task, s.start_ns, s.end_ns);
                self.calls += 1;
                spans.push(s);
            }
            Ok(())
        })
        .map_err(Stop::Record)?;
        while self.sent.remove(&self.low) {
            self.low += 1;
        }
        if ended {
            spans.extend(self.tasks.spans(&self.run_id));
            spans.push(run_span(&run, &self.tasks, self.calls, self.content));
        }
        sender
            .send(&super::scope(&resource), &spans)
            .map_err(Stop::Send)
    }

    /// Says once why the export stopped, and that the run goes on.
    fn say(&self, stop: Stop, url: &str) {
        let again = format!(
            "`sluice audit export {} --otlp {url}` sends it again",
            self.run_id
        );
        match stop {
            Stop::Send(e) => eprintln!(
                "sluice: OpenTelemetry export to {url} failed: {e}; the run goes on and is recorded as usual; {again}"
            ),
            Stop::Record(e) => eprintln!(
                "sluice: OpenTelemetry export to {url} stopped: cannot read the run's record: {e}; {again}"
            ),
        }
    }
}

/// The thread's connection to the record, opened when it has none.
fn connection<'a>(
    db: &'a mut Option<Box<dyn Db + Send>>,
    readers: &Opener,
) -> Result<&'a dyn Db, String> {
    if db.is_none() {
        *db = Some(readers()?);
    }
    Ok(&**db.as_ref().expect("just opened"))
}
