//! The one door: every flow call, from Lua, from Rust, from replay and
//! later the MCP server, passes through [`Core::call`], in the order
//! ARCHITECTURE.md draws. Nothing reaches a file, a process or the network
//! another way: a flow runs only with the [`Authorized`] proof step 4 makes,
//! and every call is recorded when the run has an audit record. Job
//! operations (`job:read()`, `:wait()`, `:kill()`, a status look) pass the
//! same record/replay step ([`Core::job`], [`Core::job_wait`]).

use crate::audit::recorder::{CallRow, Outcome, Recorder};
use crate::audit::session::{Begin, Decisions, Session};
use crate::call::{Action, Capability, Envelope, Tier};
use crate::container::{Containers, Route};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::exec::job::Job;
use crate::flows::{Context, FlowSpec, Registry, TextRelay};
use crate::kernel::denied;
use crate::kernel::gate::{Authority, Authorized, CallGate, Caller, Gate};
use crate::kernel::policy::Placement;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

mod schedule;
use schedule::Schedule;
pub use schedule::{default_max_procs, DEFAULT_MAX_REQUESTS};

/// The task a call comes from when the caller is not a Lua coroutine (Rust,
/// the main chunk).
pub const MAIN_TASK: &str = "0";

/// What every call of one run shares: the flows, the gate, the context and
/// the record. Its fields are private: a call goes through [`Core::call`].
pub struct Core {
    registry: Registry,
    gate: Rc<Gate>,
    ctx: Context,
    /// Calls made so far in the run; numbers each call.
    calls: Cell<u64>,
    /// The record and the replay of the run.
    audit: Session,
    /// Which calls may run side by side.
    schedule: Rc<Schedule>,
    /// Set when the script has ended: the tasks still running are
    /// cancelled; or when a caller cancels the task it started.
    cancel: Cancel,
    /// The tasks callers outside the script started, by task id.
    served: RefCell<HashMap<String, ServedTask>>,
    /// The issue order of each client session with a request in flight
    /// ([`Served::session`]), kept while its calls hold it.
    orders: RefCell<HashMap<String, std::rc::Weak<Schedule>>>,
    /// The background jobs a served task started for an owner
    /// ([`Served::owner`]), by job id.
    job_owners: RefCell<HashMap<u64, String>>,
    /// The core itself, once shared ([`Core::shared`]): a flow's inner
    /// calls ([`crate::flows::Inner`]) come back to it.
    me: std::cell::OnceCell<std::rc::Weak<Core>>,
}

/// The end of a script, and the tasks their callers cancelled, as the
/// calls of those tasks see them.
#[derive(Default)]
struct Cancel {
    /// The script has ended: every task but the main one is cancelled.
    set: Cell<bool>,
    /// Tasks their callers cancelled (a served request the client
    /// cancelled), each with the tasks it started.
    tasks: RefCell<HashSet<String>>,
    now: tokio::sync::Notify,
}

impl Cancel {
    /// Whether `task`'s calls are cancelled, and by whom.
    fn of(&self, task: &str) -> Option<Stop> {
        if self.by_caller(task) {
            return Some(Stop::Caller);
        }
        (task != MAIN_TASK && self.set.get()).then_some(Stop::ScriptEnd)
    }

    /// Whether `task`, or the task that started it, was cancelled by its
    /// caller.
    fn by_caller(&self, task: &str) -> bool {
        let tasks = self.tasks.borrow();
        !tasks.is_empty() && lineage(task).any(|t| tasks.contains(t))
    }

    /// Resolves once `task` is cancelled.
    async fn wait(&self, task: &str) {
        loop {
            let notified = self.now.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.of(task).is_some() {
                return;
            }
            notified.await;
        }
    }
}

/// Who cancelled a task's calls.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The script ended while the task ran.
    ScriptEnd,
    /// Its caller cancelled it ([`Core::cancel_task`]).
    Caller,
}

/// `task` and the tasks that started it, nearest first: `0.3.1`, `0.3`,
/// `0`.
pub fn lineage(task: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(task);
    std::iter::from_fn(move || {
        let t = next?;
        next = t.rfind('.').map(|i| &t[..i]);
        Some(t)
    })
}

/// What a caller outside the script (an MCP client) brought to a task it
/// started, for the task's calls and those of the tasks it starts.
#[derive(Clone, Default)]
pub struct Served {
    /// Who made the calls, as the record names it (`client 1.2`).
    pub client: Option<String>,
    /// Where the calls' streamed text and commands' output go as they
    /// arrive (progress the caller sees).
    pub relay: Option<TextRelay>,
    /// Who the background jobs its calls start belong to (an MCP client's
    /// session): only tasks of the same owner act on them. `None`: the
    /// run's, any task's.
    pub owner: Option<String>,
    /// The client session it comes from: the session's requests share an
    /// issue order ([`Schedule::order`]). `None`: the request has one of
    /// its own.
    pub session: Option<String>,
}

/// A served task: what its caller brought, and the issue order its calls
/// keep ([`Schedule::order`]): its client session's, which the tasks it
/// starts share.
#[derive(Clone)]
struct ServedTask {
    served: Served,
    order: Rc<Schedule>,
}

