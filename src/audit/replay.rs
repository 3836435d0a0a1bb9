//! Replay and resume: a recorded run's calls, answered back in the order
//! the script makes them.
//!
//! Calls are matched by task and sequence within the task (not by a global
//! counter), so the key of a call does not depend on how concurrent tasks
//! interleave. A call matches when its flow and its input (redacted the way
//! the record was) are the recorded ones.
//!
//! - replay: every call returns its recorded result; nothing touches the
//!   world and no policy is consulted. The first call that differs, or that
//!   the record cannot answer, stops the replay (`replay_diverged`).
//! - resume: recorded calls answer the same way until the first call the
//!   record does not have; from there the run is live. A recorded
//!   irreversible call whose outcome is unknown, or that a stop request cut
//!   short, stops the resume unless it was asked to retry such calls; any
//!   other call a stop cut short runs again, live from there.
//!
//! Going live is a task's own affair: tasks run concurrently, so when one
//! of them reaches the end of its record (or a call it must run again),
//! another may still have recorded calls ahead, which happened and must not
//! run twice. Those are still answered. Only a refusal judged again makes
//! the other tasks live too, from what they recorded after it started: the
//! recorded run went on without that call's effect, and they may have seen
//! it missing.

use super::db::{self, vals, Db, Val};
use super::redact::Redaction;
use super::render::plural;
use super::rows::{self, Kept, StoredCall, StoredRun};
use super::FlowFacts;
use crate::error::{ErrorCode, FlowError};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;

/// The run a replay or resume starts from.
#[derive(Debug, Clone)]
pub struct RunRecord {
    /// The run's id.
    pub id: String,
    /// The script it ran, as given.
    pub script: String,
    /// The script's SHA-256 when it ran, to tell whether it changed since.
    pub script_sha256: Option<String>,
    /// The script's arguments.
    pub args: Vec<String>,
    /// The workspace it ran in.
    pub workspace: String,
    /// How it ended: `ok`, `failed`, `interrupted`, or `running` when the
    /// record never saw its end.
    pub status: String,
    /// The seed `math.random` started from; a replay starts from it too.
    pub random_seed: i64,
    /// The run's ceiling patterns.
    pub ceiling: Vec<String>,
}

impl RunRecord {
    fn of(r: &StoredRun) -> RunRecord {
        RunRecord {
            id: r.id.clone(),
            script: r.script.clone(),
            script_sha256: r.script_sha256.clone(),
            args: serde_json::from_str(&r.args).unwrap_or_default(),
            workspace: r.workspace.clone(),
            status: r.status.clone(),
            random_seed: r.random_seed,
            ceiling: serde_json::from_str(&r.ceiling).unwrap_or_default(),
        }
    }
}

/// Where a recorded call stands in the order the resumed runs reached
/// their calls: the run's own rows first, by start, then those of the run
/// it continued (which it never reached), and so on down the chain.
type Place = (usize, i64);

/// Outputs kept by content that a record keeps parsed: the last ones read
/// (a script that reads one file again and again parses it once).
pub(super) const CACHED_OUTPUTS: usize = 8;

/// Opens a connection of a record's own to the store it reads, each time
/// it is called, on any thread: the record reads through one, and its
/// reader thread through another, beside the run's own writer. SQLite
/// opens the file again (read-only); PostgreSQL opens a new session on
/// the same database.
pub type Opener = Arc<dyn Fn() -> Result<Box<dyn Db + Send>, String> + Send + Sync>;

/// A store a [`Record`] can be loaded from: one that can be opened again,
/// for the record to read on its own as the script goes.
pub trait Reopen {
    /// What opens connections of the record's own to this store; an
    /// error when it cannot be opened again (a SQLite database in memory).
    fn opener(&self) -> Result<Opener, String>;
}

/// An opener is a store a record can be loaded from as it is.
impl Reopen for Opener {
    fn opener(&self) -> Result<Opener, String> {
        Ok(self.clone())
    }
}

// A record goes where its run goes: an embedder may build the run on one
// thread and run it on another, so the record's connection is `Send`.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Record>();
};

/// A recorded run, read call by call as the script makes its calls: it
/// holds the run's row, a connection of its own, and a few outputs, never
/// the run's calls, so a replay of a long run takes no more memory than a
/// short one's.
pub struct Record {
    /// The recorded run's own row: its id, script, arguments, workspace,
    /// how it ended, its random seed and its ceiling.
    pub run: RunRecord,
    db: Box<dyn Db + Send>,
    /// Opens the reader thread's connection.
    open: Opener,
    /// The run, then each run it continued, down the chain of resumed
    /// runs: a call's depth is the index of its run. A resumed run's
    /// record holds only what it reached; the rows it lacks come from the
    /// runs it continued, so a resume of a resume repeats nothing.
    chain: Vec<String>,
    /// Outputs kept by content, parsed, newest first.
    outputs: RefCell<VecDeque<(String, Value)>>,
    /// Input items kept by content, and lists of keys, read so far.
    kept: RefCell<Kept>,
    /// The run's own rows read ahead and not yet asked for.
    ahead: RefCell<Ahead>,
}

/// Rows a replay's reader reads in one query.
pub(super) const AHEAD_PAGE: usize = 128;
/// Pages the reader reads ahead of the script at most.
const AHEAD_PAGES: usize = 2;
/// Rows read ahead and not asked for that a record holds at most: a call
/// further away is looked up by its key.
pub(super) const AHEAD_WINDOW: usize = 1024;

/// What the reader sends: a page of the run's own rows (those running
/// calls made left out), or why it stopped. Pages, not rows: a hand-over
/// wakes a thread, which costs more than reading a row.
type Fed = db::Result<Vec<StoredCall>>;

/// A window on the run's own rows, in chain order, fed by a reader thread
/// with a connection of its own: rows are read and decoded on another
/// core while the script runs, not between its calls.
#[derive(Debug, Default)]
struct Ahead {
    rows: VecDeque<StoredCall>,
    /// What is left of the page being taken from.
    page: std::vec::IntoIter<StoredCall>,
    feed: Feed,
}

