//! Attacks on what tasks and the scheduler promise (issue 18), as a hostile
//! script or a prompt-injected model would make them, each beside a
//! control that must still work:
//!
//! - the script's end cancels the tasks still running, and nothing a task
//!   does keeps the run (or a command) going past it: not catching the
//!   cancellation and calling again in a loop, not looping in plain Lua,
//!   not spawning a task (directly or from a coroutine) once cancelled, not
//!   a background job;
//! - `sluice.map` over 100 000 items with `limit = 4` ends in seconds with
//!   4 tasks at most at once;
//! - the record of many concurrent irreversible calls verifies, and each
//!   task's call is answered from the record with its own output;
//! - a "for the run" answer to a command covers that command in that folder
//!   only;
//! - the scheduler orders two names of one file when they resolve to one
//!   path (a symlink, `..`), and does not order a hard link's two names;
//! - `--max-procs 1` holds for `sluice.call`, and not for background jobs
//!   once started (as documented);
//! - SIGINT ends a run of many tasks within 2 s, sealed, its commands gone,
//!   and no call waiting for its turn starts after it;
//! - task ids do not move with how a stream is cut (`onText`), and neither
//!   `onText` nor a policy hook can start a task.

mod common;
#[path = "common/model_server.rs"]
mod model_server;

use common::{
    exported_calls, run_lua_with, script_file, sluice_bin, sluice_in, spawn_lua_with,
    survivors_with_arg, unique_sleep, workspace,
};
use model_server::{Answer as Reply, ModelServer};
use serde_json::{json, Value};
use sluice::policy::{Answer, Approver, Ask, Source};
use sluice::Runtime;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lua: `stamped(file, secs)`, a hermetic bash input that prints its start
/// and end (ns) around a sleep and appends to `file`, declaring `file` its
/// one write; `span(out, err)` its (start, end) in ms.
const STAMPS: &str = r#"
local function stamped(file, secs)
  return {
    command = ("date +%%s%%N; sleep %s; echo t >> %s; date +%%s%%N"):format(secs or "0.4", file),
    mode = "hermetic", reads = {}, writes = { file },
  }
end
local function span(out, err)
  assert(out, tostring(err))
  local a, b = out.stdout:match("^(%d+)\n(%d+)\n$")
  assert(a, "no stamps in " .. out.stdout)
  return { tonumber(a) // 1000000, tonumber(b) // 1000000 }
end
local function overlapped(x, y) return x[1] < y[2] and y[1] < x[2] end
"#;

/// `sluice audit verify --json` on the workspace's record: (intact, the
/// last run sealed).
fn verified(ws: &std::path::Path) -> (bool, bool) {
    let out = sluice_in(ws, &["audit", "verify", "--json"]);
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("audit verify: {e}: {}{}", out.stdout, out.stderr));
    let runs = v["runs"].as_array().expect("runs");
    (
        out.code == 0 && v["intact"] == true,
        runs.last().is_some_and(|r| r["sealed"] == true),
    )
}

/// Runs `script` with `flags`, failing (and killing it) past `limit`, so a
/// run that never ends fails the test rather than hanging it; the run and
/// how long it took.
fn run_within(
    ws: &std::path::Path,
    script: &str,
    flags: &[&str],
    limit: Duration,
) -> (common::Run, Duration) {
    let started = Instant::now();
    let mut child = spawn_lua_with(ws, script, flags, &[]);
    let status = common::exit_within(&mut child, limit);
    let took = started.elapsed();
    let mut out = (String::new(), String::new());
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out.0).unwrap();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut out.1).unwrap();
    let run = common::Run {
        code: status.code().unwrap_or(-1),
        stdout: out.0,
        stderr: out.1,
    };
    (run, took)
}

