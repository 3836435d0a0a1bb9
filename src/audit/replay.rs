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
//!   irreversible call whose outcome is unknown stops the resume unless it
//!   was asked to retry such calls.

use super::redact::Redaction;
use crate::error::{ErrorCode, FlowError};
use rusqlite::{params, Connection};
use serde_json::Value;
use std::cell::Cell;
use std::collections::HashMap;

/// One recorded call, as stored.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub n: i64,
    pub flow: String,
    pub tier: String,
    /// JSON as stored, like the input.
    pub capabilities: String,
    pub decisions: String,
    pub route: Option<String>,
    /// The input's JSON as stored (redacted).
    pub input: String,
    /// `ok`, `error`, or `None`: the outcome is unknown.
    pub status: Option<String>,
    /// The output's JSON when stored inline.
    pub output: Option<String>,
    /// The SHA-256 of an output kept by content.
    pub output_ref: Option<String>,
    pub error: Option<String>,
    pub capped: bool,
}

/// The run a replay or resume starts from.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub id: String,
    pub script: String,
    pub script_sha256: Option<String>,
    pub args: Vec<String>,
    pub workspace: String,
    pub status: String,
    pub random_seed: i64,
    /// The run's ceiling patterns.
    pub ceiling: Vec<String>,
}

/// A recorded run, loaded whole.
#[derive(Debug)]
pub struct Record {
    /// The recorded run's own row: its id, script, arguments, workspace,
    /// how it ended, its random seed and its ceiling.
    pub run: RunRecord,
    /// By task, then sequence within it.
    calls: HashMap<String, HashMap<u64, Recorded>>,
    readings: HashMap<(String, u64), f64>,
    /// Outputs kept by content, parsed once each.
    outputs: HashMap<String, Value>,
}

/// The run `id` continued, if it is a resume.
fn resumed_from(conn: &Connection, id: &str) -> Result<Option<String>, String> {
    conn.query_row("SELECT resumed_from FROM runs WHERE id = ?1", [id], |r| {
        r.get(0)
    })
    .map_err(|e| format!("cannot read run {id} from the audit database: {e}"))
}

impl Record {
    /// Run `id`'s record, with what the runs it resumed recorded beyond it.
    pub fn load(conn: &Connection, id: &str) -> Result<Record, String> {
        let mut record = Record::load_one(conn, id)?;
        record.inherit(conn)?;
        Ok(record)
    }

    /// A resumed run's record holds only what it reached; the runs it
    /// continued hold the rest. Rows this run lacks come from them, so a
    /// resume of a resume repeats nothing.
    fn inherit(&mut self, conn: &Connection) -> Result<(), String> {
        let mut from = resumed_from(conn, &self.run.id)?;
        let mut depth = 0;
        while let Some(id) = from {
            depth += 1;
            if depth > 1000 {
                return Err(format!(
                    "run {} resumes a chain over 1000 runs long",
                    self.run.id
                ));
            }
            let older = Record::load_one(conn, &id)?;
            for (task, rows) in older.calls {
                let mine = self.calls.entry(task).or_default();
                for (seq, rec) in rows {
                    mine.entry(seq).or_insert(rec);
                }
            }
            for (key, value) in older.readings {
                self.readings.entry(key).or_insert(value);
            }
            self.outputs.extend(older.outputs);
            from = resumed_from(conn, &id)?;
        }
        Ok(())
    }

