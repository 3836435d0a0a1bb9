//! The workflow of a fleet run, as Temporal runs it: no I/O, only the
//! decisions. It runs the run's activity ([`super::activity`]) until the
//! run ends; Temporal retries the activity on another worker when one dies
//! or stops heartbeating, and the next attempt resumes the run from the
//! shared record. A resume that meets an irreversible call whose outcome is
//! unknown ends the activity; the workflow then waits (holding no worker)
//! for the operator's word, a `resolve` signal, and runs the activity again
//! with it. Asks the run puts while it runs are signalled here by its
//! activity, answered here by `sluice answer`, and read back by the
//! activity through the `state` query.

use super::activity::{Attempt, FleetActivities, Outcome};
use super::bundle::Bundle;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityOptions, SyncWorkflowContext, WorkflowContext, WorkflowContextView, WorkflowResult,
};

/// What a submit starts a run's workflow with.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Submitted {
    pub bundle: Bundle,
    /// How long a worker may go silent before its run is taken elsewhere.
    pub heartbeat_timeout_ms: u64,
}

/// An irreversible call whose outcome is unknown, which a run waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unknown {
    /// The run of the record that holds it (the newest of the chain).
    pub run: String,
    /// Its number in that run (`sluice audit show RUN`'s #N).
    pub call: i64,
    /// Its flow and input, as the record keeps them (redacted).
    pub flow: String,
    pub input: String,
}

/// The operator's word on an [`Unknown`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Word {
    /// It happened: the run goes on without running it again.
    Ran,
    /// It did not: the run runs it (once).
    DidNotRun,
    /// The run ends here.
    Abandon,
}

impl Word {
    /// The word as `sluice resolve` takes it.
    pub fn parse(s: &str) -> Option<Word> {
        match s {
            "ran" => Some(Word::Ran),
            "did-not-run" => Some(Word::DidNotRun),
            "abandon" => Some(Word::Abandon),
            _ => None,
        }
    }
}

/// A `resolve` signal: the word on call `call`, and who gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    pub call: i64,
    pub word: Word,
    pub by: String,
}

/// A question the run put that no terminal answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// Its id, unique in the run (`sluice answer RUN ASK`).
    pub id: String,
    pub capability: String,
    pub flow: String,
    pub reason: String,
    pub input: String,
    /// When it was put, ms since the epoch (the asking process's clock).
    pub asked_ms: i64,
    /// When it stops waiting (then the call is `permission_required`).
    pub until_ms: i64,
}

/// An `answer` signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// The [`Question::id`] answered.
    pub ask: String,
    pub allow: bool,
    /// Yes for the rest of the run, not this once.
    pub for_run: bool,
    pub by: String,
}

/// What `sluice status` reads: the `state` query's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// `running`, `waiting` (for the operator's word on `unknown`) or `ended`.
    pub phase: String,
    pub unknown: Option<Unknown>,
    /// The operator's words so far.
    pub resolutions: Vec<Resolution>,
    /// Questions put and not answered.
    pub questions: Vec<Question>,
    /// Every answer given (an attempt picks up its own).
    pub replies: Vec<Reply>,
    /// Attempts made by the activities before the current one.
    pub attempts_before: u32,
    /// Where the resolutions given while the run waits start: a word
    /// given before (on an earlier wait) never settles this one.
    pub waits_from: usize,
}

/// A run on the fleet.
#[workflow]
pub struct SluiceRun {
    submitted: Submitted,
    state: State,
}

#[workflow_methods]
impl SluiceRun {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, submitted: Submitted) -> Self {
        let state = State {
            phase: "running".into(),
            ..State::default()
        };
        SluiceRun { submitted, state }
    }

    /// Runs the run's activity until the run ends, waiting for the
    /// operator's word whenever a resume meets an unknown outcome.
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<Outcome> {
        let submitted = ctx.state(|s| s.submitted.clone());
        let options =
            ActivityOptions::with_start_to_close_timeout(Duration::from_secs(30 * 24 * 3600))
                .heartbeat_timeout(Duration::from_millis(submitted.heartbeat_timeout_ms))
                .build();
        let mut word = None;
        loop {
            let attempt = Attempt {
                bundle: submitted.bundle.clone(),
                heartbeat_timeout_ms: submitted.heartbeat_timeout_ms,
                word,
                attempts_before: ctx.state(|s| s.state.attempts_before),
            };
            let outcome = ctx
                .execute_activity(FleetActivities::run_attempt, attempt, options.clone())
                .await?;
            ctx.state_mut(|s| s.state.attempts_before += outcome.attempts);
            let Some(unknown) = outcome.unknown.clone() else {
                ctx.state_mut(|s| s.state.phase = "ended".into());
                return Ok(outcome);
            };
            let call = unknown.call;
            ctx.state_mut(|s| {
                s.state.phase = "waiting".into();
                s.state.unknown = Some(unknown);
                s.state.waits_from = s.state.resolutions.len();
            });
            ctx.wait_condition(|s| s.word_on(call).is_some()).await?;
            let given = ctx.state(|s| s.word_on(call)).expect("the condition held");
            ctx.state_mut(|s| {
                s.state.phase = "running".into();
                s.state.unknown = None;
            });
            if given == Word::Abandon {
                ctx.state_mut(|s| s.state.phase = "ended".into());
                return Ok(Outcome {
                    status: "abandoned".into(),
                    ..outcome
                });
            }
            word = Some(given);
        }
    }

    /// The operator's word on the call the run waits on. A word on
    /// another call (stale, mistyped) is kept but changes nothing.
    #[signal]
    pub fn resolve(&mut self, _ctx: &mut SyncWorkflowContext<Self>, given: Resolution) {
        self.state.resolutions.push(given);
    }

    /// A question the run's activity put.
    #[signal]
    pub fn asked(&mut self, _ctx: &mut SyncWorkflowContext<Self>, question: Question) {
        if !self.state.questions.iter().any(|q| q.id == question.id) {
            self.state.questions.push(question);
        }
    }

    /// The question `ask` is settled (answered, or it timed out): no
    /// longer pending.
    #[signal]
    pub fn settled(&mut self, _ctx: &mut SyncWorkflowContext<Self>, ask: String) {
        self.state.questions.retain(|q| q.id != ask);
    }

    /// An operator's answer to a pending question; the first answer
    /// counts. An answer to a question not (yet) put is dropped: a yes
    /// sent ahead must not approve the next ask that takes that id.
    #[signal]
    pub fn answer(&mut self, _ctx: &mut SyncWorkflowContext<Self>, reply: Reply) {
        if self.state.questions.iter().any(|q| q.id == reply.ask) {
            self.state.questions.retain(|q| q.id != reply.ask);
            self.state.replies.push(reply);
        }
    }

    /// The run's state on the engine.
    #[query]
    pub fn state(&self, _ctx: &WorkflowContextView) -> State {
        self.state.clone()
    }
}

impl SluiceRun {
    /// The first word given on call `call` while the run waits on it.
    fn word_on(&self, call: i64) -> Option<Word> {
        let waiting = self.state.unknown.as_ref()?;
        (waiting.call == call).then_some(())?;
        self.state.resolutions[self.state.waits_from..]
            .iter()
            .find(|r| r.call == call)
            .map(|r| r.word)
    }
}
