//! One run of the suite: the runner's command with the selection as its
//! arguments, confined on the host or routed into a container, its stdout
//! and stderr captured as one stream in the order they were written (a
//! runner's verdict and its errors read together).

use super::runner::Runner;
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::exec::{self, CommandLine, Outcome, SpawnFailureKind};
use crate::flows::probe::{self, InvalidProbe};
use crate::flows::Context;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How many bytes of the output's end a result shows.
pub const TAIL_BYTES: usize = 30_000;

/// The command of one run, as launched and as shown.
pub struct Line {
    /// What the policy judged and results show: the runner's command with
    /// the selection quoted after it.
    pub shown: String,
    /// `/bin/sh -c 'COMMAND "$@"' sluice-test SELECTION...`: the selection
    /// reaches the runner as arguments, never parsed by the shell.
    pub launch: CommandLine,
}

impl Line {
    pub fn new(command: &str, selection: &[String]) -> Line {
        let mut shown = command.to_string();
        for s in selection {
            shown.push(' ');
            shown.push_str(&crate::kernel::shell::quote(s));
        }
        let mut argv: Vec<std::ffi::OsString> = vec![
            "/bin/sh".into(),
            "-c".into(),
            format!("{command} \"$@\"").into(),
            "sluice-test".into(),
        ];
        argv.extend(selection.iter().map(Into::into));
        Line {
            shown,
            launch: CommandLine::Argv(argv),
        }
    }
}

/// What one run gave.
pub struct Ran {
    pub exit_code: i32,
    /// The whole output, as far as it could be kept (a spill file holds
    /// up to 64 MiB).
    pub output: String,
    /// Bytes of the output before `output` that are lost (0 unless the
    /// stream outgrew its spill file).
    pub lost_bytes: u64,
    /// The complete output's file, when it was long.
    pub spill_path: Option<PathBuf>,
    /// Where it ran: the sandbox's or the container's facts.
    pub place: Option<Value>,
    /// The host's own evidence that the command never started.
    pub launch_probe: Option<InvalidProbe>,
    /// The container it ran in.
    pub container: Option<String>,
}

/// Where and how one run goes.
pub struct Target<'a> {
    pub runner: &'a Runner,
    pub line: &'a Line,
    /// The host folder it runs in (a base worktree's, or the workspace's).
    pub cwd: PathBuf,
    /// The base worktree it runs in, when it is not the workspace.
    pub copy: Option<&'a Path>,
    pub timeout: Duration,
}

/// Runs `target` where the pipeline's route put the call.
pub async fn run(ctx: &Context, target: &Target<'_>) -> FlowResult<Ran> {
    if let Some(name) = ctx.route.container() {
        return in_container(ctx, target, name).await;
    }
    let mut req = request(ctx, target);
    req.cwd = Some(target.cwd.clone());
    let confined = match target.copy {
        Some(copy) => ctx.confine_copy(copy)?,
        None => ctx.confine(&target.line.shown)?,
    };
    if let Some(c) = &confined {
        c.attach(&mut req);
    }
    let spec = exec::resolve(req, &ctx.exec.limits)?;
    let mut out = ctx.run_command(spec).await;
    if let Some(c) = &confined {
        let said = String::from_utf8_lossy(&out.stdout.head).into_owned();
        if let Some((program, why)) = c.missing_program(&said) {
            out.spawn_failure = Some(exec::SpawnFailure {
                kind: SpawnFailureKind::ProgramNotFound,
                message: format!("cannot start {program}: {why}"),
            });
        }
    }
    if let Some(f) = &out.spawn_failure {
        return not_started(target, &f.message, f.kind);
    }
    stopped(&out, target)?;
    let exit_code = out.shell_status().unwrap_or(-1);
    let mut ran = ran(&out, exit_code);
    if let Some(c) = &confined {
        if c.runner_failed(exit_code, &ran.output) {
            return Err(FlowError::new(
                ErrorCode::ProviderUnavailable,
                format!("the sandbox runner ({}) failed before the tests ran: {}; the command did not run", c.runner, ran.output.trim()),
            )
            .with("command", target.line.shown.clone())
            .with("runnerFailed", true));
        }
        let facts = c.facts(exit_code, &ran.output, out.limits.as_ref());
        ran.place = serde_json::to_value(facts).ok();
    }
    if exit_code == 127 {
        let path = target
            .runner
            .env
            .get("PATH")
            .cloned()
            .or_else(|| std::env::var("PATH").ok());
        ran.launch_probe =
            probe::missing_program(&target.runner.command, &target.cwd, path.as_deref());
    }
    Ok(ran)
}

/// The executor request both places share.
fn request(ctx: &Context, target: &Target) -> exec::Request {
    let mut req = ctx.command(target.line.launch.clone());
    req.env = target.runner.env.clone();
    req.timeout = Some(target.timeout);
    req.output_budget = Some(exec::STREAM_BUDGET);
    req.merge_output = true;
    req
}

