//! Moving values between Lua and the JSON the pipeline speaks, and shaping a
//! flow error as the `err` table a script receives.

use crate::error::{ErrorCode, FlowError};
use mlua::{Lua, LuaSerdeExt, SerializeOptions, Table, Value as LuaValue};
use serde_json::Value;

/// Registry key of the metatable every error table shares.
const ERROR_MT: &str = "sluice.error";

/// Tables nested deeper than this are refused (and cycles with them).
const MAX_DEPTH: usize = 64;

/// A Lua value as JSON, for a flow's input. What JSON cannot carry (a
/// function, a non-UTF-8 string, a positional value among named ones) is
/// `invalid_input` naming the field where it sits, e.g. `content` or
/// `headers.accept` or `items[2]`. A credential
/// ([`super::credential::Credential`]) is its reference.
pub fn to_json(lua: &Lua, value: LuaValue) -> Result<Value, FlowError> {
    convert(lua, value, &mut String::new(), 0, References::Kept)
}

/// [`to_json`] for text a script gets back (`sluice.json.encode`): a
/// credential is refused, so no copy of one outlives the flow call it was
/// given to.
pub fn to_json_text(lua: &Lua, value: LuaValue) -> Result<Value, FlowError> {
    convert(lua, value, &mut String::new(), 0, References::Refused)
}

/// What becomes of a credential met on the way.
#[derive(Clone, Copy, PartialEq)]
enum References {
    Kept,
    Refused,
}

fn convert(
    lua: &Lua,
    value: LuaValue,
    path: &mut String,
    depth: usize,
    refs: References,
) -> Result<Value, FlowError> {
    let bad = |path: &str, what: String| {
        let field = if path.is_empty() { "input" } else { path };
        FlowError::invalid_input(field, format!("`{field}` {what}"))
    };
    Ok(match value {
        LuaValue::Nil => Value::Null,
        LuaValue::LightUserData(p) if p.0.is_null() => Value::Null,
        LuaValue::Boolean(b) => Value::Bool(b),
        LuaValue::Integer(i) => Value::from(i),
        // Lua's `/` always makes a float: 4/2 is a fine line number.
        LuaValue::Number(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => Value::from(n as i64),
        LuaValue::Number(n) => serde_json::Number::from_f64(n)
            .map(Value::Number)
            .ok_or_else(|| {
                bad(
                    path,
                    format!("is {n}, which JSON cannot carry; give a finite number."),
                )
            })?,
        LuaValue::String(s) => match s.to_str() {
            Ok(text) => Value::String(text.to_string()),
            Err(_) => {
                let bytes = s.as_bytes();
                let at = std::str::from_utf8(&bytes).map_or_else(|e| e.valid_up_to(), |_| 0);
                return Err(bad(
                    path,
                    format!("is not UTF-8 text (invalid byte at {at}); flows carry text only."),
                ));
            }
        },
        LuaValue::Table(t) => {
            if depth >= MAX_DEPTH {
                return Err(bad(
                    path,
                    format!("nests tables deeper than {MAX_DEPTH} levels (or holds a cycle)."),
                ));
            }
            table(lua, t, path, depth, refs)?
        }
        LuaValue::UserData(ud) if ud.is::<super::credential::Credential>() => {
            let c = ud
                .borrow::<super::credential::Credential>()
                .map_err(|e| bad(path, e.to_string()))?;
            if refs == References::Refused {
                return Err(bad(
                    path,
                    format!(
                        "is credential({}), which cannot be encoded: a credential goes only in a flow's `headers` or `env`",
                        c.0.credential
                    ),
                ));
            }
            serde_json::to_value(&c.0).expect("a reference serializes")
        }
        other => {
            return Err(bad(
                path,
                format!(
                    "is a {}; flow inputs hold strings, numbers, booleans and tables.",
                    other.type_name()
                ),
            ))
        }
    })
}

fn table(
    lua: &Lua,
    t: Table,
    path: &mut String,
    depth: usize,
    refs: References,
) -> Result<Value, FlowError> {
    let lua_err = |e: mlua::Error| FlowError::new(ErrorCode::InvalidInput, e.to_string());
    let len = t.raw_len();
    let is_array = t.metatable().is_some_and(|mt| mt == lua.array_metatable())
        || (len > 0 && t.clone().pairs::<LuaValue, LuaValue>().count() == len);
    let base = path.len();
    if is_array {
        let mut items = Vec::with_capacity(len);
        for i in 1..=len {
            path.push_str(&format!("[{i}]"));
            let v: LuaValue = t.raw_get(i).map_err(lua_err)?;
            items.push(convert(lua, v, path, depth + 1, refs)?);
            path.truncate(base);
        }
        return Ok(Value::Array(items));
    }
    let mut map = serde_json::Map::new();
    for pair in t.pairs::<LuaValue, LuaValue>() {
        let (k, v) = pair.map_err(lua_err)?;
        let key = match k {
            LuaValue::String(ref s) => s.to_str().map(|s| s.to_string()).ok(),
            _ => None,
        };
        let Some(key) = key else {
            let field = if path.is_empty() {
                "input".to_string()
            } else {
                path.clone()
            };
            return Err(FlowError::invalid_input(
                &field,
                format!(
                    "`{field}` mixes a positional value (key {}) with named fields; name every field, e.g. {{path = \"a.txt\"}}.",
                    k.to_string().unwrap_or_else(|_| k.type_name().to_string())
                ),
            ));
        };
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(&key);
        let v = convert(lua, v, path, depth + 1, refs)?;
        path.truncate(base);
        map.insert(key, v);
    }
    Ok(Value::Object(map))
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