#[test]
fn a_cancelled_task_that_catches_it_and_loops_calling_or_computing_ends_with_the_run() {
    let ws = workspace();
    std::fs::write(ws.file("x.txt"), "x\n").unwrap();
    let script = r#"
        -- Each catches its cancellation, then never waits again on its own.
        local reads = sluice.spawn(function()
          pcall(sluice.sleep, 60000)
          while true do pcall(sluice.read, {path = "x.txt"}) end
        end)
        local sleeps = sluice.spawn(function()
          pcall(sluice.sleep, 60000)
          while true do pcall(sluice.sleep, 1) end
        end)
        local spins = sluice.spawn(function()
          pcall(sluice.sleep, 60000)
          while true do end
        end)
        local nested = sluice.spawn(function()
          pcall(sluice.sleep, 60000)
          local co = coroutine.wrap(function() while true do pcall(error, "again") end end)
          while true do pcall(co) end
        end)
        -- The control: a task that finishes in time is recorded as it ran.
        local done = sluice.spawn(function() return sluice.read{path = "x.txt"}.content end)
        print(done:await())
        sluice.sleep(200)
        print("main ended")
    "#;
    // It hung: the looping tasks never gave the thread back.
    let (run, took) = run_within(ws.path(), script, &[], Duration::from_secs(20));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        took < Duration::from_secs(3),
        "the run's end waited {took:?} for tasks looping past their cancellation"
    );
    assert_eq!(run.stdout, "x\nmain ended\n");
    assert!(
        run.stderr
            .contains("the script ended while task 0.1, 0.2, 0.3, 0.4 still ran; cancelled"),
        "{}",
        run.stderr
    );
    // Calls made after the cancellation neither ran nor filled the record.
    let reads: Vec<Value> = exported_calls(ws.path())
        .into_iter()
        .filter(|c| c["flow"] == "read")
        .collect();
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!(reads[0]["task"], "0.5");
    assert_eq!(verified(ws.path()), (true, true));
}

#[test]
fn nothing_a_cancelled_task_spawns_or_started_outlives_the_run() {
    let ws = workspace();
    let (job, later, spawned, nested) = (
        unique_sleep(),
        unique_sleep(),
        unique_sleep(),
        unique_sleep(),
    );
    let script = format!(
        r#"
        -- The control: a background job started before the end, which the
        -- run's end stops with the run.
        local starter = sluice.spawn(function()
          local j = sluice.bash{{command = "sleep {job}", background = true}}
          print("job", j.status)
          pcall(sluice.sleep, 60000)
          -- Once cancelled: another command, a task, a task from a coroutine.
          pcall(sluice.bash, {{command = "sleep {later}", background = true}})
          sluice.spawn(function() sluice.bash{{command = "sleep {spawned}"}} end)
          coroutine.wrap(function()
            sluice.spawn(function() sluice.bash{{command = "sleep {nested}", background = true}} end)
          end)()
          sluice.sleep(60000)
        end)
        sluice.sleep(500)
        print("main ended")
        "#
    );
    let (run, _) = run_within(ws.path(), &script, &[], Duration::from_secs(20));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "job\trunning\nmain ended\n");
    for arg in [&job, &later, &spawned, &nested] {
        assert_eq!(
            survivors_with_arg(arg, Duration::from_secs(2)),
            Vec::<i32>::new(),
            "`sleep {arg}` outlived the run"
        );
    }
    let commands: Vec<String> = exported_calls(ws.path())
        .iter()
        .filter(|c| c["flow"] == "bash")
        .map(|c| c["input"]["command"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        commands,
        [format!("sleep {job}")],
        "a cancelled task started a command"
    );
    assert_eq!(verified(ws.path()), (true, true));
}

