//! The one door: every flow call, from Lua, from Rust, and later from the MCP
//! server and replay, passes through [`Core::call`], in the order DESIGN.md
//! fixes. Nothing reaches a file, a process or the network another way.

use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::flows::{Context, Envelope, Registry};
use crate::kernel::approval::Approver;
use crate::kernel::policy::{Decision, Request};
use crate::kernel::{denied, Action, Capability, Kernel};
use serde_json::Value;
use std::cell::Cell;

/// What every call of one run shares: the flows, the kernel, who answers
/// asks, and the context.
pub struct Core {
    pub registry: Registry,
    pub kernel: Kernel,
    pub approver: Approver,
    pub ctx: Context,
    /// Calls made so far in the run; numbers each call.
    pub calls: Cell<u64>,
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
        let ctx = self.ctx.for_call(seq);
        // 1-3. decode, validate, envelope.
        let call = flow.prepare(&ctx, input.clone())?;
        // 4. authorize every capability the envelope needs.
        self.authorize(name, &input, &call.envelope)?;
        // 5. route: where a command runs.
        self.route(name, &input, &call.envelope)?;
        // 6. record intent: no audit store yet.
        // 7-8. execute and hand the outcome back.
        call.execute(&ctx).await
    }

    /// Step 4: each capability of `envelope` through the kernel; an ask goes
    /// to the approver.
    fn authorize(&self, flow: &str, input: &Value, envelope: &Envelope) -> FlowResult<()> {
        // A policy names paths as text: one that is not UTF-8 cannot be
        // named faithfully, so it is refused rather than approximated.
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
        for cap in envelope.capabilities() {
            let req = Request {
                capability: &cap,
                flow,
                tier: envelope.tier,
                input,
                run_id: &self.ctx.run_id,
                script: &self.ctx.script,
            };
            let verdict = self.kernel.decide(&req);
            match verdict.decision {
                Decision::Allow => {}
                Decision::Deny => return Err(denied(&cap, &verdict)),
                Decision::Ask => self.approver.approve(&req, &verdict)?,
            }
        }
        Ok(())
    }
}

impl Core {
    /// Step 5: a policy's `route` may send a command into a container.
    /// This host has no container transport, so such a call is refused
    /// rather than quietly run on the host against the policy's intent.
    fn route(&self, flow: &str, input: &Value, envelope: &Envelope) -> FlowResult<()> {
        let Some(command) = envelope.commands.first() else {
            return Ok(());
        };
        let cap = Capability {
            action: Action::ProcSpawn,
            resource: command.clone(),
        };
        let req = Request {
            capability: &cap,
            flow,
            tier: envelope.tier,
            input,
            run_id: &self.ctx.run_id,
            script: &self.ctx.script,
        };
        match self.kernel.route(&req) {
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
