//! `bash`: runs one command line, or a script delivered as data to an
//! interpreter, and returns its exit code and bounded output.
//!
//! Two shapes, told apart by where the payload is parsed:
//! - `command`: a line for the platform shell (`/bin/sh -c`), run exactly
//!   as written with its own arguments;
//! - `script` + `interpreter` (default `bash`) + `args`: program text fed to
//!   the interpreter on stdin, so nothing quotes or escapes it, and `args`
//!   reach it as arguments, never as interpolated text.
//!
//! A non-zero exit is a value. The error channel is for what is not a
//! verdict on the command: bad input, a refused permission, the hermetic
//! pre-check, a timeout (which still carries everything the command printed)
//! and a launch the host could not perform.
//!
//! With `background = true` the command becomes a job of the run (see
//! [`crate::exec::job`]) and the output is its handle: `jobId`, `pid`,
//! `status`.

pub mod hermetic;

mod routed;

use super::probe::{self, InvalidProbe};
use super::shape::{bounded, Bounded};
use super::{choice, closed, field, nested, Context, Envelope, Flow, FlowSpec, Tier};
use crate::credentials::Held;
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::exec::job::StartError;
use crate::exec::{self, CommandLine, Outcome, SpawnFailureKind};
use crate::kernel::gate::Authorized;
use crate::kernel::pattern::Vars;
use crate::kernel::{programs, shell, Action};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Ten minutes, the default for `timeoutMs`.
pub const DEFAULT_TIMEOUT_MS: u64 = 10 * 60 * 1000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Unhermetic,
    Hermetic,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Input {
    pub command: Option<String>,
    pub script: Option<String>,
    pub interpreter: Option<String>,
    pub args: Option<Vec<String>>,
    pub stdin: Option<String>,
    pub cwd: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, Held>,
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub mode: Mode,
    pub reads: Option<Vec<String>>,
    pub writes: Option<Vec<String>>,
    #[serde(default)]
    pub background: bool,
    pub container: Option<String>,
    /// A strictly wider sandbox mode for this one call, granted only when
    /// the person asked agrees.
    pub sandbox_permissions: Option<String>,
    /// Why the wider mode is needed, shown when asking.
    pub justification: Option<String>,
}

/// The result of a command that ran to its end.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finished {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub stdout_dropped_bytes: u64,
    pub stderr_dropped_bytes: u64,
    /// The signal that ended the command (`exitCode` is then 128 + its number).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// The complete stream, when it was truncated and could be kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_spill_path: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_spill_path: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid_probe: Option<InvalidProbe>,
    /// How the command was confined, and whether the sandbox refused it a
    /// file operation; absent when the grants confine nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Place>,
}

impl Finished {
    /// The result of a command that ran to its end, from its outcome and
    /// bounded streams; no probe, no place yet.
    fn ran(
        out: &Outcome,
        exit_code: i32,
        (stdout, stderr): (Bounded, Bounded),
        signal: Option<String>,
    ) -> Finished {
        Finished {
            exit_code,
            stdout_truncated: stdout.truncated,
            stderr_truncated: stderr.truncated,
            stdout_dropped_bytes: stdout.dropped_bytes,
            stderr_dropped_bytes: stderr.dropped_bytes,
            stdout: stdout.text,
            stderr: stderr.text,
            signal,
            stdout_spill_path: spill_path(&out.stdout),
            stderr_spill_path: spill_path(&out.stderr),
            invalid_probe: None,
            sandbox: None,
        }
    }
}

pub use super::shape::Place;

/// The handle of a background job.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Started {
    pub job_id: u64,
    pub pid: u32,
    pub status: &'static str,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Output {
    // Boxed: the sandbox facts make a finished result many times a job handle.
    Finished(Box<Finished>),
    Started(Started),
}

