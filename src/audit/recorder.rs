//! The writer a run records through. The database connection lives on a
//! thread of its own, so a call hands its row over and goes on; the writer
//! redacts, hashes and inserts, committing what has queued up together.
//!
//! Durability follows the tier: an irreversible call's intent is committed
//! and synced (WAL fsync) before the call runs, so a resume never runs it
//! twice unknowingly; its outcome is queued (a kill before the queue drains
//! leaves the outcome unknown, which is what the record then says). A
//! compensable call's row is committed (not synced) before it returns, so a
//! resume after a kill does not repeat it. A sealed call's row is queued.
//! The run's end waits for the queue to drain.
//!
//! The writer sleeps while nothing is queued (the next message wakes it);
//! rows that find it idle since a quiet spell are committed at once, and
//! rows that come faster than it commits gather for up to `QUIET` into
//! one transaction.
//!
//! A call of the run waits for those commits as a task (`intent_awaited`,
//! `call_awaited`): the writer answers it through a oneshot channel, so
//! the run's one thread, which every task shares, runs the other tasks
//! meanwhile. The blocking forms (`intent`, `call`) are for a step that
//! cannot await (a resume's stop) and for callers off that thread.
//!
//! A store that cannot be reached (a PostgreSQL server restarting) is
//! waited for, within the run's retry budget: what the writer linked waits
//! in memory, bounded, and is written once the store answers (see
//! `recorder_flush.rs` and [`super::outage`]); past the budget the run
//! stops, saying what was recorded.

use super::chain::{self, CallIntent, CallOutcome, Reading, RunEnd, RunHead, RunLink, Seal};
use super::db::{self, vals, Begin, Db, Val};
use super::outage::{Effect, Outage, Unsynced, Write};
use super::parts::{self, Split};
use super::redact::{cap_output, Redaction, DEFAULT_OUTPUT_CAP};
use super::rows::StoredCall;
use super::store;
use crate::call::Tier;
use crate::error::FlowResult;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A statement's values, owned: `params![id, n, None::<String>]`.
macro_rules! params {
    ($($v:expr),* $(,)?) => {
        vec![$(Val::from($v)),*]
    };
}

/// Rows that may wait in the queue before a call blocks on the writer. Each
/// holds its call's output until the writer takes it, so the bound is what
/// a writer that falls behind may cost in memory, not a per-call growth.
const QUEUE: usize = 256;
/// Queued rows from which a sender wakes the writer instead of letting it
/// find them at its next look: a full queue would block the run.
const NUDGE: usize = QUEUE / 4;
/// Messages committed in one transaction at most.
const BATCH: usize = 512;
/// Outputs whose JSON is longer are kept once by content in `outputs`.
const INLINE: usize = 1024;
/// How long rows nobody waits for gather before they are committed, when
/// they come faster than the writer commits them; a row that finds the
/// writer idle this long after its last commit is committed at once.
const QUIET: Duration = Duration::from_millis(1);
/// Content keys the writer remembers as stored, to skip an INSERT it knows
/// would do nothing (`ON CONFLICT DO NOTHING`); past this many it forgets
/// them all, so a run of many distinct outputs keeps no key per call.
const STORED_KEYS: usize = 4096;
/// Recent outputs the writer remembers with their stored form, so an
/// output equal to one of them (a file read again) is neither serialized
/// nor hashed again.
const RECENT_OUTPUTS: usize = 8;
/// Outputs whose JSON is longer are not remembered as recent.
const RECENT_MAX: usize = 64 * 1024;

/// A run's fixed facts, written when it starts.
#[derive(Debug, Clone, Default)]
pub struct RunStart {
    pub id: String,
    pub script: String,
    pub script_sha256: Option<String>,
    /// The script's text, whose SHA-256 is `script_sha256`: kept by
    /// content when the run seals, so a replay does not need the file
    /// (unless it holds a secret the run knows by then).
    pub script_text: Option<String>,
    pub policies: Vec<PolicyFile>,
    pub args: Vec<String>,
    pub workspace: String,
    pub started_ms: i64,
    pub random_seed: i64,
    pub resumed_from: Option<String>,
    /// The run's ceiling patterns, which a resume applies again.
    pub ceiling: Vec<String>,
    /// The lease attempt its writer starts with (1 when 0): a fleet gives
    /// its engine's attempt number.
    pub attempt: i64,
}

/// A policy the run was judged by.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicyFile {
    pub name: String,
    pub sha256: String,
}

/// One decision about one capability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    pub capability: String,
    /// `allow`, `deny` or `ask`: what the kernel said.
    pub decision: String,
    /// The rule, hook, ceiling or default that decided.
    pub by: String,
    pub reason: String,
    /// Who granted an ask (`--approve PATTERN`, the person at the terminal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// Where the rule that decided is written (`p.lua:5`), when a rule
    /// of a policy file decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// One call's fields known before it runs.
#[derive(Debug, Clone)]
pub struct CallRow {
    pub task: String,
    pub seq: u64,
    pub flow: String,
    pub tier: &'static str,
    pub input: Value,
    pub capabilities: Vec<String>,
    pub decisions: Vec<Decision>,
    pub route: Option<Value>,
    /// The run this row was copied from by a resume.
    pub replayed_from: Option<String>,
    pub started_ms: i64,
    /// The input's list field whose items the record keeps once each by
    /// content (`messages` for the `model` flow, which an agent loop calls
    /// every turn with the whole conversation so far): the row stores the
    /// input without it and the items' keys, and the readers see the input
    /// whole. `None` (every constructor's default) stores the input whole;
    /// so does an input that holds no list there.
    pub shared: Option<Cow<'static, str>>,
    /// Who made the call when it came from outside the script: an MCP
    /// client's name and version as one string (`claude-code 1.2.3`), which
    /// the caller sets on the row. `None` (every constructor's default) for
    /// the script's own calls and job operations; a resume's copy keeps the
    /// recorded one.
    pub client: Option<String>,
}

/// How a call ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The output, or the error as `{code, message, ...}`.
    pub result: Result<Value, Value>,
    pub duration_us: i64,
    pub late_decisions: Vec<Decision>,
}

// Rows and outcomes are built here alone, so a column added to the record
// is filled in one place for live calls, job operations and copies alike.
impl CallRow {
    /// Step `seq` of `task`, a call of `flow` begun at `started_ms`, before
    /// anything is decided about it.
    pub fn new(
        task: &str,
        seq: u64,
        flow: &str,
        tier: Tier,
        input: Value,
        started_ms: i64,
    ) -> CallRow {
        CallRow {
            task: task.to_string(),
            seq,
            flow: flow.to_string(),
            tier: tier.as_str(),
            input,
            capabilities: Vec::new(),
            decisions: Vec::new(),
            route: None,
            replayed_from: None,
            started_ms,
            shared: None,
            client: None,
        }
    }

