//! Serving callers outside the script (`sluice mcp`): each request runs as
//! a task of the run, so its calls pass the door, are scheduled beside the
//! other requests' and are recorded as a script's tasks' are. A request
//! brings who sent it (the record names it), who answers its asks (the
//! person behind that caller, [`Callers`] routes each ask there), where its
//! progress goes, and notices its caller giving up (its reply dropped):
//! then its calls are cancelled as [`Core::cancel_task`] says.
//!
//! Lua tools (`--tools DIR`) are functions a team vetted: each file returns
//! `{name, description, input, run}`, and `run(input)` runs in the
//! request's task, so its flow calls pass the door like a script's.

use super::convert::{from_json, to_json_text};
use super::Runtime;
use crate::error::{ErrorCode, FlowError};
use crate::flows::TextRelay;
use crate::kernel::approval::{Answer, Approver, Ask, Later, Shared};
use crate::luastate::current_task;
use crate::pipeline::{Core, JobOp, Served};
use mlua::{Function, Lua, MultiValue, Table, UserData, UserDataMethods, Value as LuaValue};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// One request from a caller outside the script.
pub struct Incoming {
    /// What it runs.
    pub tool: Tool,
    /// Its input, as the caller sent it.
    pub input: Value,
    /// Who sent it, and how to reach them while it runs.
    pub caller: Caller,
    /// Where its outcome goes. Dropping the receiver cancels the request.
    pub reply: oneshot::Sender<Outcome>,
}

/// What a request runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tool {
    /// A flow, by name.
    Flow(String),
    /// A Lua tool [`Runtime::load_tools`] loaded, by name.
    Lua(String),
    /// An operation on a background job a `bash` call started:
    /// `{jobId}` for read and kill, `{jobId, timeoutMs}` for wait.
    Job(JobOp),
}

/// Who sent a request, and how to reach them while it runs.
#[derive(Clone, Default)]
pub struct Caller {
    /// Its name and version, as the record names it (`claude-code 1.2`).
    pub client: Option<String>,
    /// Who answers the request's asks; `None`: nobody can, so an ask is
    /// `permission_required`.
    pub approver: Option<Arc<dyn Approver>>,
    /// Where streamed text and a running command's output go as they
    /// arrive.
    pub progress: Option<Progress>,
    /// Who the background jobs the request starts belong to (an MCP
    /// client's session): only requests with the same owner read, wait for
    /// or kill them. `None`: the run's, any request's.
    pub owner: Option<String>,
    /// The client session it comes from (an MCP client's): the session's
    /// requests keep the order they came in among themselves, where their
    /// calls overlap, and take their place among other sessions' calls
    /// once authorized. `None`: a session of its own.
    pub session: Option<String>,
}

/// Hands a piece of a request's streamed output to its caller, from the
/// run's thread.
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

/// How a request ended.
#[derive(Debug)]
pub enum Outcome {
    /// The flow's output, or what the Lua tool returned.
    Done(Value),
    /// The flow's error, or the `nil, err` a Lua tool returned.
    Failed(FlowError),
    /// A Lua tool raised an error (its message, with file:line), or
    /// returned what JSON cannot carry.
    Raised(String),
}

/// A Lua tool, as its file declared it.
#[derive(Debug, Clone)]
pub struct LuaTool {
    /// Its name, unique among the tools and flows.
    pub name: String,
    /// What it does, for the caller's model.
    pub description: String,
    /// The JSON Schema of its input (an object's).
    pub input: Value,
    /// The file that declared it.
    pub file: PathBuf,
}

/// Where a served run's Lua tools' `run` functions are kept.
const TOOLS: &str = "sluice.served.tools";

