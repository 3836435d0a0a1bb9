//! Lua policies: a file that returns `{rules = {...}, decide = fn?, route =
//! fn?, otherwise = "ask"|"deny"}`, loaded into its own sandboxed Lua state
//! with an instruction and a memory limit.
//!
//! A policy never fails open. A file that does not load, a hook that raises,
//! loops, runs out of memory or time, or returns something that is not a
//! decision: each denies the call and says which file, which line and why. A
//! policy file is re-read when it, or a module it loaded, changes on disk,
//! between calls, so an edit takes effect without restarting a long run.
//! Its `require` loads modules only while it loads (see
//! [`luastate::install_policy_require`]); the files it loaded are the
//! kernel's to protect ([`super::policy_files`]).
//!
//! The limits (instructions, time, memory) hold for everything a policy's
//! Lua runs, because nothing in a policy state can run outside them: no
//! coroutines (the hook watches one thread), no `pcall` (a limit must end
//! the call), and no `__gc` finalizers. Lua 5.4 runs a finalizer with hooks
//! switched off and turns its errors into warnings, so no instruction, time
//! or memory limit could end one that loops, whether it ran inside
//! `collectgarbage`, inside any allocation of a later decision, or when the
//! state is closed. A policy has nothing to release, so `setmetatable`
//! refuses a metatable that carries `__gc` (Lua marks an object for
//! finalization only when its metatable has `__gc` at that moment; one
//! added later never runs).

use super::pattern::{Pattern, Vars};
use super::policy_files::{self, LoadedFile, Stamp};
use super::{Action, Capability};
use crate::call::Tier;
use crate::exec::resources::{Kind, ResourceLimits};
use crate::luastate;
use mlua::{Function, HookTriggers, Lua, LuaSerdeExt, Table, Value as LuaValue, VmState};
use serde::Serialize;
use serde_json::Value;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Lua instructions one load or one hook call may run.
pub const INSTRUCTION_LIMIT: u64 = 1_000_000;
/// Bytes a policy's Lua state may hold.
pub const MEMORY_LIMIT: usize = 32 * 1024 * 1024;
/// Wall time one load or one hook call may take. The instruction limit does
/// not bound time alone: one instruction can be a C call such as
/// `string.rep` that fills the memory limit, and its garbage is collected,
/// so a loop of them stays under both other limits for minutes.
pub const TIME_LIMIT: Duration = Duration::from_secs(1);
/// Instructions between two checks of the budget: often enough that a loop
/// of memory-sized C calls is caught within a few of them.
const HOOK_EVERY: u32 = 100;

/// What a policy says about a capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }

    fn parse(text: &str) -> Option<Decision> {
        match text {
            "allow" => Some(Decision::Allow),
            "ask" => Some(Decision::Ask),
            "deny" => Some(Decision::Deny),
            _ => None,
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A decision with what made it (`by`: a rule, a hook, the ceiling) and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub decision: Decision,
    pub by: String,
    pub reason: String,
    /// Where the rule that decided is written, `FILE:LINE`, when a rule
    /// decided and its policy file says (rules made with `p.allow`,
    /// `p.deny`, `p.ask` do).
    pub source: Option<String>,
}

/// What a policy hook sees of one capability check, as `req`.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub capability: &'a Capability,
    pub flow: &'a str,
    pub tier: Tier,
    pub input: &'a Value,
    pub run_id: &'a str,
    pub script: &'a str,
    /// The task that makes the call (`0`, `0.2`): whose approver answers
    /// its asks when a run serves several callers (`sluice mcp`).
    pub task: &'a str,
    /// The canonical folder the call's commands run in, as its flow
    /// planned it ([`crate::call::Envelope::cwd`]); `None` (a call that runs
    /// no command, a job operation, a check outside a run) is the
    /// workspace.
    pub cwd: Option<&'a std::path::Path>,
}

/// One static rule of a policy.
#[derive(Debug)]
pub struct Rule {
    pub decision: Decision,
    pub pattern: Pattern,
    pub reason: Option<String>,
    /// A deny's exceptions (`p.deny(PATTERN, reason, {except = {...}})`):
    /// capabilities they match are taken out of this deny alone, and go on
    /// to the other denies, the hooks, allow, ask and `otherwise`. Each
    /// selects only actions the deny selects. Empty for allow and ask.
    pub except: Vec<Pattern>,
    /// Where it is written: `rules[3]`, or `rules[1][4]` for the fourth
    /// rule of a group (a list of rules, such as `p.programs`) at
    /// `rules[1]`.
    pub at: String,
    /// The file and line that made it (`p.lua:5`), which `p.allow`,
    /// `p.deny` and `p.ask` note as the rule's `source`.
    pub source: Option<String>,
}

impl Rule {
    /// Whether one of the rule's `except` patterns names `cap`.
    pub fn excepts(&self, cap: &Capability) -> bool {
        self.except.iter().any(|e| e.matches(cap))
    }
}

/// Where a policy's source comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A Lua policy file, read when the run loads it (a relative path is
    /// taken from the current directory; `require` looks beside the file).
    /// The run may not write it.
    File(PathBuf),
    /// Shipped inside the binary, e.g. `policies/default.lua`.
    Embedded {
        /// What messages and Lua tracebacks call it, e.g.
        /// `policies/default.lua`.
        name: &'static str,
        /// The policy's Lua source.
        text: &'static str,
    },
}

impl Source {
    /// How messages name the policy: the file's path as given, or the
    /// embedded name followed by `(built in)`.
    pub fn name(&self) -> String {
        match self {
            Source::File(p) => p.display().to_string(),
            Source::Embedded { name, .. } => format!("{name} (built in)"),
        }
    }
}

/// The policies shipped in `policies/`, by name: `default`, `readonly`, `ci`.
pub fn shipped(name: &str) -> Option<Source> {
    let (name, text) = match name {
        "default" => (
            "policies/default.lua",
            include_str!("../../policies/default.lua"),
        ),
        "readonly" => (
            "policies/readonly.lua",
            include_str!("../../policies/readonly.lua"),
        ),
        "ci" => ("policies/ci.lua", include_str!("../../policies/ci.lua")),
        "unconfined" => (
            "policies/unconfined.lua",
            include_str!("../../policies/unconfined.lua"),
        ),
        _ => return None,
    };
    Some(Source::Embedded { name, text })
}

