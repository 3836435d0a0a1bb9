//! The record on PostgreSQL against the record on SQLite, and many writers
//! into one PostgreSQL against one: whole `sluice run` processes, timed in
//! interleaved turns, so the ratio of medians holds on a noisy machine.
//! BENCHMARKS.md has the targets, the command and the figures.
//!
//! - `audit-pg-read`: one `sluice run` of a script making 10,000
//!   `sluice.read{path = "small.txt"}` calls (a 4 KiB text file), recorded
//!   into a fresh database of a PostgreSQL server on loopback, against the
//!   same run recorded into a fresh SQLite file. Target: at most 1.5x.
//! - `audit-pg-concurrent`: runs whose calls wait as real work does: each
//!   of their turns is a `sluice.fetch` of a loopback server that answers
//!   after 20 ms, then an irreversible `sluice.http_post` to it (its intent
//!   committed before it is sent). Eight such runs at once, all recording
//!   into one PostgreSQL database, against one run alone: their aggregate
//!   calls per second over the one run's. Target: at least 4x (writers do
//!   not queue behind each other).
//!
//! The bench starts its own PostgreSQL 15 (`initdb` and `pg_ctl` in a temp
//! folder, as the `postgres` user when run as root, on 127.0.0.1 at a free
//! port, `fsync` on as a deployment has it, stopped and removed after:
//! the tests' harness, `tests/common/postgres.rs`) and its own HTTP
//! server. sluice gets the database's password as the credential named
//! `audit` (`SLUICE_CREDENTIAL_AUDIT`). Without PostgreSQL installed the
//! bench fails saying how to install it.
//!
//! Every sample is checked before it counts: exit status 0, nothing said on
//! stderr, and the record holding every run ended `ok` with every call
//! completed `ok` (counted in the database). A broken run fails the bench
//! instead of timing fast.

mod support;

#[allow(dead_code)]
#[path = "../tests/common/postgres.rs"]
mod postgres;

use postgres::PgServer;
use std::fs::{self, File};
use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{measure, median, text_file, verdict};

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const NAMES: [&str; 2] = ["audit-pg-read", "audit-pg-concurrent"];
const READS: usize = 10_000;
const SMALL_NAME: &str = "small.txt";
const SMALL_BYTES: usize = 4 * 1024;
/// Runs at once in the concurrent bench, turns (a fetch and a post) each
/// run makes, and how long the server takes to answer.
const RUNS: usize = 8;
const TURNS: usize = 25;
const LATENCY: Duration = Duration::from_millis(20);

fn main() {
    let wants = support::wanted();
    if !NAMES.iter().any(|n| wants(n)) {
        return;
    }
    // Panics saying how to install PostgreSQL 15 when it is missing.
    let server = PgServer::start();
    let mut lines = Vec::new();
    if wants("audit-pg-read") {
        lines.push(reads(&server));
    }
    if wants("audit-pg-concurrent") {
        lines.push(concurrent(&server));
    }
    println!();
    for line in lines {
        println!("{line}");
    }
}

/// A workspace with the small file, the scripts' folder, and where the
/// SQLite records and each process's stderr go.
struct Bench {
    ws: PathBuf,
    dir: PathBuf,
    _dirs: [tempfile::TempDir; 2],
}

impl Bench {
    fn new() -> Bench {
        let ws_dir = tempfile::tempdir().expect("a workspace");
        let dir = tempfile::tempdir().expect("a folder for scripts and records");
        let ws = fs::canonicalize(ws_dir.path()).unwrap();
        fs::write(ws.join(SMALL_NAME), text_file(SMALL_BYTES, 64)).unwrap();
        Bench {
            ws,
            dir: dir.path().to_path_buf(),
            _dirs: [ws_dir, dir],
        }
    }

    fn script(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        fs::write(&path, text).unwrap();
        path
    }

    /// `sluice run SCRIPT` recording into `audit` (a path or a URL, with
    /// the database's password), its stderr into `stderr`.
    fn run(&self, script: &Path, audit: &str, password: Option<&str>, stderr: &Path) -> Command {
        let mut c = Command::new(SLUICE);
        c.arg("run")
            .arg(script)
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--audit")
            .arg(audit)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(stderr).unwrap());
        if let Some(pw) = password {
            c.env("SLUICE_CREDENTIAL_AUDIT", pw);
        }
        c
    }
}