/// The reader, started at the first call the window is asked for.
#[derive(Debug, Default)]
enum Feed {
    #[default]
    NotStarted,
    Reading(Receiver<Fed>),
    /// Its last row was received (or it failed, and said so).
    Done,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("run", &self.run)
            .field("chain", &self.chain)
            .finish_non_exhaustive()
    }
}

impl Record {
    /// Run `id`'s record in `store`, with what the runs it resumed
    /// recorded beyond it, read through connections of the record's own
    /// ([`Reopen`]). A record whose inputs lost an item kept by content
    /// cannot be compared, so it is refused here.
    pub fn load(store: &dyn Reopen, id: &str) -> Result<Record, String> {
        Record::open(store.opener()?, id, false)
    }

    /// [`Record::load`] of a run `sluice audit verify` found intact, or
    /// is verifying beside the replay, which checks its items kept by
    /// content: only the runs it continued, which verify does not look
    /// at, are checked here.
    pub fn load_verified(store: &dyn Reopen, id: &str) -> Result<Record, String> {
        Record::open(store.opener()?, id, true)
    }

    fn open(open: Opener, id: &str, verified: bool) -> Result<Record, String> {
        let db = open()?;
        let stored = stored_run(&*db, id)?;
        let chain = chain_of(&*db, &stored)?;
        let record = Record {
            run: RunRecord::of(&stored),
            db,
            open,
            chain,
            outputs: RefCell::default(),
            kept: RefCell::default(),
            ahead: RefCell::default(),
        };
        for run in record.chain.iter().skip(usize::from(verified)) {
            record.check_items(run)?;
        }
        Ok(record)
    }

    /// Refuses run `run`'s record when an input lost an item kept by
    /// content, reading only the rows that keep some.
    fn check_items(&self, run: &str) -> Result<(), String> {
        let mut bodies = rows::Bodies::new(self.db());
        rows::each_call_with_parts(
            self.db(),
            run,
            |e| e,
            |mut c| {
                bodies.assemble(&mut c)?;
                match c.parts.as_ref().filter(|p| p.missing.is_some()) {
                    Some(p) => Err(lost_item(&c, p)),
                    None => Ok(()),
                }
            },
        )
        .map_err(|e| format!("cannot read run {run} from the audit database: {e}"))
    }

    /// Recorded call `seq` of `task`: the run's own, else the nearest run
    /// down the chain that holds it; its input whole.
    fn call(&self, task: &str, seq: u64) -> db::Result<Option<StoredCall>> {
        if let Some(c) = self.read_ahead(task, seq as i64)? {
            return self.assembled(c).map(Some);
        }
        for run in &self.chain {
            if let Some(c) = rows::call_at(self.db(), run, task, seq as i64)? {
                return self.assembled(c).map(Some);
            }
        }
        Ok(None)
    }

    /// Call (`task`, `seq`) of the run's own rows from the read-ahead,
    /// taking rows from the reader until it turns up or the run's rows
    /// end: a script makes its calls about in the order it recorded them,
    /// so most are found at the window's front. The window drops its
    /// oldest rows when full (a call asked for later is looked up by its
    /// key); the reader skips the calls running calls made, which come
    /// with their parent's answer. `None`: not within the window.
    fn read_ahead(&self, task: &str, seq: i64) -> db::Result<Option<StoredCall>> {
        let mut ahead = self.ahead.borrow_mut();
        let at = ahead
            .rows
            .iter()
            .position(|c| c.seq == seq && c.task == task);
        if let Some(i) = at {
            return Ok(ahead.rows.remove(i));
        }
        while let Some(c) = self.next_ahead(&mut ahead)? {
            if c.seq == seq && c.task == task {
                return Ok(Some(c));
            }
            ahead.rows.push_back(c);
            if ahead.rows.len() > AHEAD_WINDOW {
                ahead.rows.pop_front();
            }
        }
        Ok(None)
    }

    /// The reader's next row, starting it first if need be; `None` once
    /// the run's rows are all read.
    fn next_ahead(&self, ahead: &mut Ahead) -> db::Result<Option<StoredCall>> {
        if matches!(ahead.feed, Feed::NotStarted) {
            ahead.feed = Feed::Reading(self.start_reader()?);
        }
        loop {
            if let Some(c) = ahead.page.next() {
                return Ok(Some(c));
            }
            let Feed::Reading(feed) = &ahead.feed else {
                return Ok(None);
            };
            match feed.recv() {
                Ok(Ok(page)) => ahead.page = page.into_iter(),
                Ok(Err(e)) => {
                    ahead.feed = Feed::Done;
                    return Err(e);
                }
                Err(_) => ahead.feed = Feed::Done,
            }
        }
    }

    /// Starts the reader thread, which opens its own connection first.
    fn start_reader(&self) -> db::Result<Receiver<Fed>> {
        let (sender, feed) = std::sync::mpsc::sync_channel(AHEAD_PAGES);
        let (open, run) = (self.open.clone(), self.run.id.clone());
        std::thread::Builder::new()
            .name("sluice-replay-rows".into())
            .spawn(move || match open() {
                Ok(db) => read_rows(&*db, &run, &sender),
                Err(e) => {
                    let _ = sender.send(Err(db::Error::other(e)));
                }
            })
            .map_err(|e| db::Error::other(format!("cannot start the replay's reader: {e}")))?;
        Ok(feed)
    }

    /// The record's own connection.
    fn db(&self) -> &dyn Db {
        &*self.db
    }

    /// `c` with its input put back together; an item gone since the load
    /// is an error.
    fn assembled(&self, mut c: StoredCall) -> db::Result<StoredCall> {
        let kept = self.kept.take();
        let mut bodies = rows::Bodies::with(self.db(), kept);
        let done = bodies.assemble(&mut c);
        *self.kept.borrow_mut() = bodies.kept();
        done?;
        match c.parts.as_ref().filter(|p| p.missing.is_some()) {
            Some(p) => Err(lost_item(&c, p)),
            None => Ok(c),
        }
    }

