//! Tasks and the scheduler: `sluice.spawn`, `task:await`, `sluice.all`,
//! `sluice.map`; calls of different tasks run at once unless their
//! envelopes overlap, and then in the order the script issued them; the
//! script's end cancels the tasks still running. Times come from the
//! commands themselves (`date +%s%N`), so "overlapped" means the processes
//! really ran at the same time.

mod common;

use common::{exported_calls, run_lua, run_lua_with, survivors_with_arg, unique_sleep, workspace};
use serde_json::Value;
use std::time::Duration;

/// Lua: `stamped(file, tag, secs)`, a hermetic bash input that prints its
/// start and end (ns since the epoch) around a sleep and appends `tag` to
/// `file`, declaring `file` its one write; `span(out)` its (start, end) in
/// ms; `emit(v)` prints JSON.
const PRELUDE: &str = r#"
local function emit(v) print(sluice.json.encode(v)) end
local function stamped(file, tag, secs)
  return {
    command = ("date +%%s%%N; sleep %s; echo %s >> %s; date +%%s%%N"):format(secs or "0.6", tag, file),
    mode = "hermetic", reads = {}, writes = { file },
  }
end
local function span(out)
  assert(out, "the command did not run")
  local a, b = out.stdout:match("^(%d+)\n(%d+)\n$")
  assert(a, "no stamps in " .. out.stdout)
  return { tonumber(a) // 1000000, tonumber(b) // 1000000 }
end
local function bash(input)
  local out, err = sluice.bash(input)
  assert(out, tostring(err))
  return out
end
"#;

/// Runs `body` after the prelude with `flags`, and the JSON lines it printed.
fn json_lines(ws: &std::path::Path, body: &str, flags: &[&str]) -> Vec<Value> {
    let run = run_lua_with(ws, &format!("{PRELUDE}{body}"), flags, &[]).ok();
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

fn ms(v: &Value, i: usize) -> i64 {
    v[i].as_i64()
        .unwrap_or_else(|| panic!("no time {i} in {v}"))
}

#[test]
fn two_commands_writing_one_file_run_one_after_the_other_in_issue_order() {
    let ws = workspace();
    let out = json_lines(
        ws.path(),
        r#"
        local one = sluice.spawn(function() return span(bash(stamped("a.txt", "one"))) end)
        local two = sluice.spawn(function() return span(bash(stamped("a.txt", "two"))) end)
        emit(sluice.all{one, two})
        emit(sluice.read{path = "a.txt"}.content)
        "#,
        &["--max-procs", "4"],
    );
    let (one, two) = (&out[0][0], &out[0][1]);
    assert!(
        ms(one, 1) <= ms(two, 0),
        "the second writer of a.txt started before the first ended: {one} {two}"
    );
    assert_eq!(out[1], "one\ntwo");
}

#[test]
fn commands_writing_two_files_overlap_in_time() {
    let ws = workspace();
    let out = json_lines(
        ws.path(),
        r#"
        local a = sluice.spawn(function() return span(bash(stamped("a.txt", "a"))) end)
        local b = sluice.spawn(function() return span(bash(stamped("b.txt", "b"))) end)
        emit(sluice.all{a, b})
        emit({sluice.read{path = "a.txt"}.content, sluice.read{path = "b.txt"}.content})
        "#,
        &["--max-procs", "4"],
    );
    let (a, b) = (&out[0][0], &out[0][1]);
    assert!(
        ms(b, 0) < ms(a, 1) && ms(a, 0) < ms(b, 1),
        "writers of different files did not overlap: {a} {b}"
    );
    assert_eq!(out[1], serde_json::json!(["a", "b"]));
}

#[test]
fn a_hermetic_command_writing_build_runs_beside_a_write_to_src() {
    let ws = workspace();
    std::fs::create_dir(ws.file("src")).unwrap();
    std::fs::create_dir(ws.file("build")).unwrap();
    let out = json_lines(
        ws.path(),
        r#"
        local build = sluice.spawn(function()
          return span(bash{command = "date +%s%N; sleep 0.6; echo built > build/out; date +%s%N",
                           mode = "hermetic", reads = {}, writes = {"build/**"}})
        end)
        local edit = sluice.spawn(function()
          sluice.sleep(200)
          local w, err = sluice.write{path = "src/main.rs", content = "fn main() {}\n"}
          assert(w, tostring(err))
          return sluice.now()
        end)
        emit(sluice.all{build, edit})
        "#,
        &["--max-procs", "4"],
    );
    let (build, written) = (&out[0][0], out[0][1].as_i64().unwrap());
    assert!(
        ms(build, 0) < written && written < ms(build, 1),
        "the write to src/ did not run while the build ran: build {build}, write done at {written}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.file("src/main.rs")).unwrap(),
        "fn main() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.file("build/out")).unwrap(),
        "built\n"
    );
}

#[test]
fn an_unhermetic_command_waits_for_an_earlier_write_and_holds_back_a_later_read() {
    let ws = workspace();
    let out = json_lines(
        ws.path(),
        r#"
        local write = sluice.spawn(function() return span(bash(stamped("notes.txt", "first"))) end)
        local wide = sluice.spawn(function()
          return span(bash{command = "date +%s%N; sleep 0.3; echo second >> notes.txt; date +%s%N"})
        end)
        local read = sluice.spawn(function()
          local r = sluice.read{path = "notes.txt"}
          return { sluice.now(), r and r.content }
        end)
        emit(sluice.all{write, wide, read})
        "#,
        &["--max-procs", "4"],
    );
    let (write, wide, read) = (&out[0][0], &out[0][1], &out[0][2]);
    assert!(
        ms(write, 1) <= ms(wide, 0),
        "the unhermetic command started before the earlier write ended: {write} {wide}"
    );
    assert!(
        read[0].as_i64().unwrap() >= ms(wide, 1),
        "the later read ran before the unhermetic command ended: {wide} {read}"
    );
    assert_eq!(read[1], "first\nsecond");
}

#[test]
fn commands_of_different_tasks_run_at_once_up_to_max_procs() {
    let ws = workspace();
    let body = r#"
        local t = sluice.now()
        local spans = sluice.map({1, 2, 3, 4}, function(i)
          return span(bash{command = "date +%s%N; sleep 1; date +%s%N", mode = "hermetic", reads = {}, writes = {}})
        end)
        emit(spans)
    "#;
    // The most spans running at one instant.
    let most = |spans: &Value| {
        let spans: Vec<(i64, i64)> = spans
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s.is_array())
            .map(|s| (ms(s, 0), ms(s, 1)))
            .collect();
        spans
            .iter()
            .map(|(start, _)| {
                spans
                    .iter()
                    .filter(|(a, b)| a <= start && start < b)
                    .count()
            })
            .max()
            .unwrap()
    };
    let four = json_lines(ws.path(), body, &["--max-procs", "4"]);
    assert_eq!(
        most(&four[0]),
        4,
        "four commands did not all run at once: {}",
        four[0]
    );
    let two = json_lines(ws.path(), body, &["--max-procs", "2"]);
    assert_eq!(
        most(&two[0]),
        2,
        "--max-procs 2 let more or fewer run at once: {}",
        two[0]
    );
}

#[test]
fn await_returns_every_result_and_raises_the_task_error_at_the_awaiting_line() {
    let ws = workspace();
    let run = run_lua(
        ws.path(),
        r##"
        local t = sluice.spawn(function(a, b) return a + b, "two", nil, 4 end, 1, 2)
        local a, b, c, d = t:await()
        print(a, b, c, d)
        print(select("#", t:await()))
        local bad = sluice.spawn(function() error("boom") end)
        local ok, err = pcall(bad.await, bad)
        print(ok, err)
        local tbl = sluice.spawn(function() error({code = "mine"}) end)
        local ok2, err2 = pcall(tbl.await, tbl)
        print(ok2, type(err2), err2.code)
        bad:await()
        "##,
        &[],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], "3\ttwo\tnil\t4");
    assert_eq!(lines[1], "4");
    assert!(
        lines[2].starts_with("false\ttask 0.2 failed: ") && lines[2].ends_with(": boom"),
        "{}",
        lines[2]
    );
    assert_eq!(lines[3], "false\ttable\tmine");
    // The last await raised at its own line (12 of the script), so the run failed there.
    assert!(
        run.stderr.contains(":12: task 0.2 failed: ") && run.stderr.contains("boom"),
        "{}",
        run.stderr
    );
}

