//! Attacks on stopped commands, resume (`--live-from` included), and the
//! record's folder.
//!
//! - a stop (SIGINT, SIGTERM) leaves nothing running: not a command that
//!   traps the signals, forks into a new session, double-forks or runs
//!   `nohup`, nor a background job doing so, under bubblewrap and landlock;
//! - the record says STOPPED only for a command the stop cut short, and
//!   keeps the outcome of one that had finished (its leftovers being wound
//!   down when the stop came), never OUTCOME UNKNOWN for it;
//! - resume never runs again an irreversible call that was stopped or
//!   whose outcome is unknown without `--retry-unknown`: not after going
//!   live past a re-judged refusal, not from `--live-from`'s #N on;
//! - `--live-from`'s live part is judged under the policy and approvals
//!   given to the resume; a resume of a resume with N past the run's own
//!   calls repeats nothing the older run did;
//! - a `.sluice` that is a symlink, a `.gitignore` that is a symlink or a
//!   folder, `--audit` into a `.sluice` elsewhere, `last~N` past u64.

mod common;

use common::*;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::fs;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A stopped run ends within this (README: 2 s), with margin for a loaded
/// machine.
const BOUND: Duration = Duration::from_secs(4);

/// Waits until the child prints `line` on stdout.
fn wait_for_line(child: &mut Child, line: &str) {
    let mut got = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut got)
        .unwrap();
    assert_eq!(got.trim_end(), line);
}

/// Runs `script` (which prints `ready`) with `flags` in `ws`, sends `sig`
/// `settle` after `ready`; the exit code and how long the stop took.
fn stop_run(
    ws: &Workspace,
    script: &str,
    flags: &[&str],
    sig: Signal,
    settle: Duration,
) -> (i32, Duration) {
    let mut child = spawn_lua_with(ws.path(), script, flags, &[]);
    wait_for_line(&mut child, "ready");
    std::thread::sleep(settle);
    let start = Instant::now();
    kill(Pid::from_raw(child.id() as i32), sig).unwrap();
    let status = exit_within(&mut child, Duration::from_secs(30));
    (status.code().unwrap_or(-1), start.elapsed())
}

/// `sluice ARGS --audit WS/.sluice/audit.db`, standard input closed.
fn on_record(ws: &Workspace, args: &[&str]) -> Run {
    Command::new(sluice_bin())
        .args(args)
        .arg("--audit")
        .arg(ws.file(".sluice/audit.db"))
        .stdin(Stdio::null())
        .env("SLUICE_CACHE_DIR", caches_of(ws.path()))
        .output()
        .unwrap()
        .into()
}