    /// The output kept by content as `sha`, parsed; `Null` when it is gone.
    fn output(&self, sha: &str) -> Value {
        let mut cache = self.outputs.borrow_mut();
        if let Some(i) = cache.iter().position(|(k, _)| k == sha) {
            let hit = cache.remove(i).expect("a cached output");
            cache.push_front(hit);
            return cache[0].1.clone();
        }
        let body = rows::body(self.db(), sha).ok().flatten();
        let value = body.map_or(Value::Null, |b| {
            serde_json::from_str(&b).unwrap_or(Value::Null)
        });
        if cache.len() == CACHED_OUTPUTS {
            cache.pop_back();
        }
        cache.push_front((sha.to_string(), value.clone()));
        value
    }

    /// The recorded value of clock reading `seq` of `task`.
    fn reading(&self, task: &str, seq: u64) -> Option<f64> {
        let sql = "SELECT value FROM readings WHERE run = ?1 AND task = ?2 AND seq = ?3";
        self.chain
            .iter()
            .find_map(|run| self.db().value(sql, vals![run, task, seq]).ok().flatten())
    }

    /// The script's text as the run kept it (`None` for a run recorded
    /// before the record kept texts, or whose text held a secret, or a
    /// text that no longer hashes to the run's `script_sha256`).
    pub(crate) fn script_text(&self) -> Option<String> {
        let sha = self.run.script_sha256.as_deref()?;
        super::sources::text(self.db(), sha).ok().flatten()
    }

    /// The modules the run's script required, as the record keeps them
    /// (those of the runs it continued after its own), each with its text.
    pub(crate) fn modules(&self) -> Vec<super::sources::RecordedModule> {
        super::sources::recorded(self.db(), &self.chain).unwrap_or_default()
    }

    /// The highest background job id the recorded run handed out, in the
    /// output of a call of a flow that starts jobs. Only the calls of such
    /// flows are read (most runs have none).
    pub fn last_job_id(&self, facts: &dyn FlowFacts) -> u64 {
        let job_id = |v: &Value| v.get("jobId").and_then(Value::as_u64);
        let mut highest = None;
        for run in &self.chain {
            let flows = rows::ok_flows(self.db(), run).unwrap_or_default();
            for flow in flows.iter().filter(|f| facts.starts_jobs(f)) {
                // A page that cannot be read counts as none, as before.
                let _ = rows::each_ok_output(self.db(), run, flow, |output, output_ref| {
                    let id = match (output, output_ref) {
                        (Some(text), _) => serde_json::from_str::<Value>(&text)
                            .ok()
                            .as_ref()
                            .and_then(job_id),
                        (None, Some(key)) => job_id(&self.output(&key)),
                        _ => None,
                    };
                    highest = highest.max(id);
                });
            }
        }
        highest.unwrap_or(0)
    }

    /// Calls per task the record answers, over the chain (a call the run
    /// and a run it continued both hold counts once).
    fn tasks(&self) -> Vec<(String, usize)> {
        // A run that resumed none is counted from its key's index alone.
        let sql = if self.chain.len() == 1 {
            "SELECT task, count(*) FROM calls WHERE run = ?1 GROUP BY task".to_string()
        } else {
            let runs: Vec<String> = (1..=self.chain.len()).map(|i| format!("?{i}")).collect();
            format!(
                "SELECT task, count(*) FROM
                   (SELECT DISTINCT task, seq FROM calls WHERE run IN ({})) AS d
                 GROUP BY task",
                runs.join(", ")
            )
        };
        let runs: Vec<Val> = self.chain.iter().map(Val::from).collect();
        let mut found = Vec::new();
        let read = self.db().each(&sql, &runs, &mut |r| {
            found.push((r.get::<String>(0)?, r.get::<usize>(1)?));
            Ok(())
        });
        read.map(|()| found).unwrap_or_default()
    }

    /// How many calls the record holds that a replay answers: those a
    /// running call made ([`crate::call::inner_task`]) come with their
    /// parent's answer, not on their own.
    pub fn len(&self) -> usize {
        self.tasks()
            .iter()
            .filter(|(task, _)| !crate::call::is_inner(task))
            .map(|(_, n)| n)
            .sum()
    }

    /// How many calls of `task` the record holds.
    fn task_len(&self, task: &str) -> usize {
        self.tasks()
            .into_iter()
            .find(|(t, _)| t == task)
            .map_or(0, |(_, n)| n)
    }

    /// How many calls the run recorded itself (the calls `sluice audit
    /// show` numbers), without those of the runs it continued.
    pub fn own_len(&self) -> usize {
        rows::call_count(self.db(), &self.run.id).unwrap_or(0) as usize
    }

    /// Whether the record holds no calls.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the record holds at hand: rows read ahead (the window and
    /// the page being taken from; the reader holds at most
    /// `AHEAD_PAGES` more pages), parsed outputs; both bounded, whatever
    /// the run's length.
    #[cfg(test)]
    pub fn held(&self) -> (usize, usize) {
        let ahead = self.ahead.borrow();
        (
            ahead.rows.len() + ahead.page.len(),
            self.outputs.borrow().len(),
        )
    }

    /// Where recorded call `rec` stands (see [`Place`]).
    fn place(&self, rec: &StoredCall) -> Place {
        let depth = self.chain.iter().position(|r| *r == rec.run);
        (depth.unwrap_or(usize::MAX), rec.started_ms)
    }
}

/// The reader's work: run `run`'s own rows in chain order, a page a
/// query (no read outlives a page, so a resume's writer checkpoints as
/// usual), each page sent as it is read. It ends after the last row, at the
/// first failure (which it sends), or when the record is dropped.
fn read_rows(db: &dyn Db, run: &str, feed: &SyncSender<Fed>) {
    let mut after = 0;
    loop {
        let page = match rows::calls_after(db, run, after, AHEAD_PAGE) {
            Ok(page) => page,
            Err(e) => {
                let _ = feed.send(Err(e));
                return;
            }
        };
        let last = page.len() < AHEAD_PAGE;
        after = page.last().map_or(after, |c| c.n);
        let own = page.into_iter().filter(|c| !crate::call::is_inner(&c.task));
        if feed.send(Ok(own.collect())).is_err() || last {
            return;
        }
    }
}