#[test]
fn all_raises_the_first_failure_and_map_keeps_the_list_order() {
    let ws = workspace();
    let out = json_lines(
        ws.path(),
        r#"
        local slow = sluice.spawn(function() sluice.sleep(300) error("slow failure") end)
        local fast = sluice.spawn(function() sluice.sleep(20) error("fast failure") end)
        local ok, err = pcall(sluice.all, {slow, fast})
        emit({ok, err})
        local ok2, err2 = pcall(slow.await, slow)
        emit({ok2, err2})
        emit(sluice.map({30, 10, 20}, function(ms, i) sluice.sleep(ms) return ms * 10 + i end))
        local most, now = 0, 0
        sluice.map({1, 2, 3, 4, 5, 6}, function()
          now = now + 1
          most = math.max(most, now)
          sluice.sleep(30)
          now = now - 1
        end, {limit = 2})
        emit(most)
        local bad = {pcall(sluice.map, {1}, function() end, {limit = 0})}
        emit({bad[1], bad[2]})
        local unknown = {pcall(sluice.map, {1}, function() end, {limt = 2})}
        emit({unknown[1], unknown[2]})
        "#,
        &[],
    );
    assert_eq!(out[0][0], false);
    let err = out[0][1].as_str().unwrap();
    assert!(
        err.contains("task 0.2 failed") && err.contains("fast failure"),
        "{err}"
    );
    assert!(
        out[1][1].as_str().unwrap().contains("slow failure"),
        "{}",
        out[1]
    );
    assert_eq!(out[2], serde_json::json!([301, 102, 203]));
    assert_eq!(out[3], 2, "sluice.map ran more than limit tasks at once");
    assert!(
        out[4][1]
            .as_str()
            .unwrap()
            .contains("limit is a whole number of tasks at once"),
        "{}",
        out[4]
    );
    assert!(
        out[5][1]
            .as_str()
            .unwrap()
            .contains("unknown option \"limt\""),
        "{}",
        out[5]
    );
}