/// One planned call.
pub struct Bash {
    /// What the policy saw and listings show.
    label: String,
    launch: CommandLine,
    stdin: Option<Vec<u8>>,
    cwd: PathBuf,
    /// The declared entries given as text.
    env: BTreeMap<String, String>,
    /// The declared entries that are credentials, whose secrets go in only
    /// when the command starts ([`Bash::declared_env`]).
    secrets: BTreeMap<String, Held>,
    timeout: Duration,
    background: bool,
    /// A wider sandbox mode asked for, and why.
    wider: Option<(crate::sandbox::Mode, String)>,
    /// `cwd` as given: inside a container it names the container's folder.
    given_cwd: Option<String>,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "command": {"type": "string", "description": "A command line, run by the platform shell (/bin/sh -c) exactly as written. For bash syntax give `script` (default interpreter bash). Give this or `script`."},
            "script": {"type": "string", "description": "Program text delivered to `interpreter` on stdin; nothing quotes or escapes it."},
            "interpreter": {"type": "string", "description": "Program that runs `script` (default bash): bash, zsh, sh and dash get -s, python and python3 get -, others nothing."},
            "args": {"type": "array", "items": {"type": "string"}, "description": "Arguments for `script`, passed as arguments, never interpolated."},
            "stdin": {"type": "string", "description": "Text written to the command's stdin (with `command` only). Without it stdin is closed."},
            "cwd": {"type": "string", "description": "Working folder, relative to the workspace or absolute (default: the workspace)."},
            "env": {"type": "object", "additionalProperties": super::held_schema(), "description": "Extra environment entries, applied after the allowlist (PATH, HOME, USER, LANG, LC_*, TERM, TMPDIR, SHELL): text, or sluice.credential(NAME) (needs cred:use:NAME@command; not with background)."},
            "timeoutMs": {"type": "integer", "minimum": 1, "description": "Milliseconds before the command is stopped (default 600000, also the cap)."},
            "mode": {"type": "string", "enum": ["unhermetic", "hermetic"], "description": "hermetic checks the command's literal paths against `reads` and `writes` before it runs."},
            "reads": {"type": "array", "items": {"type": "string"}, "description": "Hermetic mode: path globs the command may read."},
            "writes": {"type": "array", "items": {"type": "string"}, "description": "Hermetic mode: path globs the command may write."},
            "background": {"type": "boolean", "description": "Start the command as a job and return its handle at once (no timeout)."},
            "container": {"type": "string", "description": "A container to run in (the policy's `route` may refuse or rewrite it); provider_unavailable when the run has no route there (no --container-engine, not declared). Relative cwd is under the container's workdir."},
            "sandboxPermissions": {"type": "string", "enum": ["workspace-write", "danger-full-access"], "description": "Run this once with a strictly wider sandbox mode than the policy gives; asks first, showing `justification`. Give both or neither."},
            "justification": {"type": "string", "description": "Why the wider sandbox mode is needed; shown when asking."}
        }
    })
}

/// The audit's one-line gist of an input: its command line, or its
/// script after the interpreter that runs it.
fn summary(input: &Value) -> String {
    let text = |k: &str| input.get(k).and_then(Value::as_str);
    match (text("command"), text("script")) {
        (Some(command), _) => command.to_string(),
        (None, Some(script)) => format!("{}: {script}", text("interpreter").unwrap_or("bash")),
        (None, None) => input.to_string(),
    }
}