/// Answers each ask by the approver of the caller whose request made it
/// (the task that asks, or one it started); an ask of a task no caller
/// waits for is unanswered.
#[derive(Clone, Default)]
pub(crate) struct Callers {
    by_task: Arc<Mutex<HashMap<String, Arc<dyn Approver>>>>,
    /// The thread the run serves on: an ask made there (while a call
    /// runs: a redirect's host, a private address a name resolved to) would
    /// hold every request until its person answered, so it is not put.
    run_thread: Arc<std::sync::OnceLock<std::thread::ThreadId>>,
}

impl Callers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<dyn Approver>>> {
        self.by_task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn of(&self, task: &str) -> Option<Arc<dyn Approver>> {
        let map = self.lock();
        crate::pipeline::lineage(task).find_map(|t| map.get(t).cloned())
    }
}

impl Approver for Callers {
    fn ask(&self, ask: &Ask) -> Answer {
        if self.run_thread.get() == Some(&std::thread::current().id()) {
            return Answer::Unanswered(
                "it came up while the call ran (a redirect's host, a private address), where a served run \
                 cannot wait for a person without holding every other request"
                    .into(),
            );
        }
        match self.of(&ask.task) {
            Some(approver) => approver.ask(ask),
            None => Answer::Unanswered(
                "no caller is waiting on the task that asked, so nobody can answer".into(),
            ),
        }
    }

    fn who(&self) -> String {
        "the person behind the MCP client".into()
    }

    /// Each caller's person answers their own questions: one client's
    /// open question does not hold another's.
    fn one_at_a_time(&self) -> bool {
        false
    }

    /// Put to the caller's approver without a thread waiting for it, when
    /// that approver can (an MCP client's): before a call runs, so never
    /// on a blocked run's thread.
    fn put(&self, ask: &Ask) -> Option<Later> {
        match self.of(&ask.task) {
            Some(approver) => approver.put(ask),
            None => Some(Box::pin(std::future::ready(Answer::Unanswered(
                "no caller is waiting on the task that asked, so nobody can answer".into(),
            )))),
        }
    }

    /// As the caller's approver says: an MCP client's own answers.
    fn shares(&self, task: &str) -> Shared {
        match self.of(task) {
            Some(approver) => approver.shares(task),
            None => Shared::Nobody,
        }
    }
}

impl Runtime {
    /// Serves requests from `inbox` until it closes (the transport ended)
    /// or the run is stopped: each runs as a task of the run, beside the
    /// others. The record stays open; [`Runtime::end`] seals it.
    pub async fn serve(
        &self,
        inbox: mpsc::UnboundedReceiver<Incoming>,
    ) -> Result<(), super::ScriptError> {
        let fail = |e: mlua::Error| super::ScriptError {
            message: e.to_string(),
        };
        let lua = &self.lua;
        let _ = self.callers.run_thread.set(std::thread::current().id());
        let inbox = Rc::new(RefCell::new(Some(inbox)));
        let (core, callers) = (self.core.clone(), self.callers.clone());
        let inputs = self.tool_inputs.clone();
        let next = lua
            .create_async_function(move |_, ()| {
                let (inbox, core, callers) = (inbox.clone(), core.clone(), callers.clone());
                let inputs = inputs.clone();
                async move {
                    let Some(mut rx) = inbox.borrow_mut().take() else {
                        return Ok(None);
                    };
                    let got = rx.recv().await;
                    *inbox.borrow_mut() = Some(rx);
                    Ok(got.map(|incoming| Request::new(incoming, core, callers, inputs)))
                }
            })
            .map_err(fail)?;
        let tools: Table = match lua.named_registry_value::<Option<Table>>(TOOLS) {
            Ok(Some(t)) => t,
            _ => lua.create_table().map_err(fail)?,
        };
        let detach = super::tasks::Tasks::detacher(lua).map_err(fail)?;
        let chunk = lua
            .load(include_str!("serve.lua"))
            .set_name("=sluice.serve")
            .into_function()
            .and_then(|f| f.bind((next, detach, tools)))
            .map_err(fail)?;
        self.run_chunk(chunk).await
    }

