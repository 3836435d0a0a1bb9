//! The Lua host: one sandboxed state per run, the `sluice` module bound to the
//! run's pipeline, and the script runner that reports errors with file:line
//! and a traceback.

mod clock;
mod convert;
mod credential;
pub mod extend;
mod module;
mod schema;
mod serve;
mod sources;
mod tasks;

pub use serve::{Caller, Incoming, LuaTool, Outcome, Progress, Tool};

use crate::audit::location::Location;
use crate::audit::recorder::{PolicyFile, Recorder, RunStart};
use crate::audit::replay::{Mode, Record, Replay};
use crate::audit::session::Session;
use crate::container::{Containers, Declaration};
use crate::error::{FlowError, FlowResult};
use crate::exec::Executor;
use crate::flows::{Context, Registry};
use crate::interrupt;
use crate::kernel::approval::{Approvals, Approver, Prompt};
use crate::kernel::gate::Gate;
use crate::kernel::pattern::{Pattern, Role, Vars};
use crate::kernel::policy::{self, Policy, Source};
use crate::kernel::Kernel;
use crate::luastate;
use crate::net::dns::Dns;
use crate::net::search::Provider;
use crate::net::Net;
use crate::pipeline::{Core, JobOp, MAIN_TASK};
use mlua::{Function, Lua};
use serde_json::Value;
use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// A script that failed: its Lua message (with file:line) and traceback.
#[derive(Debug)]
pub struct ScriptError {
    /// What Lua raised, where, and the traceback.
    pub message: String,
}

/// Why a run could not be set up: which of the builder's inputs is at
/// fault ([`BuildErrorKind`]), and a message that names it and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    /// Which input is at fault, for a caller that handles them apart.
    pub kind: BuildErrorKind,
    /// What went wrong and what to do, for a person.
    pub message: String,
}

/// The input a [`BuildError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildErrorKind {
    /// The workspace folder is missing, unreadable or not a folder.
    Workspace,
    /// A `ceiling` or `approve` pattern does not parse.
    Pattern,
    /// A policy failed to load (syntax, a bad rule, a limit).
    Policy,
    /// The audit store cannot be opened or the run cannot be recorded.
    Audit,
    /// The Lua state or the `sluice` module could not be set up.
    Lua,
    /// A container declaration or the container engine is wrong.
    Container,
    /// A model provider's declaration is wrong.
    Provider,
    /// An embedder's flow cannot be added (its name is taken or is not a
    /// Lua identifier, its schema is not an object's).
    Flow,
}

impl BuildError {
    fn new(kind: BuildErrorKind, message: impl Into<String>) -> BuildError {
        BuildError {
            kind,
            message: message.into(),
        }
    }

    /// A setup step of the Lua host that failed.
    fn lua(e: impl fmt::Display) -> BuildError {
        BuildError::new(BuildErrorKind::Lua, e.to_string())
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BuildError {}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScriptError {}

/// Sets up a [`Runtime`].
#[derive(Debug, Default)]
pub struct RuntimeBuilder {
    workspace: Option<PathBuf>,
    args: Vec<String>,
    script: Option<PathBuf>,
    policies: Vec<Source>,
    ceiling: Vec<String>,
    approve: Vec<String>,
    prompt: Option<Prompt>,
    keep_spill: bool,
    max_jobs: Option<usize>,
    max_procs: Option<usize>,
    max_requests: Option<usize>,
    dns: Option<Arc<dyn Dns>>,
    search: Option<Arc<dyn Provider>>,
    audit: Option<Location>,
    /// [`RuntimeBuilder::no_audit`]: nothing is recorded.
    no_audit: bool,
    audit_retry: Option<std::time::Duration>,
    replay: Option<(Record, Mode)>,
    /// The recorded script's text, which a replay or resume runs in place
    /// of the file, loading the recorded modules too.
    recorded_script: Option<String>,
    /// Who hears that a file on disk differs from the recorded text run.
    notes: sources::Notes,
    sandbox: crate::sandbox::Choice,
    secrets: Vec<PathBuf>,
    /// What no flow reaches and no command sees ([`RuntimeBuilder::withheld`]).
    withheld: Vec<PathBuf>,
    container_engine: Option<String>,
    sealed: Option<(String, Option<String>)>,
    providers: Vec<String>,
    lsp: Vec<String>,
    test_runner: Option<serde_json::Value>,
    explore_model: Option<String>,
    credentials: Option<PathBuf>,
    name: Option<String>,
    run_id: Option<String>,
    lease_attempt: i64,
    embedded: Embedded,
    serving: bool,
    modules: Option<PathBuf>,
}

/// What an embedding program adds to a run: its own flows and the
/// approver that answers asks its way.
#[derive(Default, Clone)]
struct Embedded {
    flows: Vec<Arc<dyn extend::CustomFlow>>,
    approver: Option<Arc<dyn Approver>>,
}

impl fmt::Debug for Embedded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.flows.iter().map(|fl| fl.info().name).collect();
        f.debug_struct("Embedded")
            .field("flows", &names)
            .field("approver", &self.approver.as_ref().map(|a| a.who()))
            .finish()
    }
}

impl RuntimeBuilder {
    /// How network flows resolve host names (default: the system
    /// resolver). Every destination check runs on what it returns.
    pub fn dns(mut self, dns: Arc<dyn Dns>) -> Self {
        self.dns = Some(dns);
        self
    }

    /// Who answers `websearch` (default: nobody, so it is
    /// `provider_unavailable`), e.g. Exa or a SearXNG instance, as
    /// `sluice run --search` gives them. Crate-private until the provider
    /// trait is a public API.
    pub(crate) fn search(mut self, provider: Arc<dyn Provider>) -> Self {
        self.search = Some(provider);
        self
    }