impl Flow for Bash {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "bash",
        description: "Runs a command line or an interpreter script and returns its exit code and bounded stdout and stderr; can start it as a background job.",
        tier: Tier::Irreversible,
        actions: &[Action::ProcSpawn, Action::CredUse],
        read_only: false,
        schema,
        summary,
        starts_jobs: true,
        stored_once: None,
        errors: &[ErrorCode::OutsideDeclaredReads, ErrorCode::OutsideDeclaredWrites, ErrorCode::OutsideContainer, ErrorCode::CommandFailed, ErrorCode::Timeout, ErrorCode::ProviderUnavailable],
    };

    fn output_schema() -> Value {
        let text = |what: &str| field("string", what);
        let count = |what: &str| field("integer", what);
        let probe = closed(
            &[
                ("reason", choice(&["unknown-command", "unknown-path"], "unknown-command: no such program or interpreter; unknown-path: no such working folder.")),
                ("evidence", text("What the host observed.")),
                ("message", text("What the result does and does not prove.")),
            ],
            &[],
        );
        let finished = closed(
            &[
                ("exitCode", count("The exit status; a non-zero exit is a value, not an error (128+N after signal N).")),
                ("stdout", text("At most 30,000 bytes: the first and last 15,000 with \"[N bytes omitted]\" between.")),
                ("stderr", text("Bounded like stdout.")),
                ("stdoutTruncated", field("boolean", "Whether stdout is a fragment: never write it to a file as if it were the output.")),
                ("stderrTruncated", field("boolean", "Whether stderr is a fragment.")),
                ("stdoutDroppedBytes", count("Bytes of stdout left out.")),
                ("stderrDroppedBytes", count("Bytes of stderr left out.")),
            ],
            &[
                ("signal", text("The signal that ended the command, e.g. \"SIGKILL\".")),
                ("stdoutSpillPath", text("A file with the complete stdout (up to 64 MiB) when it was truncated, kept while the run lasts or with --keep-spill.")),
                ("stderrSpillPath", text("A file with the complete stderr, like stdoutSpillPath.")),
                ("invalidProbe", nested("InvalidProbe", "Present when the command never reached any code, so its exit code is no verdict on it.", probe)),
                ("sandbox", super::shape::sandbox_schema(true)),
            ],
        );
        let started = closed(
            &[
                ("jobId", count("The job's number in the run.")),
                ("pid", count("The job's process id.")),
                ("status", choice(&["running"], "A job starts running.")),
            ],
            &[],
        );
        // Untagged: a finished command's result, or a job's handle.
        json!({"type": "object", "oneOf": [
            nested("BashOutput", "A command that ran to its end.", finished),
            nested("Job", "A background job's handle (background = true).", started),
        ]})
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        let finished = |full: bool, sandbox: Option<Place>| {
            let spill = full.then(|| PathBuf::from("/tmp/spill"));
            Output::Finished(Box::new(Finished {
                exit_code: 137,
                stdout: "hi\n".into(),
                stderr: String::new(),
                stdout_truncated: full,
                stderr_truncated: full,
                stdout_dropped_bytes: 0,
                stderr_dropped_bytes: 0,
                signal: full.then(|| "SIGKILL".into()),
                stdout_spill_path: spill.clone(),
                stderr_spill_path: spill,
                invalid_probe: full.then(|| probe::unknown_cwd(Path::new("/nowhere"))),
                sandbox,
            }))
        };
        let started = Output::Started(Started {
            job_id: 1,
            pid: 42,
            status: "running",
        });
        vec![
            finished(true, Some(Place::Host(super::shape::sandbox_sample(true)))),
            finished(
                false,
                Some(Place::Host(super::shape::sandbox_sample(false))),
            ),
            finished(
                false,
                Some(Place::Host(super::shape::sandbox_sample_limited())),
            ),
            finished(
                false,
                Some(Place::Container(super::shape::container_sample())),
            ),
            finished(false, None),
            started,
        ]
    }

    fn validate(input: &Input) -> FlowResult<()> {
        validate(input)
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        plan(ctx, input)
    }

    fn wider(&self) -> Option<super::Wider> {
        let (mode, justification) = self.wider.clone()?;
        Some(super::Wider {
            command: self.label.clone(),
            mode,
            justification,
        })
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        // A wider sandbox was refused for a routed command before it ran
        // (`Context::ask_wider`).
        if let Some(name) = ctx.route.container() {
            return self.in_container(ctx, name).await;
        }
        let exec = &ctx.exec;
        let mut req = ctx.command(self.launch.clone());
        req.cwd = Some(self.cwd.clone());
        req.env = self.declared_env(ctx)?;
        req.stdin = self.stdin.clone();
        req.timeout = Some(self.timeout);
        req.output_budget = Some(exec::STREAM_BUDGET);
        let mut confined = ctx.confine(&self.label)?;
        if !self.secrets.is_empty() {
            confined = confined.map(crate::sandbox::Confined::alone);
        }
        if let Some(c) = &confined {
            c.attach(&mut req);
        }
        let spec = exec::resolve(req, &exec.limits)?;
        if self.background {
            return self.start(ctx, spec, confined);
        }
        let outcome = ctx.run_command(spec).await;
        self.finish(outcome, confined.as_ref())
    }
}

fn refuse(field: &str, message: &str) -> FlowResult<()> {
    Err(FlowError::invalid_input(field, message))
}

