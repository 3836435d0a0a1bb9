//! A policy never fails open: a hook that raises, loops, runs out of memory
//! or returns something that is not a decision denies the call and names the
//! policy file, the line and the cause; a policy that does not load stops
//! `sluice run` before the script starts (exit 2). An edit of the policy file
//! takes effect between calls of a running workflow, and a broken edit
//! denies until it is fixed.

mod common;

use common::*;
use serde_json::{json, Value};
use std::fs;
use std::io::{BufRead, BufReader};
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Replaces a policy file in one step (write aside, rename), so a reader
/// never sees half of it.
fn replace(path: &str, text: &str) {
    let aside = format!("{path}.new");
    fs::write(&aside, text).unwrap();
    fs::rename(&aside, path).unwrap();
}

/// A policy allowing everything in the workspace, with `decide` as given
/// (its body on its own lines). Returns the text and decide's line.
fn with_decide(body: &str) -> (String, usize) {
    let text = format!(
        "local p = require(\"sluice.policy\")\nreturn {{\n  rules = {{ p.allow \"fs:*:${{workspace}}/**\" }},\n  decide = function(req)\n{body}\n  end,\n}}\n"
    );
    let line = line_of(&text, "decide = function");
    (text, line)
}

/// Runs one read of a.txt under a policy whose decide has `body`; returns
/// the error, the expected `by`, the policy path and how long the run took.
fn read_under(body: &str) -> (Value, String, String, Duration) {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    let (text, line) = with_decide(body);
    let pol = policy(&ws, "p.lua", &text);
    let start = Instant::now();
    // Bounded, so a hook that hangs sluice fails the test instead of
    // hanging it.
    let mut child = spawn_lua_with(
        ws.path(),
        &format!("{EMIT}{TRY}try(\"read\", {{path = \"a.txt\"}})"),
        &["--policy", &pol],
        &[],
    );
    let status = exit_within(&mut child, Duration::from_secs(60));
    let took = start.elapsed();
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert!(status.success(), "{status:?}: {stdout}");
    let mut out: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(out.len(), 1, "{out:?}");
    let e = out.remove(0);
    assert_eq!(
        e["capability"],
        format!("fs:read:{}", ws.file("a.txt").display())
    );
    (e, format!("decide hook at {pol}:{line}"), pol, took)
}

#[test]
fn a_decide_hook_that_raises_denies_naming_file_line_and_cause() {
    let (e, by, pol, _) = read_under("    local x = 1\n    error(\"the lookup table is gone\")");
    let reason = format!("the hook at {pol}:4 failed: {pol}:6: the lookup table is gone");
    assert_eq!(e, denied(e["capability"].as_str().unwrap(), &by, &reason));
}

#[test]
fn a_runaway_loop_in_decide_is_stopped_by_the_instruction_limit() {
    let (e, by, pol, took) = read_under("    while true do end");
    let reason = format!(
        "the hook at {pol}:4 failed: ran past its limit of 1000000 Lua instructions (a runaway loop?)"
    );
    assert_eq!(e, denied(e["capability"].as_str().unwrap(), &by, &reason));
    assert!(took < Duration::from_secs(10), "the run took {took:?}");
}

#[test]
fn a_huge_string_in_decide_is_stopped_by_the_memory_limit() {
    let (e, by, pol, _) = read_under("    local s = string.rep(\"x\", 1 << 30)\n    return nil");
    let reason = format!("the hook at {pol}:4 failed: ran past its memory limit of 32 MiB");
    assert_eq!(e, denied(e["capability"].as_str().unwrap(), &by, &reason));
}

#[test]
fn a_growing_table_in_decide_is_stopped_by_the_memory_limit() {
    let (e, by, pol, _) = read_under(
        "    local t = {}\n    for i = 1, 1000 do t[i] = string.rep(\"x\", 1 << 20) .. i end\n    return nil",
    );
    let reason = format!("the hook at {pol}:4 failed: ran past its memory limit of 32 MiB");
    assert_eq!(e, denied(e["capability"].as_str().unwrap(), &by, &reason));
}

