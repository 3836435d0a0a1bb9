//! Flows: the tools a workflow calls. Each flow is one file here; this module
//! holds what they share: the [`Flow`] trait, the tier and effect envelope a
//! call declares, and the registry (the manifest) that names them all.
//!
//! A flow never runs by itself: [`crate::pipeline::Core::call`] drives every call through the
//! one-door pipeline (decode, validate, envelope, authorize, execute).

pub mod apply_patch;
pub mod bash;
pub mod container;
pub mod deadline;
pub mod edit;
#[cfg(test)]
pub(crate) mod example;
pub mod explore;
pub mod fetch;
pub mod files;
pub mod glob;
pub mod grep;
pub mod http;
pub mod http_post;
pub mod langserver;
pub mod lines;
pub mod ls;
pub mod lsp;
pub mod luadoc;
pub mod model;
pub mod probe;
pub mod read;
pub mod reference;
pub mod region;
pub mod shape;
pub mod shell_command;
pub mod test;
pub mod update_plan;
pub mod walk;
pub mod webfetch;
pub mod websearch;
pub mod write;

pub use crate::call::{Envelope, Tier};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::exec::Executor;
use crate::fsops::{self, Target};
use crate::kernel::gate::{Authority, Authorized, CallGate};
use crate::kernel::{Action, Capability};
use crate::net::Net;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

/// The static facts of a flow: what the manifest shows.
#[derive(Debug)]
pub struct FlowSpec {
    pub name: &'static str,
    /// One line, a verb first, at most 200 characters.
    pub description: &'static str,
    pub tier: Tier,
    /// The kinds of capability its calls ask for.
    pub actions: &'static [Action],
    /// Whether a read-only seat may see it.
    pub read_only: bool,
    /// JSON Schema of the input.
    pub schema: fn() -> Value,
    /// The one-line gist of an input, as `sluice audit show` prints it (the
    /// path read, the command run); an input lacking what it names is its
    /// JSON.
    pub summary: fn(&Value) -> String,
    /// Whether a call may start a background job, whose id its output
    /// carries: a replay numbers the run's new jobs after the recorded ones.
    pub starts_jobs: bool,
    /// An input field whose list items the record keeps once each by
    /// content: a conversation's messages, which every later turn repeats,
    /// so a long run's record does not grow with the square of its turns.
    pub stored_once: Option<&'static str>,
    /// The error codes its calls may return besides the ones any call may
    /// ([`COMMON_ERRORS`]), in [`ErrorCode::ALL`]'s order: the reference
    /// lists them, and the `flow_errors` tests make each one happen.
    pub errors: &'static [ErrorCode],
}

/// The error codes any call may return, whatever its flow: a malformed
/// input, the policy's refusal or an ask nobody answered, and in a replay
/// a call that differs from the record.
pub const COMMON_ERRORS: [ErrorCode; 4] = [
    ErrorCode::InvalidInput,
    ErrorCode::PermissionDenied,
    ErrorCode::PermissionRequired,
    ErrorCode::ReplayDiverged,
];

impl FlowSpec {
    /// Whether the flow acts on files and nothing else (its capabilities
    /// are all `fs:*`): on a host sealed to a container it acts on the
    /// container's files ([`files`]), and the pipeline routes it there.
    pub fn acts_on_files(&self) -> bool {
        !self.actions.is_empty()
            && self
                .actions
                .iter()
                .all(|a| matches!(a, Action::FsRead | Action::FsWrite))
    }
}

/// What a call runs against: the run's workspace, identity and process
/// services, and the call's number in the run.
#[derive(Debug, Clone)]
pub struct Context {
    /// Canonical workspace root; relative paths resolve against it.
    pub workspace: PathBuf,
    pub run_id: String,
    /// The script the run executes, as given (empty when embedded).
    pub script: String,
    /// The run's executor: limits, spill folder, background jobs.
    pub exec: Arc<Executor>,
    /// The run's HTTP client and DNS seam.
    pub net: Arc<Net>,
    /// How the run confines commands.
    pub sandbox: Arc<crate::sandbox::Sandbox>,
    /// Folders no command may write, whatever the grants: the audit
    /// store, wherever it lives.
    pub protected: Vec<PathBuf>,
    /// Files no command may see, whatever the grants: sluice's credentials
    /// files.
    pub secrets: Vec<PathBuf>,
    /// This call's sequence number in the run (1 for the first call; 0
    /// outside a call).
    pub call_seq: u64,
    /// Authorizes what the call finds while it runs; `None` outside a call.
    pub gate: Option<CallGate>,
    /// The run's container routes.
    pub containers: Arc<crate::container::Containers>,
    /// Where this call runs, as the pipeline's step 4½ decided.
    pub route: crate::container::Route,
    /// The model providers the operator declared.
    pub models: Arc<crate::model::Providers>,
    /// Where named credentials come from, for the flows that send one
    /// (`headers` and `env` entries that are credentials).
    pub credentials: Arc<crate::credentials::Credentials>,
    /// Where a streamed reply's text goes as it arrives (a script's
    /// `onText`, a served request's progress), and a foreground command's
    /// output; `None` for a call nobody watches.
    pub on_text: Option<TextRelay>,
    /// Stops this call's foreground command when its caller cancels the
    /// call (an MCP client's cancellation); `None` when nothing can.
    pub abort: Option<crate::exec::AbortSignal>,
    /// Calls another flow through the door while this call runs; `None`
    /// outside a call.
    pub inner: Option<Inner>,
    /// The test flow's runner, as the policy (or the embedder) declared it.
    pub tests: Option<Arc<test::Runner>>,
    /// The run's language servers, as the policies (or `--lsp`) declared
    /// them; `None` when none is.
    pub lsp: Option<Arc<langserver::Servers>>,
    /// The model `explore`'s sub-agent runs on, as the operator named it.
    pub explore: Option<Arc<explore::Config>>,
    /// The wider sandbox the person granted this call's command this once
    /// ([`Context::ask_wider`]); `None` for every other call.
    pub widened: Option<Widened>,
}

