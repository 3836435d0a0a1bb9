//! The one door: every flow call, from Lua, from Rust, from replay and
//! later the MCP server, passes through [`Core::call`], in the order
//! DESIGN.md fixes. Nothing reaches a file, a process or the network another
//! way, and every call is recorded when the run has an audit record.

use crate::audit::recorder::{CallRow, Decision, Outcome, Recorder};
use crate::audit::replay::Answer;
use crate::audit::session::{Decisions, Session};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::flows::{Context, Envelope, Registry, Tier};
use crate::kernel::approval::Approver;
use crate::kernel::policy::{Decision as Verdict, Request};
use crate::kernel::{denied, Action, Capability, Kernel};
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;
use std::time::Instant;

/// The task a call comes from when the caller is not a Lua coroutine (Rust,
/// the main chunk).
pub const MAIN_TASK: &str = "0";

/// What every call of one run shares: the flows, the gate, and the context.
pub struct Core {
    pub registry: Registry,
    pub gate: Rc<Gate>,
    pub ctx: Context,
    /// Calls made so far in the run; numbers each call.
    pub calls: Cell<u64>,
    /// The record and the replay of the run.
    pub audit: Session,
}

/// The kernel and whoever answers its asks: what authorizes a capability.
pub struct Gate {
    pub kernel: Kernel,
    pub approver: Approver,
}

impl Gate {
    /// Allow passes; deny is `permission_denied`; an ask goes to the
    /// approver (`permission_required` when nobody answers). The decision
    /// goes to `sink` when the call is recorded.
    pub fn check(&self, req: &Request, sink: Option<&Decisions>) -> FlowResult<()> {
        let verdict = self.kernel.decide(req);
        let result = match verdict.decision {
            Verdict::Allow => Ok(None),
            Verdict::Deny => Err(denied(req.capability, &verdict)),
            Verdict::Ask => self
                .approver
                .approve_with(&self.kernel, req, &verdict)
                .map(Some),
        };
        if let Some(sink) = sink {
            sink.push(Decision {
                capability: req.capability.to_string(),
                decision: verdict.decision.as_str().to_string(),
                by: verdict.by.clone(),
                reason: verdict.reason.clone(),
                approved_by: result.as_ref().ok().cloned().flatten(),
            });
        }
        result.map(|_| ())
    }
}

/// One call's use of the gate for capabilities its flow only finds while it
/// runs: the next host of a redirect, a private address DNS returned. They
/// are judged like the envelope's, as requests of this call.
#[derive(Clone)]
pub struct CallGate {
    gate: Rc<Gate>,
    flow: String,
    tier: Tier,
    input: Rc<Value>,
    run_id: String,
    script: String,
    /// Where the call's decisions go when it is recorded.
    decisions: Option<Rc<Decisions>>,
}

impl fmt::Debug for CallGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallGate")
            .field("flow", &self.flow)
            .finish_non_exhaustive()
    }
}

impl CallGate {
    /// The kernel's request for `cap`, as one made by this call.
    fn request<'a>(&'a self, cap: &'a Capability) -> Request<'a> {
        Request {
            capability: cap,
            flow: &self.flow,
            tier: self.tier,
            input: &self.input,
            run_id: &self.run_id,
            script: &self.script,
        }
    }

    /// The sandbox profile the run's static grants give a command of this
    /// call.
    pub fn sandbox_profile(&self, workspace: &std::path::Path) -> crate::sandbox::Profile {
        self.gate
            .kernel
            .with_static(|view| crate::sandbox::derive(view, workspace))
    }

    /// `profile` widened to `mode` for this call, keeping what must stay
    /// read-only.
    pub fn widen_profile(
        &self,
        workspace: &std::path::Path,
        profile: &mut crate::sandbox::Profile,
        mode: crate::sandbox::Mode,
    ) {
        self.gate
            .kernel
            .with_static(|view| crate::sandbox::widen(view, workspace, profile, mode));
    }

