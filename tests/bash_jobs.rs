//! Background jobs through the real binary: `sluice.bash{..., background =
//! true}` returns a job object at once, whose live fields and `read`, `wait`
//! and `kill` methods follow the job; jobs never outlive the run, whether it
//! returns, errors or is interrupted; and the run's live-job limit.
//!
//! The run's grace period is 3 s, so every job here dies on TERM (plain
//! `sleep`), and a run that ends while jobs run must end well within it.

mod common;

use common::{
    exit_within, lua_json, pid_alive, pids_with_arg, read_stdout_line, run_lua, run_lua_with,
    spawn_lua_with, survivors_with_arg, unique_sleep, workspace,
};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Waits up to `limit` for every pid to be gone; true when they are.
fn all_gone(pids: &[i32], limit: Duration) -> bool {
    let t0 = Instant::now();
    while pids.iter().any(|&p| pid_alive(p)) {
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

fn pid_of(v: &Value) -> i32 {
    v.as_i64().unwrap_or_else(|| panic!("not a pid: {v}")) as i32
}

#[test]
fn a_background_job_returns_at_once_running_and_settles_with_its_exit_code() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"
        local t0 = sluice.now()
        local j = sluice.bash{command = "sleep 0.5; exit 3", background = true}
        local took = sluice.now() - t0
        emit({quick = took < 400, jobId = j.jobId, pidType = math.type(j.pid),
              status = j.status, exitCode = j.exitCode, signal = j.signal,
              isNil = j.exitCode == nil})
        emit({waited = j:wait(50), status = j.status})
        emit({waited = j:wait(5000), status = j.status, exitCode = j.exitCode,
              signalIsNil = j.signal == nil})
        emit({waited = j:wait(0), again = j:wait()})
        "#,
    );
    assert_eq!(
        out,
        [
            json!({"quick": true, "jobId": 1, "pidType": "integer", "status": "running", "isNil": true}),
            json!({"waited": false, "status": "running"}),
            json!({"waited": true, "status": "exited", "exitCode": 3, "signalIsNil": true}),
            json!({"waited": true, "again": true}),
        ]
    );
}

#[test]
fn job_read_returns_new_output_during_and_after_and_tostring_shows_the_state() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"
        local j = sluice.bash{command = "echo one; echo err1 >&2; sleep 0.5; echo two", background = true}
        emit({pid = j.pid, shown = tostring(j)})
        local out, err, lossy = "", "", false
        local t0 = sluice.now()
        while (out ~= "one\n" or err ~= "err1\n") and sluice.now() - t0 < 3000 do
          local r = j:read()
          out, err, lossy = out .. r.stdout, err .. r.stderr, lossy or r.lossy
          sluice.sleep(10)
        end
        emit({stdout = out, stderr = err, lossy = lossy, status = j.status})
        assert(j:wait(5000))
        emit(j:read())
        emit(j:read())
        emit({shown = tostring(j)})
        "#,
    );
    assert_eq!(out.len(), 5, "{out:?}");
    let pid = out[0]["pid"].as_i64().unwrap();
    assert_eq!(
        out[0],
        json!({"pid": pid, "shown": format!("job 1 (pid {pid}, running)")})
    );
    assert_eq!(
        out[1],
        json!({"stdout": "one\n", "stderr": "err1\n", "lossy": false, "status": "running"})
    );
    assert_eq!(
        out[2],
        json!({"stdout": "two\n", "stderr": "", "lossy": false})
    );
    assert_eq!(out[3], json!({"stdout": "", "stderr": "", "lossy": false}));
    assert_eq!(
        out[4],
        json!({"shown": format!("job 1 (pid {pid}, exited)")})
    );
}

#[test]
fn job_kill_stops_a_running_job_reports_killed_and_is_false_once_settled() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"
        local j = sluice.bash{command = "sleep 30", background = true}
        emit({pid = j.pid})
        local t0 = sluice.now()
        emit({killed = j:kill(), waited = j:wait(5000), quick = sluice.now() - t0 < 2000})
        emit({status = j.status, signal = j.signal, exitCodeIsNil = j.exitCode == nil,
              again = j:kill(), shown = tostring(j)})
        "#,
    );
    let pid = pid_of(&out[0]["pid"]);
    assert_eq!(
        out[1..],
        [
            json!({"killed": true, "waited": true, "quick": true}),
            // Confined (the default policy), the job leads a session in the
            // run's sandbox: the TERM reaches `sleep` itself, which it ends.
            json!({"status": "killed", "signal": "SIGTERM", "exitCodeIsNil": true,
                   "again": false, "shown": format!("job 1 (pid {pid}, killed)")}),
        ]
    );
    assert!(!pid_alive(pid), "job {pid} survived kill");
}