/// A sandbox mode strictly wider than the policy gives, which a call's
/// command asks for this once (bash's `sandboxPermissions`, with its
/// `justification`). The pipeline asks for it once the call is authorized
/// and routed, before it waits for its turn ([`Context::ask_wider`]).
#[derive(Debug, Clone)]
pub struct Wider {
    /// The command line, as the policy judges it (`proc:spawn:COMMAND`).
    pub command: String,
    pub mode: crate::sandbox::Mode,
    /// Why, shown when asking.
    pub justification: String,
}

/// A wider sandbox granted to one command of one call: made by
/// [`Context::ask_wider`] alone, once the person (or an exact
/// pre-approval) agreed.
#[derive(Debug, Clone)]
pub struct Widened {
    command: String,
    mode: crate::sandbox::Mode,
}

/// A call a running flow makes through the door (the test flow's model
/// judge): numbered, authorized, recorded and replayed as a call of its
/// own, inside its parent's turn.
#[derive(Clone)]
pub struct Inner(
    #[allow(clippy::type_complexity)]
    pub  std::rc::Rc<dyn Fn(&'static str, Value) -> LocalFuture<'static, FlowResult<Value>>>,
);

impl Inner {
    /// Calls flow `flow` with `input`.
    pub async fn call(&self, flow: &'static str, input: Value) -> FlowResult<Value> {
        (self.0)(flow, input).await
    }
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Inner")
    }
}

/// How much of a foreground command's output a watcher of the call sees as
/// it arrives: the bound each captured stream keeps.
pub const SHOWN_OUTPUT: usize = crate::exec::STREAM_BUDGET;

/// Hands the pieces of a streamed reply to whoever watches the call.
#[derive(Clone)]
pub struct TextRelay(pub std::rc::Rc<dyn Fn(&str)>);

impl TextRelay {
    pub fn send(&self, piece: &str) {
        (self.0)(piece)
    }
}

impl std::fmt::Debug for TextRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TextRelay")
    }
}

impl Authority for Context {
    fn authorize(&self, cap: &Capability) -> FlowResult<()> {
        Context::authorize(self, cap)
    }

    fn refuses(&self, cap: &Capability) -> bool {
        self.gate.as_ref().is_none_or(|g| g.refuses(cap))
    }
}

impl Context {
    /// The context of a run, before any call.
    pub fn new(workspace: PathBuf, run_id: String, script: String) -> Context {
        let containers = Arc::new(crate::container::Containers::new(&run_id));
        Context {
            exec: Arc::new(Executor::new(&workspace, &run_id)),
            net: Arc::new(Net::default()),
            sandbox: Arc::new(crate::sandbox::Sandbox::new(
                crate::sandbox::Choice::Auto,
                &run_id,
            )),
            workspace,
            run_id,
            script,
            protected: Vec::new(),
            secrets: crate::credentials::default_file().into_iter().collect(),
            call_seq: 0,
            gate: None,
            containers,
            route: crate::container::Route::Host,
            models: Arc::new(crate::model::Providers::default()),
            credentials: Arc::new(crate::credentials::Credentials::new()),
            on_text: None,
            abort: None,
            inner: None,
            tests: None,
            lsp: None,
            explore: None,
            widened: None,
        }
    }

    /// An executor request for one of this call's commands: numbered as
    /// the call, and stopped like a timeout (TERM, then KILL after the
    /// grace) when the call's caller cancels it.
    pub fn command(&self, launch: crate::exec::CommandLine) -> crate::exec::Request {
        let mut req = self.exec.request(launch, self.call_seq);
        req.abort = self.abort.clone();
        req
    }

