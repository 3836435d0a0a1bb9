//! A seeded chaos test of runs on a fleet: 3 `sluice worker`s on a real
//! Temporal dev server, recording into a real PostgreSQL of the test's own,
//! take 20 runs; each run writes and reads files, runs bash commands and
//! makes irreversible `sluice.http_post`s to a loopback server that counts
//! hits by the id in each body. Meanwhile, at points a fixed seed picks:
//!
//! - **kill -9 of a worker**: its run processes die with it (they are the
//!   worker's children, killed on its death). Temporal stops hearing the
//!   activity's heartbeat and, after the heartbeat timeout, gives the run
//!   to another worker, which resumes it from the shared record: recorded
//!   calls are answered from the record, the rest run live. A run killed
//!   inside an irreversible call (a bash command, a POST) stops at it and
//!   waits in its workflow for the operator's word. The test starts a
//!   new worker in the killed one's place, so three stay.
//! - **SIGSTOP, then SIGCONT, of a worker**: its runs stop hearing its
//!   pulse and end themselves (SIGKILL, after half the heartbeat timeout);
//!   once the heartbeat timeout passes another worker takes each run over.
//!   The woken worker's stale attempts are refused by the record's lease
//!   and start no call. A stop shorter than the heartbeat timeout still
//!   ends the runs: the woken worker's attempt must hand the run on, not
//!   end it failed. A stop just as a run ends loses the attempt's report:
//!   the next attempt finds the run ended ok.
//! - **kill -9 of the Temporal server**, started again on the same SQLite
//!   file: runs keep running (they record into PostgreSQL, not Temporal);
//!   heartbeats and polls fail meanwhile; the server keeps every workflow,
//!   and its timers may give runs whose heartbeats it missed to other
//!   workers (the still-running process holds the lease, so a takeover
//!   waits for it to end). Workers ride it out.
//! - **`pg_ctl -m immediate stop` of PostgreSQL**, then a start: a run's
//!   record writes wait for the store (`--audit-retry`, 60 s by default)
//!   and its calls wait with them; so must a resume's reads of the record
//!   it continues; a worker's reads of the record fail and the attempt is
//!   retried.
//!
//! The seed fixes what happens when (from the test's start) and to which
//! worker; where each run is at that moment varies with the machine.
//!
//! Afterwards the operator (the test) gives a truthful word on every run
//! that waits: `ran` when the loopback server (or the run's log) shows the
//! call happened, `did-not-run` otherwise; then every run must end ok, each
//! irreversible id must have been hit exactly once, each bash command must
//! have run exactly once, `sluice audit verify` must pass, the newest run
//! of every chain must replay without divergence, and the lease attempt
//! numbers along each chain must never go backwards.

mod common;

use common::postgres::PgServer;
use common::rng::Rng;
use common::temporal::TemporalServer;
use common::*;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The seed: every fault's time and target follow from it.
const SEED: u64 = 0x5EED_0038_C4A0_5EED;

const RUNS: usize = 20;
/// The rounds of calls each run makes (`SCRIPT`'s loop).
const ROUNDS: usize = 3;
const WORKERS: usize = 3;
const QUEUE: &str = "chaos";
/// Each run's heartbeat timeout, in seconds (`submit --heartbeat-timeout`).
const HEARTBEAT_TIMEOUT: &str = "4";

/// The `sluice` binary under test: cargo's, unless `SLUICE_CHAOS_BIN` names
/// a copy of it (a build folder shared by several checkouts may be relinked
/// from another one's sources while this test runs for minutes).
fn bin() -> PathBuf {
    std::env::var_os("SLUICE_CHAOS_BIN").map_or_else(sluice_bin, PathBuf::from)
}

/// The script every run runs: `sluice.args` are its id and the loopback
/// server's URL. Three rounds of write, read, bash and POST, with pauses
/// so faults land between calls and inside them.
const SCRIPT: &str = r#"local id, url = sluice.args[1], sluice.args[2]
for k = 1, 3 do
  local path = 'step' .. k .. '.txt'
  assert(sluice.write{path = path, content = id .. ' step ' .. k})
  local got = assert(sluice.read{path = path})
  assert(got.content == id .. ' step ' .. k, 'read back ' .. tostring(got.content))
  local sh = assert(sluice.bash{command = 'echo step-' .. k .. ' >> log; sleep 0.5'})
  -- {resolved = 'ran'}: the operator said a call cut short happened.
  assert(sh.resolved == 'ran' or sh.exitCode == 0, 'bash exited ' .. tostring(sh.exitCode))
  sluice.sleep(1000)
  local r = assert(sluice.http_post{url = url, body = sluice.json.encode{id = id .. '-' .. k}})
  assert(r.resolved == 'ran' or r.status == 200, 'post answered ' .. tostring(r.status))
  sluice.sleep(1000)
