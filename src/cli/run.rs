//! `sluice run`: run a workflow script.

use super::policy_source;
use crate::audit::location::Location;
use crate::credentials::Credentials;
use crate::flows::{lua_name, Registry};
use crate::interrupt;
use crate::kernel::approval::Prompt;
use crate::net::dns::Hosts;
use crate::net::search;
use crate::runtime::{Runtime, RuntimeBuilder, ScriptError};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// What `sluice run --help` says after the flows: the record, errors and
/// signals.
const ABOUT_RUNS: &str = "Every run is recorded in the workspace's audit database (.sluice/audit.db; --audit PATH, SLUICE_AUDIT, or \
--no-audit): each call with its input, decisions and outcome, hash-chained. `sluice audit list` shows the runs, \
`sluice replay RUN` re-runs one against its record, `sluice resume RUN` continues one that was interrupted.\n\n\
A script error exits 1 and prints the Lua message with file:line and a traceback.\n\n\
SIGINT or SIGTERM ends the run within 2 s, exit 128 + the signal, its record sealed with status `interrupted`: a \
running command is killed at once (its whole process group) and recorded as STOPPED with what it printed so far; a \
grep or glob stops at its next file, likewise recorded; a sleep or a request stops at once; the script stops at its \
next flow step or Lua instruction check and starts no new call; background jobs get TERM, then KILL 300 ms later. \
What cannot notice (a finalizer, a script that catches the interrupt) is ended at once 1 s after the signal, and a \
call then still running is recorded with its outcome unknown. A second signal ends it at once, still sealed. \
`sluice resume` runs a stopped call again, or, for an irreversible one, stops there until given --retry-unknown.";

/// `sluice run --help`'s long text. The flows a script sees are named from
/// the registry, so the help lists every flow there is, in manifest order.
fn long_about() -> String {
    let flows: Vec<String> = Registry::standard()
        .specs()
        .map(|s| format!("sluice.{}", lua_name(s.name)))
        .collect();
    format!(
        "Run a workflow script in a workspace. The script sees the flows as {} (and sluice.call(name, input); \
`sluice flows` lists them with their fields), its arguments as sluice.args and the workspace as \
sluice.workspace. Relative paths resolve against the workspace. Every call's capabilities pass the \
policies (--policy; the built-in default grants reads and writes inside the workspace, commands and public GETs, and asks for the rest).\n\n\
{ABOUT_RUNS}",
        flows.join(", ")
    )
}

/// Run a workflow script in a workspace.
#[derive(Debug, Args)]
#[command(
    long_about = long_about(),
    after_help = "Examples:\n  sluice run examples/hello.lua --workspace /tmp/w\n  sluice run fix.lua src/main.rs -- --flag-for-the-script\n  sluice run fix.lua --policy org.lua --policy project.lua --approve 'net:post:api.example.com'\n  sluice run audit.lua --policy readonly --ceiling 'fs:read:/srv/**'\n  SLUICE_CREDENTIAL_EXA=... sluice run research.lua --search exa --approve 'net:post:api.exa.ai'\n  sluice run examples/agent.lua --provider local=openai:http://127.0.0.1:8080/v1 --approve 'model:call:local/**' --approve 'net:private:http://127.0.0.1:8080'\n  sluice run examples/agent.lua --otlp http://127.0.0.1:6006"
)]
pub struct RunArgs {
    /// The Lua workflow to run.
    pub script: PathBuf,
    /// Arguments for the script (sluice.args); put them after `--` if they start with a dash.
    pub args: Vec<String>,
    /// The run's id instead of a new one (what a fleet worker gives the run it takes: its
    /// workflow's id); 1 to 64 letters, digits, '.', '_' or '-'. A run of that id already in the
    /// record is refused.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    #[command(flatten)]
    pub otlp: super::otlp::RunOtlp,
    #[command(flatten)]
    pub options: RunOptions,
}