    /// Runs a foreground command to its end; whoever watches the call
    /// ([`Context::on_text`]) sees the first [`SHOWN_OUTPUT`] bytes of its
    /// output as text as they arrive.
    pub async fn run_command(&self, spec: crate::exec::Spec) -> crate::exec::Outcome {
        let Some(relay) = &self.on_text else {
            return crate::exec::run(spec).await;
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        let left = std::sync::atomic::AtomicUsize::new(SHOWN_OUTPUT);
        let tap = move |chunk: &[u8]| {
            use std::sync::atomic::Ordering::Relaxed;
            let take = |l: usize| Some(l.saturating_sub(chunk.len()));
            let room = left.fetch_update(Relaxed, Relaxed, take).unwrap_or(0);
            if room > 0 {
                let _ = tx.send(chunk[..chunk.len().min(room)].to_vec());
            }
        };
        let run = crate::exec::run(spec.with_tap(crate::exec::Tap(Arc::new(tap))));
        tokio::pin!(run);
        let mut text = shape::TextPieces::default();
        // What is relayed is cut as the result is: every loaded secret,
        // also one split across pieces.
        let mut cut = crate::credentials::StreamCut::loaded_and(None);
        let mut pass = |piece: &[u8]| {
            let out = cut.push(&text.push(piece));
            if !out.is_empty() {
                relay.send(&out);
            }
        };
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => {
                    while let Ok(piece) = rx.try_recv() {
                        pass(&piece);
                    }
                    break outcome;
                }
                Some(piece) = rx.recv() => pass(&piece),
            }
        };
        let rest = cut.finish();
        if !rest.is_empty() {
            relay.send(&rest);
        }
        outcome
    }

    /// Authorizes a capability found while the call runs. Outside a call
    /// (no gate) everything is refused: nothing may skip the kernel.
    pub fn authorize(&self, cap: &Capability) -> FlowResult<()> {
        match &self.gate {
            Some(gate) => gate.authorize(cap),
            None => Err(FlowError::new(
                ErrorCode::PermissionDenied,
                format!("{cap} was asked for outside a flow call, where nothing can authorize it"),
            )
            .with("capability", cap.to_string())),
        }
    }

    /// The call's gate; outside a call, `permission_denied`.
    fn call_gate(&self) -> FlowResult<&CallGate> {
        self.gate.as_ref().ok_or_else(|| {
            FlowError::new(
                ErrorCode::PermissionDenied,
                "a command was confined outside a flow call",
            )
        })
    }

    /// How a command of this call is confined: the profile the run's
    /// static grants give it, widened for this call alone when the person
    /// agreed before it ran ([`Context::ask_wider`]). `None`: the grants
    /// confine nothing. No working runner is `provider_unavailable`: the
    /// command does not run.
    pub fn confine(&self, command: &str) -> FlowResult<Option<crate::sandbox::Confined>> {
        let mut profile = self.profile()?;
        if let Some(w) = self.widened.as_ref().filter(|w| w.command == command) {
            self.call_gate()?.kernel().with_static(|view| {
                self.sandbox
                    .widen(view, &self.workspace, &mut profile, w.mode)
            });
        }
        self.confine_profile(profile, &self.workspace)
    }

    /// Asks the person whether this call's command may run with `wider`'s
    /// mode this once (`sandboxPermissions`), before the call waits for its
    /// turn: then [`Context::confine`] widens its profile. Refused with
    /// nobody asked (`invalid_input`) for a command routed into a
    /// container, whose mounts bound it, and for a mode the policy already
    /// gives. Only an exact pre-approval or the person grants it, for this
    /// call alone ([`CallGate::ask_once`]).
    pub async fn ask_wider(&mut self, wider: &Wider) -> FlowResult<()> {
        if let Some(name) = self.route.container() {
            return Err(FlowError::invalid_input("sandboxPermissions", format!("sandboxPermissions widens the host's sandbox, but this command runs in container {name}, which its mounts bound; drop sandboxPermissions")));
        }
        let given = self.profile()?.mode;
        if wider.mode <= given {
            return Err(FlowError::invalid_input(
                "sandboxPermissions",
                format!(
                    "the policy already gives this command {}; sandboxPermissions asks for a strictly wider mode ({})",
                    given.as_str(),
                    wider_than(given)
                ),
            ));
        }
        let cap = Capability {
            action: Action::ProcSpawn,
            resource: wider.command.clone(),
        };
        let reason = format!(
            "the command asks to run with {} this once: {}",
            wider.mode.as_str(),
            wider.justification
        );
        let gate = self.call_gate()?;
        gate.ask_once(&cap, "sandboxPermissions", reason).await?;
        self.widened = Some(Widened {
            command: wider.command.clone(),
            mode: wider.mode,
        });
        Ok(())
    }

    /// How a command of this call that runs in `copy`, a checkout of the
    /// workspace sluice made (the test flow's base worktree), is confined:
    /// the workspace's profile, with each of its grants and masks inside
    /// the workspace given to the same path inside `copy` as well.
    pub fn confine_copy(
        &self,
        copy: &std::path::Path,
    ) -> FlowResult<Option<crate::sandbox::Confined>> {
        let mut profile = self.profile()?;
        let ws = &self.workspace;
        // The copy's files are the base revision's, links included: a grant
        // goes to a mirrored path only where no link is on the way (a link
        // committed as `out` must not carry `out`'s write grant outside),
        // and a mask to wherever its path leads (masking more fails closed).
        let mirror = |paths: &mut Vec<PathBuf>, grant: bool| {
            let copies: Vec<PathBuf> = paths
                .iter()
                .filter_map(|p| p.strip_prefix(ws).ok())
                .map(|rel| copy.join(rel))
                .filter_map(|p| {
                    let real = std::fs::canonicalize(&p).ok()?;
                    (!grant || real == p).then_some(real)
                })
                .collect();
            paths.extend(copies);
        };
        mirror(&mut profile.writable, true);
        mirror(&mut profile.readable, true);
        mirror(&mut profile.read_only, false);
        mirror(&mut profile.hidden, false);
        profile.hidden = crate::sandbox::outermost(std::mem::take(&mut profile.hidden));
        self.confine_profile(profile, copy)
    }

    /// How a language server of the run is confined: it reads what the
    /// policy lets commands read, writes nothing but its private temp
    /// storage (its cache, which goes with it), reaches the network only
    /// when commands may, and uses at most `memory_mb` of memory (or the
    /// policies' lower limit).
    pub fn confine_server(&self, memory_mb: u64) -> FlowResult<Option<crate::sandbox::Confined>> {
        use crate::exec::resources::Kind;
        let mut profile = self.profile()?;
        let writable = std::mem::take(&mut profile.writable);
        profile.readable = crate::sandbox::outermost([profile.readable, writable].concat());
        profile.read_only.clear();
        profile.mode = crate::sandbox::Mode::ReadOnly;
        let memory = profile
            .limits
            .values
            .get(Kind::MemoryMb)
            .map_or(memory_mb, |m| m.min(memory_mb));
        profile.limits.values.set(Kind::MemoryMb, memory);
        self.confine_profile(profile, &self.workspace)
    }

    /// The profile the run's static grants give a command of this call.
    fn profile(&self) -> FlowResult<crate::sandbox::Profile> {
        let kernel = self.call_gate()?.kernel();
        Ok(kernel.with_static(|view| self.sandbox.derive(view, &self.workspace)))
    }

    /// Confines a command under `profile`, with the audit store read-only
    /// and sluice's secrets hidden whatever it grants; `root` is the tree
    /// the command works in.
    fn confine_profile(
        &self,
        mut profile: crate::sandbox::Profile,
        root: &std::path::Path,
    ) -> FlowResult<Option<crate::sandbox::Confined>> {
        // The audit store, wherever it is, is sluice's alone.
        let writable = profile.writable.clone();
        profile.read_only.extend(
            self.protected
                .iter()
                .filter(|p| writable.iter().any(|w| p.starts_with(w)))
                .cloned(),
        );
        for secret in self
            .secrets
            .iter()
            .filter_map(|s| std::fs::canonicalize(s).ok())
        {
            if profile.sees(&secret) {
                profile.hidden.push(secret);
            }
        }
        profile.hidden = crate::sandbox::outermost(std::mem::take(&mut profile.hidden));
        self.sandbox.confine(profile, root).map_err(|why| {
            FlowError::new(
                ErrorCode::ProviderUnavailable,
                format!("{why}; the command did not run"),
            )
        })
    }

    /// The context of call number `seq`.
    pub fn for_call(&self, seq: u64) -> Context {
        Context {
            call_seq: seq,
            ..self.clone()
        }
    }

    /// Resolves the path in input field `field`.
    pub fn resolve(&self, field: &str, given: &str) -> FlowResult<Target> {
        fsops::path::resolve(&self.workspace, field, given)
    }
}

