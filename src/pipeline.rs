//! The one door: every flow call, from Lua, from Rust, and later from the MCP
//! server and replay, passes through [`Core::call`], in the order DESIGN.md
//! fixes. Nothing reaches a file, a process or the network another way.

use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::flows::{Context, Envelope, Registry, Tier};
use crate::kernel::approval::Approver;
use crate::kernel::policy::{Decision, Request};
use crate::kernel::{denied, Action, Capability, Kernel};
use serde_json::Value;
use std::cell::Cell;
use std::fmt;
use std::rc::Rc;

/// What every call of one run shares: the flows, the gate, and the context.
pub struct Core {
    pub registry: Registry,
    pub gate: Rc<Gate>,
    pub ctx: Context,
    /// Calls made so far in the run; numbers each call.
    pub calls: Cell<u64>,
}

/// The kernel and whoever answers its asks: what authorizes a capability.
pub struct Gate {
    pub kernel: Kernel,
    pub approver: Approver,
}

impl Gate {
    /// Allow passes; deny is `permission_denied`; an ask goes to the
    /// approver (`permission_required` when nobody answers).
    pub fn check(&self, req: &Request) -> FlowResult<()> {
        let verdict = self.kernel.decide(req);
        match verdict.decision {
            Decision::Allow => Ok(()),
            Decision::Deny => Err(denied(req.capability, &verdict)),
            Decision::Ask => self.approver.approve(req, &verdict),
        }
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

    pub fn authorize(&self, cap: &Capability) -> FlowResult<()> {
        self.gate.check(&self.request(cap))
    }

    /// Whether the kernel refuses `cap` outright (the ceiling, a deny rule,
    /// a `decide` hook saying deny, a policy that failed), judged without
    /// prompting anyone: an ask is not a refusal here. For flows that walk a
    /// tree whose root the envelope already authorized and must skip what
    /// the policy denies inside it (`glob`, `grep` and `fs:read:**/.env`).
    pub fn refuses(&self, cap: &Capability) -> bool {
        self.gate.kernel.decide(&self.request(cap)).decision == Decision::Deny
    }
}

impl Core {
    /// Calls flow `name` with a JSON input and returns its JSON output.
    pub async fn call(&self, name: &str, input: Value) -> FlowResult<Value> {
        let flow = self
            .registry
            .get(name)
            .ok_or_else(|| unknown_flow(self, name))?;
        let seq = self.calls.get() + 1;
        self.calls.set(seq);
        let mut ctx = self.ctx.for_call(seq);
        // 1-3. decode, validate, envelope.
        let call = flow.prepare(&ctx, input.clone())?;
        let gate = CallGate {
            gate: self.gate.clone(),
            flow: name.to_string(),
            tier: call.envelope.tier,
            input: Rc::new(input),
            run_id: self.ctx.run_id.clone(),
            script: self.ctx.script.clone(),
        };
        // 4. authorize every capability the envelope needs.
        authorize(&gate, &call.envelope)?;
        // 5. route: where a command runs.
        route(&gate, &call.envelope)?;
        // 6. record intent: no audit store yet.
        // 7-8. execute and hand the outcome back.
        ctx.gate = Some(gate);
        call.execute(&ctx).await
    }
}

/// Step 4: each capability of `envelope` through the kernel; an ask goes to
/// the approver.
fn authorize(gate: &CallGate, envelope: &Envelope) -> FlowResult<()> {
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
    envelope
        .capabilities()
        .iter()
        .try_for_each(|cap| gate.authorize(cap))
}

/// Step 5: a policy's `route` may send a command into a container. This host
/// has no container transport, so such a call is refused rather than quietly
/// run on the host against the policy's intent.
fn route(gate: &CallGate, envelope: &Envelope) -> FlowResult<()> {
    let Some(command) = envelope.commands.first() else {
        return Ok(());
    };
    let cap = Capability {
        action: Action::ProcSpawn,
        resource: command.clone(),
    };
    match gate.gate.kernel.route(&gate.request(&cap)) {
        Ok(None) => Ok(()),
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
