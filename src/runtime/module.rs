//! The `sluice` module scripts see: one function per flow, `call`, `json`,
//! `args`, `workspace`, `run_id`, `now` (see `clock`), `sleep` and
//! `credential` (see `credential`).

use super::convert::{error_table, from_json, to_json, to_json_text};
use super::tasks::Others;
use crate::luastate::{current_task, ASIDE, TASK};

use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::pipeline::{Core, JobOp};
use mlua::{Function, Lua, LuaSerdeExt, MultiValue, Table, Value as LuaValue};
use std::rc::Rc;
use std::time::Duration;

/// Builds the module for one run.
pub fn build(lua: &Lua, core: Rc<Core>, args: &[String], others: Others) -> mlua::Result<Table> {
    let m = lua.create_table()?;
    for spec in core.registry().specs() {
        let f = match spec.name {
            "model" => model_function(lua, core.clone(), others.clone())?,
            name => flow_function(lua, core.clone(), name, others.clone())?,
        };
        m.set(spec.name.replace('-', "_"), f)?;
    }
    m.set("tools", tools_function(lua, core.clone())?)?;
    m.set("call", call_function(lua, core.clone(), others)?)?;
    let wrapper: Function = lua
        .load(JOB)
        .set_name("=sluice.job")
        .call(job_ops(lua, core.clone())?)?;
    lua.set_named_registry_value(JOB_WRAPPER, wrapper)?;
    m.set("json", json_module(lua)?)?;
    m.set("args", lua.create_sequence_from(args.iter().cloned())?)?;
    m.set("workspace", core.context().workspace.display().to_string())?;
    m.set("run_id", core.context().run_id.clone())?;
    m.set("sleep", sleep_function(lua, core.clone())?)?;
    m.set("credential", super::credential::function(lua)?)?;
    m.set("test_runner", test_runner(lua, &core)?)?;
    m.set_metatable(Some(unknown_names(lua, &core)?));
    Ok(m)
}

/// The module's metatable: a name it does not hold raises "no flow named
/// NAME", listing the flows, where Lua would say "attempt to call a nil
/// value (field 'NAME')" only once the call is made; a bundled module's
/// name says how to `require` it. The module's own optional field
/// (`test_runner`) stays nil.
fn unknown_names(lua: &Lua, core: &Core) -> mlua::Result<Table> {
    let flows: Vec<String> = core
        .registry()
        .specs()
        .map(|s| s.name.replace('-', "_"))
        .collect();
    let modules = lua.create_table()?;
    for (name, _) in crate::luastate::BUNDLED {
        if let Some(short) = name.strip_prefix("sluice.") {
            modules.set(short, *name)?;
        }
    }
    let index: Function = lua
        .load(
            r#"local flows, modules = ...
            return function(_, name)
              if name == "test_runner" then return nil end
              local module = modules[name]
              local hint = module
                and (("; %s is a module: local %s = require(%q)"):format(module, name, module))
                or " (sluice.call(name, input) calls one by a name held in a variable)"
              error(("sluice.%s: no flow named %s; the flows are %s%s")
                :format(tostring(name), tostring(name), flows, hint), 2)
            end"#,
        )
        .set_name("=sluice")
        .call((flows.join(", "), modules))?;
    let meta = lua.create_table()?;
    meta.set("__index", index)?;
    Ok(meta)
}

/// `sluice.test_runner`: the runner the host declared for `sluice.test`
/// (`{command, cwd, container, baseRef}`), or nil when there is none, so a
/// script offers the flow only where it can run.
fn test_runner(lua: &Lua, core: &Core) -> mlua::Result<LuaValue> {
    let Some(r) = &core.context().tests else {
        return Ok(LuaValue::Nil);
    };
    let t = lua.create_table()?;
    t.set("command", r.command.as_str())?;
    t.set("cwd", r.cwd.as_deref())?;
    t.set("container", r.container.as_deref())?;
    t.set("baseRef", r.base_ref.as_deref())?;
    Ok(LuaValue::Table(t))
}

/// The longest `sluice.sleep`, in milliseconds: ten minutes, as the longest
/// command timeout.
pub const MAX_SLEEP_MS: f64 = 600_000.0;