#[test]
fn a_fault_denies_only_the_call_it_happened_in() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    let (text, line) = with_decide(
        "    calls = (calls or 0) + 1\n    if calls == 1 then while true do end end\n    if calls == 2 then local s = string.rep(\"x\", 1 << 30) end\n    return nil",
    );
    let pol = policy(&ws, "p.lua", &text);
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"for i = 1, 3 do try("read", {path = "a.txt"}) end"#,
    );
    let c = format!("fs:read:{}", ws.file("a.txt").display());
    let by = format!("decide hook at {pol}:{line}");
    assert_eq!(
        out,
        vec![
            denied(
                &c,
                &by,
                &format!("the hook at {pol}:{line} failed: ran past its limit of 1000000 Lua instructions (a runaway loop?)")
            ),
            denied(
                &c,
                &by,
                &format!("the hook at {pol}:{line} failed: ran past its memory limit of 32 MiB")
            ),
            json!({"ok": "read"}),
        ]
    );
}

#[test]
fn wrong_return_values_from_decide_deny_naming_the_line_where_decide_is_defined() {
    let ws = workspace();
    let files = ["num", "word", "nodecision", "baddecision", "bool", "fn"];
    for f in files {
        fs::write(ws.file(f), "x\n").unwrap();
    }
    let (text, line) = with_decide(
        r#"    local say = {
      num = 42,
      word = "maybe",
      nodecision = {reason = "forgot the decision"},
      baddecision = {decision = "perhaps"},
      bool = true,
      fn = function() end,
    }
    return say[req.input.path]"#,
    );
    let pol = policy(&ws, "p.lua", &text);
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"for _, f in ipairs{"num", "word", "nodecision", "baddecision", "bool", "fn"} do
             try("read", {path = f})
           end"#,
    );
    let by = format!("decide hook at {pol}:{line}");
    let at = format!("{pol}:{line}: decide returned ");
    let guide =
        "; return \"allow\", \"deny\", \"ask\", nil (no opinion) or {decision = ..., reason = ...}";
    // What each reason says between "decide returned " and the guidance.
    let said = [
        ("num", "an integer"),
        ("word", "\"maybe\""),
        ("nodecision", "a table whose decision is missing"),
        ("baddecision", "a table whose decision is "),
        ("bool", "a boolean"),
        ("fn", "a function"),
    ];
    assert_eq!(out.len(), files.len(), "{out:?}");
    for (e, (file, what)) in out.iter().zip(said) {
        let c = format!("fs:read:{}", ws.file(file).display());
        assert_eq!(e["code"], "permission_denied", "{file}: {e}");
        assert_eq!(e["capability"], c, "{file}");
        assert_eq!(e["by"], by, "{file}");
        let reason = e["reason"].as_str().unwrap();
        assert!(
            reason.starts_with(&format!("{at}{what}")) && reason.ends_with(guide),
            "{file}: {reason}"
        );
        assert_eq!(e["message"], format!("{c} is denied by {by}: {reason}."));
    }
    assert!(out[3]["reason"].as_str().unwrap().contains("perhaps"));
}

#[test]
fn sandbox_gaps_inside_decide_deny_the_call() {
    let ws = workspace();
    for f in ["io", "os", "req", "dofile"] {
        fs::write(ws.file(f), "x\n").unwrap();
    }
    let (text, line) = with_decide(
        r#"    local p = req.input.path
    if p == "io" then return io.open("/etc/passwd") and "allow" end
    if p == "os" then os.execute("true") return "allow" end
    if p == "req" then require("no_such_module") return "allow" end
    if p == "dofile" then dofile("/etc/passwd") return "allow" end"#,
    );
    let pol = policy(&ws, "p.lua", &text);
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"for _, f in ipairs{"io", "os", "req", "dofile"} do try("read", {path = f}) end"#,
    );
    let causes = [
        format!(
            "{pol}:{}: attempt to index a nil value (global 'io')",
            line + 2
        ),
        format!(
            "{pol}:{}: attempt to index a nil value (global 'os')",
            line + 3
        ),
        // A hook requires nothing that was not loaded with the policy.
        "require(\"no_such_module\") after the policy loaded: a policy's modules are loaded, and protected from the run, when the policy loads; require \"no_such_module\" at the top of the policy, outside its hooks".to_string(),
        format!(
            "{pol}:{}: attempt to call a nil value (global 'dofile')",
            line + 5
        ),
    ];
    let by = format!("decide hook at {pol}:{line}");
    let want: Vec<Value> = ["io", "os", "req", "dofile"]
        .iter()
        .zip(&causes)
        .map(|(f, cause)| {
            denied(
                &format!("fs:read:{}", ws.file(f).display()),
                &by,
                &format!("the hook at {pol}:{line} failed: {cause}"),
            )
        })
        .collect();
    assert_eq!(out, want);
}