/// Run `id`'s row, or why it cannot be read.
fn stored_run(db: &dyn Db, id: &str) -> Result<StoredRun, String> {
    rows::run(db, id)
        .and_then(|r| r.ok_or_else(|| db::Error::other("it holds no such run")))
        .map_err(|e| format!("cannot read run {id} from the audit database: {e}"))
}

/// Run `run`, then each run it resumed, down the chain.
fn chain_of(db: &dyn Db, run: &StoredRun) -> Result<Vec<String>, String> {
    let mut chain = vec![run.id.clone()];
    let mut from = run.resumed_from.clone();
    while let Some(id) = from {
        if chain.len() > 1000 {
            return Err(format!(
                "run {} resumes a chain over 1000 runs long",
                run.id
            ));
        }
        from = stored_run(db, &id)?.resumed_from;
        chain.push(id);
    }
    Ok(chain)
}

fn lost_item(c: &StoredCall, p: &rows::Parts) -> db::Error {
    let message = format!(
        "call #{} ({}): {}[{}] of its input is gone from the record; `sluice audit verify` checks it",
        c.n,
        c.flow,
        p.field().unwrap_or("?"),
        p.missing.unwrap_or(0)
    );
    db::Error::other(message)
}

/// Replay or resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every call returns its recorded result: nothing touches the world
    /// and no policy is consulted. A call that differs from the record, or
    /// that it cannot answer, stops the run (`replay_diverged`).
    Replay,
    /// Recorded calls are answered from the record until the first call it
    /// does not have; from there the run is live. A recorded refusal is
    /// judged again under today's policy and approvals.
    Resume {
        /// Run again a recorded irreversible call whose outcome is unknown
        /// (the run stopped after recording it, before it finished), or
        /// that a stop request cut short (a command sluice killed on
        /// Ctrl-C), going live there, instead of stopping the resume.
        retry_unknown: bool,
        /// The person says a recorded irreversible call whose outcome is
        /// unknown did happen (`sluice resolve ... ran`): it is not run
        /// again, and returns [`ran_by_word`], recorded as its outcome.
        unknown_ran: bool,
        /// Go live at the first call the record holds as #N or later (N as
        /// `sluice audit show` of the resumed run numbers its calls), even
        /// where the record could answer it: calls before it must still
        /// match. `None`: live only past the record's end.
        live_from: Option<u64>,
    },
}

/// What the record says about one call.
#[derive(Debug)]
pub enum Answer {
    /// The recorded result, and the row as recorded (a resume copies it).
    Recorded(Result<Value, FlowError>, Box<StoredCall>),
    /// Run it: the record has nothing here (resume), or a retry was asked.
    Live,
    /// Stop the run: what differs or why the record cannot answer.
    Halt(FlowError),
}

/// A run's replay state.
#[derive(Debug)]
pub struct Replay {
    pub record: Record,
    pub mode: Mode,
    /// The tasks a resume has made live: every later call of theirs runs
    /// for real.
    live: std::cell::RefCell<std::collections::HashSet<String>>,
    /// Where the first refusal judged again stands: every recorded call
    /// from there on, of any task, runs for real.
    rejudged: Cell<Option<Place>>,
    /// Calls answered from the record.
    pub answered: Cell<u64>,
    /// Whether the script went on past the last recorded call.
    pub past_end: Cell<bool>,
    /// Secrets the inputs brought so far: the recorder cut them from later
    /// calls, so matching must too.
    secrets: std::cell::RefCell<Vec<String>>,
    /// The recorded call a resume stopped at (of unknown outcome, or cut
    /// short by a stop request), for the new run's record to keep as it
    /// was (so resuming that run stops there too).
    held: std::cell::RefCell<Option<StoredCall>>,
}

impl Replay {
    pub fn new(record: Record, mode: Mode) -> Replay {
        Replay {
            record,
            mode,
            live: Default::default(),
            rejudged: Cell::new(None),
            answered: Cell::new(0),
            past_end: Cell::new(false),
            secrets: Default::default(),
            held: Default::default(),
        }
    }

    /// Whether the run has gone live (a resume past its record), in any
    /// task.
    pub fn is_live(&self) -> bool {
        !self.live.borrow().is_empty()
    }

    /// Whether `task` runs live: a resume went live in it.
    fn task_live(&self, task: &str) -> bool {
        self.live.borrow().contains(task)
    }

    /// Whether recorded call `rec` comes at or after a refusal judged
    /// again, so it runs live whatever its task.
    fn after_rejudged(&self, rec: &StoredCall) -> bool {
        self.rejudged
            .get()
            .is_some_and(|at| self.record.place(rec) >= at)
    }