/// `sluice.sleep(ms)`: `true` after `ms` milliseconds, or `nil, err`
/// (`invalid_input`) for a negative, non-finite or over-long `ms`; a stop
/// request ends it at once, raising "interrupted". Not a number is a
/// programming mistake, raised.
fn sleep_function(lua: &Lua, core: Rc<Core>) -> mlua::Result<Function> {
    lua.create_async_function(move |lua, ms: LuaValue| {
        let core = core.clone();
        async move {
            let ms = match sleep_ms(ms)? {
                Ok(ms) => ms,
                Err(err) => return Ok((LuaValue::Nil, LuaValue::Table(error_table(&lua, &err)?))),
            };
            let task = current_task(&lua)?;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)) => {
                    Ok((LuaValue::Boolean(true), LuaValue::Nil))
                }
                sig = crate::interrupt::wait() => Err(mlua::Error::runtime(format!(
                    "interrupted by {}",
                    crate::interrupt::name(sig)
                ))),
                () = core.until_cancelled(&task) => Err(cancelled_here(&task)),
            }
        }
    })
}

/// `sluice.sleep`'s `ms`: a number is an outcome (out of range is
/// `invalid_input`), anything else a programming mistake, raised.
fn sleep_ms(ms: LuaValue) -> mlua::Result<Result<f64, FlowError>> {
    let ms = match ms {
        LuaValue::Integer(i) => i as f64,
        LuaValue::Number(n) => n,
        other => {
            return Err(mlua::Error::runtime(format!(
                "sluice.sleep(ms): ms is a number of milliseconds, got {}",
                other.type_name()
            )))
        }
    };
    if (0.0..=MAX_SLEEP_MS).contains(&ms) {
        return Ok(Ok(ms));
    }
    Ok(Err(FlowError::invalid_input(
        "ms",
        format!(
            "sluice.sleep: `ms` is {ms} ms; it is a number of milliseconds from 0 to {} (ten minutes); \
             to wait longer, sleep in a loop and check what you wait for between sleeps",
            MAX_SLEEP_MS as u64
        ),
    )))
}

/// The error that ends a task the script's end cancelled, raised where it
/// stands: it is not an outcome for the task to handle and go on.
fn cancelled_here(task: &str) -> mlua::Error {
    mlua::Error::runtime(format!(
        "cancelled: the script ended while task {task} still ran"
    ))
}

/// Raises, at the caller's line, for an input that is not a table: a
/// programming mistake, not an outcome. Also raises, at the caller's line,
/// when the run was stopped (a replay that diverged): that is not an
/// outcome the script may handle and go on.
const CHECK_TABLE: &str = r#"
local raw, label, task = ...
return function(input)
  if type(input) ~= "table" then
    error(("%s: expected a table of named fields, got %s; call it as %s{path = \"...\"}")
      :format(label, type(input), label), 2)
  end
  local out, err, halt = raw(input, task())
  if halt then error(halt, 2) end
  return out, err
end"#;

fn flow_function(
    lua: &Lua,
    core: Rc<Core>,
    name: &'static str,
    others: Others,
) -> mlua::Result<Function> {
    let raw = lua.create_async_function(move |lua, (input, task): (LuaValue, String)| {
        let (core, others) = (core.clone(), others.clone());
        async move { invoke(&lua, &core, &others, &task, name, input, None).await }
    })?;
    let label = format!("sluice.{}", name.replace('-', "_"));
    let task: Function = lua.named_registry_value(TASK)?;
    lua.load(CHECK_TABLE)
        .set_name("=sluice")
        .call((raw, label, task))
}

/// `sluice.model{...}`: a flow call like the others, except that `onText`
/// (a function, called with each piece of a streamed reply's text) is taken
/// out of the input, and so is each tool's `run` (a Lua tool's body, which
/// the agent loop calls; the model sees its name, description and input).
const MODEL: &str = r#"
local raw, task = ...
local function described(tools)
  if type(tools) ~= "table" then return tools end
  local out = {}
  for i, t in ipairs(tools) do
    if type(t) == "table" then
      out[i] = { name = t.name, description = t.description, input = t.input }
    else
      out[i] = t
    end
  end
  return out