/// A job and its own child, both left running when the script ends; the
/// script prints both pids as `pid child`, then `end` decides how it ends.
/// The child's pid is checked as a host pid, so these scripts run under
/// [`common::UNCONFINED`] (a confined command prints the pids of its
/// own PID namespace); the confined case is
/// `confined_jobs_are_gone_once_killed_and_after_the_run`.
fn job_left_running(end: &str) -> String {
    format!(
        r#"
        local j = sluice.bash{{command = "sleep 30 & echo $!; wait", background = true}}
        local child, t0 = "", sluice.now()
        while not child:find("\n") and sluice.now() - t0 < 3000 do
          child = child .. j:read().stdout
          sluice.sleep(10)
        end
        print(j.pid .. " " .. child:gsub("\n", ""))
        {end}
        "#
    )
}

fn two_pids(line: &str) -> [i32; 2] {
    let pids: Vec<i32> = line
        .split(' ')
        .map(|p| p.parse().unwrap_or_else(|_| panic!("not pids: {line:?}")))
        .collect();
    [pids[0], pids[1]]
}

#[test]
fn a_job_still_running_when_the_script_returns_is_gone_after_the_run() {
    let ws = workspace();
    let t0 = Instant::now();
    let run = run_lua_with(
        ws.path(),
        &job_left_running("return"),
        &common::UNCONFINED,
        &[],
    )
    .ok();
    let took = t0.elapsed();
    let pids = two_pids(run.stdout.trim_end());
    assert!(
        pids.iter().all(|&p| !pid_alive(p)),
        "{pids:?} outlived the run"
    );
    assert!(
        took < Duration::from_millis(2500),
        "TERM suffices, no grace wait: {took:?}"
    );
    assert_eq!(run.stderr, "");
}

#[test]
fn a_job_still_running_when_the_script_errors_is_gone_after_the_run() {
    let ws = workspace();
    let run = run_lua_with(
        ws.path(),
        &job_left_running("error('boom')"),
        &common::UNCONFINED,
        &[],
    );
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    assert!(run.stderr.contains("boom"), "{}", run.stderr);
    let pids = two_pids(run.stdout.trim_end());
    assert!(
        pids.iter().all(|&p| !pid_alive(p)),
        "{pids:?} outlived the run"
    );
}

#[test]
fn sigint_while_a_job_runs_exits_130_and_the_job_is_gone() {
    let ws = workspace();
    let mut child = spawn_lua_with(
        ws.path(),
        &job_left_running("sluice.sleep(60000)"),
        &common::UNCONFINED,
        &[],
    );
    let pids = two_pids(&read_stdout_line(&mut child));
    assert!(pids.iter().all(|&p| pid_alive(p)), "{pids:?} not running");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let status = exit_within(&mut child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(130));
    assert!(
        pids.iter().all(|&p| !pid_alive(p)),
        "{pids:?} outlived the interrupted run"
    );
}

#[test]
fn confined_jobs_are_gone_once_killed_and_after_the_run() {
    // Under the default policy each job runs in its own PID namespace, so
    // its processes are found on the host by `sleep` arguments no other
    // process has. Job `a` is killed; job `b` and its own child are still
    // running when the run is interrupted.
    let ws = workspace();
    let (a, b) = (unique_sleep(), unique_sleep());
    let script = format!(
        r#"
        local a = sluice.bash{{command = "sleep {a}", background = true}}
        local b = sluice.bash{{command = "sleep {b} & echo $!; wait", background = true}}
        local child, t0 = "", sluice.now()
        while not child:find("\n") and sluice.now() - t0 < 3000 do
          child = child .. b:read().stdout
          sluice.sleep(10)
        end
        print("started")
        while sluice.bash{{command = "test -e seen"}}.exitCode ~= 0 do sluice.sleep(10) end
        print(tostring(a:kill()) .. " " .. tostring(a:wait(5000)) .. " " .. a.status)
        sluice.sleep(60000)
        "#
    );
    let mut child = spawn_lua_with(ws.path(), &script, &[], &[]);
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let mut next_line = || lines.next().expect("a line").unwrap();
    assert_eq!(next_line(), "started");
    let t0 = Instant::now();
    while pids_with_arg(&a).is_empty() || pids_with_arg(&b).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "the confined jobs' sleeps are not running: {:?} {:?}",
            pids_with_arg(&a),
            pids_with_arg(&b)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::fs::write(ws.file("seen"), "").unwrap();
    assert_eq!(next_line(), "true true killed");
    assert_eq!(
        survivors_with_arg(&a, Duration::ZERO),
        Vec::<i32>::new(),
        "job:kill did not reach the confined command"
    );
    assert!(!pids_with_arg(&b).is_empty(), "job b ended early");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let status = exit_within(&mut child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(130));
    assert_eq!(
        survivors_with_arg(&b, Duration::ZERO),
        Vec::<i32>::new(),
        "a confined job's child outlived the interrupted run"
    );
}