    /// Loads the Lua tools of `dir`: each `*.lua` file, in name order,
    /// returns `{name, description, input, run}`. A file that does not
    /// load, or declares a bad or taken name, fails them all, naming the
    /// file and the fix. `taken` are the names already served (the flows'
    /// and the job tools').
    pub fn load_tools(&self, dir: &Path, taken: &[String]) -> Result<Vec<LuaTool>, String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| {
                format!(
                    "--tools {}: {e}; give a folder of *.lua tool files",
                    dir.display()
                )
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "lua") && p.is_file())
            .collect();
        files.sort();
        let run = self.lua.create_table().map_err(|e| e.to_string())?;
        let mut tools: Vec<LuaTool> = Vec::new();
        for file in files {
            let (tool, f) = self.load_tool(&file)?;
            let clash = taken
                .iter()
                .any(|t| *t == tool.name || t.replace('-', "_") == tool.name);
            if clash || tools.iter().any(|t| t.name == tool.name) {
                return Err(format!(
                    "{}: a tool named {:?} is already served (a flow, a job tool or another file); give it another name",
                    file.display(),
                    tool.name
                ));
            }
            run.set(tool.name.as_str(), f).map_err(|e| e.to_string())?;
            self.tool_inputs
                .borrow_mut()
                .insert(tool.name.clone(), tool.input.clone());
            tools.push(tool);
        }
        self.lua
            .set_named_registry_value(TOOLS, run)
            .map_err(|e| e.to_string())?;
        Ok(tools)
    }

    /// One tool file: what it declares, and its `run`.
    fn load_tool(&self, file: &Path) -> Result<(LuaTool, Function), String> {
        let at = |what: String| format!("{}: {what}", file.display());
        let chunk = crate::luastate::load_script(&self.lua, file).map_err(&at)?;
        let table: Table = match chunk.call::<LuaValue>(()) {
            Ok(LuaValue::Table(t)) => t,
            Ok(other) => {
                return Err(at(format!(
                    "a tool file returns a table {{name, description, input, run}}, not {}",
                    other.type_name()
                )))
            }
            Err(e) => return Err(at(format!("loading it raised: {e}"))),
        };
        for pair in table.pairs::<LuaValue, LuaValue>() {
            let (key, _) = pair.map_err(|e| at(e.to_string()))?;
            let known = matches!(&key, LuaValue::String(s) if ["name", "description", "input", "run"].contains(&&*s.to_string_lossy()));
            if !known {
                return Err(at(format!(
                    "unknown field {}; a tool declares name, description, input and run",
                    key.to_string()
                        .unwrap_or_else(|_| key.type_name().to_string())
                )));
            }
        }
        let text = |field: &str| -> Result<String, String> {
            match table.get::<LuaValue>(field) {
                Ok(LuaValue::String(s)) if !s.to_string_lossy().trim().is_empty() => {
                    Ok(s.to_string_lossy().to_string())
                }
                _ => Err(at(format!("`{field}` must be a non-empty string"))),
            }
        };
        let name = text("name")?;
        if !valid_tool_name(&name) {
            return Err(at(format!(
                "name {name:?} is not a tool name: 1 to 64 characters of letters, digits, '_' and '-'"
            )));
        }
        let description = text("description")?;
        let input = match table.get::<LuaValue>("input") {
            Ok(t @ LuaValue::Table(_)) => {
                to_json_text(&self.lua, t).map_err(|e| at(format!("`input`: {}", e.message)))?
            }
            _ => return Err(at(
                "`input` must be a JSON Schema table, e.g. {type = \"object\", properties = {...}}"
                    .into(),
            )),
        };
        if input.get("type").and_then(Value::as_str) != Some("object") {
            return Err(at("`input` must be an object's schema: type = \"object\" (a tool's input is a table of named fields)".into()));
        }
        if let Some(why) = super::schema::unchecked(&input, "input") {
            return Err(at(format!(
                "{why}; sluice checks each call's input against the schema before run sees it, so the schema may use \
                 only what it checks (type, properties, required, additionalProperties, items, enum, const, minimum, \
                 maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, minItems, maxItems, pattern) and \
                 notes (title, description, default, examples, format); check the rest in run"
            )));
        }
        let run: Function = match table.get::<LuaValue>("run") {
            Ok(LuaValue::Function(f)) => f,
            _ => {
                return Err(at(
                    "`run` must be a function(input) returning the tool's result (or nil, err)"
                        .into(),
                ))
            }
        };
        let tool = LuaTool {
            name,
            description,
            input,
            file: file.to_path_buf(),
        };
        Ok((tool, run))
    }

    /// Why the run can make no call of `flow` whatever the policies say
    /// (the test flow without a runner), or `None`.
    pub fn unavailable(&self, flow: &str) -> Option<&'static str> {
        self.core
            .registry()
            .get(flow)?
            .unavailable(self.core.context())
    }

    /// Whether the policies refuse every call of `flow`: an action each of
    /// its calls asks for can never be granted ([`crate::kernel::Kernel::denies_every`]).
    /// A served tool list leaves such a flow out.
    pub fn refuses_every_call(&self, flow: &str) -> bool {
        let Some(f) = self.core.registry().get(flow) else {
            return true;
        };
        let kernel = self.core.kernel();
        f.spec()
            .actions
            .iter()
            .filter(|a| a.always_asked())
            .any(|&a| kernel.denies_every(a))
    }
}

