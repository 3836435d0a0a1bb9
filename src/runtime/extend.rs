//! An embedding program's own flows: [`CustomFlow`], the public, object-safe
//! face of a flow, and the adapter that puts one in the run's registry
//! behind the same door as the built-in flows.
//!
//! The door holds for them too: the adapter turns the flow's [`Reach`]
//! into the call's envelope (paths resolved and made canonical by sluice,
//! URLs parsed as the network flows parse theirs), the kernel judges every
//! capability of it, and [`CustomFlow::run`] is called only from the
//! closure the pipeline runs with the gate's proof. The call is recorded and
//! a replay answers it from the record, like any flow's.

use crate::call::{Action, Capability, Envelope, Tier};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::flows::{Context, DynFlow, FlowSpec, Prepared, Registry};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The static facts of an embedder's flow: what the manifest shows of it.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowInfo {
    /// Its name: a Lua identifier (`wordcount`, scripts call
    /// `sluice.wordcount{...}`), none of the built-in flows' names nor a
    /// field of the `sluice` module.
    pub name: String,
    /// One line, a verb first (`Counts the words of a file.`).
    pub description: String,
    /// How far its effects can be undone, which decides how carefully its
    /// calls are recorded (an irreversible call's intent is on disk before
    /// it runs).
    pub tier: Tier,
    /// JSON Schema of its input: an object (`{"type": "object", ...}`).
    pub input_schema: Value,
    /// JSON Schema of its output.
    pub output_schema: Value,
}

/// What one call of an embedder's flow will touch, declared before it
/// runs: each entry becomes a capability the policy decides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// Files or folders it reads (`fs:read`), relative to the workspace or
    /// absolute; sluice resolves them (symlinks too) before the policy sees
    /// them, and [`Granted::reads`] holds what it resolved.
    pub reads: Vec<PathBuf>,
    /// Files or folders it writes (`fs:write`), resolved like `reads`.
    pub writes: Vec<PathBuf>,
    /// URLs it sends a GET to (`net:get:HOST`; a `localhost` or private
    /// address also needs `net:private:ORIGIN`, granted only exactly).
    pub gets: Vec<String>,
    /// URLs it sends a POST to (`net:post:HOST`, and `net:private` as for
    /// `gets`).
    pub posts: Vec<String>,
    /// Command lines it runs (`proc:spawn:LINE`, judged command by command
    /// as `bash`'s are, in the workspace).
    pub commands: Vec<String>,
}

/// What [`CustomFlow::run`] is given once the policy authorized the call's
/// [`Reach`]: the call's facts and the canonical paths it may touch.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Granted {
    /// The run's workspace, canonical.
    pub workspace: PathBuf,
    /// The run's id.
    pub run_id: String,
    /// The call's number in the run (1 for the first).
    pub call_seq: u64,
    /// [`Reach::reads`], resolved, in the order given.
    pub reads: Vec<PathBuf>,
    /// [`Reach::writes`], resolved, in the order given.
    pub writes: Vec<PathBuf>,
}

/// A flow an embedding program adds to its runs
/// (`RuntimeBuilder::flow`). sluice calls [`CustomFlow::plan`] to learn
/// what a call will touch, asks the policy about each capability of it,
/// and only then calls [`CustomFlow::run`]. sluice cannot confine the
/// embedder's own code: `run` should touch only what `plan` declared (the
/// paths in [`Granted`]); a URL it declares is judged by host (and, when
/// its host is `localhost` or a private or this machine's own address, by
/// the exact `net:private:ORIGIN` grant too), and what it connects to is
/// up to it (none of the network flows' DNS pinning applies, nor their
/// private-address check of what a name resolves to).
pub trait CustomFlow: Send + Sync + 'static {
    /// Its name, description, tier and schemas. Called once, when the run
    /// is built.
    fn info(&self) -> FlowInfo;

    /// What a call with `input` (a JSON object) will touch, with paths
    /// relative to `workspace` or absolute. A bad input is an error naming
    /// its field (`FlowError::invalid_input`).
    fn plan(&self, input: &Value, workspace: &Path) -> Result<Reach, FlowError>;

    /// Does the work, after the policy authorized the call's [`Reach`];
    /// blocking (the run waits for it). Returns the call's JSON output.
    fn run(&self, input: Value, granted: &Granted) -> Result<Value, FlowError>;
}