    /// The row with what authorizing the call found: the capabilities its
    /// envelope asks for, the decisions on them, where its command runs.
    pub fn authorized(
        self,
        capabilities: Vec<String>,
        decisions: Vec<Decision>,
        route: Option<Value>,
    ) -> CallRow {
        CallRow {
            capabilities,
            decisions,
            route,
            ..self
        }
    }

    /// A job operation (`job.read`, `job.kill`, ...) as step `seq` of
    /// `task`: sealed, whatever authorized it in `decisions`.
    pub fn job(task: &str, seq: u64, op: &str, input: Value, decisions: Vec<Decision>) -> CallRow {
        CallRow::new(task, seq, op, Tier::Sealed, input, super::now_ms()).authorized(
            Vec::new(),
            decisions,
            None,
        )
    }

    /// Recorded call `rec` of run `from`, as step `seq` of `task` of the
    /// run that resumed it; `input` as the script gave it now.
    pub fn copied(task: &str, seq: u64, input: &Value, rec: &StoredCall, from: &str) -> CallRow {
        let row = CallRow::new(
            task,
            seq,
            &rec.flow,
            tier_of(&rec.tier),
            input.clone(),
            super::now_ms(),
        );
        let route = rec
            .route
            .as_deref()
            .and_then(|r| serde_json::from_str(r).ok());
        let row = row.authorized(
            serde_json::from_str(&rec.capabilities).unwrap_or_default(),
            serde_json::from_str(&rec.decisions).unwrap_or_default(),
            route,
        );
        // A copy is kept as compactly as the row it copies, and says who
        // made the call it copies.
        let shared = rec.parts.as_ref().and_then(|p| p.field());
        CallRow {
            replayed_from: Some(from.to_string()),
            shared: shared.map(|f| Cow::Owned(f.to_string())),
            client: rec.client.clone(),
            ..row
        }
    }
}

/// A recorded tier by the name rows carry; a name no tier has is sealed.
fn tier_of(recorded: &str) -> Tier {
    match recorded {
        "compensable" => Tier::Compensable,
        "irreversible" => Tier::Irreversible,
        _ => Tier::Sealed,
    }
}

impl Outcome {
    /// How a call ended: `result` (an error kept as its JSON), after
    /// `duration_us`, with the decisions made while it ran.
    pub fn new(
        result: FlowResult<Value>,
        duration_us: i64,
        late_decisions: Vec<Decision>,
    ) -> Outcome {
        Outcome {
            result: result.map_err(|e| e.to_json()),
            duration_us,
            late_decisions,
        }
    }

    /// What a step that ran nothing of its own returned: a call a resume
    /// copied, a job operation.
    pub fn at_once(result: FlowResult<Value>) -> Outcome {
        Outcome::new(result, 0, Vec::new())
    }
}

/// Someone waiting for a message's commit, and how they wait.
enum Waiter {
    /// A thread, blocked until the answer comes.
    Thread(SyncSender<Result<(), String>>),
    /// A task of the run, suspended on its one thread while the others go on.
    Task(oneshot::Sender<Result<(), String>>),
}

impl Waiter {
    /// Tells the waiter how the commit went; one who stopped waiting (a
    /// task dropped meanwhile) needs no answer.
    fn answer(self, answer: Result<(), String>) {
        match self {
            Waiter::Thread(tx) => drop(tx.send(answer)),
            Waiter::Task(tx) => drop(tx.send(answer)),
        }
    }
}

enum Msg {
    Intent(Box<CallRow>, Waiter),
    Done(Box<CallRow>, Box<Outcome>, Option<Waiter>),
    Outcome {
        task: String,
        seq: u64,
        outcome: Box<Outcome>,
    },
    Reading {
        task: String,
        seq: u64,
        kind: &'static str,
        value: f64,
    },
    /// The `k`th module the script required.
    Module {
        k: i64,
        name: String,
        path: String,
        text: String,
    },
    End {
        status: String,
        error: Option<String>,
        ack: SyncSender<Result<(), String>>,
    },
    /// Renews the run's lease (and, by the batch's check, learns whether
    /// it is still this writer's); a waiter when the script waits for it.
    Renew(Option<Waiter>),
}

impl Msg {
    fn needs_sync(&self) -> bool {
        matches!(self, Msg::Intent(..) | Msg::End { .. })
    }

    /// Whether a caller blocks until this message is committed.
    fn awaited(&self) -> bool {
        matches!(
            self,
            Msg::Intent(..) | Msg::End { .. } | Msg::Done(_, _, Some(_)) | Msg::Renew(Some(_))
        )
    }
}

/// A run's handle on its record.
pub struct Recorder {
    tx: SyncSender<Msg>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The writer, to wake when someone waits on a message.
    writer: std::thread::Thread,
    /// Messages sent and not yet taken by the writer.
    queued: Arc<AtomicUsize>,
    /// Whether the writer sleeps with nothing queued: the next message
    /// wakes it.
    idle: Arc<AtomicBool>,
    /// The first write that failed; every later intent is refused with it.
    failure: Arc<Mutex<Option<String>>>,
    fenced: Arc<AtomicBool>,
    /// Set when the store stayed unreachable past the retry budget: the
    /// run starts no call after it.
    lost: Arc<AtomicBool>,
    /// Set while the store is unreachable and the writer holds as many
    /// rows as it may: no call starts until it can write them.
    backed_up: Arc<AtomicBool>,
    lease_until: Arc<AtomicI64>,
    /// What the writer holds, as of its last batch.
    #[cfg_attr(not(test), allow(dead_code))]
    footprint: Arc<Mutex<Footprint>>,
}

