//! Stopping a run with SIGINT or SIGTERM: the run stops between flow steps,
//! exits 128 + the signal, and leaves no lock or staging file behind. The
//! first signal ends every run within 2 s with its record sealed
//! (`interrupted`), whatever the script is doing: a tight loop on any
//! thread, a policy decision, a finalizer, a caught interrupt, a sleep, a
//! command, a background job that ignores TERM. A second signal ends it at
//! once, still sealed.

mod common;

use common::{
    names_in, policy, spawn_lua, spawn_lua_with, survivors_with_arg, unique_sleep, workspace,
    Workspace,
};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::fs;
use std::io::{BufRead, BufReader};
use std::process::Child;
use std::time::{Duration, Instant};

/// Waits until the child prints `line` on stdout (so it is past its setup).
fn wait_for_line(child: &mut Child, line: &str) {
    let stdout = child.stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut got = String::new();
    reader.read_line(&mut got).unwrap();
    assert_eq!(got.trim_end(), line);
}

fn signal(child: &Child, sig: Signal) {
    kill(Pid::from_raw(child.id() as i32), sig).unwrap();
}

/// The child's exit, failing the test if it takes longer than `limit`.
fn wait_within(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            panic!("the run did not stop within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut s).unwrap();
    s
}

#[test]
fn sigint_stops_a_busy_lua_loop_with_exit_130() {
    let ws = workspace();
    let mut child = spawn_lua(
        ws.path(),
        "print('ready')\nlocal x = 0\nwhile true do x = x + 1 end\n",
        &[],
    );
    wait_for_line(&mut child, "ready");
    signal(&child, Signal::SIGINT);
    let status = wait_within(&mut child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(130));
    assert!(stderr_of(&mut child)
        .ends_with("sluice: interrupted by SIGINT; the run stopped between flow steps\n"));
}

#[test]
fn sigterm_stops_a_waiting_script_with_exit_143() {
    let ws = workspace();
    let mut child = spawn_lua(
        ws.path(),
        "print('ready')\nsluice.sleep(60000)\nprint('woke')\n",
        &[],
    );
    wait_for_line(&mut child, "ready");
    signal(&child, Signal::SIGTERM);
    let status = wait_within(&mut child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(143));
    assert!(stderr_of(&mut child).contains("interrupted by SIGTERM"));
}

#[test]
fn an_interrupted_editing_loop_leaves_no_lock_or_staging_file() {
    let ws = workspace();
    fs::write(ws.path().join("log.txt"), "END\n").unwrap();
    let mut child = spawn_lua(
        ws.path(),
        r#"print('ready')
        local i = 0
        while true do
          i = i + 1
          assert(sluice.edit{path = "log.txt", oldString = "END", newString = "line " .. i .. "\nEND"})
        end"#,
        &[],
    );
    wait_for_line(&mut child, "ready");
    std::thread::sleep(Duration::from_millis(200));
    signal(&child, Signal::SIGINT);
    let status = wait_within(&mut child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(130));
    assert_eq!(names_in(ws.path()), ["log.txt"], "only the file remains");
    let text = fs::read_to_string(ws.path().join("log.txt")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(*lines.last().unwrap(), "END");
    for (i, line) in lines[..lines.len() - 1].iter().enumerate() {
        assert_eq!(
            *line,
            format!("line {}", i + 1),
            "every completed edit is whole"
        );
    }
    assert!(lines.len() > 2, "the loop made progress before the signal");
}

/// What the issue promises: from the first signal to the end of the process.
const BOUND: Duration = Duration::from_secs(2);

/// A run stopped by one signal, and what came of it.
struct Stopped {
    /// From the signal to the process's exit.
    took: Duration,
    status: std::process::ExitStatus,
    stderr: String,
    ws: Workspace,
}

/// Starts `script` (which prints "ready" first) with `flags`, waits
/// `settle` past "ready", sends `sig`, and waits for the exit (failing the
/// test after 30 s, so a hang cannot hang the suite).
fn stop(script: &str, flags: &[&str], sig: Signal, settle: Duration) -> Stopped {
    stop_in(workspace(), script, flags, sig, settle)
}

/// [`stop`] in a workspace the test prepared.
fn stop_in(ws: Workspace, script: &str, flags: &[&str], sig: Signal, settle: Duration) -> Stopped {
    let mut child = spawn_lua_with(ws.path(), script, flags, &[]);
    wait_for_line(&mut child, "ready");
    std::thread::sleep(settle);
    let start = Instant::now();
    signal(&child, sig);
    let status = wait_within(&mut child, Duration::from_secs(30));
    let took = start.elapsed();
    let stderr = stderr_of(&mut child);
    Stopped {
        took,
        status,
        stderr,
        ws,
    }
}

/// `sluice audit ... --json` on the workspace's record.
fn audit_json(ws: &Workspace, args: &[&str]) -> (bool, Value) {
    let db = ws.file(".sluice/audit.db");
    let out = std::process::Command::new(common::sluice_bin())
        .arg("audit")
        .args(args)
        .arg("--json")
        .arg("--audit")
        .arg(&db)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "audit {args:?}: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), json)
}

/// Asserts the run's record verifies, sealed, and returns its status and
/// error as recorded.
fn sealed_record(ws: &Workspace) -> (String, String) {
    let (ok, verify) = audit_json(ws, &["verify"]);
    assert!(ok, "audit verify failed: {verify:#}");
    assert_eq!(verify["intact"], true, "{verify:#}");
    assert_eq!(verify["runs"].as_array().unwrap().len(), 1, "{verify:#}");
    assert_eq!(verify["runs"][0]["sealed"], true, "{verify:#}");
    let (_, show) = audit_json(ws, &["show", "last"]);
    let run = &show["run"];
    (
        run["status"].as_str().unwrap().to_string(),
        run["error"].as_str().unwrap_or_default().to_string(),
    )
}

/// The run ended on `sig` within the bound, exit 128 + sig, its record
/// sealed `interrupted` with `error`.
fn assert_stopped(s: &Stopped, sig: Signal, error: &str) {
    assert!(
        s.took < BOUND,
        "took {:?} to stop; stderr: {}",
        s.took,
        s.stderr
    );
    assert_eq!(s.status.code(), Some(128 + sig as i32), "{}", s.stderr);
    assert!(
        s.stderr.ends_with(&format!("sluice: {error}\n")),
        "{}",
        s.stderr
    );
    assert_eq!(
        sealed_record(&s.ws),
        ("interrupted".to_string(), error.to_string())
    );
}

const STOPPED_BETWEEN_STEPS: &str = "the run stopped between flow steps";
const BACKSTOP: &str = "it did not stop within 1000 ms of the signal (a finalizer, a caught interrupt or a blocked call), so sluice ended it at once";

#[test]
fn the_first_signal_ends_a_tight_loop_on_the_main_thread_sealed() {
    let s = stop(
        "print('ready')\nlocal x = 0\nwhile true do x = x + 1 end\n",
        &[],
        Signal::SIGTERM,
        Duration::from_millis(200),
    );
    assert_stopped(
        &s,
        Signal::SIGTERM,
        &format!("interrupted by SIGTERM; {STOPPED_BETWEEN_STEPS}"),
    );
}

#[test]
fn the_first_signal_ends_a_tight_loop_inside_a_coroutine_sealed() {
    // Coroutines inherit the interrupt hook: no second signal is needed.
    let s = stop(
        "print('ready')\ncoroutine.wrap(function() coroutine.wrap(function() while true do end end)() end)()\n",
        &[],
        Signal::SIGINT,
        Duration::from_millis(200),
    );
    assert_stopped(
        &s,
        Signal::SIGINT,
        &format!("interrupted by SIGINT; {STOPPED_BETWEEN_STEPS}"),
    );
    assert!(
        s.took < Duration::from_millis(900),
        "took {:?}: the hook, not the backstop, stopped it",
        s.took
    );
}

#[test]
fn the_first_signal_ends_a_script_that_catches_the_interrupt_sealed() {
    // The hook's error is caught every time, so the backstop ends the run.
    let s = stop(
        "print('ready')\nwhile true do pcall(function() while true do end end) end\n",
        &[],
        Signal::SIGTERM,
        Duration::from_millis(200),
    );
    assert_stopped(
        &s,
        Signal::SIGTERM,
        &format!("interrupted by SIGTERM; {BACKSTOP}"),
    );
    assert!(s.took >= Duration::from_millis(900), "took {:?}", s.took);
}

#[test]
fn the_first_signal_ends_a_looping_finalizer_in_the_script_sealed() {
    // Lua runs finalizers with hooks off: only the backstop can end this.
    let s = stop(
        "print('ready')\nsetmetatable({}, {__gc = function() while true do end end})\ncollectgarbage()\nprint('never')\n",
        &[],
        Signal::SIGTERM,
        Duration::from_millis(200),
    );
    assert_stopped(
        &s,
        Signal::SIGTERM,
        &format!("interrupted by SIGTERM; {BACKSTOP}"),
    );
}

#[test]
fn a_signal_ends_a_process_whose_finalizer_loops_after_the_run_ended() {
    // The run ends (sealed `ok`); closing the Lua state then runs a looping
    // finalizer. A signal still ends the process within the bound.
    let s = stop(
        "KEEP = setmetatable({}, {__gc = function() while true do end end})\nprint('ready')\n",
        &[],
        Signal::SIGTERM,
        Duration::from_millis(300),
    );
    assert!(s.took < BOUND, "took {:?}", s.took);
    assert_eq!(s.status.code(), Some(143), "{}", s.stderr);
    assert!(
        s.stderr
            .contains("the run had ended, but the process did not exit"),
        "{}",
        s.stderr
    );
    assert_eq!(sealed_record(&s.ws), ("ok".to_string(), String::new()));
}

#[test]
fn the_first_signal_ends_a_run_busy_in_policy_decisions() {
    // Each decision spends up to its 1 s time limit in C calls the
    // instruction hook cannot see; the budget check sees the stop request.
    let ws = workspace();
    std::fs::write(ws.file("a.txt"), "a\n").unwrap();
    let pol = policy(
        &ws,
        "slow.lua",
        "local p = require(\"sluice.policy\")\nreturn { rules = { p.allow \"fs:read:${workspace}/**\" },\n  \
         decide = function(req) for i = 1, 1000000 do local s = (\"x\"):rep(1500000) end end }\n",
    );
    let s = stop_in(
        ws,
        "print('ready')\nwhile true do sluice.read{path = 'a.txt'} end\n",
        &["--policy", &pol],
        Signal::SIGTERM,
        Duration::from_millis(1500),
    );
    assert_stopped(
        &s,
        Signal::SIGTERM,
        &format!("interrupted by SIGTERM; {STOPPED_BETWEEN_STEPS}"),
    );
}

#[test]
fn the_first_signal_ends_a_long_sleep_sealed() {
    let s = stop(
        "print('ready')\nsluice.sleep(600000)\nprint('woke')\n",
        &[],
        Signal::SIGTERM,
        Duration::from_millis(100),
    );
    assert_stopped(
        &s,
        Signal::SIGTERM,
        &format!("interrupted by SIGTERM; {STOPPED_BETWEEN_STEPS}"),
    );
}

#[test]
fn the_first_signal_ends_a_wait_on_a_command_that_ignores_term_sealed() {
    let marker = unique_sleep();
    let s = stop(
        &format!("print('ready')\nsluice.bash{{command = \"trap '' TERM; sleep {marker}\"}}\n"),
        &[],
        Signal::SIGINT,
        Duration::from_millis(500),
    );
    assert_stopped(
        &s,
        Signal::SIGINT,
        &format!("interrupted by SIGINT; {STOPPED_BETWEEN_STEPS}"),
    );
    assert_eq!(
        survivors_with_arg(&marker, Duration::from_secs(2)),
        Vec::<i32>::new()
    );
}

#[test]
fn the_first_signal_ends_a_run_whose_background_job_ignores_term_sealed() {
    let marker = unique_sleep();
    let s = stop(
        &format!(
            "sluice.bash{{command = \"trap '' TERM; sleep {marker}\", background = true}}\nprint('ready')\nsluice.sleep(600000)\n"
        ),
        &[],
        Signal::SIGTERM,
        Duration::from_millis(500),
    );
    assert_stopped(
        &s,
        Signal::SIGTERM,
        &format!("interrupted by SIGTERM; {STOPPED_BETWEEN_STEPS}"),
    );
    assert_eq!(
        survivors_with_arg(&marker, Duration::from_secs(2)),
        Vec::<i32>::new()
    );
}

#[test]
fn a_second_signal_ends_the_run_at_once_still_sealed() {
    // The interrupt is caught each time, so only the backstop can end the
    // run; the second signal brings it forward.
    let ws = workspace();
    let mut child = spawn_lua(
        ws.path(),
        "print('ready')\nwhile true do pcall(function() while true do end end) end\n",
        &[],
    );
    wait_for_line(&mut child, "ready");
    signal(&child, Signal::SIGINT);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first signal waits for the run to stop by itself"
    );
    let start = Instant::now();
    signal(&child, Signal::SIGINT);
    let status = wait_within(&mut child, Duration::from_secs(30));
    let took = start.elapsed();
    assert!(
        took < Duration::from_millis(500),
        "took {took:?} after the second signal"
    );
    assert_eq!(status.code(), Some(130));
    let stderr = stderr_of(&mut child);
    assert!(
        stderr.contains("send the signal again to stop at once"),
        "{stderr}"
    );
    let error = "interrupted by SIGINT; a second signal came, so sluice ended it at once";
    assert!(stderr.ends_with(&format!("sluice: {error}\n")), "{stderr}");
    assert_eq!(
        sealed_record(&ws),
        ("interrupted".to_string(), error.to_string())
    );
}

#[test]
fn the_first_signal_ends_a_grep_stuck_in_a_huge_file_sealed() {
    // A pattern that takes minutes over 30 MB on one line, with the
    // longest timeoutMs: only the stop request ends it.
    let ws = workspace();
    std::fs::write(ws.file("big.txt"), vec![b'a'; 30_000_000]).unwrap();
    let s = stop_in(
        ws,
        "print('ready')\nlocal r, e = sluice.grep{pattern = 'a{100}{100}', timeoutMs = 600000}\nprint(e and e.code)\n",
        &[],
        Signal::SIGTERM,
        Duration::from_millis(1000),
    );
    assert_stopped(
        &s,
        Signal::SIGTERM,
        &format!("interrupted by SIGTERM; {STOPPED_BETWEEN_STEPS}"),
    );
    // The grep itself is recorded as stopped by the interrupt.
    let (_, show) = audit_json(&s.ws, &["show", "last"]);
    let call = &show["calls"][0];
    assert_eq!(call["flow"], "grep", "{show:#}");
    let error = &call["error"];
    assert_eq!(error["code"], "timeout", "{call:#}");
    assert_eq!(error["interrupted"], "SIGTERM", "{call:#}");
}

#[test]
fn the_first_signal_ends_a_glob_over_a_tree_whose_every_path_is_judged_slowly() {
    // 20,000 paths, each judged by a hook that takes milliseconds: a walk
    // of about a minute.
    let ws = workspace();
    for d in 0..80 {
        let dir = ws.file(&format!("d{d:02}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..250 {
            std::fs::write(dir.join(format!("f{f:03}.txt")), "x\n").unwrap();
        }
    }
    let pol = policy(
        &ws,
        "slow.lua",
        "local p = require(\"sluice.policy\")\nreturn { rules = { p.allow \"fs:read:${workspace}\", p.allow \"fs:read:${workspace}/**\" },\n  \
         decide = function(req) for i = 1, 200000 do end end }\n",
    );
    let s = stop_in(
        ws,
        "print('ready')\nlocal r, e = sluice.glob{pattern = '**/*.txt', timeoutMs = 600000}\nprint(e and e.code)\n",
        &["--policy", &pol],
        Signal::SIGINT,
        Duration::from_millis(1000),
    );
    assert_stopped(
        &s,
        Signal::SIGINT,
        &format!("interrupted by SIGINT; {STOPPED_BETWEEN_STEPS}"),
    );
    let (_, show) = audit_json(&s.ws, &["show", "last"]);
    let error = &show["calls"][0]["error"];
    assert_eq!(error["code"], "timeout", "{show:#}");
    assert_eq!(error["interrupted"], "SIGINT");
    assert!(error["total"].as_u64().unwrap() < 20_000, "{error}");
}

#[test]
fn the_first_signal_ends_a_fetch_waiting_on_a_silent_server_sealed() {
    // A server that accepts and never answers; the fetch would wait its
    // whole 120 s timeout.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut open = Vec::new();
        while let Ok((conn, _)) = listener.accept() {
            open.push(conn);
            if open.len() > 4 {
                break;
            }
        }
    });
    let origin = format!("http://127.0.0.1:{port}");
    let s = stop(
        &format!("print('ready')\nlocal r, e = sluice.fetch{{url = '{origin}/slow', timeout = 120}}\nprint(e and e.code)\n"),
        &["--approve", &format!("net:private:{origin}")],
        Signal::SIGTERM,
        Duration::from_millis(500),
    );
    assert_stopped(
        &s,
        Signal::SIGTERM,
        &format!("interrupted by SIGTERM; {STOPPED_BETWEEN_STEPS}"),
    );
    drop(held);
}

