//! Record and replay under concurrency, through the `sluice` binary: a
//! replay answers each task's calls by (task, seq) whatever order the tasks
//! make them in, and a divergence names the task and its call; a resume
//! answers every task's recorded calls and runs live only each task's own
//! calls past its record (or a call a stop cut short), also when the call a
//! signal stopped was in a task other than the main one; `audit show` names
//! the calls that ran at the same time, and the task of each.
//!
//! The order of calls is forced with `sluice.sleep`, which is not a flow: it
//! is not recorded, so a replayed script may sleep differently.

mod common;

use common::{script_file, sluice_bin, sluice_run, workspace, Workspace};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Two tasks, each writing two files and printing as it goes; `A1`..`B2`
/// are the sleeps before each write, so they choose the interleaving.
const TWO_WRITERS: &str = r#"
local a = sluice.spawn(function()
  sluice.sleep(A1)
  assert(sluice.write{path = "a1.txt", content = "a1"})
  print("a1")
  sluice.sleep(A2)
  assert(sluice.write{path = "a2.txt", content = "a2"})
  print("a2")
  return "a"
end)
local b = sluice.spawn(function()
  sluice.sleep(B1)
  assert(sluice.write{path = "b1.txt", content = "b1"})
  print("b1")
  sluice.sleep(B2)
  assert(sluice.write{path = B2_PATH, content = "b2"})
  print("b2")
  return "b"
end)
print(table.concat(sluice.all{a, b}, ","))
"#;

/// [`TWO_WRITERS`] with its sleeps (ms) and the path of task 0.2's second
/// write.
fn two_writers(sleeps: [u32; 4], b2_path: &str) -> String {
    let mut script = TWO_WRITERS.to_string();
    for (name, ms) in ["A1", "A2", "B1", "B2"].iter().zip(sleeps) {
        script = script.replace(&format!("sleep({name})"), &format!("sleep({ms})"));
    }
    script.replace("B2_PATH", &format!("{b2_path:?}"))
}

/// Live: a1 (50 ms), b1 (250), a2 (450), b2 (650).
const LIVE_ORDER: [u32; 4] = [50, 400, 250, 400];
/// Replayed: b1 (20 ms), a1 (200), b2 (420), a2 (600).
const OTHER_ORDER: [u32; 4] = [200, 400, 20, 400];

/// `sluice ARGS --audit WS/.sluice/audit.db` (a replay, a resume, an audit
/// command), standard input closed.
fn on_record(ws: &Workspace, args: &[&str]) -> common::Run {
    Command::new(sluice_bin())
        .args(args)
        .arg("--audit")
        .arg(ws.file(".sluice/audit.db"))
        .stdin(Stdio::null())
        .env("SLUICE_CACHE_DIR", common::caches_of(ws.path()))
        .output()
        .expect("spawn sluice")
        .into()
}

