//! `shell_command`: Codex CLI's tool of the same name, for a model trained
//! on that shape. It takes Codex's fields (`command`, `workdir`,
//! `timeout_ms`) and returns Codex's rendering of the result: exit code,
//! wall time and the interleaved output cut to a 10,000-token budget in the
//! middle. A timeout is a value (exit code 124), as in Codex.
//!
//! Codex's `sandbox_permissions`, `justification` and `prefix_rule` are
//! deliberately absent: the permission kernel owns sandboxing and
//! escalation here. Prefer `bash` for new work.

use super::container::Routed;
use super::shape::{codex_output, Place, CODEX_CAPTURE_BUDGET, TIMEOUT_EXIT_CODE};
use super::{closed, field, Context, Envelope, Flow, FlowSpec, Tier};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::exec::{self, CommandLine, SpawnFailureKind};
use crate::kernel::gate::Authorized;
use crate::kernel::Action;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

/// Codex's default: ten seconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub command: String,
    pub workdir: Option<String>,
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    /// Codex's text: `Exit code: N`, `Wall time: S seconds`, maybe
    /// `Total output lines: N`, `Output:`, then the output.
    pub output: String,
    /// 124 when the command timed out.
    pub exit_code: i32,
    /// How the command was confined on the host, or the container it ran
    /// in; absent when the grants confine nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Place>,
}

pub struct ShellCommand {
    command: String,
    workdir: PathBuf,
    /// `workdir` as given: inside a container it names the container's folder.
    given_workdir: Option<String>,
    timeout: Duration,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["command"],
        "properties": {
            "command": {"type": "string", "description": "The shell command to execute."},
            "workdir": {"type": "string", "description": "The working directory to execute the command in (default: the workspace)."},
            "timeout_ms": {"type": "integer", "minimum": 1, "description": "The timeout for the command in milliseconds (default 10000)."}
        }
    })
}

/// The audit's one-line gist of an input: its command, an argv list
/// joined by spaces.
fn summary(input: &Value) -> String {
    match input.get("command") {
        Some(Value::String(command)) => command.clone(),
        Some(Value::Array(argv)) => {
            let words: Vec<String> = argv
                .iter()
                .map(|a| a.as_str().map_or_else(|| a.to_string(), str::to_string))
                .collect();
            words.join(" ")
        }
        _ => input.to_string(),
    }
}