/// What the writer holds between batches, counted: each is bounded by a
/// constant or by the calls running at once, never by the calls recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Rows not yet folded into the seal (those after a running call).
    pub unfolded: usize,
    /// Irreversible calls whose intent waits for its outcome.
    pub intents: usize,
    /// Content keys remembered as stored (at most [`STORED_KEYS`]).
    pub stored: usize,
    /// Outputs remembered to recognise the next equal one.
    pub recent: usize,
    /// Secrets the run's inputs brought.
    pub secrets: usize,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Recorder {
    /// Opens (creating when missing) the SQLite database at `path`, writes
    /// the run's row (status `running`) and starts the writer: the
    /// embedded default, [`Recorder::start_in`] on [`store::open`]. The
    /// tests' shorthand: a run opens its record by location
    /// (`audit::open::for_writing`).
    #[cfg(test)]
    pub fn start(path: &std::path::Path, run: RunStart) -> Result<Recorder, String> {
        let conn = store::open(path)?;
        let name = path.display().to_string();
        Recorder::start_in(Box::new(conn), &name, run, super::outage::DEFAULT_RETRY)
    }

    /// Writes the run's row (status `running`) into `store`, already
    /// opened at the current schema, of either backend, and starts the
    /// writer, which owns the store from then on. `name` is how errors
    /// name the store (a path, or a URL without its password).
    ///
    /// A store that becomes unreachable (a PostgreSQL server restarting, a
    /// network cut) is waited for `retry` ([`super::outage::DEFAULT_RETRY`] by
    /// default) before the run stops: meanwhile the rows of calls made
    /// queue in memory (at most [`super::outage::QUEUED_ROWS`] statements or
    /// [`super::outage::QUEUED_BYTES`]), no irreversible call starts before its
    /// intent is committed, and no call starts while the queue is full.
    /// Zero stops the run at the first failed write.
    pub fn start_in(
        store: Box<dyn Db + Send>,
        name: &str,
        run: RunStart,
        retry: Duration,
    ) -> Result<Recorder, String> {
        let until = super::lease::until_from_now();
        let head = insert_run(&*store, &run, until)
            // Rows of sealed calls are committed unsynced until a batch
            // asks for more: the writer's cached setting is made so on
            // every backend, whatever its default.
            .and_then(|head| store.durable(false).map(|()| head))
            .map_err(|e| format!("audit database {name}: {e}"))?;
        let (tx, rx) = sync_channel(QUEUE);
        let mut writer = Writer::new(store, name, (run.id, head), retry, until);
        writer.attempt = run.attempt.max(1);
        writer.sources.script = run.script_sha256.zip(run.script_text);
        let shared = writer.shared();
        let thread = std::thread::Builder::new()
            .name("sluice-audit".into())
            .spawn(move || writer.serve(rx))
            .map_err(|e| format!("cannot start the audit writer: {e}"))?;
        Ok(Recorder {
            tx,
            writer: thread.thread().clone(),
            thread: Mutex::new(Some(thread)),
            failure: shared.failure,
            fenced: shared.fenced,
            lost: shared.lost,
            backed_up: shared.backed_up,
            lease_until: shared.lease_until,
            queued: shared.queued,
            idle: shared.idle,
            footprint: shared.footprint,
        })
    }

    /// Whether a write was refused because another process took the run
    /// over: the run starts no call after it.
    pub fn fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
    }

    /// Whether the run must start no further call: it was taken over, or
    /// its store stayed unreachable past the retry budget ([`failure`]
    /// says which, and what was recorded).
    ///
    /// [`failure`]: Recorder::failure
    pub fn stopped(&self) -> bool {
        self.fenced() || self.lost.load(Ordering::SeqCst)
    }

    /// Waits, before a call starts, while the store is unreachable and the
    /// writer holds as many rows as it may: until it wrote them, or gave
    /// the store up ([`Recorder::stopped`] then holds).
    pub fn make_room(&self) -> Result<(), String> {
        if !self.backed_up.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.blocking(|ack| Msg::Renew(Some(ack)))
    }

    /// Makes sure the run's lease is still this process's before a call
    /// starts: past its renewal (the process was stopped, or the store
    /// unreachable), it is renewed first, and a run taken over meanwhile
    /// is refused ([`Recorder::fenced`] then holds).
    pub fn hold_lease(&self) -> Result<(), String> {
        let margin = super::lease::MARGIN.as_millis() as i64;
        if super::now_ms() + margin < self.lease_until.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.blocking(|ack| Msg::Renew(Some(ack)))
    }

    /// Why the record stopped taking writes, if it did.
    pub fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Writes an irreversible call's intent and syncs it; the call may run
    /// only when this returns `Ok`. Blocks the calling thread until then:
    /// a task of the run waits with [`Recorder::intent_awaited`] instead.
    pub fn intent(&self, row: CallRow) -> Result<(), String> {
        self.refuse_if_failed()?;
        self.blocking(|ack| Msg::Intent(Box::new(row), ack))
    }

    /// [`Recorder::intent`] for a task of the run: only the task waits for
    /// the sync, not the thread every task shares.
    pub async fn intent_awaited(&self, row: CallRow) -> Result<(), String> {
        self.refuse_if_failed()?;
        self.awaited(|ack| Msg::Intent(Box::new(row), ack)).await
    }

    /// The first failed write, which refuses every later intent.
    fn refuse_if_failed(&self) -> Result<(), String> {
        self.failure().map_or(Ok(()), Err)
    }

    /// Completes a call whose intent was written (queued, not waited for).
    pub fn outcome(&self, task: &str, seq: u64, outcome: Outcome) -> Result<(), String> {
        self.send(Msg::Outcome {
            task: task.to_string(),
            seq,
            outcome: Box::new(outcome),
        })
    }

    /// Records a whole call; with `wait`, returns once it is committed,
    /// blocking the calling thread until then (a task of the run waits
    /// with [`Recorder::call_awaited`] instead).
    pub fn call(&self, row: CallRow, outcome: Outcome, wait: bool) -> Result<(), String> {
        let (row, outcome) = (Box::new(row), Box::new(outcome));
        if !wait {
            return self.send(Msg::Done(row, outcome, None));
        }
        self.blocking(|ack| Msg::Done(row, outcome, Some(ack)))
    }

    /// [`Recorder::call`] for a task of the run: with `wait`, only the task
    /// waits for the commit, not the thread every task shares.
    pub async fn call_awaited(
        &self,
        row: CallRow,
        outcome: Outcome,
        wait: bool,
    ) -> Result<(), String> {
        let (row, outcome) = (Box::new(row), Box::new(outcome));
        if !wait {
            return self.send(Msg::Done(row, outcome, None));
        }
        self.awaited(|ack| Msg::Done(row, outcome, Some(ack))).await
    }

    /// Sends the message `msg` makes and blocks until it is committed.
    fn blocking(&self, msg: impl FnOnce(Waiter) -> Msg) -> Result<(), String> {
        let (ack, done) = sync_channel(1);
        self.send(msg(Waiter::Thread(ack)))?;
        done.recv().map_err(|_| gone())?
    }

    /// Sends the message `msg` makes and waits, as a task, until it is
    /// committed.
    async fn awaited(&self, msg: impl FnOnce(Waiter) -> Msg) -> Result<(), String> {
        let (ack, done) = oneshot::channel();
        self.send(msg(Waiter::Task(ack)))?;
        done.await.map_err(|_| gone())?
    }

    /// Records a clock reading the script saw.
    pub fn reading(&self, task: &str, seq: u64, kind: &'static str, value: f64) {
        let _ = self.send(Msg::Reading {
            task: task.to_string(),
            seq,
            kind,
            value,
        });
    }

    /// Records the `k`th module the script required (from 1, in load
    /// order): its name, the file it came from and the text that ran. The
    /// record keeps them when the run seals, the text by content, unless
    /// it holds a secret the run knows by then (the module is then not
    /// recorded, and a replay reads its file).
    pub fn module(&self, k: i64, name: &str, path: &str, text: &str) {
        let _ = self.send(Msg::Module {
            k,
            name: name.to_string(),
            path: path.to_string(),
            text: text.to_string(),
        });
    }

    /// Drains the queue, seals the run with its final `status` and stops the
    /// writer. Later calls to `end` do nothing.
    pub fn end(&self, status: &str, error: Option<&str>) -> Result<(), String> {
        let Some(thread) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Ok(());
        };
        // Rows lost to a failed write make the run's record incomplete, and
        // its seal says so.
        let (status, error) = match self.failure() {
            Some(why) => {
                let mut said = format!("the audit record is incomplete: {why}");
                if let Some(e) = error {
                    said = format!("{e}; {said}");
                }
                ("failed".to_string(), Some(said))
            }
            None => (status.to_string(), error.map(str::to_string)),
        };
        let (ack, done) = sync_channel(1);
        self.send(Msg::End { status, error, ack })?;
        let sealed = done.recv().map_err(|_| gone())?;
        let _ = thread.join();
        sealed
    }

    /// Queues `msg`; wakes the writer when someone will wait on it, when
    /// it sleeps with nothing queued, or when the queue fills up (otherwise
    /// it is gathering rows and finds this one within `QUIET`, and a call
    /// pays no wake-up).
    fn send(&self, msg: Msg) -> Result<(), String> {
        let awaited = msg.awaited();
        // Counted before the writer's look at `idle` can miss it: with
        // `Writer::sleep`'s order, one of the two sees the other.
        let before = self.queued.fetch_add(1, Ordering::SeqCst);
        if before + 1 >= NUDGE {
            // Woken before a send that may block on a full queue.
            self.writer.unpark();
        }
        self.tx.send(msg).map_err(|_| gone())?;
        if awaited || self.idle.load(Ordering::SeqCst) {
            self.writer.unpark();
        }
        Ok(())
    }

    /// Messages queued and not yet taken by the writer: at most [`QUEUE`]
    /// (and the ones blocked on sending), whatever the run's length.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn backlog(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }

    /// What the writer held after its last batch.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn footprint(&self) -> Footprint {
        *self.footprint.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A recorder dropped without [`Recorder::end`] (a run that panicked)
