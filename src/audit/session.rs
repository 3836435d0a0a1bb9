//! What one run's calls share of the audit: the recorder, the replay, the
//! sequence numbers per task, and the halt that stops a replay for good.

use super::recorder::{CallRow, Decision, Outcome, Recorder};
use super::replay::{Answer, Replay};
use super::rows::StoredCall;
use crate::error::FlowError;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// The audit side of a run. With neither a recorder nor a replay, every
/// method is a counter bump or a no-op.
#[derive(Debug, Default)]
pub struct Session {
    /// Shared, so the run's closer can seal the record from another thread
    /// (see `runtime::Closer`).
    pub recorder: Option<std::sync::Arc<Recorder>>,
    pub replay: Option<Replay>,
    /// Calls made so far, per task.
    calls: RefCell<HashMap<String, u64>>,
    /// Clock readings made so far, per task.
    readings: RefCell<HashMap<String, u64>>,
    /// Why the run was stopped (a replay that diverged); every later call
    /// fails with it.
    halted: RefCell<Option<FlowError>>,
    /// The audit store's paths (its `.sluice` folder, or its files), which
    /// no flow may write.
    pub protected: Vec<std::path::PathBuf>,
}

/// The decisions a call collects: those made before it runs (authorize),
/// and those made while it runs (a redirect's host).
#[derive(Debug, Default)]
pub struct Decisions {
    pub before: RefCell<Vec<Decision>>,
    pub during: RefCell<Vec<Decision>>,
    pub running: Cell<bool>,
}

impl Decisions {
    pub fn push(&self, d: Decision) {
        if self.running.get() {
            self.during.borrow_mut().push(d);
        } else {
            self.before.borrow_mut().push(d);
        }
    }
}

impl Session {
    pub fn new(recorder: Option<Recorder>, replay: Option<Replay>) -> Session {
        Session {
            recorder: recorder.map(std::sync::Arc::new),
            replay,
            ..Session::default()
        }
    }

    /// The sequence number of `task`'s next call (1 for its first).
    pub fn next_call(&self, task: &str) -> u64 {
        bump(&self.calls, task)
    }

    /// Forgets the counters of `task`, which has ended and makes no more
    /// calls, and of the calls its flows made through the door
    /// (`TASK.cSEQ`, which end with them): a served run's every request is
    /// a task, and a server lives for days. Tasks it started are kept:
    /// they may still run. Task ids are never given twice, so no later
    /// task starts its count again under a forgotten name.
    pub fn forget_task(&self, task: &str) {
        let inner = format!("{task}.c");
        for counters in [&self.calls, &self.readings] {
            counters
                .borrow_mut()
                .retain(|t, _| t != task && !t.starts_with(&inner));
        }
    }

    /// How many tasks' counters the session holds.
    #[cfg(test)]
    pub fn counted(&self) -> usize {
        self.calls.borrow().len() + self.readings.borrow().len()
    }

    /// The run's stop once another process took it over (its record
    /// refused a write) or its store stayed unreachable past the retry
    /// budget: every later call fails with it, none starts. Before a call
    /// starts, the lease must hold and the writer have room for its row:
    /// while the store is unreachable, either may wait for it.
    fn stopped(&self) -> Option<FlowError> {
        let recorder = self.recorder.as_ref()?;
        // A refusal to renew or to make room other than a stop (a store
        // that failed otherwise) is the writer's failure, which the run's
        // end reports.
        let _ = recorder.hold_lease();
        let _ = recorder.make_room();
        if !recorder.stopped() {
            return None;
        }
        let why = recorder.failure().unwrap_or_default();
        // The record's store is what refused: as an intent the store cannot
        // take, the call did not run.
        Some(self.halt(FlowError::new(
            crate::error::ErrorCode::ProviderUnavailable,
            format!("{why}; the call did not run"),
        )))
    }

    pub fn halted(&self) -> Option<FlowError> {
        self.halted.borrow().clone()
    }

    /// Stops the run with `e`; returns it.
    pub fn halt(&self, e: FlowError) -> FlowError {
        self.halted.borrow_mut().get_or_insert(e).clone()
    }