/// A job operation, as the record names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOp {
    /// A status look (`job.status`, `job.exitCode`).
    State,
    /// `job:read()`.
    Read,
    /// `job:wait()`.
    Wait,
    /// `job:kill()`: an effect, authorized like any other.
    Kill,
}

impl JobOp {
    fn name(self) -> &'static str {
        match self {
            JobOp::State => "job.state",
            JobOp::Read => "job.read",
            JobOp::Wait => "job.wait",
            JobOp::Kill => "job.kill",
        }
    }
}

/// How a job operation goes: answered from the record, or run on the live
/// job and then finished with `Core::job_done`.
enum JobStep {
    /// What the record says it returned.
    Answered(Value),
    /// Run it on `job`; it is step `seq` of its task.
    Live {
        /// The step's number in its task.
        seq: u64,
        /// The live job.
        job: Arc<Job>,
        /// The decisions that authorized it (a kill's).
        decisions: Rc<Decisions>,
    },
}

impl Core {
    /// The core of a run: its flows, its gate, its context and its record.
    pub fn new(registry: Registry, gate: Gate, ctx: Context, audit: Session) -> Core {
        Core {
            registry,
            gate: Rc::new(gate),
            ctx,
            calls: Cell::new(0),
            audit,
            schedule: Rc::new(Schedule::new(default_max_procs(), DEFAULT_MAX_REQUESTS)),
            cancel: Cancel::default(),
            served: RefCell::default(),
            orders: RefCell::default(),
            job_owners: RefCell::default(),
            me: std::cell::OnceCell::new(),
        }
    }

    /// The core, shared by the run: the flows it runs can then make inner
    /// calls through its door.
    pub fn shared(self) -> Rc<Core> {
        let core = Rc::new(self);
        let _ = core.me.set(Rc::downgrade(&core));
        core
    }

    /// The core with at most `max_procs` commands and `max_requests`
    /// requests running at once.
    pub fn with_limits(mut self, max_procs: usize, max_requests: usize) -> Core {
        self.schedule = Rc::new(Schedule::new(max_procs, max_requests));
        self
    }

    /// Cancels the calls of every task but the main one: the script has
    /// ended. A call under way stops (its command killed) and is recorded
    /// as cancelled; [`Core::cancelled`] says so to the tasks.
    pub fn cancel_tasks(&self, on: bool) {
        self.cancel.set.set(on);
        if on {
            self.cancel.now.notify_waiters();
        }
    }

    /// Cancels `task`'s calls, and those of the tasks it starts: its
    /// caller gave up on it. A command under way is stopped as a timeout
    /// stops it (TERM, then KILL after the grace) and recorded as
    /// cancelled; a call waiting for its turn or an answer does not start.
    pub fn cancel_task(&self, task: &str) {
        self.cancel.tasks.borrow_mut().insert(task.to_string());
        self.cancel.now.notify_waiters();
    }

    /// Records that a caller outside the script started `task` (an MCP
    /// request), with what it brought ([`Served`]), until
    /// [`Core::release_task`].
    pub fn serve_task(&self, task: &str, served: Served) {
        let order = match &served.session {
            Some(session) => self.order_of(session),
            None => Rc::new(Schedule::order()),
        };
        self.served
            .borrow_mut()
            .insert(task.to_string(), ServedTask { served, order });
    }

    /// The issue order of client session `session`: the one its requests
    /// in flight hold, or a new one.
    fn order_of(&self, session: &str) -> Rc<Schedule> {
        let mut orders = self.orders.borrow_mut();
        orders.retain(|_, order| order.strong_count() > 0);
        if let Some(order) = orders.get(session).and_then(std::rc::Weak::upgrade) {
            return order;
        }
        let order = Rc::new(Schedule::order());
        orders.insert(session.to_string(), Rc::downgrade(&order));
        order
    }

    /// Whether any task carries a caller from outside the script.
    pub fn serves_tasks(&self) -> bool {
        !self.served.borrow().is_empty()
    }

    /// Gives task `child`, which task `parent` is starting, what the caller
    /// that started `parent` brought, so that its calls are the caller's
    /// after the request that started it has answered too; whether it had
    /// any ([`Core::release_task`] it once it ends, when so).
    pub fn adopt(&self, parent: &str, child: &str) -> bool {
        let Some(served) = self.served_task(parent) else {
            return false;
        };
        self.served.borrow_mut().insert(child.to_string(), served);
        true
    }

    /// Forgets a served task once it has ended, and its cancellation.
    pub fn release_task(&self, task: &str) {
        self.served.borrow_mut().remove(task);
        self.cancel.tasks.borrow_mut().remove(task);
        self.audit.forget_task(task);
    }

    /// What the caller that started `task` (or a task above it) brought.
    fn served(&self, task: &str) -> Option<Served> {
        self.served_task(task).map(|t| t.served)
    }

    /// The served task `task` is, or is below.
    fn served_task(&self, task: &str) -> Option<ServedTask> {
        let served = self.served.borrow();
        if served.is_empty() {
            return None;
        }
        lineage(task).find_map(|t| served.get(t).cloned())
    }