    /// Asks the person (or a pre-approval) whether `command` may run with
    /// the wider `mode` this once; always an ask, whatever the rules say.
    pub fn ask_wider(
        &self,
        command: &str,
        mode: crate::sandbox::Mode,
        why: &str,
    ) -> FlowResult<()> {
        let cap = Capability {
            action: Action::ProcSpawn,
            resource: command.to_string(),
        };
        let verdict = crate::kernel::policy::Verdict {
            decision: Verdict::Ask,
            by: "sandboxPermissions".into(),
            reason: format!(
                "the command asks to run with {} this once: {why}",
                mode.as_str()
            ),
        };
        let result = self
            .gate
            .approver
            .approve_once(&self.request(&cap), &verdict);
        if let Some(sink) = self.decisions.as_deref() {
            sink.push(Decision {
                capability: cap.to_string(),
                decision: "ask".into(),
                by: verdict.by.clone(),
                reason: verdict.reason.clone(),
                approved_by: result.as_ref().ok().cloned(),
            });
        }
        result.map(|_| ())
    }

    pub fn authorize(&self, cap: &Capability) -> FlowResult<()> {
        self.gate
            .check(&self.request(cap), self.decisions.as_deref())
    }

    /// Whether the kernel refuses `cap` outright (the ceiling, a deny rule,
    /// a `decide` hook saying deny, a policy that failed), judged without
    /// prompting anyone: an ask is not a refusal here. For flows that walk a
    /// tree whose root the envelope already authorized and must skip what
    /// the policy denies inside it (`glob`, `grep` and `fs:read:**/.env`).
    pub fn refuses(&self, cap: &Capability) -> bool {
        self.gate.kernel.decide(&self.request(cap)).decision == Verdict::Deny
    }
}

impl Core {
    /// Calls flow `name` with a JSON input and returns its JSON output, as a
    /// call of the main task.
    pub async fn call(&self, name: &str, input: Value) -> FlowResult<Value> {
        self.call_in(MAIN_TASK, name, input).await
    }

    /// Calls flow `name` for `task` (a Lua coroutine's id): calls are keyed
    /// by task and sequence within it, so a replay finds them however
    /// concurrent tasks interleave.
    pub async fn call_in(&self, task: &str, name: &str, input: Value) -> FlowResult<Value> {
        let audit = &self.audit;
        if let Some(e) = audit.halted() {
            return Err(e);
        }
        let seq = audit.next_call(task);
        match audit.answer(task, seq, name, &input) {
            Answer::Recorded(result, rec) => {
                audit.copy(task, seq, &input, &rec, &result);
                return result;
            }
            Answer::Halt(e) => return Err(audit.halt(e)),
            Answer::Live => {}
        }
        let Some(recorder) = &audit.recorder else {
            return self.live(name, Rc::new(input), None).await;
        };
        let trail = Trail::new(
            task,
            seq,
            name,
            self.registry.get(name).map(|f| f.spec().tier),
        );
        let input = Rc::new(input);
        let started = Instant::now();
        let result = self.live(name, input.clone(), Some(&trail)).await;
        trail.finish(recorder, input, &result, started);
        result
    }

    /// Steps 1-8 for a call that really runs.
    async fn live(&self, name: &str, input: Rc<Value>, trail: Option<&Trail>) -> FlowResult<Value> {
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
        let gate = CallGate {
            gate: self.gate.clone(),
            flow: name.to_string(),
            tier,
            input: input.clone(),
            run_id: self.ctx.run_id.clone(),
            script: self.ctx.script.clone(),
            decisions: trail.map(|t| t.decisions.clone()),
        };
        // 4. authorize every capability the envelope needs.
        guard_record(&self.audit, &call.envelope)?;
        authorize(&gate, &call.envelope, &capabilities)?;
        // 5. route: where a command runs.
        let place = route(&gate, &call.envelope)?;
        // 6. record intent: an irreversible call is on disk before it runs.
        if let Some(t) = trail {
            *t.route.borrow_mut() = place;
            if tier == Tier::Irreversible {
                t.intent(
                    self.audit.recorder.as_ref().expect("a trail records"),
                    &input,
                )?;
            }
            t.decisions.running.set(true);
        }
        // 7-8. execute and hand the outcome back (the caller records it).
        ctx.gate = Some(gate);
        call.execute(&ctx).await
    }
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
    started_ms: i64,
    /// Whether the intent was written (then the outcome completes it).
    intended: Cell<bool>,
}