/// Runs a script that would leave a mark under a policy that does not load.
fn run_with_bad_policy(text: &str) -> (Run, String, Workspace) {
    let ws = workspace();
    let pol = policy(&ws, "bad.lua", text);
    // Bounded, so a policy that hangs sluice while loading fails the test.
    let mut child = spawn_lua_with(
        ws.path(),
        r#"sluice.write{path = "ran.txt", content = "x"}"#,
        &["--policy", &pol],
        &[],
    );
    let status = exit_within(&mut child, Duration::from_secs(60));
    let mut stdout = String::new();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let run = Run {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
    };
    (run, pol, ws)
}

fn assert_load_error(text: &str, message: impl Fn(&str) -> String) {
    let (run, pol, ws) = run_with_bad_policy(text);
    assert_eq!(run.code, 2, "{text}\nstderr: {}", run.stderr);
    assert_eq!(run.stdout, "");
    assert_eq!(run.stderr, format!("sluice: {}\n", message(&pol)), "{text}");
    assert!(!ws.file("ran.txt").exists(), "the script must not run");
}

#[test]
fn a_policy_with_a_syntax_error_stops_the_run() {
    assert_load_error("return {\n  rules = {\n", |p| {
        format!("policy {p}: {p}:3: unexpected symbol near <eof>")
    });
    assert_load_error("return { rules = {} } }\n", |p| {
        format!("policy {p}: {p}:1: <eof> expected near '}}'")
    });
}

#[test]
fn a_policy_that_returns_no_table_stops_the_run() {
    assert_load_error("return \"allow\"\n", |p| {
        format!("policy {p} returned a string; a policy returns a table: {{rules = {{...}}, decide = fn?, route = fn?}}")
    });
    assert_load_error("local x = 1\n", |p| {
        format!("policy {p} returned a nil; a policy returns a table: {{rules = {{...}}, decide = fn?, route = fn?}}")
    });
}

#[test]
fn a_policy_with_an_unknown_key_or_a_bad_field_stops_the_run() {
    assert_load_error("return { rulez = {} }\n", |p| {
        format!("policy {p}: unknown key rulez; a policy returns {{rules = {{...}}, decide = fn?, route = fn?, containers = {{NAME = {{image = ...}}}}?, providers = {{NAME = {{api = ..., url = ...}}}}?, test = {{command = ...}}?, lsp = {{NAME = {{command = {{...}}, extensions = {{...}}}}}}?, explore = {{provider = ..., model = ...}}?, limits = {{memoryMb = ..., pids = ..., cpuSeconds = ..., fileSizeMb = ...}}?, askTimeoutMs = N?, otherwise = \"ask\"|\"deny\"}}")
    });
    assert_load_error("return { explore = \"local/m\" }\n", |p| {
        format!("policy {p}: `explore` is a string; it is a table: explore = {{provider = \"local\", model = \"qwen3-coder\", maxTurns = 10}}")
    });
    assert_load_error(
        "return { explore = { provider = \"local\", model = \"m\", turns = 3 } }\n",
        |p| {
            format!("policy {p}: explore.turns is not a field of explore; its fields are provider, model, maxTurns, maxOutputTokens: explore = {{provider = \"local\", model = \"qwen3-coder\", maxTurns = 10, maxOutputTokens = 16000}}")
        },
    );
    assert_load_error("return { otherwise = \"allow\" }\n", |p| {
        format!("policy {p}: `otherwise` is \"allow\"; it is \"ask\" (the default) or \"deny\"")
    });
    assert_load_error("return { rules = \"fs:*\" }\n", |p| {
        format!("policy {p}: `rules` is a string; it is a list of p.allow/p.deny/p.ask rules")
    });
    assert_load_error("return { route = \"box\" }\n", |p| {
        format!("policy {p}: `route` is a string; it is a function(req)")
    });
    assert_load_error("return { rules = { \"fs:read\" } }\n", |p| {
        format!("policy {p}: rules[1]: is a string; write rules with p.allow \"...\", p.deny \"...\" or p.ask \"...\"")
    });
    assert_load_error(
        "return { rules = { {effect = \"grant\", pattern = \"fs:read\"} } }\n",
        |p| {
            format!("policy {p}: rules[1]: has no effect allow/deny/ask; write it with p.allow, p.deny or p.ask")
        },
    );
}

