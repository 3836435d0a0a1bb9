//! The gate: what authorizes a capability (the kernel and whoever answers
//! its asks), one call's use of it, and the proof a flow needs to run.
//!
//! [`Authorized`] has no public constructor: [`CallGate::admit`] makes it
//! once every capability of a call's envelope passed, and a flow's
//! `execute` cannot be called without one. The pipeline is the only caller
//! of `admit` (step 4 of `pipeline::Core::call`), so the compiler keeps
//! every effect behind the one door.

use super::approval::Approvals;
use super::policy::{Decision as Verdict, Request, Verdict as Judgement};
use super::{denied, Kernel};
use crate::audit::recorder::Decision;
use crate::audit::session::Decisions;
use crate::call::{Action, Capability, Tier};
use crate::error::FlowResult;
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Authorizes capabilities a call finds while it runs (the next host of a
/// redirect, a private address DNS returned, a path inside a walked tree).
/// Lower layers (the HTTP client, search providers) ask through it without
/// knowing the pipeline.
pub trait Authority {
    /// Allow passes; deny is `permission_denied`; an ask goes to the
    /// approver.
    fn authorize(&self, cap: &Capability) -> FlowResult<()>;

    /// Whether the kernel refuses `cap` outright, judged without prompting
    /// anyone: an ask is not a refusal here.
    fn refuses(&self, cap: &Capability) -> bool;
}

/// Proof that a call's envelope was authorized: the only key to a flow's
/// `execute`. Made by [`CallGate::admit`] alone.
#[derive(Debug)]
pub struct Authorized {
    _sealed: (),
}

/// The kernel and whoever answers its asks: what authorizes a capability.
pub struct Gate {
    /// The run's policies, ceiling and rules.
    pub kernel: Kernel,
    /// Who answers an ask.
    pub approver: Approvals,
}

impl Gate {
    /// Allow passes; deny is `permission_denied`; an ask goes to the
    /// approver (`permission_required` when nobody answers), blocking the
    /// run's thread until it answers: for what a call finds while it runs.
    /// The decision goes to `sink` when the call is recorded.
    pub fn check(&self, req: &Request, sink: Option<&Decisions>) -> FlowResult<()> {
        let verdict = self.kernel.decide(req);
        let result = match verdict.decision {
            Verdict::Ask => self
                .approver
                .approve_with(&self.kernel, req, &verdict)
                .map(Some),
            _ => ruled(req.capability, &verdict),
        };
        noted(
            req.capability,
            &verdict,
            result.map_err(|e| in_users_words(req, e)),
            sink,
        )
    }

    /// [`Gate::check`] for a call about to run: the kernel decides on the
    /// run's thread (its policy hooks are Lua), and an ask is answered on
    /// tokio's blocking pool while this call's task waits, so the run's
    /// other tasks go on. The same decision goes to `sink`.
    pub async fn check_aside(&self, req: &Request<'_>, sink: Option<&Decisions>) -> FlowResult<()> {
        let verdict = self.kernel.decide(req);
        let result = match verdict.decision {
            Verdict::Ask => self
                .approver
                .approve_aside(&self.kernel, req, &verdict)
                .await
                .map(Some),
            _ => ruled(req.capability, &verdict),
        };
        noted(
            req.capability,
            &verdict,
            result.map_err(|e| in_users_words(req, e)),
            sink,
        )
    }
}

/// A refusal of a command given as `script` (run as `bash -s`, the text on
/// its standard input), said in the caller's words first: the script, then
/// the command line the policy judged it as.
fn in_users_words(req: &Request, e: crate::error::FlowError) -> crate::error::FlowError {
    let script = req.input.get("script").and_then(|s| s.as_str());
    let (Some(script), Action::ProcSpawn) = (script, req.capability.action) else {
        return e;
    };
    // A shell script is judged as its own lines: those are the caller's words.
    if req.capability.resource == script {
        return e;
    }
    let first = script.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let gist: String = first.chars().take(60).collect();
    let more = if gist.len() < first.len() || script.trim().lines().count() > 1 {
        "…"
    } else {
        ""
    };
    crate::error::FlowError {
        message: format!(
            "the script `{gist}{more}` runs as `{}` (its text on standard input), so the policy judges that line: {}",
            req.capability.resource, e.message
        ),
        ..e
    }
}

/// What an allow or a deny settles alone.
fn ruled(cap: &Capability, verdict: &Judgement) -> FlowResult<Option<String>> {
    match verdict.decision {
        Verdict::Deny => Err(denied(cap, verdict)),
        _ => Ok(None),
    }
}

/// `result` after its decision went to `sink`.
fn noted(
    cap: &Capability,
    verdict: &Judgement,
    result: FlowResult<Option<String>>,
    sink: Option<&Decisions>,
) -> FlowResult<()> {
    if let Some(sink) = sink {
        sink.push(record(cap, verdict, &result));
    }
    result.map(|_| ())
}

/// One decision as the record keeps it.
fn record(cap: &Capability, verdict: &Judgement, result: &FlowResult<Option<String>>) -> Decision {
    Decision {
        capability: cap.to_string(),
        decision: verdict.decision.as_str().to_string(),
        by: verdict.by.clone(),
        reason: verdict.reason.clone(),
        approved_by: result.as_ref().ok().cloned().flatten(),
        source: verdict.source.clone(),
    }
}

/// One call's use of the gate: every capability it asks for, before it
/// runs or while it runs, is judged as a request of this call.
#[derive(Clone)]
pub struct CallGate {
    gate: Rc<Gate>,
    flow: String,
    tier: Tier,
    input: Rc<Value>,
    run_id: String,
    script: String,
    task: String,
    /// The folder the call's commands run in ([`Caller::cwd`]).
    cwd: Option<PathBuf>,
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

/// Who makes a call, as the kernel's requests name it.
pub struct Caller<'a> {
    /// The flow's name.
    pub flow: &'a str,
    /// The tier its envelope declared.
    pub tier: Tier,
    /// The call's input, as given.
    pub input: Rc<Value>,
    /// The run's id.
    pub run_id: &'a str,
    /// The run's script.
    pub script: &'a str,
    /// The task that makes the call.
    pub task: &'a str,
    /// The canonical folder the call's commands run in, from its envelope
    /// ([`crate::call::Envelope::cwd`]); `None` when it runs none.
    pub cwd: Option<&'a Path>,
}

impl CallGate {
    /// The gate of one call; its decisions go to `decisions` when the call
    /// is recorded.
    pub fn new(gate: Rc<Gate>, caller: Caller<'_>, decisions: Option<Rc<Decisions>>) -> CallGate {
        CallGate {
            gate,
            flow: caller.flow.to_string(),
            tier: caller.tier,
            input: caller.input,
            run_id: caller.run_id.to_string(),
            script: caller.script.to_string(),
            task: caller.task.to_string(),
            cwd: caller.cwd.map(Path::to_path_buf),
            decisions,
        }
    }

    /// The kernel's request for `cap`, as one made by this call.
    pub fn request<'a>(&'a self, cap: &'a Capability) -> Request<'a> {
        Request {
            capability: cap,
            flow: &self.flow,
            tier: self.tier,
            input: &self.input,
            run_id: &self.run_id,
            script: &self.script,
            task: &self.task,
            cwd: self.cwd.as_deref(),
        }
    }

    /// The run's kernel, for what only its static rules answer (the sandbox
    /// profile, a route).
    pub fn kernel(&self) -> &Kernel {
        &self.gate.kernel
    }

    /// Step 4 of the door: every capability of the envelope through the
    /// kernel, in order, and the proof that the call may run. An ask waits
    /// aside ([`Gate::check_aside`]): the run's other tasks go on meanwhile.
    pub async fn admit(&self, capabilities: &[Capability]) -> FlowResult<Authorized> {
        for cap in capabilities {
            self.gate
                .check_aside(&self.request(cap), self.decisions.as_deref())
                .await?;
        }
        Ok(Authorized { _sealed: () })
    }

    /// Asks the person (or a pre-approval) whether `cap` may be used this
    /// once, whatever the rules say: an ask by `by` for `reason`. Made
    /// once a call is authorized and routed, before it waits for its turn
    /// (bash's `sandboxPermissions`, `flows::Context::ask_wider`); the
    /// call's task waits for the answer, the run's other tasks go on.
    pub async fn ask_once(&self, cap: &Capability, by: &str, reason: String) -> FlowResult<()> {
        let verdict = Judgement {
            decision: Verdict::Ask,
            by: by.into(),
            reason,
            source: None,
        };
        let result = self
            .gate
            .approver
            .approve_once(&self.request(cap), &verdict)
            .await
            .map(Some);
        if let Some(sink) = self.decisions.as_deref() {
            sink.push(record(cap, &verdict, &result));
        }
        result.map(|_| ())
    }
}

impl Authority for CallGate {
    /// Sync, as the lower layers that ask mid-execute are (the HTTP
    /// client's redirects and private addresses): an ask here blocks the
    /// run's thread until answered, and waits its turn behind an ask shown
    /// from the blocking pool, which needs nothing from this thread.
    fn authorize(&self, cap: &Capability) -> FlowResult<()> {
        self.gate
            .check(&self.request(cap), self.decisions.as_deref())
    }

    /// For flows that walk a tree whose root the envelope already
    /// authorized and must skip what the policy denies inside it (`glob`,
    /// `grep` and `fs:read:**/.env`): the ceiling, a deny rule, a `decide`
    /// hook saying deny, a policy that failed.
    fn refuses(&self, cap: &Capability) -> bool {
        self.gate.kernel.decide(&self.request(cap)).decision == Verdict::Deny
    }
}