/// A policy file, loaded or failed to load.
pub struct Policy {
    source: Source,
    /// The files it loaded (its own, then its modules'), which no run may
    /// write.
    files: Vec<LoadedFile>,
    vars: Vars,
    /// The file's modification time and length when it was loaded.
    stamp: Option<Stamp>,
    /// SHA-256 of the text loaded, for the audit record.
    sha256: Option<String>,
    loaded: Result<Loaded, String>,
    /// Which load of any policy in this process this is: two views with
    /// the same generations hold the same rules.
    generation: u64,
}

/// The last [`Policy::generation`] given out.
static LOADS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

struct Loaded {
    // Hooks and rules belong to this state; kept alive with them.
    _lua: Lua,
    rules: Vec<Rule>,
    decide: Option<Function>,
    route: Option<Function>,
    /// `containers`: the declarations as written, read by the container
    /// layer (which knows what a declaration means).
    containers: BTreeMap<String, Value>,
    /// `providers`: model providers as written, read by the model layer.
    providers: BTreeMap<String, Value>,
    /// `lsp`: language servers as written, read by the flows.
    lsp: BTreeMap<String, Value>,
    /// `test`: the test flow's runner as written (its `judge`, when a
    /// function, is `{lua = "file:line"}` here and kept in `judge`).
    test: Option<Value>,
    judge: Option<Function>,
    /// `explore`: the explore flow's model and bounds, as written.
    explore: Option<Value>,
    otherwise: Decision,
    /// `limits`: the resources each command may use.
    limits: ResourceLimits,
    /// `askTimeoutMs`: how long an ask may wait for an answer.
    ask_timeout: Option<std::time::Duration>,
    budget: Budget,
}

/// Where a policy's `route` sends a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// `false`: the host, whatever the caller asked.
    Host,
    /// A container name.
    Container(String),
    /// `{deny = "why"}`: the call does not run.
    Refused(String),
}

/// The limits a policy's Lua state runs under, renewed for each load or
/// call: [`INSTRUCTION_LIMIT`] instructions, a wall time, and
/// [`MEMORY_LIMIT`] bytes for the state. A stop request (SIGINT, SIGTERM)
/// ends the call too. `sluice policy test` runs test files under the same
/// limits.
#[derive(Clone)]
pub(crate) struct Budget {
    left: Rc<Cell<u64>>,
    until: Rc<Cell<Instant>>,
    time: Duration,
}

impl Budget {
    /// Confines `lua` (see [`confine`]) and puts it under the limits, with
    /// `time` as the wall time of each load or call.
    pub(crate) fn install(lua: &Lua, time: Duration) -> mlua::Result<Budget> {
        lua.set_memory_limit(MEMORY_LIMIT)?;
        let budget = Budget {
            left: Rc::new(Cell::new(INSTRUCTION_LIMIT)),
            until: Rc::new(Cell::new(Instant::now() + time)),
            time,
        };
        let b = budget.clone();
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |_, _| b.check(),
        );
        confine(lua)?;
        Ok(budget)
    }

    /// A fresh budget for the next load or call.
    pub(crate) fn renew(&self) {
        self.left.set(INSTRUCTION_LIMIT);
        self.until.set(Instant::now() + self.time);
    }

    /// Whether the time is up, as an error to raise; for Rust callbacks
    /// that run long work between two instruction checks.
    pub(crate) fn check_time(&self) -> mlua::Result<()> {
        if Instant::now() > self.until.get() {
            return Err(mlua::Error::runtime(format!(
                "ran past its time limit of {}",
                span(self.time)
            )));
        }
        if let Some(sig) = crate::interrupt::requested() {
            return Err(mlua::Error::runtime(format!(
                "stopped: the run was interrupted by {}",
                crate::interrupt::name(sig)
            )));
        }
        Ok(())
    }

    fn check(&self) -> mlua::Result<VmState> {
        let left = self.left.get().saturating_sub(u64::from(HOOK_EVERY));
        self.left.set(left);
        if left == 0 {
            return Err(mlua::Error::runtime(format!(
                "ran past its limit of {INSTRUCTION_LIMIT} Lua instructions (a runaway loop?)"
            )));
        }
        self.check_time()?;
        Ok(VmState::Continue)
    }
}

impl Policy {
    /// Loads `source`; a policy that fails to load is kept, and denies.
    pub fn load(source: Source, vars: Vars) -> Policy {
        let stamp = stamp_of(&source);
        let text = read_source(&source);
        let sha256 = text
            .as_ref()
            .ok()
            .map(|t| crate::digest::sha256_hex(t.as_bytes()));
        let loaded = text.and_then(|text| load_text(&source, &text, &vars));
        let files = match &source {
            Source::File(p) => {
                let modules = loaded
                    .as_ref()
                    .map_or_else(|_| Vec::new(), |l| luastate::policy_modules(&l._lua));
                policy_files::of(&absolute(p), modules)
            }
            Source::Embedded { .. } => Vec::new(),
        };
        let loaded = loaded.and_then(|l| match policy_files::shared(&files) {
            Some(e) => Err(format!("policy {}: {e}", source.name())),
            None => Ok(l),
        });
        Policy {
            source,
            files,
            vars,
            stamp,
            sha256,
            loaded,
            generation: LOADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
        }
    }

    /// Which load this is, unique in the process: the policy's rules are
    /// the same as long as it is.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// SHA-256 of the text this policy was loaded from.
    pub fn sha256(&self) -> Option<&str> {
        self.sha256.as_deref()
    }

