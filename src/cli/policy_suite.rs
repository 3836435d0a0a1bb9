//! `sluice policy test`: runs the `test_*` functions of the `*_test.lua`
//! files next to a policy, as `opa test` does for Rego. Each test file checks
//! the policy of the same name without `_test` (`default_test.lua` checks
//! `default.lua`), through a `policy` table of helpers:
//!
//! ```lua
//! function test_reads_inside_the_workspace()
//!   policy.allows("fs:read:" .. policy.workspace .. "/src/main.rs")
//! end
//! function test_posts_ask() policy.asks("net:post:example.com") end
//! function test_env_files() policy.denies("fs:read:/anywhere/.env", {flow = "read"}) end
//! -- policy.decide(capability, {flow =, input =}) returns {decision =, by =, reason =}
//! ```
//!
//! Capabilities are checked as the run's kernel checks them, with
//! `${workspace}` standing for [`TEST_WORKSPACE`] and `~` for [`TEST_HOME`]
//! (`policy.workspace`, `policy.home`).
//!
//! A test file runs confined as a policy does (no `os`, coroutines,
//! `pcall` or `__gc`) and under the same limits, renewed for loading the file
//! and for each test: [`crate::kernel::policy::INSTRUCTION_LIMIT`] instructions,
//! [`crate::kernel::policy::MEMORY_LIMIT`] bytes, and [`TEST_TIME_LIMIT`] of wall
//! time (longer than a decision's, since one test may ask for many). A test
//! that loops or bloats fails with the limit it ran past, and the rest run.

use crate::call::Tier;
use crate::flows::Registry;
use crate::kernel::pattern::Vars;
use crate::kernel::policy::{Budget, Policy, Request, Source};
use crate::kernel::{Capability, Kernel};
use crate::luastate;
use mlua::{Lua, Table, Value as LuaValue};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// What `${workspace}` means while testing a policy.
pub const TEST_WORKSPACE: &str = "/workspace";

/// What a leading `~` means while testing a policy (`policy.home`), so a
/// test reads the same on every machine.
pub const TEST_HOME: &str = "/home/tester";

/// The variables a policy under test expands.
fn test_vars() -> Vars {
    Vars {
        workspace: PathBuf::from(TEST_WORKSPACE),
        home: Some(PathBuf::from(TEST_HOME)),
    }
}

/// Wall time for loading a test file, and for each test function.
pub const TEST_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The outcome of one test function.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub file: PathBuf,
    pub test: String,
    /// `None` when it passed, else why it failed.
    pub failure: Option<String>,
}

/// What `sluice policy test` looks for, and how to make one: for a
/// message that finds none.
pub const HOW_TO_TEST: &str =
    "`sluice policy test` runs the test_* functions of *_test.lua files; \
x_test.lua tests the policy x.lua beside it. Give the folder or file that holds them \
(sluice policy test path/to/policies/), or make one: beside mine.lua, a mine_test.lua holding \
`function test_reads() policy.allows(\"fs:read:\" .. policy.workspace .. \"/src/a.rs\") end`";

/// The `*_test.lua` files at `path` (a file, or a folder searched one level).
pub fn find_tests(path: &Path) -> Result<Vec<PathBuf>, String> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries = fs::read_dir(path).map_err(|e| {
        let shown = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let what = match e.kind() {
            std::io::ErrorKind::NotFound => "there is no such folder".to_string(),
            std::io::ErrorKind::NotADirectory => "it is not a folder or a file".to_string(),
            _ => format!("it cannot be listed: {e}"),
        };
        format!(
            "looked for *_test.lua files in {} ({}), but {what}. {HOW_TO_TEST}",
            path.display(),
            shown.display()
        )
    })?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("_test.lua"))
        })
        .collect();
    found.sort();
    Ok(found)
}