/// lets its writer go at once: it sleeps until a message comes, and none
/// will.
impl Drop for Recorder {
    fn drop(&mut self) {
        let (closed, _) = sync_channel(0);
        drop(std::mem::replace(&mut self.tx, closed));
        self.writer.unpark();
    }
}

fn strings(list: &[String]) -> String {
    serde_json::to_string(list).expect("strings serialize")
}

fn gone() -> String {
    "the audit writer stopped".to_string()
}

/// Writes the run's row, joined to the chain of runs after the newest one
/// (under the write lock, so concurrent runs each get their own place), and
/// returns its head.
fn insert_run(db: &dyn Db, run: &RunStart, lease_until: i64) -> db::Result<String> {
    db.transaction(Begin::Store, || {
        // A run's id is given when a fleet gives it: one already there is
        // another run, never written over or joined.
        let taken: Option<i64> =
            db.value("SELECT count(*) FROM runs WHERE id = ?1", vals![&run.id])?;
        if taken.unwrap_or(0) > 0 {
            return Err(db::Error::new(
                db::ErrorKind::Conflict,
                format!(
                    "run {} is in the record already: an id names one run; give another --run-id \
(or none), or continue that run with `sluice resume {}`",
                    run.id, run.id
                ),
            ));
        }
        let link = store::next_link(db)?;
        insert_linked(db, run, &link, lease_until)
    })
}

fn insert_linked(
    db: &dyn Db,
    run: &RunStart,
    link: &store::NextLink,
    lease_until: i64,
) -> db::Result<String> {
    let policies = serde_json::to_string(&run.policies).expect("policies serialize");
    let (mut cutter, _) = Redaction::input(&Value::Null, &crate::credentials::loaded());
    let args = cutter.cut(
        "args",
        &serde_json::to_string(&run.args).expect("args serialize"),
    );
    let version = env!("CARGO_PKG_VERSION");
    let ceiling = strings(&run.ceiling);
    let pid = std::process::id();
    let pid_start = store::process_start(pid).unwrap_or(0);
    let head = chain::head(&RunHead {
        id: &run.id,
        script: &run.script,
        script_sha256: run.script_sha256.as_deref(),
        policies: &policies,
        args: &args,
        workspace: &run.workspace,
        started_ms: run.started_ms,
        version,
        random_seed: run.random_seed,
        resumed_from: run.resumed_from.as_deref(),
        ceiling: &ceiling,
        pid: i64::from(pid),
        pid_start: pid_start as i64,
        link: Some(RunLink {
            n: link.n,
            prior: link.prior.as_deref(),
            prior_rows: link.prior_rows,
        }),
    });
    db.execute(
        "INSERT INTO runs (id, script, script_sha256, policies, args, workspace, started_ms, status, version,
           random_seed, resumed_from, pid, pid_start, head, ceiling, n, prior, prior_rows, owner, attempt,
           lease_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running', ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
           ?18, ?20, ?19)",
        vals![
            &run.id,
            &run.script,
            &run.script_sha256,
            policies,
            args,
            &run.workspace,
            run.started_ms,
            version,
            run.random_seed,
            &run.resumed_from,
            pid,
            pid_start as i64,
            &head,
            ceiling,
            link.n,
            &link.prior,
            link.prior_rows,
            super::lease::me(),
            lease_until,
            run.attempt.max(1),
        ],
    )?;
    Ok(head)
}