/// How a run is set up, whatever it runs: a script (`sluice run`,
/// `resume`) or a served client's calls (`sluice mcp`).
#[derive(Debug, Args)]
pub struct RunOptions {
    /// The folder the workflow works in [default: the current folder].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    #[command(flatten)]
    pub grants: Grants,
    /// Keep the files that hold commands' complete output when it overflowed the in-memory bound
    /// (results name them as stdoutSpillPath/stderrSpillPath); by default they are removed when the run ends.
    #[arg(long)]
    pub keep_spill: bool,
    /// Background jobs (sluice.bash{background = true}) that may run at once; one more is refused.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_jobs: u16,
    /// Calls that spawn commands (bash, shell_command) running at once across the script's tasks
    /// (sluice.spawn, sluice.map) [default: the machine's cores]; more wait their turn.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub max_procs: Option<u16>,
    /// Calls that send requests (fetch, http-post, webfetch, websearch, model) running at once
    /// across the script's tasks; more wait their turn.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_requests: u16,
    /// Resolve HOST to these addresses instead of asking DNS, like curl's --resolve:
    /// HOST=ADDR[,ADDR...] (repeatable). Destination checks judge these addresses.
    #[arg(long, value_name = "HOST=ADDR")]
    pub resolve: Vec<String>,
    /// The provider that answers sluice.websearch (none by default, so websearch fails with
    /// provider_unavailable): `exa` (https://api.exa.ai/search, its key in credential `exa`),
    /// `exa=URL` (Exa's API at another endpoint), or `searxng=URL` (a SearXNG instance's base URL,
    /// with `json` in its search.formats). Calls need net:post for the endpoint's host.
    #[arg(long, value_name = "PROVIDER")]
    pub search: Option<String>,
    /// The credentials file: `name = value` lines, mode 0600 (a file others may read is refused).
    /// SLUICE_CREDENTIAL_<NAME> in the environment comes first (`exa` is SLUICE_CREDENTIAL_EXA).
    /// [default: $XDG_CONFIG_HOME/sluice/credentials, else ~/.config/sluice/credentials]
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    /// A model provider for sluice.model: NAME=API:URL (repeatable), the API `openai` (Chat
    /// Completions: OpenAI, vLLM, llama.cpp, Ollama, LiteLLM, OpenRouter) or `anthropic`
    /// (Messages), the URL the API's base (`http://127.0.0.1:8080/v1`). Its key is credential
    /// NAME when set (SLUICE_CREDENTIAL_<NAME>). Calls need model:call:NAME/MODEL; a private
    /// URL also needs its exact net:private:ORIGIN grant.
    #[arg(long, value_name = "NAME=API:URL")]
    pub provider: Vec<String>,
    /// A language server for sluice.lsp and the diagnostics write, edit and apply_patch return:
    /// NAME=EXTENSIONS:COMMAND (repeatable), e.g. --lsp 'python=.py,.pyi:basedpyright-langserver
    /// --stdio'; the command is split at spaces and run confined, never by a shell. A policy's
    /// `lsp` table declares servers with every option (docs/policies.md).
    #[arg(long, value_name = "NAME=EXTS:COMMAND")]
    pub lsp: Vec<String>,
    /// The model sluice.explore's read-only sub-agent runs on: PROVIDER/MODEL, the provider from
    /// --provider or a policy's providers (over a policy's `explore`, whose maxTurns and
    /// maxOutputTokens it keeps). Its calls need model:call:PROVIDER/MODEL.
    #[arg(long, value_name = "PROVIDER/MODEL")]
    pub explore_model: Option<String>,
    /// Record the run here: a SQLite file's path (or sqlite:PATH), or postgres://USER@HOST:PORT/DB
    /// [default: $SLUICE_AUDIT, else WORKSPACE/.sluice/audit.db]. A PostgreSQL password comes from
    /// the credential named `audit` (--credentials, SLUICE_CREDENTIAL_AUDIT), PGPASSWORD or
    /// ~/.pgpass, never the URL. `sluice audit list` shows the runs; `sluice replay RUN` re-runs one.
    #[arg(long, value_name = "PATH|URL", conflicts_with = "no_audit")]
    pub audit: Option<String>,
    /// Do not record the run (it cannot then be audited, replayed or resumed).
    #[arg(long)]
    pub no_audit: bool,
    #[command(flatten)]
    pub retry: AuditRetry,
    #[command(flatten)]
    pub fleet: FleetChild,
}

