//! The Lua host: the sandbox scripts run in, `require`, the `sluice` module's
//! helpers, and how script errors reach the person at the terminal.

mod common;

use common::{lua_json, run_lua, script_file, sluice_bin, workspace};
use serde_json::json;
use std::fs;
use std::process::Command;

#[test]
fn sandbox_removes_everything_that_touches_the_world() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"emit({
          io = type(io), debug = type(debug), dofile = type(dofile), loadfile = type(loadfile),
          package_loadlib = type(package.loadlib), package_cpath = type(package.cpath),
          string_dump = type(string.dump),
          os_execute = type(os.execute), os_remove = type(os.remove), os_getenv = type(os.getenv),
          os_exit = type(os.exit), os_rename = type(os.rename), os_tmpname = type(os.tmpname),
          os_time = type(os.time()), os_clock = type(os.clock()), os_date = type(os.date("%Y")),
        })"#,
    );
    assert_eq!(
        out[0],
        json!({
          "io": "nil", "debug": "nil", "dofile": "nil", "loadfile": "nil",
          "package_loadlib": "nil", "package_cpath": "nil", "string_dump": "nil",
          "os_execute": "nil", "os_remove": "nil", "os_getenv": "nil",
          "os_exit": "nil", "os_rename": "nil", "os_tmpname": "nil",
          "os_time": "number", "os_clock": "number", "os_date": "string",
        })
    );
}

#[test]
fn load_accepts_text_and_refuses_bytecode() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"local f = load("return 6 * 7")
        local bin, err = load("\27Lua\84\0\25\147\13\10\26\10", "blob", "b")
        emit({text = f(), binary = bin == nil, err = err})"#,
    );
    assert_eq!(out[0]["text"], 42);
    assert_eq!(out[0]["binary"], true);
    assert_eq!(
        out[0]["err"],
        "attempt to load a binary chunk (mode is 't')"
    );
}

#[test]
fn require_loads_modules_from_the_script_folder_once() {
    let ws = workspace();
    let script = script_file(
        ws.path(),
        r#"local a = require("helpers")
        local b = require("helpers")
        local t = require("lib.text")
        local p = require("pkg")
        print(a.greet("ann"), a == b, t.upper("x"), p.name, package.loaded.helpers == a)"#,
    );
    let dir = script.parent().unwrap();
    fs::write(
        dir.join("helpers.lua"),
        "loads = (loads or 0) + 1\nreturn {greet = function(n) return 'hi ' .. n .. ' ' .. loads end}",
    )
    .unwrap();
    fs::create_dir_all(dir.join("lib")).unwrap();
    fs::write(dir.join("lib/text.lua"), "return {upper = string.upper}").unwrap();
    fs::create_dir_all(dir.join("pkg")).unwrap();
    fs::write(dir.join("pkg/init.lua"), "return {name = 'pkg-init'}").unwrap();
    let out = Command::new(sluice_bin())
        .args(["run"])
        .arg(&script)
        .arg("--workspace")
        .arg(ws.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hi ann 1\ttrue\tX\tpkg-init\ttrue\n"
    );
}

#[test]
fn require_finds_bundled_modules_and_names_where_it_looked() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"local retry = require("sluice.retry")
        local ok, err = pcall(require, "no_such_module")
        local bad_ok, bad = pcall(require, "../etc/passwd")
        emit({retry = type(retry.busy), sluice = require("sluice") == sluice,
              ok = ok, err = tostring(err), bad_ok = bad_ok, bad = tostring(bad)})"#,
    );
    assert_eq!(out[0]["retry"], "function");
    assert_eq!(out[0]["sluice"], true);
    assert_eq!(out[0]["ok"], false);
    let err = out[0]["err"].as_str().unwrap();
    assert!(
        err.contains("module \"no_such_module\" not found; looked in ")
            && err.contains("no_such_module.lua"),
        "{err}"
    );
    assert_eq!(out[0]["bad_ok"], false);
    assert!(out[0]["bad"]
        .as_str()
        .unwrap()
        .contains("is not a module name"));
}