    fn load_one(conn: &Connection, id: &str) -> Result<Record, String> {
        let fail =
            |e: rusqlite::Error| format!("cannot read run {id} from the audit database: {e}");
        let run = conn
            .query_row(
                "SELECT id, script, script_sha256, args, workspace, status, random_seed, ceiling FROM runs WHERE id = ?1",
                [id],
                |r| {
                    let args: String = r.get(3)?;
                    Ok(RunRecord {
                        id: r.get(0)?,
                        script: r.get(1)?,
                        script_sha256: r.get(2)?,
                        args: serde_json::from_str(&args).unwrap_or_default(),
                        workspace: r.get(4)?,
                        status: r.get(5)?,
                        random_seed: r.get(6)?,
                        ceiling: serde_json::from_str(&r.get::<_, String>(7)?).unwrap_or_default(),
                    })
                },
            )
            .map_err(fail)?;
        let mut calls = HashMap::new();
        let mut stmt = conn
            .prepare(
                "SELECT task, seq, n, flow, input, status, output, error, capped, tier, capabilities, decisions, route,
                   output_ref
                 FROM calls WHERE run = ?1",
            )
            .map_err(fail)?;
        let mut rows = stmt.query(params![id]).map_err(fail)?;
        while let Some(r) = rows.next().map_err(fail)? {
            let key: (String, u64) = (
                r.get(0).map_err(fail)?,
                r.get::<_, i64>(1).map_err(fail)? as u64,
            );
            let rec = Recorded {
                n: r.get(2).map_err(fail)?,
                flow: r.get(3).map_err(fail)?,
                input: r.get(4).map_err(fail)?,
                status: r.get(5).map_err(fail)?,
                output: r.get(6).map_err(fail)?,
                error: r.get(7).map_err(fail)?,
                capped: r.get(8).map_err(fail)?,
                tier: r.get(9).map_err(fail)?,
                capabilities: r.get(10).map_err(fail)?,
                decisions: r.get(11).map_err(fail)?,
                route: r.get(12).map_err(fail)?,
                output_ref: r.get(13).map_err(fail)?,
            };
            calls
                .entry(key.0)
                .or_insert_with(HashMap::new)
                .insert(key.1, rec);
        }
        let mut readings = HashMap::new();
        let mut stmt = conn
            .prepare("SELECT task, seq, value FROM readings WHERE run = ?1")
            .map_err(fail)?;
        let mut rows = stmt.query(params![id]).map_err(fail)?;
        while let Some(r) = rows.next().map_err(fail)? {
            let task: String = r.get(0).map_err(fail)?;
            let seq: i64 = r.get(1).map_err(fail)?;
            readings.insert((task, seq as u64), r.get(2).map_err(fail)?);
        }
        let mut outputs = HashMap::new();
        let mut stmt = conn
            .prepare(
                "SELECT sha256, body FROM outputs
                 WHERE sha256 IN (SELECT output_ref FROM calls WHERE run = ?1)",
            )
            .map_err(fail)?;
        let mut rows = stmt.query(params![id]).map_err(fail)?;
        while let Some(r) = rows.next().map_err(fail)? {
            let sha: String = r.get(0).map_err(fail)?;
            let body: String = r.get(1).map_err(fail)?;
            outputs.insert(sha, serde_json::from_str(&body).unwrap_or(Value::Null));
        }
        Ok(Record {
            run,
            calls,
            readings,
            outputs,
        })
    }