/// What a fleet worker tells the run process it starts (hidden flags: a
/// person has no use for them).
#[derive(Debug, Args, Clone, Default)]
pub struct FleetChild {
    /// The worker writes a byte to standard input at least every MS
    /// milliseconds; silent longer (stopped, killed), the run ends at once, so another worker can
    /// take it over and this one starts no call when it wakes.
    #[arg(long, value_name = "MS", hide = true)]
    pub worker_pulse: Option<u64>,
    /// The run's lease attempt (Temporal's attempt number): the record's fencing number starts
    /// there, and a takeover raises the run it takes over at least to it.
    #[arg(long, value_name = "N", hide = true)]
    pub lease_attempt: Option<i64>,
    /// What the record calls the script (the submitted file's name), not the worker's copy's path.
    #[arg(long, value_name = "NAME", hide = true)]
    pub script_name: Option<String>,
    /// The run's asks go to the worker on this descriptor; its answers come on standard input.
    #[arg(long, value_name = "FD", hide = true, requires = "worker_pulse")]
    pub worker_asks: Option<i32>,
}

/// How long a run waits for a record's store it lost: shared by `run`,
/// `mcp` and `resume`.
#[derive(Debug, Args)]
pub struct AuditRetry {
    /// How long to wait for the record's store when it becomes unreachable mid-run (a PostgreSQL
    /// server restarting, a network cut): 30s, 2m, 500ms, or 0 to stop at the first failed write.
    /// Meanwhile the rows of calls already made wait in memory (at most 10,000 rows or 64 MiB,
    /// then no call starts until they are written), an irreversible call waits for its intent to
    /// be recorded, and the connection is tried again (after 100 ms, doubling to 5 s). Past it the
    /// run stops, starting no further call, and says which calls the record holds, which ran
    /// unrecorded and which irreversible call's outcome is unknown. A SQLite file is never
    /// unreachable (a locked one is waited for; a full disk fails the run's record at once).
    #[arg(long = "audit-retry", value_name = "DURATION", default_value = "60s",
          value_parser = crate::audit::outage::parse_duration)]
    pub audit_retry: std::time::Duration,
}

/// What a run may do and what confines it: shared by `run` and `resume`.
#[derive(Debug, Args)]
pub struct Grants {
    /// A policy file (repeatable: an organisation's, then a project's; a deny from any wins).
    /// `default`, `readonly`, `ci` and `unconfined` name the built-in policies.
    /// [default: default; for resume, the policies the run used]
    #[arg(long, value_name = "FILE")]
    pub policy: Vec<String>,
    /// Nothing outside these capability patterns is granted, whatever a policy says (repeatable;
    /// a resume keeps the run's own ceiling too).
    #[arg(long, value_name = "PATTERN")]
    pub ceiling: Vec<String>,
    /// Pre-approve asks matching this capability pattern, e.g. 'net:post:api.example.com' (repeatable).
    #[arg(long, value_name = "PATTERN")]
    pub approve: Vec<String>,
    /// What confines commands (bash, shell_command): `auto` (bubblewrap when it works here, else landlock),
    /// `bwrap` or `landlock`. With none working, commands are refused, never run unconfined;
    /// `sluice doctor` says which work. What a command may write and whether it may use the network
    /// follow from the policy's static grants.
    #[arg(long, value_name = "RUNNER", default_value = "auto", value_parser = ["auto", "bwrap", "landlock"])]
    pub sandbox: String,
    /// Reach any container a call names (bash's `container`, or the policy's `route`) through this
    /// engine: `podman` or `docker`, found on sluice's PATH. Without it only the policy's declared
    /// `containers` (and a sealed host's, SLUICE_BASH_CONTAINER) can be reached. A routed command runs
    /// outside sluice's sandbox: the container's mounts bound it (the result says enforcement "partial").
    #[arg(long, value_name = "ENGINE", value_parser = ["podman", "docker"])]
    pub container_engine: Option<String>,
}