#[test]
fn a_policy_with_a_bad_pattern_stops_the_run_naming_the_rule() {
    let head = "local p = require(\"sluice.policy\")\n";
    assert_load_error(
        &format!("{head}return {{ rules = {{ p.allow \"fs:read:${{workspace}}/**\", p.deny \"fs:exec\" }} }}\n"),
        |p| {
            format!("policy {p}: rules[2]: invalid pattern `fs:exec`: unknown action `fs:exec`; known actions: fs:read, fs:write, net:get, net:post, net:private, proc:spawn, model:call, cred:use; families: fs:*, net:*, proc:*, model:*, cred:*; or `*` for all")
        },
    );
    assert_load_error(
        &format!("{head}return {{ rules = {{ p.allow \"fs:read:src/**\" }} }}\n"),
        |p| {
            format!("policy {p}: rules[1]: invalid pattern `fs:read:src/**`: the fs resource `src/**` is relative, but fs capabilities name canonical absolute paths; write `${{workspace}}/src/**` for a path in the workspace, or `**/src/**` to match at any depth")
        },
    );
    assert_load_error(
        &format!("{head}return {{ rules = {{ p.allow \"fs:read:${{HOME}}/**\" }} }}\n"),
        |p| {
            format!("policy {p}: rules[1]: invalid pattern `fs:read:${{HOME}}/**`: unknown variable `${{HOME}}`: the only one is `${{workspace}}` (and a leading `~` in fs paths); write `$\\{{HOME\\}}` to match the text itself")
        },
    );
}

#[test]
fn a_policy_reaching_for_io_os_or_c_modules_fails_to_load() {
    assert_load_error("local f = io.open(\"/etc/passwd\")\nreturn {}\n", |p| {
        format!("policy {p}: {p}:1: attempt to index a nil value (global 'io')")
    });
    assert_load_error(
        "os.execute(\"touch /tmp/sluice-pwned\")\nreturn {}\n",
        |p| format!("policy {p}: {p}:1: attempt to index a nil value (global 'os')"),
    );
    assert_load_error("local x = os.getenv(\"HOME\")\nreturn {}\n", |p| {
        format!("policy {p}: {p}:1: attempt to index a nil value (global 'os')")
    });
    assert_load_error("local d = debug.getinfo(1)\nreturn {}\n", |p| {
        format!("policy {p}: {p}:1: attempt to index a nil value (global 'debug')")
    });
    let (run, pol, _ws) = run_with_bad_policy("local m = require(\"socket.core\")\nreturn {}\n");
    let dir = std::path::Path::new(&pol)
        .parent()
        .unwrap()
        .display()
        .to_string();
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        format!("sluice: policy {pol}: module \"socket.core\" not found; looked in {dir}/socket/core.lua and in sluice's bundled modules (a policy's module is NAME.lua in the policy's folder: lib.text is lib/text.lua)\n")
    );
    assert_load_error(
        "local f, err = load(\"\\27Lua\")\nassert(f, err)\nreturn {}\n",
        |p| format!("policy {p}: {p}:2: attempt to load a binary chunk (mode is 't')"),
    );
}

#[test]
fn a_policy_that_loops_or_bloats_while_loading_stops_the_run() {
    assert_load_error("while true do end\nreturn {}\n", |p| {
        format!("policy {p}: ran past its limit of 1000000 Lua instructions (a runaway loop?)")
    });
    assert_load_error("local s = string.rep(\"x\", 1 << 30)\nreturn {}\n", |p| {
        format!("policy {p}: ran past its memory limit of 32 MiB")
    });
}

#[test]
fn a_missing_policy_file_stops_the_run() {
    let ws = workspace();
    let missing = ws.path().parent().unwrap().join("nope.lua");
    let missing = missing.display().to_string();
    let run = run_lua_with(ws.path(), "print('ran')", &["--policy", &missing], &[]);
    assert_eq!(run.code, 2);
    assert_eq!(run.stdout, "");
    assert_eq!(
        run.stderr,
        format!("sluice: cannot read policy {missing}: No such file or directory (os error 2)\n")
    );
}