    /// A call's place in the issue order, taken before anything can wait:
    /// a script's call in the run's; a served request's in its client
    /// session's, and in the run's only once it is authorized
    /// ([`Schedule::enter_served`]).
    fn enter(&self, task: &str, envelope: &Envelope) -> schedule::Turn {
        match self.served_task(task) {
            Some(request) => self.schedule.enter_served(&request.order, envelope),
            None => self.schedule.enter(envelope),
        }
    }

    /// Whether `task`'s calls are cancelled: the script has ended (for
    /// every task but the main one), or its caller cancelled it.
    pub fn cancelled(&self, task: &str) -> bool {
        self.cancel.of(task).is_some()
    }

    /// Resolves when `task` is cancelled.
    pub async fn until_cancelled(&self, task: &str) {
        self.cancel.wait(task).await
    }

    /// The run's kernel, for what its static rules answer alone.
    pub fn kernel(&self) -> &crate::kernel::Kernel {
        &self.gate.kernel
    }

    /// The flows of the run, for the names and specs they show.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// What the run's calls run against.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The run's record and replay.
    pub fn audit(&self) -> &Session {
        &self.audit
    }

    /// Calls flow `name` with a JSON input and returns its JSON output, as a
    /// call of the main task.
    pub async fn call(&self, name: &str, input: Value) -> FlowResult<Value> {
        self.call_in(MAIN_TASK, name, input).await
    }

    /// Calls flow `name` for `task` (a Lua coroutine's id): calls are keyed
    /// by task and sequence within it, so a replay finds them however
    /// concurrent tasks interleave.
    pub async fn call_in(&self, task: &str, name: &str, input: Value) -> FlowResult<Value> {
        self.call_watched(task, name, input, None).await
    }

    /// [`Core::call_in`], with a streamed reply's text handed to `relay` as
    /// it arrives (a script's `onText`).
    pub async fn call_watched(
        &self,
        task: &str,
        name: &str,
        input: Value,
        relay: Option<TextRelay>,
    ) -> FlowResult<Value> {
        self.call_as(task, name, input, (relay, false), owned).await
    }