    /// The recorded answer to call `seq` of `task`.
    pub fn answer(&self, task: &str, seq: u64, flow: &str, input: &Value) -> Answer {
        let found = match self.record.call(task, seq) {
            Ok(found) => found,
            Err(e) => return Answer::Halt(unreadable(task, seq, &e)),
        };
        let rec = found.as_ref();
        // Live already (past a re-judged refusal, or from #N): the record
        // still holds back a call it must not run again by itself.
        let already = self.task_live(task) || rec.is_some_and(|rec| self.after_rejudged(rec));
        if already && !rec.is_some_and(|rec| self.held_back(rec)) {
            return self.go_live(task);
        }
        let Some(rec) = rec else {
            return match self.mode {
                Mode::Resume { .. } => self.go_live(task),
                Mode::Replay => Answer::Halt(self.ran_past(task, seq, flow, input)),
            };
        };
        let live = already || self.live_from_here(rec);
        if live && !self.held_back(rec) {
            return self.go_live(task);
        }
        let mut known = crate::credentials::loaded();
        known.extend(self.secrets.borrow().iter().cloned());
        let (redaction, now) = Redaction::input(input, &known);
        self.secrets.borrow_mut().extend(redaction.learned);
        if rec.flow != flow || rec.input != now {
            // From #N on a changed call is the fixed script's to make.
            if live {
                return self.go_live(task);
            }
            let e = diverged(task, seq, rec, flow, &now);
            return Answer::Halt(self.with_live_from_hint(e, rec));
        }
        match (&rec.status, self.mode) {
            (
                None,
                Mode::Resume {
                    retry_unknown: true,
                    ..
                },
            ) => self.go_live(task),
            (
                None,
                Mode::Resume {
                    unknown_ran: true, ..
                },
            ) if rec.tier == "irreversible" => {
                self.answered.set(self.answered.get() + 1);
                Answer::Recorded(Ok(ran_by_word()), Box::new(rec.clone()))
            }
            (None, mode @ Mode::Resume { .. }) => {
                *self.held.borrow_mut() = Some(rec.clone());
                Answer::Halt(unknown(task, seq, rec, mode))
            }
            // A call a stop cut short did part of its work: a sealed or
            // compensable one runs again; an irreversible one is for the
            // person to look at first.
            (Some(_), Mode::Resume { retry_unknown, .. }) if stopped_by(rec).is_some() => {
                if rec.tier != "irreversible" || retry_unknown {
                    return self.go_live(task);
                }
                *self.held.borrow_mut() = Some(rec.clone());
                Answer::Halt(stopped(task, seq, rec))
            }
            (None, mode) => Answer::Halt(unknown(task, seq, rec, mode)),
            // A refusal is judged again, under the policy and approvals of
            // now; what the run recorded after it may have seen it fail.
            (Some(_), Mode::Resume { .. }) if refused(rec) => {
                let at = self.record.place(rec);
                let first = self.rejudged.get().map_or(at, |was| was.min(at));
                self.rejudged.set(Some(first));
                self.go_live(task)
            }
            (Some(_), _) if rec.capped => Answer::Halt(capped(task, seq, rec)),
            (Some(status), _) => {
                self.answered.set(self.answered.get() + 1);
                let result = self.record.result(status, rec);
                Answer::Recorded(result, Box::new(found.expect("the call answered")))
            }
        }
    }

    /// Whether `--live-from N` makes this recorded call, and all after it,
    /// run live: it is #N or later in the resumed run, or comes from a run
    /// that run continued (its rows come after the run's own).
    fn live_from_here(&self, rec: &StoredCall) -> bool {
        let Mode::Resume {
            live_from: Some(n), ..
        } = self.mode
        else {
            return false;
        };
        rec.run != self.record.run.id || rec.n as u64 >= n
    }

    /// Whether a recorded call stops a resume even from `--live-from`'s #N
    /// on, when the script makes it again as recorded: an irreversible one
    /// whose outcome is unknown or that a stop cut short, unless told to
    /// retry such calls (`--retry-unknown`). Running it again is the
    /// person's to decide, whatever N says.
    fn held_back(&self, rec: &StoredCall) -> bool {
        let Mode::Resume {
            retry_unknown: false,
            ..
        } = self.mode
        else {
            return false;
        };
        rec.tier == "irreversible" && (rec.status.is_none() || stopped_by(rec).is_some())
    }

    /// A resume's divergence says how to go on from there: live from that
    /// call, when the number is the resumed run's own.
    fn with_live_from_hint(&self, e: FlowError, rec: &StoredCall) -> FlowError {
        if self.mode == Mode::Replay || rec.run != self.record.run.id {
            return e;
        }
        let how = match self.mode {
            Mode::Resume {
                live_from: Some(n), ..
            } => format!(
                "\n  --live-from {n} replays every call before #{n}, and this one differs: give --live-from {} \
                 (or smaller) to run live from here",
                rec.n
            ),
            _ => format!(
                "\n  to run live from this call on (the calls before it still replay), resume with --script FILE \
                 --live-from {}",
                rec.n
            ),
        };
        FlowError {
            message: e.message + &how,
            ..e
        }
    }

    /// The call a resume stopped at (see [`Replay::held`]), once, with
    /// what it returned: `None` for a call of unknown outcome.
    pub fn take_held(&self) -> Option<(StoredCall, Option<Result<Value, FlowError>>)> {
        let rec = self.held.borrow_mut().take()?;
        let result = rec.status.as_deref().map(|s| self.record.result(s, &rec));
        Some((rec, result))
    }

    /// The recorded value of a clock reading, while the record answers
    /// `task`.
    pub fn reading(&self, task: &str, seq: u64) -> Option<f64> {
        if self.task_live(task) {
            return None;
        }
        self.record.reading(task, seq)
    }

    /// Makes `task` live from this call on.
    fn go_live(&self, task: &str) -> Answer {
        if !self.task_live(task) {
            self.live.borrow_mut().insert(task.to_string());
        }
        Answer::Live
    }

    fn ran_past(&self, task: &str, seq: u64, flow: &str, input: &Value) -> FlowError {
        self.past_end.set(true);
        FlowError::new(
            ErrorCode::ReplayDiverged,
            format!(
                "replay diverged at task {task}, call {seq}: the script makes {flow} {}, which the recorded \
                 run {} never made (it recorded {}, {} of them in task {task})",
                clip(&input.to_string()),
                self.record.run.id,
                calls(self.record.len()),
                self.record.task_len(task)
            ),
        )
        .with("task", task)
        .with("seq", seq)
        .with("flow", flow)
    }
}

impl Record {
    /// The calls call `seq` of `task` made through the door while it ran
    /// (and theirs), with what each returned, in their tasks' order: a
    /// resume that answers the call copies them with it.
    pub fn inner_calls(&self, task: &str, seq: u64) -> Vec<(StoredCall, Result<Value, FlowError>)> {
        let prefix = crate::call::inner_task(task, seq);
        // The run's own row of a call first, then the runs it continued.
        let mut found: Vec<StoredCall> = Vec::new();
        for run in &self.chain {
            for rec in rows::calls_under(self.db(), run, &prefix).unwrap_or_default() {
                if !found.iter().any(|f| f.task == rec.task && f.seq == rec.seq) {
                    found.extend(self.assembled(rec).ok());
                }
            }
        }
        found.sort_by_key(|rec| rec.n);
        found
            .into_iter()
            .map(|rec| {
                let result = self.result(rec.status.as_deref().unwrap_or("ok"), &rec);
                (rec, result)
            })
            .collect()
    }