/// A flow, statically typed. An implementing value is one planned call: its
/// input plus whatever planning resolved (paths, ranges).
pub trait Flow: Sized + 'static {
    type Input: DeserializeOwned;
    type Output: Serialize;
    const SPEC: FlowSpec;

    /// JSON Schema of the output: a closed object (or a `oneOf` of them
    /// when the output has shapes), every field described, and `required`
    /// naming exactly the fields every output has. It sits beside the
    /// `Output` type so the two change together; a unit test serializes
    /// [`Flow::output_samples`] against it so they cannot drift apart.
    fn output_schema() -> Value;

    /// Outputs that together show every field of [`Flow::output_schema`],
    /// each optional one also left out: the test that pins the schema to
    /// the `Output` type serializes them.
    #[cfg(test)]
    fn output_samples() -> Vec<Self::Output>;

    /// The flow's own input rules, beyond what the types enforce.
    fn validate(_input: &Self::Input) -> FlowResult<()> {
        Ok(())
    }

    /// Why the run can make no call of this flow at all (the test flow
    /// needs a declared runner), or `None`; a served tool list leaves such
    /// a flow out.
    fn unavailable(_ctx: &Context) -> Option<&'static str> {
        None
    }

    /// Resolves the input and declares the call's envelope.
    fn plan(ctx: &Context, input: Self::Input) -> FlowResult<(Self, Envelope)>;

    /// A wider sandbox this planned call's command asks for this once
    /// (bash's `sandboxPermissions`), which the pipeline asks for before
    /// the call waits for its turn.
    fn wider(&self) -> Option<Wider> {
        None
    }

    /// Does the work. Runs only with the proof that the envelope was
    /// authorized, which only the gate makes.
    fn execute(
        self,
        ctx: &Context,
        door: Authorized,
    ) -> impl Future<Output = FlowResult<Self::Output>>;
}

pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;
type Run = Box<dyn for<'a> FnOnce(&'a Context, Authorized) -> LocalFuture<'a, FlowResult<Value>>>;

/// A call that passed decode, validate and envelope, waiting to be authorized.
pub struct Prepared {
    pub envelope: Envelope,
    /// The wider sandbox its command asks for this once ([`Flow::wider`]).
    pub wider: Option<Wider>,
    run: Run,
}

impl Prepared {
    /// A call whose envelope is `envelope` and which `run` does once
    /// authorized: what a flow not written against [`Flow`] (an
    /// embedder's) prepares. `run` cannot be called without the
    /// [`Authorized`] proof, which only the gate makes.
    pub fn new(
        envelope: Envelope,
        run: impl for<'a> FnOnce(&'a Context, Authorized) -> LocalFuture<'a, FlowResult<Value>>
            + 'static,
    ) -> Prepared {
        Prepared {
            envelope,
            wider: None,
            run: Box::new(run),
        }
    }

    /// Steps 7-8: runs the call, which only the [`Authorized`] proof of
    /// step 4 allows. Every named credential's secret this process has
    /// loaded is cut from what comes back, output or error, before the
    /// caller or the record sees it: a server echoing a header, a command
    /// printing its environment, a file a command wrote it to.
    pub fn execute(self, ctx: &Context, door: Authorized) -> LocalFuture<'_, FlowResult<Value>> {
        let run = (self.run)(ctx, door);
        Box::pin(async move {
            let mut result = run.await;
            crate::credentials::cut_loaded(&mut result);
            result
        })
    }
}

