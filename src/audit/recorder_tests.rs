//! Tests of the writer: what it stores of a call that came from outside the
//! script (an MCP client), as the readers and `verify` then see it.

use super::*;
use crate::audit::fixtures::*;
use crate::audit::replay::{
    Answer, Mode, Record, Replay, AHEAD_PAGE, AHEAD_WINDOW, CACHED_OUTPUTS,
};
use crate::audit::session::{Begin, Session};
use crate::audit::verify::{verify, Failure};
use crate::audit::{rows, show};
use rusqlite::Connection;
use serde_json::json;
use std::path::Path;

/// Run `id` at `path`: two model calls of a conversation, the first made
/// by `first`'s client, the second by [`CLIENT`]. Returns their inputs.
fn recorded(path: &Path, id: &str, first: Option<&str>) -> Vec<Value> {
    let msgs = messages(2);
    let inputs: Vec<Value> = (0..2).map(|k| model_input(&msgs, k)).collect();
    let rows = inputs.iter().enumerate().map(|(k, input)| {
        let mut row = model_row(k as u64 + 1, input.clone());
        row.client = if k == 0 { first } else { Some(CLIENT) }.map(str::to_string);
        row
    });
    record_run(path, id, rows.collect());
    inputs
}

fn clients(conn: &Connection, run: &str) -> Vec<Option<String>> {
    let mut stmt = conn
        .prepare("SELECT client FROM calls WHERE run = ?1 ORDER BY n")
        .unwrap();
    let found = stmt.query_map([run], |r| r.get(0)).unwrap();
    found.map(Result::unwrap).collect()
}

#[test]
fn the_writer_stores_and_hashes_each_calls_client_and_an_edit_names_the_row() {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    recorded(&path, "r1", None);
    assert_eq!(clients(&conn, "r1"), [None, Some(CLIENT.to_string())]);
    assert!(verify(&conn, "r1").unwrap().intact);
    let view = show::show(&conn, "r1").unwrap();
    assert_eq!(view.calls[1].client.as_deref(), Some(CLIENT));
    conn.execute(
        "UPDATE calls SET client = 'cursor 0.42' WHERE run = 'r1' AND n = 2",
        [],
    )
    .unwrap();
    let v = verify(&conn, "r1").unwrap();
    let p = v.problem.expect("the edit shows");
    assert_eq!((p.failure, p.n), (Failure::ContentEdited, Some(2)));
}

#[test]
fn a_secret_in_a_clients_name_is_cut_and_named() {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    let input = json!({"command": "true", "env": {"API_TOKEN": "s3cr3t-value"}});
    let mut row = CallRow::new(
        "0",
        1,
        "bash",
        Tier::Irreversible,
        input,
        crate::audit::now_ms(),
    );
    row.client = Some("agent s3cr3t-value".into());
    record_run(&path, "r1", vec![row]);
    assert_eq!(clients(&conn, "r1"), [Some("agent [redacted]".to_string())]);
    let c = rows::call(&conn, "r1", 1).unwrap().unwrap();
    assert!(
        c.redacted.contains("client (a secret's value)"),
        "{}",
        c.redacted
    );
    assert!(verify(&conn, "r1").unwrap().intact);
}

#[test]
fn a_resume_copies_each_calls_client_with_it() {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    let inputs = recorded(&path, "r1", Some("cursor 0.42"));
    let record = Record::load(&conn, "r1").unwrap();
    let mode = Mode::Resume {
        retry_unknown: false,
        unknown_ran: false,
        live_from: None,
    };
    let recorder = Recorder::start(&path, run_start("r2")).unwrap();
    let session = Session::new(Some(recorder), Some(Replay::new(record, mode)));
    for input in &inputs {
        let begun = session.begin("0", "model", input);
        assert!(matches!(begun, Begin::Answered(Ok(_))), "{begun:?}");
    }
    session.recorder.as_ref().unwrap().end("ok", None).unwrap();
    assert_eq!(
        clients(&conn, "r2"),
        [Some("cursor 0.42".to_string()), Some(CLIENT.to_string())]
    );
    assert!(verify(&conn, "r2").unwrap().intact);
}