/// Runs every `test_*` function of one test file, in name order.
pub fn run_file(test_file: &Path) -> Result<Vec<Outcome>, String> {
    let policy_file = policy_under_test(test_file)?;
    let vars = test_vars();
    let policy = Policy::load(Source::File(policy_file.clone()), vars.clone());
    if let Some(e) = policy.load_error() {
        return Err(e.to_string());
    }
    let kernel = Rc::new(Kernel::new(vec![policy], Vec::new(), vars));
    let lua = luastate::new_state().map_err(|e| e.to_string())?;
    let dir = test_file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    luastate::install_require(&lua, dir, &[]).map_err(|e| e.to_string())?;
    let budget = Budget::install(&lua, TEST_TIME_LIMIT).map_err(|e| first_line(&e))?;
    lua.globals()
        .set(
            "policy",
            helpers(&lua, kernel, budget.clone()).map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
    let source = fs::read_to_string(test_file)
        .map_err(|e| format!("cannot read {}: {e}", test_file.display()))?;
    budget.renew();
    lua.load(source)
        .set_name(format!("@{}", test_file.display()))
        .set_mode(mlua::ChunkMode::Text)
        .exec()
        .map_err(|e| first_line(&e))?;
    let mut names: Vec<String> = lua
        .globals()
        .pairs::<String, LuaValue>()
        .filter_map(|pair| pair.ok())
        .filter(|(name, v)| name.starts_with("test_") && v.is_function())
        .map(|(name, _)| name)
        .collect();
    names.sort();
    let outcomes = names
        .into_iter()
        .map(|test| {
            let f: mlua::Function = lua.globals().get(test.as_str()).expect("listed above");
            budget.renew();
            let failure = f.call::<()>(()).err().map(|e| first_line(&e));
            Outcome {
                file: test_file.to_path_buf(),
                test,
                failure,
            }
        })
        .collect();
    Ok(outcomes)
}

/// `x_test.lua` tests `x.lua` beside it.
fn policy_under_test(test_file: &Path) -> Result<PathBuf, String> {
    let name = test_file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let Some(stem) = name.strip_suffix("_test.lua") else {
        return Err(format!(
            "{}: a policy test file is named <policy>_test.lua",
            test_file.display()
        ));
    };
    let policy = test_file.with_file_name(format!("{stem}.lua"));
    if !policy.is_file() {
        return Err(format!(
            "{} tests {}, which does not exist",
            test_file.display(),
            policy.display()
        ));
    }
    Ok(policy)
}

/// The `policy` table: decide, allows, denies, asks, workspace, home. Each
/// decision first checks the test's time: a loop of costly decisions spends
/// few of the test's own instructions.
fn helpers(lua: &Lua, kernel: Rc<Kernel>, budget: Budget) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("workspace", TEST_WORKSPACE)?;
    t.set("home", TEST_HOME)?;
    let decide = lua.create_function(move |lua, (cap, opts): (String, Option<Table>)| {
        budget.check_time()?;
        let capability = Capability::parse(&cap).map_err(mlua::Error::runtime)?;
        let flow: Option<String> = opts.as_ref().map(|o| o.get("flow")).transpose()?.flatten();
        let flow = flow.unwrap_or_else(|| default_flow(&capability).to_string());
        let input: Value = match opts
            .as_ref()
            .map(|o| o.get::<LuaValue>("input"))
            .transpose()?
        {
            Some(v) if !v.is_nil() => mlua::LuaSerdeExt::from_value(lua, v)?,
            _ => Value::Object(Default::default()),
        };
        let tier = Registry::standard()
            .get(&flow)
            .map_or(Tier::Irreversible, |f| f.spec().tier);
        let req = Request {
            capability: &capability,
            flow: &flow,
            tier,
            input: &input,
            run_id: "policy-test",
            task: "0",
            script: "policy-test",
            cwd: None,
        };
        let v = kernel.decide(&req);
        let out = lua.create_table()?;
        out.set("decision", v.decision.as_str())?;
        out.set("by", v.by)?;
        out.set("reason", v.reason)?;
        Ok(out)
    })?;
    t.set("decide", &decide)?;
    let assert_src = r#"
local decide = ...
local function expect(want)
  return function(cap, opts)
    local got = decide(cap, opts)
    if got.decision ~= want then
      error(("expected %s for %s, got %s by %s: %s"):format(want, cap, got.decision, got.by, got.reason), 2)
    end
    return got
  end
end
return expect("allow"), expect("deny"), expect("ask")"#;
    let (allows, denies, asks): (mlua::Function, mlua::Function, mlua::Function) =
        lua.load(assert_src).set_name("=policy").call(decide)?;
    t.set("allows", allows)?;
    t.set("denies", denies)?;
    t.set("asks", asks)?;
    Ok(t)
}

/// The flow that usually asks for a capability's action: the first in the
/// manifest's order whose calls ask for it (`read` for `fs:read`, `bash` for
/// `proc:spawn`), read from the registry so a new flow needs no entry here.
/// An action no flow asks for (`model:call`) is named by its family
/// (`model`), the part of the action before `:`.
pub fn default_flow(cap: &Capability) -> &'static str {
    Registry::standard()
        .specs()
        .find(|s| s.actions.contains(&cap.action))
        .map(|s| s.name)
        .unwrap_or_else(|| family(cap.action.as_str()))
}

/// `fs` of `fs:read`.
fn family(action: &'static str) -> &'static str {
    action.split(':').next().unwrap_or(action)
}

fn first_line(e: &mlua::Error) -> String {
    let text = match e {
        mlua::Error::CallbackError { cause, .. } => return first_line(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::MemoryError(_) => format!(
            "ran past its memory limit of {} MiB",
            crate::kernel::policy::MEMORY_LIMIT >> 20
        ),
        other => other.to_string(),
    };
    text.lines().next().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Action;

    /// The answers the hand-written table gave before the registry did.
    #[test]
    fn each_action_defaults_to_the_flow_it_always_did() {
        let flow = |action: Action| {
            default_flow(&Capability {
                action,
                resource: "x".into(),
            })
        };
        let answers = Action::ALL.map(|a| (a.as_str(), flow(a)));
        assert_eq!(
            answers,
            [
                ("fs:read", "read"),
                ("fs:write", "write"),
                ("net:get", "fetch"),
                ("net:post", "http-post"),
                ("net:private", "fetch"),
                ("proc:spawn", "bash"),
                ("model:call", "model"),
                ("cred:use", "bash"),
            ]
        );
    }
}
