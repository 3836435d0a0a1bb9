//! Faults of a PostgreSQL record: the server stopped with `pg_ctl -m
//! immediate` in the middle of a run. Started again within the run's retry
//! budget (`--audit-retry`), the run waits for it (sealed calls' rows
//! queued, irreversible calls held until their intent is committed), goes
//! on, and ends ok with every row in the record and the record verifying.
//! Reads made meanwhile queue their rows up to the queue's bound (10,000),
//! past which no call starts until the server answers.
//! Left down, the run stops once the budget is spent, within it, saying
//! which calls the record holds; no command ran without its intent
//! committed. A budget of 0 stops it at the first failed write.
//!
//! A connection cut as it carries a COMMIT, the commit landed or not and
//! its answer lost either way: the writer reads back which, and writes no
//! row twice and skips none.
//!
//! (A writer killed inside an irreversible call, resumed from another
//! process: `tests/audit.rs`, on both stores.)

mod common;

use common::postgres::PgServer;
use common::*;
use sluice::internals::audit::db::{Db, Val};
use sluice::internals::audit::location::Location;
use sluice::internals::audit::postgres;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Child, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn marked(ws: &std::path::Path) -> usize {
    std::fs::read_to_string(ws.join("marker"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// A script whose main task runs `commands` irreversible commands, each
/// marking a line in `marker` and then sleeping 20 ms, while a second task
/// reads a file `reads` times (sealed calls, whose rows queue while the
/// store is down).
fn script(commands: usize, reads: usize) -> String {
    paced_script(commands, reads, 20)
}

/// [`script`] with `pause_ms` between commands. A read issued after a
/// command waits for it (both touch the workspace), and a command waits
/// for its intent to be committed: reads run while the store is down only
/// between a command's end and the next one's start.
fn paced_script(commands: usize, reads: usize, pause_ms: u64) -> String {
    format!(
        "local reader = sluice.spawn(function()\n  for i = 1, {reads} do\n    \
         assert(sluice.read{{path = 'data.txt'}})\n    sluice.sleep(10)\n  end\nend)\n\
         for i = 1, {commands} do\n  assert(sluice.bash{{command = 'echo ' .. i .. ' >> marker'}})\n  \
         sluice.sleep({pause_ms})\nend\nreader:await()\n"
    )
}

/// `sluice run` of `script` recording into `url`, with `flags`.
fn spawn_run(server: &PgServer, url: &str, ws: &Workspace, script: &str, flags: &[&str]) -> Child {
    std::fs::write(ws.file("data.txt"), "read while the store is down\n").unwrap();
    let path = script_file(ws.path(), script);
    sluice_run(ws.path(), &path, flags, &[])
        .env("SLUICE_AUDIT", url)
        .env("SLUICE_CREDENTIAL_AUDIT", server.password())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sluice run")
}

/// Waits until the run marked `n` commands.
fn until_marked(ws: &Workspace, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while marked(ws.path()) < n {
        assert!(
            Instant::now() < deadline,
            "the run never marked {n} commands"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The store at `url`, opened as a reader of the test's own.
fn store(server: &PgServer, url: &str) -> postgres::Postgres {
    let Location::Postgres(at) = Location::parse(url).unwrap() else {
        unreachable!()
    };
    postgres::open(&at, Some(server.password())).expect("the store after the restart")
}

fn count(db: &dyn Db, sql: &str, run: &str) -> i64 {
    db.value(sql, &[Val::from(run)])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .unwrap()
}

/// `sluice audit verify` of the store at `url`: passes.
fn verifies(server: &PgServer, url: &str) {
    let verified = std::process::Command::new(sluice_bin())
        .args(["audit", "verify", "--audit", url])
        .env("SLUICE_CREDENTIAL_AUDIT", server.password())
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
}

#[test]
fn a_server_restarted_within_the_retry_budget_costs_the_run_nothing() {
    let mut server = PgServer::start();
    let url = server.fresh_database();
    let ws = workspace();
    let (commands, reads) = (10, 400);
    // The store stops just after the fifth command, as the 400 ms pause
    // after it begins: reads go on through that pause, their rows queued.
    let script = paced_script(commands, reads, 400);
    let run = spawn_run(&server, &url, &ws, &script, &[]);
    until_marked(&ws, 5);
    let stopped_ms = now_ms();
    server.stop_immediate();
    std::thread::sleep(Duration::from_secs(2));
    server.restart();
    let restarted_ms = now_ms();
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(marked(ws.path()), commands, "{err}");

    let pg = store(&server, &url);
    let db: &dyn Db = &pg;
    let id: String = db.value("SELECT id FROM runs", &[]).unwrap().unwrap();
    let status: String = db
        .value("SELECT status FROM runs WHERE id = ?1", &[Val::from(&id)])
        .unwrap()
        .unwrap();
    assert_eq!(status, "ok");
    // Every call once, each in its place: n runs 1..=rows without a gap.
    let rows = count(db, "SELECT count(*) FROM calls WHERE run = ?1", &id);
    let last = count(db, "SELECT max(n) FROM calls WHERE run = ?1", &id);
    let places = count(
        db,
        "SELECT count(DISTINCT n) FROM calls WHERE run = ?1",
        &id,
    );
    assert_eq!(rows as usize, commands + reads);
    assert_eq!((last, places), (rows, rows));
    // Each command that ran is one irreversible row with its outcome.
    let settled = count(
        db,
        "SELECT count(*) FROM calls WHERE run = ?1 AND flow = 'bash' AND tier = 'irreversible' \
         AND status = 'ok'",
        &id,
    );
    assert_eq!(settled as usize, marked(ws.path()));
    let reads_ok = count(
        db,
        "SELECT count(*) FROM calls WHERE run = ?1 AND flow = 'read' AND status = 'ok'",
        &id,
    );
    assert_eq!(reads_ok as usize, reads);
    // Reads went on while the server was down: their rows waited in memory.
    let meanwhile: i64 = db
        .value(
            "SELECT count(*) FROM calls WHERE run = ?1 AND flow = 'read' AND started_ms > ?2 \
             AND started_ms < ?3",
            &[
                Val::from(&id),
                Val::from(stopped_ms),
                Val::from(restarted_ms),
            ],
        )
        .unwrap()
        .unwrap();
    assert!(meanwhile > 0, "no read ran while the server was down");
    verifies(&server, &url);
}

#[test]
fn a_full_queue_starts_no_call_until_the_server_answers() {
    let mut server = PgServer::start();
    let url = server.fresh_database();
    let ws = workspace();
    let total = 30_000;
    let script = format!(
        "for i = 1, {total} do\n  assert(sluice.read{{path = 'data.txt'}})\n  print(i)\nend\n"
    );
    let mut run = spawn_run(&server, &url, &ws, &script, &[]);
    // The script prints each read's number as it returns.
    let progress = Arc::new(AtomicUsize::new(0));
    let lines = BufReader::new(run.stdout.take().unwrap());
    let seen = progress.clone();
    let reader = std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            seen.store(line.trim().parse().unwrap_or(0), Ordering::SeqCst);
        }
    });
    let now = || progress.load(Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(30);
    while now() < 2_000 {
        assert!(Instant::now() < deadline, "the run never made 2,000 reads");
        std::thread::sleep(Duration::from_millis(10));
    }
    let at_stop = now();
    server.stop_immediate();
    // Reads go on, their rows queued, until the queue holds 10,000; then
    // no read starts.
    let stalled = until_still(&now, Duration::from_millis(1500));
    assert!(stalled < total, "the reads never stopped");
    let queued = stalled - at_stop;
    assert!(
        (9_000..=13_000).contains(&queued),
        "{queued} reads returned after the stop, the queue holds 10,000 rows"
    );
    server.restart();
    let out = run.wait_with_output().unwrap();
    reader.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(now(), total);
    let pg = store(&server, &url);
    let db: &dyn Db = &pg;
    let id: String = db.value("SELECT id FROM runs", &[]).unwrap().unwrap();
    let rows = count(db, "SELECT count(*) FROM calls WHERE run = ?1", &id);
    let places = count(
        db,
        "SELECT count(DISTINCT n) FROM calls WHERE run = ?1",
        &id,
    );
    assert_eq!((rows, places), (total as i64, total as i64));
    verifies(&server, &url);
}

/// Waits until `value` stays the same for `still` (at most 20 s); returns it.
fn until_still(value: &dyn Fn() -> usize, still: Duration) -> usize {
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut last, mut since) = (value(), Instant::now());
    while since.elapsed() < still {
        assert!(Instant::now() < deadline, "it never stopped at {last}");
        std::thread::sleep(Duration::from_millis(50));
        let v = value();
        if v != last {
            (last, since) = (v, Instant::now());
        }
    }
    last
}

/// A TCP proxy to a PostgreSQL server, for a writer's faults the server
/// itself does not show: when armed, it cuts the next connection to carry
/// a COMMIT, the server's answer never passing, after forwarding it (the
/// commit lands, its answer is lost) or instead of it (the transaction is
/// rolled back, the client never told); blocked, it cuts every connection
/// and refuses new ones while the server stays up for others.
struct Proxy {
    port: u16,
    state: Arc<ProxyState>,
}

#[derive(Default)]
struct ProxyState {
    /// 0: pass everything; [`LANDS`] or [`NEVER_SENT`]: cut the next COMMIT so.
    armed: AtomicU8,
    /// COMMITs cut so far.
    cuts: AtomicUsize,
    blocked: AtomicBool,
}

/// The COMMIT is forwarded, then the connection cut.
const LANDS: u8 = 1;
/// The connection is cut instead of forwarding the COMMIT.
const NEVER_SENT: u8 = 2;

impl Proxy {
    /// The URL `direct` (of the server on `server_port`) through this proxy.
    fn through(&self, direct: &str, server_port: u16) -> String {
        direct.replace(&format!(":{server_port}/"), &format!(":{}/", self.port))
    }

    fn start(server_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(ProxyState::default());
        let shared = state.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                if shared.blocked.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", server_port)) else {
                    continue;
                };
                // Set when this connection is cut: its answers stop too.
                let cut = Arc::new(AtomicBool::new(false));
                let back = (server.try_clone().unwrap(), client.try_clone().unwrap());
                let (s, c) = (shared.clone(), cut.clone());
                std::thread::spawn(move || answers(back, &s, &c));
                let s = shared.clone();
                std::thread::spawn(move || queries((client, server), &s, &cut));
            }
        });
        Proxy { port, state }
    }

    /// Cuts the next COMMIT `how`, and waits until it did.
    fn cut_next(&self, how: u8) {
        let before = self.state.cuts.load(Ordering::SeqCst);
        self.state.armed.store(how, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.state.cuts.load(Ordering::SeqCst) == before {
            assert!(Instant::now() < deadline, "no COMMIT came to cut");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Cuts every connection (at its next bytes) and refuses new ones
    /// until [`Proxy::unblock`].
    fn block(&self) {
        self.state.blocked.store(true, Ordering::SeqCst);
    }

    fn unblock(&self) {
        self.state.blocked.store(false, Ordering::SeqCst);
    }
}

/// The server's bytes to the client, until the connection is cut.
fn answers((mut server, mut client): (TcpStream, TcpStream), state: &ProxyState, cut: &AtomicBool) {
    let mut buf = [0u8; 65536];
    while let Ok(n) = server.read(&mut buf) {
        let stop = cut.load(Ordering::SeqCst) || state.blocked.load(Ordering::SeqCst);
        if n == 0 || stop || client.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
}

/// The client's bytes to the server; an armed COMMIT, or the block, cuts
/// the connection.
fn queries((mut client, mut server): (TcpStream, TcpStream), state: &ProxyState, cut: &AtomicBool) {
    let mut buf = [0u8; 65536];
    while let Ok(n) = client.read(&mut buf) {
        let chunk = &buf[..n];
        let commit = chunk.windows(7).any(|w| w == b"COMMIT\0");
        let how = if commit {
            state.armed.swap(0, Ordering::SeqCst)
        } else {
            0
        };
        if how != 0 {
            // Its answer must not pass: the answering side stops first.
            cut.store(true, Ordering::SeqCst);
            if how == LANDS {
                let _ = server.write_all(chunk);
                std::thread::sleep(Duration::from_millis(300));
            }
            state.cuts.fetch_add(1, Ordering::SeqCst);
            break;
        }
        let stop = state.blocked.load(Ordering::SeqCst);
        if n == 0 || stop || server.write_all(chunk).is_err() {
            break;
        }
    }
    cut.store(true, Ordering::SeqCst);
    let _ = server.shutdown(Shutdown::Both);
    let _ = client.shutdown(Shutdown::Both);
}

#[test]
fn a_run_taken_over_while_its_writer_cannot_reach_the_store_is_fenced_when_it_can() {
    let server = PgServer::start();
    let direct = server.fresh_database();
    let proxy = Proxy::start(server.port());
    let url = proxy.through(&direct, server.port());
    let ws = workspace();
    let run = spawn_run(&server, &url, &ws, &script(2000, 0), &[]);
    until_marked(&ws, 5);
    proxy.block();
    // The writer's next write fails; then the run is taken over, through
    // the server the proxy does not stand in front of.
    std::thread::sleep(Duration::from_millis(500));
    let at_block = marked(ws.path());
    let pg = store(&server, &direct);
    let db: &dyn Db = &pg;
    let id: String = db.value("SELECT id FROM runs", &[]).unwrap().unwrap();
    let taken = db
        .execute(
            "UPDATE runs SET attempt = attempt + 1, owner = 'elsewhere:1:1' WHERE id = ?1",
            &[Val::from(&id)],
        )
        .unwrap();
    assert_eq!(taken, 1);
    let rows_then = count(db, "SELECT count(*) FROM calls WHERE run = ?1", &id);
    proxy.unblock();
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("was taken over by elsewhere:1:1"),
        "the run says who took it over: {err}"
    );
    // No command ran once the store answered, and none of the rows the
    // writer held landed after the takeover.
    assert_eq!(marked(ws.path()), at_block, "{err}");
    let rows = count(db, "SELECT count(*) FROM calls WHERE run = ?1", &id);
    assert_eq!(rows, rows_then, "{err}");
    let commands = count(
        db,
        "SELECT count(*) FROM calls WHERE run = ?1 AND flow = 'bash'",
        &id,
    );
    assert!(
        (at_block as i64..=at_block as i64 + 1).contains(&commands),
        "{at_block} commands ran, {commands} intents are recorded"
    );
}

#[test]
fn a_commit_whose_answer_was_lost_is_read_back_and_no_row_lands_twice_or_goes_missing() {
    let server = PgServer::start();
    let direct = server.fresh_database();
    let proxy = Proxy::start(server.port());
    let url = proxy.through(&direct, server.port());
    let ws = workspace();
    let (commands, reads) = (40, 300);
    let run = spawn_run(&server, &url, &ws, &script(commands, reads), &[]);
    until_marked(&ws, 5);
    proxy.cut_next(LANDS);
    until_marked(&ws, 15);
    proxy.cut_next(NEVER_SENT);
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(marked(ws.path()), commands, "{err}");
    let pg = store(&server, &direct);
    let db: &dyn Db = &pg;
    let id: String = db.value("SELECT id FROM runs", &[]).unwrap().unwrap();
    let rows = count(db, "SELECT count(*) FROM calls WHERE run = ?1", &id);
    let last = count(db, "SELECT max(n) FROM calls WHERE run = ?1", &id);
    assert_eq!((rows, last), ((commands + reads) as i64, rows));
    let settled = count(
        db,
        "SELECT count(*) FROM calls WHERE run = ?1 AND flow = 'bash' AND status = 'ok'",
        &id,
    );
    assert_eq!(settled as usize, commands);
    verifies(&server, &direct);
}

/// Stops the server under a run given `--audit-retry retry`, leaves it
/// down, and returns the run's output and how long after the stop it
/// ended; then starts the server again for the test's checks.
fn left_down(server: &mut PgServer, url: &str, ws: &Workspace, retry: &str) -> (Output, Duration) {
    let run = spawn_run(
        server,
        url,
        ws,
        &script(2000, 2000),
        &["--audit-retry", retry],
    );
    until_marked(ws, 5);
    let stopped = Instant::now();
    server.stop_immediate();
    let out = run.wait_with_output().unwrap();
    let took = stopped.elapsed();
    server.restart();
    (out, took)
}

/// The number after `before` in `said`, if `before` is there.
fn number_after(said: &str, before: &str) -> Option<i64> {
    let rest = said.split(before).nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// What a stopped run said of the record: the calls it holds for sure
/// and at most, (#1 to this, #1 to that): those committed without a sync
/// the server's crash may have lost, and a commit whose answer the crash
/// took may have landed.
fn recorded(err: &str) -> (i64, i64) {
    let through = number_after(err, "Recorded: calls #1 to #")
        .unwrap_or_else(|| panic!("the run says which calls are recorded: {err}"));
    let sure = number_after(err, &format!("Recorded: calls #1 to #{through} (#"))
        .map_or(through, |first| first - 1);
    // `and perhaps #N` alone, or `and perhaps #N to #M`.
    let most = err
        .split("and perhaps #")
        .nth(1)
        .map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let first: i64 = digits.parse().unwrap();
            match rest[digits.len()..].strip_prefix(" to #") {
                Some(tail) => number_after(&format!("#{tail}"), "#").unwrap(),
                None => first,
            }
        })
        .unwrap_or(through);
    (sure, most)
}

/// What the record holds after a run stopped on a store left down: the
/// calls it said, every command that ran with its intent committed, and
/// an outcome the run called unknown missing.
fn holds_what_it_said(server: &PgServer, url: &str, ws: &Workspace, err: &str) {
    let pg = store(server, url);
    let db: &dyn Db = &pg;
    let id: String = db.value("SELECT id FROM runs", &[]).unwrap().unwrap();
    let rows = count(db, "SELECT count(*) FROM calls WHERE run = ?1", &id);
    let (sure, most) = recorded(err);
    assert!(sure <= rows && rows <= most, "{rows} rows: {err}");
    // Every command that ran had its intent committed first: one row each
    // (a last intent may have been committed, unanswered, and not run).
    let commands = marked(ws.path()) as i64;
    let intents = count(
        db,
        "SELECT count(*) FROM calls WHERE run = ?1 AND flow = 'bash'",
        &id,
    );
    assert!(
        commands <= intents && intents <= commands + 1,
        "{commands} commands ran, {intents} intents were committed"
    );
    if let Some(unknown) = err.split("Outcome unknown: #").nth(1) {
        let n: String = unknown.chars().take_while(char::is_ascii_digit).collect();
        let status: Option<String> = db
            .value(
                "SELECT status FROM calls WHERE run = ?1 AND n = ?2",
                &[Val::from(&id), Val::from(n.parse::<i64>().unwrap())],
            )
            .unwrap()
            .flatten();
        assert_eq!(status, None, "call #{n}'s outcome is not recorded: {err}");
    }
    verifies(server, url);
}

#[test]
fn a_server_left_down_stops_the_run_once_its_retry_budget_is_spent_saying_what_is_recorded() {
    let mut server = PgServer::start();
    let url = server.fresh_database();
    let ws = workspace();
    let (out, took) = left_down(&mut server, &url, &ws, "3s");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    // The budget counts from the first failed write, which follows the stop.
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(8),
        "the run ended {took:?} after the stop: {err}"
    );
    assert!(
        err.contains("could not be reached for 3.")
            && err.contains(
                "the retry budget (3s, --audit-retry), so the run stops and starts no further call"
            )
            && err.contains("No irreversible call ran without its intent recorded"),
        "{err}"
    );
    holds_what_it_said(&server, &url, &ws, &err);
}

#[test]
fn an_audit_retry_of_0_stops_the_run_at_the_first_failed_write() {
    let mut server = PgServer::start();
    let url = server.fresh_database();
    let ws = workspace();
    let (out, took) = left_down(&mut server, &url, &ws, "0");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        took < Duration::from_millis(2500),
        "the run ended {took:?} after the stop: {err}"
    );
    assert!(
        err.contains("could not be reached for 0.0 s, the retry budget (0, --audit-retry)"),
        "{err}"
    );
    holds_what_it_said(&server, &url, &ws, &err);
}