end
print(id .. ' done')
"#;

/// A loopback HTTP server counting POSTs by the `id` of their JSON body.
struct Hits {
    origin: String,
    counts: Arc<Mutex<HashMap<String, u32>>>,
}

impl Hits {
    fn start() -> Hits {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let counts = Arc::new(Mutex::new(HashMap::new()));
        let shared = counts.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let counts = shared.clone();
                std::thread::spawn(move || serve(stream, &counts));
            }
        });
        Hits { origin, counts }
    }

    fn count(&self, id: &str) -> u32 {
        self.counts.lock().unwrap().get(id).copied().unwrap_or(0)
    }
}

/// Reads one request, counts its body's id, answers 200 after a pause.
fn serve(mut stream: std::net::TcpStream, counts: &Mutex<HashMap<String, u32>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf = Vec::new();
    let mut piece = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match stream.read(&mut piece) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&piece[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match stream.read(&mut piece) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&piece[..n]),
        }
    }
    let body: serde_json::Value =
        serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or_default();
    let id = body["id"].as_str().unwrap_or("?").to_string();
    *counts.lock().unwrap().entry(id).or_insert(0) += 1;
    // Counted, then answered late: a kill lands inside the call as often
    // as between calls, leaving a POST that happened with no outcome.
    std::thread::sleep(Duration::from_millis(400));
    let _ = stream.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\nconnection: close\r\n\r\n{\"ok\":true}",
    );
}

/// A `sluice worker` whose stderr goes to a log file; killed on drop.
struct Worker {
    child: Child,
    log: PathBuf,
    stopped: bool,
}

impl Worker {
    fn start(temporal: &TemporalServer, url: &str, pg: &PgServer, log: PathBuf) -> Worker {
        let err = std::fs::File::create(&log).expect("a worker log");
        let child = Command::new(bin())
            .args(["worker", "--temporal", &temporal.address()])
            .args(["--task-queue", QUEUE, "--audit", url])
            .env("SLUICE_CREDENTIAL_AUDIT", pg.password())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("start sluice worker");
        Worker {
            child,
            log,
            stopped: false,
        }
    }