pub fn run(args: RunArgs) -> ExitCode {
    let script = args.script.clone();
    let prepared = super::otlp::run_sender(&args.otlp).and_then(|otlp| {
        let builder = configure(&args).and_then(|b| recorded(b, &args.options))?;
        Ok((builder, otlp))
    });
    let (builder, otlp) = match prepared {
        Ok(b) => b,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(2);
        }
    };
    match builder.build() {
        Ok(runtime) => {
            let live = otlp.and_then(|sender| exporter(sender, &args, runtime.run_id()));
            let ended = drive(&runtime, runtime.run_script(&script), Work::Script);
            if let Some(live) = live {
                live.finish();
            }
            ended.exit
        }
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(2)
        }
    }
}

/// `--otlp`'s exporter of run `id`, reading the run's record; one that
/// cannot start is said and the run goes on without it.
fn exporter(
    sender: crate::otel::send::Sender,
    args: &RunArgs,
    id: &str,
) -> Option<crate::otel::live::Live> {
    let opts = &args.options;
    let started =
        audit_target(opts.audit.as_deref(), false, opts.workspace.as_deref()).and_then(|at| {
            let at = at.expect("a record: --otlp conflicts with --no-audit");
            let content = args.otlp.otlp_content;
            super::otlp::follow(sender, &at, opts.credentials.as_deref(), id, content)
        });
    started
        .map_err(|e| eprintln!("sluice: {e}; the run goes on without it"))
        .ok()
}

/// `builder` recording to the database `opts` name (none with
/// `--no-audit`).
pub(crate) fn recorded(
    builder: RuntimeBuilder,
    opts: &RunOptions,
) -> Result<RuntimeBuilder, String> {
    let target = audit_target(
        opts.audit.as_deref(),
        opts.no_audit,
        opts.workspace.as_deref(),
    )?;
    Ok(match target {
        Some(path) => builder.audit(path).audit_retry(opts.retry.audit_retry),
        None => builder.no_audit(),
    })
}

/// The record a run records to, or `None` with `--no-audit`.
pub(crate) fn audit_target(
    flag: Option<&str>,
    off: bool,
    workspace: Option<&Path>,
) -> Result<Option<Location>, String> {
    if off {
        return Ok(None);
    }
    let ws = match workspace {
        Some(ws) => ws.to_path_buf(),
        None => {
            std::env::current_dir().map_err(|e| format!("cannot read the current folder: {e}"))?
        }
    };
    crate::audit::locate(flag, &ws).map(Some)
}

/// A runtime builder for a script from the run options (everything but
/// the audit).
pub(crate) fn configure(args: &RunArgs) -> Result<RuntimeBuilder, String> {
    let mut builder = options(&args.options)?;
    if let Some(id) = &args.run_id {
        builder = builder.run_id(id);
    }
    if let Some(name) = &args.options.fleet.script_name {
        builder = builder.name(name);
    }
    if let Some(n) = args.options.fleet.lease_attempt {
        builder = builder.lease_attempt(n);
    }
    Ok(builder
        .args(args.args.clone())
        .script(&args.script)
        .prompt(Prompt::detect()))
}