#[test]
fn a_failure_nobody_awaited_fails_the_run_and_names_the_task() {
    let ws = workspace();
    let run = run_lua(
        ws.path(),
        r#"
        sluice.spawn(function() sluice.sleep(10) return "fine" end)
        sluice.spawn(function() error("nobody awaited me") end)
        sluice.sleep(50)
        print("main ended")
        "#,
        &[],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "main ended\n");
    assert!(
        run.stderr
            .contains("task 0.2 failed and nothing awaited it:")
            && run.stderr.contains("nobody awaited me"),
        "{}",
        run.stderr
    );
    let list = common::sluice_in(ws.path(), &["audit", "list", "--json"]);
    let runs: Value = serde_json::from_str(&list.stdout).unwrap();
    let last = &runs["runs"][0];
    assert_eq!(last["status"], "failed", "{last}");
    let show = common::sluice_in(ws.path(), &["audit", "show", "last"]);
    assert!(
        show.stdout
            .contains("task 0.2 failed and nothing awaited it"),
        "{}",
        show.stdout
    );
}

#[test]
fn the_script_end_cancels_a_running_task_kills_its_command_and_records_it_cancelled() {
    // Under each runner: the kill must reach a confined command.
    for runner in common::runners() {
        let ws = workspace();
        let sleep = unique_sleep();
        let script = format!(
            r#"
            local done = sluice.spawn(function() return sluice.ls{{path = "."}} end)
            local t = sluice.spawn(function()
              local out, err = sluice.bash{{command = "sleep {sleep}"}}
              print("after the cancelled call: not reached", out, err)
            end)
            sluice.sleep(300)
            print("main ended")
            "#
        );
        let started = std::time::Instant::now();
        let run = run_lua_with(ws.path(), &script, &["--sandbox", runner.as_str()], &[]);
        assert_eq!(run.code, 0, "{runner}: {}", run.stderr);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the run waited for the task's command"
        );
        assert_eq!(run.stdout, "main ended\n");
        assert!(
            run.stderr
                .contains("the script ended while task 0.2 still ran; cancelled"),
            "{}",
            run.stderr
        );
        assert!(
            survivors_with_arg(&sleep, Duration::from_secs(2)).is_empty(),
            "{runner}: the cancelled task's command is still running"
        );
        let calls = exported_calls(ws.path());
        let bash = calls
            .iter()
            .find(|c| c["flow"] == "bash")
            .expect("the bash call is recorded");
        assert_eq!(bash["task"], "0.2", "{bash}");
        assert_eq!(bash["error"]["code"], "timeout", "{bash}");
        assert_eq!(bash["error"]["cancelled"], "0.2", "{bash}");
        assert!(
            bash["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("cancelled: the script ended"),
            "{bash}"
        );
        // The control: the task that finished in time is recorded as it ran.
        let read = calls.iter().find(|c| c["flow"] == "ls").unwrap();
        assert!(read["error"].is_null(), "{read}");
    }
}