/// A served run's standard output carries the protocol (stdio): its Lua
/// `print` writes to standard error instead, where the operator sees it.
pub(super) fn print_to_stderr(lua: &Lua) -> mlua::Result<()> {
    let tostring: Function = lua.globals().get("tostring")?;
    let print = lua.create_function(move |_, args: MultiValue| {
        let mut parts = Vec::with_capacity(args.len());
        for v in args {
            parts.push(tostring.call::<String>(v)?);
        }
        eprintln!("{}", parts.join("\t"));
        Ok(())
    })?;
    lua.globals().set("print", print)
}

/// A tool name MCP clients accept, and a Lua identifier's characters
/// with `-`.
fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// One request as the loop's task holds it.
struct Request {
    /// What it runs, until its task takes it.
    work: RefCell<Option<Work>>,
    /// Where the outcome goes, shared with the watch for a caller who
    /// gave up.
    reply: Rc<RefCell<Option<oneshot::Sender<Outcome>>>>,
    core: Rc<Core>,
    callers: Callers,
    /// The task it runs as, and the watch for a caller who gives up, once
    /// bound.
    bound: RefCell<Option<(String, tokio::task::JoinHandle<()>)>>,
    /// The Lua tools' input schemas.
    inputs: Rc<RefCell<HashMap<String, Value>>>,
    /// Held until the outcome is sent: a stop signal that finds no request
    /// under way ends the run as its client meant ([`crate::interrupt::Serving`]).
    under_way: RefCell<Option<crate::interrupt::Serving>>,
}

/// A request's work: what it runs, on what, for whom.
struct Work {
    tool: Tool,
    input: Value,
    caller: Caller,
}

impl Request {
    fn new(
        incoming: Incoming,
        core: Rc<Core>,
        callers: Callers,
        inputs: Rc<RefCell<HashMap<String, Value>>>,
    ) -> Request {
        let Incoming {
            tool,
            input,
            caller,
            reply,
        } = incoming;
        Request {
            work: RefCell::new(Some(Work {
                tool,
                input,
                caller,
            })),
            reply: Rc::new(RefCell::new(Some(reply))),
            core,
            callers,
            bound: RefCell::new(None),
            inputs,
            under_way: RefCell::new(Some(crate::interrupt::Serving::start())),
        }
    }

