//! Runs on a fleet: a real Temporal dev server, a real `sluice worker`
//! recording into a real PostgreSQL, and `sluice submit` as a user runs
//! them.

mod common;

use common::postgres::PgServer;
use common::temporal::TemporalServer;
use common::*;
use std::process::{Child, Command, Stdio};

/// A Temporal dev server and a fresh database of the shared PostgreSQL:
/// what every test of a fleet starts from.
struct Fleet {
    temporal: TemporalServer,
    pg: &'static PgServer,
    url: String,
}

impl Fleet {
    fn start() -> Fleet {
        let pg = PgServer::shared();
        Fleet {
            temporal: TemporalServer::start(),
            url: pg.fresh_database(),
            pg,
        }
    }
}

/// `sluice ARGS --audit URL` with the record's password.
fn on_record(pg: &PgServer, url: &str, args: &[&str]) -> std::process::Output {
    Command::new(sluice_bin())
        .args(args)
        .args(["--audit", url])
        .env("SLUICE_CREDENTIAL_AUDIT", pg.password())
        .output()
        .expect("run sluice")
}

/// A `sluice worker` on `queue`, recording into `url`; killed on drop.
struct Worker(Child);

impl Worker {
    fn start(temporal: &TemporalServer, queue: &str, url: &str, pg: &PgServer) -> Worker {
        Worker::start_with(temporal, queue, url, pg, &[], Stdio::null())
    }

    /// A worker given `extra` flags, its stderr to `stderr`.
    fn start_with(
        temporal: &TemporalServer,
        queue: &str,
        url: &str,
        pg: &PgServer,
        extra: &[&str],
        stderr: Stdio,
    ) -> Worker {
        let child = Command::new(sluice_bin())
            .args([
                "worker",
                "--temporal",
                &temporal.address(),
                "--task-queue",
                queue,
            ])
            .args(["--audit", url])
            .args(extra)
            .env("SLUICE_CREDENTIAL_AUDIT", pg.password())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start sluice worker");
        Worker(child)
    }
}

impl Worker {
    /// `n` workers on `queue`.
    fn many(
        temporal: &TemporalServer,
        queue: &str,
        url: &str,
        pg: &PgServer,
        n: usize,
    ) -> Vec<Worker> {
        (0..n)
            .map(|_| Worker::start(temporal, queue, url, pg))
            .collect()
    }