    /// [`Core::call_watched`] for a caller that only reads the result (a
    /// script turning the output into a Lua table): `read` sees it first,
    /// and the record then keeps the output itself, not a copy of it.
    pub async fn call_reading<R>(
        &self,
        (task, name, input): (&str, &str, Value),
        relay: Option<TextRelay>,
        read: impl FnOnce(Cow<'_, FlowResult<Value>>) -> R,
    ) -> R {
        self.call_as(task, name, input, (relay, false), read).await
    }

    /// A call, `nested` when a running flow makes it ([`Core::inner_door`]);
    /// its result is what `read` makes of it.
    async fn call_as<R>(
        &self,
        task: &str,
        name: &str,
        input: Value,
        (relay, nested): (Option<TextRelay>, bool),
        read: impl FnOnce(Cow<'_, FlowResult<Value>>) -> R,
    ) -> R {
        // The record, the replay and the policy see the canonical name.
        let name = self.registry.get(name).map_or(name, |f| f.spec().name);
        let seq = match self.audit.begin(task, name, &input) {
            Begin::Answered(result) => return read(Cow::Owned(result)),
            Begin::Live(seq) => seq,
        };
        let served = self.served(task);
        let relay = relay.or_else(|| served.as_ref().and_then(|s| s.relay.clone()));
        // Only a served task's caller cancels it alone (a script's tasks
        // end with the script): the others need no way to stop a command.
        let (abort, stop) = served.as_ref().map(|_| crate::exec::abort_pair()).unzip();
        let running = Cell::new(false);
        let spec = self.registry.get(name).map(|f| f.spec());
        let owner = served.as_ref().and_then(|s| s.owner.clone());
        let client = served.and_then(|s| s.client);
        let recorded = self.audit.recorder.as_ref();
        let trail = recorded.map(|_| Trail::new(task, seq, name, spec, client));
        let input = Rc::new(input);
        let call = Call {
            task,
            seq,
            nested,
            name,
            input: input.clone(),
            trail: trail.as_ref(),
            relay,
            abort: stop,
            running: &running,
        };
        let result = self
            .unless_cancelled(task, self.live(call), (abort.as_ref(), &running))
            .await;
        if let (Some(owner), Some(true), Ok(out)) = (owner, spec.map(|s| s.starts_jobs), &result) {
            if let Some(id) = out.get("jobId").and_then(Value::as_u64) {
                self.job_owners.borrow_mut().insert(id, owner);
            }
        }
        // Like a call still waiting when a stop drops the run: no outcome,
        // so a resume runs it rather than taking it for one cut short.
        let started = !matches!(&result, Err(e) if e.details.contains_key(NOT_STARTED));
        let Some((recorder, trail)) = recorded.zip(trail).filter(|_| started) else {
            return read(Cow::Owned(self.stop_if_stopped(result)));
        };
        if result.is_ok() {
            // Read before it is recorded: a large output is never copied.
            // The caller still sees it only once the record holds it.
            let used = read(Cow::Borrowed(&result));
            trail.finish(recorder, input, result).await;
            return used;
        }
        trail.finish(recorder, input, result.clone()).await;
        read(Cow::Owned(self.stop_if_stopped(result)))
    }

    /// A call of `task`, cut short when the script ends while it waits or
    /// runs (dropping it kills its command at once), or when its caller
    /// cancels the task: then a command under way (`running`, with
    /// commands) is stopped as a timeout stops it, TERM and then KILL after
    /// the grace, and the call ends with what it printed.
    async fn unless_cancelled(
        &self,
        task: &str,
        call: impl std::future::Future<Output = FlowResult<Value>>,
        (abort, running): (Option<&crate::exec::AbortHandle>, &Cell<bool>),
    ) -> FlowResult<Value> {
        // Nothing cancels the main task: a served request is a task of its own.
        if task == MAIN_TASK {
            return call.await;
        }
        if let Some(stop) = self.cancel.of(task) {
            return Err(cancelled(task, stop));
        }
        tokio::pin!(call);
        tokio::select! {
            result = &mut call => return result,
            () = self.until_cancelled(task) => {}
        }
        let stop = self.cancel.of(task).unwrap_or(Stop::ScriptEnd);
        let Some(abort) = abort.filter(|_| stop == Stop::Caller && running.get()) else {
            return Err(cancelled(task, stop));
        };
        abort.abort();
        match tokio::time::timeout(STOP_BOUND, call).await {
            Ok(Err(e)) => Err(e.with("cancelled", task)),
            Ok(done) => done,
            Err(_) => Err(cancelled(task, stop)),
        }
    }

    /// A call a stop request cut short (a command sluice killed, a grep or
    /// glob that stopped; its error names the signal in `interrupted`),
    /// once recorded, halts the run: the script stops there, raising it,
    /// rather than going on with the error as a value.
    fn stop_if_stopped(&self, result: FlowResult<Value>) -> FlowResult<Value> {
        match result {
            Err(e) if e.details.contains_key("interrupted") => Err(self.audit.halt(e)),
            other => other,
        }
    }

    /// Steps 1-8 for a call that really runs.
    async fn live(&self, call: Call<'_>) -> FlowResult<Value> {
        let Call {
            task,
            seq,
            nested,
            name,
            input,
            trail,
            relay,
            abort,
            running,
        } = call;
        let flow = self
            .registry
            .get(name)
            .ok_or_else(|| unknown_flow(self, name))?;
        let n = self.calls.get() + 1;
        self.calls.set(n);
        let mut ctx = self.ctx.for_call(n);
        // 1-3. decode, validate, envelope.
        let call = flow.prepare(&ctx, (*input).clone())?;
        let tier = call.envelope.tier;
        let capabilities = call.envelope.capabilities();
        if let Some(t) = trail {
            t.planned(tier, &capabilities);
        }
        let gate = self.call_gate(
            (task, name),
            tier,
            input.clone(),
            call.envelope.cwd.as_deref(),
            trail.map(|t| t.decisions.clone()),
        );
        // 3½. Its place in the issue order ([`Core::enter`]); an inner call
        // runs in its parent's turn, which it would otherwise wait for.
        let mut turn = (!nested).then(|| self.enter(task, &call.envelope));
        // 4. authorize every capability the envelope needs.
        guard_record(&self.audit, &call.envelope)?;
        let door = authorize(&gate, &call.envelope, &capabilities).await?;
        // 4½. route: where a command runs; then a wider sandbox asked for
        // this once, before the call waits for its turn or a place.
        let place = route(&gate, flow.spec(), &call.envelope, &ctx.containers)?;
        ctx.gate = Some(gate);
        ctx.route = place;
        if let Some(wider) = &call.wider {
            ctx.ask_wider(wider).await?;
        }
        // 5. Its turn: the earlier calls it overlaps are done.
        wait_turn(turn.as_mut(), trail).await?;
        // 6. record intent: an irreversible call is on disk before it runs.
        if let Some(t) = trail {
            *t.route.borrow_mut() = recorded(&call.envelope, &ctx.route, &ctx.containers);
            if tier == Tier::Irreversible {
                t.intent(
                    self.audit.recorder.as_ref().expect("a trail records"),
                    &input,
                )
                .await?;
            }
            t.decisions.running.set(true);
        }
        // 7-8. execute and hand the outcome back (the caller records it).
        ctx.on_text = relay;
        ctx.abort = abort;
        ctx.inner = self.inner_door(task, seq);
        running.set(!call.envelope.commands.is_empty());
        let (result, wrote) = crate::flows::files::written::collect(call.execute(&ctx, door)).await;
        if let Some(t) = trail {
            *t.written.borrow_mut() = wrote;
        }
        drop(turn);
        result
    }

    /// How the call `seq` of `task` calls another flow while it runs: as
    /// task `TASK.cSEQ` (so a replay, which answers the outer call from
    /// the record, never expects its inner calls among the task's own, and
    /// cancelling the task cancels them), through every step of the door.
    fn inner_door(&self, task: &str, seq: u64) -> Option<crate::flows::Inner> {
        let core = self.me.get()?.upgrade()?;
        let task: Rc<str> = crate::call::inner_task(task, seq).into();
        Some(crate::flows::Inner(Rc::new(move |flow, input| {
            let (core, task) = (core.clone(), task.clone());
            Box::pin(async move { core.call_as(&task, flow, input, (None, true), owned).await })
        })))
    }

    /// The gate of one call of `flow` by `task`, whose commands run in
    /// `cwd` (the envelope's folder; `None` when it runs none).
    fn call_gate(
        &self,
        (task, flow): (&str, &str),
        tier: Tier,
        input: Rc<Value>,
        cwd: Option<&std::path::Path>,
        decisions: Option<Rc<Decisions>>,
    ) -> CallGate {
        let caller = Caller {
            flow,
            tier,
            input,
            run_id: &self.ctx.run_id,
            script: &self.ctx.script,
            task,
            cwd,
        };
        CallGate::new(self.gate.clone(), caller, decisions)
    }

    /// A job operation that answers at once (`job.state`, `job.read`,
    /// `job.kill`), as step of `task`: answered from the record in a replay,
    /// else done on the live job and recorded. An unknown job is
    /// `invalid_input`; a kill is authorized like any effect.
    pub fn job(&self, task: &str, op: JobOp, id: u64) -> FlowResult<Value> {
        let input = json!({"jobId": id});
        let (seq, job, decisions) = match self.job_step(task, op, &input, id)? {
            JobStep::Answered(v) => return Ok(v),
            JobStep::Live {
                seq,
                job,
                decisions,
            } => (seq, job, decisions),
        };
        let out = match op {
            JobOp::State => {
                let s = job.snapshot();
                json!({"status": s.status.as_str(), "exitCode": s.exit_code,
                       "signal": s.signal, "sandbox": s.sandbox})
            }
            // Cut like a flow's output: a job may print a secret a command
            // left in a file.
            JobOp::Read => {
                let mut read = serde_json::to_value(job.read()).expect("a job's output serializes");
                crate::credentials::cut_loaded_value(&mut read);
                read
            }
            JobOp::Kill => json!(job.kill()),
            JobOp::Wait => unreachable!("a wait goes through Core::job_wait"),
        };
        self.job_done(task, seq, op, input, &out, &decisions);
        Ok(out)
    }

    /// `job:wait()`: until the job ends, at most `timeout`; whether it has
    /// ended. A step of `task` like every job operation.
    pub async fn job_wait(
        &self,
        task: &str,
        id: u64,
        timeout: Option<std::time::Duration>,
    ) -> FlowResult<bool> {
        let ms = timeout.map(|t| t.as_secs_f64() * 1000.0);
        let input = json!({"jobId": id, "ms": ms});
        let (seq, job, decisions) = match self.job_step(task, JobOp::Wait, &input, id)? {
            JobStep::Answered(v) => return Ok(v.as_bool().unwrap_or(false)),
            JobStep::Live {
                seq,
                job,
                decisions,
            } => (seq, job, decisions),
        };
        let ended = job.wait(timeout).await;
        self.job_done(task, seq, JobOp::Wait, input, &json!(ended), &decisions);
        Ok(ended)
    }

    /// A job operation's first step, the one a flow call takes: answered
    /// from the record, or numbered in its task and, for a kill, authorized
    /// as an irreversible effect on the job's command line. An unknown job
    /// is `invalid_input`.
    fn job_step(&self, task: &str, op: JobOp, input: &Value, id: u64) -> FlowResult<JobStep> {
        let seq = match self.audit.begin(task, op.name(), input) {
            Begin::Answered(result) => return result.map(JobStep::Answered),
            Begin::Live(seq) => seq,
        };
        let job = self.ctx.exec.jobs.get(id).ok_or_else(|| {
            FlowError::invalid_input(
                "jobId",
                format!("there is no job {id} in this run (a job of an interrupted run ended with it; a resume cannot reach it)"),
            )
        })?;
        self.check_owner(task, id)?;
        let decisions = Rc::new(Decisions::default());
        if op == JobOp::Kill {
            let cap = Capability {
                action: Action::ProcSpawn,
                resource: job.command.clone(),
            };
            let input = Rc::new(input.clone());
            self.call_gate(
                (task, op.name()),
                Tier::Irreversible,
                input,
                None,
                Some(decisions.clone()),
            )
            .authorize(&cap)?;
        }
        Ok(JobStep::Live {
            seq,
            job,
            decisions,
        })
    }

    /// Refuses a job operation of `task` on job `id` that another owner's
    /// task started ([`Served::owner`]), saying no more than of a job that
    /// is not there.
    fn check_owner(&self, task: &str, id: u64) -> FlowResult<()> {
        let owners = self.job_owners.borrow();
        let Some(owner) = owners.get(&id) else {
            return Ok(());
        };
        if self.served(task).and_then(|s| s.owner).as_ref() == Some(owner) {
            return Ok(());
        }
        Err(FlowError::invalid_input(
            "jobId",
            format!("there is no job {id} of this client in this run (a client reaches the jobs it started; the operator shares every job between clients with sluice mcp --shared-run)"),
        ))
    }

    /// Records job operation `seq` of `task` and what it returned.
    fn job_done(
        &self,
        task: &str,
        seq: u64,
        op: JobOp,
        input: Value,
        output: &Value,
        decisions: &Decisions,
    ) {
        let client = self.served(task).and_then(|s| s.client);
        self.audit.note(
            task,
            seq,
            op.name(),
            input,
            output,
            (decisions.before.take(), client),
        );
    }
}

/// One live call as it goes through the steps: who makes it, what, and
/// how it is watched and stopped.
struct Call<'a> {
    task: &'a str,
    /// Its number in its task.
    seq: u64,
    /// Made by a running flow, inside that flow's turn.
    nested: bool,
    name: &'a str,
    input: Rc<Value>,
    trail: Option<&'a Trail>,
    relay: Option<TextRelay>,
    /// Stops its command when its caller cancels it (a served task's).
    abort: Option<crate::exec::AbortSignal>,
    /// Set once it runs a command that `abort` stops.
    running: &'a Cell<bool>,
}

/// What is recorded of one call as it passes the steps.
struct Trail {
    task: String,
    seq: u64,
    flow: String,
    tier: Cell<Tier>,
    capabilities: RefCell<Vec<String>>,
    decisions: Rc<Decisions>,
    route: RefCell<Option<Value>>,
    /// When it began to run (its turn came), for the record's times.
    started: Cell<(i64, Instant)>,
    /// Whether the intent was written (then the outcome completes it).
    intended: Cell<bool>,
    /// The input field the record keeps item by item ([`FlowSpec::stored_once`]).
    shared: Option<&'static str>,
    /// Who made the call, when a caller outside the script did.
    client: Option<String>,
    /// The files it wrote on the host, in order, with their new bytes'
    /// SHA-256 (`None`: removed): recorded with its outcome.
    written: RefCell<Vec<(String, Option<String>)>>,
}

impl Trail {
    fn new(
        task: &str,
        seq: u64,
        flow: &str,
        spec: Option<&'static FlowSpec>,
        client: Option<String>,
    ) -> Trail {
        Trail {
            client,
            task: task.to_string(),
            seq,
            flow: flow.to_string(),
            tier: Cell::new(spec.map_or(Tier::Sealed, |s| s.tier)),
            shared: spec.and_then(|s| s.stored_once),
            capabilities: Default::default(),
            decisions: Rc::default(),
            route: RefCell::new(None),
            started: Cell::new((crate::audit::now_ms(), Instant::now())),
            intended: Cell::new(false),
            written: RefCell::default(),
        }
    }