// --- a long run: what the writer keeps, what a replay reads -----------------

/// The output of a read of file `k`: over the inline size, so it is kept by
/// content, and distinct per file.
fn file_output(k: usize) -> Value {
    json!({"content": format!("file {k}\n{}", "some line of text\n".repeat(80)), "totalLines": 81})
}

fn read_row(seq: u64, k: usize) -> CallRow {
    let input = json!({"path": format!("f{k}.txt")});
    CallRow::new(
        "0",
        seq,
        "read",
        Tier::Sealed,
        input,
        crate::audit::now_ms(),
    )
}

/// Records `calls` sealed reads of `files` distinct files in turn as run
/// `id`, and returns what the writer held at the end, before the seal.
fn long_run(path: &Path, id: &str, calls: usize, files: usize) -> Footprint {
    let recorder = Recorder::start(path, run_start(id)).expect("start the recorder");
    for i in 0..calls {
        let outcome = Outcome::new(Ok(file_output(i % files)), 10, Vec::new());
        recorder
            .call(read_row(i as u64 + 1, i % files), outcome, false)
            .expect("queue a call");
        assert!(recorder.backlog() <= QUEUE + 1, "the queue is bounded");
    }
    // An awaited row drains what was queued before it.
    let last = Outcome::new(Ok(file_output(0)), 10, Vec::new());
    recorder
        .call(read_row(calls as u64 + 1, 0), last, true)
        .expect("record the last call");
    let held = recorder.footprint();
    recorder.end("ok", None).expect("seal");
    held
}

#[test]
fn a_long_run_of_sealed_calls_leaves_the_writer_holding_nothing_per_call() {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    // More distinct outputs than the writer remembers keys of, so its
    // memory of stored keys must let go.
    let calls = STORED_KEYS + 2000;
    let held = long_run(&path, "r1", calls, calls);
    assert_eq!((held.unfolded, held.intents), (0, 0), "{held:?}");
    assert!(held.stored <= STORED_KEYS, "{held:?}");
    assert!(held.recent <= RECENT_OUTPUTS, "{held:?}");
    // The seal hashed as the rows settled is the one verify recomputes.
    let v = verify(&conn, "r1").unwrap();
    assert!(v.intact && v.sealed, "{v:?}");
    assert_eq!(v.calls, calls + 1);
    let bodies: i64 = conn
        .query_row("SELECT count(*) FROM outputs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(bodies, calls as i64, "each distinct output kept once");
}

#[test]
fn an_output_read_again_is_kept_once_and_rows_refer_to_it() {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    long_run(&path, "r1", 3000, 3);
    let (bodies, refs): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM outputs), count(DISTINCT output_ref) FROM calls WHERE output IS NULL",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((bodies, refs), (3, 3));
    assert!(verify(&conn, "r1").unwrap().intact);
    // Every row's output is the file it read, whichever way it was stored.
    let c = rows::call(&conn, "r1", 2999).unwrap().unwrap();
    let out: Value = serde_json::from_str(c.output.as_deref().unwrap()).unwrap();
    assert_eq!(out, file_output(2998 % 3));
}

#[test]
fn rows_after_a_running_irreversible_call_are_sealed_in_chain_order_once_it_ends() {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    let recorder = Recorder::start(&path, run_start("r1")).unwrap();
    let cmd = CallRow::new(
        "0.1",
        1,
        "bash",
        Tier::Irreversible,
        json!({"command": "deploy"}),
        1,
    );
    recorder.intent(cmd).expect("the intent is synced");
    for seq in 1..=50 {
        let outcome = Outcome::new(Ok(file_output(seq as usize)), 10, Vec::new());
        recorder.call(read_row(seq, 0), outcome, seq == 50).unwrap();
    }
    assert_eq!(
        recorder.footprint().unfolded,
        51,
        "they wait for the running call"
    );
    let done = Outcome::new(Ok(json!({"exitCode": 0})), 10, Vec::new());
    recorder.outcome("0.1", 1, done).unwrap();
    let last = Outcome::new(Ok(file_output(0)), 10, Vec::new());
    recorder.call(read_row(51, 0), last, true).unwrap();
    assert_eq!(recorder.footprint().unfolded, 0);
    recorder.end("ok", None).unwrap();
    assert!(verify(&conn, "r1").unwrap().intact);
}