/// The writer thread's state. Nothing in it grows with the run's calls:
/// the seal is hashed as rows settle, the readings it covers are read back
/// from the database when it is written, and the caches are bounded.
struct Writer {
    /// The store, of either backend: the writer's alone.
    db: Box<dyn Db + Send>,
    /// The store as messages name it.
    name: String,
    /// How long an unreachable store is waited for.
    retry: Duration,
    /// Whether the store is a server's (PostgreSQL), which can become
    /// unreachable or crash while this process lives: only then does the
    /// writer note what each statement leaves ([`Effect`]), to look for it.
    remote: bool,
    run: String,
    /// The run's lease this writer holds (see [`super::lease`]).
    attempt: i64,
    /// When the lease was last renewed, as committed.
    renewed: Instant,
    /// A renewal in the open batch: when, and until when it holds.
    renewing: Option<(Instant, i64)>,
    /// Until when the lease holds, as far as this process knows (ms since
    /// the epoch): shared with the recorder, which starts no call past it.
    lease_until: Arc<AtomicI64>,
    /// Set when a batch was refused because the run was taken over.
    fenced: Arc<AtomicBool>,
    /// Set when the store was given up on (shared with the recorder).
    lost: Arc<AtomicBool>,
    /// Set while an outage's queue is full (shared with the recorder).
    backed_up: Arc<AtomicBool>,
    /// The seal so far: the head, then each row in chain order as far as
    /// every row's outcome is settled.
    seal: Seal,
    /// Rows linked and not yet in `seal`, as (hash, outcome hash), in chain
    /// order: the first of them still awaits its outcome (an irreversible
    /// call running), so the ones after it wait with it.
    unfolded: VecDeque<(String, Option<String>)>,
    /// The hash the next row links to.
    last: String,
    /// Rows in the chain so far.
    n: i64,
    /// Calls whose intent is written, by (task, seq): their place, hash,
    /// the redaction their outcome must get too, and their flow.
    intents: HashMap<(String, u64), (i64, String, Redaction, String)>,
    cap: usize,
    failure: Arc<Mutex<Option<String>>>,
    /// Secrets the run's inputs brought so far.
    secrets: Vec<String>,
    /// Outputs kept by content lately (their SHA-256), to skip re-storing;
    /// at most [`STORED_KEYS`].
    stored: HashSet<String>,
    /// Keys this batch added to `stored`: a rolled back batch forgets them.
    added: Vec<String>,
    /// The last outputs settled, newest first, with their stored form.
    recent: VecDeque<Recent>,
    /// Messages queued for the writer (shared with the recorder).
    queued: Arc<AtomicUsize>,
    /// Set while it sleeps with nothing queued (shared with the recorder).
    idle: Arc<AtomicBool>,
    /// What it holds, published after each batch.
    footprint: Arc<Mutex<Footprint>>,
    /// Whether commits are durable now ([`Db::durable`]), as last set.
    synced: bool,
    /// The last rows' lists of keys kept by content, as (task, seq, keys):
    /// a later row names the one it continues instead of repeating it.
    lists: Vec<(String, i64, Vec<String>)>,
    /// The script's and its modules' texts, kept until the run seals.
    sources: Pending,
    /// The statements linked and not yet committed, in order: the open
    /// batch's, and every batch's since the store became unreachable.
    log: Vec<Write>,
    /// The text `log` holds.
    log_bytes: usize,
    /// Whether `log` holds what a commit must sync (an intent, the end).
    sync_wanted: bool,
    /// Who waits for `log`'s commit.
    acks: Vec<Waiter>,
    /// The run's end, taken and not yet committed.
    ending: Option<Ending>,
    /// Where the chain stood before `log`: what the store holds.
    base: Option<Mark>,
    /// The store is unreachable: since when, and when it is tried next.
    outage: Option<Outage>,
    /// A commit of `log`'s start whose answer was lost.
    unknown: Option<Unknown>,
    /// Commits a crash of the store's server may lose, kept until one
    /// syncs.
    unsynced: Unsynced,
    /// The store's connections as of the last commit: another number
    /// means the connection was made again since.
    connection: u64,
}

/// The texts the run ran, held until it seals: a secret the run learns
/// later (a token its script sets as a command's environment) may be in
/// them, and only then is every secret it brought known. A run that is
/// killed before it seals keeps none.
#[derive(Default)]
struct Pending {
    /// The script's SHA-256 and text.
    script: Option<(String, String)>,
    /// Each module: its place, name, file and text.
    modules: Vec<(i64, String, String, String)>,
}

/// The run's end, as the writer holds it until it is committed.
struct Ending {
    status: String,
    error: Option<String>,
    ack: Ack,
    /// Its seal is computed and in the log.
    sealed: bool,
}

/// A commit whose answer the connection's loss took: the log's first
/// `upto` statements landed whole or not at all; reading `witness` back
/// tells which.
struct Unknown {
    upto: usize,
    /// The waiters for them: the first `acks` of the writer's.
    acks: usize,
    witness: Option<Effect>,
    /// Where the chain stands if they landed.
    after: Mark,
}

/// What the writer does after a step.
enum Next {
    /// Goes on.
    Go,
    /// The run ended: the writer stops.
    Ended,
    /// The store was given up on: every later message is refused.
    Lost,
}

/// Lists of keys a writer remembers to continue from.
const RECENT_LISTS: usize = 8;

/// How the run's end waits for its seal: on the thread that ends it.
type Ack = SyncSender<Result<(), String>>;

/// Where the writer's chain stood before a batch: small, whatever the
/// run's length (the rows not yet sealed are those after a running call).
struct Mark {
    n: i64,
    last: String,
    seal: Seal,
    unfolded: VecDeque<(String, Option<String>)>,
    intents: HashSet<(String, u64)>,
}

/// An output settled lately, to recognise when the next is equal: its
/// stored form holds for an equal output redacted against the same
/// secrets (nothing of it was cut, so those secrets are all it depends on).
struct Recent {
    output: Value,
    secrets: Vec<String>,
    /// The stored text when inline, else `None` with `output_ref`.
    inline: Option<String>,
    /// The SHA-256 of the stored text.
    digest: String,
}

/// A row's intent columns as stored, and its place in the chain.
struct Linked {
    /// The input, or with its shared field taken out (`split`).
    input: String,
    /// The `parts` column and the items to keep by content.
    split: Option<Split>,
    capabilities: String,
    decisions: String,
    route: Option<String>,
    /// The caller from outside the script, redacted.
    client: Option<String>,
    prev: String,
    hash: String,
    redaction: Redaction,
}

/// An output as a row stores it: its text inline, or `None` for one kept
/// by content under `digest`, the SHA-256 of its text.
struct Stored {
    inline: Option<String>,
    digest: String,
}

/// A row's outcome columns as stored.
struct Settled {
    status: &'static str,
    output: Option<String>,
    output_ref: Option<String>,
    error: Option<String>,
    capped: bool,
    late: String,
    redacted: String,
    hash: String,
}