/// Names the `sluice` module holds besides the flows: a flow of the
/// embedder's may not hide one.
const MODULE_FIELDS: &[&str] = &[
    "call",
    "tools",
    "json",
    "args",
    "workspace",
    "run_id",
    "now",
    "sleep",
    "credential",
    "spawn",
    "all",
    "map",
    "retry",
    "agent",
    "policy",
    "job",
];

const LUA_KEYWORDS: &[&str] = &[
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
    "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
];

/// Adds `flows` to `registry` after the built-in ones; a name that is not
/// a Lua identifier, or that a built-in flow, a module field or another of
/// `flows` already holds, is an error naming it.
pub fn add_all(registry: &mut Registry, flows: &[Arc<dyn CustomFlow>]) -> Result<(), String> {
    for flow in flows {
        let info = flow.info();
        check(registry, &info)?;
        let spec = interned(&info);
        registry.add_dyn(Box::new(Adapter {
            flow: flow.clone(),
            spec,
            input_schema: info.input_schema,
            output_schema: info.output_schema,
        }));
    }
    Ok(())
}

fn check(registry: &Registry, info: &FlowInfo) -> Result<(), String> {
    let name = &info.name;
    let lua_name = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !lua_name || LUA_KEYWORDS.contains(&name.as_str()) {
        return Err(format!(
            "flow {name:?} is not a Lua identifier (letters, digits and `_`, not starting with a digit, not a keyword); scripts call it as sluice.NAME{{...}}, so rename it, e.g. {:?}",
            suggest(name)
        ));
    }
    if let Some(taken) = registry.get(name) {
        return Err(format!(
            "flow {name:?} clashes with sluice's own flow {:?}; give yours another name",
            taken.spec().name
        ));
    }
    if MODULE_FIELDS.contains(&name.as_str()) {
        return Err(format!(
            "flow {name:?} would hide sluice.{name}, which the sluice module already holds; give it another name"
        ));
    }
    if info.input_schema["type"] != "object" {
        return Err(format!(
            "flow {name:?}: its input_schema must be an object schema ({{\"type\": \"object\", ...}}): a flow takes one table of named fields"
        ));
    }
    if info.description.trim().is_empty() {
        return Err(format!(
            "flow {name:?} has no description; give one line saying what it does, a verb first"
        ));
    }
    Ok(())
}

/// `name` with what a Lua identifier cannot hold replaced by `_`.
fn suggest(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// The registry's specs are `'static` (the built-in ones are constants):
/// an embedder's is leaked once per distinct spec and shared by every run
/// that adds the same flow, so building runtimes over and over does not
/// grow memory.
fn interned(info: &FlowInfo) -> &'static FlowSpec {
    static SPECS: Mutex<Vec<&'static FlowSpec>> = Mutex::new(Vec::new());
    let mut specs = SPECS.lock().unwrap_or_else(|e| e.into_inner());
    let same = |s: &&&'static FlowSpec| {
        s.name == info.name && s.description == info.description && s.tier == info.tier
    };
    if let Some(spec) = specs.iter().find(same) {
        return spec;
    }
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    let spec: &'static FlowSpec = Box::leak(Box::new(FlowSpec {
        name: leak(&info.name),
        description: leak(&info.description),
        tier: info.tier,
        // What a call touches is what its plan declares, judged per call.
        actions: &[],
        read_only: info.tier == Tier::Sealed,
        schema: any_object,
        summary: input_json,
        starts_jobs: false,
        stored_once: None,
        // An embedder's flow declares no codes of its own.
        errors: &[],
    }));
    specs.push(spec);
    spec
}

/// The spec's schema function, which only the built-in flows' specs use:
/// an embedder's schema is [`DynFlow::input_schema`] of its adapter.
fn any_object() -> Value {
    json!({"type": "object"})
}

/// The audit's one-line gist of an embedder's call: its input.
fn input_json(input: &Value) -> String {
    input.to_string()
}