#[test]
fn what_the_writer_promised_is_in_the_database_when_the_call_returns() {
    let (dir, _conn) = db();
    let path = dir.path().join("audit.db");
    let recorder = Recorder::start(&path, run_start("r1")).unwrap();
    for seq in 1..=300 {
        let outcome = Outcome::new(Ok(file_output(seq as usize)), 10, Vec::new());
        recorder.call(read_row(seq, 0), outcome, false).unwrap();
    }
    let cmd = CallRow::new(
        "0",
        301,
        "bash",
        Tier::Irreversible,
        json!({"command": "rm x"}),
        1,
    );
    recorder.intent(cmd).expect("the intent is synced");
    // Another process (a connection of its own) sees the intent, and the
    // sealed rows queued before it, the moment `intent` returns: a crash
    // from here on loses neither.
    let other = Connection::open(&path).unwrap();
    let (rows, open): (i64, i64) = other
        .query_row(
            "SELECT count(*), count(*) FILTER (WHERE status IS NULL) FROM calls WHERE run = 'r1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((rows, open), (301, 1));
    let written = CallRow::new(
        "0",
        302,
        "write",
        Tier::Compensable,
        json!({"path": "a"}),
        1,
    );
    let ok = Outcome::new(Ok(json!({"bytes": 1})), 10, Vec::new());
    recorder.call(written, ok, true).unwrap();
    let seen: i64 = other
        .query_row(
            "SELECT count(*) FROM calls WHERE run = 'r1' AND seq = 302",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        seen, 1,
        "a compensable call's row is committed when it returns"
    );
    drop(recorder);
}

#[test]
fn a_replay_of_a_long_run_reads_each_call_as_asked_in_any_order() {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    let calls = 3000;
    long_run(&path, "r1", calls, 7);
    let record = Record::load(&conn, "r1").unwrap();
    assert_eq!(record.len(), calls + 1);
    let replay = Replay::new(record, Mode::Replay);
    // Out of order first: a call far ahead, then from the start.
    let order = std::iter::once(2500).chain((1..=calls).filter(|&i| i != 2500));
    for i in order {
        let input = json!({"path": format!("f{}.txt", (i - 1) % 7)});
        match replay.answer("0", i as u64, "read", &input) {
            Answer::Recorded(Ok(out), _) => assert_eq!(out, file_output((i - 1) % 7), "call {i}"),
            other => panic!("call {i}: {other:?}"),
        }
        let held = replay.record.held();
        assert!(
            held.0 <= AHEAD_WINDOW + AHEAD_PAGE && held.1 <= CACHED_OUTPUTS,
            "{held:?}"
        );
    }
    assert_eq!(replay.answered.get(), calls as u64);
    // A changed call still diverges, naming it.
    let Answer::Halt(e) = replay.answer("0", calls as u64 + 1, "read", &json!({"path": "other"}))
    else {
        panic!("a changed call was answered");
    };
    assert!(
        e.message.contains(&format!("call #{}", calls + 1)),
        "{}",
        e.message
    );
}

#[test]
fn a_served_task_that_ended_leaves_no_counter_behind_but_its_running_children_keep_theirs() {
    let session = Session::new(None, None);
    for _ in 0..3 {
        session.next_call("0.5");
    }
    session.next_call("0.5.c2");
    session.next_call("0.5.c2.c1");
    session.reading("0.5", "time", || 1.0);
    assert_eq!(session.next_call("0.5.1"), 1);
    assert_eq!(session.next_call("0.50"), 1);
    session.forget_task("0.5");
    // The child it spawned may still be running: its count goes on.
    assert_eq!(session.next_call("0.5.1"), 2);
    // A task whose name only starts alike is another task.
    assert_eq!(session.next_call("0.50"), 2);
    assert_eq!(session.counted(), 2);
}

// --- the writer through the store interface ------------------------------

/// A store over a SQLite connection that notes what the writer asks of it
/// beyond queries: transactions, durability, and each statement's first
/// words. A writer driving it uses nothing but [`Db`], as it must for the
/// PostgreSQL backend.
struct Noted {
    inner: Connection,
    log: Arc<Mutex<Vec<String>>>,
}

impl Noted {
    fn note(&self, what: String) {
        self.log.lock().unwrap().push(what);
    }
}

impl Db for Noted {
    fn backend(&self) -> db::Backend {
        self.inner.backend()
    }

    fn query(&self, sql: &str, params: &[db::Val]) -> db::Result<Vec<db::Row>> {
        self.inner.query(sql, params)
    }

    fn each(
        &self,
        sql: &str,
        params: &[db::Val],
        each: &mut dyn FnMut(db::Row) -> db::Result<()>,
    ) -> db::Result<()> {
        self.inner.each(sql, params, each)
    }

    fn first(&self, sql: &str, params: &[db::Val]) -> db::Result<Option<db::Row>> {
        self.inner.first(sql, params)
    }

    fn execute(&self, sql: &str, params: &[db::Val]) -> db::Result<u64> {
        self.note(sql.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
        Db::execute(&self.inner, sql, params)
    }

    fn begin(&self, how: db::Begin) -> db::Result<()> {
        self.note(format!("begin {how:?}"));
        self.inner.begin(how)
    }

    fn commit(&self) -> db::Result<()> {
        self.note("commit".into());
        self.inner.commit()
    }

    fn rollback(&self) -> db::Result<()> {
        self.note("rollback".into());
        self.inner.rollback()
    }

    fn durable(&self, on: bool) -> db::Result<()> {
        self.note(format!("durable {on}"));
        self.inner.durable(on)
    }
}

/// A store at `path` that notes into `log`.
fn noted(path: &Path, log: &Arc<Mutex<Vec<String>>>) -> Box<dyn Db + Send> {
    Box::new(Noted {
        inner: store::open(path).unwrap(),
        log: log.clone(),
    })
}

/// Run `r1`'s recorder over the database at `path`, each statement noted
/// in `log`.
fn start_noted(path: &Path, log: &Arc<Mutex<Vec<String>>>) -> Result<Recorder, String> {
    Recorder::start_in(
        noted(path, log),
        "noted",
        run_start("r1"),
        crate::audit::outage::DEFAULT_RETRY,
    )
}

/// What `log` noted since the last look.
fn taken(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

fn small_read(seq: u64) -> (CallRow, Outcome) {
    let ok = Outcome::new(Ok(json!({"content": "hi"})), 10, Vec::new());
    (read_row(seq, 0), ok)
}

#[test]
fn the_writer_joins_the_chain_under_the_store_lock_and_syncs_intents_not_sealed_rows() {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    let log = Arc::new(Mutex::new(Vec::new()));
    let recorder = start_noted(&path, &log).unwrap();
    // The run's row and its place in the chain of runs, in one transaction
    // under the store-wide lock; then sealed rows' commits go unsynced.
    let joined = ["begin Store", "INSERT INTO runs", "commit", "durable false"];
    assert_eq!(taken(&log), joined);
    let (row, ok) = small_read(1);
    recorder.call(row, ok, true).unwrap();
    let sealed = ["begin Rows", "INSERT INTO calls", "commit"];
    assert_eq!(taken(&log), sealed, "the setting is cached, not set again");
    let deploy = CallRow::new(
        "0",
        2,
        "bash",
        Tier::Irreversible,
        json!({"command": "deploy"}),
        1,
    );
    recorder.intent(deploy).unwrap();
    let intent = ["durable true", "begin Rows", "INSERT INTO calls", "commit"];
    assert_eq!(taken(&log), intent);
    let (row, ok) = small_read(3);
    recorder.call(row, ok, true).unwrap();
    let after = ["durable false", "begin Rows", "INSERT INTO calls", "commit"];
    assert_eq!(taken(&log), after);
    recorder.end("ok", None).unwrap();
    let end = ["durable true", "begin Rows", "UPDATE runs SET", "commit"];
    assert_eq!(taken(&log), end);
    let v = verify(&conn, "r1").unwrap();
    assert!(v.intact && v.sealed && v.calls == 3, "{v:?}");
}

#[test]
fn a_run_the_store_refuses_is_an_error_naming_the_store_and_leaves_no_row() {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    let log = Arc::new(Mutex::new(Vec::new()));
    record_run(&path, "r1", Vec::new());
    let again = start_noted(&path, &log).unwrap_err();
    assert_eq!(
        again,
        "audit database noted: run r1 is in the record already: an id names one run; give another \
--run-id (or none), or continue that run with `sluice resume r1`"
    );
    assert_eq!(taken(&log), ["begin Store", "rollback"]);
    let runs: i64 = conn
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, 1);
}

/// Waits up to `limit` for `done`; how long it took, `None` past it.
fn within(
    limit: std::time::Duration,
    mut done: impl FnMut() -> bool,
) -> Option<std::time::Duration> {
    let started = std::time::Instant::now();
    while started.elapsed() < limit {
        if done() {
            return Some(started.elapsed());
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    None
}

#[test]
fn a_row_nobody_waits_for_wakes_the_idle_writer_and_is_committed_on_its_own() {
    let (dir, _conn) = db();
    let path = dir.path().join("audit.db");
    let log = Arc::new(Mutex::new(Vec::new()));
    let recorder = start_noted(&path, &log).unwrap();
    taken(&log);
    // Long enough for the writer to go to sleep with nothing queued, far
    // short of the lease's renewal, which would wake it anyway.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let (row, ok) = small_read(1);
    recorder.call(row, ok, false).unwrap();
    let committed = within(super::super::lease::RENEW / 3, || {
        log.lock().unwrap().iter().any(|s| s == "commit")
    });
    assert!(
        committed.is_some(),
        "the sleeping writer was not woken: {:?}",
        taken(&log)
    );
    // Nothing else was coming: it did not wait for company.
    assert_eq!(taken(&log), ["begin Rows", "INSERT INTO calls", "commit"]);
    recorder.end("ok", None).unwrap();
}

#[test]
fn rows_that_come_faster_than_the_writer_commits_them_share_transactions() {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    let log = Arc::new(Mutex::new(Vec::new()));
    let recorder = start_noted(&path, &log).unwrap();
    taken(&log);
    for seq in 1..=200 {
        let (row, ok) = small_read(seq);
        recorder.call(row, ok, false).unwrap();
    }
    recorder.end("ok", None).unwrap();
    let commits = taken(&log).iter().filter(|s| *s == "commit").count();
    // The first may go alone (it found the writer idle); the rest gather.
    assert!(
        commits <= 20,
        "200 rows sent at once took {commits} transactions"
    );
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM calls WHERE run = 'r1'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(rows, 200);
}

#[test]
fn a_recorder_dropped_without_its_end_lets_its_writer_go_at_once() {
    let (dir, _conn) = db();
    let path = dir.path().join("audit.db");
    let log = Arc::new(Mutex::new(Vec::new()));
    let recorder = start_noted(&path, &log).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    drop(recorder);
    // The writer owned the store (and with it a handle on the log): it
    // is gone once the thread ends.
    let gone = within(super::super::lease::RENEW / 3, || {
        Arc::strong_count(&log) == 1
    });
    assert!(gone.is_some(), "the writer still holds its store");
}