/// A runtime builder from the options every run takes (everything but
/// the audit and what it runs).
pub(crate) fn options(args: &RunOptions) -> Result<RuntimeBuilder, String> {
    let mut builder = Runtime::builder()
        .keep_spill(args.keep_spill)
        .max_jobs(usize::from(args.max_jobs))
        .max_requests(usize::from(args.max_requests))
        .sandbox(crate::sandbox::Choice::parse(&args.grants.sandbox).unwrap_or_default());
    if let Some(ms) = args.fleet.worker_pulse {
        let silence = Duration::from_millis(ms);
        if let Some(link) = super::worker_link::watch(silence, args.fleet.worker_asks)? {
            builder = builder.approver(link);
        }
    }
    if let Some(ws) = &args.workspace {
        builder = builder.workspace(ws);
    }
    if let Some(n) = args.max_procs {
        builder = builder.max_procs(usize::from(n));
    }
    builder = containers(builder, &args.grants);
    for policy in &args.grants.policy {
        builder = builder.policy(policy_source(policy));
    }
    for pattern in &args.grants.ceiling {
        builder = builder.ceiling(pattern.clone());
    }
    for pattern in &args.grants.approve {
        builder = builder.approve(pattern.clone());
    }
    if !args.resolve.is_empty() {
        let mut hosts = Hosts::over_system();
        for entry in &args.resolve {
            hosts
                .add_entry(entry)
                .map_err(|e| format!("--resolve {e}"))?;
        }
        builder = builder.dns(std::sync::Arc::new(hosts));
    }
    if let Some(file) = &args.credentials {
        builder = builder.credentials(file);
    }
    for p in &args.provider {
        builder = builder.provider(p);
    }
    for l in &args.lsp {
        builder = builder.lsp_server(l);
    }
    if let Some(m) = &args.explore_model {
        builder = builder.explore_model(m);
    }
    if let Some(text) = &args.search {
        let store = match &args.credentials {
            Some(file) => Credentials::with_file(file),
            None => Credentials::new(),
        };
        let provider =
            search::from_flag(text, store).map_err(|e| format!("--search {text:?}: {e}"))?;
        builder = builder.search(provider);
    }
    Ok(builder)
}

/// The run's container routes from `--container-engine` and the sealed
/// host's variables: `SLUICE_BASH_CONTAINER` (commands run only in that
/// container) and `SLUICE_TEST_CWD` (its folder for relative paths).
pub(crate) fn containers(mut builder: RuntimeBuilder, grants: &Grants) -> RuntimeBuilder {
    if let Some(engine) = &grants.container_engine {
        builder = builder.container_engine(engine);
    }
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let Some(name) = var("SLUICE_BASH_CONTAINER") {
        builder = builder.seal_to_container(name, var("SLUICE_TEST_CWD"));
    }
    builder
}

/// How a script run ended.
pub(crate) struct Ended {
    pub exit: ExitCode,
    /// The script's error (or the stop), if any.
    pub error: Option<String>,
}

/// How long background jobs get to end after TERM when the run was
/// interrupted, before KILL: the run must end within 2 s of the signal
/// (see [`interrupt`]).
const JOBS_GRACE_ON_STOP: Duration = Duration::from_millis(300);

/// What `work` is, for how a stop signal ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Work {
    /// A script: a stop interrupts it.
    Script,
    /// The requests a served run answers (`sluice mcp`): a stop with no
    /// request under way is its client ending the session (Claude Code and
    /// Codex send SIGTERM or SIGINT once done), which ends the run `ok`.
    Served,
}

/// Runs `work` (a script, or the requests a served run answers) to its
/// end (or a stop signal), stops the run's jobs, records how it ended and
/// says so on stderr. A stop signal ends the run within 2 s, sealed: by
/// itself, or by the backstop armed here when the script cannot notice
/// (see [`interrupt`]).
pub(crate) fn drive(
    runtime: &Runtime,
    work: impl std::future::Future<Output = Result<(), ScriptError>>,
    kind: Work,
) -> Ended {
    let tokio = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(t) => t,
        Err(e) => return usage(format!("cannot start the async runtime: {e}")),
    };
    if let Err(e) = interrupt::install_signal_handlers() {
        return usage(format!("cannot install signal handlers: {e}"));
    }
    if let Err(e) = arm_backstop(runtime, kind) {
        return usage(format!("cannot start the stop backstop: {e}"));
    }
    let outcome = tokio.block_on(async {
        tokio::select! {
            result = work => result,
            sig = interrupt::wait() => Err(ScriptError { message: format!("interrupted by {}", interrupt::name(sig)) }),
        }
    });
    let cancelled = runtime.cancelled_tasks();
    if !cancelled.is_empty() {
        eprintln!(
            "sluice: the script ended while task {} still ran; cancelled, each call it had under way stopped and recorded as cancelled (await a task with task:await() or sluice.all to let it finish)",
            cancelled.join(", ")
        );
    }
    let (status, exit, error) = ending(runtime, &outcome, kind);
    if interrupt::requested().is_some() {
        // The record first, then the jobs, briefly: one that ignores TERM
        // must not hold the run past its bound.
        close(runtime, status, error.as_deref());
        tokio.block_on(async {
            let _ = tokio::time::timeout(JOBS_GRACE_ON_STOP, runtime.shutdown()).await;
        });
        crate::exec::kill_all_groups();
    } else {
        // Background jobs end with the run, stopped and reaped.
        tokio.block_on(runtime.shutdown());
        close(runtime, status, error.as_deref());
    }
    // A name lookup still blocking on its thread must not hold the exit.
    tokio.shutdown_background();
    Ended { exit, error }
}