/// The refused combinations, each naming the fix.
fn validate(i: &Input) -> FlowResult<()> {
    match (&i.command, &i.script) {
        (Some(_), Some(_)) => return refuse("script", "give `command` (a command line) or `script` (program text for `interpreter`), not both"),
        (None, None) => return refuse("command", "give `command`, e.g. sluice.bash{command = \"ls -la\"}, or `script` with an `interpreter`"),
        _ => {}
    }
    if i.script.is_some() && i.stdin.is_some() {
        return refuse("stdin", "`script` is delivered on stdin, so `stdin` cannot be given with it; read data inside the script, or use `command` with `stdin`");
    }
    if i.command.is_some() && i.args.is_some() {
        return refuse(
            "args",
            "`args` go to a `script`; with `command`, write the arguments in the command line",
        );
    }
    if i.command.is_some() && i.interpreter.is_some() {
        return refuse("interpreter", "`interpreter` runs a `script`; give the program text as `script`, or drop `interpreter` and write the interpreter in `command`");
    }
    if i.mode == Mode::Hermetic && i.container.is_some() {
        return refuse("container", "hermetic mode checks host paths before spawning and cannot vouch for a container; drop `container` or use mode = \"unhermetic\"");
    }
    if i.mode == Mode::Hermetic && (i.reads.is_none() || i.writes.is_none()) {
        let field = if i.reads.is_none() { "reads" } else { "writes" };
        return refuse(field, "mode = \"hermetic\" needs both `reads` and `writes` (path globs; an empty list declares nothing)");
    }
    if i.mode == Mode::Unhermetic && (i.reads.is_some() || i.writes.is_some()) {
        let field = if i.reads.is_some() { "reads" } else { "writes" };
        return refuse(field, "`reads` and `writes` declare a hermetic envelope; add mode = \"hermetic\" or drop them");
    }
    match (&i.sandbox_permissions, &i.justification) {
        (Some(_), None) => return refuse("justification", "sandboxPermissions needs a `justification`: why this command needs the wider mode (it is shown when asking)"),
        (None, Some(_)) => return refuse("sandboxPermissions", "`justification` goes with sandboxPermissions (\"workspace-write\" or \"danger-full-access\"); give both or neither"),
        (Some(m), Some(_)) if crate::sandbox::Mode::parse(m).is_none_or(|m| m == crate::sandbox::Mode::ReadOnly) => {
            return refuse("sandboxPermissions", "sandboxPermissions is \"workspace-write\" or \"danger-full-access\" (a wider mode than the policy gives)")
        }
        _ => {}
    }
    if i.timeout_ms == Some(0) {
        return refuse(
            "timeoutMs",
            "timeoutMs must be at least 1 (default 600000, ten minutes)",
        );
    }
    if i.background && i.timeout_ms.is_some() {
        return refuse(
            "timeoutMs",
            "a background job has no timeout; drop `timeoutMs` and use job:wait(ms) and job:kill()",
        );
    }
    if let Some(interp) = &i.interpreter {
        if interp.is_empty() || interp.contains(char::is_whitespace) || interp.contains('\0') {
            return refuse("interpreter", "`interpreter` is one program name or path, e.g. \"python3\"; pass its options in `args`");
        }
    }
    if let Some(name) = i
        .env
        .keys()
        .find(|k| k.starts_with(exec::env::MANAGED_PREFIX))
    {
        return refuse(&format!("env.{name}"), "SLUICE_* names are set by sluice for each call (run id, call sequence, workspace) and cannot be given; choose another name");
    }
    // The loader and the shell sluice starts act on these before the
    // line's first command, where no rule can judge them (the table:
    // crate::kernel::programs::VARS); every other entry is judged with the
    // line as a leading assignment.
    if let Some(name) = i.env.keys().find(|k| programs::steers_startup(k)) {
        return refuse(
            &format!("env.{name}"),
            &format!("{name} changes what runs before or instead of the command (the loader, the shell's startup), which the policy cannot see in `env`; write it in the command line (`{name}=... cmd`), where the policy judges it"),
        );
    }
    if i.mode == Mode::Hermetic && i.env.contains_key("HOME") {
        return refuse("env.HOME", "hermetic mode resolves `~` against sluice's home folder; a different HOME would send `~` paths elsewhere than the check saw. Write the paths out instead");
    }
    let shapes: BTreeMap<String, String> =
        i.env.iter().map(|(k, v)| (k.clone(), v.shape())).collect();
    exec::env::validate(&shapes)?;
    for (name, held) in &i.env {
        let Held::Credential(r) = held else { continue };
        if programs::var_of(name).is_some() {
            return refuse(&format!("env.{name}"), &format!("{name} makes programs run a command or read a configuration it names, so it may not hold credential `{}`; give the credential another variable", r.credential));
        }
        if i.background {
            return refuse(&format!("env.{name}"), &format!("a background job's output is read later, where sluice cannot cut credential `{}` out of it; run the command in the foreground, or give the job no credential", r.credential));
        }
    }
    if let Some(c) = &i.container {
        if !crate::container::declared::valid_name(c) {
            return refuse("container", "a container name is letters, digits, '_', '.' and '-', starting with a letter or digit");
        }
    }
    Ok(())
}