end
return function(input)
  if type(input) ~= "table" then
    error(("sluice.model: expected a table of named fields, got %s; call it as sluice.model{provider = \"...\", model = \"...\", messages = {...}}")
      :format(type(input)), 2)
  end
  local copy = {}
  for k, v in pairs(input) do copy[k] = v end
  local on_text = copy.onText
  copy.onText = nil
  if on_text ~= nil and type(on_text) ~= "function" then
    error("sluice.model: onText is a function called with each piece of text, got " .. type(on_text), 2)
  end
  if on_text ~= nil and copy.stream == nil then copy.stream = true end
  copy.tools = described(copy.tools)
  local out, err, halt = raw(copy, task(), on_text)
  if halt then error(halt, 2) end
  return out, err
end"#;

fn model_function(lua: &Lua, core: Rc<Core>, others: Others) -> mlua::Result<Function> {
    let raw = lua.create_async_function(
        move |lua, (input, task, on_text): (LuaValue, String, Option<Function>)| {
            let (core, others) = (core.clone(), others.clone());
            async move { invoke_model(&lua, &core, &others, &task, input, on_text).await }
        },
    )?;
    let task: Function = lua.named_registry_value(TASK)?;
    lua.load(MODEL).set_name("=sluice.model").call((raw, task))
}

/// A model call whose text goes to `on_text` as it streams. A reply that
/// did not stream (or came from the record) is handed over whole, once, so
/// a script sees the same text either way. An error `on_text` raises is
/// raised at the caller's line once the call is over.
async fn invoke_model(
    lua: &Lua,
    core: &Core,
    others: &Others,
    task: &str,
    input: LuaValue,
    on_text: Option<Function>,
) -> mlua::Result<MultiValue> {
    let Some(f) = on_text else {
        return invoke(lua, core, others, task, "model", input, None).await;
    };
    // Called aside: how many pieces a stream has (and a replay hands it
    // one) must not move the ids of the tasks made after it.
    let aside: Function = lua.named_registry_value(ASIDE)?;
    let state = Rc::new(std::cell::RefCell::new((false, None::<mlua::Error>)));
    let seen = state.clone();
    let (callback, call) = (f.clone(), aside.clone());
    let relay = crate::flows::TextRelay(Rc::new(move |piece: &str| {
        let mut s = seen.borrow_mut();
        s.0 = true;
        if s.1.is_none() {
            if let Err(e) = call.call::<()>((&callback, piece)) {
                s.1 = Some(e);
            }
        }
    }));
    let out = invoke(lua, core, others, task, "model", input, Some(relay)).await?;
    let (streamed, failed) = std::mem::take(&mut *state.borrow_mut());
    if let Some(e) = failed {
        return Err(mlua::Error::runtime(format!(
            "sluice.model: onText raised: {e}"
        )));
    }
    if !streamed {
        // The output's text, or the text an error carries (a stream cut
        // mid-way, live, streamed its pieces; answered from the record, it
        // is handed over whole too).
        let table = match (out.front(), out.get(1)) {
            (Some(LuaValue::Table(t)), _) => Some(t),
            // Not when the run was stopped (a third value): that raises.
            (Some(LuaValue::Nil), Some(LuaValue::Table(e))) if out.len() == 2 => Some(e),
            _ => None,
        };
        if let Some(t) = table {
            let text: Option<String> = match t.get::<LuaValue>("text")? {
                LuaValue::String(s) => Some(s.to_str()?.to_string()),
                _ => None,
            };
            if let Some(text) = text.filter(|t| !t.is_empty()) {
                aside.call::<()>((&f, text)).map_err(|e| {
                    mlua::Error::runtime(format!("sluice.model: onText raised: {e}"))
                })?;
            }
        }
    }
    Ok(out)
}