/// `sluice ARGS --audit WS/.sluice/audit.db` (a resume or a replay), with
/// standard input closed.
fn sluice_on_record(ws: &Workspace, args: &[&str]) -> common::Run {
    std::process::Command::new(common::sluice_bin())
        .args(args)
        .arg("--audit")
        .arg(ws.file(".sluice/audit.db"))
        .stdin(std::process::Stdio::null())
        .env("SLUICE_CACHE_DIR", common::caches_of(ws.path()))
        .output()
        .unwrap()
        .into()
}

/// A command that prints, then waits until the workspace holds `go` (30 s
/// at most), then prints again: stopped mid-way by a signal, and finished
/// at once by a resume once the test made `go`.
const WAITS_FOR_GO: &str =
    "echo before; echo warn >&2; i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; echo done";

#[test]
fn ctrl_c_during_a_command_records_it_stopped_with_its_output_so_far() {
    let marker = unique_sleep();
    let s = stop(
        &format!(
            "print('ready')\nsluice.bash{{command = \"echo before; echo warn >&2; sleep {marker}\"}}\nsluice.write{{path = 'never.txt', content = 'x'}}\n"
        ),
        &[],
        Signal::SIGINT,
        Duration::from_millis(500),
    );
    assert_stopped(
        &s,
        Signal::SIGINT,
        &format!("interrupted by SIGINT; {STOPPED_BETWEEN_STEPS}"),
    );
    assert!(
        s.stderr.contains("the running command is killed now, the script stops at its next step, and the record is sealed"),
        "{}",
        s.stderr
    );
    assert_eq!(
        survivors_with_arg(&marker, Duration::from_secs(2)),
        Vec::<i32>::new()
    );
    let (_, show) = audit_json(&s.ws, &["show", "last"]);
    let calls = show["calls"].as_array().unwrap();
    assert_eq!(
        calls.len(),
        1,
        "the script stopped at the command: {show:#}"
    );
    let call = &calls[0];
    assert_eq!(call["flow"], "bash");
    assert_eq!(call["outcome"], "error", "{call:#}");
    let error = &call["error"];
    assert_eq!(error["code"], "timeout", "{call:#}");
    assert_eq!(error["interrupted"], "SIGINT", "{call:#}");
    assert_eq!(error["stdout"], "before\n", "{call:#}");
    assert_eq!(error["stderr"], "warn\n", "{call:#}");
    assert!(!s.ws.file("never.txt").exists());
    // The timeline says STOPPED, not OUTCOME UNKNOWN.
    let text = std::process::Command::new(common::sluice_bin())
        .args(["audit", "show", "last", "--audit"])
        .arg(s.ws.file(".sluice/audit.db"))
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("STOPPED by SIGINT"), "{text}");
    assert!(!text.contains("UNKNOWN"), "{text}");
}