    /// What a recorded call returned: its output, or its error rebuilt.
    pub(super) fn result(&self, status: &str, rec: &StoredCall) -> Result<Value, FlowError> {
        if status == "ok" {
            return Ok(match (&rec.output, &rec.output_ref) {
                (Some(text), _) => serde_json::from_str(text).unwrap_or(Value::Null),
                (None, Some(sha)) => self.output(sha),
                (None, None) => Value::Null,
            });
        }
        let err: Value = rec
            .error
            .as_deref()
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or(Value::Null);
        let code = err
            .get("code")
            .and_then(Value::as_str)
            .and_then(ErrorCode::parse)
            .unwrap_or(ErrorCode::CommandFailed);
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut e = FlowError::new(code, message);
        if let Value::Object(map) = err {
            for (k, v) in map {
                if k != "code" && k != "message" {
                    e = e.with(&k, v);
                }
            }
        }
        Err(e)
    }
}

/// Why the record could not answer a call: it could not be read.
fn unreadable(task: &str, seq: u64, e: &db::Error) -> FlowError {
    FlowError::new(
        ErrorCode::ReplayDiverged,
        format!(
            "the record cannot answer task {task}, call {seq}: reading the audit database: {e}"
        ),
    )
    .with("task", task)
    .with("seq", seq)
    .with(
        "record",
        if e.kind == db::ErrorKind::Unreachable {
            "unreachable"
        } else {
            "unreadable"
        },
    )
}

/// Whether `e` stopped a replay or resume because its record could not be
/// reached (a server restarting, a network cut): the same resume may
/// succeed later, unlike a divergence.
pub fn record_unreachable(e: &FlowError) -> bool {
    e.code == ErrorCode::ReplayDiverged
        && e.details.get("record").and_then(Value::as_str) == Some("unreachable")
}

/// The signal whose stop request cut a recorded call short (its error's
/// `interrupted`), if one did.
fn stopped_by(rec: &StoredCall) -> Option<String> {
    let err: Value = serde_json::from_str(rec.error.as_deref()?).ok()?;
    Some(err.get("interrupted")?.as_str()?.to_string())
}

/// Why a resume stops at an irreversible call a stop request cut short:
/// the signal, how far it got, what it had printed, and the flag.
fn stopped(task: &str, seq: u64, rec: &StoredCall) -> FlowError {
    let err: Value = rec
        .error
        .as_deref()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(Value::Null);
    let sig = err["interrupted"].as_str().unwrap_or("a signal");
    let after = err["elapsedMs"]
        .as_u64()
        .map_or(String::new(), |ms| format!(" after {ms} ms"));
    let printed: Vec<String> = ["stdout", "stderr", "output"]
        .iter()
        .filter_map(|k| Some((k, err.get(*k)?.as_str()?)))
        .filter(|(_, text)| !text.is_empty())
        .map(|(k, text)| format!("{k} {}", clip(&Value::from(text).to_string())))
        .collect();
    let printed = if printed.is_empty() {
        "it had printed nothing".to_string()
    } else {
        format!("it had printed {}", printed.join(", "))
    };
    FlowError::new(
        ErrorCode::ReplayDiverged,
        format!(
            "call #{} (task {task}, call {seq}, {} {}) was irreversible and was stopped by {sig} while it ran \
             (sluice killed it{after}), so it may have done part of its work; {printed}. Resume does not run it \
             again by itself: check what it did, then resume with --retry-unknown to run it again",
            rec.n,
            rec.flow,
            clip(&rec.input)
        ),
    )
    .with("n", rec.n)
    .with("outcome", "stopped")
    .with("interrupted", sig)
}

/// Whether a recorded call was refused by the policy or for want of an
/// approval.
fn refused(rec: &StoredCall) -> bool {
    let Some(err) = rec.error.as_deref() else {
        return false;
    };
    err.contains(r#""code":"permission_denied""#) || err.contains(r#""code":"permission_required""#)
}

/// The divergence message: both calls side by side, then the fields that
/// differ.
fn diverged(task: &str, seq: u64, rec: &StoredCall, flow: &str, input: &str) -> FlowError {
    let mut msg = format!(
        "replay diverged at call #{} (task {task}, call {seq}):\n  recorded: {} {}\n  now:      {flow} {}",
        rec.n,
        rec.flow,
        clip(&rec.input),
        clip(input)
    );
    let was: Value = serde_json::from_str(&rec.input).unwrap_or(Value::Null);
    let now: Value = serde_json::from_str(input).unwrap_or(Value::Null);
    for line in field_diff(&was, &now) {
        msg.push_str("\n  ");
        msg.push_str(&line);
    }
    FlowError::new(ErrorCode::ReplayDiverged, msg)
        .with("task", task)
        .with("seq", seq)
        .with("n", rec.n)
        .with("recordedFlow", rec.flow.clone())
        .with("flow", flow)
        .with("recordedInput", was)
        .with("input", now)
}

/// `field: recorded X, now Y` for each top-level field that differs; for
/// a list in both, its first differing item (a conversation's whole history
/// would hide the one message that changed) and a change of length.
fn field_diff(was: &Value, now: &Value) -> Vec<String> {
    let (Some(a), Some(b)) = (was.as_object(), now.as_object()) else {
        return Vec::new();
    };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut lines = Vec::new();
    for k in keys.into_iter().filter(|k| a.get(*k) != b.get(*k)) {
        match (a.get(k), b.get(k)) {
            (Some(Value::Array(x)), Some(Value::Array(y))) => lines.extend(list_diff(k, x, y)),
            (x, y) => lines.push(format!("{k}: recorded {}, now {}", shown(x), shown(y))),
        }
    }
    lines
}

/// `field[i]: recorded X, now Y` for the first item of two lists that
/// differs, then `field: recorded N items, now M` when their lengths do.
fn list_diff(k: &str, was: &[Value], now: &[Value]) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(i) = (0..was.len().max(now.len())).find(|&i| was.get(i) != now.get(i)) {
        let (x, y) = (shown(was.get(i)), shown(now.get(i)));
        lines.push(format!("{k}[{i}]: recorded {x}, now {y}"));
    }
    if was.len() != now.len() {
        let items = |n: usize| plural(n as i64, "item", "items");
        lines.push(format!(
            "{k}: recorded {}, now {}",
            items(was.len()),
            items(now.len())
        ));
    }
    lines
}