    /// What the record answers for this call, if the run replays one. A
    /// resume that stops at a call of unknown outcome writes that call's
    /// intent into the new run, and one that stops at a call a signal cut
    /// short writes that call as it was, so resuming the new run stops
    /// there too.
    pub fn answer(&self, task: &str, seq: u64, flow: &str, input: &Value) -> Answer {
        let Some(replay) = &self.replay else {
            return Answer::Live;
        };
        let answer = replay.answer(task, seq, flow, input);
        if let (Some((rec, result)), Some(recorder)) = (replay.take_held(), &self.recorder) {
            let row = CallRow::copied(task, seq, input, &rec, &replay.record.run.id);
            let _ = match result {
                None => recorder.intent(row),
                Some(result) => recorder.call(row, Outcome::at_once(result), false),
            };
        }
        answer
    }

    /// Copies a call a resume answered from the record into the new run's
    /// record, so the new run is whole on its own.
    pub fn copy(
        &self,
        task: &str,
        seq: u64,
        input: &Value,
        rec: &StoredCall,
        result: &Result<Value, FlowError>,
    ) {
        let (Some(recorder), Some(replay)) = (&self.recorder, &self.replay) else {
            return;
        };
        // The input as the script gave it now (it matched the record): the
        // writer redacts it alike and learns its secrets for the live calls
        // that follow.
        let row = CallRow::copied(task, seq, input, rec, &replay.record.run.id);
        let _ = recorder.call(row, Outcome::at_once(result.clone()), false);
        for (inner, result) in replay.record.inner_calls(task, seq) {
            let input: Value = serde_json::from_str(&inner.input).unwrap_or(Value::Null);
            let row = CallRow::copied(
                &inner.task,
                inner.seq as u64,
                &input,
                &inner,
                &replay.record.run.id,
            );
            let _ = recorder.call(row, Outcome::at_once(result), false);
        }
    }

    /// A clock (or seed) reading the script makes: the recorded value while
    /// a replay answers, else `live()`, recorded.
    pub fn reading(&self, task: &str, kind: &'static str, live: impl FnOnce() -> f64) -> f64 {
        let seq = bump(&self.readings, task);
        // A resumed run records the readings it was answered too, so it can
        // itself be replayed or resumed.
        let value = match self.replay.as_ref().and_then(|r| r.reading(task, seq)) {
            Some(v) => v,
            None => live(),
        };
        if let Some(recorder) = &self.recorder {
            recorder.reading(task, seq, kind, value);
        }
        value
    }
}

fn bump(counters: &RefCell<HashMap<String, u64>>, task: &str) -> u64 {
    let mut map = counters.borrow_mut();
    if let Some(n) = map.get_mut(task) {
        *n += 1;
        return *n;
    }
    map.insert(task.to_string(), 1);
    1
}

/// How a step of a task (a flow call, a job operation) begins: answered
/// from the record, or run live as the task's step `seq`.
#[derive(Debug)]
pub enum Begin {
    /// The record's answer (or why the run stopped).
    Answered(Result<Value, FlowError>),
    /// Run it; it is the task's step number `seq`.
    Live(u64),
}

impl Session {
    /// The record/replay prologue every step of a task passes: a job's
    /// output and state are what the script saw, so a job operation is
    /// part of the task's sequence like a flow call, and a replay answers
    /// both from the record.
    pub fn begin(&self, task: &str, name: &str, input: &Value) -> Begin {
        if let Some(e) = self.halted().or_else(|| self.stopped()) {
            return Begin::Answered(Err(e));
        }
        let seq = self.next_call(task);
        match self.answer(task, seq, name, input) {
            Answer::Recorded(result, rec) => {
                self.copy(task, seq, input, &rec, &result);
                Begin::Answered(super::replay::as_returned(result))
            }
            Answer::Halt(e) => Begin::Answered(Err(self.halt(e))),
            Answer::Live => Begin::Live(seq),
        }
    }

    /// Records job operation `seq` of `task` and what it returned.
    pub fn note(
        &self,
        task: &str,
        seq: u64,
        op: &str,
        input: Value,
        output: &Value,
        (decisions, client): (Vec<Decision>, Option<String>),
    ) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        let row = CallRow {
            client,
            ..CallRow::job(task, seq, op, input, decisions)
        };
        let _ = recorder.call(row, Outcome::at_once(Ok(output.clone())), false);
    }
}