    /// The files the policy loaded, canonical: its own, when it is one,
    /// and each module its `require` loaded from its folder.
    pub fn files(&self) -> impl Iterator<Item = &Path> + '_ {
        self.files.iter().map(LoadedFile::real)
    }

    /// The symlinks on the way to each file the policy loaded, as it named
    /// them (each where it lies: its folder canonical), with how messages
    /// name the file: a command that can write where a link lies can
    /// replace it, and the policy would load what it put there next.
    pub fn links(&self) -> impl Iterator<Item = (&str, &Path)> + '_ {
        self.files.iter().flat_map(LoadedFile::links)
    }

    pub fn source(&self) -> &Source {
        &self.source
    }

    pub fn name(&self) -> String {
        self.source.name()
    }

    /// Why the policy did not load, if it did not.
    pub fn load_error(&self) -> Option<&str> {
        self.loaded.as_ref().err().map(String::as_str)
    }

    /// Which of this policy's files writing `path` would rewrite, as
    /// messages name it (`its file`, `its module "helpers" (PATH)`).
    pub fn guards(&self, path: &Path) -> Option<&str> {
        self.files
            .iter()
            .find(|f| f.real() == path)
            .map(LoadedFile::what)
    }

    /// Loads the policy again if its file or a module's changed on disk
    /// since it was loaded.
    pub fn refresh(&mut self) {
        let stamp = stamp_of(&self.source);
        // (The policy's own file is judged by the stamp taken before it
        // was read.)
        let modules_changed = self.files.iter().skip(1).any(LoadedFile::changed);
        if stamp != self.stamp || modules_changed {
            *self = Policy::load(self.source.clone(), self.vars.clone());
        }
    }

    /// Whether a `decide` hook may change what the static rules say.
    pub fn has_decide(&self) -> bool {
        self.loaded.as_ref().is_ok_and(|l| l.decide.is_some())
    }

    pub fn rules(&self) -> &[Rule] {
        self.loaded.as_ref().map_or(&[], |l| &l.rules)
    }

    /// The policy's `limits` (none when it failed to load: it then
    /// denies every command anyway).
    pub fn limits(&self) -> ResourceLimits {
        self.loaded.as_ref().map(|l| l.limits).unwrap_or_default()
    }

    /// The policy's `askTimeoutMs`, if it sets one.
    pub fn ask_timeout(&self) -> Option<std::time::Duration> {
        self.loaded.as_ref().ok().and_then(|l| l.ask_timeout)
    }

    /// The policy's answer when nothing matched.
    pub fn otherwise(&self) -> Decision {
        self.loaded.as_ref().map_or(Decision::Deny, |l| l.otherwise)
    }

    /// `decide(req)`: `None` when there is no hook or it has no opinion.
    pub fn decide(&self, req: &Request) -> Result<Option<(Decision, Option<String>)>, String> {
        let Ok(l) = &self.loaded else { return Ok(None) };
        let Some(hook) = &l.decide else {
            return Ok(None);
        };
        let value = self.call(l, hook, req)?;
        parse_opinion(value).map_err(|e| format!("{}: {e}", where_defined(hook)))
    }

    /// `route(req)`: a container name, `false` for the host, `{deny =
    /// "why"}` to refuse, or `None` (nil, or no hook) for no opinion.
    pub fn route(&self, req: &Request) -> Result<Option<Placement>, String> {
        let Ok(l) = &self.loaded else { return Ok(None) };
        let Some(hook) = &l.route else {
            return Ok(None);
        };
        let value = self.call(l, hook, req)?;
        parse_placement(value).map_err(|e| format!("{}: route returned {e}; return a container name, nil (no opinion: the caller's `container`, else the host), false (the host) or {{deny = \"why\"}}", where_defined(hook)))
    }

    /// The policy's `containers` declarations, as written.
    pub fn containers(&self) -> BTreeMap<String, Value> {
        self.loaded
            .as_ref()
            .map(|l| l.containers.clone())
            .unwrap_or_default()
    }

    /// The policy's `providers` declarations, as written.
    pub fn providers(&self) -> BTreeMap<String, Value> {
        self.loaded
            .as_ref()
            .map(|l| l.providers.clone())
            .unwrap_or_default()
    }

    /// The policy's `lsp` declarations (language servers), as written.
    pub fn lsp(&self) -> BTreeMap<String, Value> {
        self.loaded
            .as_ref()
            .map(|l| l.lsp.clone())
            .unwrap_or_default()
    }

    /// The policy's `test` declaration, as written (a `judge` function
    /// appears as `{lua = "file:line"}`).
    pub fn test_runner(&self) -> Option<Value> {
        self.loaded.as_ref().ok().and_then(|l| l.test.clone())
    }

    /// The policy's `explore` declaration, as written.
    pub fn explore(&self) -> Option<Value> {
        self.loaded.as_ref().ok().and_then(|l| l.explore.clone())
    }

    /// Calls the `test.judge` function with `run` (the finished run, as
    /// the test flow describes it): `Ok(None)` when there is no function
    /// or it returned nil, else what it returned, as JSON.
    pub fn judge(&self, run: &Value) -> Result<Option<Value>, String> {
        let Ok(l) = &self.loaded else { return Ok(None) };
        let Some(judge) = &l.judge else {
            return Ok(None);
        };
        l.budget.renew();
        let at = where_defined(judge);
        let fail = |e: mlua::Error| format!("the judge at {at} failed: {}", lua_error(&e));
        let table = l._lua.to_value(&for_hook(run)).map_err(fail)?;
        let returned = judge.call::<LuaValue>(table).map_err(fail)?;
        if returned.is_nil() {
            return Ok(None);
        }
        l._lua
            .from_value(returned)
            .map(Some)
            .map_err(|e| format!("the judge at {at} returned what is not plain data: {e}"))
    }

    /// The `decide` or `route` hook, named for messages: where it is defined.
    pub fn hook_name(&self, which: &str) -> String {
        match self.hook_source(which) {
            Some(at) => format!("{which} hook at {at}"),
            None => format!("{which} hook of {}", self.name()),
        }
    }

    /// Where the `decide` or `route` hook is defined, `FILE:LINE`.
    pub fn hook_source(&self, which: &str) -> Option<String> {
        let hook = self.loaded.as_ref().ok().and_then(|l| match which {
            "decide" => l.decide.as_ref(),
            _ => l.route.as_ref(),
        });
        hook.map(where_defined)
    }

    fn call(&self, l: &Loaded, hook: &Function, req: &Request) -> Result<LuaValue, String> {
        l.budget.renew();
        let table = request_table(&l._lua, req, &self.vars.workspace).map_err(|e| e.to_string())?;
        hook.call::<LuaValue>(table).map_err(|e| {
            format!(
                "the hook at {} failed: {}",
                where_defined(hook),
                lua_error(&e)
            )
        })
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::env::current_dir().map_or_else(|_| p.to_path_buf(), |cwd| cwd.join(p))
}