/// How an interpreter is told to read its program from stdin.
fn stdin_flag(interpreter: &str) -> Option<&'static str> {
    let name = Path::new(interpreter)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(interpreter);
    match name {
        "bash" | "zsh" | "sh" | "dash" => Some("-s"),
        "python" | "python3" => Some("-"),
        _ => None,
    }
}

fn is_shell(interpreter: &str) -> bool {
    stdin_flag(interpreter) == Some("-s")
}

fn plan(ctx: &Context, input: Input) -> FlowResult<(Bash, Envelope)> {
    let given_cwd = input.cwd.clone();
    let cwd = match &input.cwd {
        Some(c) if c.contains('\0') => {
            return Err(FlowError::invalid_input("cwd", "cwd contains a NUL byte"))
        }
        Some(c) => ctx.workspace.join(c),
        None => ctx.workspace.clone(),
    };
    let cwd = crate::fsops::path::canonical_lenient(&cwd).unwrap_or(cwd);
    let (label, launch, stdin, checked) = match (input.command, input.script) {
        (Some(command), _) => {
            if command.contains('\0') {
                return Err(FlowError::invalid_input(
                    "command",
                    "command contains a NUL byte",
                ));
            }
            let launch = CommandLine::Shell(command.clone());
            (
                command.clone(),
                launch,
                input.stdin.map(String::into_bytes),
                vec![command],
            )
        }
        (None, Some(script)) => {
            let interpreter = input.interpreter.unwrap_or_else(|| "bash".into());
            let args = input.args.unwrap_or_default();
            let mut argv = vec![interpreter.clone()];
            argv.extend(stdin_flag(&interpreter).map(String::from));
            if is_shell(&interpreter) && !args.is_empty() {
                argv.push("--".into());
            }
            argv.extend(args);
            let line: Vec<String> = argv.iter().map(|w| shell::quote(w)).collect();
            let line = line.join(" ");
            // A shell script is checked command by command, like a line.
            let mut checked = vec![line.clone()];
            if is_shell(&interpreter) {
                checked.push(script.clone());
            }
            let launch = CommandLine::Argv(argv.into_iter().map(Into::into).collect());
            (line, launch, Some(script.into_bytes()), checked)
        }
        (None, None) => unreachable!("validate requires command or script"),
    };
    let mut envelope = Envelope {
        tier: Tier::Irreversible,
        reads: vec![],
        writes: vec![],
        commands: checked.clone(),
        network: vec![],
        cwd: Some(cwd.clone()),
        container: input.container,
        anywhere: true,
    };
    if input.mode == Mode::Hermetic {
        let vars = Vars::new(ctx.workspace.clone());
        let declared = hermetic::Declared::new(
            input.reads.as_deref().unwrap_or_default(),
            input.writes.as_deref().unwrap_or_default(),
            &vars,
        )?;
        let text = match &launch {
            CommandLine::Shell(c) => c.clone(),
            CommandLine::Argv(_) if checked.len() == 2 => checked[1].clone(),
            CommandLine::Argv(_) => return refuse("mode", "hermetic mode checks shell text only; a script for another interpreter cannot be checked lexically, so run it with mode = \"unhermetic\"").map(|()| unreachable!()),
        };
        let touched = hermetic::check(&text, &cwd, &declared, &vars)?;
        envelope.tier = Tier::Compensable;
        envelope.anywhere = false;
        envelope.reads = touched.reads;
        envelope.writes = touched.writes;
    }
    for held in input.env.values() {
        if let Held::Credential(r) = held {
            envelope.network.push(r.capability("command"));
        }
    }
    let timeout = Duration::from_millis(input.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS));
    Ok((
        Bash {
            label,
            launch,
            stdin,
            cwd,
            env: input
                .env
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.text()?.to_string())))
                .collect(),
            secrets: input
                .env
                .into_iter()
                .filter(|(_, v)| v.text().is_none())
                .collect(),
            timeout,
            background: input.background,
            wider: input
                .sandbox_permissions
                .as_deref()
                .and_then(crate::sandbox::Mode::parse)
                .zip(input.justification),
            given_cwd,
        },
        envelope,
    ))
}

