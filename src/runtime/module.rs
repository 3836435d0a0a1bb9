//! The `sluice` module scripts see: one function per flow, `call`, `json`,
//! `args`, `workspace`, `run_id`, `now` and `sleep`.

use super::convert::{error_table, from_json, to_json};
use crate::error::{ErrorCode, FlowError};
use crate::exec::job::Job;
use crate::pipeline::Core;
use mlua::{Function, Lua, LuaSerdeExt, MultiValue, Table, Value as LuaValue};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Builds the module for one run.
pub fn build(lua: &Lua, core: Rc<Core>, args: &[String]) -> mlua::Result<Table> {
    let m = lua.create_table()?;
    for spec in core.registry.specs() {
        let f = flow_function(lua, core.clone(), spec.name)?;
        m.set(spec.name.replace('-', "_"), f)?;
    }
    m.set("call", call_function(lua, core.clone())?)?;
    let wrapper: Function = lua
        .load(JOB)
        .set_name("=sluice.job")
        .call(job_ops(lua, core.clone())?)?;
    lua.set_named_registry_value(JOB_WRAPPER, wrapper)?;
    m.set("json", json_module(lua)?)?;
    m.set("args", lua.create_sequence_from(args.iter().cloned())?)?;
    m.set("workspace", core.ctx.workspace.display().to_string())?;
    m.set("run_id", core.ctx.run_id.clone())?;
    m.set(
        "now",
        lua.create_function(|_, ()| {
            let ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            Ok(ms as i64)
        })?,
    )?;
    m.set(
        "sleep",
        lua.create_async_function(|_, ms: u64| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(())
        })?,
    )?;
    Ok(m)
}

/// Raises, at the caller's line, for an input that is not a table: a
/// programming mistake, not an outcome.
const CHECK_TABLE: &str = r#"
local raw, label = ...
return function(input)
  if type(input) ~= "table" then
    error(("%s: expected a table of named fields, got %s; call it as %s{path = \"...\"}")
      :format(label, type(input), label), 2)
  end
  return raw(input)
end"#;

fn flow_function(lua: &Lua, core: Rc<Core>, name: &'static str) -> mlua::Result<Function> {
    let raw = lua.create_async_function(move |lua, input: LuaValue| {
        let core = core.clone();
        async move { invoke(&lua, &core, name, input).await }
    })?;
    let label = format!("sluice.{}", name.replace('-', "_"));
    lua.load(CHECK_TABLE).set_name("=sluice").call((raw, label))
}

/// `sluice.call(name, input)`: any flow by its name, checked like the rest.
fn call_function(lua: &Lua, core: Rc<Core>) -> mlua::Result<Function> {
    let raw = lua.create_async_function(move |lua, (name, input): (String, LuaValue)| {
        let core = core.clone();
        async move { invoke(&lua, &core, &name, input).await }
    })?;
    lua.load(
        r#"local raw = ...
        return function(name, input)
          if type(name) ~= "string" then error("sluice.call: the first argument is the flow's name", 2) end
          if type(input) ~= "table" then
            error(("sluice.call: expected a table of named fields for %s, got %s"):format(name, type(input)), 2)
          end
          return raw(name, input)
        end"#,
    )
    .set_name("=sluice")
    .call(raw)
}

/// One call from Lua: a table in, `output` or `nil, err` out. An output
/// that is a background job's handle becomes a job object.
async fn invoke(lua: &Lua, core: &Core, name: &str, input: LuaValue) -> mlua::Result<MultiValue> {
    let result = match to_json(lua, input) {
        Ok(json) => core.call(name, json).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(out) if out.get("jobId").is_some() => {
            let wrap: Function = lua.named_registry_value(JOB_WRAPPER)?;
            Ok(MultiValue::from_vec(
                vec![wrap.call(from_json(lua, &out)?)?],
            ))
        }
        Ok(out) => Ok(MultiValue::from_vec(vec![from_json(lua, &out)?])),
        Err(err) => Ok(MultiValue::from_vec(vec![
            LuaValue::Nil,
            LuaValue::Table(error_table(lua, &err)?),
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
            let value = to_json(lua, value).map_err(|e| mlua::Error::runtime(e.message))?;
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
/// plus live `status`, `exitCode` and `signal`, and the methods `read`,
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
local live = { status = true, exitCode = true, signal = true }
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

/// The Rust side of job objects. An unknown id is a programming mistake.
fn job_ops(lua: &Lua, core: Rc<Core>) -> mlua::Result<Table> {
    fn find(core: &Core, id: u64) -> mlua::Result<Arc<Job>> {
        core.ctx
            .exec
            .jobs
            .get(id)
            .ok_or_else(|| mlua::Error::runtime(format!("there is no job {id} in this run")))
    }
    let ops = lua.create_table()?;
    let c = core.clone();
    ops.set(
        "state",
        lua.create_function(move |lua, id: u64| {
            let s = find(&c, id)?.snapshot();
            let t = lua.create_table()?;
            t.set("status", s.status.as_str())?;
            t.set("exitCode", s.exit_code)?;
            t.set("signal", s.signal)?;
            Ok(t)
        })?,
    )?;
    let c = core.clone();
    ops.set(
        "read",
        lua.create_function(move |lua, id: u64| {
            let delta = find(&c, id)?.read();
            lua.to_value(&delta)
        })?,
    )?;
    let c = core.clone();
    ops.set(
        "wait",
        lua.create_async_function(move |_, (id, ms): (u64, Option<f64>)| {
            let job = find(&c, id);
            async move {
                let timeout = ms.map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0));
                Ok(job?.wait(timeout).await)
            }
        })?,
    )?;
    ops.set(
        "kill",
        lua.create_function(move |_, id: u64| Ok(find(&core, id)?.kill()))?,
    )?;
    Ok(ops)
}