fn stamp_of(source: &Source) -> Option<Stamp> {
    match source {
        Source::File(p) => policy_files::stamp_at(p),
        Source::Embedded { .. } => None,
    }
}

/// Policy files larger than this are refused unread.
const MAX_POLICY_BYTES: u64 = 1024 * 1024;

fn read_source(source: &Source) -> Result<String, String> {
    match source {
        Source::File(p) => {
            let cannot = |e: String| format!("cannot read policy {}: {e}", p.display());
            let meta = fs::metadata(p).map_err(|e| cannot(e.to_string()))?;
            if !meta.is_file() {
                return Err(cannot("it is not a regular file".into()));
            }
            if meta.len() > MAX_POLICY_BYTES {
                return Err(cannot(format!("it is over {MAX_POLICY_BYTES} bytes")));
            }
            fs::read_to_string(p).map_err(|e| cannot(e.to_string()))
        }
        Source::Embedded { text, .. } => Ok(text.to_string()),
    }
}

/// Builds the policy's state and reads its returned table.
fn load_text(source: &Source, text: &str, vars: &Vars) -> Result<Loaded, String> {
    let name = source.name();
    let fail = |e: mlua::Error| format!("policy {name}: {}", lua_error(&e));
    let lua = luastate::new_state().map_err(fail)?;
    let dir = match source {
        Source::File(p) => p.parent().map(Path::to_path_buf).unwrap_or_default(),
        Source::Embedded { .. } => PathBuf::from("/nonexistent"),
    };
    luastate::install_policy_require(&lua, dir).map_err(fail)?;
    let budget = Budget::install(&lua, TIME_LIMIT).map_err(fail)?;
    let chunk_name = match source {
        Source::File(p) => format!("@{}", p.display()),
        Source::Embedded { name, .. } => format!("@{name}"),
    };
    let returned: LuaValue = lua
        .load(text)
        .set_name(chunk_name)
        .set_mode(mlua::ChunkMode::Text)
        .eval()
        .map_err(fail)?;
    // What the policy requires from now on (in a hook, at call time) is
    // only what it loaded, and is protected, already.
    luastate::seal_policy_modules(&lua);
    let LuaValue::Table(table) = returned else {
        return Err(format!(
            "policy {name} returned {}; a policy returns a table: {{rules = {{...}}, decide = fn?, route = fn?}}",
            a(returned.type_name())
        ));
    };
    let parsed = parse_policy(&table, vars).map_err(|e| format!("policy {name}: {e}"))?;
    let test = parse_test(&lua, &table).map_err(|e| format!("policy {name}: {e}"))?;
    Ok(Loaded {
        rules: parsed.0,
        decide: parsed.1,
        route: parsed.2,
        otherwise: parsed.3,
        containers: parse_declarations(&lua, &table, "containers", "{box = {image = \"...\"}}")
            .map_err(|e| format!("policy {name}: {e}"))?,
        providers: parse_declarations(
            &lua,
            &table,
            "providers",
            "{local = {api = \"openai\", url = \"http://127.0.0.1:8080/v1\"}}",
        )
        .map_err(|e| format!("policy {name}: {e}"))?,
        lsp: parse_declarations(
            &lua,
            &table,
            "lsp",
            "{python = {command = {\"basedpyright-langserver\", \"--stdio\"}, extensions = {\".py\"}}}",
        )
        .map_err(|e| format!("policy {name}: {e}"))?,
        test: test.0,
        judge: test.1,
        explore: parse_table(
            &lua,
            &table,
            "explore",
            "explore = {provider = \"local\", model = \"qwen3-coder\", maxTurns = 10}",
        )
        .map_err(|e| format!("policy {name}: {e}"))?,
        limits: parse_limits(&table).map_err(|e| format!("policy {name}: {e}"))?,
        ask_timeout: parse_ask_timeout(&table).map_err(|e| format!("policy {name}: {e}"))?,
        _lua: lua,
        budget,
    })
}

/// Closes what lets a policy outrun its limits or depend on the clock. No
/// `os` at all: a decision depends on the request, not on when it is asked.
/// The instruction hook
/// watches one Lua thread, so no coroutines; a limit must end the call, so
/// no `pcall`/`xpcall` to catch it; a finalizer runs where no hook reaches,
/// so no `__gc` (see the module's comment); and a string pattern runs inside
/// one C call the hook never interrupts, so patterns whose backtracking
/// could run away on a long subject are refused before they start.
fn confine(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    for name in ["coroutine", "pcall", "xpcall", "os"] {
        g.raw_set(name, LuaValue::Nil)?;
    }
    lua.load(GC_GUARD).set_name("=sluice.policy").exec()?;
    lua.load(PATTERN_GUARD).set_name("=sluice.policy").exec()
}