/// A field's value in a divergence message, clipped; `(absent)` for none.
fn shown(v: Option<&Value>) -> String {
    v.map_or("(absent)".to_string(), |v| clip(&v.to_string()))
}

/// The key a file flow's recorded output keeps what it wrote under: each
/// path with the SHA-256 of its new bytes (null: removed). The record's
/// alone: a replay or resume returns the output without it.
pub const WRITTEN: &str = "_written";

/// `result` as the script sees it: without what the record alone keeps.
pub fn as_returned(mut result: Result<Value, FlowError>) -> Result<Value, FlowError> {
    if let Ok(Value::Object(out)) = &mut result {
        out.remove(WRITTEN);
    }
    result
}

/// What an irreversible call of unknown outcome returns once the person
/// says it happened: its real result is not known, so the script is told
/// that, as a table (`{resolved = "ran"}`), and goes on.
pub fn ran_by_word() -> Value {
    serde_json::json!({"resolved": "ran"})
}

fn unknown(task: &str, seq: u64, rec: &StoredCall, mode: Mode) -> FlowError {
    let what = match mode {
        Mode::Replay => "replay cannot return it",
        Mode::Resume { .. } => {
            "resume does not run it again by itself: check by hand whether it happened, then resume with \
             --retry-unknown to run it again"
        }
    };
    FlowError::new(
        ErrorCode::ReplayDiverged,
        format!(
            "call #{} (task {task}, call {seq}, {} {}) was irreversible and its outcome is unknown: the run \
             stopped after it was recorded and before it finished; {what}",
            rec.n,
            rec.flow,
            clip(&rec.input)
        ),
    )
    .with("n", rec.n)
    .with("outcome", "unknown")
}

fn capped(task: &str, seq: u64, rec: &StoredCall) -> FlowError {
    FlowError::new(
        ErrorCode::Unsupported,
        format!(
            "call #{} (task {task}, call {seq}, {}) has an output over the audit cap, stored as its size, hash, \
             head and tail, so replay cannot return it whole",
            rec.n, rec.flow
        ),
    )
    .with("n", rec.n)
}

/// "1 call", "2 calls".
pub fn calls(n: usize) -> String {
    plural(n as i64, "call", "calls")
}