/// `sluice audit show RUN --json`.
fn show_json(ws: &Workspace, run: &str) -> Value {
    let out = on_record(ws, &["audit", "show", run, "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).expect("audit show --json prints JSON")
}

/// Each recorded call's (task, seq, flow).
fn keys(show: &Value) -> Vec<(String, i64, String)> {
    let calls = show["calls"].as_array().expect("calls");
    calls
        .iter()
        .map(|c| {
            (
                c["task"].as_str().unwrap().to_string(),
                c["seq"].as_i64().unwrap(),
                c["flow"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn key(task: &str, seq: i64, flow: &str) -> (String, i64, String) {
    (task.to_string(), seq, flow.to_string())
}

/// Records [`two_writers`] in the [`LIVE_ORDER`]; returns the workspace
/// and the run's printed lines.
fn recorded_writers() -> (Workspace, Vec<String>) {
    let ws = workspace();
    let script = script_file(ws.path(), &two_writers(LIVE_ORDER, "b2.txt"));
    let run = common::run_script_with(ws.path(), &script, &[], &[]).ok();
    let lines = run.stdout.lines().map(str::to_string).collect();
    (ws, lines)
}

#[test]
fn a_replay_answers_two_tasks_by_task_and_call_when_they_interleave_the_other_way() {
    let (ws, live) = recorded_writers();
    assert_eq!(live, ["a1", "b1", "a2", "b2", "a,b"], "the live order");
    let show = show_json(&ws, "last");
    assert_eq!(
        keys(&show),
        [
            key("0.1", 1, "write"),
            key("0.2", 1, "write"),
            key("0.1", 2, "write"),
            key("0.2", 2, "write"),
        ]
    );
    for f in ["a1.txt", "a2.txt", "b1.txt", "b2.txt"] {
        std::fs::remove_file(ws.file(f)).unwrap();
    }
    let other = script_file(ws.path(), &two_writers(OTHER_ORDER, "b2.txt"));
    let replay = on_record(
        &ws,
        &["replay", "last", "--script", other.to_str().unwrap()],
    );
    assert_eq!(replay.code, 0, "{}{}", replay.stdout, replay.stderr);
    let replayed: Vec<&str> = replay.stdout.lines().collect();
    assert_eq!(
        replayed,
        ["b1", "a1", "b2", "a2", "a,b"],
        "the replay's own order"
    );
    assert!(
        replay
            .stderr
            .contains("reproduced: 4 calls answered from the record, and it ended ok as recorded"),
        "{}",
        replay.stderr
    );
    // Answered from the record: no file was written again.
    for f in ["a1.txt", "a2.txt", "b1.txt", "b2.txt"] {
        assert!(!ws.file(f).exists(), "the replay wrote {f}");
    }
}

#[test]
fn a_replay_whose_task_0_2_makes_another_call_diverges_naming_task_0_2() {
    let (ws, _) = recorded_writers();
    let changed = script_file(ws.path(), &two_writers(OTHER_ORDER, "b3.txt"));
    let replay = on_record(
        &ws,
        &["replay", "last", "--script", changed.to_str().unwrap()],
    );
    assert_eq!(replay.code, 1, "{}{}", replay.stdout, replay.stderr);
    for want in [
        "replay diverged at call #4 (task 0.2, call 2):",
        r#"recorded: write {"content":"b2","path":"b2.txt"}"#,
        r#"now:      write {"content":"b2","path":"b3.txt"}"#,
        r#"path: recorded "b2.txt", now "b3.txt""#,
    ] {
        assert!(
            replay.stderr.contains(want),
            "{want:?} missing:\n{}",
            replay.stderr
        );
    }
    assert!(!ws.file("b3.txt").exists());
    // A call task 0.2 never made at all: the record has 2 calls of it.
    let more = two_writers(OTHER_ORDER, "b2.txt").replace(
        "  print(\"b2\")\n",
        "  print(\"b2\")\n  sluice.read{path = \"b2.txt\"}\n",
    );
    let more = script_file(ws.path(), &more);
    let replay = on_record(&ws, &["replay", "last", "--script", more.to_str().unwrap()]);
    assert_eq!(replay.code, 1, "{}{}", replay.stdout, replay.stderr);
    assert!(
        replay.stderr.contains(
            r#"replay diverged at task 0.2, call 3: the script makes read {"path":"b2.txt"}"#
        ) && replay
            .stderr
            .contains("(it recorded 4 calls, 2 of them in task 0.2)"),
        "{}",
        replay.stderr
    );
}

/// Starts `script`, waits until the workspace holds `marker` (and `settle`
/// more), sends SIGINT, and waits for the run to end (failing after 30 s).
fn stopped_once(ws: &Workspace, script: &str, marker: &str, settle: Duration) {
    let path = script_file(ws.path(), script);
    let mut child = sluice_run(ws.path(), &path, &["--max-procs", "4"], &[])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sluice");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ws.file(marker).exists() {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("the run never made {marker}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(settle);
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let status = common::exit_within(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "the run was stopped by SIGINT");
}

fn read(ws: &Workspace, f: &str) -> String {
    std::fs::read_to_string(ws.file(f)).unwrap_or_default()
}

/// A hermetic command (compensable) that logs its start, waits until the
/// workspace holds `go`, and logs its end.
const WAITS: &str =
    r#"echo start >> waits.log; while [ ! -e go ]; do sleep 0.05; done; echo done >> waits.log"#;

#[test]
fn a_resume_of_a_run_stopped_mid_way_answers_every_tasks_recorded_calls_and_runs_only_the_rest() {
    let ws = workspace();
    // Task 0.1's command starts first and is still waiting at the stop;
    // task 0.2's calls come a second after it started, and finished.
    let script = format!(
        r#"
local function bash(input) local out, err = sluice.bash(input); assert(out, tostring(err)); return out end
local waits = sluice.spawn(function()
  local r = bash{{command = {WAITS:?}, mode = "hermetic", reads = {{"go"}}, writes = {{"waits.log"}}}}
  assert(sluice.write{{path = "after.txt", content = "after"}})
  return r.exitCode
end)
local steps = sluice.spawn(function()
  sluice.sleep(1000)
  bash{{command = "echo one >> steps.log", mode = "hermetic", reads = {{}}, writes = {{"steps.log"}}}}
  assert(sluice.write{{path = "ready", content = ""}})
  return "steps"
end)
print(sluice.json.encode(sluice.all{{waits, steps}}))
"#
    );
    stopped_once(&ws, &script, "ready", Duration::from_millis(200));
    let stopped = show_json(&ws, "last");
    let calls = stopped["calls"].as_array().unwrap();
    let waiting = calls.iter().find(|c| c["task"] == "0.1").unwrap();
    assert_eq!(waiting["error"]["interrupted"], "SIGINT", "{waiting:#}");
    assert_eq!(read(&ws, "steps.log"), "one\n");
    assert!(!ws.file("after.txt").exists());

    std::fs::write(ws.file("go"), "").unwrap();
    let resumed = on_record(&ws, &["resume", "last"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert_eq!(resumed.stdout.trim(), r#"[0,"steps"]"#);
    // Task 0.1 went live at once, at the call the stop cut short; task
    // 0.2's calls, made later, were still answered, not run again.
    assert_eq!(
        read(&ws, "steps.log"),
        "one\n",
        "task 0.2's command ran twice"
    );
    assert_eq!(read(&ws, "waits.log"), "start\nstart\ndone\n");
    assert_eq!(read(&ws, "after.txt"), "after");
    assert!(
        resumed
            .stderr
            .contains("2 calls answered from the record, then live"),
        "{}",
        resumed.stderr
    );
    let show = show_json(&ws, "last");
    let copied: Vec<(String, i64, bool)> = show["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["task"].as_str().unwrap().to_string(),
                c["seq"].as_i64().unwrap(),
                c["replayedFrom"].is_string(),
            )
        })
        .collect();
    let mut copied = copied;
    copied.sort();
    assert_eq!(
        copied,
        [
            ("0.1".to_string(), 1, false),
            ("0.1".to_string(), 2, false),
            ("0.2".to_string(), 1, true),
            ("0.2".to_string(), 2, true),
        ]
    );
    let text = on_record(&ws, &["audit", "show", "last"]);
    assert!(
        text.stdout
            .contains("(2 calls replayed from it; each task went live on its own: task 0.1 at #1)"),
        "{}",
        text.stdout
    );
}

#[test]
fn a_resume_stops_at_an_irreversible_command_a_signal_stopped_in_task_0_2_until_told_to_retry() {
    let ws = workspace();
    let script = format!(
        r#"
local function bash(input) local out, err = sluice.bash(input); assert(out, tostring(err)); return out end
local first = sluice.spawn(function()
  bash{{command = "echo one >> first.log", mode = "hermetic", reads = {{}}, writes = {{"first.log"}}}}
  return "first"
end)
local deploy = sluice.spawn(function()
  sluice.sleep(200)
  return bash{{command = {:?}}}.exitCode
end)
print(sluice.json.encode(sluice.all{{first, deploy}}))
"#,
        WAITS.replace("waits.log", "deploy.log")
    );
    stopped_once(&ws, &script, "deploy.log", Duration::from_millis(200));
    let stopped = show_json(&ws, "last");
    let deploy = stopped["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["task"] == "0.2")
        .unwrap()
        .clone();
    assert_eq!(deploy["tier"], "irreversible", "{deploy:#}");
    let n = deploy["n"].as_i64().unwrap();

    std::fs::write(ws.file("go"), "").unwrap();
    let held = on_record(&ws, &["resume", "last"]);
    assert_eq!(held.code, 1, "{}{}", held.stdout, held.stderr);
    let want = format!("call #{n} (task 0.2, call 1, bash ");
    assert!(
        held.stderr.contains(&want)
            && held
                .stderr
                .contains("was irreversible and was stopped by SIGINT while it ran")
            && held.stderr.contains("resume with --retry-unknown"),
        "{want:?} missing:\n{}",
        held.stderr
    );
    assert_eq!(
        read(&ws, "deploy.log"),
        "start\n",
        "the stopped command ran again"
    );
    assert_eq!(
        read(&ws, "first.log"),
        "one\n",
        "task 0.1's command ran again"
    );

    let retried = on_record(&ws, &["resume", "last", "--retry-unknown"]);
    assert_eq!(retried.code, 0, "{}{}", retried.stdout, retried.stderr);
    assert_eq!(retried.stdout.trim(), r#"["first",0]"#);
    assert_eq!(read(&ws, "deploy.log"), "start\nstart\ndone\n");
    assert_eq!(
        read(&ws, "first.log"),
        "one\n",
        "task 0.1's command ran again"
    );
}

/// Runs `body` and returns `audit show last --json` and the text of
/// `audit show last`.
fn shown(ws: &Workspace, body: &str) -> (Value, String) {
    let script = format!(
        "local function bash(input) local out, err = sluice.bash(input); assert(out, tostring(err)); return out end\n{body}"
    );
    let path = script_file(ws.path(), &script);
    common::run_script_with(ws.path(), &path, &["--max-procs", "4"], &[]).ok();
    let text = on_record(ws, &["audit", "show", "last"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    (show_json(ws, "last"), text.stdout)
}

/// Each call's task and overlaps.
fn overlaps(show: &Value) -> Vec<(String, Vec<i64>)> {
    let calls = show["calls"].as_array().unwrap();
    calls
        .iter()
        .map(|c| {
            let list = c["overlaps"].as_array().expect("overlaps is a list");
            let ns = list.iter().map(|n| n.as_i64().unwrap()).collect();
            (c["task"].as_str().unwrap().to_string(), ns)
        })
        .collect()
}

/// The timeline's header cells.
fn header(text: &str) -> Vec<&str> {
    let line = text
        .lines()
        .find(|l| l.starts_with("#  "))
        .expect("a timeline");
    line.split_whitespace().collect()
}

const SLEEP: &str = r#"{command = "sleep 0.3", mode = "hermetic", reads = {}, writes = {}}"#;

#[test]
fn audit_show_names_the_calls_that_ran_together_and_the_task_of_each() {
    let ws = workspace();
    let (show, text) = shown(
        &ws,
        &format!(
            "local a = sluice.spawn(function() return bash{SLEEP}.exitCode end)\n\
             local b = sluice.spawn(function() return bash{SLEEP}.exitCode end)\n\
             sluice.all{{a, b}}\n"
        ),
    );
    // Numbered as they finished: either command may be #1.
    let mut got = overlaps(&show);
    got.sort();
    let tasks: Vec<&str> = got.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(tasks, ["0.1", "0.2"], "{show:#}");
    let n = |task: &str| {
        let calls = show["calls"].as_array().unwrap();
        calls.iter().find(|c| c["task"] == task).unwrap()["n"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(got[0].1, [n("0.2")], "{show:#}");
    assert_eq!(got[1].1, [n("0.1")], "{show:#}");
    assert_eq!(
        header(&text),
        [
            "#", "TASK", "AT", "FLOW", "TIER", "DECISION", "ROUTE", "OUTCOME", "TOOK", "OVERLAPS",
            "INPUT"
        ]
    );
    let row = |n: &str| text.lines().find(|l| l.starts_with(n)).unwrap().to_string();
    assert!(row("#1 ").contains("  #2  "), "{text}");
    assert!(row("#2 ").contains("  #1  "), "{text}");
    assert!(
        text.contains("\nOVERLAPS: the calls that were running while this one ran"),
        "{text}"
    );
    let call = on_record(&ws, &["audit", "show", "last", "--call", "1"]);
    assert!(
        call.stdout
            .contains("overlaps     #2 (running while it ran)"),
        "{}",
        call.stdout
    );
}

#[test]
fn audit_show_of_calls_that_ran_one_after_another_names_no_overlap() {
    // Tasks awaited in turn, and two commands the scheduler runs one after
    // the other (an unhermetic command touches the whole workspace): their
    // times come from when each began to run, not from when it was issued.
    let ws = workspace();
    let (show, text) = shown(
        &ws,
        &format!(
            "sluice.spawn(function() return bash{SLEEP} end):await()\n\
             sluice.spawn(function() return bash{SLEEP} end):await()\n\
             local a = sluice.spawn(function() return bash{{command = \"sleep 0.3\"}} end)\n\
             local b = sluice.spawn(function() return bash{{command = \"sleep 0.3\"}} end)\n\
             sluice.all{{a, b}}\n"
        ),
    );
    let got = overlaps(&show);
    assert_eq!(got.len(), 4, "{show:#}");
    assert!(got.iter().all(|(_, ns)| ns.is_empty()), "{show:#}");
    let cells = header(&text);
    assert!(
        cells.contains(&"TASK") && !cells.contains(&"OVERLAPS"),
        "{text}"
    );
    assert!(!text.contains("OVERLAPS"), "{text}");
    // One task alone: the timeline as it always was.
    let (show, text) = shown(&ws, &format!("bash{SLEEP}\nbash{SLEEP}\n"));
    assert!(overlaps(&show)
        .iter()
        .all(|(t, ns)| t == "0" && ns.is_empty()));
    assert_eq!(
        header(&text),
        ["#", "AT", "FLOW", "TIER", "DECISION", "ROUTE", "OUTCOME", "TOOK", "INPUT"]
    );
}
