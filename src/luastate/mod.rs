//! The sandboxed Lua state workflow scripts run in. Everything that touches
//! the world goes through a flow, or the policy would mean nothing, so the
//! state has no `io`, no `debug`, no C modules, no bytecode, and an `os`
//! reduced to `time`, `clock` and `date`. `require` loads the `lua/`
//! modules built into sluice and pure-Lua source from one folder: a
//! script's ([`install_require`]) or a policy's ([`install_policy_require`]).
//!
//! A built-in module's name always means the built-in module: `sluice` and
//! every name under `sluice.` are sluice's own, never looked for in a
//! folder, so a file an agent writes as `sluice/policy.lua` beside a
//! policy or a script is never loaded in its place.

use mlua::{ChunkMode, Function, Lua, LuaOptions, StdLib, Table, Value};
use std::cell::RefCell;
use std::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The Lua modules shipped in `lua/`, by module name.
pub(crate) const BUNDLED: &[(&str, &str)] = &[
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

/// Installs `require` and `package.loaded` for a script: the built-in
/// modules, then `script_dir` (`NAME.lua`, then `NAME/init.lua`).
/// `preloaded` modules (the `sluice` module of a script) are found first.
pub fn install_require(
    lua: &Lua,
    script_dir: PathBuf,
    preloaded: &[(&str, Table)],
) -> mlua::Result<()> {
    install_require_with(lua, script_dir, preloaded, Box::new(|w| Ok(w.found)))
}

/// A module of the script's folder that `require` is loading: its name,
/// and the first of its files (`DIR/NAME.lua`, then `DIR/NAME/init.lua`)
/// that could be read, with its text (`None` when none could).
#[derive(Debug)]
pub struct Wanted<'a> {
    /// The name `require` was given (`util`, `lib.text`).
    pub name: &'a str,
    /// The first of its files read, and its text.
    pub found: Option<(PathBuf, String)>,
}

/// What a script's `require` loads for a module of its folder: its text
/// and the file its chunk is named by (`None`: the module is not found).
/// The run's own, which records each module and, in a replay, loads the
/// recorded text.
pub type Loader = Box<dyn Fn(Wanted) -> mlua::Result<Option<(PathBuf, String)>>>;

/// [`install_require`] with `load` deciding what each module of the
/// script's folder loads.
pub fn install_require_with(
    lua: &Lua,
    script_dir: PathBuf,
    preloaded: &[(&str, Table)],
    load: Loader,
) -> mlua::Result<()> {
    install(lua, preloaded, move |name| {
        let rel = name.replace('.', "/");
        let candidates = [
            script_dir.join(format!("{rel}.lua")),
            script_dir.join(&rel).join("init.lua"),
        ];
        let found = candidates
            .iter()
            .find_map(|path| Some((path.clone(), fs::read_to_string(path).ok()?)));
        let wanted = Wanted { name, found };
        if let Some((path, source)) = load(wanted)? {
            return Ok((source, path.display().to_string()));
        }
        let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        Err(mlua::Error::runtime(format!(
            "module {name:?} not found; looked in {} and in sluice's bundled modules",
            tried.join(", ")
        )))
    })
}

/// One file a policy's `require` loaded from the policy's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleFile {
    /// The module's name, as required (`helpers`, `lib.text`).
    pub name: String,
    /// The file, as the folder names it (`DIR/lib/text.lua`).
    pub path: PathBuf,
}

/// The files a policy's `require` loaded, and whether the policy's load is
/// over. Kept in the policy's Lua state ([`Lua::app_data_ref`]).
#[derive(Debug, Default)]
struct PolicyModules {
    files: Vec<ModuleFile>,
    sealed: bool,
}

/// Installs `require` and `package.loaded` for a policy: the built-in
/// modules, then `dir/NAME.lua` alone (no `NAME/init.lua`, so that each
/// name has one file, which exists and is protected, and no other file
/// made later can stand in for it). Every file loaded is remembered
/// ([`policy_modules`]); once [`seal_policy_modules`] is called, `require`
/// gives only what is loaded already, so a hook that requires a module at
/// call time cannot load a file that was not there, and protected, when
/// the policy loaded.
pub fn install_policy_require(lua: &Lua, dir: PathBuf) -> mlua::Result<()> {
    let modules = Rc::new(RefCell::new(PolicyModules::default()));
    lua.set_app_data(modules.clone());
    install(lua, &[], move |name| {
        let path = dir.join(format!("{}.lua", name.replace('.', "/")));
        if modules.borrow().sealed {
            return Err(mlua::Error::runtime(format!(
                "require({name:?}) after the policy loaded: a policy's modules are loaded, and protected from the run, when the policy loads; require {name:?} at the top of the policy, outside its hooks"
            )));
        }
        let source = fs::read_to_string(&path).map_err(|_| {
            mlua::Error::runtime(format!(
                "module {name:?} not found; looked in {} and in sluice's bundled modules (a policy's module is NAME.lua in the policy's folder: lib.text is lib/text.lua)",
                path.display()
            ))
        })?;
        modules.borrow_mut().files.push(ModuleFile {
            name: name.to_string(),
            path: path.clone(),
        });
        Ok((source, path.display().to_string()))
    })
}