fn clip(text: &str) -> String {
    const MAX: usize = 200;
    if text.chars().count() <= MAX {
        return text.to_string();
    }
    let cut: String = text.chars().take(MAX).collect();
    format!("{cut}… ({} bytes)", text.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::fixtures::{db, run_start};
    use crate::audit::recorder::{CallRow, Outcome, Recorder};
    use crate::call::Tier;
    use serde_json::json;

    /// One recorded call: step `seq` of `task`, begun `at` ms into the
    /// run, and how it ended.
    struct Row(&'static str, u64, &'static str, Value, i64, FlowResult);

    type FlowResult = Result<Value, FlowError>;

    fn read(path: &str) -> Value {
        json!({ "path": path })
    }

    /// Records `rows` as run `r1` and loads its record back.
    fn recorded(rows: Vec<Row>) -> (tempfile::TempDir, Record) {
        let (dir, conn) = record(rows);
        let record = Record::load(&conn, "r1").expect("load");
        (dir, record)
    }

    /// Records `rows` as run `r1`.
    fn record(rows: Vec<Row>) -> (tempfile::TempDir, rusqlite::Connection) {
        let (dir, conn) = db();
        let path = dir.path().join("audit.db");
        let start = run_start("r1");
        let t0 = start.started_ms;
        let recorder = Recorder::start(&path, start).expect("start the recorder");
        for Row(task, seq, flow, input, at, result) in rows {
            let tier = if flow == "bash" {
                Tier::Irreversible
            } else {
                Tier::Sealed
            };
            let row = CallRow::new(task, seq, flow, tier, input, t0 + at);
            recorder
                .call(row, Outcome::new(result, 1500, Vec::new()), true)
                .expect("record a call");
        }
        recorder.end("interrupted", None).expect("seal");
        (dir, conn)
    }

    fn resume(record: Record, retry_unknown: bool) -> Replay {
        let mode = Mode::Resume {
            retry_unknown,
            unknown_ran: false,
            live_from: None,
        };
        Replay::new(record, mode)
    }

    fn kind(a: &Answer) -> &'static str {
        match a {
            Answer::Recorded(..) => "recorded",
            Answer::Live => "live",
            Answer::Halt(_) => "halt",
        }
    }

    /// A store whose record's connections are counted as they are opened.
    struct Counted(Opener, Arc<std::sync::atomic::AtomicUsize>);

    impl Reopen for Counted {
        fn opener(&self) -> Result<Opener, String> {
            let (open, count) = (self.0.clone(), self.1.clone());
            Ok(Arc::new(move || {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                open()
            }))
        }
    }

    #[test]
    fn a_record_reads_through_a_connection_of_its_own_and_its_reader_through_another() {
        let calls = (1..=3).map(|seq| {
            let path = format!("{seq}.txt");
            Row(
                "0",
                seq,
                "read",
                read(&path),
                0,
                Ok(json!({"content": path})),
            )
        });
        let (_d, conn) = record(calls.collect());
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let store = Counted(conn.opener().unwrap(), count.clone());
        let opened = || count.load(std::sync::atomic::Ordering::SeqCst);
        let replay = Replay::new(Record::load(&store, "r1").unwrap(), Mode::Replay);
        assert_eq!(opened(), 1, "loading opens the record's own connection");
        for seq in 1..=3 {
            let path = format!("{seq}.txt");
            let Answer::Recorded(Ok(out), _) = replay.answer("0", seq, "read", &read(&path)) else {
                panic!("call {seq} was not answered from the record");
            };
            assert_eq!(out, json!({"content": path}));
        }
        assert_eq!(opened(), 2, "the reader thread opened one more, once");
    }

    #[test]
    fn a_store_that_cannot_be_opened_again_is_refused_naming_why() {
        let memory = rusqlite::Connection::open_in_memory().unwrap();
        let e = Record::load(&memory, "r1").unwrap_err();
        assert_eq!(e, "the audit database has no file to read a replay from");
    }

    #[test]
    fn a_task_past_its_record_goes_live_alone_and_the_others_recorded_calls_are_answered() {
        let (_d, record) = recorded(vec![
            Row("0.1", 1, "read", read("a"), 0, Ok(json!({"content": "a"}))),
            Row("0.2", 1, "read", read("b"), 1, Ok(json!({"content": "b"}))),
            Row("0.1", 2, "read", read("c"), 2, Ok(json!({"content": "c"}))),
        ]);
        let replay = resume(record, false);
        // Task 0.2 gets there first this time, past its one recorded call.
        assert_eq!(
            kind(&replay.answer("0.2", 1, "read", &read("b"))),
            "recorded"
        );
        assert_eq!(kind(&replay.answer("0.2", 2, "read", &read("d"))), "live");
        assert!(replay.is_live());
        // Task 0.1's calls happened: they are answered, not run again.
        assert_eq!(
            kind(&replay.answer("0.1", 1, "read", &read("a"))),
            "recorded"
        );
        assert_eq!(
            kind(&replay.answer("0.1", 2, "read", &read("c"))),
            "recorded"
        );
        assert_eq!(kind(&replay.answer("0.1", 3, "read", &read("e"))), "live");
        // Once live, a task stays live, recorded or not.
        assert_eq!(kind(&replay.answer("0.2", 3, "read", &read("f"))), "live");
        assert_eq!(replay.answered.get(), 3);
        assert_eq!(
            replay.reading("0.2", 1),
            None,
            "a live task reads the clock live"
        );
    }

    #[test]
    fn a_refusal_judged_again_makes_live_what_any_task_recorded_after_it_began() {
        let denied = FlowError::new(ErrorCode::PermissionDenied, "denied by rule");
        let (_d, record) = recorded(vec![
            Row("0.2", 1, "read", read("x"), 0, Ok(json!({"content": "x"}))),
            Row("0.1", 1, "write", read("out"), 10, Err(denied)),
            Row(
                "0.2",
                2,
                "read",
                read("out"),
                20,
                Ok(json!({"content": ""})),
            ),
        ]);
        let replay = resume(record, false);
        assert_eq!(
            kind(&replay.answer("0.1", 1, "write", &read("out"))),
            "live"
        );
        // Begun before the refusal: its answer stands.
        assert_eq!(
            kind(&replay.answer("0.2", 1, "read", &read("x"))),
            "recorded"
        );
        // Begun after: it may have seen the write missing, so it runs again.
        assert_eq!(kind(&replay.answer("0.2", 2, "read", &read("out"))), "live");
    }

    #[test]
    fn an_irreversible_call_a_stop_cut_short_in_another_task_holds_the_resume_naming_that_task() {
        let stopped = FlowError::new(ErrorCode::Timeout, "stopped")
            .with("interrupted", "SIGINT")
            .with("stdout", "half");
        let rows = || {
            vec![
                Row("0.1", 1, "read", read("a"), 0, Ok(json!({"content": "a"}))),
                Row(
                    "0.2",
                    1,
                    "bash",
                    json!({"command": "deploy"}),
                    1,
                    Err(stopped.clone()),
                ),
                Row("0.1", 2, "read", read("b"), 50, Ok(json!({"content": "b"}))),
            ]
        };
        let (_d, record) = recorded(rows());
        let replay = resume(record, false);
        match replay.answer("0.2", 1, "bash", &json!({"command": "deploy"})) {
            Answer::Halt(e) => assert!(
                e.message.contains("(task 0.2, call 1, bash ")
                    && e.message.contains("--retry-unknown"),
                "{}",
                e.message
            ),
            other => panic!("the resume went on: {other:?}"),
        }
        // Told to retry: task 0.2 runs it again, task 0.1's calls are answered.
        let (_d, record) = recorded(rows());
        let replay = resume(record, true);
        assert_eq!(
            kind(&replay.answer("0.2", 1, "bash", &json!({"command": "deploy"}))),
            "live"
        );
        assert_eq!(
            kind(&replay.answer("0.1", 1, "read", &read("a"))),
            "recorded"
        );
        assert_eq!(
            kind(&replay.answer("0.1", 2, "read", &read("b"))),
            "recorded"
        );
    }

    #[test]
    fn a_replay_names_the_task_and_call_the_record_lacks_or_that_differs() {
        let (_d, record) = recorded(vec![
            Row("0.1", 1, "read", read("a"), 0, Ok(json!({"content": "a"}))),
            Row("0.2", 1, "read", read("b"), 1, Ok(json!({"content": "b"}))),
        ]);
        let replay = Replay::new(record, Mode::Replay);
        let Answer::Halt(e) = replay.answer("0.2", 1, "read", &read("z")) else {
            panic!("a changed call was answered");
        };
        assert!(e.message.contains("(task 0.2, call 1):"), "{}", e.message);
        assert_eq!(e.details.get("task"), Some(&json!("0.2")));
        let Answer::Halt(e) = replay.answer("0.2", 2, "read", &read("c")) else {
            panic!("a call past the record was answered");
        };
        assert!(
            e.message
                .starts_with("replay diverged at task 0.2, call 2: the script makes read")
                && e.message
                    .contains("(it recorded 2 calls, 1 of them in task 0.2)"),
            "{}",
            e.message
        );
    }
}