/// `sluice audit show RUN --json`.
fn show(ws: &Workspace, run: &str) -> Value {
    let out = on_record(ws, &["audit", "show", run, "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// Every process a command starts: it ignores TERM, INT and HUP, forks a
/// child into a new session, double-forks, `nohup`s one, prints, waits.
fn escaping(marker: &str) -> String {
    format!(
        "trap '' TERM INT HUP; setsid sleep {marker} & ( ( sleep {marker} & ) & ); \
         nohup sleep {marker} >/dev/null 2>&1 & echo before; sleep {marker}"
    )
}

#[test]
fn a_stop_leaves_nothing_of_a_command_that_traps_signals_and_leaves_its_group() {
    for runner in runners() {
        let ws = workspace();
        let marker = unique_sleep();
        let script = format!(
            "print('ready')\nsluice.bash{{command = {}}}\nsluice.write{{path = 'never.txt', content = 'x'}}\n",
            lua_str(&escaping(&marker))
        );
        let (code, took) = stop_run(
            &ws,
            &script,
            &["--sandbox", &runner],
            Signal::SIGINT,
            Duration::from_millis(700),
        );
        assert_eq!(code, 130, "{runner}");
        assert!(took < BOUND, "{runner}: took {took:?}");
        assert_eq!(
            survivors_with_arg(&marker, Duration::from_secs(2)),
            Vec::<i32>::new(),
            "{runner}"
        );
        let calls = show(&ws, "last")["calls"].clone();
        assert_eq!(calls.as_array().unwrap().len(), 1, "{runner}: {calls:#}");
        assert_eq!(calls[0]["outcome"], "error", "{runner}: {calls:#}");
        assert_eq!(
            calls[0]["error"]["interrupted"], "SIGINT",
            "{runner}: {calls:#}"
        );
        assert_eq!(
            calls[0]["error"]["stdout"], "before\n",
            "{runner}: {calls:#}"
        );
        assert!(!ws.file("never.txt").exists(), "{runner}");
    }
}

#[test]
fn a_stop_while_a_finished_command_winds_down_keeps_its_outcome_and_kills_the_rest() {
    // The command ends at once, leaving a process that ignores TERM: the
    // call winds it down (TERM, KILL 3 s later) when the stop comes. The
    // outcome is known, so the record keeps it: ok, not STOPPED (the
    // command was not cut short), not OUTCOME UNKNOWN.
    for runner in runners() {
        let ws = workspace();
        let marker = unique_sleep();
        let script = format!(
            "print('ready')\nsluice.bash{{command = \"trap '' TERM; sleep {marker} & echo done\"}}\nsluice.sleep(20000)\n"
        );
        let (code, took) = stop_run(
            &ws,
            &script,
            &["--sandbox", &runner],
            Signal::SIGTERM,
            Duration::from_millis(900),
        );
        assert_eq!(code, 143, "{runner}");
        assert!(took < BOUND, "{runner}: took {took:?}");
        assert_eq!(
            survivors_with_arg(&marker, Duration::from_secs(2)),
            Vec::<i32>::new(),
            "{runner}"
        );
        let shown = show(&ws, "last");
        let call = &shown["calls"][0];
        assert_eq!(call["outcome"], "ok", "{runner}: {shown:#}");
        assert_eq!(call["output"]["exitCode"], 0, "{runner}: {shown:#}");
        assert_eq!(call["output"]["stdout"], "done\n", "{runner}: {shown:#}");
        assert_eq!(shown["run"]["status"], "interrupted", "{runner}");
    }
}

#[test]
fn a_stop_leaves_nothing_of_a_background_job_that_escaped_its_group() {
    for runner in runners() {
        let ws = workspace();
        let marker = unique_sleep();
        let script = format!(
            "local j = sluice.bash{{command = {}, background = true}}\nprint('ready')\nsluice.sleep(20000)\n",
            lua_str(&escaping(&marker))
        );
        let (code, took) = stop_run(
            &ws,
            &script,
            &["--sandbox", &runner],
            Signal::SIGTERM,
            Duration::from_millis(700),
        );
        assert_eq!(code, 143, "{runner}");
        assert!(took < BOUND, "{runner}: took {took:?}");
        assert_eq!(
            survivors_with_arg(&marker, Duration::from_secs(2)),
            Vec::<i32>::new(),
            "{runner}"
        );
        // The job did start: its call is ok, and nothing says STOPPED.
        let calls = show(&ws, "last")["calls"].clone();
        assert_eq!(calls[0]["outcome"], "ok", "{runner}: {calls:#}");
        let text = on_record(&ws, &["audit", "show", "last"]).stdout;
        assert!(
            !text.contains("STOPPED") && !text.contains("UNKNOWN"),
            "{runner}: {text}"
        );
    }
}

/// A command that records each run in `runs.txt`, prints, then waits for
/// `go` in the workspace (30 s at most).
const COUNTED: &str = "echo run >> runs.txt; echo before; i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; echo done";

/// How often the counted command ran.
fn runs_of(ws: &Workspace) -> usize {
    fs::read_to_string(ws.file("runs.txt")).map_or(0, |t| t.lines().count())
}

/// `prelude`, then the counted command, irreversible (the default policy
/// runs it on the host, confined), stopped by SIGINT while it waits.
fn stopped_after(prelude: &str) -> Workspace {
    let ws = workspace();
    let script = format!("{prelude}print('ready')\nsluice.bash{{command = '{COUNTED}'}}\n");
    let (code, _) = stop_run(
        &ws,
        &script,
        &[],
        Signal::SIGINT,
        Duration::from_millis(700),
    );
    assert_eq!(code, 130);
    assert_eq!(runs_of(&ws), 1);
    let calls = show(&ws, "last")["calls"].clone();
    let last = calls.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["tier"], "irreversible", "{calls:#}");
    assert_eq!(last["error"]["interrupted"], "SIGINT", "{calls:#}");
    ws
}

#[test]
fn resume_after_a_rejudged_refusal_stops_at_the_stopped_irreversible_command() {
    let ws = workspace();
    let outside = outside_tmp(&ws, "rejudged").join("x.txt");
    let prelude = format!(
        "sluice.call('write', {{path = {}, content = 'x'}})\n",
        lua_str(&outside.display().to_string())
    );
    let script = format!("{prelude}print('ready')\nsluice.bash{{command = '{COUNTED}'}}\n");
    let (code, _) = stop_run(
        &ws,
        &script,
        &[],
        Signal::SIGINT,
        Duration::from_millis(700),
    );
    assert_eq!(code, 130);
    assert_eq!(runs_of(&ws), 1);
    fs::write(ws.file("go"), "").unwrap();
    let grant = format!("fs:write:{}", outside.display());
    let resumed = on_record(&ws, &["resume", "last", "--approve", &grant]);
    assert_eq!(resumed.code, 1, "{}", resumed.stderr);
    assert!(
        resumed
            .stderr
            .contains("was irreversible and was stopped by SIGINT while it ran"),
        "{}",
        resumed.stderr
    );
    // The refusal was judged again and ran; the command did not.
    assert!(outside.exists());
    assert_eq!(runs_of(&ws), 1);
    // The control: told to retry, it runs.
    let retried = on_record(
        &ws,
        &["resume", "last", "--approve", &grant, "--retry-unknown"],
    );
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    assert_eq!(runs_of(&ws), 2);
}

#[test]
fn live_from_never_reruns_a_stopped_irreversible_call_the_script_makes_again() {
    let ws = stopped_after("sluice.write{path = 'a.txt', content = 'one'}\n");
    fs::write(ws.file("go"), "").unwrap();
    fs::write(ws.file("a.txt"), "by hand").unwrap();
    for n in ["1", "2"] {
        let resumed = on_record(&ws, &["resume", "last", "--live-from", n]);
        assert_eq!(resumed.code, 1, "--live-from {n}: {}", resumed.stderr);
        assert!(
            resumed.stderr.contains("call #2 (task 0, call 2, bash ")
                && resumed
                    .stderr
                    .contains("was irreversible and was stopped by SIGINT"),
            "--live-from {n}: {}",
            resumed.stderr
        );
        assert_eq!(runs_of(&ws), 1, "--live-from {n}");
    }
    // From #1 the write ran live; the command held.
    assert_eq!(fs::read_to_string(ws.file("a.txt")).unwrap(), "one");
    // The control: a fixed script's changed call at #2 runs live.
    let fixed = script_file(
        ws.path(),
        &format!(
            "sluice.write{{path = 'a.txt', content = 'one'}}\nsluice.bash{{command = '{}'}}\n",
            COUNTED.replace("echo before", "echo fixed")
        ),
    );
    let resumed = on_record(
        &ws,
        &[
            "resume",
            "last",
            "--script",
            fixed.to_str().unwrap(),
            "--live-from",
            "2",
        ],
    );
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(runs_of(&ws), 2);
}

#[test]
fn live_from_stops_at_an_unknown_call_before_or_after_n_unless_told_to_retry() {
    // sluice killed outright mid-command: the intent is recorded, the
    // outcome is unknown.
    let ws = workspace();
    let mut child = spawn_lua(
        ws.path(),
        &format!("print('ready')\nsluice.bash{{command = '{COUNTED}'}}\nsluice.write{{path = 'b.txt', content = 'two'}}\n"),
        &[],
    );
    wait_for_line(&mut child, "ready");
    std::thread::sleep(Duration::from_millis(700));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    exit_within(&mut child, Duration::from_secs(5));
    // What sluice started goes with it (its sandbox dies with its parent).
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(runs_of(&ws), 1);
    assert_eq!(show(&ws, "last")["calls"][0]["outcome"], "unknown");
    fs::write(ws.file("go"), "").unwrap();
    for n in ["1", "2"] {
        let resumed = on_record(&ws, &["resume", "last", "--live-from", n]);
        assert_eq!(resumed.code, 1, "--live-from {n}: {}", resumed.stderr);
        assert!(
            resumed
                .stderr
                .contains("was irreversible and its outcome is unknown"),
            "--live-from {n}: {}",
            resumed.stderr
        );
        assert_eq!(runs_of(&ws), 1, "--live-from {n}");
        assert!(!ws.file("b.txt").exists());
    }
    let retried = on_record(
        &ws,
        &["resume", "last", "--live-from", "1", "--retry-unknown"],
    );
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    assert_eq!(runs_of(&ws), 2);
    assert_eq!(fs::read_to_string(ws.file("b.txt")).unwrap(), "two");
}

/// A policy that asks for every write in the workspace: only an approval
/// grants one.
const ASKS: &str = r#"local p = require("sluice.policy")
return { rules = { p.allow "fs:read:${workspace}/**", p.ask "fs:write:${workspace}/**" }, otherwise = "deny" }
"#;

#[test]
fn live_from_judges_the_live_part_under_the_policy_and_approvals_given_now() {
    let script = "for _, f in ipairs({'a.txt', 'b.txt'}) do\n  local ok, e = sluice.call('write', {path = f, content = 'x'})\n  print(f, ok and 'ok' or e.code)\nend\nerror('boom')\n";
    // Each resume below continues its own fresh run: a run resumed live
    // once may not be resumed again.
    let fresh = || {
        let ws = workspace();
        let asks = policy(&ws, "asks.lua", ASKS);
        let grant = format!("fs:write:{}/*.txt", ws.path().display());
        let run = run_lua_with(
            ws.path(),
            script,
            &["--policy", &asks, "--approve", &grant],
            &[],
        );
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert_eq!(run.stdout, "a.txt\tok\nb.txt\tok\n");
        fs::remove_file(ws.file("a.txt")).unwrap();
        fs::remove_file(ws.file("b.txt")).unwrap();
        (ws, asks, grant)
    };
    // Without the old run's --approve, the live part needs approval again.
    let (ws, asks, _) = fresh();
    let resumed = on_record(
        &ws,
        &["resume", "last", "--live-from", "2", "--policy", &asks],
    );
    assert_eq!(resumed.code, 1, "{}", resumed.stderr);
    assert_eq!(resumed.stdout, "a.txt\tok\nb.txt\tpermission_required\n");
    assert!(!ws.file("a.txt").exists(), "call 1 replayed");
    assert!(!ws.file("b.txt").exists());
    // A stricter policy given to the resume denies what was approved.
    let (ws, _, grant) = fresh();
    let strict = policy(
        &ws,
        "strict.lua",
        "local p = require(\"sluice.policy\")\nreturn { rules = { p.deny \"fs:write\" } }\n",
    );
    let resumed = on_record(
        &ws,
        &[
            "resume",
            "last",
            "--live-from",
            "1",
            "--policy",
            &strict,
            "--approve",
            &grant,
        ],
    );
    assert_eq!(resumed.code, 1, "{}", resumed.stderr);
    assert_eq!(
        resumed.stdout,
        "a.txt\tpermission_denied\nb.txt\tpermission_denied\n"
    );
    // The control: approved again, the live part writes.
    let (ws, asks, grant) = fresh();
    let resumed = on_record(
        &ws,
        &[
            "resume",
            "last",
            "--live-from",
            "2",
            "--policy",
            &asks,
            "--approve",
            &grant,
        ],
    );
    assert_eq!(resumed.code, 1, "{}", resumed.stderr);
    assert_eq!(resumed.stdout, "a.txt\tok\nb.txt\tok\n");
    assert!(!ws.file("a.txt").exists() && ws.file("b.txt").exists());
}

/// Run 1 makes three calls, the second a command that counts, and fails;
/// run 2 (a script that differs at call 2) stops there, having replayed
/// call 1 only: its record holds one call of its own, and run 1's calls 2
/// and 3 beyond it. The original script's path.
fn diverged_resume(ws: &Workspace) -> String {
    let original = "sluice.write{path = 'a.txt', content = 'one'}\nsluice.bash{command = 'echo run >> runs.txt'}\n\
        sluice.write{path = 'c.txt', content = 'three'}\nerror('boom')\n";
    let first = run_lua(ws.path(), original, &[]);
    assert_eq!(first.code, 1, "{}", first.stderr);
    assert_eq!(runs_of(ws), 1);
    let changed = script_file(ws.path(), &original.replace("echo run", "echo other"));
    let second = on_record(
        ws,
        &["resume", "last", "--script", changed.to_str().unwrap()],
    );
    assert_eq!(second.code, 1, "{}", second.stderr);
    assert!(
        second.stderr.contains("replay diverged at call #2"),
        "{}",
        second.stderr
    );
    assert_eq!(show(ws, "last")["calls"].as_array().unwrap().len(), 1);
    script_file(ws.path(), original)
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_resume_of_a_resume_repeats_nothing_of_the_older_run() {
    let ws = workspace();
    let original = diverged_resume(&ws);
    let third = on_record(&ws, &["resume", "last", "--script", &original]);
    assert_eq!(third.code, 1, "{}", third.stderr);
    assert!(third.stderr.contains("boom"), "{}", third.stderr);
    assert!(
        third.stderr.contains(": 3 calls answered from the record"),
        "{}",
        third.stderr
    );
    assert_eq!(runs_of(&ws), 1, "{}", third.stderr);
}

#[test]
fn a_resume_of_a_resume_live_from_n_runs_the_older_runs_calls_from_there_live() {
    // The control: N at the run's own end (its calls + 1) or within them
    // runs live from there, the older run's calls included, as asked.
    for n in ["2", "1"] {
        let ws = workspace();
        let original = diverged_resume(&ws);
        let third = on_record(
            &ws,
            &["resume", "last", "--script", &original, "--live-from", n],
        );
        assert_eq!(third.code, 1, "{n}: {}", third.stderr);
        assert_eq!(runs_of(&ws), 2, "{n}: {}", third.stderr);
    }
}

#[test]
fn a_sluice_folder_that_is_a_symlink_gets_no_gitignore_and_its_record_stays_out_of_reach() {
    let ws = workspace();
    fs::create_dir(ws.file("out")).unwrap();
    std::os::unix::fs::symlink("out", ws.file(".sluice")).unwrap();
    let script = "local function emit(v) print(sluice.json.encode(v)) end\n\
        local r, e = sluice.call('write', {path = 'out/audit.db', content = 'x'})\nemit(r and 'written' or e.code)\n\
        local c, e2 = sluice.call('bash', {command = 'echo x >> out/audit.db; echo x >> .sluice/audit.db; echo $?'})\n\
        emit(c and c.stdout or e2.code)\n";
    for runner in runners() {
        let run = run_lua_with(ws.path(), script, &["--sandbox", &runner], &[]).ok();
        let lines: Vec<&str> = run.stdout.lines().collect();
        assert_eq!(
            lines[0], "\"permission_denied\"",
            "{runner}: {}",
            run.stdout
        );
        assert_ne!(lines[1], "\"0\\n\"", "{runner}: {}", run.stdout);
    }
    // The record is intact, and the folder the link leads to is the
    // user's: no `*` hides its other files from git.
    assert_eq!(on_record(&ws, &["audit", "verify"]).code, 0);
    assert!(ws.file("out/audit.db").is_file());
    assert!(!ws.file("out/.gitignore").exists());
}

#[test]
fn a_gitignore_that_is_a_symlink_or_a_folder_is_left_alone() {
    let ws = workspace();
    let target = outside_tmp(&ws, "gitignore").join("theirs");
    fs::write(&target, "mine\n").unwrap();
    fs::create_dir(ws.file(".sluice")).unwrap();
    std::os::unix::fs::symlink(&target, ws.file(".sluice/.gitignore")).unwrap();
    run_lua(ws.path(), "print('ran')", &[]).ok();
    assert_eq!(fs::read_to_string(&target).unwrap(), "mine\n");
    // A dangling link is not followed either.
    let ws2 = workspace();
    let gone = outside_tmp(&ws2, "gitignore").join("gone");
    fs::create_dir(ws2.file(".sluice")).unwrap();
    std::os::unix::fs::symlink(&gone, ws2.file(".sluice/.gitignore")).unwrap();
    run_lua(ws2.path(), "print('ran')", &[]).ok();
    assert!(!gone.exists());
    // A folder in its place: the run still records.
    let ws3 = workspace();
    fs::create_dir_all(ws3.file(".sluice/.gitignore")).unwrap();
    run_lua(ws3.path(), "print('ran')", &[]).ok();
    assert!(ws3.file(".sluice/.gitignore").is_dir());
    assert_eq!(on_record(&ws3, &["audit", "verify"]).code, 0);
}

#[test]
fn an_audit_path_into_a_sluice_folder_elsewhere_gets_the_gitignore_there() {
    let ws = workspace();
    let elsewhere = outside_tmp(&ws, "records").join(".sluice");
    let db = elsewhere.join("audit.db");
    let run = run_lua_with(
        ws.path(),
        "print('ran')",
        &["--audit", db.to_str().unwrap()],
        &[],
    )
    .ok();
    assert_eq!(run.stdout, "ran\n");
    assert_eq!(
        fs::read_to_string(elsewhere.join(".gitignore")).unwrap(),
        "# sluice's audit record: never commit it.\n*\n"
    );
    assert!(!ws.file(".sluice").exists());
}

#[test]
fn last_n_however_large_names_no_run_and_never_wraps_to_one() {
    let ws = workspace();
    run_lua(ws.path(), "print('ran')", &[]).ok();
    let commands = |given: &str| -> Vec<Run> {
        [
            vec!["audit", "show", given],
            vec!["resume", given],
            vec!["replay", given],
        ]
        .iter()
        .map(|args| on_record(&ws, args))
        .collect()
    };
    for n in [
        "1",
        "9223372036854775807",
        "9223372036854775808",
        "18446744073709551615",
    ] {
        let given = format!("last~{n}");
        for out in commands(&given) {
            assert_eq!(out.code, 2, "{given}: {}", out.stderr);
            assert_eq!(
                out.stderr,
                format!(
                    "sluice: \"{given}\" names no run: the audit database holds 1 run, `last`\n"
                )
            );
        }
    }
    // Past a u64 the number is refused as malformed (src/audit/store.rs
    // pins that message), never read as a smaller one.
    for n in ["18446744073709551616", "99999999999999999999999999", "+1"] {
        let given = format!("last~{n}");
        for out in commands(&given) {
            assert_eq!(out.code, 2, "{given}: {}", out.stderr);
            assert!(
                out.stderr.contains("N in last~N is a whole number"),
                "{}",
                out.stderr
            );
        }
    }
    // The control: last~0 is the run.
    assert_eq!(on_record(&ws, &["audit", "show", "last~0"]).code, 0);
}

/// A run that failed at its first call (a write outside the workspace,
/// with nobody to approve it), before the counted command; its id, and
/// the `--approve` that lets a resume go on live, into the command (which
/// waits for `go`).
fn refused_before_the_command(ws: &Workspace) -> (String, String) {
    let outside = outside_tmp(ws, "claim").join("x.txt");
    let script = format!(
        "local ok, e = sluice.call('write', {{path = {}, content = 'x'}})\nif not ok then error(e.code) end\n\
         sluice.bash{{command = '{COUNTED}'}}\n",
        lua_str(&outside.display().to_string())
    );
    let run = run_lua(ws.path(), &script, &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let id = show(ws, "last")["run"]["id"].as_str().unwrap().to_string();
    (id, format!("fs:write:{}", outside.display()))
}

#[test]
fn resumes_of_one_run_started_at_once_run_its_calls_once() {
    let ws = workspace();
    let (id, grant) = refused_before_the_command(&ws);
    let db = ws.file(".sluice/audit.db");
    let resume = || {
        Command::new(sluice_bin())
            .args(["resume", &id, "--approve", &grant, "--audit"])
            .arg(&db)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env("SLUICE_CACHE_DIR", caches_of(ws.path()))
            .spawn()
            .unwrap()
    };
    let children: Vec<Child> = (0..4).map(|_| resume()).collect();
    // Whichever went live is waiting in the command: let it finish.
    let start = Instant::now();
    while runs_of(&ws) == 0 && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    fs::write(ws.file("go"), "").unwrap();
    let mut refused = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.code() == Some(2) {
            assert!(
                stderr.contains(&format!(
                    "run {id} is being resumed right now by {}:",
                    hostname()
                )) || stderr.contains(&format!("run {id} was already resumed as run ")),
                "{stderr}"
            );
            refused += 1;
        } else {
            assert_eq!(out.status.code(), Some(0), "{stderr}");
        }
    }
    assert_eq!(refused, 3);
    assert_eq!(runs_of(&ws), 1);
}

/// When process `pid` started, in clock ticks after boot (field 22 of
/// /proc/PID/stat), as a lease names it.
fn process_start_of(pid: u32) -> u64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

#[test]
fn a_resume_under_way_holds_off_another_resume_of_the_same_run() {
    let ws = workspace();
    let (id, grant) = refused_before_the_command(&ws);
    let mut first = Command::new(sluice_bin())
        .args(["resume", &id, "--approve", &grant, "--audit"])
        .arg(ws.file(".sluice/audit.db"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env("SLUICE_CACHE_DIR", caches_of(ws.path()))
        .spawn()
        .unwrap();
    let start = Instant::now();
    while runs_of(&ws) == 0 && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = on_record(&ws, &["resume", &id, "--approve", &grant]);
    assert_eq!(second.code, 2, "{}", second.stderr);
    // The refusal names the resume under way: its host, pid and start.
    assert_eq!(
        second.stderr,
        format!(
            "sluice: run {id} is being resumed right now by {}:{}:{}; only one resume of a run proceeds: \
             wait for that one to end, then resume the run it records instead (`sluice audit list` shows it), \
             so no call runs twice\n",
            hostname(),
            first.id(),
            process_start_of(first.id())
        )
    );
    fs::write(ws.file("go"), "").unwrap();
    assert!(exit_within(&mut first, Duration::from_secs(20)).success());
    assert_eq!(runs_of(&ws), 1);
    // Once it ended, the usual refusal names it.
    let third = on_record(&ws, &["resume", &id, "--approve", &grant]);
    assert_eq!(third.code, 2);
    assert!(
        third.stderr.contains("was already resumed as run"),
        "{}",
        third.stderr
    );
}