/// The files the policy state `lua`'s `require` loaded from the policy's
/// folder, in load order, each once.
pub fn policy_modules(lua: &Lua) -> Vec<ModuleFile> {
    let Some(modules) = lua.app_data_ref::<Rc<RefCell<PolicyModules>>>() else {
        return Vec::new();
    };
    let mut files: Vec<ModuleFile> = Vec::new();
    for f in &modules.borrow().files {
        if !files.contains(f) {
            files.push(f.clone());
        }
    }
    files
}

/// Ends the policy state `lua`'s load: `require` loads no file from now on.
pub fn seal_policy_modules(lua: &Lua) {
    if let Some(modules) = lua.app_data_ref::<Rc<RefCell<PolicyModules>>>() {
        modules.borrow_mut().sealed = true;
    }
}

/// Installs `require`: `preloaded`, then what it loaded already, then the
/// built-in modules, then `find` (a module's source and where it came
/// from) for every other valid name.
fn install(
    lua: &Lua,
    preloaded: &[(&str, Table)],
    find: impl Fn(&str) -> mlua::Result<(String, String)> + 'static,
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
        check_name(&name)?;
        let (source, origin, builtin) = match built_in(&name)? {
            Some(source) => (
                source.to_string(),
                format!("{BUILT_IN_PREFIX}{}.lua", name.replace('.', "/")),
                true,
            ),
            None => {
                let (source, origin) = find(&name)?;
                (source, origin, false)
            }
        };
        let chunk = lua
            .load(source)
            .set_name(format!("@{origin}"))
            .set_mode(ChunkMode::Text);
        // A built-in module may say where its caller's code is written
        // (`sluice.policy` notes each rule's line); nothing else gets
        // this look at the stack.
        let module: Value = if builtin {
            chunk.call((name.clone(), lua.create_function(caller_line)?))?
        } else {
            chunk.call(name.clone())?
        };
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

/// Where the chunks of sluice's built-in modules say they come from.
const BUILT_IN_PREFIX: &str = "lua/";

/// `FILE:LINE` of the nearest Lua code on the stack, above the function
/// that asks, that is not one of sluice's built-in modules: the line of a
/// policy file that made a rule (`p.deny(...)`), even through a helper of
/// `sluice.policy`. `nil` when there is none, or when a C function comes
/// first (a rule the module made as it loaded).
fn caller_line(lua: &Lua, (): ()) -> mlua::Result<Option<String>> {
    // Level 0 is this function, 1 the built-in module's function that
    // asked.
    for level in 2..64 {
        let Some(frame) = lua.inspect_stack(level) else {
            return Ok(None);
        };
        let line = frame.curr_line();
        let source = frame.source();
        let Some(file) = source.source.as_deref().and_then(|s| s.strip_prefix('@')) else {
            // Past a C function (`require`) before any code of the
            // caller's: the rule was made as the module loaded
            // (`p.programs`), at no line of the policy's.
            if source.what == "C" {
                return Ok(None);
            }
            continue;
        };
        if line > 0 && !file.starts_with(BUILT_IN_PREFIX) {
            return Ok(Some(format!("{file}:{line}")));
        }
    }
    Ok(None)
}

/// Refuses what is not a dotted module name.
fn check_name(name: &str) -> mlua::Result<()> {
    let valid = !name.is_empty()
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
    if valid {
        return Ok(());
    }
    Err(mlua::Error::runtime(format!(
        "require: {name:?} is not a module name; use dotted names like \"helpers\" or \"lib.text\""
    )))
}

/// The source of built-in module `name`; `None` for a name that is not
/// sluice's (`sluice` and `sluice.*` are, built in or not: such a name is
/// never looked for in a folder).
fn built_in(name: &str) -> mlua::Result<Option<&'static str>> {
    if let Some((_, source)) = BUNDLED.iter().find(|(n, _)| *n == name) {
        return Ok(Some(source));
    }
    if name == "sluice" || name.starts_with("sluice.") {
        let names: Vec<&str> = BUNDLED.iter().map(|(n, _)| *n).collect();
        return Err(mlua::Error::runtime(format!(
            "module {name:?} is not one of sluice's bundled modules ({}); names under \"sluice.\" are sluice's own and are never loaded from a folder, so name your module otherwise",
            names.join(", ")
        )));
    }
    Ok(None)
}