/// Runs `target` in container `name`. An engine that cannot find the
/// container is an answer (the probe's `unknown-environment`), not an
/// error: the command named an environment that does not exist.
async fn in_container(ctx: &Context, target: &Target<'_>, name: &str) -> FlowResult<Ran> {
    let req = request(ctx, target);
    let routed = ctx.routed(name, req, target.runner.cwd.as_deref()).await?;
    let transport = routed.transport;
    let out = ctx.run_command(routed.spec).await;
    if let Some(f) = &out.spawn_failure {
        return Err(transport
            .failed(&f.message, "the tests")
            .with("command", target.line.shown.clone()));
    }
    stopped(&out, target).map_err(|e| e.with("container", name.to_string()))?;
    let exit_code = out.shell_status().unwrap_or(-1);
    let mut ran = ran(&out, exit_code);
    ran.container = Some(name.to_string());
    let facts =
        crate::flows::container::Routed::facts(routed.guard, &transport, exit_code, &ran.output);
    ran.place = serde_json::to_value(facts).ok();
    let missing = ran.output.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.contains("no such container") || l.contains("no container with name or id")
    });
    if crate::container::engine_failed(exit_code, &ran.output) && !missing {
        return Err(transport
            .failed(ran.output.trim(), "the tests")
            .with("command", target.line.shown.clone()));
    }
    Ok(ran)
}

/// A command the host could not start: a missing program or folder is an
/// answer with its probe (nothing ran, and the result says why); anything
/// else is an error.
fn not_started(target: &Target, message: &str, kind: SpawnFailureKind) -> FlowResult<Ran> {
    let (exit_code, launch_probe) = match kind {
        SpawnFailureKind::ProgramNotFound => {
            (127, probe::unknown_program(&target.line.launch, message))
        }
        SpawnFailureKind::CwdNotFound => (1, probe::unknown_cwd(&target.cwd)),
        _ => {
            let code = match kind {
                SpawnFailureKind::Wrap => ErrorCode::ProviderUnavailable,
                _ => ErrorCode::CommandFailed,
            };
            return Err(
                FlowError::new(code, format!("{message}; the tests did not run"))
                    .with("command", target.line.shown.clone()),
            );
        }
    };
    Ok(Ran {
        exit_code,
        output: format!("sluice: {message}\n"),
        lost_bytes: 0,
        spill_path: None,
        place: None,
        launch_probe: Some(launch_probe),
        container: None,
    })
}

/// A run cut short (its time limit, its caller, a stop request) is an
/// error that keeps the end of what it printed.
fn stopped(out: &Outcome, target: &Target) -> FlowResult<()> {
    if !(out.timed_out || out.aborted || out.interrupted.is_some()) {
        return Ok(());
    }
    let output = whole(&out.stdout).0;
    let (tail, dropped) = tail(&output, TAIL_BYTES);
    let limit = out.timeout.as_millis() as u64;
    let e = FlowError::new(
        ErrorCode::Timeout,
        format!("the tests did not finish within {limit} ms and were stopped (TERM, then KILL after the grace period); the end of what they printed is in this error's tail. Raise timeoutMs (cap 600000) or select fewer tests"),
    )
    .with("command", target.line.shown.clone())
    .with("timeoutMs", limit)
    .with("elapsedMs", out.elapsed.as_millis() as u64)
    .with("tail", tail.to_string())
    .with("tailTruncated", dropped > 0)
    .with("tailDroppedBytes", dropped);
    Err(out.stopped(e))
}

fn ran(out: &Outcome, exit_code: i32) -> Ran {
    let (output, lost_bytes) = whole(&out.stdout);
    Ran {
        exit_code,
        output,
        lost_bytes,
        spill_path: out
            .stdout
            .spill
            .as_ref()
            .filter(|_| out.stdout.dropped_bytes > 0)
            .map(|s| s.path.clone()),
        place: None,
        launch_probe: None,
        container: None,
    }
}

/// The whole stream: in memory when nothing was dropped, else its spill
/// file (whose end may be cut at the spill cap), else head and tail; with
/// the bytes that could not be kept.
fn whole(c: &exec::Captured) -> (String, u64) {
    if c.dropped_bytes == 0 {
        return (String::from_utf8_lossy(&c.head).into_owned(), 0);
    }
    if let Some(spill) = &c.spill {
        if let Ok(bytes) = std::fs::read(&spill.path) {
            let mut text = String::from_utf8_lossy(&bytes).into_owned();
            if spill.complete {
                return (text, 0);
            }
            // The spill holds the start, up to its cap; the end is in memory.
            let lost = c
                .total_bytes
                .saturating_sub(bytes.len() as u64 + c.tail.len() as u64);
            text.push_str(&format!("\n[{lost} bytes omitted]\n"));
            text.push_str(&String::from_utf8_lossy(&c.tail));
            return (text, lost);
        }
    }
    let mut text = String::from_utf8_lossy(&c.head).into_owned();
    text.push_str(&String::from_utf8_lossy(&c.tail));
    (text, c.dropped_bytes)
}

/// The last `bytes` of `output` (a result shows [`TAIL_BYTES`]), cut at
/// a character boundary, and how many bytes come before it.
pub fn tail(output: &str, bytes: usize) -> (&str, u64) {
    if output.len() <= bytes {
        return (output, 0);
    }
    let mut start = output.len() - bytes;
    while !output.is_char_boundary(start) {
        start += 1;
    }
    (&output[start..], start as u64)
}