/// A file beside a script named like a built-in module (an agent may write
/// the script's folder when it is the workspace) is never loaded in its
/// place: `sluice.*` names are sluice's own. The control: the folder's own
/// modules load.
#[test]
fn a_file_named_like_a_built_in_module_beside_a_script_is_never_loaded() {
    let ws = workspace();
    for name in [
        "sluice/agent.lua",
        "sluice/retry.lua",
        "sluice/policy.lua",
        "sluice/extra.lua",
    ] {
        let path = ws.file(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, "return {shadow = true}").unwrap();
    }
    fs::write(ws.file("mine.lua"), "return {mine = true}").unwrap();
    let script = ws.file("agent-run.lua");
    fs::write(
        &script,
        r#"local agent, retry, pol = require("sluice.agent"), require("sluice.retry"), require("sluice.policy")
        local ok, err = pcall(require, "sluice.extra")
        print(type(agent.run), agent.shadow, type(retry.busy), retry.shadow, type(pol.allow), pol.shadow,
          ok, tostring(err):find("is not one of sluice's bundled modules", 1, true) ~= nil, require("mine").mine)"#,
    )
    .unwrap();
    let out = Command::new(sluice_bin())
        .args(["run"])
        .arg(&script)
        .arg("--workspace")
        .arg(ws.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "function\tnil\tfunction\tnil\tfunction\tnil\tfalse\ttrue\ttrue\n"
    );
}

#[test]
fn a_script_error_exits_1_with_file_line_and_traceback() {
    let ws = workspace();
    let run = run_lua(
        ws.path(),
        "local function inner()\n  error('boom')\nend\ninner()\n",
        &[],
    );
    assert_eq!(run.code, 1);
    let first = run.stderr.lines().next().unwrap();
    assert!(
        first.starts_with("sluice: ") && first.ends_with(".lua:2: boom"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("stack traceback:"), "{}", run.stderr);
    assert!(
        run.stderr.contains(".lua:4: in main chunk"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("'poll'"),
        "async glue leaks into the traceback: {}",
        run.stderr
    );
}

#[test]
fn a_raised_flow_error_prints_code_and_message() {
    let ws = workspace();
    let run = run_lua(
        ws.path(),
        "assert(sluice.read{path = 'missing.txt'})\n",
        &[],
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.starts_with("sluice: not_found: ")
            && run.stderr.contains("missing.txt does not exist"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_syntax_error_exits_1_naming_file_and_line() {
    let ws = workspace();
    let run = run_lua(ws.path(), "local x = 1\nlocal = 2\n", &[]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains(".lua:2:"), "{}", run.stderr);
}

#[test]
fn args_workspace_run_id_and_now() {
    let ws = workspace();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let run = run_lua(
        ws.path(),
        &format!(
            "{}emit({{args = sluice.args, ws = sluice.workspace, id = sluice.run_id, now = sluice.now()}})",
            common::EMIT
        ),
        &["one", "--two", "three four"],
    )
    .ok();
    let out: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(out["args"], json!(["one", "--two", "three four"]));
    assert_eq!(
        out["ws"],
        fs::canonicalize(ws.path()).unwrap().display().to_string()
    );
    assert!(!out["id"].as_str().unwrap().is_empty());
    let now = out["now"].as_i64().unwrap();
    assert!(now >= before && now < before + 60_000, "{now} vs {before}");
}

#[test]
fn call_reaches_any_flow_by_name_and_refuses_unknown_ones() {
    let ws = workspace();
    fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let out = lua_json(
        ws.path(),
        r#"local page = sluice.call("read", {path = "a.txt"})
        local none, err = sluice.call("teleport", {})
        emit({content = page.content, none = none == nil, code = err.code, field = err.field})"#,
    );
    assert_eq!(
        out[0],
        json!({"content": "alpha", "none": true, "code": "invalid_input", "field": "flow"})
    );
}

#[test]
fn errors_are_tables_whose_tostring_is_code_colon_message() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"local _, err = sluice.read{path = "nope.txt"}
        emit({s = tostring(err), code = err.code, msg = err.message, mt = getmetatable(err) ~= nil})"#,
    );
    let s = out[0]["s"].as_str().unwrap();
    assert_eq!(s, format!("not_found: {}", out[0]["msg"].as_str().unwrap()));
    assert_eq!(out[0]["code"], "not_found");
}

#[test]
fn a_non_table_input_raises() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"local ok, err = pcall(sluice.read, "a.txt")
        emit({ok = ok, err = tostring(err)})"#,
    );
    assert_eq!(out[0]["ok"], false);
    assert!(out[0]["err"]
        .as_str()
        .unwrap()
        .contains("sluice.read: expected a table of named fields, got string"));
}

#[test]
fn json_round_trips_and_reports_bad_text() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"local v = sluice.json.decode('{"a":[1,2,{"b":null}],"c":"d"}')
        local back = sluice.json.encode(v)
        local none, err = sluice.json.decode("{oops")
        emit({back = back, isnull = v.a[3].b == sluice.json.null, none = none == nil, code = err.code,
              pretty = sluice.json.encode({x = 1}, {pretty = true}), empty = sluice.json.encode({})})"#,
    );
    assert_eq!(out[0]["back"], r#"{"a":[1,2,{"b":null}],"c":"d"}"#);
    assert_eq!(out[0]["isnull"], true);
    assert_eq!(out[0]["none"], true);
    assert_eq!(out[0]["code"], "invalid_input");
    assert_eq!(out[0]["pretty"], "{\n  \"x\": 1\n}");
    assert_eq!(out[0]["empty"], "{}");
}