/// `setmetatable` without finalizers: a metatable holding `__gc` (any
/// value: Lua looks the function up only when it finalizes) is refused.
/// Lua's own `setmetatable` is the only way a policy can set one (no
/// `debug`), and it is kept only in this closure.
const GC_GUARD: &str = r#"
local raw, rawget, type, error = setmetatable, rawget, type, error
setmetatable = function(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
    error("setmetatable: a policy cannot have __gc finalizers (they would run outside its "
      .. "instruction, time and memory limits); remove the __gc field: a policy has nothing to release", 2)
  end
  return raw(t, mt)
end
"#;

/// Wraps the pattern functions of `string` (and so of every string value's
/// methods) with a cost estimate: subject length to the power of the
/// pattern's quantifiers, which bounds how far Lua's matcher can backtrack.
const PATTERN_GUARD: &str = r#"
local LIMIT = 3e7
local function quantifiers(p)
  local n, i = 0, 1
  while i <= #p do
    local c = p:sub(i, i)
    if c == "%" then
      if p:sub(i + 1, i + 1) == "b" then n = n + 1 end
      i = i + 1
    elseif c == "*" or c == "+" or c == "-" or c == "?" then n = n + 1 end
    i = i + 1
  end
  -- An unanchored search retries at every start position.
  if p:sub(1, 1) ~= "^" then n = n + 1 end
  return n
end
for _, name in ipairs{"find", "match", "gmatch", "gsub"} do
  local raw = string[name]
  string[name] = function(s, p, a, plain, ...)
    if type(s) == "string" and type(p) == "string" and not (name == "find" and plain) then
      local q = quantifiers(p)
      if (#s) ^ q > LIMIT then
        error(("string.%s: the pattern %q on a %d-byte string could backtrack for too long in a policy; "
          .. "use plain find or fewer quantifiers"):format(name, p, #s), 2)
      end
    end
    return raw(s, p, a, plain, ...)
  end
end
"#;

type Parsed = (Vec<Rule>, Option<Function>, Option<Function>, Decision);

fn parse_policy(table: &Table, vars: &Vars) -> Result<Parsed, String> {
    for pair in table.clone().pairs::<LuaValue, LuaValue>() {
        let (key, _) = pair.map_err(|e| e.to_string())?;
        let name = match &key {
            LuaValue::String(s) => s.to_string_lossy(),
            _ => String::new(),
        };
        let known = matches!(
            name.as_str(),
            "rules"
                | "decide"
                | "route"
                | "containers"
                | "providers"
                | "lsp"
                | "test"
                | "explore"
                | "otherwise"
                | "limits"
                | "askTimeoutMs"
        );
        if !known {
            return Err(format!(
                "unknown key {}; a policy returns {{rules = {{...}}, decide = fn?, route = fn?, containers = {{NAME = {{image = ...}}}}?, providers = {{NAME = {{api = ..., url = ...}}}}?, test = {{command = ...}}?, lsp = {{NAME = {{command = {{...}}, extensions = {{...}}}}}}?, explore = {{provider = ..., model = ...}}?, limits = {{memoryMb = ..., pids = ..., cpuSeconds = ..., fileSizeMb = ...}}?, askTimeoutMs = N?, otherwise = \"ask\"|\"deny\"}}",
                key.to_string().unwrap_or_else(|_| key.type_name().to_string())
            ));
        }
    }
    let rules = match table.get::<LuaValue>("rules").map_err(|e| e.to_string())? {
        LuaValue::Nil => Vec::new(),
        LuaValue::Table(t) => parse_rules(&t, vars)?,
        other => {
            return Err(format!(
                "`rules` is {}; it is a list of p.allow/p.deny/p.ask rules",
                a(other.type_name())
            ))
        }
    };
    let hook = |key: &str| match table.get::<LuaValue>(key) {
        Ok(LuaValue::Nil) => Ok(None),
        Ok(LuaValue::Function(f)) => Ok(Some(f)),
        Ok(other) => Err(format!(
            "`{key}` is {}; it is a function(req)",
            a(other.type_name())
        )),
        Err(e) => Err(e.to_string()),
    };
    let otherwise = match table
        .get::<Option<String>>("otherwise")
        .map_err(|e| e.to_string())?
    {
        None => Decision::Ask,
        Some(s) if s == "ask" => Decision::Ask,
        Some(s) if s == "deny" => Decision::Deny,
        Some(s) => {
            return Err(format!(
                "`otherwise` is {s:?}; it is \"ask\" (the default) or \"deny\""
            ))
        }
    };
    Ok((rules, hook("decide")?, hook("route")?, otherwise))
}

/// A table of named declarations (`containers = {NAME = {...}}`,
/// `providers = {NAME = {...}}`), as JSON for the layer that knows what a
/// declaration means; `example` shows the shape in messages.
fn parse_declarations(
    lua: &Lua,
    table: &Table,
    key: &str,
    example: &str,
) -> Result<BTreeMap<String, Value>, String> {
    let list = match table.get::<LuaValue>(key).map_err(|e| e.to_string())? {
        LuaValue::Nil => return Ok(BTreeMap::new()),
        LuaValue::Table(t) => t,
        other => {
            return Err(format!(
                "`{key}` is {}; it is a table of declarations, {example}",
                a(other.type_name())
            ))
        }
    };
    let mut out = BTreeMap::new();
    for pair in list.pairs::<LuaValue, LuaValue>() {
        let (name, value) = pair.map_err(|e| e.to_string())?;
        let LuaValue::String(name) = name else {
            return Err(format!("`{key}` is keyed by name: {example}"));
        };
        let name = name.to_string_lossy();
        if !matches!(value, LuaValue::Table(_)) {
            return Err(format!(
                "{key}.{name} is {}; it is a table: {example}",
                a(value.type_name())
            ));
        }
        let json: Value = lua
            .from_value(value)
            .map_err(|e| format!("{key}.{name}: {e}"))?;
        out.insert(name, json);
    }
    Ok(out)
}

/// A table a flow's layer reads (`explore`), as JSON; `example` shows
/// its shape in messages.
fn parse_table(
    lua: &Lua,
    table: &Table,
    key: &str,
    example: &str,
) -> Result<Option<Value>, String> {
    match table.get::<LuaValue>(key).map_err(|e| e.to_string())? {
        LuaValue::Nil => Ok(None),
        t @ LuaValue::Table(_) => lua
            .from_value(t)
            .map(Some)
            .map_err(|e| format!("{key}: {e}")),
        other => Err(format!(
            "`{key}` is {}; it is a table: {example}",
            a(other.type_name())
        )),
    }
}

/// The `limits` table: each key a limit's name, each value a whole number
/// no smaller than that limit's floor.
fn parse_limits(table: &Table) -> Result<ResourceLimits, String> {
    let example = "limits = {memoryMb = 8192, pids = 2048, cpuSeconds = 7200, fileSizeMb = 4096}";
    let list = match table.get::<LuaValue>("limits").map_err(|e| e.to_string())? {
        LuaValue::Nil => return Ok(ResourceLimits::default()),
        LuaValue::Table(t) => t,
        other => {
            return Err(format!(
                "`limits` is {}; it is a table of resource limits for each command: {example}",
                a(other.type_name())
            ))
        }
    };
    let mut out = ResourceLimits::default();
    for pair in list.pairs::<LuaValue, LuaValue>() {
        let (key, value) = pair.map_err(|e| e.to_string())?;
        let name = match &key {
            LuaValue::String(s) => s.to_string_lossy(),
            other => other
                .to_string()
                .unwrap_or_else(|_| other.type_name().into()),
        };
        let kind = Kind::parse(&name).ok_or_else(|| {
            format!("limits has an unknown key {name:?}; the keys are memoryMb, pids, cpuSeconds and fileSizeMb: {example}")
        })?;
        let whole = match value {
            LuaValue::Integer(n) => Some(n),
            LuaValue::Number(f) if f.fract() == 0.0 && f.abs() < 9e15 => Some(f as i64),
            _ => None,
        };
        match whole {
            Some(n) if n >= kind.floor() as i64 => out.set(kind, n as u64),
            _ => {
                return Err(format!(
                    "limits.{name} is {}; it is a whole number of {}, at least {} (leave it out for no limit)",
                    value.to_string().unwrap_or_else(|_| value.type_name().into()),
                    kind.unit(),
                    kind.floor()
                ))
            }
        }
    }
    Ok(out)
}

/// `askTimeoutMs`: a whole number of milliseconds, at least 1.
fn parse_ask_timeout(table: &Table) -> Result<Option<std::time::Duration>, String> {
    match table
        .get::<LuaValue>("askTimeoutMs")
        .map_err(|e| e.to_string())?
    {
        LuaValue::Nil => Ok(None),
        LuaValue::Integer(n) if n >= 1 => Ok(Some(std::time::Duration::from_millis(n as u64))),
        LuaValue::Number(n) if n >= 1.0 && n.fract() == 0.0 && n < 1e15 => {
            Ok(Some(std::time::Duration::from_millis(n as u64)))
        }
        other => {
            Err(format!(
            "askTimeoutMs is {}; it is how long an ask waits for its answer, a whole number of \
             milliseconds, at least 1 (leave it out for one hour)",
            other.to_string().unwrap_or_else(|_| other.type_name().into())
        ))
        }
    }
}

/// The `test` table, as JSON for the test flow (which knows what its
/// fields mean), and its `judge` when that is a function.
fn parse_test(lua: &Lua, table: &Table) -> Result<(Option<Value>, Option<Function>), String> {
    let example = "test = {command = \"pytest -q\", baseRef = \"main\"}";
    let test = match table.get::<LuaValue>("test").map_err(|e| e.to_string())? {
        LuaValue::Nil => return Ok((None, None)),
        LuaValue::Table(t) => t,
        other => {
            return Err(format!(
                "`test` is {}; it declares the test flow's runner: {example}",
                a(other.type_name())
            ))
        }
    };
    // The function stays in this state; the JSON names where it is.
    let copy = lua.create_table().map_err(|e| e.to_string())?;
    let mut judge = None;
    for pair in test.pairs::<LuaValue, LuaValue>() {
        let (key, value) = pair.map_err(|e| e.to_string())?;
        match (&key, value) {
            (LuaValue::String(k), LuaValue::Function(f)) if k.to_string_lossy() == "judge" => {
                let marker = lua.create_table().map_err(|e| e.to_string())?;
                marker
                    .set("lua", where_defined(&f))
                    .map_err(|e| e.to_string())?;
                copy.set(key.clone(), marker).map_err(|e| e.to_string())?;
                judge = Some(f);
            }
            (_, LuaValue::Function(f)) => {
                return Err(format!(
                    "test.{} is a function (at {}); only `judge` may be one",
                    key.to_string().unwrap_or_default(),
                    where_defined(&f)
                ))
            }
            (_, value) => copy.set(key, value).map_err(|e| e.to_string())?,
        }
    }
    let json: Value = lua
        .from_value(LuaValue::Table(copy))
        .map_err(|e| format!("test: {e}"))?;
    Ok((Some(json), judge))
}

/// A container name the engines accept and that reads as one word, never
/// as an option of theirs: letters, digits, `_`, `.` and `-`, starting with
/// a letter or digit.
pub fn container_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

/// Reads what `route` returned (see [`Policy::route`]).
fn parse_placement(value: LuaValue) -> Result<Option<Placement>, String> {
    match value {
        LuaValue::Nil => Ok(None),
        LuaValue::Boolean(false) => Ok(Some(Placement::Host)),
        LuaValue::String(s) => {
            let name = s.to_str().map_err(|e| e.to_string())?.to_string();
            if !container_name(&name) {
                return Err(format!("{name:?}, which is not a container name (letters, digits, '_', '.', '-', starting with a letter or digit)"));
            }
            Ok(Some(Placement::Container(name)))
        }
        LuaValue::Table(t) => match t.get::<LuaValue>("deny").map_err(|e| e.to_string())? {
            LuaValue::String(why) => Ok(Some(Placement::Refused(why.to_string_lossy()))),
            _ => Err("a table without a string `deny`".into()),
        },
        other => Err(a(other.type_name())),
    }
}

fn parse_rules(list: &Table, vars: &Vars) -> Result<Vec<Rule>, String> {
    // Every key must be 1..n: a nil hole or a named entry would silently
    // drop the rules after it.
    let mut keys = Vec::new();
    for pair in list.clone().pairs::<LuaValue, LuaValue>() {
        let (key, _) = pair.map_err(|e| e.to_string())?;
        match key {
            LuaValue::Integer(i) if i >= 1 => keys.push(i),
            other => {
                return Err(format!(
                    "`rules` has the key {}; it is a plain list of p.allow/p.deny/p.ask rules",
                    other
                        .to_string()
                        .unwrap_or_else(|_| other.type_name().to_string())
                ))
            }
        }
    }
    keys.sort_unstable();
    if let Some(hole) = keys
        .iter()
        .zip(1..)
        .find(|(k, i)| **k != *i)
        .map(|(_, i)| i)
    {
        return Err(format!(
            "rules[{hole}] is nil, so the rules after it would be lost; remove the nil (or the condition that made it)"
        ));
    }
    let mut rules = Vec::new();
    for (i, item) in list.clone().sequence_values::<LuaValue>().enumerate() {
        let at = format!("rules[{}]", i + 1);
        let item = item.map_err(|e| format!("{at}: {e}"))?;
        match group(&item) {
            Some(members) => {
                for (j, member) in members.sequence_values::<LuaValue>().enumerate() {
                    let at = format!("{at}[{}]", j + 1);
                    let member = member.map_err(|e| format!("{at}: {e}"))?;
                    rules.push(parse_rule(member, at, vars)?);
                }
            }
            None => rules.push(parse_rule(item, at, vars)?),
        }
    }
    Ok(rules)
}

/// A group of rules written as one item of `rules` (a plain list of
/// rules, such as `p.programs`): its members, or `None` for a single rule.
fn group(item: &LuaValue) -> Option<Table> {
    let LuaValue::Table(t) = item else {
        return None;
    };
    let single = t.contains_key("effect").unwrap_or(true) || t.raw_len() == 0;
    (!single).then(|| t.clone())
}

fn parse_rule(item: LuaValue, at: String, vars: &Vars) -> Result<Rule, String> {
    let bad = |what: String| format!("{at}: {what}");
    let LuaValue::Table(t) = item else {
        return Err(bad(format!(
            "is {}; write rules with p.allow \"...\", p.deny \"...\" or p.ask \"...\"",
            a(item.type_name())
        )));
    };
    let effect: Option<String> = t.get("effect").map_err(|e| bad(e.to_string()))?;
    let decision = effect.as_deref().and_then(Decision::parse).ok_or_else(|| {
        bad("has no effect allow/deny/ask; write it with p.allow, p.deny or p.ask".into())
    })?;
    let text: String = match t.get::<LuaValue>("pattern") {
        Ok(LuaValue::String(s)) => s.to_string_lossy(),
        _ => {
            return Err(bad(
                "has no pattern string; write it as p.allow \"fs:read:${workspace}/**\"".into(),
            ))
        }
    };
    let pattern = Pattern::parse(&text, vars).map_err(|e| bad(e.to_string()))?;
    let reason: Option<String> = t.get("reason").map_err(|e| bad(format!("reason: {e}")))?;
    let except = parse_except(&t, decision, &pattern, vars).map_err(bad)?;
    let source: Option<String> = t.get("source").map_err(|e| bad(format!("source: {e}")))?;
    Ok(Rule {
        decision,
        pattern,
        reason,
        except,
        at,
        source,
    })
}

/// A rule's `except` list: patterns of the deny's own actions, each
/// naming something the deny names. Only a deny has one: an exception to
/// an allow or an ask would be a deny or an ask written backwards.
fn parse_except(
    t: &Table,
    decision: Decision,
    deny: &Pattern,
    vars: &Vars,
) -> Result<Vec<Pattern>, String> {
    let list = match t.get::<LuaValue>("except").map_err(|e| e.to_string())? {
        LuaValue::Nil => return Ok(Vec::new()),
        LuaValue::Table(list) => list,
        other => {
            return Err(format!(
                "except is {}; it is a list of patterns: p.deny(\"{}\", \"why\", {{except = {{\"...\"}}}})",
                a(other.type_name()),
                deny.as_str()
            ))
        }
    };
    if decision != Decision::Deny {
        return Err(format!(
            "{decision} \"{}\" has an except, which only a deny rule may have (it carves capabilities out of the deny); \
             narrow the {decision} rule's pattern instead, or add a deny for what it should leave out",
            deny.as_str()
        ));
    }
    let mut out = Vec::new();
    for (i, item) in list.sequence_values::<LuaValue>().enumerate() {
        let at = format!("except[{}]", i + 1);
        let text = match item.map_err(|e| format!("{at}: {e}"))? {
            LuaValue::String(s) => s.to_string_lossy(),
            other => {
                return Err(format!(
                    "{at} is {}; write a pattern string such as \"fs:write:${{workspace}}/src/generated/**\"",
                    a(other.type_name())
                ))
            }
        };
        let pattern = Pattern::parse(&text, vars).map_err(|e| format!("{at}: {e}"))?;
        if let Some(action) = Action::ALL
            .iter()
            .find(|&&act| pattern.selects(act) && !deny.selects(act))
        {
            return Err(format!(
                "{at} \"{text}\" selects {}, which the deny \"{}\" does not: an except only takes capabilities out of its deny; \
                 write it with the deny's action{}",
                action.as_str(),
                deny.as_str(),
                deny_actions(deny)
            ));
        }
        if pattern.covers(deny) {
            return Err(format!(
                "{at} \"{text}\" names everything the deny \"{}\" names, so the deny would deny nothing; \
                 narrow the except to the part to leave out, or drop the deny",
                deny.as_str()
            ));
        }
        if let Some(path) = outside(&pattern, deny) {
            return Err(format!(
                "{at} \"{text}\" names {path}, which the deny \"{}\" does not name, so it takes nothing out of it; \
                 write a path inside what the deny names",
                deny.as_str()
            ));
        }
        out.push(pattern);
    }
    Ok(out)
}

/// The deny's actions, for a message: ` (fs:write)`.
fn deny_actions(deny: &Pattern) -> String {
    let names: Vec<&str> = Action::ALL
        .iter()
        .filter(|&&act| deny.selects(act))
        .map(|act| act.as_str())
        .collect();
    format!(" ({})", names.join(", "))
}

/// A path an fs `except` names (itself, or the tree it opens) that its deny
/// does not, when its shape tells: an except that lies wholly outside its
/// deny is a mistake (a typo in the path), never an exception.
fn outside(except: &Pattern, deny: &Pattern) -> Option<String> {
    use super::pattern::FsShape;
    let (probe, shown) = match except.fs_shape()? {
        FsShape::Exact(path) => (PathBuf::from(path), path.to_string()),
        FsShape::Tree(dir) => (
            Path::new(dir).join(".sluice-except-probe"),
            format!("{dir}/**"),
        ),
        FsShape::Any | FsShape::Other => return None,
    };
    let named = [Action::FsRead, Action::FsWrite]
        .into_iter()
        .filter(|&act| except.selects(act))
        .any(|act| deny.matches(&Capability::fs(act, &probe)));
    (!named).then_some(shown)
}

/// Characters of one input string a hook sees; longer ones are cut, so a
/// 40 MB `write` does not fill the policy's memory just to be judged.
const HOOK_STRING_CHARS: usize = 64 * 1024;

/// `input` with long strings cut to [`HOOK_STRING_CHARS`] and a note.
fn for_hook(input: &Value) -> Value {
    match input {
        Value::String(s) if s.len() > HOOK_STRING_CHARS => {
            let cut: String = s.chars().take(HOOK_STRING_CHARS).collect();
            Value::String(format!("{cut}… ({} bytes in all)", s.len()))
        }
        Value::Array(items) => Value::Array(items.iter().map(for_hook).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), for_hook(v))).collect())
        }
        other => other.clone(),
    }
}