/// A [`CustomFlow`] as the registry holds a flow.
struct Adapter {
    flow: Arc<dyn CustomFlow>,
    spec: &'static FlowSpec,
    input_schema: Value,
    output_schema: Value,
}

impl DynFlow for Adapter {
    fn spec(&self) -> &'static FlowSpec {
        self.spec
    }

    fn input_schema(&self) -> Value {
        self.input_schema.clone()
    }

    fn output_schema(&self) -> Value {
        self.output_schema.clone()
    }

    #[cfg(test)]
    fn output_samples(&self) -> Vec<Value> {
        Vec::new()
    }

    fn prepare(&self, ctx: &Context, input: Value) -> FlowResult<Prepared> {
        let name = self.spec.name;
        if !input.is_object() {
            return Err(FlowError::new(
                ErrorCode::InvalidInput,
                format!("{name} takes one table of named fields, e.g. {name}{{...}}."),
            ));
        }
        let reach = self.flow.plan(&input, &ctx.workspace)?;
        let (envelope, granted) = envelope(ctx, self.spec.tier, reach)?;
        let flow = self.flow.clone();
        Ok(Prepared::new(envelope, move |ctx, _door| {
            Box::pin(async move {
                let granted = Granted {
                    call_seq: ctx.call_seq,
                    ..granted
                };
                flow.run(input, &granted)
            })
        }))
    }
}

/// The envelope of a call that touches `reach`, and what its `run` is
/// given.
fn envelope(ctx: &Context, tier: Tier, reach: Reach) -> FlowResult<(Envelope, Granted)> {
    let resolve = |field: &str, paths: &[PathBuf]| -> FlowResult<Vec<PathBuf>> {
        paths
            .iter()
            .map(|p| {
                let text = p.to_str().ok_or_else(|| {
                    FlowError::invalid_input(
                        field,
                        format!(
                            "{} is not valid UTF-8, so no policy can name it",
                            p.display()
                        ),
                    )
                })?;
                Ok(ctx.resolve(field, text)?.real)
            })
            .collect()
    };
    let reads = resolve("reads", &reach.reads)?;
    let writes = resolve("writes", &reach.writes)?;
    let mut network = Vec::new();
    for (action, field, urls) in [
        (Action::NetGet, "gets", &reach.gets),
        (Action::NetPost, "posts", &reach.posts),
    ] {
        for url in urls {
            let dest = crate::net::destination::parse(field, url)?;
            let private = private_literal(&dest, field)?;
            network.push(Capability {
                action,
                resource: dest.resource,
            });
            if private {
                network.push(Capability {
                    action: Action::NetPrivate,
                    resource: dest.origin,
                });
            }
        }
    }
    let cwd = (!reach.commands.is_empty()).then(|| ctx.workspace.clone());
    // A command's files are not declared by a Reach: it may touch any.
    let anywhere = !reach.commands.is_empty();
    let envelope = Envelope {
        anywhere,
        reads: reads.clone(),
        writes: writes.clone(),
        commands: reach.commands,
        network,
        cwd,
        ..Envelope::new(tier)
    };
    let granted = Granted {
        workspace: ctx.workspace.clone(),
        run_id: ctx.run_id.clone(),
        call_seq: 0,
        reads,
        writes,
    };
    Ok((envelope, granted))
}

/// Whether a declared URL names a private place without any DNS: a
/// `localhost` name or an address (in any spelling) that the network flows
/// reach only with the exact `net:private:ORIGIN` grant. A name is judged
/// by host alone: what it resolves to is the embedder's code's business.
fn private_literal(dest: &crate::net::destination::Destination, field: &str) -> FlowResult<bool> {
    use crate::net::destination::{is_localhost_name, needs_private_grant};
    if is_localhost_name(&dest.host) {
        return Ok(true);
    }
    let Some(ip) = dest.ip else {
        return Ok(false);
    };
    needs_private_grant(&[ip]).map_err(|why| {
        FlowError::new(
            ErrorCode::RequestFailed,
            format!(
                "{why}, so sluice cannot tell whether {} is this machine: the call did not run",
                dest.origin
            ),
        )
        .with("field", field)
    })
}