/// A flow with its types erased, as the registry holds it.
pub trait DynFlow {
    fn spec(&self) -> &'static FlowSpec;
    /// JSON Schema of the input: the spec's ([`FlowSpec::schema`]) for a
    /// flow written against [`Flow`].
    fn input_schema(&self) -> Value {
        (self.spec().schema)()
    }
    /// JSON Schema of the output ([`Flow::output_schema`]).
    fn output_schema(&self) -> Value;
    /// [`Flow::output_samples`], serialized as calls return them.
    #[cfg(test)]
    fn output_samples(&self) -> Vec<Value>;
    /// Steps 1-3 of the pipeline: decode, validate, envelope.
    fn prepare(&self, ctx: &Context, input: Value) -> FlowResult<Prepared>;
    /// [`Flow::unavailable`].
    fn unavailable(&self, _ctx: &Context) -> Option<&'static str> {
        None
    }
}

struct Entry<F>(std::marker::PhantomData<F>);

impl<F: Flow> DynFlow for Entry<F> {
    fn spec(&self) -> &'static FlowSpec {
        &F::SPEC
    }

    fn unavailable(&self, ctx: &Context) -> Option<&'static str> {
        F::unavailable(ctx)
    }

    fn output_schema(&self) -> Value {
        F::output_schema()
    }

    #[cfg(test)]
    fn output_samples(&self) -> Vec<Value> {
        F::output_samples()
            .into_iter()
            .map(|out| serde_json::to_value(out).expect("an output serializes"))
            .collect()
    }

    fn prepare(&self, ctx: &Context, input: Value) -> FlowResult<Prepared> {
        let input: F::Input = decode(F::SPEC.name, input)?;
        F::validate(&input)?;
        let (call, envelope) = F::plan(ctx, input)?;
        let wider = call.wider();
        let run: Run = Box::new(move |ctx, door| {
            Box::pin(async move {
                let out = call.execute(ctx, door).await?;
                serde_json::to_value(out).map_err(|e| {
                    FlowError::new(
                        ErrorCode::CommandFailed,
                        format!("cannot encode output: {e}"),
                    )
                })
            })
        });
        Ok(Prepared {
            envelope,
            wider,
            run,
        })
    }
}

/// Decodes a JSON input into a flow's typed input; an unknown field, a
/// missing one or a wrong type is `invalid_input` naming the field.
pub fn decode<T: DeserializeOwned>(flow: &str, input: Value) -> FlowResult<T> {
    if !input.is_object() {
        return Err(FlowError::new(
            ErrorCode::InvalidInput,
            format!("{flow} takes one table of named fields, e.g. {flow}{{path = \"a.txt\"}}."),
        ));
    }
    let mut input = input;
    let e = loop {
        match serde_path_to_error::deserialize::<_, T>(&input) {
            Ok(v) => return Ok(v),
            // Lua has one empty table for `{}` and `[]`, and it reaches us
            // as an object: where a list is expected, it is an empty list.
            Err(e)
                if e.inner()
                    .to_string()
                    .starts_with("invalid type: map, expected a sequence") =>
            {
                match empty_object_at(&mut input, e.path()) {
                    Some(slot) => *slot = Value::Array(vec![]),
                    None => break e,
                }
            }
            Err(e) => break e,
        }
    };
    {
        let inner = e.inner().to_string();
        let path = e.path().to_string();
        // serde_path_to_error's path already ends in an unknown field's name.
        let field = match quoted_field(&inner) {
            Some(f) if path == "." => f,
            Some(f) if !path.ends_with(&f) => format!("{path}.{f}"),
            _ => path,
        };
        Err(FlowError::invalid_input(
            &field,
            format!("{flow}: `{field}`: {inner}. `sluice flows {flow}` shows every field."),
        ))
    }
}

/// The value at `path` if it is an empty object.
fn empty_object_at<'v>(
    root: &'v mut Value,
    path: &serde_path_to_error::Path,
) -> Option<&'v mut Value> {
    use serde_path_to_error::Segment;
    let mut at = root;
    for seg in path.iter() {
        at = match seg {
            Segment::Map { key } => at.get_mut(key.as_str())?,
            Segment::Seq { index } => at.get_mut(*index)?,
            _ => return None,
        };
    }
    at.as_object().is_some_and(|o| o.is_empty()).then_some(at)
}

/// The field serde names in "unknown field `x`" and "missing field `x`".
fn quoted_field(message: &str) -> Option<String> {
    let rest = message
        .strip_prefix("unknown field `")
        .or_else(|| message.strip_prefix("missing field `"))?;
    rest.split('`').next().map(str::to_string)
}

/// Every flow sluice ships, in the manifest's order.
pub struct Registry {
    flows: Vec<Box<dyn DynFlow>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::standard()
    }
}

impl Registry {
    pub fn standard() -> Self {
        let mut r = Registry { flows: Vec::new() };
        r.add::<read::Read>();
        r.add::<write::Write>();
        r.add::<edit::Edit>();
        r.add::<apply_patch::ApplyPatch>();
        r.add::<ls::Ls>();
        r.add::<glob::Glob>();
        r.add::<grep::Grep>();
        r.add::<bash::Bash>();
        r.add::<shell_command::ShellCommand>();
        r.add::<fetch::Fetch>();
        r.add::<http_post::HttpPost>();
        r.add::<webfetch::WebFetch>();
        r.add::<websearch::WebSearch>();
        r.add::<model::Model>();
        r.add::<test::Test>();
        r.add::<lsp::Lsp>();
        r.add::<update_plan::UpdatePlan>();
        r.add::<explore::Explore>();
        r
    }