/// Kills a child this test started if the test fails before it ends.
struct Reaper(Option<Child>);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits for the next line from the workflow, failing after `limit`.
fn next_line(rx: &mpsc::Receiver<String>, limit: Duration, seen: &[String]) -> String {
    rx.recv_timeout(limit).unwrap_or_else(|e| {
        panic!("no line from the workflow within {limit:?} ({e}); so far: {seen:#?}")
    })
}

#[test]
fn an_edited_policy_takes_effect_between_calls_and_a_broken_edit_fails_closed() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    let head = "local p = require(\"sluice.policy\")\n";
    let allow = format!("{head}return {{ rules = {{ p.allow \"fs:read:${{workspace}}/**\" }} }}\n");
    let deny = format!(
        "{head}return {{ rules = {{ p.deny(\"fs:read\", \"the second version says no\"), p.allow \"fs:read:${{workspace}}/**\" }} }}\n"
    );
    let broken = format!("{head}-- an edit in progress\nreturn {{ rules = {{ p.allow \"fs:read:${{workspace}}/**\" }}\n");
    let fixed = format!(
        "{head}-- fixed again\nreturn {{ rules = {{ p.allow \"fs:read:${{workspace}}/**\" }} }}\n"
    );
    let pol = policy(&ws, "live.lua", &allow);
    // Prints each change of outcome; ends once a read is allowed again
    // after a broken policy, or after 300 rounds.
    let script = r#"
local last, broke = nil, false
for round = 1, 300 do
  local r, e = sluice.read{path = "a.txt"}
  local now = r and "allow" or (e.code .. " | " .. e.by .. " | " .. e.reason)
  if now ~= last then print(now) last = now end
  if e and e.reason:find("the policy failed", 1, true) then broke = true end
  if r and broke then break end
  sluice.sleep(100)
end
"#;
    let mut child = spawn_lua_with(ws.path(), script, &["--policy", &pol], &[]);
    let stdout = child.stdout.take().unwrap();
    let mut reaper = Reaper(Some(child));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let limit = Duration::from_secs(15);
    let mut seen = Vec::new();
    seen.push(next_line(&rx, limit, &seen));
    replace(&pol, &deny);
    seen.push(next_line(&rx, limit, &seen));
    replace(&pol, &broken);
    seen.push(next_line(&rx, limit, &seen));
    replace(&pol, &fixed);
    seen.push(next_line(&rx, limit, &seen));
    let mut child = reaper.0.take().unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("the workflow did not end; saw {seen:#?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status:?}: {stderr}");
    assert_eq!(
        seen,
        vec![
            "allow".to_string(),
            format!(
                "permission_denied | deny \"fs:read\" (rules[1] of {pol}) | the second version says no"
            ),
            format!(
                "permission_denied | {pol} | the policy failed, so nothing is granted: policy {pol}: {pol}:4: '}}' expected (to close '{{' at line 3) near <eof>"
            ),
            "allow".to_string(),
        ]
    );
    // Nothing more was printed: the run ended on the fixed policy.
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
}

#[test]
fn a_policy_cannot_hide_a_loop_in_a_coroutine_or_catch_its_limits() {
    // The instruction hook watches one Lua thread, and a limit must end the
    // call: policies get neither coroutines nor pcall.
    for body in [
        "    local co = coroutine.wrap(function() while true do end end)\n    co()\n    return \"allow\"",
        "    pcall(function() while true do end end)\n    return \"allow\"",
        "    pcall(string.rep, \"x\", 1 << 30)\n    return \"allow\"",
        "    xpcall(function() while true do end end, print)\n    return \"allow\"",
    ] {
        let (e, by, pol, took) = read_under(body);
        assert_eq!(e["code"], "permission_denied", "{body}: {e}");
        assert_eq!(e["by"], by);
        let reason = e["reason"].as_str().unwrap();
        assert!(
            reason.starts_with(&format!("the hook at {pol}:4 failed: {pol}:5: attempt to "))
                && reason.contains("a nil value (global '"),
            "{body}: {reason}"
        );
        assert!(took < Duration::from_secs(10), "{body}: took {took:?}");
    }
}