    /// Waits for the worker to exit: its exit code and what it said on
    /// stderr (when piped).
    fn finish(&mut self) -> (Option<i32>, String) {
        use std::io::Read;
        let mut said = String::new();
        if let Some(mut e) = self.0.stderr.take() {
            let _ = e.read_to_string(&mut said);
        }
        (self.0.wait().unwrap().code(), said)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn submit(temporal: &TemporalServer, queue: &str, ws: &std::path::Path, extra: &[&str]) -> Run {
    let script = script_file(
        ws,
        "sluice.write{path = 'hello.txt', content = 'hi from the fleet'}\n\
         print(sluice.read{path = 'hello.txt'}.content)\n",
    );
    Command::new(sluice_bin())
        .arg("submit")
        .arg(&script)
        .args(["--temporal", &temporal.address(), "--task-queue", queue])
        .arg("--workspace")
        .arg(ws)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("run sluice submit")
        .into()
}

#[test]
fn a_submitted_run_runs_on_a_worker_into_the_shared_record_and_its_id_is_never_reused() {
    let Fleet { temporal, pg, url } = Fleet::start();
    let _worker = Worker::start(&temporal, "q1", &url, pg);
    let ws = workspace();
    let out = submit(
        &temporal,
        "q1",
        ws.path(),
        &["--run-id", "fleet-1", "--wait"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "fleet-1\nhi from the fleet\n");
    assert_eq!(
        std::fs::read_to_string(ws.file("hello.txt")).unwrap(),
        "hi from the fleet"
    );
    let listed = on_record(pg, &url, &["audit", "list", "--json"]);
    let runs: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(runs["runs"][0]["id"], "fleet-1");
    assert_eq!(runs["runs"][0]["status"], "ok");

    let again = submit(&temporal, "q1", ws.path(), &["--run-id", "fleet-1"]);
    assert_eq!(again.code, 2, "{}{}", again.stdout, again.stderr);
    assert!(
        again.stderr.contains("cannot submit run fleet-1"),
        "{}",
        again.stderr
    );
}

/// The pid of a `sluice` process `worker` started (its run), if any.
fn run_of(worker: &Worker) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", worker.0.id()))
        .unwrap_or_default();
    let tasks = std::fs::read_dir(format!("/proc/{}/task", worker.0.id())).ok()?;
    let mut all: Vec<u32> = children
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    for task in tasks.flatten() {
        let more = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        all.extend(
            more.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    all.into_iter().next()
}

#[test]
fn a_worker_killed_between_calls_has_its_run_finished_by_another_without_repeating_a_call() {
    let Fleet { temporal, pg, url } = Fleet::start();
    let mut workers = Worker::many(&temporal, "q2", &url, pg, 2);
    let ws = workspace();
    let child = submit_waiting(&temporal, "q2", &ws, "fleet-2", &counting(4));
    // Into the sleep after call #2, its outcome committed.
    wait_lines(&ws, 2);
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(signal_busy(&mut workers, nix::sys::signal::Signal::SIGKILL));
    let out: Run = child.wait_with_output().unwrap().into();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(log(&ws), "1\n2\n3\n4\n", "no call ran twice, none was lost");
    // The killed worker's run, and the one another worker resumed it as.
    let listed = on_record(pg, &url, &["audit", "list", "--json", "--limit", "0"]);
    let v: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap_or_default();
    let mut all: Vec<String> = v["runs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["id"].as_str().unwrap_or(""),
                r["status"].as_str().unwrap_or("")
            )
        })
        .collect();
    all.sort();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all.contains(&"fleet-2 interrupted".to_string()), "{all:?}");
    assert!(all.iter().any(|r| r.ends_with(" ok")), "{all:?}");
}

/// A script that appends 1 to `n` to `log`, a second apart.
fn counting(n: u32) -> String {
    format!("for i = 1, {n} do\n  assert(sluice.bash{{command = 'echo ' .. i .. ' >> log'}})\n  sluice.sleep(1500)\nend\n")
}

/// What the counting script logged so far.
fn log(ws: &Workspace) -> String {
    std::fs::read_to_string(ws.file("log")).unwrap_or_default()
}

/// Waits (at most 90 s) until the counting script logged `n` lines.
fn wait_lines(ws: &Workspace, n: usize) {
    let started = std::time::Instant::now();
    while log(ws).lines().count() < n {
        assert!(
            started.elapsed().as_secs() < 90,
            "the run never made {n} calls"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_worker_stopped_with_sigstop_loses_its_run_to_another_and_starts_no_call_when_it_wakes() {
    use nix::sys::signal::{kill, Signal};
    let Fleet { temporal, pg, url } = Fleet::start();
    let mut workers = Worker::many(&temporal, "q3", &url, pg, 2);
    let ws = workspace();
    let child = submit_waiting(&temporal, "q3", &ws, "fleet-3", &counting(4));
    wait_lines(&ws, 2);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let stopped = signal_busy(&mut workers, Signal::SIGSTOP);
    let out: Run = child.wait_with_output().unwrap().into();
    // The run ended elsewhere; the stopped worker wakes.
    kill(
        nix::unistd::Pid::from_raw(stopped.0.id() as i32),
        Signal::SIGCONT,
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        log(&ws),
        "1\n2\n3\n4\n",
        "no call ran twice, none was lost, and the woken worker started none"
    );
    let verify = on_record(pg, &url, &["audit", "verify"]);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

#[test]
fn a_run_whose_workers_die_twice_is_finished_by_a_third_from_the_newest_resume() {
    let Fleet { temporal, pg, url } = Fleet::start();
    let mut workers = Worker::many(&temporal, "q4", &url, pg, 3);
    let ws = workspace();
    let child = submit_waiting(&temporal, "q4", &ws, "fleet-4", &counting(5));
    for lines in [2, 3] {
        wait_lines(&ws, lines);
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(signal_busy(&mut workers, nix::sys::signal::Signal::SIGKILL));
    }
    let out: Run = child.wait_with_output().unwrap().into();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        log(&ws),
        "1\n2\n3\n4\n5\n",
        "no call ran twice, none was lost"
    );
}

/// `sluice submit --wait` of `script` to `queue` as run `id`, heartbeat
/// timeout 3 s, running in the background.
fn submit_waiting(
    temporal: &TemporalServer,
    queue: &str,
    ws: &Workspace,
    id: &str,
    script: &str,
) -> Child {
    submit_with_heartbeat(temporal, queue, ws, (id, script), "3")
}

/// As [`submit_waiting`], heartbeat timeout `heartbeat` seconds.
fn submit_with_heartbeat(
    temporal: &TemporalServer,
    queue: &str,
    ws: &Workspace,
    (id, script): (&str, &str),
    heartbeat: &str,
) -> Child {
    let script = script_file(ws.path(), script);
    Command::new(sluice_bin())
        .arg("submit")
        .arg(&script)
        .args(["--temporal", &temporal.address(), "--task-queue", queue])
        .args(["--run-id", id, "--heartbeat-timeout", heartbeat, "--wait"])
        .arg("--workspace")
        .arg(ws.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sluice submit")
}

/// An operator's fleet command against `temporal`.
fn operator(temporal: &TemporalServer, args: &[&str]) -> Run {
    Command::new(sluice_bin())
        .args(args)
        .args(["--temporal", &temporal.address()])
        .stdin(Stdio::null())
        .output()
        .expect("run sluice")
        .into()
}

/// `sluice status RUN --json`, once `until` holds of it (at most 90 s).
fn status_once(
    temporal: &TemporalServer,
    run: &str,
    until: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let started = std::time::Instant::now();
    loop {
        let out = operator(temporal, &["status", run, "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
        if until(&v) {
            return v;
        }
        assert!(
            started.elapsed().as_secs() < 90,
            "run {run} never got there: {v} {}",
            out.stderr
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Kills the worker that runs a run with `signal`; it is removed from
/// `workers` (and returned).
fn signal_busy(workers: &mut Vec<Worker>, signal: nix::sys::signal::Signal) -> Worker {
    let started = std::time::Instant::now();
    let busy = loop {
        if let Some(i) = workers.iter().position(|w| run_of(w).is_some()) {
            break i;
        }
        assert!(started.elapsed().as_secs() < 30, "no worker runs the run");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let victim = workers.remove(busy);
    let pid = nix::unistd::Pid::from_raw(victim.0.id() as i32);
    nix::sys::signal::kill(pid, signal).unwrap();
    victim
}

#[test]
fn a_worker_killed_inside_an_irreversible_call_leaves_the_run_waiting_for_the_operator_who_has_it_run_once(
) {
    let Fleet { temporal, pg, url } = Fleet::start();
    let mut workers = Worker::many(&temporal, "q5", &url, pg, 2);
    let ws = workspace();
    std::fs::write(ws.file("hold"), "").unwrap();
    let child = submit_waiting(
        &temporal,
        "q5",
        &ws,
        "fleet-5",
        "assert(sluice.bash{command = 'echo x >> log; touch started; while [ -e hold ]; do sleep 0.05; done'})\n\
         assert(sluice.write{path = 'done', content = 'yes'})\n",
    );
    let started = std::time::Instant::now();
    while !ws.file("started").exists() {
        assert!(started.elapsed().as_secs() < 60, "the call never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(signal_busy(&mut workers, nix::sys::signal::Signal::SIGKILL));
    std::fs::remove_file(ws.file("hold")).unwrap();

    // Another worker resumes it and stops at the call: the run waits.
    let waiting = status_once(&temporal, "fleet-5", |v| v["phase"] == "waiting");
    let call = waiting["unknown"]["call"]
        .as_i64()
        .expect("the call is named");
    assert_eq!(waiting["unknown"]["flow"], "bash");
    assert_eq!(std::fs::read_to_string(ws.file("log")).unwrap(), "x\n");
    assert!(!ws.file("done").exists());
    // A word on another call is refused, naming the right one.
    let wrong = operator(
        &temporal,
        &[
            "resolve",
            "fleet-5",
            "--call",
            &(call + 7).to_string(),
            "ran",
        ],
    );
    assert_eq!(wrong.code, 2, "{}", wrong.stderr);
    assert!(
        wrong.stderr.contains(&format!("give --call {call}")),
        "{}",
        wrong.stderr
    );
    // Held for the word: no worker runs it meanwhile.
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(std::fs::read_to_string(ws.file("log")).unwrap(), "x\n");

    let word = operator(
        &temporal,
        &[
            "resolve",
            "fleet-5",
            "--call",
            &call.to_string(),
            "did-not-run",
        ],
    );
    assert_eq!(word.code, 0, "{}", word.stderr);
    let out: Run = child.wait_with_output().unwrap().into();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        std::fs::read_to_string(ws.file("log")).unwrap(),
        "x\nx\n",
        "run once more, once"
    );
    assert_eq!(std::fs::read_to_string(ws.file("done")).unwrap(), "yes");
    let ended = status_once(&temporal, "fleet-5", |v| v["engine"] == "COMPLETED");
    assert_eq!(ended["outcome"]["status"], "ok");
    // Attempt numbers grew across the chain of runs.
    let st = on_record(
        pg,
        &url,
        &[
            "status",
            "fleet-5",
            "--json",
            "--temporal",
            &temporal.address(),
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let attempts: Vec<i64> = v["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["attempt"].as_i64().unwrap())
        .collect();
    assert_eq!(attempts.len(), 3, "{v}");
    assert!(attempts.windows(2).all(|w| w[0] <= w[1]), "{attempts:?}");
    drop(workers);
}

/// The questions `sluice asks RUN --json` lists, once there are `n`.
fn questions(temporal: &TemporalServer, run: &str, n: usize) -> Vec<serde_json::Value> {
    let started = std::time::Instant::now();
    loop {
        let out = operator(temporal, &["asks", run, "--json"]);
        let qs: Vec<serde_json::Value> = out
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if qs.len() == n {
            return qs;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "run {run} never asked: {qs:?} {}",
            out.stderr
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn a_runs_asks_are_answered_with_sluice_answer_from_another_process_and_recorded_naming_who() {
    let Fleet { temporal, pg, url } = Fleet::start();
    let _worker = Worker::start(&temporal, "q6", &url, pg);
    let ws = workspace();
    let policy = ws.file("asking.lua");
    std::fs::write(
        &policy,
        "local p = require(\"sluice.policy\")\nreturn { rules = {\n  p.allow \"fs:read:${workspace}/**\",\n  \
         p.ask \"fs:write:${workspace}/**\",\n}, askTimeoutMs = 4000 }\n",
    )
    .unwrap();
    let script = script_file(
        ws.path(),
        "for _, f in ipairs{'a', 'b', 'c'} do\n  local ok, err = sluice.write{path = f, content = f}\n  \
         print(f, ok and 'written' or err.code)\nend\n",
    );
    let child = Command::new(sluice_bin())
        .arg("submit")
        .arg(&script)
        .args(["--temporal", &temporal.address(), "--task-queue", "q6"])
        .args(["--run-id", "fleet-6", "--wait", "--policy"])
        .arg(&policy)
        .arg("--workspace")
        .arg(ws.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let first = questions(&temporal, "fleet-6", 1);
    assert_eq!(first[0]["flow"], "write");
    assert!(
        first[0]["capability"]
            .as_str()
            .unwrap()
            .starts_with("fs:write:"),
        "{first:?}"
    );
    let id = first[0]["id"].as_str().unwrap().to_string();
    // An answer to a question the run does not have is refused.
    let stray = operator(&temporal, &["answer", "fleet-6", "ask-99", "allow"]);
    assert_eq!(stray.code, 2, "{}", stray.stderr);
    assert!(
        stray.stderr.contains("no pending question ask-99"),
        "{}",
        stray.stderr
    );
    // A yes sent ahead, straight to the workflow (past the CLI's check),
    // for the id the next question will take: dropped.
    let ahead = Command::new(common::temporal::cli())
        .args([
            "workflow",
            "signal",
            "--workflow-id",
            "fleet-6",
            "--name",
            "answer",
        ])
        .args([
            "--input",
            r#"{"ask":"ask-2","allow":true,"for_run":true,"by":"mallory"}"#,
        ])
        .args(["--address", &temporal.address()])
        .output()
        .unwrap();
    assert!(
        ahead.status.success(),
        "{}",
        String::from_utf8_lossy(&ahead.stderr)
    );
    let yes = operator(
        &temporal,
        &["answer", "fleet-6", &id, "allow", "--by", "alice"],
    );
    assert_eq!(yes.code, 0, "{}", yes.stderr);
    let second = questions(&temporal, "fleet-6", 1);
    assert_ne!(second[0]["id"], id.as_str());
    let id2 = second[0]["id"].as_str().unwrap().to_string();
    let no = operator(
        &temporal,
        &["answer", "fleet-6", &id2, "deny", "--by", "bob"],
    );
    assert_eq!(no.code, 0, "{}", no.stderr);
    // The third waits askTimeoutMs for nobody, then is permission_required.
    let out: Run = child.wait_with_output().unwrap().into();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout,
        "fleet-6\na\twritten\nb\tpermission_denied\nc\tpermission_required\n"
    );
    assert!(ws.file("a").exists() && !ws.file("b").exists() && !ws.file("c").exists());
    let db = url.rsplit('/').next().unwrap().split('?').next().unwrap();
    let decisions = pg.admin(
        db,
        "SELECT decisions FROM calls WHERE run = 'fleet-6' ORDER BY n",
    );
    assert!(
        decisions.contains("alice (sluice answer), once"),
        "{decisions}"
    );
}

#[test]
fn sigterm_drains_a_worker_a_run_that_ends_in_the_grace_ends_there_one_that_does_not_is_handed_back(
) {
    use nix::sys::signal::Signal;
    let Fleet { temporal, pg, url } = Fleet::start();
    let loop_of = |n: u32| {
        format!(
            "for i = 1, {n} do\n  assert(sluice.write{{path = 'log' .. i, content = tostring(i)}})\n  sluice.sleep(1000)\nend\n"
        )
    };
    let logs = |ws: &Workspace, n: u32| -> Vec<bool> {
        (1..=n)
            .map(|i| ws.file(&format!("log{i}")).exists())
            .collect()
    };
    for (queue, calls, grace, handed_back) in [("q7", 4, "30", false), ("q8", 12, "2", true)] {
        let mut workers = vec![Worker::start_with(
            &temporal,
            queue,
            &url,
            pg,
            &["--drain-grace", grace],
            Stdio::piped(),
        )];
        let ws = workspace();
        let id = format!("fleet-{queue}");
        let child = submit_waiting(&temporal, queue, &ws, &id, &loop_of(calls));
        let started = std::time::Instant::now();
        while !ws.file("log1").exists() {
            assert!(started.elapsed().as_secs() < 60, "the run never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // The second worker comes after the run went to the first.
        workers.push(Worker::start(&temporal, queue, &url, pg));
        let mut drained = signal_busy(&mut workers, Signal::SIGTERM);
        let (code, said) = drained.finish();
        assert_eq!(code, Some(0), "{said}");
        assert!(said.contains("worker drained"), "{said}");
        let out: Run = child.wait_with_output().unwrap().into();
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        assert!(logs(&ws, calls).iter().all(|x| *x), "every call made");
        let st = on_record(
            pg,
            &url,
            &["status", &id, "--json", "--temporal", &temporal.address()],
        );
        let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
        let parts = v["attempts"].as_array().unwrap().len();
        assert_eq!(parts > 1, handed_back, "{v}");
        if !handed_back {
            // Within the grace it ran to its end where it was.
            let drain_took = started.elapsed().as_secs();
            assert!(drain_took < 30, "{drain_took}");
        }
    }
}

#[test]
fn a_takeover_on_a_workspace_that_no_longer_holds_what_the_run_wrote_stops_the_run_naming_the_file()
{
    let Fleet { temporal, pg, url } = Fleet::start();
    let mut workers = Worker::many(&temporal, "q9", &url, pg, 2);
    let ws = workspace();
    let child = submit_waiting(
        &temporal,
        "q9",
        &ws,
        "fleet-9",
        "for i = 1, 6 do\n  assert(sluice.write{path = 'n.txt', content = tostring(i)})\n  sluice.sleep(1000)\nend\n",
    );
    let started = std::time::Instant::now();
    while std::fs::read_to_string(ws.file("n.txt")).unwrap_or_default() != "2" {
        assert!(
            started.elapsed().as_secs() < 60,
            "the run never wrote twice"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(signal_busy(&mut workers, nix::sys::signal::Signal::SIGKILL));
    // The shared tree changes under the run while no worker runs it.
    std::fs::write(ws.file("n.txt"), "someone else's\n").unwrap();
    let out: Run = child.wait_with_output().unwrap().into();
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("n.txt holds other bytes") && out.stderr.contains("not continued"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(ws.file("n.txt")).unwrap(),
        "someone else's\n",
        "no write after"
    );
}

#[test]
fn submit_refuses_a_credential_shaped_argument_before_reaching_the_engine_and_without_repeating_it()
{
    let ws = workspace();
    let script = script_file(ws.path(), "print(sluice.args[1])\n");
    let secret = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH";
    let out: Run = Command::new(sluice_bin())
        .arg("submit")
        .arg(&script)
        .args([
            "--temporal",
            "127.0.0.1:9",
            "--task-queue",
            "q",
            "--workspace",
        ])
        .arg(ws.path())
        .args(["--", secret])
        .output()
        .unwrap()
        .into();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("credential"), "{}", out.stderr);
    assert!(!out.stderr.contains(secret) && !out.stdout.contains(secret));
    // Nothing was sent: the engine's address is not even tried.
    assert!(
        !out.stderr.contains("cannot reach Temporal"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_worker_stopped_longer_than_its_pulse_but_not_its_heartbeat_has_its_run_resumed_not_failed() {
    use nix::sys::signal::{kill, Signal};
    let Fleet { temporal, pg, url } = Fleet::start();
    let mut workers = Worker::many(&temporal, "q10", &url, pg, 2);
    let ws = workspace();
    // Heartbeat timeout 8 s: the run's process ends itself after 4 s
    // without its worker's pulse, while the engine still counts the worker
    // alive.
    let child = submit_with_heartbeat(&temporal, "q10", &ws, ("fleet-10", &counting(4)), "8");
    wait_lines(&ws, 2);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let stopped = signal_busy(&mut workers, Signal::SIGSTOP);
    std::thread::sleep(std::time::Duration::from_millis(5500));
    kill(
        nix::unistd::Pid::from_raw(stopped.0.id() as i32),
        Signal::SIGCONT,
    )
    .unwrap();
    workers.push(stopped);
    let out: Run = child.wait_with_output().unwrap().into();
    assert_eq!(
        out.code, 0,
        "the run's end is not the watchdog's: {}{}",
        out.stdout, out.stderr
    );
    assert_eq!(log(&ws), "1\n2\n3\n4\n", "no call ran twice, none was lost");
}

/// The fleet page's one-machine setup, run by bash as it stands, with the
/// test's own Temporal port, PostgreSQL database, password, workspace and
/// HOME swapped in: the engine and a worker start in the background, the
/// submitted run prints what its script printed, `sluice runs` lists it
/// as ended, and the last line stops both (the worker drains, exit 0).
#[test]
fn the_fleet_pages_setup_runs_as_the_page_shows() {
    use std::os::unix::process::CommandExt;
    let pg = PgServer::shared();
    let url = pg.fresh_database();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace();
    std::fs::write(
        dir.path().join("fix-tests.lua"),
        "print(assert(sluice.bash{command = \"echo fixed on the fleet\"}).stdout)\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("team.lua"),
        "local p = require(\"sluice.policy\")\nreturn { rules = { p.programs, p.allow \"fs:read:${workspace}\", p.allow \"fs:read:${workspace}/**\", p.allow \"proc:spawn:echo *\" } }\n",
    )
    .unwrap();
    let mut script = common::guide::named_block("fleet.md", "fleet-try.sh");
    for (from, to) in [
        ("7233", port.as_str()),
        ("postgres://sluice@db.internal:5432/record", url.as_str()),
        ("'the-password'", &format!("'{}'", pg.password())),
        ("/shared/app", ws.path().to_str().unwrap()),
    ] {
        assert!(script.contains(from), "the page's setup has no {from:?}");
        script = script.replace(from, to);
    }
    let temporal_bin = common::temporal::cli().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}:{}",
        temporal_bin.display(),
        sluice_bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap()
    );
    let out_path = dir.path().join("out.txt");
    let child = Command::new("bash")
        .args(["-eu", "-c", &script])
        .current_dir(dir.path())
        .env("PATH", path)
        .env("HOME", dir.path())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(dir.path().join("err.txt")).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let mut child = child;
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > std::time::Duration::from_secs(240) {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    // Whatever the block left running goes with its group.
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    let out = std::fs::read_to_string(&out_path).unwrap();
    let err = std::fs::read_to_string(dir.path().join("err.txt")).unwrap();
    let status = status.unwrap_or_else(|| panic!("the setup did not end in 240 s:\n{out}\n{err}"));
    assert!(status.success(), "{status:?}\n{out}\n{err}");
    assert!(out.contains("fixed on the fleet\n"), "{out}\n{err}");
    // submit prints the run's id first; runs lists it completed.
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "fixed on the fleet")
        .unwrap();
    let id = lines[at - 1];
    let row = lines
        .iter()
        .skip(at)
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("runs does not list {id}:\n{out}"));
    assert_eq!(row.split_whitespace().nth(1), Some("COMPLETED"), "{out}");
}