/// Arms the backstop of a stop signal: when the run cannot end by itself,
/// it kills what the run started and seals the record `interrupted`, or,
/// for a served run whose client ended the session with no call under way,
/// `ok` with exit 0, as the run would have ended by itself (a loaded
/// machine can take longer than the grace to tear a sandbox down).
fn arm_backstop(runtime: &Runtime, kind: Work) -> std::io::Result<()> {
    let closer = runtime.closer();
    let containers = runtime.containers();
    interrupt::arm_backstop(move |sig, why| {
        crate::exec::kill_all_groups();
        containers.shutdown();
        let had_ended = closer.is_ended();
        let client_ended = kind == Work::Served && !interrupt::served_call_at_stop();
        let msg = format!(
            "interrupted by {}; {why}, so sluice ended it at once",
            interrupt::name(sig)
        );
        let sealed = if client_ended {
            closer.end("ok", None)
        } else {
            closer.end("interrupted", Some(&msg))
        };
        if had_ended {
            eprintln!("sluice: the run had ended, but the process did not exit; {why}, so sluice ended it at once");
        } else if !client_ended {
            eprintln!("sluice: {msg}");
        }
        if let Err(e) = sealed {
            eprintln!("sluice: the audit record could not be closed: {e}");
        }
        if client_ended {
            0
        } else {
            128 + sig
        }
    })
}

/// The run's status, exit code and error, from how `work` ended.
fn ending(
    runtime: &Runtime,
    outcome: &Result<(), ScriptError>,
    kind: Work,
) -> (&'static str, ExitCode, Option<String>) {
    // Whatever the script was doing when a stop came, it has been dropped.
    if let Some(sig) = interrupt::requested() {
        if kind == Work::Served && !interrupt::served_call_at_stop() {
            eprintln!(
                "sluice: the client ended the session ({} with no call under way); the run ended ok",
                interrupt::name(sig)
            );
            return ("ok", ExitCode::SUCCESS, None);
        }
        let msg = format!(
            "interrupted by {}; the run stopped between flow steps",
            interrupt::name(sig)
        );
        return ("interrupted", ExitCode::from(128 + sig as u8), Some(msg));
    }
    if let Some(halt) = runtime.halted() {
        let msg = match outcome {
            Err(e) if e.message.contains(halt.message.as_str()) => e.message.clone(),
            _ => halt.to_string(),
        };
        return ("failed", ExitCode::from(1), Some(msg));
    }
    match outcome {
        Ok(()) => ("ok", ExitCode::SUCCESS, None),
        Err(e) => ("failed", ExitCode::from(1), Some(e.message.clone())),
    }
}

/// Says how the run ended and seals its record.
fn close(runtime: &Runtime, status: &str, error: Option<&str>) {
    if let Some(msg) = error {
        eprintln!("sluice: {msg}");
    }
    if let Err(e) = runtime.end(status, error) {
        eprintln!("sluice: the audit record could not be closed: {e}");
    }
}

fn usage(message: String) -> Ended {
    eprintln!("sluice: {message}");
    Ended {
        exit: ExitCode::from(2),
        error: Some(message),
    }
}