/// Loads a script file as a text chunk named by its path.
pub fn load_script(lua: &Lua, path: &Path) -> Result<Function, String> {
    let source = fs::read_to_string(path)
        .map_err(|e| format!("cannot read script {}: {e}", path.display()))?;
    load_text(lua, path, &source)
}

/// Loads a script's `text` as a text chunk named by its file's `path`
/// (whether or not the file still holds it: a replay runs the recorded
/// text).
pub fn load_text(lua: &Lua, path: &Path, text: &str) -> Result<Function, String> {
    lua.load(text)
        .set_name(format!("@{}", path.display()))
        .set_mode(ChunkMode::Text)
        .into_function()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// A folder holding a file for every built-in module's name (and one
    /// more under `sluice.`), each returning the string "shadow".
    fn shadows(dir: &Path) {
        for name in [
            "sluice/policy",
            "sluice/agent",
            "sluice/retry",
            "sluice/extra",
            "sluice",
        ] {
            write(dir, &format!("{name}.lua"), "return 'shadow'");
        }
        write(dir, "sluice/init.lua", "return 'shadow'");
    }

    fn required(lua: &Lua, name: &str) -> Result<String, String> {
        let f: Function = lua.globals().get("require").unwrap();
        f.call::<Value>(name)
            .map(|v| v.type_name().to_string() + ":" + &v.to_string().unwrap_or_default())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_scripts_built_in_module_names_never_load_a_file_of_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        shadows(dir.path());
        let lua = new_state().unwrap();
        install_require(&lua, dir.path().to_path_buf(), &[]).unwrap();
        for name in ["sluice.policy", "sluice.agent", "sluice.retry"] {
            let got = required(&lua, name).unwrap();
            assert!(got.starts_with("table:"), "{name}: {got}");
        }
        for name in ["sluice.extra", "sluice"] {
            let e = required(&lua, name).unwrap_err();
            assert!(
                e.contains("is not one of sluice's bundled modules"),
                "{name}: {e}"
            );
        }
        // The control: the folder's own modules load.
        write(dir.path(), "helpers.lua", "return 'mine'");
        assert_eq!(required(&lua, "helpers").unwrap(), "string:mine");
    }

    #[test]
    fn a_policys_module_is_one_file_remembered_and_none_loads_after_its_load() {
        let dir = tempfile::tempdir().unwrap();
        shadows(dir.path());
        write(dir.path(), "helpers.lua", "return 'helpers'");
        write(dir.path(), "lib/text.lua", "return 'text'");
        write(dir.path(), "pkg/init.lua", "return 'pkg'");
        write(dir.path(), "later.lua", "return 'later'");
        let lua = new_state().unwrap();
        install_policy_require(&lua, dir.path().to_path_buf()).unwrap();
        let got = required(&lua, "sluice.policy").unwrap();
        assert!(got.starts_with("table:"), "{got}");
        assert!(required(&lua, "sluice.extra").is_err());
        assert_eq!(required(&lua, "helpers").unwrap(), "string:helpers");
        assert_eq!(required(&lua, "lib.text").unwrap(), "string:text");
        let e = required(&lua, "pkg").unwrap_err();
        assert!(e.contains("pkg.lua and in sluice's bundled modules"), "{e}");
        let names: Vec<(String, PathBuf)> = policy_modules(&lua)
            .into_iter()
            .map(|m| (m.name, m.path))
            .collect();
        assert_eq!(
            names,
            [
                ("helpers".to_string(), dir.path().join("helpers.lua")),
                ("lib.text".to_string(), dir.path().join("lib/text.lua")),
            ]
        );
        seal_policy_modules(&lua);
        // What loaded is still given; nothing else loads, the file there or not.
        assert_eq!(required(&lua, "helpers").unwrap(), "string:helpers");
        let e = required(&lua, "later").unwrap_err();
        assert!(
            e.contains("require(\"later\") after the policy loaded"),
            "{e}"
        );
        lua.load("package.loaded.helpers = nil").exec().unwrap();
        assert!(required(&lua, "helpers").is_err());
        assert_eq!(policy_modules(&lua).len(), 2);
    }
}