#[test]
fn a_string_pattern_that_could_backtrack_for_ever_is_refused() {
    let (e, _, pol, took) =
        read_under("    local s = (\"a\"):rep(400)\n    s:find(\".-.-.-b\")\n    return \"allow\"");
    assert_eq!(e["code"], "permission_denied");
    let reason = e["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!(
            "the hook at {pol}:4 failed: {pol}:6: string.find: the pattern \".-.-.-b\" on a 400-byte string could backtrack"
        )),
        "{reason}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // Plain finds and single-quantifier patterns stay usable.
    let (e, ..) = read_under(
        "    local s = (\"a\"):rep(4000)\n    assert(s:find(\".-.-b\", 1, true) == nil)\n    \
         assert(s:match(\"^(a+)\") == s)\n    return {decision = \"deny\", reason = \"patterns ran\"}",
    );
    assert_eq!(e["reason"], "patterns ran");
}

#[test]
fn a_long_policy_path_is_named_in_full() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    let deep = "a-rather-long-folder-name-for-policies/organisation/project-policies";
    let (text, line) = with_decide("    return \"deny\"");
    let pol = policy(
        &ws,
        &format!("{deep}/org-policy.lua").replace('/', "_"),
        &text,
    );
    // The name above keeps one folder level; make the path long for real.
    let long_dir = ws.path().parent().unwrap().join(deep);
    fs::create_dir_all(&long_dir).unwrap();
    let long = long_dir.join("org-policy.lua");
    fs::rename(&pol, &long).unwrap();
    let out = lua(
        &ws,
        &["--policy", long.to_str().unwrap()],
        r#"try("read", {path = "a.txt"})"#,
    );
    assert_eq!(
        out[0]["by"],
        format!("decide hook at {}:{line}", long.display())
    );
}

#[test]
fn a_rule_list_with_a_hole_or_a_named_entry_stops_the_run() {
    let ws = workspace();
    for (rules, says) in [
        (
            "p.allow \"fs:read\", nil, p.deny \"fs:*:**/.env\"",
            "rules[2] is nil, so the rules after it would be lost",
        ),
        (
            "p.allow \"fs:read\", extra = p.deny \"fs:*\"",
            "`rules` has the key extra",
        ),
    ] {
        let pol = policy(
            &ws,
            "holes.lua",
            &format!("local p = require(\"sluice.policy\")\nreturn {{ rules = {{ {rules} }} }}\n"),
        );
        let run = run_lua_with(ws.path(), "print('never')", &["--policy", &pol], &[]);
        assert_eq!(run.code, 2, "{rules}");
        assert!(run.stderr.contains(says), "{rules}: {}", run.stderr);
        assert_eq!(run.stdout, "");
    }
}

#[test]
fn a_run_may_not_rewrite_its_own_policy_file() {
    let ws = workspace();
    let pol = ws.file("policy.lua");
    let text = "local p = require(\"sluice.policy\")\nreturn { rules = { p.allow \"fs:*:${workspace}/**\" } }\n";
    fs::write(&pol, text).unwrap();
    let out = lua(
        &ws,
        &["--policy", pol.to_str().unwrap()],
        r#"try("write", {path = "policy.lua", content = "return {rules = {require('sluice.policy').allow '*'}}"})
        try("write", {path = "other.lua", content = "x"})"#,
    );
    assert_eq!(out[0]["code"], "permission_denied");
    assert_eq!(out[0]["by"], "the kernel");
    assert_eq!(out[1], json!({"ok": "write"}));
    assert_eq!(fs::read_to_string(&pol).unwrap(), text);
}