    /// Adds flow `F` after the others: the one line a new flow needs.
    pub(crate) fn add<F: Flow>(&mut self) {
        self.flows
            .push(Box::new(Entry::<F>(std::marker::PhantomData)));
    }

    /// Adds a flow not written against [`Flow`] (an embedder's) after the
    /// others; the caller checked that its name is free.
    pub(crate) fn add_dyn(&mut self, flow: Box<dyn DynFlow>) {
        self.flows.push(flow);
    }

    /// The flow a caller names, by its canonical name (`http-post`) or the
    /// name scripts call it by (`http_post`, see [`lua_name`]): the one
    /// place both spellings are accepted, so `sluice.call`, `Runtime::call`
    /// and `sluice flows NAME` agree, while the record and policies' `req.flow`
    /// see the canonical name ([`FlowSpec::name`]).
    pub fn get(&self, name: &str) -> Option<&dyn DynFlow> {
        self.flows
            .iter()
            .find(|f| {
                let canonical = f.spec().name;
                canonical == name || (canonical.contains('-') && lua_name(canonical) == name)
            })
            .map(|f| f.as_ref())
    }

    pub fn specs(&self) -> impl Iterator<Item = &'static FlowSpec> + '_ {
        self.flows.iter().map(|f| f.spec())
    }

    /// Every flow, in the manifest's order.
    pub fn flows(&self) -> impl Iterator<Item = &dyn DynFlow> + '_ {
        self.flows.iter().map(|f| f.as_ref())
    }

    /// The names a read-only seat may see.
    pub fn read_only(&self) -> Vec<&'static str> {
        self.specs()
            .filter(|s| s.read_only)
            .map(|s| s.name)
            .collect()
    }

    /// The manifest as JSON: every flow, and the read-only set.
    pub fn manifest(&self) -> Value {
        let flows: Vec<Value> = self.flows().map(spec_json).collect();
        json!({ "flows": flows, "readOnly": self.read_only(), "commonErrors": COMMON_ERRORS })
    }
}

/// The audit knows the flows only through this (it sits below them).
impl crate::audit::FlowFacts for Registry {
    fn summary(&self, flow: &str, input: &Value) -> Option<String> {
        self.get(flow).map(|f| (f.spec().summary)(input))
    }

    fn starts_jobs(&self, flow: &str) -> bool {
        self.get(flow).is_some_and(|f| f.spec().starts_jobs)
    }

    fn plan<'a>(&self, flow: &str, input: &'a Value) -> Option<&'a Value> {
        (flow == <update_plan::UpdatePlan as Flow>::SPEC.name).then_some(input)
    }
}

/// An input's gist for the audit: the text of `field` (the path, URL or
/// query the call names), else the input's JSON.
pub fn field_or_json(input: &Value, field: &str) -> String {
    let named = input.get(field).and_then(Value::as_str);
    named.map_or_else(|| input.to_string(), str::to_string)
}

/// One flow's manifest entry.
pub fn spec_json(flow: &dyn DynFlow) -> Value {
    let s = flow.spec();
    json!({
        "name": s.name,
        "description": s.description,
        "tier": s.tier,
        "capabilities": s.actions,
        "readOnly": s.read_only,
        "errors": s.errors,
        "inputSchema": flow.input_schema(),
        "outputSchema": flow.output_schema(),
    })
}

/// The name a script calls a flow by, `sluice.<name>`: a Lua name has no
/// dash, so `http-post` is `sluice.http_post` (as the module binds it).
pub fn lua_name(flow: &str) -> String {
    flow.replace('-', "_")
}

/// The schema of a `headers` or `env` value: text, or a credential
/// reference ([`crate::credentials::Reference`]).
pub(crate) fn held_schema() -> Value {
    json!({"anyOf": [
        {"type": "string"},
        {"type": "object", "title": "Credential", "additionalProperties": false, "required": ["credential"],
         "description": "A named credential, as sluice.credential(NAME, {prefix = ...}) makes it: its secret is sent, never seen.",
         "properties": {
            "credential": {"type": "string", "description": "The credential's name (SLUICE_CREDENTIAL_NAME, or the credentials file)."},
            "prefix": {"type": "string", "description": "Text sent before the secret, e.g. \"Bearer \"."}
         }}
    ]})
}

/// A closed object schema (an output's, or a part of one): `required` are
/// the fields every value has, `optional` those some leave out. Each field's
/// schema carries its description ([`field`], [`list`], [`choice`],
/// [`nested`]). Output schemas are written with these so that each field is
/// one line beside the others, easy to hold against the `Output` type.
pub(crate) fn closed(required: &[(&str, Value)], optional: &[(&str, Value)]) -> Value {
    let properties: serde_json::Map<String, Value> = required
        .iter()
        .chain(optional)
        .map(|(name, schema)| (name.to_string(), schema.clone()))
        .collect();
    let names: Vec<&str> = required.iter().map(|(name, _)| *name).collect();
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": names,
        "properties": properties,
    })
}

/// A field of JSON type `ty` (`string`, `integer`, `number`, `boolean`).
pub(crate) fn field(ty: &str, description: &str) -> Value {
    json!({"type": ty, "description": description})
}

/// A list field whose elements are `items`.
pub(crate) fn list(items: Value, description: &str) -> Value {
    json!({"type": "array", "items": items, "description": description})
}

/// A string field that is one of `values`.
pub(crate) fn choice(values: &[&str], description: &str) -> Value {
    json!({"type": "string", "enum": values, "description": description})
}