/// `sluice.tools{"read", "grep", tool, ...}`: tool definitions for a model,
/// `{name, description, input}`, from the manifest for each flow named, and
/// each table given (a Lua tool with its `run`) as it is. An unknown flow
/// is a programming mistake: it raises, naming the flows.
fn tools_function(lua: &Lua, core: Rc<Core>) -> mlua::Result<Function> {
    lua.create_function(move |lua, list: Table| {
        let out = lua.create_table()?;
        for item in list.sequence_values::<LuaValue>() {
            let tool = match item? {
                LuaValue::String(name) => {
                    let name = name.to_str()?.to_string();
                    let flow = core
                        .registry()
                        .get(&name)
                        .ok_or_else(|| {
                            let names: Vec<&str> = core.registry().specs().map(|s| s.name).collect();
                            mlua::Error::runtime(format!(
                                "sluice.tools: no flow is named {name:?}; the flows are {}",
                                names.join(", ")
                            ))
                        })?;
                    let spec = flow.spec();
                    let t = lua.create_table()?;
                    t.set("name", spec.name)?;
                    t.set("description", spec.description)?;
                    t.set("input", from_json(lua, &flow.input_schema())?)?;
                    LuaValue::Table(t)
                }
                t @ LuaValue::Table(_) => t,
                other => {
                    return Err(mlua::Error::runtime(format!(
                        "sluice.tools: each entry is a flow's name or a tool table {{name, description, input, run}}, got {}",
                        other.type_name()
                    )))
                }
            };
            out.push(tool)?;
        }
        Ok(out)
    })
}

/// `sluice.call(name, input)`: any flow by its name, checked like the rest.
fn call_function(lua: &Lua, core: Rc<Core>, others: Others) -> mlua::Result<Function> {
    let raw = lua.create_async_function(
        move |lua, (name, input, task): (String, LuaValue, String)| {
            let (core, others) = (core.clone(), others.clone());
            async move { invoke(&lua, &core, &others, &task, &name, input, None).await }
        },
    )?;
    let task: Function = lua.named_registry_value(TASK)?;
    lua.load(
        r#"local raw, task = ...
        return function(name, input)
          if type(name) ~= "string" then error("sluice.call: the first argument is the flow's name", 2) end
          if type(input) ~= "table" then
            error(("sluice.call: expected a table of named fields for %s, got %s"):format(name, type(input)), 2)
          end
          local out, err, halt = raw(name, input, task())
          if halt then error(halt, 2) end
          return out, err
        end"#,
    )
    .set_name("=sluice")
    .call((raw, task))
}

/// One call from Lua: a table in, `output` or `nil, err` out, after which
/// the run's other tasks get their turn. An output that is a background
/// job's handle becomes a job object. When the run was stopped, a third
/// value carries the message to raise.
async fn invoke(
    lua: &Lua,
    core: &Core,
    others: &Others,
    task: &str,
    name: &str,
    input: LuaValue,
    relay: Option<crate::flows::TextRelay>,
) -> mlua::Result<MultiValue> {
    let out = call_from_lua(lua, core, task, name, input, relay).await;
    others.take_turns().await;
    out
}

async fn call_from_lua(
    lua: &Lua,
    core: &Core,
    task: &str,
    name: &str,
    input: LuaValue,
    relay: Option<crate::flows::TextRelay>,
) -> mlua::Result<MultiValue> {
    // No call starts once the run is asked to stop: a loop of quick calls
    // runs few instructions between two checks of the hook.
    if let Some(sig) = crate::interrupt::requested() {
        return Err(mlua::Error::runtime(format!(
            "interrupted by {}",
            crate::interrupt::name(sig)
        )));
    }
    if core.cancelled(task) {
        return Err(cancelled_here(task));
    }
    let json = match to_json(lua, input) {
        Ok(json) => json,
        Err(err) => return lua_result(lua, core, task, &Err(err)),
    };
    core.call_reading((task, name, json), relay, |result| {
        lua_result(lua, core, task, &result)
    })
    .await
}

/// A flow's result as a script sees it: the output's table, or `nil` and
/// the error's.
fn lua_result(
    lua: &Lua,
    core: &Core,
    task: &str,
    result: &FlowResult<serde_json::Value>,
) -> mlua::Result<MultiValue> {
    if matches!(result, Err(e) if e.details.contains_key("cancelled")) {
        return Err(cancelled_here(task));
    }
    if let (Err(err), Some(_)) = (result, core.audit().halted()) {
        return Ok(MultiValue::from_vec(vec![
            LuaValue::Nil,
            LuaValue::Table(error_table(lua, err)?),
            LuaValue::String(lua.create_string(err.to_string())?),
        ]));
    }
    match result {
        Ok(out) if out.get("jobId").is_some() => {
            let wrap: Function = lua.named_registry_value(JOB_WRAPPER)?;
            Ok(MultiValue::from_vec(vec![wrap.call(from_json(lua, out)?)?]))
        }
        Ok(out) => Ok(MultiValue::from_vec(vec![from_json(lua, out)?])),
        Err(err) => Ok(MultiValue::from_vec(vec![
            LuaValue::Nil,
            LuaValue::Table(error_table(lua, err)?),
        ])),
    }
}