    /// Binds the request to the task running now: its calls carry the
    /// caller's client, relay and approver, and a caller who gives up
    /// cancels them. Returns the task and what it runs.
    fn bind(&self, lua: &Lua) -> mlua::Result<(String, Work)> {
        let task = current_task(lua)?;
        let work = self
            .work
            .borrow_mut()
            .take()
            .ok_or_else(|| mlua::Error::runtime("a served request runs once"))?;
        let caller = &work.caller;
        let relay = caller
            .progress
            .clone()
            .map(|p| TextRelay(Rc::new(move |s: &str| p(s))));
        self.core.serve_task(
            &task,
            Served {
                client: caller.client.clone(),
                relay,
                owner: caller.owner.clone(),
                session: caller.session.clone(),
            },
        );
        if let Some(approver) = &caller.approver {
            self.callers.lock().insert(task.clone(), approver.clone());
        }
        let (reply, core, id) = (self.reply.clone(), self.core.clone(), task.clone());
        let watch = tokio::task::spawn_local(async move {
            gave_up(reply).await;
            core.cancel_task(&id);
        });
        *self.bound.borrow_mut() = Some((task.clone(), watch));
        Ok((task, work))
    }

    /// Sends the outcome (unless the caller gave up) and forgets the task.
    fn finish(&self, outcome: Outcome) {
        // No longer under way before the caller can see the answer: a
        // client that ends its session on reading it ends the run `ok`.
        self.under_way.borrow_mut().take();
        if let Some(tx) = self.reply.borrow_mut().take() {
            let _ = tx.send(outcome);
        }
        if let Some((task, watch)) = self.bound.borrow_mut().take() {
            watch.abort();
            self.core.release_task(&task);
            self.callers.lock().remove(&task);
        }
    }

    /// A built-in flow's or job operation's request, run whole here: a
    /// caller who gives up cancels its calls, which then end (and are
    /// recorded) before the task does.
    async fn run(&self, lua: &Lua) -> mlua::Result<()> {
        let (task, work) = self.bind(lua)?;
        let outcome = run_tool(&self.core, &task, work.tool, work.input).await;
        self.finish(outcome);
        Ok(())
    }

    /// A Lua tool's input, once checked against the tool's schema; `None`
    /// (the request then answered with `invalid_input`) when it does not
    /// fit: a vetted tool trusts its declared input.
    fn checked_input(&self, work: &Work) -> Option<Value> {
        if let Tool::Lua(name) = &work.tool {
            let schema = self.inputs.borrow().get(name).cloned();
            if let Some(Err(e)) = schema.map(|s| super::schema::check(&work.input, &s, "input")) {
                self.finish(Outcome::Failed(e));
                return None;
            }
        }
        Some(work.input.clone())
    }
}

/// Resolves when the caller dropped the reply's receiver before the
/// outcome was sent; never once it was sent (the watch is then aborted).
async fn gave_up(reply: Rc<RefCell<Option<oneshot::Sender<Outcome>>>>) {
    std::future::poll_fn(|cx| match reply.borrow_mut().as_mut() {
        Some(tx) => tx.poll_closed(cx),
        None => std::task::Poll::Pending,
    })
    .await
}

/// Runs a flow or a job operation as a step of `task`.
async fn run_tool(core: &Core, task: &str, tool: Tool, input: Value) -> Outcome {
    let result = match tool {
        Tool::Flow(name) => core.call_in(task, &name, input).await,
        Tool::Job(op) => job(core, task, op, &input).await,
        Tool::Lua(name) => Err(FlowError::invalid_input(
            "name",
            format!("there is no Lua tool named {name:?} in this run"),
        )),
    };
    match result {
        Ok(v) => Outcome::Done(v),
        Err(e) => Outcome::Failed(e),
    }
}

/// The longest a served `job_wait` waits: ten minutes, as the longest
/// command timeout.
const MAX_JOB_WAIT: Duration = Duration::from_secs(600);