    /// Records the run in the record at `at`: a SQLite file's path
    /// (created when missing), or a `Location` parsed from `sqlite:PATH`
    /// or `postgres://user@host:port/db` (its password: the credential
    /// named `audit`, else `PGPASSWORD`, else `~/.pgpass`).
    ///
    /// Default: where `sluice run` records, `$SLUICE_AUDIT` when it is
    /// set, else the workspace's `.sluice/audit.db` (its `.sluice` folder
    /// made private and given a `.gitignore` holding `*` when it has
    /// none); a replay ([`Mode::Replay`]) records nothing unless given a
    /// record here. [`RuntimeBuilder::no_audit`] records nothing.
    pub fn audit(mut self, at: impl Into<Location>) -> Self {
        self.audit = Some(at.into());
        self.no_audit = false;
        self
    }

    /// Records nothing, as `sluice run --no-audit`: no record to verify,
    /// replay or resume. The last of this and [`RuntimeBuilder::audit`]
    /// holds.
    pub fn no_audit(mut self) -> Self {
        self.audit = None;
        self.no_audit = true;
        self
    }

    /// How long the run waits for its record's store when it becomes
    /// unreachable mid-run (a PostgreSQL server restarting, a network
    /// cut) before it stops, saying what was and was not recorded:
    /// meanwhile the rows of calls made queue in memory (at most 10,000
    /// statements or 64 MiB; then no call starts until they are written)
    /// and an irreversible call waits for its intent to be committed.
    /// Zero stops the run at the first failed write. Default: a minute
    /// (`sluice run --audit-retry`). A SQLite file is never unreachable.
    pub fn audit_retry(mut self, retry: std::time::Duration) -> Self {
        self.audit_retry = Some(retry);
        self
    }

    /// Answers calls from a recorded run instead of running them:
    /// [`Mode::Replay`] answers every call and stops at the first that
    /// differs; [`Mode::Resume`] goes live at the first call the record
    /// lacks. The run's random seed is the recorded one.
    pub fn replay(mut self, record: Record, mode: Mode) -> Self {
        self.replay = Some((record, mode));
        self
    }

    /// Runs the script ([`RuntimeBuilder::script`]) as the record given to
    /// [`RuntimeBuilder::replay`] keeps it: `text` in place of the file,
    /// and each module it requires as recorded, a file on disk that
    /// differs said to the notes.
    pub(crate) fn recorded_script(mut self, text: String) -> Self {
        self.recorded_script = Some(text);
        self
    }

    /// Who is told that a file on disk differs from the recorded text a
    /// replay runs (default: standard error).
    pub(crate) fn source_notes(mut self, notes: Arc<dyn Fn(&str) + Send + Sync>) -> Self {
        self.notes = sources::Notes(notes);
        self
    }

    /// What confines commands (default: bubblewrap when it works here,
    /// else landlock). With no runner working, commands are refused.
    pub fn sandbox(mut self, choice: crate::sandbox::Choice) -> Self {
        self.sandbox = choice;
        self
    }

    /// A model provider for `sluice.model`, as `sluice run --provider`
    /// gives it: `NAME=API:URL` (`local=openai:http://127.0.0.1:8080/v1`;
    /// the API is `openai` or `anthropic`). Its key is credential NAME when
    /// that is set. Providers a policy declares join it.
    pub fn provider(mut self, spec: impl Into<String>) -> Self {
        self.providers.push(spec.into());
        self
    }

    /// A language server for the `lsp` flow and the file flows'
    /// diagnostics, as `sluice run --lsp` gives it: `NAME=EXTS:COMMAND`
    /// (`python=.py,.pyi:basedpyright-langserver --stdio`, the command
    /// split at spaces). Servers a policy's `lsp` table declares join it.
    pub fn lsp_server(mut self, spec: impl Into<String>) -> Self {
        self.lsp.push(spec.into());
        self
    }

    /// The model `explore`'s sub-agent runs on: `PROVIDER/MODEL`
    /// (`sluice run --explore-model`), over a policy's `explore` (whose
    /// bounds it keeps).
    pub fn explore_model(mut self, spec: impl Into<String>) -> Self {
        self.explore_model = Some(spec.into());
        self
    }

    /// The test flow's runner, declared by the embedder: the fields of a
    /// policy's `test` table as JSON (`{"command": "pytest -q", "cwd":
    /// "py", "env": {...}, "timeoutMs": 60000, "baseRef": "main",
    /// "judge": {"provider": P, "model": M}}`). A policy that declares
    /// `test` as well is an error at build.
    pub fn test_runner(mut self, declaration: serde_json::Value) -> Self {
        self.test_runner = Some(declaration);
        self
    }

    /// The credentials file keys come from (`sluice run --credentials
    /// FILE`), after the environment's `SLUICE_CREDENTIAL_*`; no confined
    /// command may see it. Default: sluice's default credentials file.
    pub fn credentials(mut self, path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        self.secrets.push(path.clone());
        self.credentials = Some(path);
        self
    }