/// `req` as the hooks see it: a fresh table, so a hook cannot change the
/// call; `workspace` is the run's (what `${workspace}` stands for).
fn request_table(lua: &Lua, req: &Request, workspace: &Path) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("workspace", workspace.display().to_string())?;
    t.set("capability", req.capability.to_string())?;
    t.set("action", req.capability.action.as_str())?;
    t.set("resource", req.capability.resource.as_str())?;
    t.set("flow", req.flow)?;
    t.set("tier", req.tier.as_str())?;
    t.set("input", lua.to_value(&for_hook(req.input))?)?;
    let run = lua.create_table()?;
    run.set("id", req.run_id)?;
    run.set("script", req.script)?;
    t.set("run", run)?;
    Ok(t)
}

/// `1 s`, `250 ms`: a limit as a person reads it.
fn span(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

/// "a table", "an integer": a Lua type with its article.
fn a(type_name: &str) -> String {
    let article = if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {type_name}")
}

fn parse_opinion(value: LuaValue) -> Result<Option<(Decision, Option<String>)>, String> {
    let expected =
        "return \"allow\", \"deny\", \"ask\", nil (no opinion) or {decision = ..., reason = ...}";
    match value {
        LuaValue::Nil => Ok(None),
        LuaValue::String(s) => {
            let text = s.to_string_lossy();
            Decision::parse(&text)
                .map(|d| Some((d, None)))
                .ok_or_else(|| format!("decide returned {text:?}; {expected}"))
        }
        LuaValue::Table(t) => {
            let decision: Option<String> = t.get("decision").map_err(|e| e.to_string())?;
            let reason: Option<String> = t.get("reason").map_err(|e| e.to_string())?;
            match decision.as_deref().and_then(Decision::parse) {
                Some(d) => Ok(Some((d, reason))),
                None => Err(format!(
                    "decide returned a table whose decision is {}; {expected}",
                    decision.map_or("missing".to_string(), |d| format!("{d:?}"))
                )),
            }
        }
        other => Err(format!(
            "decide returned {}; {expected}",
            a(other.type_name())
        )),
    }
}

/// `file:line` where a hook is defined.
fn where_defined(f: &Function) -> String {
    let info = f.info();
    // `source` is "@path" in full; `short_src` cuts long paths.
    let src = match info.source.as_deref().and_then(|s| s.strip_prefix('@')) {
        Some(path) => path.to_string(),
        None => info.short_src.unwrap_or_else(|| "?".into()),
    };
    match info.line_defined {
        Some(line) => format!("{src}:{line}"),
        None => src,
    }
}

/// A Lua error's first line, without mlua's prefixes.
fn lua_error(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => lua_error(cause),
        mlua::Error::MemoryError(_) => {
            format!("ran past its memory limit of {} MiB", MEMORY_LIMIT >> 20)
        }
        mlua::Error::RuntimeError(m) | mlua::Error::SyntaxError { message: m, .. } => {
            m.lines().next().unwrap_or_default().to_string()
        }
        other => other
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
    }
}