/// An object field, `schema` (a [`closed`] one) named `title`: editors show
/// it as its own type (`sluice.<title>` in `lua/sluice.d.lua`).
pub(crate) fn nested(title: &str, description: &str, schema: Value) -> Value {
    let mut schema = schema;
    schema["title"] = json!(title);
    schema["description"] = json!(description);
    schema
}

/// The modes wider than `mode`, for a message.
fn wider_than(mode: crate::sandbox::Mode) -> &'static str {
    use crate::sandbox::Mode;
    match mode {
        Mode::ReadOnly => "workspace-write or danger-full-access",
        Mode::WorkspaceWrite => "danger-full-access",
        Mode::DangerFullAccess => "there is none",
    }
}

/// Values held against output schemas, for the tests that keep each flow's
/// schema and what it really returns together.
#[cfg(test)]
pub(crate) mod conform {
    use serde_json::Value;
    use std::collections::{BTreeMap, BTreeSet};

    /// The keys each object schema met, by the schema's place in the output
    /// schema (a JSON pointer): those every value had, and those any had.
    #[derive(Debug, Default)]
    pub struct Seen {
        every: BTreeMap<String, BTreeSet<String>>,
        any: BTreeMap<String, BTreeSet<String>>,
    }

    impl Seen {
        fn note(&mut self, at: &str, keys: BTreeSet<String>) {
            self.any
                .entry(at.into())
                .or_default()
                .extend(keys.iter().cloned());
            let every = self.every.entry(at.into()).or_insert_with(|| keys.clone());
            every.retain(|k| keys.contains(k));
        }

        fn merge(&mut self, other: Seen) {
            for (at, keys) in other.every {
                let any = other.any.get(&at).cloned().unwrap_or_default();
                self.note(&at, keys);
                self.any.entry(at).or_default().extend(any);
            }
        }
    }

    /// Whether `value` is what `schema` (at `at`, a JSON pointer into the
    /// output schema) allows: its types, enums, closed objects and required
    /// fields, and for a `oneOf` exactly one shape. The keys of its objects
    /// go to `seen`. An error says where and why.
    pub fn check(schema: &Value, value: &Value, at: &str, seen: &mut Seen) -> Result<(), String> {
        if let Some(shapes) = schema["oneOf"].as_array() {
            let mut fits = Vec::new();
            for (i, shape) in shapes.iter().enumerate() {
                let mut mine = Seen::default();
                if check(shape, value, &format!("{at}/oneOf/{i}"), &mut mine).is_ok() {
                    fits.push(mine);
                }
            }
            return match fits.len() {
                1 => {
                    seen.merge(fits.remove(0));
                    Ok(())
                }
                n => Err(format!(
                    "{at}: {value} fits {n} of the oneOf shapes, not one"
                )),
            };
        }
        if let Some(values) = schema["enum"].as_array() {
            if !values.contains(value) {
                return Err(format!("{at}: {value} is none of {values:?}"));
            }
        }
        let fits = match schema["type"].as_str() {
            Some("string") => value.is_string(),
            Some("integer") => value.is_i64() || value.is_u64(),
            Some("number") => value.is_number(),
            Some("boolean") => value.is_boolean(),
            Some("array") => {
                let items = value
                    .as_array()
                    .ok_or(format!("{at}: {value} is not a list"))?;
                for item in items {
                    check(&schema["items"], item, &format!("{at}/items"), seen)?;
                }
                true
            }
            // A free-form object (a tool call's input) holds anything.
            Some("object") if schema.get("properties").is_none() => value.is_object(),
            Some("object") => {
                let fields = value
                    .as_object()
                    .ok_or(format!("{at}: {value} is not an object"))?;
                let props = schema["properties"]
                    .as_object()
                    .ok_or(format!("{at}: no properties"))?;
                let required = schema["required"].as_array().cloned().unwrap_or_default();
                if let Some(key) = fields.keys().find(|k| !props.contains_key(*k)) {
                    return Err(format!("{at}: `{key}` is not in the schema"));
                }
                if let Some(key) = required
                    .iter()
                    .find(|k| !fields.contains_key(k.as_str().unwrap_or_default()))
                {
                    return Err(format!("{at}: required {key} is missing from {value}"));
                }
                seen.note(at, fields.keys().cloned().collect());
                for (key, v) in fields {
                    check(&props[key], v, &format!("{at}/properties/{key}"), seen)?;
                }
                true
            }
            // A field described and nothing else holds any value (the
            // `lsp` flow's `result`, the server's own answer).
            None if schema.as_object().is_some_and(|o| o.len() == 1) => true,
            other => return Err(format!("{at}: the schema names no type ({other:?})")),
        };
        if fits {
            Ok(())
        } else {
            Err(format!("{at}: {value} is not of type {}", schema["type"]))
        }
    }