impl Trail {
    fn new(task: &str, seq: u64, flow: &str, tier: Option<Tier>) -> Trail {
        Trail {
            task: task.to_string(),
            seq,
            flow: flow.to_string(),
            tier: Cell::new(tier.unwrap_or(Tier::Sealed)),
            capabilities: Default::default(),
            decisions: Rc::default(),
            route: RefCell::new(None),
            started_ms: crate::audit::now_ms(),
            intended: Cell::new(false),
        }
    }

    fn planned(&self, tier: Tier, capabilities: &[Capability]) {
        self.tier.set(tier);
        *self.capabilities.borrow_mut() = capabilities.iter().map(|c| c.to_string()).collect();
    }

    fn row(&self, input: Value) -> CallRow {
        CallRow {
            task: self.task.clone(),
            seq: self.seq,
            flow: self.flow.clone(),
            tier: self.tier.get().as_str(),
            input,
            capabilities: self.capabilities.borrow().clone(),
            decisions: self.decisions.before.borrow().clone(),
            route: self.route.borrow().clone(),
            replayed_from: None,
            started_ms: self.started_ms,
        }
    }

    /// Step 6: writes and syncs the intent; a call that cannot be recorded
    /// does not run.
    fn intent(&self, recorder: &Recorder, input: &Value) -> FlowResult<()> {
        recorder.intent(self.row(input.clone())).map_err(|why| {
            FlowError::new(
                ErrorCode::ProviderUnavailable,
                format!(
                    "{why}; an irreversible call runs only once it is recorded, so it did not run"
                ),
            )
        })?;
        self.intended.set(true);
        Ok(())
    }

    /// Step 8: records the outcome. Compensable and irreversible calls wait
    /// until it is committed, so a resume after a kill does not repeat them.
    fn finish(
        self,
        recorder: &Recorder,
        input: Rc<Value>,
        result: &FlowResult<Value>,
        started: Instant,
    ) {
        let outcome = Outcome {
            result: result.clone().map_err(|e| e.to_json()),
            duration_us: started.elapsed().as_micros() as i64,
            late_decisions: self.decisions.during.take(),
        };
        let done = if self.intended.get() {
            recorder.outcome(&self.task, self.seq, outcome)
        } else {
            let input = Rc::try_unwrap(input).unwrap_or_else(|rc| (*rc).clone());
            let wait = self.tier.get() != Tier::Sealed && result.is_ok();
            recorder.call(self.row(input), outcome, wait)
        };
        if let Err(why) = done {
            eprintln!("sluice: {why}");
        }
    }
}

/// Step 4: each capability of `envelope` through the kernel; an ask goes to
/// the approver.
fn authorize(gate: &CallGate, envelope: &Envelope, capabilities: &[Capability]) -> FlowResult<()> {
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
    capabilities.iter().try_for_each(|cap| gate.authorize(cap))
}

/// Step 5: a policy's `route` may send a command into a container. This host
/// has no container transport, so such a call is refused rather than quietly
/// run on the host against the policy's intent.
fn route(gate: &CallGate, envelope: &Envelope) -> FlowResult<Option<Value>> {
    let Some(command) = envelope.commands.first() else {
        return Ok(None);
    };
    let cap = Capability {
        action: Action::ProcSpawn,
        resource: command.clone(),
    };
    match gate.gate.kernel.route(&gate.request(&cap)) {
        // On the host, confined as the run's grants say.
        Ok(None) => Ok(Some(json!({"host": "sandbox"}))),
        Ok(Some(container)) => Err(FlowError::new(
            ErrorCode::ProviderUnavailable,
            format!(
                "the policy routes this command into container {container:?}, but this host has no container transport; \
                 the command did not run. Drop the route from the policy to run it on the host."
            ),
        )
        .with("container", container)),
        Err(verdict) => Err(denied(&cap, &verdict)),
    }
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