#[test]
fn confined_jobs_killed_as_they_start_leave_nothing_running() {
    // Under the default policy each job runs in its own PID namespace, so
    // its command is found on the host by a `sleep` argument no other
    // process has. Each job is killed at once, while bubblewrap may still be
    // setting up; 64 of them, as the window is narrow.
    let ws = workspace();
    let nap = unique_sleep();
    let script = format!(
        r#"
        for round = 1, 4 do
          local jobs = {{}}
          for i = 1, 16 do jobs[i] = assert(sluice.bash{{command = "sleep {nap}", background = true}}) end
          for i = 1, 16 do assert(jobs[i]:kill()) end
          for i = 1, 16 do assert(jobs[i]:wait(10000)) end
        end
        "#
    );
    run_lua(ws.path(), &script, &[]).ok();
    let left = survivors_with_arg(&nap, Duration::from_millis(500));
    // What survived is this test's own: end it by pid, so a failure
    // leaves nothing running.
    for &pid in &left {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    assert_eq!(
        left,
        Vec::<i32>::new(),
        "killed confined jobs' commands outlived the run"
    );
}

#[test]
fn the_seventeenth_live_job_is_refused_naming_the_limit_and_the_fix() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"
        local jobs = {}
        for i = 1, 16 do
          jobs[i] = assert(sluice.bash{command = "sleep 30", background = true})
        end
        local j, err = sluice.bash{command = "sleep 30", background = true}
        emit({refused = j == nil, err = err})
        -- Once one has settled, there is room again.
        assert(jobs[1]:kill() and jobs[1]:wait(5000))
        local k = assert(sluice.bash{command = "sleep 30", background = true})
        local pids = {}
        for i = 1, 16 do pids[i] = jobs[i].pid end
        pids[17] = k.pid
        emit({jobId = k.jobId, status = k.status, pids = pids})
        "#,
    );
    assert_eq!(
        out[0],
        json!({"refused": true, "err": {
            "code": "command_failed",
            "message": "this run already has 16 background jobs running, the most it allows; wait for one (job:wait) or stop one (job:kill) first, or raise the limit with sluice run --max-jobs N",
            "limit": 16,
        }})
    );
    assert_eq!(out[1]["jobId"], 17, "{}", out[1]);
    assert_eq!(out[1]["status"], "running");
    let pids: Vec<i32> = out[1]["pids"]
        .as_array()
        .unwrap()
        .iter()
        .map(pid_of)
        .collect();
    assert_eq!(pids.len(), 17);
    assert!(
        all_gone(&pids, Duration::ZERO),
        "jobs outlived the run: {:?}",
        pids.iter().filter(|&&p| pid_alive(p)).collect::<Vec<_>>()
    );
}

#[test]
fn timeout_ms_with_background_is_invalid_input_naming_timeout_ms() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"
        local j, err = sluice.bash{command = "sleep 30", background = true, timeoutMs = 1000}
        emit({started = j ~= nil, err = err})
        "#,
    );
    assert_eq!(
        out,
        [json!({"started": false, "err": {
            "code": "invalid_input",
            "field": "timeoutMs",
            "message": "a background job has no timeout; drop `timeoutMs` and use job:wait(ms) and job:kill()",
        }})]
    );
}

#[test]
fn job_wait_with_a_non_number_raises_a_lua_error_naming_job_wait() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        r#"
        local j = sluice.bash{command = "sleep 30", background = true}
        -- Not a tail call, so level 2 of the error is this line.
        local ok, e = pcall(function()
          local waited = j:wait("x")
          return waited
        end)
        emit({ok = ok, message = tostring(e), status = j.status, pid = j.pid})
        "#,
    );
    assert_eq!(out.len(), 1);
    let v = &out[0];
    assert_eq!(v["ok"], false);
    assert_eq!(v["status"], "running");
    let message = v["message"].as_str().unwrap();
    // Raised at the script's own line (the `j:wait("x")` call), not inside sluice.
    assert!(
        message.ends_with(
            ".lua:6: job:wait(ms): ms is a number of milliseconds, or nil to wait until the job ends"
        ),
        "{message}"
    );
    assert!(!pid_alive(pid_of(&v["pid"])), "job outlived the run");

    // Uncaught, it ends the run with exit 1 and the same words.
    let run = run_lua(
        ws.path(),
        "local j = sluice.bash{command = 'sleep 30', background = true}\nj:wait('x')\n",
        &[],
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains(".lua:2: job:wait(ms): ms is a number of milliseconds"),
        "{}",
        run.stderr
    );
}

#[test]
fn max_jobs_flag_sets_the_live_job_limit() {
    let ws = common::workspace();
    let run = common::run_lua_with(
        ws.path(),
        r#"local a = assert(sluice.bash{command = "sleep 30", background = true})
local b, err = sluice.bash{command = "sleep 30", background = true}
print(b == nil, err.code, err.limit)
a:kill(); a:wait(5000)
local c = sluice.bash{command = "true", background = true}
print(c ~= nil)
"#,
        &["--max-jobs", "1"],
        &[],
    )
    .ok();
    assert_eq!(run.stdout, "true\tcommand_failed\t1\ntrue\n");
}