    /// Whether the values `seen` covered `schema`: each of its objects is
    /// closed, its fields described, and met, with exactly its properties
    /// among them and exactly its required ones in every one.
    pub fn covered(schema: &Value, at: &str, seen: &Seen) -> Result<(), String> {
        if let Some(shapes) = schema["oneOf"].as_array() {
            for (i, shape) in shapes.iter().enumerate() {
                covered(shape, &format!("{at}/oneOf/{i}"), seen)?;
            }
            return Ok(());
        }
        match schema["type"].as_str() {
            Some("array") => covered(&schema["items"], &format!("{at}/items"), seen),
            Some("object") if schema.get("properties").is_none() => Ok(()),
            Some("object") => {
                if schema["additionalProperties"] != false {
                    return Err(format!(
                        "{at}: an output object is closed (additionalProperties: false)"
                    ));
                }
                let props = schema["properties"]
                    .as_object()
                    .ok_or(format!("{at}: no properties"))?;
                let names: BTreeSet<String> = props.keys().cloned().collect();
                let required: BTreeSet<String> = schema["required"]
                    .as_array()
                    .map(|r| {
                        r.iter()
                            .filter_map(|k| k.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                let (Some(any), Some(every)) = (seen.any.get(at), seen.every.get(at)) else {
                    return Err(format!("{at}: no sample output shows this object"));
                };
                if *any != names {
                    return Err(format!(
                        "{at}: the schema has the fields {names:?}, the outputs {any:?}"
                    ));
                }
                if *every != required {
                    return Err(format!(
                        "{at}: the schema requires {required:?}, every output has {every:?}"
                    ));
                }
                for (key, prop) in props {
                    if !prop["description"].is_string() {
                        return Err(format!("{at}: `{key}` has no description"));
                    }
                    covered(prop, &format!("{at}/properties/{key}"), seen)?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each flow's samples are its real `Output` type serialized: the
    /// schema must name exactly the fields they show, require exactly those
    /// every one shows, and allow their types, so neither can change alone.
    #[test]
    fn output_schemas_describe_exactly_what_the_flows_return() {
        for flow in Registry::standard().flows() {
            let name = flow.spec().name;
            let schema = flow.output_schema();
            let mut seen = conform::Seen::default();
            for out in flow.output_samples() {
                conform::check(&schema, &out, "#", &mut seen)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            conform::covered(&schema, "#", &seen).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn descriptions_start_with_a_verb_and_fit_one_line() {
        for s in Registry::standard().specs() {
            assert!(s.description.len() <= 200, "{}", s.name);
            assert!(!s.description.contains('\n'), "{}", s.name);
            let first = s.description.split(' ').next().unwrap();
            assert!(
                first.ends_with('s') && first.chars().next().unwrap().is_uppercase(),
                "{}: description should open with a verb like 'Reads': {first}",
                s.name
            );
        }
    }

    #[test]
    fn schemas_are_closed_objects_with_described_fields() {
        for s in Registry::standard().specs() {
            let schema = (s.schema)();
            assert_eq!(schema["type"], "object", "{}", s.name);
            assert_eq!(schema["additionalProperties"], false, "{}", s.name);
            for (field, prop) in schema["properties"].as_object().unwrap() {
                assert!(prop["description"].is_string(), "{}.{field}", s.name);
            }
        }
    }

    #[test]
    fn envelopes_narrow_to_the_paths_in_the_input() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(ws.join("a.txt"), "x\n").unwrap();
        let ctx = Context::new(ws.clone(), "t".into(), String::new());
        let registry = Registry::standard();
        let envelope = |flow: &str, input: Value| {
            let call = registry.get(flow).unwrap().prepare(&ctx, input).unwrap();
            let caps: Vec<String> = call
                .envelope
                .capabilities()
                .iter()
                .map(|c| c.to_string())
                .collect();
            (call.envelope.tier, caps)
        };
        let a = ws.join("a.txt").display().to_string();
        assert_eq!(
            envelope("read", json!({"path": "a.txt"})),
            (Tier::Sealed, vec![format!("fs:read:{a}")])
        );
        assert_eq!(
            envelope("write", json!({"path": "a.txt", "content": ""})),
            (Tier::Compensable, vec![format!("fs:write:{a}")])
        );
        assert_eq!(
            envelope(
                "edit",
                json!({"path": "a.txt", "oldString": "x", "newString": "y"})
            ),
            (
                Tier::Compensable,
                vec![format!("fs:read:{a}"), format!("fs:write:{a}")]
            )
        );
        assert_eq!(
            envelope("ls", json!({})),
            (Tier::Sealed, vec![format!("fs:read:{}", ws.display())])
        );
    }

    /// The kernel resolves a command's relative paths where it runs, which
    /// only the flow's plan knows (bash's `cwd`, shell_command's `workdir`).
    #[test]
    fn commands_carry_the_folder_they_run_in() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let ctx = Context::new(ws.clone(), "t".into(), String::new());
        let registry = Registry::standard();
        let cwd = |flow: &str, input: Value| {
            let call = registry.get(flow).unwrap().prepare(&ctx, input).unwrap();
            call.envelope.cwd
        };
        let sub = Some(ws.join("sub"));
        assert_eq!(cwd("bash", json!({"command": "true", "cwd": "sub/."})), sub);
        assert_eq!(cwd("bash", json!({"command": "true"})), Some(ws.clone()));
        assert_eq!(
            cwd(
                "shell_command",
                json!({"command": "true", "workdir": "sub"})
            ),
            sub
        );
        assert_eq!(cwd("read", json!({"path": "sub"})), None);
    }

    #[test]
    fn decode_names_the_field() {
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct In {
            path: String,
            offset: Option<u64>,
        }
        let e = decode::<In>("read", json!({"path": "a", "offest": 3})).unwrap_err();
        assert_eq!(e.details["field"], "offest");
        let e = decode::<In>("read", json!({"path": "a", "offset": "3"})).unwrap_err();
        assert_eq!(e.details["field"], "offset");
        assert!(e.message.contains("invalid type"), "{}", e.message);
        let e = decode::<In>("read", json!({})).unwrap_err();
        assert_eq!(e.details["field"], "path");
        let e = decode::<In>("read", json!("a.txt")).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
    }
}