#[test]
fn a_decide_hook_cannot_grant_net_private() {
    let ws = workspace();
    let pol = policy(
        &ws,
        "np.lua",
        "return { decide = function(req) return \"allow\" end }\n",
    );
    let out = std::process::Command::new(sluice_bin())
        .args([
            "policy",
            "explain",
            "--policy",
            &pol,
            "net:private:http://169.254.169.254:80",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("decision:   ask\n"), "{text}");
    let out = std::process::Command::new(sluice_bin())
        .args(["policy", "explain", "--policy", &pol, "net:get:example.org"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("decision:   allow\n"));
}

#[test]
fn a_hook_sees_long_input_strings_cut_so_a_big_write_is_still_judged() {
    let (text, _) = with_decide(
        "    if #req.input.content < 70000 and req.input.content:find(\"bytes in all)\", 1, true) then return \"allow\" end\n    return \"deny\"",
    );
    let ws = workspace();
    let pol = policy(&ws, "p.lua", &text);
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"try("write", {path = "big.txt", content = string.rep("x", 40 * 1024 * 1024)})"#,
    );
    assert_eq!(out[0], json!({"ok": "write"}));
}

#[test]
fn a_single_quantifier_search_on_a_huge_string_is_refused_too() {
    let (e, _, pol, took) =
        read_under("    string.rep(\"a\", 100000):find(\".-b\")\n    return \"allow\"");
    assert_eq!(e["code"], "permission_denied");
    assert!(
        e["reason"].as_str().unwrap().contains(&format!(
            "{pol}:5: string.find: the pattern \".-b\" on a 100000-byte string"
        )),
        "{e}"
    );
    assert!(took < Duration::from_secs(10));
}

#[test]
fn a_policy_path_that_is_not_a_regular_file_stops_the_run() {
    let ws = workspace();
    let fifo = ws.path().parent().unwrap().join("policy.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let run = run_lua_with(
        ws.path(),
        "print('never')",
        &["--policy", fifo.to_str().unwrap()],
        &[],
    );
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("it is not a regular file"),
        "{}",
        run.stderr
    );
}

// Finalizers: Lua 5.4 runs `__gc` with hooks off and turns its errors into
// warnings, so no limit could end one that loops. Policies get none.

#[test]
fn a_looping_finalizer_made_in_decide_is_refused_and_the_call_denied() {
    let (e, by, pol, took) = read_under(
        "    setmetatable({}, {__gc = function() while true do end end})\n    collectgarbage()\n    return \"allow\"",
    );
    assert_eq!(
        e,
        denied(
            e["capability"].as_str().unwrap(),
            &by,
            &format!(
                "the hook at {pol}:4 failed: {pol}:5: setmetatable: a policy cannot have __gc finalizers \
                 (they would run outside its instruction, time and memory limits); remove the __gc field: \
                 a policy has nothing to release"
            )
        )
    );
    assert!(took < Duration::from_secs(10), "the run took {took:?}");
}

#[test]
fn a_finalizer_placeholder_is_refused_and_one_added_later_never_runs() {
    // `__gc = true` would mark the object; the function could come later.
    let (e, _, pol, _) = read_under(
        "    local mt = {__gc = true}\n    setmetatable({}, mt)\n    mt.__gc = function() while true do end end\n    return \"allow\"",
    );
    assert!(
        e["reason"].as_str().unwrap().starts_with(&format!(
            "the hook at {pol}:4 failed: {pol}:6: setmetatable: a policy cannot have __gc"
        )),
        "{e}"
    );
    // A metatable that gains __gc after setmetatable does not mark the
    // object, so the loop never runs, here or when the state closes.
    let (e, _, _, took) = read_under(
        "    local mt = {}\n    for i = 1, 100 do setmetatable({}, mt) end\n    mt.__gc = function() while true do end end\n    \
         collectgarbage()\n    collectgarbage()\n    local junk = {}\n    for i = 1, 20000 do junk[i] = {i} end\n    \
         return {decision = \"deny\", reason = \"no finalizer ran\"}",
    );
    assert_eq!(e["reason"], "no finalizer ran", "{e}");
    assert!(took < Duration::from_secs(10), "the run took {took:?}");
}

#[test]
fn a_looping_finalizer_made_while_loading_stops_the_run() {
    assert_load_error(
        "setmetatable({}, {__gc = function() while true do end end})\nreturn {}\n",
        |p| {
            format!(
                "policy {p}: {p}:1: setmetatable: a policy cannot have __gc finalizers (they would run outside \
                 its instruction, time and memory limits); remove the __gc field: a policy has nothing to release"
            )
        },
    );
    // Kept in the returned table, it would have run when the state closed.
    assert_load_error(
        "local keep = setmetatable({}, {__gc = function() while true do end end})\nreturn {keep}\n",
        |p| {
            format!(
                "policy {p}: {p}:1: setmetatable: a policy cannot have __gc finalizers (they would run outside \
                 its instruction, time and memory limits); remove the __gc field: a policy has nothing to release"
            )
        },
    );
}