#[test]
fn resume_stops_at_an_irreversible_command_a_signal_stopped_until_told_to_retry() {
    let s = stop(
        &format!("print('ready')\nlocal r = sluice.bash{{command = '{WAITS_FOR_GO}'}}\nsluice.write{{path = 'after.txt', content = r.stdout}}\n"),
        &[],
        Signal::SIGINT,
        Duration::from_millis(500),
    );
    assert_eq!(s.status.code(), Some(130), "{}", s.stderr);
    std::fs::write(s.ws.file("go"), "").unwrap();
    let resumed = sluice_on_record(&s.ws, &["resume", "last"]);
    assert_eq!(resumed.code, 1, "{}", resumed.stderr);
    assert!(
        resumed.stderr.contains(
            "was irreversible and was stopped by SIGINT while it ran (sluice killed it after "
        ),
        "{}",
        resumed.stderr
    );
    assert!(
        resumed.stderr.contains(
            r#"it had printed stdout "before\n", stderr "warn\n". Resume does not run it again by itself: check what it did, then resume with --retry-unknown to run it again"#
        ),
        "{}",
        resumed.stderr
    );
    assert!(
        resumed.stderr.contains("call #1 (task 0, call 1, bash "),
        "{}",
        resumed.stderr
    );
    assert!(!s.ws.file("after.txt").exists());
    // The halted resume keeps the stopped call, so resuming it stops there
    // too; with the flag the command runs again, to its end.
    let again = sluice_on_record(&s.ws, &["resume", "last"]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(
        again.stderr.contains("was stopped by SIGINT"),
        "{}",
        again.stderr
    );
    let retried = sluice_on_record(&s.ws, &["resume", "last", "--retry-unknown"]);
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    assert_eq!(
        fs::read_to_string(s.ws.file("after.txt")).unwrap(),
        "before\ndone\n"
    );
}

#[test]
fn resume_runs_a_compensable_command_a_signal_stopped_again_without_a_flag() {
    // Hermetic mode makes the command compensable: it did part of
    // declared work, so running it again is the resume's to do.
    let s = stop(
        "print('ready')\nlocal r = sluice.bash{mode = 'hermetic', reads = {'go'}, writes = {}, \
         command = 'echo before; until test -e go; do sleep 0.05; done; echo done'}\n\
         sluice.write{path = 'after.txt', content = r.stdout}\n",
        &[],
        Signal::SIGTERM,
        Duration::from_millis(500),
    );
    assert_eq!(s.status.code(), Some(143), "{}", s.stderr);
    let (_, show) = audit_json(&s.ws, &["show", "last"]);
    assert_eq!(show["calls"][0]["tier"], "compensable", "{show:#}");
    assert_eq!(
        show["calls"][0]["error"]["interrupted"], "SIGTERM",
        "{show:#}"
    );
    std::fs::write(s.ws.file("go"), "").unwrap();
    let resumed = sluice_on_record(&s.ws, &["resume", "last"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(
        resumed
            .stderr
            .contains("0 calls answered from the record, then live"),
        "{}",
        resumed.stderr
    );
    assert_eq!(
        fs::read_to_string(s.ws.file("after.txt")).unwrap(),
        "before\ndone\n"
    );
}

#[test]
fn a_sluice_killed_with_sigkill_mid_command_leaves_the_outcome_unknown() {
    // Nothing of sluice runs after SIGKILL: the record must not claim an
    // outcome, and resume must not run the command again by itself.
    let marker = unique_sleep();
    let ws = workspace();
    let mut child = spawn_lua(
        ws.path(),
        &format!("print('ready')\nsluice.bash{{command = 'echo before; sleep {marker}'}}\n"),
        &[],
    );
    wait_for_line(&mut child, "ready");
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, Signal::SIGKILL);
    let status = wait_within(&mut child, Duration::from_secs(5));
    assert_eq!(status.code(), None);
    for pid in common::pids_with_arg(&marker) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    let (_, show) = audit_json(&ws, &["show", "last"]);
    assert_eq!(show["run"]["status"], "interrupted", "{show:#}");
    assert_eq!(show["calls"][0]["outcome"], "unknown", "{show:#}");
    assert_eq!(show["calls"][0]["error"], Value::Null, "{show:#}");
    let resumed = sluice_on_record(&ws, &["resume", "last"]);
    assert_eq!(resumed.code, 1, "{}", resumed.stderr);
    assert!(
        resumed
            .stderr
            .contains("was irreversible and its outcome is unknown"),
        "{}",
        resumed.stderr
    );
}

#[test]
fn ctrl_c_during_shell_command_records_it_stopped_with_its_output_so_far() {
    let marker = unique_sleep();
    let s = stop(
        &format!(
            "print('ready')\nsluice.shell_command{{command = 'echo before; sleep {marker}'}}\n"
        ),
        &[],
        Signal::SIGINT,
        Duration::from_millis(500),
    );
    assert_stopped(
        &s,
        Signal::SIGINT,
        &format!("interrupted by SIGINT; {STOPPED_BETWEEN_STEPS}"),
    );
    let (_, show) = audit_json(&s.ws, &["show", "last"]);
    let error = &show["calls"][0]["error"];
    assert_eq!(show["calls"][0]["flow"], "shell_command", "{show:#}");
    assert_eq!(error["code"], "timeout", "{show:#}");
    assert_eq!(error["interrupted"], "SIGINT", "{show:#}");
    assert!(
        error["output"]
            .as_str()
            .unwrap()
            .ends_with("Output:\nbefore\n"),
        "{show:#}"
    );
}

/// Ctrl-C in a terminal sends SIGINT to the whole foreground process
/// group, sluice's: the command it runs is stopped by sluice, not killed
/// under it by the signal (which left its row `ok` with the signal's exit
/// code), and `audit show` says it was stopped.
#[test]
fn ctrl_c_to_the_whole_process_group_records_the_command_stopped() {
    use std::os::unix::process::CommandExt;
    let marker = unique_sleep();
    let ws = workspace();
    let script = common::script_file(
        ws.path(),
        &format!("print('ready')\nsluice.bash{{command = 'echo before; sleep {marker}'}}\n"),
    );
    let mut child = common::sluice_run(ws.path(), &script, &[], &[])
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn sluice");
    wait_for_line(&mut child, "ready");
    std::thread::sleep(Duration::from_millis(500));
    // As the terminal does: to the group, whose id is sluice's pid.
    kill(Pid::from_raw(-(child.id() as i32)), Signal::SIGINT).unwrap();
    let status = wait_within(&mut child, Duration::from_secs(10));
    let stderr = stderr_of(&mut child);
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(survivors_with_arg(&marker, Duration::from_secs(2)).is_empty());
    let (_, show) = audit_json(&ws, &["show", "last"]);
    let call = &show["calls"][0];
    assert_eq!(call["outcome"], "error", "{show:#}");
    assert_eq!(call["error"]["interrupted"], "SIGINT", "{show:#}");
    let text = sluice_on_record(&ws, &["audit", "show", "last"]);
    let row = text
        .stdout
        .lines()
        .find(|l| l.starts_with("#1 "))
        .unwrap_or_else(|| panic!("no row of call #1: {}", text.stdout));
    assert!(row.contains(" STOPPED by SIGINT "), "{row}");
}