#[test]
fn retry_busy_returns_other_errors_at_once() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"local calls = 0
        local out, err = require("sluice.retry").busy(function()
          calls = calls + 1
          return sluice.read{path = "missing"}
        end, {attempts = 5, delayMs = 1})
        emit({calls = calls, code = err.code})"#,
    );
    assert_eq!(out[0], json!({"calls": 1, "code": "not_found"}));
}

#[test]
fn inputs_json_cannot_carry_are_invalid_input_naming_the_field() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"local function fail(input) local _, err = sluice.write(input); return {err.code, err.field} end
        emit({
          fail{path = "a.txt", content = "\xff\xfe"},
          fail{path = "a.txt", content = print},
          fail{path = "a.txt", content = {deep = {1, coroutine.create(print)}}},
          fail{"a.txt", content = "x"},
          fail{path = "a.txt", content = 0/0},
        })"#,
    );
    assert_eq!(
        out[0],
        json!([
            ["invalid_input", "content"],
            ["invalid_input", "content"],
            ["invalid_input", "content.deep[2]"],
            ["invalid_input", "input"],
            ["invalid_input", "content"],
        ])
    );
    assert!(!ws.path().join("a.txt").exists());
}

#[test]
fn coroutines_can_wait_on_flows_and_still_yield_their_own_values() {
    let ws = workspace();
    fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let out = lua_json(
        ws.path(),
        r#"local co = coroutine.create(function(a)
          sluice.sleep(5)
          local b = coroutine.yield(a + 1)
          local page = sluice.read{path = "a.txt"}
          sluice.sleep(1)
          return page.content, b
        end)
        local r1 = {coroutine.resume(co, 1)}
        local r2 = {coroutine.resume(co, "B")}
        local r3 = {coroutine.resume(co)}
        local nested = coroutine.wrap(function()
          return coroutine.wrap(function() sluice.sleep(1); return "deep" end)()
        end)()
        local ok, err = pcall(coroutine.wrap(function() sluice.sleep(1); error("oops", 0) end))
        emit({r1 = r1, r2 = r2, r3 = r3, nested = nested, ok = ok, err = err})"#,
    );
    assert_eq!(
        out[0],
        json!({
          "r1": [true, 2], "r2": [true, "alpha", "B"], "r3": [false, "cannot resume dead coroutine"],
          "nested": "deep", "ok": false, "err": "oops",
        })
    );
}