impl Flow for ShellCommand {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "shell_command",
        description: "Runs a shell command the way Codex CLI's shell_command tool does and returns Codex's text: exit code, wall time and the output.",
        tier: Tier::Irreversible,
        actions: &[Action::ProcSpawn],
        read_only: false,
        schema,
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[ErrorCode::NotFound, ErrorCode::OutsideContainer, ErrorCode::CommandFailed, ErrorCode::Timeout, ErrorCode::ProviderUnavailable],
    };

    fn output_schema() -> Value {
        closed(
            &[
                ("output", field("string", "Codex's text: \"Exit code: N\\nWall time: S seconds\\n\", maybe \"Total output lines: N\\n\", \"Output:\\n\", then the output.")),
                ("exitCode", field("integer", "The command's exit status; 124 after a timeout.")),
            ],
            &[("sandbox", super::shape::sandbox_schema(true))],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        let ran = |sandbox| Output {
            output: "Exit code: 0\nWall time: 0 seconds\nOutput:\nhi\n".into(),
            exit_code: 0,
            sandbox,
        };
        use super::shape::{container_sample, sandbox_sample, sandbox_sample_limited};
        vec![
            ran(Some(Place::Host(sandbox_sample(true)))),
            ran(Some(Place::Host(sandbox_sample(false)))),
            ran(Some(Place::Host(sandbox_sample_limited()))),
            ran(Some(Place::Container(container_sample()))),
            ran(None),
        ]
    }

    fn validate(input: &Input) -> FlowResult<()> {
        if input.command.trim().is_empty() {
            return Err(FlowError::invalid_input(
                "command",
                "command is empty; give the command line to run, e.g. {command = \"ls -la\"}",
            ));
        }
        if input.command.contains('\0') {
            return Err(FlowError::invalid_input(
                "command",
                "command contains a NUL byte",
            ));
        }
        if input.timeout_ms == Some(0) {
            return Err(FlowError::invalid_input(
                "timeout_ms",
                "timeout_ms must be at least 1 (default 10000)",
            ));
        }
        Ok(())
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let workdir = match &input.workdir {
            Some(w) => ctx.workspace.join(w),
            None => ctx.workspace.clone(),
        };
        let workdir = crate::fsops::path::canonical_lenient(&workdir).unwrap_or(workdir);
        let envelope = Envelope {
            tier: Tier::Irreversible,
            reads: vec![],
            writes: vec![],
            commands: vec![input.command.clone()],
            network: vec![],
            cwd: Some(workdir.clone()),
            container: None,
            anywhere: true,
        };
        let timeout = Duration::from_millis(input.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS));
        Ok((
            ShellCommand {
                command: input.command,
                workdir,
                given_workdir: input.workdir,
                timeout,
            },
            envelope,
        ))
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        if let Some(name) = ctx.route.container() {
            return self.in_container(ctx, name).await;
        }
        let exec = &ctx.exec;
        // Codex runs the command with the user's shell; models trained on
        // it write bash.
        let argv = vec![
            exec::bash_or_sh().into(),
            "-c".into(),
            self.command.clone().into(),
        ];
        let mut req = ctx.command(CommandLine::Argv(argv));
        req.cwd = Some(self.workdir.clone());
        req.timeout = Some(self.timeout);
        req.output_budget = Some(CODEX_CAPTURE_BUDGET);
        req.merge_output = true;
        let confined = ctx.confine(&self.command)?;
        if let Some(c) = &confined {
            c.attach(&mut req);
        }
        let spec = exec::resolve(req, &exec.limits)?;
        let out = ctx.run_command(spec).await;
        if let Some(f) = out.spawn_failure {
            let code = match f.kind {
                SpawnFailureKind::CwdNotFound | SpawnFailureKind::CwdNotDirectory => {
                    ErrorCode::NotFound
                }
                _ => ErrorCode::CommandFailed,
            };
            return Err(
                FlowError::new(code, format!("{}; the command did not run", f.message))
                    .with("field", "workdir"),
            );
        }
        let exit_code = exit_code(&out)?;
        let text = String::from_utf8_lossy(&out.stdout.head);
        if let Some(c) = confined
            .as_ref()
            .filter(|c| c.runner_failed(exit_code, &text))
        {
            return Err(FlowError::new(
                ErrorCode::ProviderUnavailable,
                format!(
                    "the sandbox runner ({}) failed before the command ran: {}; the command did not run",
                    c.runner,
                    text.trim()
                ),
            )
            .with("runnerFailed", true));
        }
        let sandbox = confined.map(|c| Place::Host(c.facts(exit_code, &text, out.limits.as_ref())));
        Ok(Output {
            output: codex_output(exit_code, out.elapsed, out.timed_out, &out.stdout),
            exit_code,
            sandbox,
        })
    }
}

/// The command's exit code as Codex gives it (124 after its timeout); a
/// command the run stopped (a signal, its caller) is a `timeout` error
/// holding the output so far.
fn exit_code(out: &exec::Outcome) -> FlowResult<i32> {
    if out.aborted || out.interrupted.is_some() {
        let output = codex_output(-1, out.elapsed, false, &out.stdout);
        return Err(out.stopped(FlowError::new(ErrorCode::Timeout, "").with("output", output)));
    }
    Ok(if out.timed_out {
        TIMEOUT_EXIT_CODE
    } else {
        out.shell_status().unwrap_or(-1)
    })
}

impl ShellCommand {
    /// Runs the command in container `name`, where the policy's route (or
    /// a host sealed to it) placed it: through the container's transport,
    /// never the host's sandbox. A relative `workdir` is under the
    /// container's folder, as `bash`'s `cwd` is.
    async fn in_container(self, ctx: &Context, name: &str) -> FlowResult<Output> {
        let mut req = ctx.command(CommandLine::Shell(self.command.clone()));
        req.timeout = Some(self.timeout);
        req.output_budget = Some(CODEX_CAPTURE_BUDGET);
        req.merge_output = true;
        let routed = ctx.routed(name, req, self.given_workdir.as_deref()).await?;
        let t = routed.transport;
        let out = ctx.run_command(routed.spec).await;
        if let Some(f) = &out.spawn_failure {
            return Err(t.failed(&f.message, "the command"));
        }
        let exit_code = exit_code(&out)?;
        let said = String::from_utf8_lossy(&out.stdout.head).into_owned();
        if crate::container::engine_failed(exit_code, &said) {
            return Err(t.failed(said.trim(), "the command"));
        }
        let facts = Routed::facts(routed.guard, &t, exit_code, &said);
        Ok(Output {
            output: codex_output(exit_code, out.elapsed, out.timed_out, &out.stdout),
            exit_code,
            sandbox: Some(Place::Container(facts)),
        })
    }
}