    /// Its turn came: the record times it from here, not from the wait.
    fn began(&self) {
        self.started.set((crate::audit::now_ms(), Instant::now()));
    }

    fn planned(&self, tier: Tier, capabilities: &[Capability]) {
        self.tier.set(tier);
        *self.capabilities.borrow_mut() = capabilities.iter().map(|c| c.to_string()).collect();
    }

    fn row(&self, input: Value) -> CallRow {
        let row = CallRow::new(
            &self.task,
            self.seq,
            &self.flow,
            self.tier.get(),
            input,
            self.started.get().0,
        );
        let row = row.authorized(
            self.capabilities.borrow().clone(),
            self.decisions.before.borrow().clone(),
            self.route.borrow().clone(),
        );
        CallRow {
            shared: self.shared.map(std::borrow::Cow::Borrowed),
            client: self.client.clone(),
            ..row
        }
    }

    /// Step 6: writes and syncs the intent; a call that cannot be recorded
    /// does not run.
    async fn intent(&self, recorder: &Recorder, input: &Value) -> FlowResult<()> {
        let row = self.row(input.clone());
        // Queued, the intent is the writer's: a call cancelled while it
        // waits for the sync is completed by its outcome, not recorded anew.
        self.intended.set(true);
        let synced = recorder.intent_awaited(row).await;
        self.intended.set(synced.is_ok());
        synced.map_err(|why| {
            FlowError::new(
                ErrorCode::ProviderUnavailable,
                format!(
                    "{why}; an irreversible call runs only once it is recorded, so it did not run"
                ),
            )
        })
    }