#[test]
fn ordinary_metatables_still_work_in_a_policy() {
    let (e, ..) = read_under(
        "    local byname = setmetatable({}, {__index = function(_, k) return \"deny:\" .. k end})\n    \
         local weak = setmetatable({}, {__mode = \"k\"})\n    weak[{}] = 1\n    collectgarbage()\n    \
         return {decision = \"deny\", reason = byname.x}",
    );
    assert_eq!(e["reason"], "deny:x");
}

#[test]
fn a_loop_of_memory_sized_c_calls_in_decide_is_stopped_by_the_time_limit() {
    // Each string.rep fills half the memory limit and is collected, and
    // 250,000 iterations fit the instruction limit: only time ends it.
    let (e, by, pol, took) = read_under("    while true do local s = (\"x\"):rep(15000000) end");
    assert_eq!(
        e,
        denied(
            e["capability"].as_str().unwrap(),
            &by,
            &format!("the hook at {pol}:4 failed: ran past its time limit of 1 s")
        )
    );
    assert!(took < Duration::from_secs(10), "the run took {took:?}");
}

/// Runs `sluice policy test` on a folder holding `mine.lua` (allowing reads,
/// with `decide` as given) and `mine_test.lua`; the run's stdout, exit code
/// and time.
fn policy_test(decide: &str, tests: &str) -> (String, Option<i32>, Duration) {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("mine.lua"),
        format!("local p = require(\"sluice.policy\")\nreturn {{ rules = {{ p.allow \"fs:read:${{workspace}}/**\" }}, decide = {decide} }}\n"),
    )
    .unwrap();
    fs::write(dir.path().join("mine_test.lua"), tests).unwrap();
    let start = Instant::now();
    let mut child = std::process::Command::new(sluice_bin())
        .args(["policy", "test", "."])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = exit_within(&mut child, Duration::from_secs(60));
    let took = start.elapsed();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    (out, status.code(), took)
}

#[test]
fn a_policy_test_that_loops_or_bloats_fails_with_its_limit_and_the_rest_run() {
    let (out, code, took) = policy_test(
        "function(req) return nil end",
        "function test_loop() while true do end end\n\
         function test_bloat() local t = {} for i = 1, 1e9 do t[i] = (\"x\"):rep(1000) .. i end end\n\
         function test_caught() pcall(function() while true do end end) end\n\
         function test_finalizer() setmetatable({}, {__gc = function() while true do end end}) collectgarbage() end\n\
         function test_reads() policy.allows(\"fs:read:\" .. policy.workspace .. \"/a\") end\n",
    );
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        out,
        "FAIL ./mine_test.lua test_bloat\n     ran past its memory limit of 32 MiB\n\
         FAIL ./mine_test.lua test_caught\n     ./mine_test.lua:3: attempt to call a nil value (global 'pcall')\n\
         FAIL ./mine_test.lua test_finalizer\n     ./mine_test.lua:4: setmetatable: a policy cannot have __gc finalizers \
         (they would run outside its instruction, time and memory limits); remove the __gc field: a policy has nothing to release\n\
         FAIL ./mine_test.lua test_loop\n     ran past its limit of 1000000 Lua instructions (a runaway loop?)\n\
         PASS ./mine_test.lua test_reads\n\
         1 passed, 4 failed\n"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[test]
fn a_policy_test_looping_over_decisions_is_stopped_by_its_time_limit() {
    // Each decision costs the test a few instructions and the policy many:
    // the test's wall time is what ends it.
    let (out, code, took) = policy_test(
        "function(req) for i = 1, 200000 do end return nil end",
        "function test_many() while true do policy.decide(\"fs:read:/workspace/a\") end end\n\
         function test_one() policy.allows(\"fs:read:/workspace/a\") end\n",
    );
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        out,
        "FAIL ./mine_test.lua test_many\n     ran past its time limit of 5 s\n\
         PASS ./mine_test.lua test_one\n\
         1 passed, 1 failed\n"
    );
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(30),
        "took {took:?}"
    );
}

#[test]
fn a_policy_test_file_that_loops_while_loading_does_not_load() {
    let (out, code, took) = policy_test("nil", "while true do end\nfunction test_x() end\n");
    assert_eq!(code, Some(1));
    assert_eq!(
        out,
        "FAIL ./mine_test.lua (did not load)\n     ran past its limit of 1000000 Lua instructions (a runaway loop?)\n\
         0 passed, 1 failed\n"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
}