#[test]
fn a_map_of_100k_items_with_limit_4_ends_in_seconds_in_bounded_memory() {
    let ws = workspace();
    let script = r#"
        local list = {}
        for i = 1, 100000 do list[i] = i end
        local out = sluice.map(list, function(x) return x * 2 end, {limit = 4})
        local sum = 0
        for _, v in ipairs(out) do sum = sum + v end
        collectgarbage()
        print(#out, sum, math.floor(collectgarbage("count") / 1024))
    "#;
    // It was quadratic: 16 000 items took a minute, 100 000 hours.
    let (run, took) = run_within(ws.path(), script, &["--no-audit"], Duration::from_secs(60));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let fields: Vec<&str> = run.stdout.split_whitespace().collect();
    assert_eq!(fields[..2], ["100000", "10000100000"], "{}", run.stdout);
    let mib: u64 = fields[2].parse().unwrap();
    // Each settled task keeps its result and little else: no coroutine,
    // no waiter per item.
    assert!(mib < 128, "the Lua heap after the map is {mib} MiB");
    assert!(took < Duration::from_secs(40), "took {took:?}");
}

#[test]
fn map_runs_at_most_limit_tasks_at_once_and_stops_at_the_first_failure() {
    let ws = workspace();
    let script = r#"
        local now, most = 0, 0
        local list = {}
        for i = 1, 200 do list[i] = i end
        local out = sluice.map(list, function(x)
          now = now + 1
          if now > most then most = now end
          sluice.sleep(1)
          now = now - 1
          return x
        end, {limit = 4})
        print(#out, most)
        local started = 0
        local ok, err = pcall(sluice.map, list, function(x)
          started = started + 1
          sluice.sleep(x == 5 and 0 or 20)
          if x == 5 then error("five") end
        end, {limit = 4})
        print(ok, err:match("task %S+ failed: .*five") ~= nil, started < 20)
    "#;
    let run = run_lua_with(ws.path(), script, &["--no-audit"], &[]).ok();
    assert_eq!(run.stdout, "200\t4\nfalse\ttrue\ttrue\n");
}

#[test]
fn the_record_of_many_concurrent_irreversible_calls_verifies_and_replays_each_task_its_own() {
    let ws = workspace();
    // Each post is answered after a pause that shrinks with its item, so
    // later calls end first and intents and outcomes interleave.
    let srv = ModelServer::respond(|r| {
        let item = r.body["item"].as_u64().unwrap_or(0);
        Reply::json(json!({"echo": item})).delay(Duration::from_millis(20 * (17 - item)))
    });
    let script = format!(
        r#"
        local list = {{}}
        for i = 1, 16 do list[i] = i end
        local out = sluice.map(list, function(i)
          local r = assert(sluice.http_post{{url = "{url}/post", body = sluice.json.encode{{item = i}}}})
          return sluice.json.decode(r.body).echo
        end)
        for i, echo in ipairs(out) do print(i, echo) end
        "#,
        url = srv.origin()
    );
    let origin = srv.origin();
    let flags = [
        "--approve".to_string(),
        format!("net:private:{origin}"),
        "--approve".to_string(),
        format!("net:post:{origin}"),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let path = script_file(ws.path(), &script);
    let live = common::run_script_with(ws.path(), &path, &flags, &[]).ok();
    let expected: String = (1..=16).map(|i| format!("{i}\t{i}\n")).collect();
    assert_eq!(live.stdout, expected);
    assert_eq!(srv.count(), 16);
    assert_eq!(verified(ws.path()), (true, true));
    let calls = exported_calls(ws.path());
    assert_eq!(calls.len(), 16);
    let ended =
        |c: &Value| c["startedMs"].as_i64().unwrap() * 1000 + c["durationUs"].as_i64().unwrap();
    let of_item = |i: u64| {
        calls
            .iter()
            .find(|c| c["input"]["body"].as_str() == Some(json!({"item": i}).to_string().as_str()))
            .unwrap_or_else(|| panic!("no call for item {i}: {calls:?}"))
    };
    // The calls really ran at once: the last issued ended first.
    assert!(ended(of_item(16)) < ended(of_item(1)), "{calls:?}");
    for i in 1..=16 {
        let c = of_item(i);
        assert_eq!(c["tier"], "irreversible", "{c}");
        assert_eq!(c["output"]["body"], json!({"echo": i}).to_string(), "{c}");
    }
    // Replayed, every call is answered at once, in another interleaving;
    // each task still gets its own call's output, and nothing is sent.
    let replay = Command::new(sluice_bin())
        .args(["replay", "last", "--audit"])
        .arg(ws.file(".sluice/audit.db"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(replay.status.success(), "{replay:?}");
    assert_eq!(String::from_utf8_lossy(&replay.stdout), expected);
    assert_eq!(srv.count(), 16, "the replay sent a request");
}

/// An approver that answers every ask "yes, for the rest of the run" and
/// keeps what it was shown.
#[derive(Default)]
struct ForRun(Mutex<Vec<Ask>>);

impl Approver for ForRun {
    fn ask(&self, ask: &Ask) -> Answer {
        self.0.lock().unwrap().push(ask.clone());
        Answer::ForRun
    }

    fn who(&self) -> String {
        "the test".into()
    }
}

#[test]
fn a_for_the_run_answer_to_a_command_does_not_cover_it_in_another_folder() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    for sub in ["a", "b"] {
        std::fs::create_dir_all(ws.join(sub)).unwrap();
    }
    let policy = dir.path().join("policy.lua");
    std::fs::write(
        &policy,
        "local p = require(\"sluice.policy\")\nreturn { rules = {\n  p.allow \"fs:read:${workspace}/**\",\n  p.ask \"proc:spawn:pwd\",\n} }\n",
    )
    .unwrap();
    let person = Arc::new(ForRun::default());
    let rt = Runtime::builder()
        .workspace(&ws)
        .policy(Source::File(policy))
        .approver(person.clone())
        .build()
        .unwrap();
    let script = r#"
        local function pwd(cwd)
          return sluice.spawn(function() return assert(sluice.bash{command = "pwd", cwd = cwd}).stdout end)
        end
        local r = sluice.all{pwd("a"), pwd("b")}
        -- The control: the same command in the same folder rides on the answer.
        r[3] = pwd("a"):await()
        r[4] = pwd("b"):await()
        return table.concat(r)
    "#;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(rt.run_source("pwd.lua", script))
        .unwrap_or_else(|e| panic!("{}", e.message));
    let shown = person.0.lock().unwrap().clone();
    let inputs: Vec<String> = shown.iter().map(|a| a.input.clone()).collect();
    assert_eq!(shown.len(), 2, "asks shown: {inputs:?}");
    assert!(inputs.iter().any(|i| i.contains("\"a\"")), "{inputs:?}");
    assert!(inputs.iter().any(|i| i.contains("\"b\"")), "{inputs:?}");
}

#[test]
fn the_scheduler_orders_one_file_s_names_through_symlinks_and_dotdot_not_a_hard_link() {
    let ws = workspace();
    std::fs::create_dir_all(ws.file("real")).unwrap();
    std::fs::create_dir_all(ws.file("sub")).unwrap();
    std::os::unix::fs::symlink("real", ws.file("link")).unwrap();
    std::fs::write(ws.file("real/a.txt"), "").unwrap();
    std::fs::hard_link(ws.file("real/a.txt"), ws.file("hard.txt")).unwrap();
    let script = format!(
        r#"{STAMPS}
        for _, other in ipairs{{"real/a.txt", "link/a.txt", "sub/../real/a.txt", "hard.txt", "real/b.txt"}} do
          local one = sluice.spawn(function() return span(sluice.bash(stamped("real/a.txt"))) end)
          local two = sluice.spawn(function() return span(sluice.bash(stamped(other))) end)
          local r = sluice.all{{one, two}}
          print(other, overlapped(r[1], r[2]) and "at once" or "in order")
        end
        "#
    );
    let run = run_lua_with(ws.path(), &script, &["--max-procs", "4"], &[]).ok();
    assert_eq!(
        run.stdout,
        "real/a.txt\tin order\nlink/a.txt\tin order\nsub/../real/a.txt\tin order\n\
         hard.txt\tat once\nreal/b.txt\tat once\n"
    );
}

#[test]
fn max_procs_1_holds_for_sluice_call_and_not_for_started_background_jobs() {
    let ws = workspace();
    let script = format!(
        r#"{STAMPS}
        local a = sluice.spawn(function() return span(sluice.call("bash", stamped("a.txt"))) end)
        local b = sluice.spawn(function() return span(sluice.bash(stamped("b.txt"))) end)
        local r = sluice.all{{a, b}}
        print("calls", overlapped(r[1], r[2]) and "at once" or "one at a time")
        -- A background job holds its place only while its call starts it.
        local j1 = sluice.bash{{command = "sleep 5", background = true}}
        local j2 = sluice.bash{{command = "sleep 5", background = true}}
        print("jobs", j1.status, j2.status)
        j1:kill() j2:kill()
        "#
    );
    let run = run_lua_with(ws.path(), &script, &["--max-procs", "1"], &[]).ok();
    assert_eq!(run.stdout, "calls\tone at a time\njobs\trunning\trunning\n");
    // The control: with two places the same calls run at once.
    let run = run_lua_with(ws.path(), &script, &["--max-procs", "2"], &[]).ok();
    assert!(run.stdout.starts_with("calls\tat once\n"), "{}", run.stdout);
}

#[test]
fn sigint_ends_a_run_of_many_tasks_within_2s_sealed_with_no_command_left() {
    let ws = workspace();
    let sleep = unique_sleep();
    let script = format!(
        r#"
        local tasks = {{}}
        for i = 1, 12 do
          tasks[#tasks + 1] = sluice.spawn(function()
            return sluice.bash{{command = "sleep {sleep}", mode = "hermetic", reads = {{}},
                                writes = {{("out%d"):format(i)}}}}
          end)
        end
        for i = 1, 12 do tasks[#tasks + 1] = sluice.spawn(function() sluice.sleep(60000) end) end
        for i = 1, 4 do tasks[#tasks + 1] = sluice.spawn(function() while true do pcall(sluice.sleep, 0) end end) end
        sluice.sleep(300)
        print("ready")
        sluice.all(tasks)
        "#
    );
    let mut child = spawn_lua_with(ws.path(), &script, &["--max-procs", "4"], &[]);
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    let started = Instant::now();
    let signalled = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = common::exit_within(&mut child, Duration::from_secs(30));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert_eq!(status.code(), Some(130));
    assert_eq!(
        survivors_with_arg(&sleep, Duration::from_secs(1)),
        Vec::<i32>::new()
    );
    assert_eq!(verified(ws.path()), (true, true));
    let show = sluice_in(ws.path(), &["audit", "show", "last", "--json"]);
    let show: Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(show["run"]["status"], "interrupted", "{}", show["run"]);
    // The commands that had their place (at most 4) were killed and
    // recorded so; none waiting for a place started once the signal came,
    // though the kill freed the places.
    let calls = show["calls"].as_array().unwrap();
    let ran: Vec<&Value> = calls
        .iter()
        .filter(|c| c["flow"] == "bash" && c["error"]["elapsedMs"].is_number())
        .collect();
    assert!(!ran.is_empty() && ran.len() <= 4, "{calls:#?}");
    for c in ran {
        assert_eq!(c["error"]["interrupted"], "SIGINT", "{c}");
        let started = c["startedMs"].as_i64().unwrap();
        assert!(
            started < signalled,
            "a command started after the signal: {c}"
        );
    }
}

#[test]
fn task_ids_do_not_depend_on_how_a_stream_is_cut_and_on_text_cannot_start_a_task() {
    let ws = workspace();
    std::fs::write(ws.file("b.txt"), "b\n").unwrap();
    let stream = || Reply::sse(model_server::openai_stream_text(&["one", "two", "three"]));
    let server = ModelServer::start(vec![stream(), stream()]);
    // Live, onText is called once per piece; from the record, once in all.
    // A coroutine it makes must not move the ids of the tasks made after.
    let script = r#"
        local hi = {{role = "user", content = "hi"}}
        local a = sluice.spawn(function() return "a" end)
        local made = 0
        assert(sluice.model{provider = "local", model = "m", messages = hi,
          onText = function() coroutine.wrap(function() made = made + 1 end)() end})
        local b = sluice.spawn(function() return sluice.read{path = "b.txt"}.content end)
        print(a.id, b.id, made > 0, b:await())
        local ok, err = pcall(sluice.model, {provider = "local", model = "m", messages = hi,
          onText = function() sluice.spawn(function() end) end})
        print(ok, (tostring(err):find("a task cannot start inside onText", 1, true)) ~= nil)
    "#;
    let flags = [
        "--provider".to_string(),
        format!("local=openai:{}", server.url()),
        "--approve".into(),
        "model:call:local/**".into(),
        "--approve".into(),
        format!("net:private:{}", server.origin()),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let path = script_file(ws.path(), script);
    let live = common::run_script_with(ws.path(), &path, &flags, &[]).ok();
    assert_eq!(live.stdout, "0.1\t0.2\ttrue\tb\nfalse\ttrue\n");
    let replay = Command::new(sluice_bin())
        .args(["replay", "last", "--audit"])
        .arg(ws.file(".sluice/audit.db"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(replay.status.success(), "{replay:?}");
    assert_eq!(String::from_utf8_lossy(&replay.stdout), live.stdout);
}

#[test]
fn a_policy_hook_cannot_start_a_task_its_state_has_no_sluice_module() {
    let ws = workspace();
    std::fs::write(ws.file("x.txt"), "x").unwrap();
    let policy = |hook: &str| {
        format!(
            "local p = require(\"sluice.policy\")\nreturn {{\n  rules = {{ p.allow \"fs:read:${{workspace}}/**\" }},\n  decide = function(req)\n    {hook}\n  end,\n}}\n"
        )
    };
    let script = "local out, err = sluice.read{path = \"x.txt\"}\nprint(out and out.content or err.message)\n";
    let run_with = |hook: &str| {
        let path = ws.path().parent().unwrap().join("hook.lua");
        std::fs::write(&path, policy(hook)).unwrap();
        let path = path.display().to_string();
        run_lua_with(ws.path(), script, &["--policy", &path, "--no-audit"], &[]).ok()
    };
    let run = run_with("sluice.spawn(function() end)");
    assert!(
        run.stdout
            .contains("attempt to index a nil value (global 'sluice')"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.starts_with("fs:read:"), "{}", run.stdout);
    // The control: the same policy, its hook giving no opinion, allows it.
    assert_eq!(run_with("return nil").stdout, "x\n");
}
