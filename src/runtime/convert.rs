//! Moving values between Lua and the JSON the pipeline speaks, and shaping a
//! flow error as the `err` table a script receives.

use crate::error::{ErrorCode, FlowError};
use mlua::{Lua, LuaSerdeExt, SerializeOptions, Table, Value as LuaValue};
use serde_json::Value;

/// Registry key of the metatable every error table shares.
const ERROR_MT: &str = "sluice.error";

/// A Lua value as JSON; what cannot be expressed (a function, a non-UTF-8
/// string) is `invalid_input`.
pub fn to_json(lua: &Lua, value: LuaValue) -> Result<Value, FlowError> {
    lua.from_value(value).map_err(|e| {
        FlowError::new(
            ErrorCode::InvalidInput,
            format!("the input holds a value JSON cannot carry: {e}. Use strings, numbers, booleans and tables."),
        )
    })
}

/// JSON as a Lua value: absent stays absent, arrays keep their array-ness.
pub fn from_json(lua: &Lua, value: &Value) -> mlua::Result<LuaValue> {
    let options = SerializeOptions::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false);
    lua.to_value_with(value, options)
}

/// A flow error as the table `{code=, message=, ...details}` whose
/// `__tostring` gives `code: message`.
pub fn error_table(lua: &Lua, err: &FlowError) -> mlua::Result<Table> {
    let table = match from_json(lua, &err.to_json())? {
        LuaValue::Table(t) => t,
        _ => lua.create_table()?,
    };
    table.set_metatable(Some(error_metatable(lua)?));
    Ok(table)
}

fn error_metatable(lua: &Lua) -> mlua::Result<Table> {
    if let Ok(mt) = lua.named_registry_value::<Table>(ERROR_MT) {
        return Ok(mt);
    }
    let mt = lua.create_table()?;
    mt.set(
        "__tostring",
        lua.create_function(|_, e: Table| {
            let code: String = e.get("code")?;
            let message: String = e.get("message")?;
            Ok(format!("{code}: {message}"))
        })?,
    )?;
    mt.set("__name", ERROR_MT)?;
    lua.set_named_registry_value(ERROR_MT, &mt)?;
    Ok(mt)
}