#[cfg(test)]
mod limits_tests {
    use super::*;

    fn load(text: &'static str) -> Policy {
        let source = Source::Embedded {
            name: "limits.lua",
            text,
        };
        Policy::load(source, Vars::new(PathBuf::from("/w")))
    }

    #[test]
    fn a_policys_limits_are_read_and_absent_ones_are_none() {
        let p = load("return {limits = {memoryMb = 2048, pids = 64.0}}");
        assert_eq!(p.load_error(), None);
        let l = p.limits();
        assert_eq!(l.get(Kind::MemoryMb), Some(2048));
        assert_eq!(l.get(Kind::Pids), Some(64));
        assert_eq!(l.get(Kind::CpuSeconds), None);
        assert!(load("return {rules = {}}").limits().is_empty());
    }

    #[test]
    fn a_bad_limit_fails_the_policy_naming_the_field_and_its_range() {
        for (text, words) in [
            ("return {limits = {memMb = 1}}", "unknown key \"memMb\""),
            ("return {limits = {pids = 2}}", "limits.pids is 2; it is a whole number of processes and threads of the command at once, at least 8"),
            ("return {limits = {cpuSeconds = 1.5}}", "limits.cpuSeconds is 1.5"),
            ("return {limits = {fileSizeMb = '10'}}", "limits.fileSizeMb is 10"),
            ("return {limits = 4096}", "`limits` is an integer; it is a table"),
        ] {
            let p = load(text);
            let why = p.load_error().unwrap_or_else(|| panic!("{text} loaded"));
            assert!(why.contains(words), "{text}: {why}");
            assert!(p.limits().is_empty());
        }
    }

