//! `bash` in a container: the request goes through the container's
//! transport instead of the host's sandbox, and the result says where it
//! ran. Output bounds, spill files, timeouts and background jobs are the
//! executor's, as on the host; what only the host could establish
//! (`invalidProbe`, engine failures) is read from the engine's and the
//! container shell's own words.

use super::{Bash, Finished, Output, Place, Started};
use crate::container::{Facts, Transport};
use crate::error::FlowResult;
use crate::exec::{self, CommandLine, Outcome};
use crate::flows::container::Routed;
use crate::flows::probe;
use crate::flows::shape::bounded;
use crate::flows::Context;
use crate::sandbox::Guard;
use std::sync::Arc;

impl Bash {
    /// Runs the planned command in container `name`.
    pub(super) async fn in_container(self, ctx: &Context, name: &str) -> FlowResult<Output> {
        let mut req = ctx.command(self.launch.clone());
        req.env = self.declared_env(ctx)?;
        req.stdin = self.stdin.clone();
        req.timeout = Some(self.timeout);
        req.output_budget = Some(exec::STREAM_BUDGET);
        let routed = ctx.routed(name, req, self.given_cwd.as_deref()).await?;
        if self.background {
            return self.start_routed(ctx, routed.spec, &routed.transport, routed.guard);
        }
        let outcome = ctx.run_command(routed.spec).await;
        self.finish_routed(
            outcome,
            &routed.transport,
            routed.cwd.as_deref(),
            routed.guard,
        )
    }

    fn start_routed(
        self,
        ctx: &Context,
        spec: exec::Spec,
        t: &Arc<Transport>,
        guard: Option<Arc<Guard>>,
    ) -> FlowResult<Output> {
        let t = t.clone();
        let facts: exec::job::Facts = Arc::new(move |code, stderr, _| {
            let settled = guard.as_ref().map(|g| g.settle()).unwrap_or_default();
            let facts = Facts::ended(&t, settled.parts(), code.unwrap_or(-1), stderr);
            serde_json::to_value(facts).expect("facts serialize")
        });
        match ctx
            .exec
            .jobs
            .start_with(spec, self.label.clone(), Some(facts))
        {
            Ok(job) => Ok(Output::Started(Started {
                job_id: job.id,
                pid: job.pid,
                status: "running",
            })),
            Err(e) => Err(self.start_error(e)),
        }
    }

    fn finish_routed(
        self,
        out: Outcome,
        t: &Transport,
        cwd: Option<&str>,
        guard: Option<Arc<Guard>>,
    ) -> FlowResult<Output> {
        if let Some(f) = &out.spawn_failure {
            return Err(t
                .failed(&f.message, "the command")
                .with("command", self.label.clone()));
        }
        let stdout = bounded(&out.stdout);
        let stderr = bounded(&out.stderr);
        if out.timed_out || out.aborted || out.interrupted.is_some() {
            return Err(self
                .timeout_error(&out, stdout, stderr)
                .with("container", t.name.clone()));
        }
        let exit_code = out.shell_status().unwrap_or(-1);
        let said = String::from_utf8_lossy(&out.stderr.head).into_owned();
        if crate::container::engine_failed(exit_code, &said) {
            return Err(t
                .failed(said.trim(), "the command")
                .with("command", self.label.clone()));
        }
        let invalid_probe = match (exit_code, &self.launch) {
            (127, _) if said.contains("chdir to cwd") => Some(probe::unknown_cwd_in_container(
                cwd.unwrap_or("?"),
                &said,
                &t.name,
            )),
            (127, CommandLine::Shell(line)) => probe::missing_in_container(line, &said, &t.name),
            _ => None,
        };
        let finished = Finished::ran(&out, exit_code, (stdout, stderr), out.signal.clone());
        Ok(Output::Finished(Box::new(Finished {
            invalid_probe,
            sandbox: Some(Place::Container(Routed::facts(guard, t, exit_code, &said))),
            ..finished
        })))
    }
}