    /// The highest background job id the recorded run handed out.
    pub fn last_job_id(&self) -> u64 {
        let job_id = |v: &Value| v.get("jobId").and_then(Value::as_u64);
        self.calls
            .values()
            .flat_map(|rows| rows.values())
            .filter(|rec| rec.flow == "bash" && rec.status.as_deref() == Some("ok"))
            .filter_map(|rec| match (&rec.output, &rec.output_ref) {
                (Some(text), _) => serde_json::from_str::<Value>(text)
                    .ok()
                    .as_ref()
                    .and_then(job_id),
                (None, Some(key)) => self.outputs.get(key).and_then(job_id),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// How many calls the record holds.
    pub fn len(&self) -> usize {
        self.calls.values().map(HashMap::len).sum()
    }

    /// Whether the record holds no calls.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
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
        /// (the run stopped after recording it, before it finished), going
        /// live there, instead of stopping the resume.
        retry_unknown: bool,
    },
}

/// What the record says about one call.
#[derive(Debug)]
pub enum Answer {
    /// The recorded result, and the row as recorded (a resume copies it).
    Recorded(Result<Value, FlowError>, Box<Recorded>),
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
    /// Set once a resume goes live: every later call runs for real.
    live: Cell<bool>,
    /// Calls answered from the record.
    pub answered: Cell<u64>,
    /// Whether the script went on past the last recorded call.
    pub past_end: Cell<bool>,
    /// Secrets the inputs brought so far: the recorder cut them from later
    /// calls, so matching must too.
    secrets: std::cell::RefCell<Vec<String>>,
    /// The recorded call of unknown outcome a resume stopped at, for the new
    /// run's record to keep (so resuming that run stops there too).
    unknown: std::cell::RefCell<Option<Recorded>>,
}

impl Replay {
    pub fn new(record: Record, mode: Mode) -> Replay {
        Replay {
            record,
            mode,
            live: Cell::new(false),
            answered: Cell::new(0),
            past_end: Cell::new(false),
            secrets: Default::default(),
            unknown: Default::default(),
        }
    }

    /// Whether the run has gone live (a resume past its record).
    pub fn is_live(&self) -> bool {
        self.live.get()
    }

    /// The recorded answer to call `seq` of `task`.
    pub fn answer(&self, task: &str, seq: u64, flow: &str, input: &Value) -> Answer {
        if self.live.get() {
            return Answer::Live;
        }
        let Some(rec) = self.record.calls.get(task).and_then(|t| t.get(&seq)) else {
            return match self.mode {
                Mode::Resume { .. } => self.go_live(),
                Mode::Replay => Answer::Halt(self.ran_past(task, seq, flow, input)),
            };
        };
        let mut known = crate::credentials::loaded();
        known.extend(self.secrets.borrow().iter().cloned());
        let (redaction, now) = Redaction::input(input, &known);
        self.secrets.borrow_mut().extend(redaction.learned);
        if rec.flow != flow || rec.input != now {
            return Answer::Halt(diverged(task, seq, rec, flow, &now));
        }
        match (&rec.status, self.mode) {
            (
                None,
                Mode::Resume {
                    retry_unknown: true,
                },
            ) => self.go_live(),
            (None, mode @ Mode::Resume { .. }) => {
                *self.unknown.borrow_mut() = Some(rec.clone());
                Answer::Halt(unknown(task, seq, rec, mode))
            }
            (None, mode) => Answer::Halt(unknown(task, seq, rec, mode)),
            // A refusal is judged again, under the policy and approvals of now.
            (Some(_), Mode::Resume { .. }) if refused(rec) => self.go_live(),
            (Some(_), _) if rec.capped => Answer::Halt(capped(task, seq, rec)),
            (Some(status), _) => {
                self.answered.set(self.answered.get() + 1);
                Answer::Recorded(self.record.result(status, rec), Box::new(rec.clone()))
            }
        }
    }

    /// The unknown-outcome call a resume stopped at, once.
    pub fn take_unknown(&self) -> Option<Recorded> {
        self.unknown.borrow_mut().take()
    }

    /// The recorded value of a clock reading, while the record answers.
    pub fn reading(&self, task: &str, seq: u64) -> Option<f64> {
        if self.live.get() {
            return None;
        }
        self.record.readings.get(&(task.to_string(), seq)).copied()
    }

    fn go_live(&self) -> Answer {
        self.live.set(true);
        Answer::Live
    }

    fn ran_past(&self, task: &str, seq: u64, flow: &str, input: &Value) -> FlowError {
        self.past_end.set(true);
        FlowError::new(
            ErrorCode::ReplayDiverged,
            format!(
                "replay diverged: the script makes call {seq} of task {task} ({flow} {}), \
                 which the recorded run {} never made (it recorded {})",
                clip(&input.to_string()),
                self.record.run.id,
                calls(self.record.len())
            ),
        )
        .with("task", task)
        .with("seq", seq)
        .with("flow", flow)
    }
}

impl Record {
    /// What a recorded call returned: its output, or its error rebuilt.
    fn result(&self, status: &str, rec: &Recorded) -> Result<Value, FlowError> {
        if status == "ok" {
            return Ok(match (&rec.output, &rec.output_ref) {
                (Some(text), _) => serde_json::from_str(text).unwrap_or(Value::Null),
                (None, Some(sha)) => self.outputs.get(sha).cloned().unwrap_or(Value::Null),
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

/// Whether a recorded call was refused by the policy or for want of an
/// approval.
fn refused(rec: &Recorded) -> bool {
    let Some(err) = rec.error.as_deref() else {
        return false;
    };
    err.contains(r#""code":"permission_denied""#) || err.contains(r#""code":"permission_required""#)
}

/// The divergence message: both calls side by side, then the fields that
/// differ.
fn diverged(task: &str, seq: u64, rec: &Recorded, flow: &str, input: &str) -> FlowError {
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

/// `field: recorded X, now Y` for each top-level field that differs.
fn field_diff(was: &Value, now: &Value) -> Vec<String> {
    let (Some(a), Some(b)) = (was.as_object(), now.as_object()) else {
        return Vec::new();
    };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            let show =
                |v: Option<&Value>| v.map_or("(absent)".to_string(), |v| clip(&v.to_string()));
            format!("{k}: recorded {}, now {}", show(a.get(k)), show(b.get(k)))
        })
        .collect()
}

fn unknown(task: &str, seq: u64, rec: &Recorded, mode: Mode) -> FlowError {
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

fn capped(task: &str, seq: u64, rec: &Recorded) -> FlowError {
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
    if n == 1 {
        "1 call".into()
    } else {
        format!("{n} calls")
    }
}

fn clip(text: &str) -> String {
    const MAX: usize = 200;
    if text.chars().count() <= MAX {
        return text.to_string();
    }
    let cut: String = text.chars().take(MAX).collect();
    format!("{cut}… ({} bytes)", text.len())
}
