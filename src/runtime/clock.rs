//! The non-deterministic inputs a script can see, read through the audit
//! session so a replay sees the same values: `sluice.now()`, `os.time()`,
//! `os.date()` (of now), `os.clock()`, and `math.random`'s seed.
//!
//! Each reading is recorded per task in order; a replay answers with the
//! recorded value. `os.time(t)` and `os.date(fmt, t)` with an explicit time
//! are pure and pass straight through.

use crate::luastate::current_task;
use crate::pipeline::Core;
use mlua::{Function, Lua, Table};
use std::rc::Rc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Replaces the clock functions of `os` and sets `sluice.now`; seeds
/// `math.random` with `seed`.
pub fn install(lua: &Lua, core: Rc<Core>, sluice: &Table, seed: i64) -> mlua::Result<()> {
    let read = lua.create_function(move |lua, kind: String| {
        let task = current_task(lua)?;
        let value = match kind.as_str() {
            "ms" => core
                .audit()
                .reading(&task, "ms", || epoch().as_millis() as f64),
            "time" => core
                .audit()
                .reading(&task, "time", || epoch().as_secs() as f64),
            "cpu" => core.audit().reading(&task, "cpu", cpu_seconds),
            "seed" => core
                .audit()
                .reading(&task, "seed", || (super::fresh_seed() >> 11) as f64),
            other => return Err(mlua::Error::runtime(format!("unknown clock {other}"))),
        };
        Ok(value)
    })?;
    let now: Function = lua
        .load(CLOCK)
        .set_name("=sluice.clock")
        .call((read, seed))?;
    sluice.set("now", now)
}

/// The Lua side: wrappers over the recorded reading `read(kind)`.
const CLOCK: &str = r##"
local read, seed = ...
local raw_time, raw_date, raw_seed = os.time, os.date, math.randomseed
local floor = math.floor
os.time = function(t)
  if t ~= nil then return raw_time(t) end
  return floor(read("time"))
end
os.date = function(fmt, t)
  if t == nil then t = floor(read("time")) end
  return raw_date(fmt or "%c", t)
end
os.clock = function() return read("cpu") end
math.randomseed = function(...)
  if select("#", ...) == 0 then return raw_seed(floor(read("seed"))) end
  return raw_seed(...)
end
raw_seed(seed)
return function() return floor(read("ms")) end
"##;

fn epoch() -> std::time::Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// The CPU time this process has used, as `os.clock` reports it.
fn cpu_seconds() -> f64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .map(|u| {
            let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            tv(u.user_time()) + tv(u.system_time())
        })
        .unwrap_or(0.0)
}