#[test]
fn load_without_an_environment_sees_the_globals() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"local f = load("y = 5; return y, type(print)")
        local a, b = f()
        local g = load("return x", "chunk", "t", {x = 7})
        emit({a, b, g()})"#,
    );
    assert_eq!(out[0], json!([5, "function", 7]));
}

#[test]
fn sleep_refuses_what_it_could_not_finish_and_names_the_cap() {
    let ws = workspace();
    let start = std::time::Instant::now();
    let out = lua_json(
        ws.path(),
        r#"local function try(ms)
          local ok, err = sluice.sleep(ms)
          if ok then return {ok = ok} end
          return {code = err.code, field = err.field, message = err.message}
        end
        emit({try(2^63), try(600001), try(-1), try(0/0), try(math.huge), try(-math.huge)})
        local t0 = sluice.now()
        emit({try(0), try(60), sluice.now() - t0 >= 60})
        local ok, err = pcall(sluice.sleep, "100")
        emit({ok, tostring(err)})"#,
    );
    let took = start.elapsed();
    let refused = |shown: &str| {
        json!({"code": "invalid_input", "field": "ms", "message": format!(
            "sluice.sleep: `ms` is {shown} ms; it is a number of milliseconds from 0 to 600000 (ten minutes); \
             to wait longer, sleep in a loop and check what you wait for between sleeps"
        )})
    };
    assert_eq!(
        out[0],
        json!([
            refused("9223372036854776000"),
            refused("600001"),
            refused("-1"),
            refused("NaN"),
            refused("inf"),
            refused("-inf"),
        ])
    );
    assert_eq!(out[1], json!([{"ok": true}, {"ok": true}, true]));
    // Not a number at all is a programming mistake, raised.
    assert_eq!(out[2][0], false);
    assert!(
        out[2][1]
            .as_str()
            .unwrap()
            .contains("sluice.sleep(ms): ms is a number of milliseconds, got string"),
        "{}",
        out[2]
    );
    assert!(took < std::time::Duration::from_secs(30), "took {took:?}");
}

/// A name the module does not hold raises where it is named, listing the
/// flows, instead of Lua's "attempt to call a nil value"; a bundled
/// module's name says how to require it, and the module's one optional
/// field is still nil when the host declared no runner.
#[test]
fn an_unknown_member_of_the_sluice_module_names_the_flows() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        "local ok, e = pcall(function() return sluice.nosuch{} end)\n\
         local ok2, e2 = pcall(function() return sluice.retry.busy end)\n\
         emit({ok = ok, e = e, ok2 = ok2, e2 = e2, runner = sluice.test_runner == nil})",
    );
    assert_eq!(out[0]["ok"], false);
    let e = out[0]["e"].as_str().unwrap();
    assert!(
        e.contains(":2: sluice.nosuch: no flow named nosuch; the flows are read, write, edit, apply_patch, ls, glob, grep, bash, shell_command, fetch, http_post, "),
        "{e}"
    );
    assert!(!e.contains("attempt to call a nil value"), "{e}");
    let e2 = out[0]["e2"].as_str().unwrap();
    assert!(
        e2.ends_with("; sluice.retry is a module: local retry = require(\"sluice.retry\")"),
        "{e2}"
    );
    assert_eq!(out[0]["runner"], true);
    // Outside a pcall, the run fails naming the script's line.
    let run = run_lua(ws.path(), "local x = 1\nsluice.raed{path = 'a.txt'}\n", &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(".lua:2: sluice.raed: no flow named raed; the flows are read, "),
        "{}",
        run.stderr
    );
}