    /// Step 8: records the outcome. Compensable and irreversible calls wait
    /// until it is committed, so a resume after a kill does not repeat them.
    async fn finish(self, recorder: &Recorder, input: Rc<Value>, mut result: FlowResult<Value>) {
        let ok = result.is_ok();
        let wrote = self.written.take();
        if let (Ok(Value::Object(out)), false) = (&mut result, wrote.is_empty()) {
            let files: serde_json::Map<String, Value> = wrote
                .into_iter()
                .map(|(path, hash)| (path, hash.map_or(Value::Null, Value::String)))
                .collect();
            out.insert(crate::audit::replay::WRITTEN.into(), Value::Object(files));
        }
        let outcome = Outcome::new(
            result,
            self.started.get().1.elapsed().as_micros() as i64,
            self.decisions.during.take(),
        );
        let done = if self.intended.get() {
            recorder.outcome(&self.task, self.seq, outcome)
        } else {
            let input = Rc::try_unwrap(input).unwrap_or_else(|rc| (*rc).clone());
            let wait = self.tier.get() != Tier::Sealed && ok;
            recorder.call_awaited(self.row(input), outcome, wait).await
        };
        if let Err(why) = done {
            eprintln!("sluice: {why}");
        }
    }
}

/// Step 4: each capability of `envelope` through the kernel; an ask goes to
/// the approver, and this call's task waits for it while the run's other
/// tasks go on.
async fn authorize(
    gate: &CallGate,
    envelope: &Envelope,
    capabilities: &[Capability],
) -> FlowResult<Authorized> {
    // A policy names paths as text: one that is not UTF-8 cannot be named
    // faithfully, so it is refused rather than approximated.
    let paths = envelope.reads.iter().chain(&envelope.writes);
    if let Some(p) = paths.clone().find(|p| p.to_str().is_none()) {
        return Err(FlowError::new(
            ErrorCode::PermissionDenied,
            format!(
                "{} is not valid UTF-8, so no policy can name it; rename it.",
                p.display()
            ),
        )
        .with("path", p.display().to_string()));
    }
    gate.admit(capabilities).await
}

/// Step 4½: where a command runs. The policy's `route` has the first word
/// (a container, the host, or a refusal); with no opinion the caller's own
/// `container` stands, else the host. A host sealed to one container runs
/// commands there or not at all, and a container this run cannot reach is
/// refused rather than quietly run on the host.
///
/// A flow that acts on files ([`FlowSpec::acts_on_files`]) on a sealed host
/// acts on the container's: its route is that container, whatever it asked.
fn route(
    gate: &CallGate,
    spec: &FlowSpec,
    envelope: &Envelope,
    containers: &Containers,
) -> FlowResult<Route> {
    if let (true, Some(sealed)) = (spec.acts_on_files(), containers.sealed()) {
        return Ok(Route::Container {
            name: sealed.to_string(),
            requested: None,
        });
    }
    let Some(command) = envelope.commands.first() else {
        return Ok(Route::Host);
    };
    let cap = Capability {
        action: Action::ProcSpawn,
        resource: command.clone(),
    };
    let requested = envelope.container.clone();
    let placed = match gate.kernel().route(&gate.request(&cap)) {
        Ok(Some(Placement::Container(name))) => Some(name),
        Ok(Some(Placement::Host)) => None,
        Ok(Some(Placement::Refused(why))) => {
            return Err(refused_route(&cap, requested.as_deref(), &why))
        }
        Ok(None) => requested.clone(),
        Err(verdict) => return Err(denied(&cap, &verdict)),
    };
    if let Some(sealed) = containers.sealed() {
        if placed.as_deref() != Some(sealed) {
            return Err(outside(sealed, placed.as_deref()));
        }
    }
    let Some(name) = placed else {
        return Ok(Route::Host);
    };
    if !containers.reaches(&name) {
        return Err(crate::container::no_route(&name));
    }
    Ok(Route::Container { name, requested })
}

/// The route as the record keeps it: none for a call on the host that runs
/// no command.
fn recorded(envelope: &Envelope, place: &Route, containers: &Containers) -> Option<Value> {
    if envelope.commands.is_empty() && *place == Route::Host {
        return None;
    }
    Some(
        place.record(
            place
                .container()
                .and_then(|c| containers.engine_of(c))
                .as_deref(),
        ),
    )
}

fn refused_route(cap: &Capability, requested: Option<&str>, why: &str) -> FlowError {
    let asked = match requested {
        Some(c) => format!(" in container {c:?}"),
        None => String::new(),
    };
    FlowError::new(
        ErrorCode::PermissionDenied,
        format!(
            "the policy's route refused to run this command{asked}: {why}; the command did not run"
        ),
    )
    .with("capability", cap.to_string())
    .with("container", requested)
}

fn outside(sealed: &str, placed: Option<&str>) -> FlowError {
    let place = match placed {
        Some(c) => format!("container {c:?}"),
        None => "the host".to_string(),
    };
    FlowError::new(
        ErrorCode::OutsideContainer,
        format!("this host is sealed to container {sealed:?} (SLUICE_BASH_CONTAINER): commands run only there, and this one would run on {place}; give container = {sealed:?}"),
    )
    .with("container", sealed)
}

/// The audit store is written by sluice alone: no flow may write in it,
/// whatever a policy grants.
fn guard_record(audit: &Session, envelope: &Envelope) -> FlowResult<()> {
    let hit = envelope.writes.iter().find_map(|p| {
        audit
            .protected
            .iter()
            .find(|s| p.starts_with(s))
            .map(|s| (p, s))
    });
    match hit {
        None => Ok(()),
        Some((p, dir)) => Err(FlowError::new(
            ErrorCode::PermissionDenied,
            format!(
                "{} is inside the audit store {}, which only sluice writes; no policy can grant it",
                p.display(),
                dir.display()
            ),
        )
        .with("capability", Capability::fs(Action::FsWrite, p).to_string())
        .with("by", "the audit store")),
    }
}

/// The detail of a call whose turn came after a stop request.
const NOT_STARTED: &str = "notStarted";

/// A call whose turn came after a stop request: it did not run. Named
/// `interrupted` like a command the stop killed, so the run halts on it;
/// it is not recorded ([`NOT_STARTED`]).
fn not_started(sig: i32) -> FlowError {
    let sig = crate::interrupt::name(sig);
    FlowError::new(
        ErrorCode::Timeout,
        format!("the run was interrupted by {sig} while this call waited for its turn, so it did not start"),
    )
    .with("interrupted", sig)
    .with(NOT_STARTED, true)
}

/// Waits for a call's turn, and times it in the record from then. A stop
/// that came while it waited (killing the commands ahead of it, which
/// frees their places) must not start it.
async fn wait_turn(turn: Option<&mut schedule::Turn>, trail: Option<&Trail>) -> FlowResult<()> {
    if let Some(turn) = turn {
        turn.ready().await;
    }
    if let Some(sig) = crate::interrupt::requested() {
        return Err(not_started(sig));
    }
    if let Some(t) = trail {
        t.began();
    }
    Ok(())
}

/// How long a cancelled command gets to end, after TERM, before its call
/// is dropped (killing what is left): the executor's grace, and a second
/// to read what it printed.
const STOP_BOUND: std::time::Duration = std::time::Duration::from_secs(4);

/// A call of a cancelled task: `timeout`, as the script's end (or the
/// caller's giving up) is the limit it ran past, with `cancelled` naming
/// the task.
fn cancelled(task: &str, stop: Stop) -> FlowError {
    let message = match stop {
        Stop::ScriptEnd => format!(
            "cancelled: the script ended while task {task} still ran this call; \
             await the task (task:await() or sluice.all) to let its calls finish"
        ),
        Stop::Caller => format!(
            "cancelled: the caller that started task {task} cancelled it while this call waited or ran, \
             so it stopped there"
        ),
    };
    FlowError::new(ErrorCode::Timeout, message).with("cancelled", task)
}

fn unknown_flow(core: &Core, name: &str) -> FlowError {
    let names: Vec<&str> = core.registry.specs().map(|s| s.name).collect();
    FlowError::new(
        ErrorCode::InvalidInput,
        format!(
            "there is no flow named {name:?}; the flows are: {}.",
            names.join(", ")
        ),
    )
    .with("field", "flow")
}

/// A caller's own copy of a result, for a caller that keeps it: one the
/// record took no part of is handed over, not copied.
fn owned(result: Cow<'_, FlowResult<Value>>) -> FlowResult<Value> {
    result.into_owned()
}

#[cfg(test)]
mod tests {
    use super::Core;
    use crate::audit::session::Session;
    use crate::error::ErrorCode;
    use crate::flows::example::count::Count;
    use crate::flows::{Context, Registry};
    use crate::kernel::approval::{Approvals, Prompt};
    use crate::kernel::gate::Gate;
    use crate::kernel::pattern::Vars;
    use crate::kernel::policy::{shipped, Policy};
    use crate::kernel::Kernel;
    use serde_json::json;