/// A job operation on the `jobId` of `input`.
async fn job(core: &Core, task: &str, op: JobOp, input: &Value) -> crate::error::FlowResult<Value> {
    let id = input.get("jobId").and_then(Value::as_u64).ok_or_else(|| {
        FlowError::invalid_input(
            "jobId",
            "`jobId` is the job's number, as bash{background = true} returned it",
        )
    })?;
    if op != JobOp::Wait {
        let out = core.job(task, op, id)?;
        return Ok(match op {
            JobOp::Kill => serde_json::json!({"killed": out}),
            _ => out,
        });
    }
    let ms = match input.get("timeoutMs") {
        None | Some(Value::Null) => MAX_JOB_WAIT.as_millis() as u64,
        Some(v) => v
            .as_u64()
            .filter(|ms| (1..=MAX_JOB_WAIT.as_millis() as u64).contains(ms))
            .ok_or_else(|| {
                FlowError::invalid_input(
                    "timeoutMs",
                    "`timeoutMs` is how long to wait, 1 to 600000 ms (default 600000)",
                )
            })?,
    };
    let ended = core
        .job_wait(task, id, Some(Duration::from_millis(ms)))
        .await?;
    let state = core.job(task, JobOp::State, id)?;
    Ok(serde_json::json!({"ended": ended, "state": state}))
}

impl UserData for Request {
    fn add_methods<M: UserDataMethods<Self>>(m: &mut M) {
        m.add_method("lua_tool", |_, this, ()| {
            Ok(match this.work.borrow().as_ref().map(|w| &w.tool) {
                Some(Tool::Lua(name)) => Some(name.clone()),
                _ => None,
            })
        });
        m.add_async_method("run", |lua, this, ()| async move { this.run(&lua).await });
        m.add_method("bind", |lua, this, ()| {
            let (_, work) = this.bind(lua)?;
            match this.checked_input(&work) {
                Some(input) => Ok((true, from_json(lua, &input)?)),
                None => Ok((false, LuaValue::Nil)),
            }
        });
        m.add_method("finish", |lua, this, result: MultiValue| {
            this.finish(lua_outcome(lua, result));
            Ok(())
        });
    }
}

/// What `xpcall(run, ...)` returned, as a request's outcome: a value, a
/// flow error the tool passed on (`nil, err`), or what it raised.
fn lua_outcome(lua: &Lua, result: MultiValue) -> Outcome {
    let mut values = result.into_iter();
    let ok = matches!(values.next(), Some(LuaValue::Boolean(true)));
    let first = values.next().unwrap_or(LuaValue::Nil);
    if !ok {
        let text = first
            .to_string()
            .unwrap_or_else(|_| format!("a {} value", first.type_name()));
        return Outcome::Raised(format!("the tool raised: {text}"));
    }
    if let (LuaValue::Nil, Some(err @ LuaValue::Table(_))) = (&first, values.next()) {
        return match to_json_text(lua, err).ok().and_then(|e| flow_error(&e)) {
            Some(e) => Outcome::Failed(e),
            None => Outcome::Raised(
                "the tool returned nil and an error table without a known `code` and a `message`"
                    .into(),
            ),
        };
    }
    match to_json_text(lua, first) {
        Ok(v) => Outcome::Done(v),
        Err(e) => Outcome::Raised(format!(
            "the tool's result cannot be sent as JSON: {}",
            e.message
        )),
    }
}

/// An error table (`{code, message, ...}`) as the flow error it spells.
fn flow_error(e: &Value) -> Option<FlowError> {
    let code = ErrorCode::parse(e.get("code")?.as_str()?)?;
    let message = e.get("message")?.as_str()?.to_string();
    let mut err = FlowError::new(code, message);
    for (k, v) in e.as_object()? {
        if k != "code" && k != "message" {
            err = err.with(k, v.clone());
        }
    }
    Some(err)
}
