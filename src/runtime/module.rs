//! The `sluice` module scripts see: one function per flow, `call`, `json`,
//! `args`, `workspace`, `run_id`, `now` and `sleep`.

use super::convert::{error_table, from_json, to_json};
use crate::error::{ErrorCode, FlowError};
use crate::pipeline::Core;
use mlua::{Function, Lua, LuaSerdeExt, MultiValue, Table, Value as LuaValue};
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Builds the module for one run.
pub fn build(lua: &Lua, core: Rc<Core>, args: &[String]) -> mlua::Result<Table> {
    let m = lua.create_table()?;
    for spec in core.registry.specs() {
        let f = flow_function(lua, core.clone(), spec.name)?;
        m.set(spec.name.replace('-', "_"), f)?;
    }
    m.set("call", call_function(lua, core.clone())?)?;
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

/// One call from Lua: a table in, `output` or `nil, err` out.
async fn invoke(lua: &Lua, core: &Core, name: &str, input: LuaValue) -> mlua::Result<MultiValue> {
    let result = match to_json(lua, input) {
        Ok(json) => core.call(name, json).await,
        Err(e) => Err(e),
    };
    match result {
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