/// Fails the bench unless `stderr` holds nothing.
fn quiet(stderr: &Path, what: &str) {
    let said = fs::read_to_string(stderr).unwrap_or_default();
    assert!(said.is_empty(), "{what} said on stderr:\n{said}");
}

/// The name of the database a URL of [`PgServer::fresh_database`] names.
fn database(url: &str) -> String {
    let path = url.rsplit('/').next().unwrap();
    path.split('?').next().unwrap().to_string()
}

/// What a PostgreSQL database holds: runs ended ok, and calls of `flow`
/// completed ok with their outcome hashed, in all.
fn pg_counts(server: &PgServer, db: &str, flow: &str) -> (i64, i64) {
    let said = server.admin(
        db,
        &format!(
            "SELECT (SELECT count(*) FROM runs WHERE status = 'ok'), \
             (SELECT count(*) FROM calls WHERE flow = '{flow}' AND status = 'ok' AND outcome_hash IS NOT NULL)"
        ),
    );
    let mut n = said.split('|').map(|v| v.trim().parse::<i64>().unwrap());
    (n.next().unwrap(), n.next().unwrap())
}

/// The same of a SQLite file.
fn sqlite_counts(path: &Path, flow: &str) -> (i64, i64) {
    let conn = rusqlite::Connection::open(path).expect("open the SQLite record");
    conn.query_row(
        "SELECT (SELECT count(*) FROM runs WHERE status = 'ok'),
           (SELECT count(*) FROM calls WHERE flow = ?1 AND status = 'ok' AND outcome_hash IS NOT NULL)",
        [flow],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .expect("count the record's rows")
}

/// `audit-pg-read`: the 10,000-read run into PostgreSQL against SQLite.
fn reads(server: &PgServer) -> String {
    let bench = Bench::new();
    let script = bench.script(
        "read.lua",
        &format!(
            "for i = 1, {READS} do\n  local r, err = sluice.read{{path = \"{SMALL_NAME}\"}}\n  \
             assert(r and #r.content > 0, tostring(err))\nend\n"
        ),
    );
    let stderr = bench.dir.join("stderr.txt");
    let mut fresh = 0;
    let mut sqlite = || {
        fresh += 1;
        let path = bench.dir.join(format!("sqlite-{fresh}")).join("audit.db");
        let (t, _) = measure(&mut bench.run(&script, &path.display().to_string(), None, &stderr));
        quiet(&stderr, "the run into SQLite");
        let counts = sqlite_counts(&path, "read");
        assert_eq!(counts, (1, READS as i64), "{}", path.display());
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
        t
    };
    let postgres = || {
        let url = server.fresh_database();
        let (t, _) = measure(&mut bench.run(&script, &url, Some(server.password()), &stderr));
        quiet(&stderr, "the run into PostgreSQL");
        let db = database(&url);
        assert_eq!(pg_counts(server, &db, "read"), (1, READS as i64), "{url}");
        server.admin("postgres", &format!("DROP DATABASE {db}"));
        t
    };
    // One of each first, checked like the rest: it warms both sides.
    sqlite();
    postgres();
    let turns = 11;
    let (mut pg, mut lite) = (vec![], vec![]);
    for _ in 0..turns {
        pg.push(postgres());
        lite.push(sqlite());
    }
    let (m_pg, m_lite) = (median(&mut pg), median(&mut lite));
    let ratio = m_pg.as_secs_f64() / m_lite.as_secs_f64();
    println!(
        "audit-pg-read: {READS} sluice.read{{path=\"{SMALL_NAME}\"}} ({} KiB) recorded into PostgreSQL on loopback \
         {m_pg:.2?} / into SQLite {m_lite:.2?} (per call {:.2?} / {:.2?})",
        SMALL_BYTES / 1024,
        m_pg / READS as u32,
        m_lite / READS as u32,
    );
    format!(
        "ratio audit-pg-read postgres/sqlite = {ratio:.2}x (target <= 1.5x): {} \
         [medians of {turns} interleaved turns: {m_pg:.2?} / {m_lite:.2?}]",
        verdict(ratio <= 1.5)
    )
}

/// `audit-pg-concurrent`: eight waiting runs at once into one PostgreSQL
/// database against one alone.
fn concurrent(server: &PgServer) -> String {
    let bench = Bench::new();
    let origin = slow_server(LATENCY);
    let script = bench.script(
        "waits.lua",
        &format!(
            r#"for i = 1, {TURNS} do
  local r, err = sluice.fetch{{url = "{origin}/item/" .. i}}
  assert(r and r.status == 200 and r.body == "ok", tostring(err))
  r, err = sluice.http_post{{url = "{origin}/done/" .. i, body = "{{}}"}}
  assert(r and r.status == 200 and r.body == "ok", tostring(err))
end
"#
        ),
    );
    let grants = [
        "--approve".to_string(),
        format!("net:private:{origin}"),
        "--approve".to_string(),
        format!("net:post:{origin}"),
    ];
    let calls = (2 * TURNS) as i64;
    // `runs` at once into a fresh database: the wall time from the first
    // start to the last exit, every run checked.
    let at_once = |runs: usize| -> Duration {
        let url = server.fresh_database();
        let started = Instant::now();
        let children: Vec<(Child, PathBuf)> = (0..runs)
            .map(|k| {
                let stderr = bench.dir.join(format!("stderr-{k}.txt"));
                let mut cmd = bench.run(&script, &url, Some(server.password()), &stderr);
                cmd.args(&grants);
                (cmd.spawn().expect("spawn sluice run"), stderr)
            })
            .collect();
        for (mut child, stderr) in children {
            let status = child.wait().unwrap();
            let said = fs::read_to_string(&stderr).unwrap_or_default();
            assert!(
                status.success(),
                "a concurrent run failed ({status}):\n{said}"
            );
            quiet(&stderr, "a concurrent run");
        }
        let took = started.elapsed();
        let db = database(&url);
        let runs = runs as i64;
        assert_eq!(
            pg_counts(server, &db, "fetch"),
            (runs, runs * calls / 2),
            "{url}"
        );
        assert_eq!(
            pg_counts(server, &db, "http-post"),
            (runs, runs * calls / 2),
            "{url}"
        );
        server.admin("postgres", &format!("DROP DATABASE {db}"));
        took
    };
    at_once(1);
    at_once(RUNS);
    let turns = 5;
    let (mut one, mut many) = (vec![], vec![]);
    for _ in 0..turns {
        one.push(at_once(1));
        many.push(at_once(RUNS));
    }
    let (m_one, m_many) = (median(&mut one), median(&mut many));
    let rate_one = calls as f64 / m_one.as_secs_f64();
    let rate_many = (RUNS as i64 * calls) as f64 / m_many.as_secs_f64();
    let ratio = rate_many / rate_one;
    println!(
        "audit-pg-concurrent: runs of {TURNS} turns (a fetch answered after {LATENCY:?}, then an irreversible \
         http_post answered after {LATENCY:?}): {RUNS} at once into one PostgreSQL database {m_many:.2?} \
         ({rate_many:.1} calls/s), one alone {m_one:.2?} ({rate_one:.1} calls/s)"
    );
    format!(
        "ratio audit-pg-concurrent {RUNS}-runs/one-run calls per second = {ratio:.2}x (target >= 4x): {} \
         [medians of {turns} interleaved turns: {RUNS} runs of {calls} calls in {m_many:.2?}, one in {m_one:.2?}]",
        verdict(ratio >= 4.0)
    )
}

/// A loopback server answering every request `ok` after `delay`, each
/// connection on its own thread, each request read whole (a post's body
/// too) before it answers; its origin.
fn slow_server(delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || answer_all(conn, delay));
        }
    });
    origin
}

/// Answers each request on `conn` (keep-alive) until the client closes it.
fn answer_all(conn: TcpStream, delay: Duration) {
    let _ = conn.set_nodelay(true);
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    loop {
        if support::next_request_body(&mut reader).is_none() {
            return;
        }
        std::thread::sleep(delay);
        let reply = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok";
        if out.write_all(reply).is_err() {
            return;
        }
    }
}