    fn signal(&self, signal: Signal) {
        let _ = kill(Pid::from_raw(self.child.id() as i32), signal);
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One fault (or submit) at a time after the start.
#[derive(Debug, Clone, Copy)]
enum Event {
    Submit(usize),
    KillWorker(usize),
    StartWorker(usize),
    StopWorker(usize),
    /// SIGCONT to the worker in slot `.0` if it is still worker number `.1`.
    ContWorker(usize, u32),
    KillTemporal,
    StartTemporal,
    StopPostgres,
    StartPostgres,
}

/// The seeded plan: submits over the first 12 s, four worker kills and
/// three stops over 4..36 s, Temporal killed once after every submit, and
/// PostgreSQL stopped once, while runs run.
fn plan(rng: &mut Rng) -> Vec<(Duration, Event)> {
    let mut events = Vec::new();
    for i in 0..RUNS {
        let at = Duration::from_millis(i as u64 * 600) + rng.secs(0.0, 0.3);
        events.push((at, Event::Submit(i)));
    }
    for _ in 0..4 {
        let at = rng.secs(4.0, 36.0);
        let slot = rng.below(WORKERS);
        events.push((at, Event::KillWorker(slot)));
        events.push((at + rng.secs(0.5, 3.0), Event::StartWorker(slot)));
    }
    for _ in 0..3 {
        events.push((rng.secs(4.0, 36.0), Event::StopWorker(rng.below(WORKERS))));
    }
    let down = rng.secs(13.0, 30.0);
    events.push((down, Event::KillTemporal));
    events.push((down + rng.secs(1.0, 4.0), Event::StartTemporal));
    let down = rng.secs(5.0, 35.0);
    events.push((down, Event::StopPostgres));
    events.push((down + rng.secs(1.0, 4.0), Event::StartPostgres));
    events.sort_by_key(|(at, _)| *at);
    events
}

/// Everything the chaos acts on.
struct Fleet {
    temporal: TemporalServer,
    pg: PgServer,
    url: String,
    hits: Hits,
    logs: tempfile::TempDir,
    slots: Vec<Option<Worker>>,
    /// How many workers each slot has had (a SIGCONT goes to the one it
    /// stopped only).
    generation: Vec<u32>,
    /// Workers that exited on their own, with their stderr.
    exits: Vec<String>,
    temporal_up: bool,
    runs: Vec<(String, Workspace, PathBuf)>,
    log: Vec<String>,
    started: Instant,
}

impl Fleet {
    /// The servers, the loopback server and three workers, up.
    fn new() -> Fleet {
        let pg = PgServer::start();
        let url = pg.fresh_database();
        let mut fleet = Fleet {
            temporal: TemporalServer::start(),
            pg,
            url,
            hits: Hits::start(),
            logs: tempfile::tempdir().unwrap(),
            slots: (0..WORKERS).map(|_| None).collect(),
            generation: vec![0; WORKERS],
            exits: Vec::new(),
            temporal_up: true,
            runs: Vec::new(),
            log: Vec::new(),
            started: Instant::now(),
        };
        (0..WORKERS).for_each(|slot| fleet.start_worker(slot));
        fleet.started = Instant::now();
        fleet
    }

    fn note(&mut self, what: String) {
        let line = format!("{:>6.1}s {what}", self.started.elapsed().as_secs_f64());
        eprintln!("chaos: {line}");
        self.log.push(line);
    }

    /// A new worker in `slot`, if it is empty and Temporal is up (a worker
    /// that cannot reach Temporal exits at once; Temporal's restart fills
    /// every empty slot).
    fn start_worker(&mut self, slot: usize) {
        if self.slots[slot].is_some() || !self.temporal_up {
            return;
        }
        self.generation[slot] += 1;
        let log = self
            .logs
            .path()
            .join(format!("worker{slot}-{}.log", self.generation[slot]));
        let worker = Worker::start(&self.temporal, &self.url, &self.pg, log);
        self.note(format!("worker {slot} started (pid {})", worker.child.id()));
        self.slots[slot] = Some(worker);
    }

    /// Workers that exited by themselves are noted (the test fails on
    /// them: a worker rides out its servers' restarts) and replaced.
    fn tend(&mut self) {
        for slot in 0..WORKERS {
            let exited = match self.slots[slot].as_mut() {
                Some(w) => w.child.try_wait().ok().flatten(),
                None => continue,
            };
            if let Some(status) = exited {
                let w = self.slots[slot].take().unwrap();
                let said = std::fs::read_to_string(&w.log).unwrap_or_default();
                let what = format!(
                    "worker {slot} exited by itself ({status}; Temporal up: {}): {}",
                    self.temporal_up,
                    said.trim()
                );
                self.note(what.clone());
                self.exits.push(what);
                self.start_worker(slot);
            }
        }
    }

    fn submit(&mut self, i: usize) {
        let id = format!("chaos-{i:02}");
        let ws = workspace();
        let script = script_file(ws.path(), SCRIPT);
        let policy = ws.path().parent().unwrap().join("chaos-policy.lua");
        std::fs::write(&policy, policy_text(&self.hits.origin)).unwrap();
        let out: Run = Command::new(bin())
            .arg("submit")
            .arg(&script)
            .args([
                "--temporal",
                &self.temporal.address(),
                "--task-queue",
                QUEUE,
            ])
            .args(["--run-id", &id, "--heartbeat-timeout", HEARTBEAT_TIMEOUT])
            .arg("--policy")
            .arg(&policy)
            .arg("--workspace")
            .arg(ws.path())
            .args(["--", &id, &format!("{}/hit", self.hits.origin)])
            .stdin(Stdio::null())
            .output()
            .expect("run sluice submit")
            .into();
        assert_eq!(out.code, 0, "submit {id}: {}", out.stderr);
        self.note(format!("submitted {id}"));
        self.runs.push((id, ws, script));
    }

    fn act(&mut self, event: Event, rng: &mut Rng, plan: &mut Vec<(Duration, Event)>) {
        match event {
            Event::Submit(i) => self.submit(i),
            Event::KillWorker(slot) => self.kill_worker(slot),
            Event::StartWorker(slot) => self.start_worker(slot),
            Event::StopWorker(slot) => {
                let length = rng.secs(1.0, 8.0);
                if self.stop_worker(slot, length) {
                    let wake = self.started.elapsed() + length;
                    plan.push((wake, Event::ContWorker(slot, self.generation[slot])));
                    plan.sort_by_key(|(at, _)| *at);
                }
            }
            Event::ContWorker(slot, generation) => self.cont_worker(slot, generation),
            Event::KillTemporal => {
                self.temporal.kill();
                self.temporal_up = false;
                self.note("kill -9 Temporal".into());
            }
            Event::StartTemporal => {
                self.temporal.restart();
                self.temporal_up = true;
                self.note("Temporal started again on its database file".into());
                (0..WORKERS).for_each(|slot| self.start_worker(slot));
            }
            Event::StopPostgres => {
                self.pg.stop_immediate();
                self.note("pg_ctl -m immediate stop".into());
            }
            Event::StartPostgres => {
                self.pg.restart();
                self.note("PostgreSQL started again".into());
            }
        }
    }

    /// kill -9 of the worker in `slot`, else of the next slot's (a killed
    /// worker's slot may still be empty).
    fn kill_worker(&mut self, slot: usize) {
        let slot = (0..WORKERS)
            .map(|k| (slot + k) % WORKERS)
            .find(|s| self.slots[*s].is_some());
        let Some(slot) = slot else { return };
        let w = self.slots[slot].take().unwrap();
        w.signal(Signal::SIGKILL);
        self.note(format!(
            "kill -9 worker {slot} (pid {}{})",
            w.child.id(),
            if w.stopped { ", stopped" } else { "" }
        ));
    }

    /// SIGSTOP of the worker in `slot` for `length`; whether there was one
    /// to stop.
    fn stop_worker(&mut self, slot: usize, length: Duration) -> bool {
        let Some(w) = self.slots[slot].as_mut().filter(|w| !w.stopped) else {
            return false;
        };
        w.signal(Signal::SIGSTOP);
        w.stopped = true;
        let pid = w.child.id();
        self.note(format!("SIGSTOP worker {slot} (pid {pid}) for {length:?}"));
        true
    }

    fn cont_worker(&mut self, slot: usize, generation: u32) {
        if self.generation[slot] != generation {
            return;
        }
        if let Some(w) = self.slots[slot].as_mut() {
            w.signal(Signal::SIGCONT);
            w.stopped = false;
            self.note(format!("SIGCONT worker {slot}"));
        }
    }
}

/// The runs' policy: the workspace, commands, and POSTs to the loopback
/// server, nothing else.
fn policy_text(origin: &str) -> String {
    format!(
        r#"local p = require("sluice.policy")
return {{ rules = {{
  p.deny("fs:*:${{workspace}}/.sluice", "the record"),
  p.deny("fs:*:${{workspace}}/.sluice/**", "the record"),
  p.programs,
  p.allow "fs:read:${{workspace}}", p.allow "fs:read:${{workspace}}/**",
  p.allow "fs:write:${{workspace}}", p.allow "fs:write:${{workspace}}/**",
  p.allow "proc:spawn:*",
  p.allow "net:private:{origin}", p.allow "net:post:{origin}",
}} }}
"#
    )
}

/// `sluice ARGS` with the record's password; what it said.
fn sluice(fleet: &Fleet, args: &[&str]) -> Run {
    Command::new(bin())
        .args(args)
        .env("SLUICE_CREDENTIAL_AUDIT", fleet.pg.password())
        .stdin(Stdio::null())
        .output()
        .expect("run sluice")
        .into()
}

/// `sluice status RUN --json --audit URL`, or what it said when it printed
/// no status (the engine or the record does not answer).
fn status(fleet: &Fleet, run: &str) -> Result<serde_json::Value, String> {
    let address = fleet.temporal.address();
    let out = sluice(
        fleet,
        &[
            "status",
            run,
            "--json",
            "--temporal",
            &address,
            "--audit",
            &fleet.url,
        ],
    );
    serde_json::from_str(&out.stdout)
        .map_err(|_| format!("exit {}: {}", out.code, out.stderr.trim()))
}

/// The truthful word on the call a run waits on: whether the loopback
/// server (for a POST) or the run's log (for a bash command) shows it
/// happened.
fn evidence(fleet: &Fleet, run: &str, ws: &Path, unknown: &serde_json::Value) -> &'static str {
    let input = unknown["input"].as_str().unwrap_or_default();
    let flow = unknown["flow"].as_str().unwrap_or_default();
    let k = (1..=ROUNDS)
        .find(|k| input.contains(&format!("step-{k} ")) || input.contains(&format!("{run}-{k}")))
        .unwrap_or_else(|| panic!("run {run} waits on a call the script does not make: {unknown}"));
    let happened = match flow {
        "http_post" | "http-post" => fleet.hits.count(&format!("{run}-{k}")) > 0,
        "bash" => std::fs::read_to_string(ws.join("log"))
            .unwrap_or_default()
            .lines()
            .any(|l| l == format!("step-{k}")),
        other => panic!("run {run} waits on a call of flow {other}, which the script makes none of irreversibly: {unknown}"),
    };
    if happened {
        "ran"
    } else {
        "did-not-run"
    }
}

/// Follows every run to its end, giving the operator's word to those that
/// wait; each run's last status.
fn settle(fleet: &mut Fleet, limit: Duration) -> HashMap<String, serde_json::Value> {
    let started = Instant::now();
    let mut last: HashMap<String, serde_json::Value> = HashMap::new();
    loop {
        fleet.tend();
        let mut open = Vec::new();
        for i in 0..fleet.runs.len() {
            let run = fleet.runs[i].0.clone();
            if last.get(&run).is_some_and(|v| v["engine"] != "RUNNING") {
                continue;
            }
            let v = status(fleet, &run)
                .unwrap_or_else(|said| serde_json::json!({"engine": "RUNNING", "said": said}));
            if v["phase"] == "waiting" {
                give_word(fleet, i, &v["unknown"]);
            }
            if v["engine"] == "RUNNING" {
                open.push(run.clone());
            }
            last.insert(run, v);
        }
        if open.is_empty() {
            return last;
        }
        if started.elapsed() > limit {
            for run in &open {
                eprintln!("chaos: still open: {run}: {}", last[run]);
            }
            dump_logs(fleet);
            panic!("runs never ended within {limit:?}: {open:?}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `sluice resolve` of the call run `i` waits on, with the truthful word.
fn give_word(fleet: &mut Fleet, i: usize, unknown: &serde_json::Value) {
    let (run, ws) = (&fleet.runs[i].0, fleet.runs[i].1.path());
    let call = unknown["call"]
        .as_i64()
        .expect("a waiting run names its call");
    let word = evidence(fleet, run, ws, unknown);
    let address = fleet.temporal.address();
    let n = call.to_string();
    let said = sluice(
        fleet,
        &["resolve", run, "--call", &n, word, "--temporal", &address],
    );
    let what = format!(
        "{run} waits on call #{call} ({} {}): resolve {word}: exit {} {}",
        unknown["flow"],
        unknown["input"],
        said.code,
        said.stderr.trim()
    );
    fleet.note(what);
}

/// What a run that did not end ok said: its workflow's result (the run's
/// exit, stdout and stderr) and each recorded part's timeline.
fn diagnose(fleet: &Fleet, run: &str, chain: &[&serde_json::Value]) -> String {
    let result = Command::new(common::temporal::cli())
        .args(["workflow", "result", "-w", run, "--output", "json"])
        .args(["--address", &fleet.temporal.address()])
        .stdin(Stdio::null())
        .output()
        .expect("run the Temporal CLI");
    let result: serde_json::Value = serde_json::from_slice(&result.stdout).unwrap_or_default();
    let mut out = format!(
        "  its result: {}\n",
        serde_json::to_string_pretty(&result).unwrap_or_default()
    );
    let history = Command::new(common::temporal::cli())
        .args(["workflow", "show", "-w", run])
        .args(["--address", &fleet.temporal.address()])
        .stdin(Stdio::null())
        .output()
        .expect("run the Temporal CLI");
    out.push_str(&format!(
        "  its history:\n{}\n",
        String::from_utf8_lossy(&history.stdout)
    ));
    for part in chain {
        let id = part["id"].as_str().unwrap_or_default();
        let shown = sluice(fleet, &["audit", "show", id, "--audit", &fleet.url]);
        out.push_str(&format!(
            "  audit show {id}:\n{}{}\n",
            shown.stdout, shown.stderr
        ));
    }
    out
}

fn dump_logs(fleet: &Fleet) {
    for line in &fleet.log {
        eprintln!("chaos log: {line}");
    }
    if let Ok(dir) = std::fs::read_dir(fleet.logs.path()) {
        for entry in dir.flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            eprintln!("== {}:", entry.path().display());
            for l in tail.into_iter().rev() {
                eprintln!("   {l}");
            }
        }
    }
}

#[test]
fn twenty_runs_on_three_workers_survive_seeded_kills_stops_and_server_restarts_exactly_once() {
    let mut rng = Rng(SEED);
    let mut events = plan(&mut rng);
    let mut fleet = Fleet::new();
    while !events.is_empty() {
        let (at, event) = events.remove(0);
        while fleet.started.elapsed() < at {
            fleet.tend();
            std::thread::sleep(Duration::from_millis(20));
        }
        fleet.act(event, &mut rng, &mut events);
    }
    fleet.note("chaos over; following every run to its end".into());
    let ended = settle(&mut fleet, Duration::from_secs(150));
    fleet.note("every run ended".into());
    check(&fleet, &ended);
    fleet.note("every check passed".into());
}

/// The assertions on the ended runs (see the top of the file).
fn check(fleet: &Fleet, ended: &HashMap<String, serde_json::Value>) {
    let mut failures = Vec::new();
    let mut replays = Vec::new();
    for (run, ws, script) in &fleet.runs {
        let v = &ended[run];
        let chain: Vec<&serde_json::Value> = v["attempts"].as_array().unwrap().iter().collect();
        eprintln!(
            "chaos: {run}: {} {} chain {:?}",
            v["engine"],
            v["outcome"],
            chain
                .iter()
                .map(|a| format!(
                    "{}:{}:{}",
                    a["status"].as_str().unwrap_or(""),
                    a["owner"].as_str().unwrap_or("?"),
                    a["attempt"]
                ))
                .collect::<Vec<_>>()
        );
        if v["engine"] != "COMPLETED" || v["outcome"]["status"] != "ok" {
            failures.push(format!(
                "{run} did not end ok: {v}\n{}",
                diagnose(fleet, run, &chain)
            ));
            continue;
        }
        failures.extend(check_effects(fleet, run, ws, &chain));
        // Replays sleep as the script does: all at once.
        let newest = chain.last().unwrap()["id"].as_str().unwrap().to_string();
        let replay = Command::new(bin())
            .args(["replay", &newest, "--audit", &fleet.url, "--script"])
            .arg(script)
            .env("SLUICE_CREDENTIAL_AUDIT", fleet.pg.password())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run sluice replay");
        replays.push((run, newest, replay));
    }
    for (run, newest, replay) in replays {
        let out: Run = replay.wait_with_output().unwrap().into();
        if out.code != 0 || out.stdout != format!("{run} done\n") {
            failures.push(format!(
                "{run}: replay of {newest} exited {}: {}{}",
                out.code, out.stdout, out.stderr
            ));
        }
    }
    let strays: Vec<(String, u32)> = fleet
        .hits
        .counts
        .lock()
        .unwrap()
        .iter()
        .filter(|(id, n)| **n != 1 || !id.starts_with("chaos-"))
        .map(|(id, n)| (id.clone(), *n))
        .collect();
    if !strays.is_empty() {
        failures.push(format!("ids hit other than once: {strays:?}"));
    }
    failures.extend(fleet.exits.iter().cloned());
    let verify = sluice(fleet, &["audit", "verify", "--audit", &fleet.url]);
    if verify.code != 0 {
        failures.push(format!("audit verify: {}{}", verify.stdout, verify.stderr));
    }
    if !failures.is_empty() {
        dump_logs(fleet);
        panic!("{} failure(s):\n{}", failures.len(), failures.join("\n"));
    }
}

/// What a run that ended ok got wrong: a lease attempt lower than the one
/// before it along its chain, a POST id not hit exactly once, a bash
/// command not run exactly once.
fn check_effects(
    fleet: &Fleet,
    run: &str,
    ws: &Workspace,
    chain: &[&serde_json::Value],
) -> Vec<String> {
    let mut failures = Vec::new();
    let leases: Vec<i64> = chain
        .iter()
        .map(|a| a["attempt"].as_i64().unwrap())
        .collect();
    if !leases.windows(2).all(|w| w[0] <= w[1]) {
        failures.push(format!("{run}: lease attempts went backwards: {leases:?}"));
    }
    for k in 1..=ROUNDS {
        let hits = fleet.hits.count(&format!("{run}-{k}"));
        if hits != 1 {
            failures.push(format!("{run}-{k} was hit {hits} times"));
        }
    }
    let log = std::fs::read_to_string(ws.file("log")).unwrap_or_default();
    let want: String = (1..=ROUNDS).map(|k| format!("step-{k}\n")).collect();
    if log != want {
        failures.push(format!("{run}: its bash commands ran as {log:?}"));
    }
    failures
}