fn json_module(lua: &Lua) -> mlua::Result<Table> {
    let json = lua.create_table()?;
    json.set("null", LuaValue::NULL)?;
    json.set(
        "encode",
        lua.create_function(|lua, (value, opts): (LuaValue, Option<Table>)| {
            let pretty = match &opts {
                Some(o) => o.get::<Option<bool>>("pretty")?.unwrap_or(false),
                None => false,
            };
            let value = to_json_text(lua, value).map_err(|e| mlua::Error::runtime(e.message))?;
            let text = if pretty {
                serde_json::to_string_pretty(&value)
            } else {
                serde_json::to_string(&value)
            };
            text.map_err(mlua::Error::external)
        })?,
    )?;
    json.set(
        "decode",
        lua.create_function(|lua, text: mlua::String| {
            match serde_json::from_slice::<serde_json::Value>(&text.as_bytes()) {
                Ok(v) => Ok((lua.to_value(&v)?, LuaValue::Nil)),
                Err(e) => {
                    let err =
                        FlowError::new(ErrorCode::InvalidInput, format!("not valid JSON: {e}"));
                    Ok((LuaValue::Nil, LuaValue::Table(error_table(lua, &err)?)))
                }
            }
        })?,
    )?;
    Ok(json)
}

const JOB_WRAPPER: &str = "sluice.job";

/// A background job as scripts see it: the handle's fields (`jobId`, `pid`)
/// plus live `status`, `exitCode`, `signal` and (once settled, when it ran
/// confined) `sandbox`, and the methods `read`,
/// `wait` and `kill`.
const JOB: &str = r#"
local ops = ...
local methods = {}
function methods:read() return ops.read(rawget(self, "jobId")) end
function methods:wait(ms)
  if ms ~= nil and type(ms) ~= "number" then
    error("job:wait(ms): ms is a number of milliseconds, or nil to wait until the job ends", 2)
  end
  return ops.wait(rawget(self, "jobId"), ms)
end
function methods:kill() return ops.kill(rawget(self, "jobId")) end
local live = { status = true, exitCode = true, signal = true, sandbox = true }
local mt = {
  __index = function(job, key)
    if live[key] then return ops.state(rawget(job, "jobId"))[key] end
    return methods[key]
  end,
  __tostring = function(job)
    return ("job %d (pid %d, %s)"):format(job.jobId, job.pid, job.status)
  end,
}
return function(handle)
  handle.status = nil
  return setmetatable(handle, mt)
end"#;

/// The Rust side of job objects. Every operation is a step of the calling
/// task through [`Core::job_step`] (a replay has no job to ask), under the
/// names `job.state`, `job.read`, `job.wait` and `job.kill`. An unknown id
/// is a programming mistake: it raises.
fn job_ops(lua: &Lua, core: Rc<Core>) -> mlua::Result<Table> {
    let ops = lua.create_table()?;
    for (name, op) in [
        ("state", JobOp::State),
        ("read", JobOp::Read),
        ("kill", JobOp::Kill),
    ] {
        let c = core.clone();
        ops.set(
            name,
            lua.create_function(move |lua, id: u64| {
                let task = current_task(lua)?;
                let out = c.job(&task, op, id).map_err(raise)?;
                from_json(lua, &out)
            })?,
        )?;
    }
    ops.set(
        "wait",
        lua.create_async_function(move |lua, (id, ms): (u64, Option<f64>)| {
            let core = core.clone();
            async move {
                let task = current_task(&lua)?;
                let timeout = ms.map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0));
                core.job_wait(&task, id, timeout).await.map_err(raise)
            }
        })?,
    )?;
    Ok(ops)
}

/// A job operation's error, raised at the calling line; an unknown job
/// keeps the message it always had.
fn raise(e: FlowError) -> mlua::Error {
    if e.details.get("field").is_some_and(|f| f == "jobId") {
        mlua::Error::runtime(e.message)
    } else {
        mlua::Error::runtime(e.to_string())
    }
}