impl Bash {
    /// The command's declared environment, each credential's secret put
    /// in: only now, once the call was authorized.
    fn declared_env(&self, ctx: &Context) -> FlowResult<BTreeMap<String, String>> {
        let mut env = self.env.clone();
        for (name, held) in &self.secrets {
            let value = held.reveal(&ctx.credentials, &format!("`env.{name}`"))?;
            if value.contains('\0') {
                return Err(FlowError::invalid_input(
                    &format!("env.{name}"),
                    "the credential's secret holds a NUL byte, which no environment value can carry",
                ));
            }
            env.insert(name.clone(), value);
        }
        Ok(env)
    }

    fn start(
        self,
        ctx: &Context,
        spec: exec::Spec,
        confined: Option<crate::sandbox::Confined>,
    ) -> FlowResult<Output> {
        // A background job's sandbox facts, runnerFailed included, are
        // known only once it settles: they go on the job.
        let facts = confined.map(|c| -> exec::job::Facts {
            std::sync::Arc::new(move |exit, stderr, limits| {
                let exit = exit.unwrap_or(-1);
                let mut facts = c.facts(exit, stderr, limits);
                facts.runner_failed = c.runner_failed(exit, stderr);
                serde_json::to_value(facts).expect("facts serialize")
            })
        });
        match ctx.exec.jobs.start_with(spec, self.label.clone(), facts) {
            Ok(job) => Ok(Output::Started(Started {
                job_id: job.id,
                pid: job.pid,
                status: "running",
            })),
            Err(e) => Err(self.start_error(e)),
        }
    }

    /// A job that could not start.
    fn start_error(&self, e: StartError) -> FlowError {
        match e {
            StartError::TooMany { max } => FlowError::new(
                ErrorCode::CommandFailed,
                format!("this run already has {max} background jobs running, the most it allows; wait for one (job:wait) or stop one (job:kill) first, or raise the limit with sluice run --max-jobs N"),
            )
            .with("limit", max),
            StartError::Spawn(f) => self.launch_error(&f.message, f.kind),
        }
    }

    /// A launch the host could not perform. Missing programs and folders
    /// are reported as an invalid probe on the foreground path instead.
    fn launch_error(&self, message: &str, kind: SpawnFailureKind) -> FlowError {
        let code = match kind {
            SpawnFailureKind::Wrap => ErrorCode::ProviderUnavailable,
            _ => ErrorCode::CommandFailed,
        };
        FlowError::new(code, format!("{message}; the command did not run"))
            .with("command", self.label.clone())
    }