    /// A run's core under the default policy, with the example flow added.
    fn core(ws: &std::path::Path) -> Core {
        let mut registry = Registry::standard();
        registry.add::<Count>();
        let vars = Vars::new(ws.to_path_buf());
        let policy = Policy::load(shipped("default").unwrap(), vars.clone());
        let gate = Gate {
            kernel: Kernel::new(vec![policy], Vec::new(), vars),
            approver: Approvals::new(Vec::new(), Prompt::Unattended),
        };
        let ctx = Context::new(ws.to_path_buf(), "example".into(), String::new());
        Core::new(registry, gate, ctx, Session::default())
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn a_tasks_lineage_is_itself_then_each_task_that_started_it() {
        let l: Vec<&str> = super::lineage("0.3.12").collect();
        assert_eq!(l, ["0.3.12", "0.3", "0"]);
        assert_eq!(super::lineage("0").collect::<Vec<_>>(), ["0"]);
    }

    #[test]
    fn a_caller_cancelling_a_task_cancels_the_tasks_it_started_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path());
        core.cancel_task("0.2");
        assert!(core.cancelled("0.2") && core.cancelled("0.2.1"));
        assert!(!core.cancelled("0.21") && !core.cancelled("0.1") && !core.cancelled("0"));
        core.release_task("0.2");
        assert!(!core.cancelled("0.2"));
    }

    #[test]
    fn a_new_flow_is_one_file_and_one_registry_line_and_passes_the_door() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(ws.join("a.txt"), "one\ntwo\nthree").unwrap();
        std::fs::write(ws.join(".env"), "KEY=1\n").unwrap();
        let core = core(&ws);
        assert!(core.registry().specs().any(|s| s.name == "count"));
        let out = block_on(core.call("count", json!({"path": "a.txt"}))).unwrap();
        assert_eq!(out, json!({"lines": 3}));
        // The door decodes its input like any flow's...
        let e = block_on(core.call("count", json!({"path": "a.txt", "x": 1}))).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert_eq!(e.details["field"], "x");
        // ...and authorizes its envelope: the default policy denies .env.
        let e = block_on(core.call("count", json!({"path": ".env"}))).unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied, "{}", e.message);
    }
}