    /// A file no confined command may see, whatever the policy says
    /// (`sluice run --credentials FILE`); sluice's default credentials
    /// file is hidden without asking.
    pub fn secret_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.secrets.push(path.into());
        self
    }

    /// A file or folder of sluice's own that the run must never reach
    /// (`sluice mcp`'s token): hidden from confined commands, and refused
    /// to every flow whatever the policies say. It should exist when the
    /// run is built, so that its real path is known.
    pub fn withheld(mut self, path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        self.secrets.push(path.clone());
        self.withheld.push(path);
        self
    }

    /// Lets calls run in any container the caller or the policy's `route`
    /// names, through `engine` (`podman` or `docker`;
    /// `sluice run --container-engine`). Without it, only containers the
    /// policy declares (and a sealed host's) can be reached.
    pub fn container_engine(mut self, engine: impl Into<String>) -> Self {
        self.container_engine = Some(engine.into());
        self
    }

    /// Seals the host to container `name` (`SLUICE_BASH_CONTAINER`):
    /// commands run only there (any other place is `outside_container`),
    /// and relative paths inside it resolve under `cwd`
    /// (`SLUICE_TEST_CWD`).
    pub fn seal_to_container(mut self, name: impl Into<String>, cwd: Option<String>) -> Self {
        self.sealed = Some((name.into(), cwd));
        self
    }

    /// Keep the files holding commands' complete overflowing output after
    /// the run (default: removed).
    pub fn keep_spill(mut self, keep: bool) -> Self {
        self.keep_spill = keep;
        self
    }

    /// How many background jobs may run at once (default 16).
    pub fn max_jobs(mut self, max: usize) -> Self {
        self.max_jobs = Some(max);
        self
    }

    /// How many calls that spawn commands may run at once, across the
    /// script's tasks (default: the machine's cores). A background job
    /// holds a place only while its call starts it.
    pub fn max_procs(mut self, max: usize) -> Self {
        self.max_procs = Some(max);
        self
    }

    /// How many calls that send requests (fetch, http-post, webfetch,
    /// websearch, model) may run at once, across the script's tasks
    /// (default 16).
    pub fn max_requests(mut self, max: usize) -> Self {
        self.max_requests = Some(max);
        self
    }

    /// The folder relative paths resolve against and `${workspace}` in
    /// policies names. Default: the current folder.
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = Some(dir.into());
        self
    }

    /// What scripts see as `sluice.args`.
    pub fn args(mut self, args: Vec<String>) -> Self {
        self.args = args;
        self
    }

    /// The script this run executes: it names the run in policy requests,
    /// `require` looks in its folder first (default: the workspace), and
    /// its text is read when the run is built, which the record keeps (so
    /// a replay does not need the file) and [`Runtime::run_script`] of it
    /// runs.
    pub fn script(mut self, path: impl Into<PathBuf>) -> Self {
        self.script = Some(path.into());
        self
    }

    /// Adds a policy; with none, the built-in `policies/default.lua` applies.
    /// A deny from any policy wins.
    pub fn policy(mut self, source: Source) -> Self {
        self.policies.push(source);
        self
    }

    /// Adds a ceiling pattern: nothing outside the ceiling is granted,
    /// whatever a policy says.
    pub fn ceiling(mut self, pattern: impl Into<String>) -> Self {
        self.ceiling.push(pattern.into());
        self
    }

    /// Pre-approves asks that match `pattern`.
    pub fn approve(mut self, pattern: impl Into<String>) -> Self {
        self.approve.push(pattern.into());
        self
    }

    /// Who answers asks, of the built-in approvers. Default: nobody
    /// ([`Prompt::Unattended`]).
    pub fn prompt(mut self, prompt: Prompt) -> Self {
        self.prompt = Some(prompt);
        self
    }

    /// Answers asks the embedding program's way (a chat, a web page),
    /// instead of a [`Prompt`]. Pre-approvals ([`RuntimeBuilder::approve`])
    /// still come first, and sluice remembers a "for the run" answer
    /// itself.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.embedded.approver = Some(approver);
        self
    }

    /// Adds a flow of the embedding program's own
    /// ([`extend::CustomFlow`]): scripts call it as `sluice.NAME{...}`,
    /// and its calls pass the same door as the built-in flows'. A name
    /// that is taken or not a Lua identifier fails the build
    /// ([`BuildErrorKind::Flow`]).
    pub fn flow(mut self, flow: impl extend::CustomFlow) -> Self {
        self.embedded.flows.push(Arc::new(flow));
        self
    }

    /// The run's id, instead of a new one: what a fleet gives a run (its
    /// workflow's id), so the run keeps it on every worker. Letters,
    /// digits, `.`, `_` and `-`, at most 64; a run of that id already in
    /// the record is refused when the run is recorded.
    pub fn run_id(mut self, id: impl Into<String>) -> Self {
        self.run_id = Some(id.into());
        self
    }

    /// The fencing number the run's lease starts at (see
    /// `audit::lease`), instead of 1: what a fleet gives a run's attempt
    /// (its engine's attempt number), so the number never goes back.
    pub fn lease_attempt(mut self, n: i64) -> Self {
        self.lease_attempt = n;
        self
    }

    /// What the record calls the run's script, in place of its file's
    /// path (an embedded run has none; a fleet worker runs a copy of the
    /// submitted file): `sluice audit list` shows it in the SCRIPT column,
    /// and policies see it as `req.run.script`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Makes the run serve callers outside the script
    /// ([`Runtime::serve`]): each request's asks go to the approver its
    /// caller brings, instead of [`RuntimeBuilder::prompt`]'s or
    /// [`RuntimeBuilder::approver`]'s.
    pub fn serving(mut self) -> Self {
        self.serving = true;
        self
    }

    /// Where `require` finds the Lua modules of the run's own code
    /// (default: the script's folder, else the workspace): a served run's
    /// Lua tools' folder, so that no module an agent wrote in the
    /// workspace is loaded into them.
    pub fn modules(mut self, dir: impl Into<PathBuf>) -> Self {
        self.modules = Some(dir.into());
        self
    }

    /// Checks the inputs, loads the policies, opens the record and sets up
    /// the Lua state: the run is ready for [`Runtime::call`] or a script.
    pub fn build(self) -> Result<Runtime, BuildError> {
        use BuildErrorKind as Kind;
        let given = match self.workspace {
            Some(dir) => dir,
            None => std::env::current_dir().map_err(|e| {
                BuildError::new(
                    Kind::Workspace,
                    format!("cannot read the current folder: {e}"),
                )
            })?,
        };
        let workspace = std::fs::canonicalize(&given).map_err(|e| {
            BuildError::new(
                Kind::Workspace,
                format!(
                    "workspace {}: {e}. Give an existing folder with --workspace DIR.",
                    given.display()
                ),
            )
        })?;
        if !workspace.is_dir() {
            return Err(BuildError::new(
                Kind::Workspace,
                format!(
                    "workspace {} is not a folder. Give an existing folder with --workspace DIR.",
                    given.display()
                ),
            ));
        }
        let vars = Vars::new(workspace.clone());
        let patterns = |list: &[String], flag: &str, role| {
            list.iter()
                .map(|t| {
                    Pattern::parse_for(t, &vars, role)
                        .map_err(|e| BuildError::new(Kind::Pattern, format!("{flag} {t:?}: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let ceiling = patterns(&self.ceiling, "--ceiling", Role::Bound)?;
        let approve = patterns(&self.approve, "--approve", Role::Grant)?;
        let sources = if self.policies.is_empty() {
            vec![policy::shipped("default").expect("the default policy is built in")]
        } else {
            self.policies
        };
        let policies: Vec<Policy> = sources
            .into_iter()
            .map(|s| Policy::load(s, vars.clone()))
            .collect();
        if let Some(e) = crate::kernel::refusal(&policies, &ceiling) {
            return Err(BuildError::new(Kind::Policy, e));
        }
        let mut registry = Registry::standard();
        extend::add_all(&mut registry, &self.embedded.flows)
            .map_err(|e| BuildError::new(Kind::Flow, e))?;
        let policy_files = policy_files(&policies);
        let script_path = self
            .script
            .as_ref()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()));
        // A name given wins over the file's path: a fleet worker runs a
        // copy of the submitted file, which the record calls by its name.
        let script = self
            .name
            .or_else(|| script_path.as_ref().map(|p| p.display().to_string()))
            .unwrap_or_default();
        let id = match self.run_id.clone() {
            Some(id) => check_run_id(id)?,
            None => new_run_id(),
        };
        let mut ctx = Context::new(workspace.clone(), id, script.clone());
        let seed = match &self.replay {
            Some((record, _)) => record.run.random_seed,
            None => fresh_seed(),
        };
        let store = match &self.credentials {
            Some(file) => crate::credentials::Credentials::with_file(file),
            None => crate::credentials::Credentials::new(),
        };
        let (stored_args, cut) = crate::credentials::redact_args(&self.args, &store.values());
        cut.iter()
            .for_each(|s| crate::credentials::remember_secret(s));
        let script_text = match (&self.recorded_script, &script_path) {
            (Some(text), _) => Some(text.clone()),
            (None, Some(path)) => sources::read_script(path),
            (None, None) => None,
        };
        let script_sha256 = match &script_text {
            Some(text) => Some(crate::digest::sha256_hex(text.as_bytes())),
            None => script_path.as_deref().and_then(file_sha256),
        };
        let at = record_target(self.audit, self.no_audit, self.replay.as_ref(), &workspace)?;
        let recorder = match &at {
            Some(at) => Some(start_recorder(
                at,
                (self.credentials.as_deref(), self.audit_retry),
                RunStart {
                    id: ctx.run_id.clone(),
                    script,
                    script_sha256,
                    script_text: script_text.clone(),
                    policies: policy_files,
                    // A key passed as an argument stays out of the
                    // record; a replay is given it again.
                    args: stored_args,
                    workspace: workspace.display().to_string(),
                    started_ms: crate::audit::now_ms(),
                    random_seed: seed,
                    resumed_from: self.replay.as_ref().map(|(r, _)| r.run.id.clone()),
                    ceiling: self.ceiling.clone(),
                    attempt: self.lease_attempt,
                },
            )?),
            None => None,
        };
        // A replay of the recorded script loads the recorded modules too.
        let recorded_modules = match (&self.replay, &self.recorded_script) {
            (Some((record, _)), Some(_)) => (record.modules(), record.run.id.clone()),
            _ => (Vec::new(), String::new()),
        };
        let mut audit = Session::new(
            recorder,
            self.replay.map(|(record, mode)| Replay::new(record, mode)),
        );
        audit.protected = match &at {
            Some(Location::Sqlite(db)) => store_paths(db),
            _ => Vec::new(),
        };
        if let Some(max) = self.max_jobs {
            let exec = Executor::new(&workspace, &ctx.run_id).with_max_jobs(max);
            ctx.exec = Arc::new(exec);
        }
        // Only a resume starts jobs of its own, numbered after the record's;
        // a replay answers every job operation from the record.
        if let Some(replay) = audit.replay.as_ref().filter(|r| r.mode != Mode::Replay) {
            ctx.exec
                .jobs
                .number_after(replay.record.last_job_id(&registry));
        }
        ctx.sandbox = Arc::new(crate::sandbox::Sandbox::new(self.sandbox, &ctx.run_id));
        if self.keep_spill {
            ctx.exec.keep_spill();
        }
        if self.dns.is_some() || self.search.is_some() {
            let mut net = self.dns.map_or_else(Net::default, Net::new);
            if let Some(provider) = self.search {
                net = net.with_search(provider);
            }
            ctx.net = Arc::new(net);
        }
        let inside = Arc::new(InsideSandboxes(ctx.sandbox.clone()));
        ctx.net = Arc::new((*ctx.net).clone().with_inside(inside));
        ctx.protected = audit.protected.clone();
        ctx.secrets.extend(self.secrets.iter().cloned());
        let callers = serve::Callers::default();
        let kernel = Kernel::new(policies, ceiling, vars.clone()).withholding(
            self.withheld
                .iter()
                .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
                .collect(),
        );
        let wait = kernel.ask_timeout();
        let gate = Gate {
            kernel,
            approver: match self.embedded.approver {
                _ if self.serving => Approvals::with(approve, Some(Arc::new(callers.clone()))),
                Some(custom) => Approvals::with(approve, Some(custom)),
                None => Approvals::new(approve, self.prompt.unwrap_or(Prompt::Unattended)),
            }
            .waiting(wait),
        };
        ctx.containers = Arc::new(containers(
            &gate.kernel,
            &ctx.run_id,
            &workspace,
            self.container_engine,
            self.sealed,
        )?);
        ctx.credentials = Arc::new(store.clone());
        ctx.models = Arc::new(providers(&gate.kernel, store, &self.providers)?);
        ctx.tests = test_runner(&gate.kernel, self.test_runner.as_ref(), &workspace)?.map(Arc::new);
        ctx.lsp = lsp_servers(&gate.kernel, &self.lsp, &workspace)?.map(Arc::new);
        ctx.explore = explore_model(&gate.kernel, self.explore_model.as_deref())?.map(Arc::new);
        let core = Core::new(registry, gate, ctx, audit)
            .with_limits(
                self.max_procs
                    .unwrap_or_else(crate::pipeline::default_max_procs),
                self.max_requests
                    .unwrap_or(crate::pipeline::DEFAULT_MAX_REQUESTS),
            )
            .shared();
        let closer = Closer {
            recorder: core.audit().recorder.clone(),
            ended: Arc::new(Mutex::new(false)),
        };
        let lua = luastate::new_state().map_err(BuildError::lua)?;
        interrupt::watch(&lua).map_err(BuildError::lua)?;
        if self.serving {
            serve::print_to_stderr(&lua).map_err(BuildError::lua)?;
        }
        let tasks = tasks::Tasks::default();
        let sluice = module::build(&lua, core.clone(), &self.args, tasks.others())
            .map_err(BuildError::lua)?;
        clock::install(&lua, core.clone(), &sluice, seed).map_err(BuildError::lua)?;
        lua.globals()
            .set("sluice", &sluice)
            .map_err(BuildError::lua)?;
        let script_dir = match (self.modules, self.script.as_ref().and_then(|p| p.parent())) {
            (Some(dir), _) => dir,
            (None, Some(dir)) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            (None, Some(_)) => PathBuf::from("."),
            (None, None) => workspace,
        };
        tasks
            .install(&lua, &sluice, core.clone())
            .map_err(BuildError::lua)?;
        let loader = sources::Sources {
            recorder: core.audit().recorder.clone(),
            recorded: recorded_modules,
            notes: self.notes,
        }
        .loader();
        luastate::install_require_with(&lua, script_dir, &[("sluice", sluice)], loader)
            .map_err(BuildError::lua)?;
        Ok(Runtime {
            core,
            lua,
            closer,
            tasks,
            callers,
            tool_inputs: Rc::default(),
            script: self.script.zip(script_text),
            recorded_in: at,
        })
    }
}

/// One run: a workspace, its pipeline and its Lua state.
pub struct Runtime {
    core: Rc<Core>,
    lua: Lua,
    closer: Closer,
    tasks: tasks::Tasks,
    /// A served run's callers' approvers, by the task of their request.
    callers: serve::Callers,
    /// A served run's Lua tools' input schemas, by name.
    tool_inputs: Rc<RefCell<std::collections::HashMap<String, Value>>>,
    /// The builder's script as given, and the text read (or recorded)
    /// when the run was built: what [`Runtime::run_script`] of it runs.
    script: Option<(PathBuf, String)>,
    /// Where the run is recorded, if it is.
    recorded_in: Option<Location>,
}

/// Ends a run's record from any thread: what a backstop uses when the
/// run's own thread is stuck (the backstop a stop signal arms). The first
/// [`Closer::end`] (or [`Runtime::end`]) seals; a concurrent one waits until
/// that seal is written, and later ones do nothing.
#[derive(Clone)]
pub struct Closer {
    recorder: Option<Arc<Recorder>>,
    ended: Arc<Mutex<bool>>,
}

impl fmt::Debug for Closer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Closer").finish_non_exhaustive()
    }
}

impl Closer {
    /// Records how the run ended and seals its record, as [`Runtime::end`].
    pub fn end(&self, status: &str, error: Option<&str>) -> Result<(), String> {
        // Held while sealing, so a second caller returns only once sealed.
        let mut ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
        if std::mem::replace(&mut *ended, true) {
            return Ok(());
        }
        let Some(recorder) = &self.recorder else {
            return Ok(());
        };
        recorder.end(status, error)?;
        match recorder.failure() {
            Some(why) => Err(format!("the audit record is incomplete: {why}")),
            None => Ok(()),
        }
    }

    /// Whether the run's end was recorded (or is being recorded now).
    pub fn is_ended(&self) -> bool {
        match self.ended.try_lock() {
            Ok(ended) => *ended,
            Err(std::sync::TryLockError::Poisoned(e)) => *e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => true,
        }
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("run_id", &self.run_id())
            .field("workspace", &self.workspace())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A builder with every default: the current folder as workspace, the
    /// embedded default policy, recorded where `sluice run` records (the
    /// workspace's `.sluice/audit.db`, see [`RuntimeBuilder::audit`]),
    /// nobody to answer asks.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// The run's workspace, canonical.
    pub fn workspace(&self) -> &Path {
        &self.core.context().workspace
    }

    /// The run's id, as the record names it.
    pub fn run_id(&self) -> &str {
        &self.core.context().run_id
    }

    /// Where the run is recorded, what `sluice audit show RUN --audit`
    /// takes: the record given to [`RuntimeBuilder::audit`], or the
    /// default one; `None` for a run that records nothing.
    pub fn recorded_in(&self) -> Option<&Location> {
        self.recorded_in.as_ref()
    }

    /// Why the run was stopped, if it was: a replay that diverged, a resume
    /// that reached a call whose outcome is unknown.
    pub fn halted(&self) -> Option<FlowError> {
        self.core.audit().halted()
    }

    /// Calls answered from the record (replay and resume).
    pub fn replayed_calls(&self) -> u64 {
        self.core
            .audit()
            .replay
            .as_ref()
            .map_or(0, |r| r.answered.get())
    }

    /// Whether a replay's script went on past the last recorded call.
    pub fn replay_past_end(&self) -> bool {
        self.core
            .audit()
            .replay
            .as_ref()
            .is_some_and(|r| r.past_end.get())
    }

    /// Whether a resume went past its record and ran calls for real.
    pub fn went_live(&self) -> bool {
        self.core
            .audit()
            .replay
            .as_ref()
            .is_some_and(Replay::is_live)
    }

    /// Records how the run ended (`ok`, `failed` or `interrupted`, with the
    /// error) and seals its record. Dropping the runtime without it records
    /// `ok` (`failed` while panicking). Later calls do nothing.
    pub fn end(&self, status: &str, error: Option<&str>) -> Result<(), String> {
        self.closer.end(status, error)
    }

    /// The run's containers, for a thread that must remove them when the
    /// run's own thread cannot (the stop backstop).
    pub(crate) fn containers(&self) -> Arc<Containers> {
        self.core.context().containers.clone()
    }

    /// A handle that ends this run's record from another thread.
    pub fn closer(&self) -> Closer {
        self.closer.clone()
    }

    /// The manifest of this run's flows: sluice's own ([`crate::manifest`])
    /// and the embedder's ([`RuntimeBuilder::flow`]), in that order.
    pub fn manifest(&self) -> Value {
        self.core.registry().manifest()
    }

    /// Calls a flow from Rust, through the same door as Lua. A flow is
    /// named as the record names it (`http-post`) or as scripts call it
    /// (`http_post`).
    pub async fn call(&self, flow: &str, input: Value) -> FlowResult<Value> {
        self.core.call(flow, input).await
    }

    /// A background job's state (`status`, `exitCode`, `signal`,
    /// `sandbox`), by the `jobId` a `bash` call with `background = true`
    /// returned. Like every job operation, it is a recorded step of the
    /// run, answered from the record in a replay.
    pub fn job_state(&self, id: u64) -> FlowResult<Value> {
        self.core.job(MAIN_TASK, JobOp::State, id)
    }

    /// What a background job wrote since the last read (`stdout`,
    /// `stderr`, with their truncation fields), as `job:read()` gives it.
    pub fn job_read(&self, id: u64) -> FlowResult<Value> {
        self.core.job(MAIN_TASK, JobOp::Read, id)
    }

    /// Kills a background job (its whole process group), authorized like
    /// any effect; `true` when it was still running.
    pub fn job_kill(&self, id: u64) -> FlowResult<bool> {
        let killed = self.core.job(MAIN_TASK, JobOp::Kill, id)?;
        Ok(killed.as_bool().unwrap_or(false))
    }

    /// Waits until a background job ends, at most `timeout` (`None`:
    /// until it ends); `true` when it has ended.
    pub async fn job_wait(
        &self,
        id: u64,
        timeout: Option<std::time::Duration>,
    ) -> FlowResult<bool> {
        self.core.job_wait(MAIN_TASK, id, timeout).await
    }

    /// Ends the run's processes: every background job still running is
    /// killed and reaped. Call it when the run is over; dropping the runtime
    /// without it kills them at once.
    pub async fn shutdown(&self) {
        if let Some(servers) = &self.core.context().lsp {
            servers.shutdown().await;
        }
        self.core.context().exec.shutdown().await;
        self.remove_containers();
    }

    /// Removes the containers the run started (those its policy declared,
    /// unless `keep = true`). [`Runtime::shutdown`] does it after the jobs;
    /// blocking.
    pub fn remove_containers(&self) {
        self.core.context().containers.shutdown();
    }

    /// Runs a workflow script to its end. The builder's script
    /// ([`RuntimeBuilder::script`]) runs as read when the run was built,
    /// the text the record keeps; any other file is read now.
    pub async fn run_script(&self, path: &Path) -> Result<(), ScriptError> {
        let chunk = match &self.script {
            Some((given, text)) if sources::same_file(given, path) => {
                luastate::load_text(&self.lua, path, text)
            }
            _ => luastate::load_script(&self.lua, path),
        }
        .map_err(|message| ScriptError { message })?;
        self.run_chunk(chunk).await
    }

    /// Runs Lua source given as a string, named `name` in messages.
    pub async fn run_source(&self, name: &str, source: &str) -> Result<(), ScriptError> {
        let chunk = self
            .lua
            .load(source)
            .set_name(format!("={name}"))
            .set_mode(mlua::ChunkMode::Text)
            .into_function()
            .map_err(|e| ScriptError {
                message: e.to_string(),
            })?;
        self.run_chunk(chunk).await
    }

    /// Has the script's `print` call `first` before each output: a replay's
    /// output waits for the verdict on its record (`first` is cheap once
    /// that is reached).
    pub fn before_output(&self, first: impl Fn() + 'static) -> mlua::Result<()> {
        let print: Function = self.lua.globals().get("print")?;
        let held = self.lua.create_function(move |_, args: mlua::MultiValue| {
            first();
            print.call::<()>(args)
        })?;
        self.lua.globals().set("print", held)
    }

    /// Evaluates Lua source to a function a Rust caller can call repeatedly
    /// (benchmarks, embedding).
    pub fn function(&self, source: &str) -> mlua::Result<Function> {
        self.lua.load(source).set_mode(mlua::ChunkMode::Text).eval()
    }

    /// Runs a chunk with the tasks it spawns beside it. When it ends, the
    /// tasks still running are cancelled; a task that failed with nobody
    /// awaiting it fails the run.
    async fn run_chunk(&self, chunk: Function) -> Result<(), ScriptError> {
        let fail = |e: mlua::Error| ScriptError {
            message: describe(&e),
        };
        let thread = self.lua.create_thread(chunk).map_err(fail)?;
        let (result, ending) = self.tasks.run(&self.lua, &self.core, thread).await;
        let unawaited = tasks::unawaited_message(&ending);
        match (result.map_err(fail), unawaited) {
            (Ok(()), Some(message)) => Err(ScriptError { message }),
            (Err(e), Some(also)) => Err(ScriptError {
                message: format!("{}\n(also: {also})", e.message),
            }),
            (result, None) => result,
        }
    }

    /// The tasks still running when the last script ended, which were
    /// cancelled (their calls stopped and recorded as cancelled).
    pub fn cancelled_tasks(&self) -> Vec<String> {
        self.tasks.cancelled()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let status = if std::thread::panicking() {
            "failed"
        } else {
            "ok"
        };
        if let Err(e) = self.end(status, None) {
            eprintln!("sluice: {e}");
        }
    }
}

/// The policies a run is judged by, named with the SHA-256 of the text
/// they were loaded from.
fn policy_files(policies: &[Policy]) -> Vec<PolicyFile> {
    policies
        .iter()
        .map(|p| {
            let name = match p.source() {
                Source::File(f) => std::fs::canonicalize(f)
                    .unwrap_or_else(|_| f.clone())
                    .display()
                    .to_string(),
                Source::Embedded { name, .. } => builtin_name(name).to_string(),
            };
            PolicyFile {
                name,
                sha256: p.sha256().unwrap_or_default().to_string(),
            }
        })
        .collect()
}

/// Where the run records: the record given, none with `no_audit` or for
/// a replay given none, else where `sluice run` records
/// ([`crate::audit::locate`]: `$SLUICE_AUDIT`, else the workspace's
/// `.sluice/audit.db`).
fn record_target(
    given: Option<Location>,
    no_audit: bool,
    replay: Option<&(Record, Mode)>,
    workspace: &Path,
) -> Result<Option<Location>, BuildError> {
    match (given, replay) {
        _ if no_audit => Ok(None),
        (Some(at), _) => Ok(Some(at)),
        (None, Some((_, Mode::Replay))) => Ok(None),
        (None, _) => crate::audit::locate(None, workspace)
            .map(Some)
            .map_err(|e| BuildError::new(BuildErrorKind::Audit, e)),
    }
}

/// Opens the record at `at` and starts the run's writer on it.
fn start_recorder(
    at: &Location,
    (credentials, retry): (Option<&Path>, Option<std::time::Duration>),
    run: RunStart,
) -> Result<Recorder, BuildError> {
    let password = crate::audit::open::password(at, credentials);
    let retry = retry.unwrap_or(crate::audit::outage::DEFAULT_RETRY);
    crate::audit::open::for_writing(at, password.as_deref())
        .and_then(|opened| Recorder::start_in(opened.db, &opened.name, run, retry))
        .map_err(|e| BuildError::new(BuildErrorKind::Audit, e))
}

/// What no flow or command may write: a `.sluice` folder holding the
/// database whole, else the database file and the files SQLite keeps beside
/// it (a `--audit` file in a shared folder must not close the folder).
fn store_paths(db: &Path) -> Vec<PathBuf> {
    let Some(dir) = db.parent().and_then(|d| std::fs::canonicalize(d).ok()) else {
        return Vec::new();
    };
    if dir.file_name().is_some_and(|n| n == ".sluice") {
        return vec![dir];
    }
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    ["", "-wal", "-shm", "-journal"]
        .iter()
        .map(|suffix| dir.join(format!("{name}{suffix}")))
        .collect()
}

/// `policies/default.lua` → `default`: what `--policy` takes.
fn builtin_name(path: &str) -> &str {
    path.trim_start_matches("policies/")
        .trim_end_matches(".lua")
}

/// SHA-256 of a script file; `None` for anything but a regular file (a
/// FIFO read here would be consumed before the run reads it).
fn file_sha256(path: &Path) -> Option<String> {
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    std::fs::read(path)
        .ok()
        .map(|bytes| crate::digest::sha256_hex(&bytes))
}

/// A seed for `math.random` nobody can predict from the run's id.
fn fresh_seed() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish() as i64
}

/// The text a person sees for a script error: the Lua message with
/// file:line, then the traceback, without the frames of mlua's async glue.
fn describe(e: &mlua::Error) -> String {
    let text = match e {
        mlua::Error::CallbackError { traceback, cause } => {
            format!("{}\n{traceback}", describe(cause))
        }
        mlua::Error::WithContext { context, cause } => format!("{context}: {}", describe(cause)),
        mlua::Error::RuntimeError(message) | mlua::Error::SyntaxError { message, .. } => {
            message.clone()
        }
        other => other.to_string(),
    };
    text.lines()
        .filter(|l| !l.contains("in local 'poll'") && !l.contains("[string \"?\"]"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The run's container routes: the policies' declarations (a name
/// declared twice is an error), the engine, the sealed container.
fn containers(
    kernel: &Kernel,
    run_id: &str,
    workspace: &Path,
    engine: Option<String>,
    sealed: Option<(String, Option<String>)>,
) -> Result<Containers, BuildError> {
    let fail = |m: String| BuildError::new(BuildErrorKind::Container, m);
    let mut declared = std::collections::BTreeMap::new();
    let mut by = std::collections::BTreeMap::new();
    for (policy, list) in kernel.containers() {
        for (name, value) in list {
            if let Some(first) = by.get(&name) {
                return Err(fail(format!("policy {policy}: container {name} is already declared by policy {first}; give it another name")));
            }
            let d = Declaration::parse(&policy, &name, &value, workspace).map_err(fail)?;
            by.insert(name.clone(), policy.clone());
            declared.insert(name, d);
        }
    }
    let mut c = Containers::new(run_id).with_declared(declared);
    if let Some(kind) = engine {
        if !crate::container::engine::KINDS.contains(&kind.as_str()) {
            return Err(fail(format!(
                "container engine {kind:?}: sluice drives \"podman\" or \"docker\""
            )));
        }
        c = c.with_engine(&kind);
    }
    if let Some((name, cwd)) = sealed {
        if !crate::container::declared::valid_name(&name) {
            return Err(fail(format!("SLUICE_BASH_CONTAINER={name:?} is not a container name (letters, digits, '_', '.', '-')")));
        }
        if cwd.as_ref().is_some_and(|c| !c.starts_with('/')) {
            return Err(fail(format!(
                "SLUICE_TEST_CWD={:?} must be an absolute path inside the container",
                cwd.unwrap_or_default()
            )));
        }
        c = c.sealed_to(&name, cwd);
    }
    Ok(c)
}

/// The run's model providers: the policies' declarations, then the
/// builder's (`--provider`); a name given twice is an error.
fn providers(
    kernel: &Kernel,
    store: crate::credentials::Credentials,
    flags: &[String],
) -> Result<crate::model::Providers, BuildError> {
    let fail = |m: String| BuildError::new(BuildErrorKind::Provider, m);
    let mut all = crate::model::Providers::new(store);
    for (policy, list) in kernel.providers() {
        for (name, value) in list {
            let p = crate::model::providers::declared(&name, &value)
                .map_err(|e| fail(format!("policy {policy}: {e}")))?;
            all.add(p, &format!("policy {policy}")).map_err(fail)?;
        }
    }
    for flag in flags {
        let p = crate::model::providers::from_flag(flag).map_err(fail)?;
        all.add(p, "--provider").map_err(fail)?;
    }
    Ok(all)
}

/// The run's language servers: the policies' `lsp` tables and the
/// `--lsp` flags; `None` when there are none.
fn lsp_servers(
    kernel: &Kernel,
    flags: &[String],
    workspace: &Path,
) -> Result<Option<crate::flows::langserver::Servers>, BuildError> {
    let fail = |m| BuildError::new(BuildErrorKind::Policy, m);
    let declared = crate::flows::langserver::declare::all(&kernel.lsp(), flags).map_err(fail)?;
    let path = std::env::var("PATH").ok();
    for d in &declared {
        d.refuse(workspace, path.as_deref()).map_err(fail)?;
    }
    Ok((!declared.is_empty()).then(|| crate::flows::langserver::Servers::new(declared)))
}

/// The test flow's runner: the one policy's `test`, or the embedder's;
/// both is an error, as is a declaration the flow cannot read.
fn test_runner(
    kernel: &Kernel,
    embedded: Option<&serde_json::Value>,
    workspace: &Path,
) -> Result<Option<crate::flows::test::Runner>, BuildError> {
    let Some(mut runner) = declared_runner(kernel, embedded)? else {
        return Ok(None);
    };
    // A credential-shaped entry of the runner's env is a secret: cut from
    // whatever a test prints of it, in results and in the record.
    for (name, value) in &runner.env {
        if crate::audit::redact::credential_name(name) {
            crate::credentials::remember_secret(value);
        }
    }
    if runner.base_ref.is_some() {
        runner.repository = crate::flows::test::base::repository(workspace);
    }
    Ok(Some(runner))
}

fn declared_runner(
    kernel: &Kernel,
    embedded: Option<&serde_json::Value>,
) -> Result<Option<crate::flows::test::Runner>, BuildError> {
    let fail = |m: String| BuildError::new(BuildErrorKind::Policy, m);
    let declared = kernel.test_runner().map_err(fail)?;
    match (declared, embedded) {
        (Some((policy, _)), Some(_)) => Err(fail(format!("policy {policy} declares `test`, and so does the embedder (RuntimeBuilder::test_runner); declare the test runner once"))),
        (Some((policy, table)), None) => crate::flows::test::Runner::declared(&format!("policy {policy}"), &table).map(Some).map_err(fail),
        (None, Some(table)) => crate::flows::test::Runner::declared("the embedder's test runner", table).map(Some).map_err(fail),
        (None, None) => Ok(None),
    }
}

/// The explore flow's model: `--explore-model` over the one policy's
/// `explore`, or either alone.
fn explore_model(
    kernel: &Kernel,
    flag: Option<&str>,
) -> Result<Option<crate::flows::explore::Config>, BuildError> {
    use crate::flows::explore::Config;
    let declared = kernel
        .explore()
        .and_then(|d| {
            d.map(|(policy, t)| Config::declared(&format!("policy {policy}"), &t))
                .transpose()
        })
        .map_err(|m| BuildError::new(BuildErrorKind::Policy, m))?;
    match flag {
        Some(flag) => Config::from_flag(flag, declared)
            .map(Some)
            .map_err(|m| BuildError::new(BuildErrorKind::Provider, m)),
        None => Ok(declared),
    }
}

/// `id` when it is one a run may be given ([`RuntimeBuilder::run_id`]).
fn check_run_id(id: String) -> Result<String, BuildError> {
    let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if !id.is_empty() && id.len() <= 64 && id.chars().all(fine) && !id.starts_with(['.', '-']) {
        return Ok(id);
    }
    Err(BuildError::new(
        BuildErrorKind::Audit,
        format!(
            "run id {id:?}: use 1 to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-' \
(or give none, and sluice makes one)"
        ),
    ))
}

#[cfg(feature = "fleet")]
/// A new run's id: 8 random hex digits, then the time in milliseconds
/// (`3f9a1c7e-19ad2c4b1e0`). The random part comes first so that a few
/// typed characters tell runs apart (ids that began with the time shared
/// their first digits for days); the time after it keeps two runs of one
/// millisecond apart only by chance of 1 in 2^32, and sorts nothing: the
/// record orders runs by their place in the chain.
pub(crate) fn fresh_run_id() -> String {
    new_run_id()
}

fn new_run_id() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{:08x}-{ms:x}", random_u32())
}

/// 32 random bits from the kernel, or, where /dev/urandom cannot be read,
/// from the process's hash keys (which the standard library seeds from the
/// kernel too) mixed with the clock.
fn random_u32() -> u32 {
    use std::io::Read;
    let mut bytes = [0u8; 4];
    match std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)) {
        Ok(()) => u32::from_le_bytes(bytes),
        Err(_) => fresh_seed() as u32,
    }
}

/// The network client's way into the run's sandboxes: a server a command
/// started listens there (see `net::inside`).
#[derive(Debug)]
struct InsideSandboxes(Arc<crate::sandbox::Sandbox>);

impl crate::net::inside::Inside for InsideSandboxes {
    fn connect(&self, addr: std::net::SocketAddr) -> Option<std::net::TcpStream> {
        self.0.connect_inside(addr)
    }

    fn serving(&self) -> bool {
        self.0.serves_inside()
    }
}