/// What the recorder and its writer share.
struct Shared {
    failure: Arc<Mutex<Option<String>>>,
    fenced: Arc<AtomicBool>,
    lost: Arc<AtomicBool>,
    backed_up: Arc<AtomicBool>,
    lease_until: Arc<AtomicI64>,
    queued: Arc<AtomicUsize>,
    idle: Arc<AtomicBool>,
    footprint: Arc<Mutex<Footprint>>,
}

impl Writer {
    /// The writer of run `id`, whose row (hashed `head`, its lease held
    /// until `until`) is in `store`, waiting `retry` for a store it lost.
    fn new(
        store: Box<dyn Db + Send>,
        name: &str,
        (id, head): (String, String),
        retry: Duration,
        until: i64,
    ) -> Writer {
        let remote = store.backend() == db::Backend::Postgres;
        let connection = store.connections();
        Writer {
            db: store,
            name: name.to_string(),
            retry,
            remote,
            run: id,
            attempt: 1,
            renewed: Instant::now(),
            renewing: None,
            lease_until: Arc::new(AtomicI64::new(until)),
            fenced: Arc::default(),
            lost: Arc::default(),
            backed_up: Arc::default(),
            seal: Seal::new(&head),
            last: head,
            n: 0,
            intents: HashMap::new(),
            cap: DEFAULT_OUTPUT_CAP,
            failure: Arc::default(),
            secrets: Vec::new(),
            stored: HashSet::new(),
            added: Vec::new(),
            lists: Vec::new(),
            unfolded: VecDeque::new(),
            recent: VecDeque::new(),
            queued: Arc::default(),
            idle: Arc::default(),
            footprint: Arc::default(),
            synced: false,
            sources: Pending::default(),
            log: Vec::new(),
            log_bytes: 0,
            sync_wanted: false,
            acks: Vec::new(),
            ending: None,
            base: None,
            outage: None,
            unknown: None,
            unsynced: Unsynced::new(remote),
            connection,
        }
    }

    /// The handles the recorder shares with this writer.
    fn shared(&self) -> Shared {
        Shared {
            failure: self.failure.clone(),
            fenced: self.fenced.clone(),
            lost: self.lost.clone(),
            backed_up: self.backed_up.clone(),
            lease_until: self.lease_until.clone(),
            queued: self.queued.clone(),
            idle: self.idle.clone(),
            footprint: self.footprint.clone(),
        }
    }

    /// Publishes what the writer holds now (see [`Recorder::footprint`]).
    fn publish(&self) {
        *self.footprint.lock().unwrap_or_else(|e| e.into_inner()) = Footprint {
            unfolded: self.unfolded.len(),
            intents: self.intents.len(),
            stored: self.stored.len(),
            recent: self.recent.len(),
            secrets: self.secrets.len(),
        };
    }