    #[test]
    fn ask_timeout_ms_is_a_whole_positive_number_of_milliseconds_or_absent() {
        use std::time::Duration;
        assert_eq!(
            load("return {askTimeoutMs = 2500}").ask_timeout(),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(
            load("return {askTimeoutMs = 60000.0}").ask_timeout(),
            Some(Duration::from_secs(60))
        );
        assert_eq!(load("return {rules = {}}").ask_timeout(), None);
        for bad in ["0", "-5", "1.5", "'10'", "{}"] {
            let p = load(Box::leak(
                format!("return {{askTimeoutMs = {bad}}}").into_boxed_str(),
            ));
            let why = p.load_error().unwrap_or_else(|| panic!("{bad} loaded"));
            assert!(
                why.contains("askTimeoutMs is") && why.contains("at least 1"),
                "{bad}: {why}"
            );
        }
    }

    #[test]
    fn the_shipped_default_and_ci_policies_bound_commands_and_the_others_do_not() {
        let vars = Vars::new(PathBuf::from("/w"));
        let limits = |name| Policy::load(shipped(name).unwrap(), vars.clone()).limits();
        for name in ["default", "ci"] {
            let l = limits(name);
            assert_eq!(
                l.iter().collect::<Vec<_>>(),
                [
                    (Kind::MemoryMb, 8192),
                    (Kind::Pids, 2048),
                    (Kind::CpuSeconds, 7200),
                    (Kind::FileSizeMb, 4096)
                ],
                "{name}"
            );
        }
        assert!(limits("readonly").is_empty());
        assert!(limits("unconfined").is_empty());
    }
}