    fn finish(
        self,
        mut out: Outcome,
        confined: Option<&crate::sandbox::Confined>,
    ) -> FlowResult<Output> {
        if let Some(c) = confined {
            let said = String::from_utf8_lossy(&out.stderr.head).into_owned();
            if let Some((program, why)) = c.missing_program(&said) {
                let path_var = self
                    .env
                    .get("PATH")
                    .cloned()
                    .or_else(|| std::env::var("PATH").ok());
                let message = match c.unseen(program, path_var.as_deref()) {
                    Some(unseen) => format!("cannot start {program}: {why}: {unseen}"),
                    None => format!("cannot start {program}: {why}"),
                };
                out.spawn_failure = Some(exec::SpawnFailure {
                    kind: SpawnFailureKind::ProgramNotFound,
                    message,
                });
            }
        }
        if let Some(f) = &out.spawn_failure {
            let probe = match f.kind {
                SpawnFailureKind::ProgramNotFound => {
                    Some(probe::unknown_program(&self.launch, &f.message))
                }
                SpawnFailureKind::CwdNotFound => Some(probe::unknown_cwd(&self.cwd)),
                _ => None,
            };
            let Some(probe) = probe else {
                return Err(self.launch_error(&f.message, f.kind));
            };
            let code = if f.kind == SpawnFailureKind::CwdNotFound {
                1
            } else {
                127
            };
            return Ok(Output::Finished(Box::new(Finished {
                exit_code: code,
                stdout: String::new(),
                stderr: format!("sluice: {}\n", f.message),
                stdout_truncated: false,
                stderr_truncated: false,
                stdout_dropped_bytes: 0,
                stderr_dropped_bytes: 0,
                signal: None,
                stdout_spill_path: None,
                stderr_spill_path: None,
                invalid_probe: Some(probe),
                sandbox: None,
            })));
        }
        let stdout = bounded(&out.stdout);
        let stderr = bounded(&out.stderr);
        if out.timed_out || out.aborted || out.interrupted.is_some() {
            return Err(self.timeout_error(&out, stdout, stderr));
        }
        let exit_code = out.shell_status().unwrap_or(-1);
        if let Some(c) = confined.filter(|c| c.runner_failed(exit_code, &stderr.text)) {
            return Err(FlowError::new(
                ErrorCode::ProviderUnavailable,
                format!(
                    "the sandbox runner ({}) failed before the command ran: {}; the command did not run",
                    c.runner,
                    stderr.text.trim()
                ),
            )
            .with("command", self.label.clone())
            .with("runnerFailed", true));
        }
        let sandbox =
            confined.map(|c| Place::Host(c.facts(exit_code, &stderr.text, out.limits.as_ref())));
        let signal = out
            .signal
            .clone()
            .or_else(|| confined.and_then(|c| c.signal(exit_code)));
        // Only a 127 can mean the program was never found; the line is
        // taken apart for that case alone, off the common path.
        let invalid_probe = match (exit_code, &self.launch) {
            (127, CommandLine::Shell(line)) => {
                let path_var = match self.env.get("PATH") {
                    Some(p) => Some(p.clone()),
                    None => std::env::var("PATH").ok(),
                };
                probe::missing_program(line, &self.cwd, path_var.as_deref())
            }
            _ => None,
        };
        let finished = Finished::ran(&out, exit_code, (stdout, stderr), signal);
        Ok(Output::Finished(Box::new(Finished {
            invalid_probe,
            sandbox,
            ..finished
        })))
    }

    /// The `timeout` error keeps everything the command printed.
    fn timeout_error(&self, out: &Outcome, stdout: Bounded, stderr: Bounded) -> FlowError {
        let limit = out.timeout.as_millis() as u64;
        let mut e = FlowError::new(
            ErrorCode::Timeout,
            format!(
                "the command did not finish within {limit} ms and was stopped (TERM, then KILL after the grace period); what it printed is in this error's stdout and stderr. Raise timeoutMs (cap 600000) or run it with background = true"
            ),
        )
        .with("command", self.label.clone())
        .with("timeoutMs", limit)
        .with("elapsedMs", out.elapsed.as_millis() as u64)
        .with("stdoutTruncated", stdout.truncated)
        .with("stderrTruncated", stderr.truncated)
        .with("stdoutDroppedBytes", stdout.dropped_bytes)
        .with("stderrDroppedBytes", stderr.dropped_bytes)
        .with("stdout", stdout.text)
        .with("stderr", stderr.text);
        if let Some(p) = spill_path(&out.stdout) {
            e = e.with("stdoutSpillPath", p.display().to_string());
        }
        if let Some(p) = spill_path(&out.stderr) {
            e = e.with("stderrSpillPath", p.display().to_string());
        }
        out.stopped(e)
    }
}

fn spill_path(c: &exec::Captured) -> Option<PathBuf> {
    c.spill
        .as_ref()
        .filter(|_| c.dropped_bytes > 0)
        .map(|s| s.path.clone())
}