    /// Whether a batch was refused because the run was taken over.
    fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
    }

    /// Begins a batch: a transaction whose first act is to check that the
    /// run's lease is still this writer's (so a connection made again after
    /// an outage writes nothing for a run taken over meanwhile). Rows of
    /// this run only, which writers of other runs need not wait for.
    fn begin(&mut self) -> db::Result<()> {
        self.db.begin(Begin::Rows)?;
        super::lease::check(&*self.db, &self.run, self.attempt)?;
        if self.renewed.elapsed() >= super::lease::RENEW {
            let until = super::lease::until_from_now();
            super::lease::renew(&*self.db, &self.run, self.attempt, until)?;
            self.renewing = Some((Instant::now(), until));
        }
        Ok(())
    }

    /// Where the chain stands, to go back to if a batch is rolled back.
    fn mark(&self) -> Mark {
        Mark {
            n: self.n,
            last: self.last.clone(),
            seal: self.seal.clone(),
            unfolded: self.unfolded.clone(),
            intents: self.intents.keys().cloned().collect(),
        }
    }

    fn restore(&mut self, m: Mark) {
        // A row rolled back may be among them: no later row may name it.
        self.lists.clear();
        self.recent.clear();
        self.n = m.n;
        self.last = m.last;
        self.seal = m.seal;
        self.unfolded = m.unfolded;
        for key in self.added.drain(..) {
            self.stored.remove(&key);
        }
        self.intents.retain(|k, _| m.intents.contains(k));
    }

    /// Sets row `n`'s outcome hash and folds into the seal every row from
    /// the first unfolded one whose outcome is settled.
    fn settled(&mut self, n: i64, outcome: String) {
        let folded = self.n - self.unfolded.len() as i64;
        if let Some(row) = self.unfolded.get_mut((n - folded - 1) as usize) {
            row.1 = Some(outcome);
        }
        while self.unfolded.front().is_some_and(|r| r.1.is_some()) {
            let (hash, outcome) = self.unfolded.pop_front().expect("a front row");
            self.seal.row(&hash, outcome.as_deref());
        }
    }

    /// A row's intent columns, linked into the chain.
    fn link(&mut self, row: &CallRow) -> Linked {
        // The whole input is redacted first, so no item kept by content
        // holds a secret.
        let (mut redaction, input) = Redaction::input(&row.input, &self.known());
        self.secrets.extend(redaction.learned.iter().cloned());
        let mut split = row.shared.as_deref().and_then(|f| {
            let mut split = parts::split(&input, f)?;
            self.continue_list(f, row, &mut split);
            Some(split)
        });
        // The split's input is not needed again: taken, not copied.
        let input = split
            .as_mut()
            .map_or(input, |s| std::mem::take(&mut s.input));
        // Capabilities and decisions repeat the input (a command line, a
        // path): the same secrets are cut from them.
        let capabilities = redaction.cut("capabilities", &strings(&row.capabilities));
        let decisions = redaction.cut(
            "decisions",
            &serde_json::to_string(&row.decisions).expect("decisions serialize"),
        );
        let route = row.route.as_ref().map(Value::to_string);
        // The client names itself: what it says is cut like any text the
        // run did not write.
        let client = row.client.as_deref().map(|c| redaction.cut("client", c));
        self.n += 1;
        let hash = chain::call(
            &self.last,
            &CallIntent {
                task: &row.task,
                seq: row.seq as i64,
                n: self.n,
                flow: &row.flow,
                tier: row.tier,
                input: &input,
                capabilities: &capabilities,
                decisions: &decisions,
                route: route.as_deref(),
                replayed_from: row.replayed_from.as_deref(),
                started_ms: row.started_ms,
                parts: split.as_ref().map(|s| s.column.as_str()),
                client: client.as_deref(),
            },
        );
        let prev = std::mem::replace(&mut self.last, hash.clone());
        self.unfolded.push_back((hash.clone(), None));
        Linked {
            input,
            split,
            capabilities,
            decisions,
            route,
            client,
            prev,
            hash,
            redaction,
        }
    }

    /// Writes `split`'s keys as the continuation of the recent list they
    /// share the longest start with, if any, and remembers them in turn.
    fn continue_list(&mut self, field: &str, row: &CallRow, split: &mut Split) {
        let best = self
            .lists
            .iter()
            .map(|(task, seq, keys)| (parts::common_prefix(keys, &split.keys), task, *seq))
            .max_by_key(|(shared, _, _)| *shared);
        if let Some((keep, task, seq)) = best.filter(|(keep, _, _)| *keep > 0) {
            let task = task.clone();
            split.after(field, &task, seq, keep);
        }
        if self.lists.len() == RECENT_LISTS {
            self.lists.remove(0);
        }
        self.lists
            .push((row.task.clone(), row.seq as i64, split.keys.clone()));
    }

    /// What every call's record must not hold: the named credentials
    /// loaded and the secrets earlier inputs brought.
    fn known(&self) -> Vec<String> {
        let mut known = crate::credentials::loaded();
        known.extend(self.secrets.iter().cloned());
        known
    }

    /// Links an irreversible call's intent: its outcome stays NULL until
    /// [`Writer::complete`].
    fn intent(&mut self, row: &CallRow) -> db::Result<()> {
        let mut l = self.link(row);
        let redacted = strings(&l.redaction.redacted);
        self.keep_items(&mut l);
        let hash = l.hash.clone();
        let redaction = self.insert(row, l, redacted, None);
        self.intents.insert(
            (row.task.clone(), row.seq),
            (self.n, hash, redaction, row.flow.clone()),
        );
        Ok(())
    }

    /// Links a whole call, intent and outcome, in one row.
    fn done(&mut self, row: &CallRow, outcome: &Outcome) {
        let mut l = self.link(row);
        let mut o = self.settle(&l.hash, &mut l.redaction, outcome);
        self.keep_items(&mut l);
        let (redacted, hash) = (std::mem::take(&mut o.redacted), o.hash.clone());
        self.insert(row, l, redacted, Some((o, outcome.duration_us)));
        self.settled(self.n, hash);
    }

    /// Queues a statement for the batch's transaction.
    fn push(&mut self, w: Write) {
        self.log_bytes += w.bytes();
        self.log.push(w);
    }

    /// One INSERT of a linked row, its outcome columns NULL without
    /// `done` (an intent). The row's text moves into the statement's
    /// values, uncopied; what the intent's outcome still needs, its
    /// redaction, comes back.
    fn insert(
        &mut self,
        row: &CallRow,
        l: Linked,
        redacted: String,
        done: Option<(Settled, i64)>,
    ) -> Redaction {
        let effect = self.remote.then(|| Effect::Row {
            task: row.task.clone(),
            seq: row.seq,
            n: self.n,
            flow: row.flow.clone(),
            hash: l.hash.clone(),
            intent: done.is_none(),
        });
        let (o, duration_us) = done.map_or((None, None), |(o, d)| (Some(o), Some(d)));
        let status = o.as_ref().map(|o| o.status);
        let capped = o.as_ref().is_some_and(|o| o.capped);
        let (output, output_ref, error, late, outcome_hash) = match o {
            Some(o) => (o.output, o.output_ref, o.error, Some(o.late), Some(o.hash)),
            None => (None, None, None, None, None),
        };
        let params = params![
            &self.run,
            &row.task,
            row.seq,
            self.n,
            &row.flow,
            row.tier,
            l.input,
            l.capabilities,
            l.decisions,
            l.route,
            redacted,
            &row.replayed_from,
            row.started_ms,
            l.prev,
            l.hash,
            status,
            output,
            output_ref,
            error,
            capped,
            duration_us,
            late,
            outcome_hash,
            l.split.map(|s| s.column),
            l.client,
            self.attempt,
        ];
        self.push(Write::new(
            "INSERT INTO calls (run, task, seq, n, flow, tier, input, capabilities, decisions, route, redacted,
               replayed_from, started_ms, prev, hash, status, output, output_ref, error, capped, duration_us,
               late_decisions, outcome_hash, parts, client, attempt)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
               ?20, ?21, ?22, ?23, ?24, ?25, ?26)",
            params,
            effect,
        ));
        l.redaction
    }

    /// Links the outcome of a call whose intent was linked.
    fn complete(&mut self, task: String, seq: u64, outcome: &Outcome) -> db::Result<()> {
        let Some((n, hash, mut redaction, flow)) = self.intents.remove(&(task.clone(), seq)) else {
            return Err(db::Error::other(format!(
                "no intent was written for call {task}/{seq}"
            )));
        };
        let o = self.settle(&hash, &mut redaction, outcome);
        let outcome_hash = o.hash.clone();
        let effect = self.remote.then(|| Effect::Outcome {
            task: task.clone(),
            seq,
            n,
            flow,
            hash: o.hash.clone(),
        });
        let params = params![
            &self.run,
            task,
            seq,
            o.status,
            o.output,
            o.output_ref,
            o.error,
            o.capped,
            outcome.duration_us,
            o.late,
            o.redacted,
            o.hash,
        ];
        self.push(Write::new(
            "UPDATE calls SET status = ?4, output = ?5, output_ref = ?6, error = ?7, capped = ?8,
               duration_us = ?9, late_decisions = ?10, redacted = ?11, outcome_hash = ?12
             WHERE run = ?1 AND task = ?2 AND seq = ?3",
            params,
            effect,
        ));
        self.settled(n, outcome_hash);
        Ok(())
    }

    /// A call's outcome columns: redacted, capped, hashed onto its intent.
    fn settle(&mut self, hash: &str, redaction: &mut Redaction, outcome: &Outcome) -> Settled {
        let (status, output, error, capped) = match &outcome.result {
            Ok(out) => {
                let (stored, capped) = self.output(redaction, out);
                ("ok", Some(stored), None, capped)
            }
            Err(err) => ("error", None, Some(redaction.text("error", err)), false),
        };
        let late = redaction.cut(
            "late decisions",
            &serde_json::to_string(&outcome.late_decisions).expect("decisions serialize"),
        );
        let redacted = strings(&redaction.redacted);
        let digest = output.as_ref().map(|o| o.digest.clone());
        let hash = chain::outcome_of(
            hash,
            &CallOutcome {
                status,
                output: None,
                error: error.as_deref(),
                capped,
                duration_us: outcome.duration_us,
                late_decisions: &late,
                redacted: &redacted,
            },
            digest.as_deref(),
        );
        let (output, output_ref) = match output {
            Some(Stored {
                inline: None,
                digest,
            }) => (None, Some(digest)),
            Some(Stored { inline, .. }) => (inline, None),
            None => (None, None),
        };
        Settled {
            status,
            output,
            output_ref,
            error,
            capped,
            late,
            redacted,
            hash,
        }
    }

    /// An output's stored form: inline, or kept once by content (its
    /// statement queued here); and whether it was capped. An output equal to a recent one,
    /// redacted against the same secrets, takes that one's form without
    /// being serialized or hashed again: a file read again costs a compare.
    fn output(&mut self, redaction: &mut Redaction, out: &Value) -> (Stored, bool) {
        let secrets = redaction.secrets();
        if let Some(r) = self
            .recent
            .iter()
            .find(|r| r.secrets == secrets && r.output == *out)
        {
            let stored = Stored {
                inline: r.inline.clone(),
                digest: r.digest.clone(),
            };
            return (stored, false);
        }
        let cut = redaction.redacted.len();
        let (text, capped) = cap_output(redaction.text("output", out), self.cap);
        let digest = crate::digest::sha256_hex(text.as_bytes());
        // Only an output stored as it came is its own stored form again.
        let plain = redaction.redacted.len() == cut && !capped && text.len() <= RECENT_MAX;
        let inline = if text.len() > INLINE {
            self.keep(digest.clone(), text);
            None
        } else {
            Some(text)
        };
        let stored = Stored { inline, digest };
        if plain {
            self.remember(out, redaction.secrets().to_vec(), &stored);
        }
        (stored, capped)
    }

    /// Remembers `out` as the newest recent output.
    fn remember(&mut self, out: &Value, secrets: Vec<String>, stored: &Stored) {
        if self.recent.len() == RECENT_OUTPUTS {
            self.recent.pop_back();
        }
        self.recent.push_front(Recent {
            output: out.clone(),
            secrets,
            inline: stored.inline.clone(),
            digest: stored.digest.clone(),
        });
    }

    /// Stores the items of a row's shared field, each once by its content
    /// (taken out of `l`, which needs them no more).
    fn keep_items(&mut self, l: &mut Linked) {
        let items = l.split.as_mut().map(|s| std::mem::take(&mut s.items));
        for (sha, text) in items.into_iter().flatten() {
            if !self.stored.contains(&sha) {
                self.keep(sha, text);
            }
        }
    }

    /// Stores a large output once by its content (`sha`).
    fn keep(&mut self, sha: String, text: String) {
        if !self.stored.contains(&sha) {
            if self.stored.len() >= STORED_KEYS {
                // Forgetting costs a redundant INSERT, not a row.
                self.stored.clear();
            }
            self.stored.insert(sha.clone());
            self.added.push(sha.clone());
            // Idempotent: written again after an outage, it adds nothing.
            self.push(Write::new(
                "INSERT INTO outputs (sha256, body) VALUES (?1, ?2) ON CONFLICT (sha256) DO NOTHING",
                params![sha, text],
                None,
            ));
        }
    }

    fn reading(&mut self, task: &str, seq: u64, kind: &'static str, value: f64) {
        let effect = self.remote.then(|| Effect::Reading {
            task: task.to_string(),
            seq,
        });
        self.push(Write::new(
            "INSERT INTO readings (run, task, seq, kind, value) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![&self.run, task, seq, kind, value],
            effect,
        ));
    }

    /// Holds the `k`th module the script required until the run seals.
    fn module(&mut self, k: i64, name: String, path: String, text: String) {
        self.sources.modules.push((k, name, path, text));
    }

    /// The statements that keep the texts the run ran, as it seals: each
    /// text by content, each module's row; a text holding a secret the run
    /// knows is not kept (nor its module's row). Idempotent, so written
    /// again after an outage they add nothing.
    fn texts(&mut self) -> Vec<Write> {
        let secrets = self.known();
        let keep = |text: &str| super::sources::keepable(text, &secrets);
        let mut writes = Vec::new();
        let body = |sha: &str, text: String| {
            Write::new(
                "INSERT INTO outputs (sha256, body) VALUES (?1, ?2) ON CONFLICT (sha256) DO NOTHING",
                params![sha, text],
                None,
            )
        };
        let Pending { script, modules } = std::mem::take(&mut self.sources);
        if let Some((sha, text)) = script.filter(|(_, t)| keep(t)) {
            writes.push(body(&sha, text));
        }
        for (k, name, path, text) in modules.into_iter().filter(|m| keep(&m.3)) {
            let sha = crate::digest::sha256_hex(text.as_bytes());
            writes.push(body(&sha, text));
            writes.push(Write::new(
                "INSERT INTO modules (run, k, name, path, sha256) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (run, k) DO NOTHING",
                params![&self.run, k, name, path, sha],
                None,
            ));
        }
        writes
    }

    /// The statement that seals the run ending with `status`, computed
    /// inside the open transaction (its readings are read back from it).
    fn seal(&mut self, status: &str, error: Option<&str>) -> db::Result<Write> {
        let ended_ms = super::now_ms();
        // A script's error may quote what it saw: the run's secrets go.
        let (mut cutter, _) = Redaction::input(&Value::Null, &self.known());
        let error = error.map(|e| cutter.cut("error", e));
        let error = error.as_deref();
        // The rows still unfolded are those after a call whose outcome
        // never came: they are sealed as they stand.
        let mut seal = self.seal.clone();
        for (hash, outcome) in &self.unfolded {
            seal.row(hash, outcome.as_deref());
        }
        // Readings in (task, seq) order, as `sluice audit verify` reads
        // them: from this transaction, which holds every one written.
        super::rows::each_reading(&*self.db, &self.run, |r| {
            seal.reading(&Reading {
                task: &r.task,
                seq: r.seq,
                kind: &r.kind,
                value: r.value,
            })
        })?;
        // Then the modules, in load order, as verify reads them.
        for m in super::sources::modules(&*self.db, &self.run)? {
            seal.module(&m.sealed());
        }
        let seal = seal.finish(&RunEnd {
            status,
            error,
            ended_ms,
        });
        Ok(Write::new(
            "UPDATE runs SET status = ?2, error = ?3, ended_ms = ?4, seal = ?5 WHERE id = ?1",
            params![&self.run, status, error, ended_ms, &seal],
            Some(Effect::Seal(seal)),
        ))
    }
}

#[path = "recorder_flush.rs"]
mod flush;

#[cfg(test)]
#[path = "recorder_tests.rs"]
mod tests;
