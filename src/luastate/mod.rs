//! The sandboxed Lua state workflow scripts run in. Everything that touches
//! the world goes through a flow, or the policy would mean nothing, so the
//! state has no `io`, no `debug`, no C modules, no bytecode, and an `os`
//! reduced to `time`, `clock` and `date`. `require` loads pure-Lua source from
//! the script's folder and from the `lua/` modules built into sluice.

use mlua::{ChunkMode, Function, Lua, LuaOptions, StdLib, Table, Value};
use std::fs;
use std::path::{Path, PathBuf};

/// The Lua modules shipped in `lua/`, by module name.
const BUNDLED: &[(&str, &str)] = &[
    ("sluice.retry", include_str!("../../lua/sluice/retry.lua")),
    ("sluice.agent", include_str!("../../lua/sluice/agent.lua")),
    ("sluice.policy", include_str!("../../lua/sluice/policy.lua")),
];

/// Globals of the base library that reach the filesystem or load code
/// unchecked.
const REMOVED_GLOBALS: &[&str] = &["dofile", "loadfile", "require"];
const KEPT_OS: &[&str] = &["time", "clock", "date"];

/// The registry key of the function that names the running task.
pub const TASK: &str = "sluice.task";

/// The registry key of the function that calls a callback sluice makes
/// (a model call's `onText`) without it counting in task ids.
pub const ASIDE: &str = "sluice.aside";

/// The registry key of the function that names the coroutine sluice
/// resumed itself (a task, or the main chunk) that drives the one running
/// now: the task that waits when a coroutine inside it waits.
pub const DRIVING: &str = "sluice.driving";

/// The id of the task (coroutine) running now: "0" for the main chunk.
pub fn current_task(lua: &Lua) -> mlua::Result<String> {
    lua.named_registry_value::<Function>(TASK)?.call(())
}

/// A fresh state with the safe libraries only.
pub fn new_state() -> mlua::Result<Lua> {
    let libs = StdLib::COROUTINE
        | StdLib::TABLE
        | StdLib::STRING
        | StdLib::UTF8
        | StdLib::MATH
        | StdLib::OS;
    let lua = Lua::new_with(libs, LuaOptions::default())?;
    // Generational: a flow's result table is garbage by the next call,
    // and an incremental cycle would walk every function the script and
    // sluice's modules loaded to find that out (half the collector's work
    // in a run of small calls).
    lua.gc_gen(0, 0);
    let globals = lua.globals();
    for name in REMOVED_GLOBALS {
        globals.raw_set(*name, Value::Nil)?;
    }
    let os: Table = globals.get("os")?;
    let reduced = lua.create_table()?;
    for name in KEPT_OS {
        reduced.set(*name, os.get::<Value>(*name)?)?;
    }
    globals.set("os", reduced)?;
    let string: Table = globals.get("string")?;
    string.set("dump", Value::Nil)?;
    // Text chunks only: bytecode can break the VM's memory safety.
    lua.load(
        r#"local raw_load = load
        load = function(chunk, name, _mode, ...) return raw_load(chunk, name, "t", ...) end"#,
    )
    .set_name("=sluice")
    .exec()?;
    let (task, aside, driving): (Function, Function, Function) = lua
        .load(include_str!("coroutine.lua"))
        .set_name("=sluice.coroutine")
        .call(Lua::poll_pending())?;
    lua.set_named_registry_value(TASK, task)?;
    lua.set_named_registry_value(ASIDE, aside)?;
    lua.set_named_registry_value(DRIVING, driving)?;
    Ok(lua)
}

/// Installs `require` and `package.loaded`, searching `script_dir` first.
/// `preloaded` modules (the `sluice` module of a script) are found first.
pub fn install_require(
    lua: &Lua,
    script_dir: PathBuf,
    preloaded: &[(&str, Table)],
) -> mlua::Result<()> {
    let loaded = lua.create_table()?;
    for (name, module) in preloaded {
        loaded.set(*name, module)?;
    }
    let package = lua.create_table()?;
    package.set("loaded", &loaded)?;
    lua.globals().set("package", package)?;
    let require = lua.create_function(move |lua, name: String| {
        if let Some(found) = loaded.get::<Option<Value>>(name.as_str())? {
            return Ok(found);
        }
        let (source, origin) = find_module(&script_dir, &name)?;
        let module: Value = lua
            .load(source)
            .set_name(format!("@{origin}"))
            .set_mode(ChunkMode::Text)
            .call(name.clone())?;
        let module = if module.is_nil() {
            Value::Boolean(true)
        } else {
            module
        };
        loaded.set(name, module.clone())?;
        Ok(module)
    })?;
    lua.globals().set("require", require)
}

/// The source of module `name` and where it came from.
fn find_module(script_dir: &Path, name: &str) -> mlua::Result<(String, String)> {
    let valid = !name.is_empty()
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
    if !valid {
        return Err(mlua::Error::runtime(format!(
            "require: {name:?} is not a module name; use dotted names like \"helpers\" or \"lib.text\""
        )));
    }
    let rel = name.replace('.', "/");
    let candidates = [
        script_dir.join(format!("{rel}.lua")),
        script_dir.join(&rel).join("init.lua"),
    ];
    for path in &candidates {
        if let Ok(source) = fs::read_to_string(path) {
            return Ok((source, path.display().to_string()));
        }
    }
    if let Some((_, source)) = BUNDLED.iter().find(|(n, _)| *n == name) {
        return Ok((source.to_string(), format!("lua/{rel}.lua")));
    }
    let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
    Err(mlua::Error::runtime(format!(
        "module {name:?} not found; looked in {} and in sluice's bundled modules",
        tried.join(", ")
    )))
}

/// Loads a script file as a text chunk named by its path.
pub fn load_script(lua: &Lua, path: &Path) -> Result<Function, String> {
    let source = fs::read_to_string(path)
        .map_err(|e| format!("cannot read script {}: {e}", path.display()))?;
    lua.load(source)
        .set_name(format!("@{}", path.display()))
        .set_mode(ChunkMode::Text)
        .into_function()
        .map_err(|e| e.to_string())
}