#[test]
fn a_task_that_awaits_itself_or_its_awaiter_raises_rather_than_hanging() {
    let ws = workspace();
    let out = json_lines(
        ws.path(),
        r#"
        local me
        me = sluice.spawn(function() sluice.sleep(10) return pcall(me.await, me) end)
        emit({me:await()})
        local a, b
        a = sluice.spawn(function() sluice.sleep(20) return b:await() end)
        b = sluice.spawn(function() sluice.sleep(40) return pcall(a.await, a) end)
        emit({pcall(a.await, a)})
        emit({pcall(sluice.spawn, "not a function")})
        emit({pcall(sluice.all, {1})})
        "#,
        &[],
    );
    assert_eq!(out[0][0], false);
    assert!(
        out[0][1]
            .as_str()
            .unwrap()
            .contains("task 0.1 awaits itself"),
        "{}",
        out[0]
    );
    // b, awaiting a which awaits b, is refused; a gets b's answer.
    assert_eq!(out[1][0], true, "{}", out[1]);
    assert_eq!(out[1][1], false, "{}", out[1]);
    assert!(
        out[1][2]
            .as_str()
            .unwrap()
            .contains("neither would ever end"),
        "{}",
        out[1]
    );
    assert!(
        out[2][1]
            .as_str()
            .unwrap()
            .contains("fn is the function the task runs"),
        "{}",
        out[2]
    );
    assert!(
        out[3][1].as_str().unwrap().contains("item 1 is a number"),
        "{}",
        out[3]
    );
}

/// Was a hang at 4a663ca (issue 36, item 10): `check_cycle` took the
/// running coroutine's id, so a task awaiting itself from a coroutine it
/// made (`0.1.1`) was not seen as itself, and waited for ever.
#[test]
fn a_task_that_awaits_itself_through_a_coroutine_raises_as_the_direct_case_does() {
    let ws = workspace();
    let script = format!(
        "{PRELUDE}{}",
        r#"
        local t
        t = sluice.spawn(function()
          sluice.sleep(10)
          return pcall(coroutine.wrap(function() return t:await() end))
        end)
        emit({t:await()})
        -- Two coroutines deep, and through sluice.all.
        local u
        u = sluice.spawn(function()
          sluice.sleep(10)
          return pcall(coroutine.wrap(function()
            return coroutine.wrap(function() return sluice.all{u} end)()
          end))
        end)
        emit({u:await()})
        -- Controls: awaits across coroutines that are no cycle still work.
        local other = sluice.spawn(function() sluice.sleep(30) return "other" end)
        local w = sluice.spawn(function()
          return coroutine.wrap(function() return other:await() end)()
        end)
        emit({w:await(), coroutine.wrap(function() return w:await() end)()})
        local co = coroutine.create(function() return sluice.all{sluice.spawn(function() return 7 end)} end)
        local ok, got = coroutine.resume(co)
        emit({ok, got[1]})
        "#
    );
    let mut child = common::spawn_lua_with(ws.path(), &script, &[], &[]);
    let status = common::exit_within(&mut child, Duration::from_secs(30));
    let mut stdout = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    assert!(status.success(), "{status:?}: {stdout}");
    let out: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(out[0][0], false, "{}", out[0]);
    assert!(
        out[0][1]
            .as_str()
            .unwrap()
            .contains("task 0.1 awaits itself, which would never end"),
        "{}",
        out[0]
    );
    assert_eq!(out[1][0], false, "{}", out[1]);
    assert!(
        out[1][1]
            .as_str()
            .unwrap()
            .contains("task 0.2 awaits itself, which would never end"),
        "{}",
        out[1]
    );
    assert_eq!(out[2], serde_json::json!(["other", "other"]));
    assert_eq!(out[3], serde_json::json!([true, 7]));
}
