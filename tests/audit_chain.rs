//! Runs chained to each other, the anchor, and the files refused as audit
//! databases (issue 13, item 11), through the real binary: a whole run
//! deleted, edited or reordered; the newest run deleted, the store cut
//! short and the store rolled back, against an anchor; an interrupted
//! predecessor; concurrent runs (each on both stores, `both_stores!`); and,
//! of the SQLite file alone, a file rolled back to a copy, a truncated,
//! foreign or random file, a schema 1 database migrated. Each attack beside
//! a control that must still pass.

mod common;

use common::stores::{column, exec, one, row, Kind, Store};
use common::*;
use rusqlite::{params, Connection};
use serde_json::{json, Value};
use sluice::internals::audit::db::{Db, Val};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn db_of(ws: &Path) -> PathBuf {
    ws.join(".sluice").join("audit.db")
}

fn open(ws: &Path) -> Connection {
    Connection::open(db_of(ws)).expect("open the audit database")
}

/// Records one run of a few calls (a write, a read, a listing); returns its id.
fn record(ws: &Path, i: usize) -> String {
    run_lua(
        ws,
        &format!(
            "sluice.write{{path = 'f{i}', content = 'run {i}'}}\n\
             sluice.read{{path = 'f{i}'}}\nsluice.ls{{path = '.'}}\n"
        ),
        &[],
    )
    .ok();
    newest(&*Store::current().db(ws))
}

/// The id of the run at the newest place.
fn newest(db: &dyn Db) -> String {
    one(db, "SELECT id FROM runs ORDER BY n DESC LIMIT 1", &[])
}

/// `(n, prior, prior_rows)` of run `id`.
fn link_of(db: &dyn Db, id: &str) -> (i64, Option<String>, Option<i64>) {
    let r = row(
        db,
        "SELECT n, prior, prior_rows FROM runs WHERE id = ?1",
        &[Val::from(id)],
    );
    (r.get(0).unwrap(), r.get(1).unwrap(), r.get(2).unwrap())
}

fn seal_of(db: &dyn Db, id: &str) -> Option<String> {
    one(db, "SELECT seal FROM runs WHERE id = ?1", &[Val::from(id)])
}

/// Deletes run `id` whole: its calls, readings and row.
fn delete_run(db: &dyn Db, id: &str) {
    for table in ["calls", "readings"] {
        exec(
            db,
            &format!("DELETE FROM {table} WHERE run = ?1"),
            &[Val::from(id)],
        );
    }
    assert_eq!(
        exec(db, "DELETE FROM runs WHERE id = ?1", &[Val::from(id)]),
        1
    );
}

/// That `verify --anchor A` fails: A covered 2 runs, the record holds 1.
fn assert_rolled_back_to_one_run(ws: &Path, a: &str, store: &common::stores::Store) {
    let out = verify(ws, &["--anchor", a]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.ends_with(&format!(
            "anchor {a}: NOT HELD: rolled back: the anchor covers 2 runs and the newest run in the record \
is #1: the newest run was deleted, or {}\n",
            rolled_back(store)
        )),
        "{}",
        out.stdout
    );
}

fn verify(ws: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["audit", "verify"];
    args.extend(extra);
    sluice_in(ws, &args)
}

fn verify_json(ws: &Path, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["--json"];
    args.extend(extra);
    let out = verify(ws, &args);
    let v = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", out.stdout, out.stderr));
    (out.code, v)
}

/// The verdict of run `id` in a `verify --json` report.
fn verdict<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["run"] == id)
        .unwrap_or_else(|| panic!("no verdict for {id}: {report}"))
}

fn anchor(ws: &Path) -> String {
    let out = sluice_in(ws, &["audit", "anchor"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let line = out.stdout.trim_end_matches('\n');
    assert!(!line.contains('\n'), "one line: {:?}", out.stdout);
    line.to_string()
}

/// Copies the database (it is whole in its main file once no run is live).
fn copy_db(ws: &Path, to: &Path) {
    assert!(
        !Path::new(&format!("{}-wal", db_of(ws).display())).exists(),
        "a write-ahead log is left: the copy would miss it"
    );
    std::fs::copy(db_of(ws), to).unwrap();
}

// ---- runs chained to each other ----

both_stores! {
    fn each_run_commits_to_the_seal_of_the_run_before_it(store) {
        let ws = workspace();
        let ids: Vec<String> = (1..=3).map(|i| record(ws.path(), i)).collect();
        let db = store.db(ws.path());
        assert_eq!(link_of(&*db, &ids[0]), (1, None, None));
        for w in ids.windows(2) {
            let (n, prior, rows) = link_of(&*db, &w[1]);
            assert_eq!((prior, rows), (seal_of(&*db, &w[0]), None));
            assert_eq!(n, link_of(&*db, &w[0]).0 + 1);
        }
        let (code, report) = verify_json(ws.path(), &[]);
        assert_eq!(code, 0, "{report}");
        assert_eq!(report["intact"], true);
        assert_eq!(report["unchainedRuns"], 0);
        for id in &ids {
            let v = verdict(&report, id);
            assert_eq!(
                (v["intact"].clone(), v["chained"].clone()),
                (json!(true), json!(true))
            );
        }
    }
}

both_stores! {
    fn a_whole_middle_run_deleted_fails_verify_at_the_run_after_it(store) {
        let ws = workspace();
        let ids: Vec<String> = (1..=3).map(|i| record(ws.path(), i)).collect();
        assert_eq!(verify(ws.path(), &[]).code, 0);
        delete_run(&*store.db(ws.path()), &ids[1]);
        let out = verify(ws.path(), &[]);
        assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
        let line = out.stdout.lines().find(|l| l.starts_with(&ids[2])).unwrap();
        assert_eq!(
            line,
            format!(
                "{}  NOT INTACT: predecessor missing: run #2, the run before it (#3), is gone from the \
record: a whole run (its row and its calls) was deleted",
                ids[2]
            )
        );
        assert!(
            out.stdout.ends_with("2 runs checked: 1 intact, 1 not\n"),
            "{}",
            out.stdout
        );
        let (_, report) = verify_json(ws.path(), &[]);
        let v = verdict(&report, &ids[2]);
        assert_eq!(v["problem"]["failure"], "predecessor_missing");
        assert_eq!(verdict(&report, &ids[0])["intact"], true);
    }
}

both_stores! {
    fn a_whole_earlier_run_rewritten_consistently_fails_at_the_run_after_it(store) {
        let ws = workspace();
        let ids: Vec<String> = (1..=2).map(|i| record(ws.path(), i)).collect();
        let db = store.db(ws.path());
        // The attacker empties run 1 and seals it again over nothing, as the
        // writer would have: run 1 alone verifies.
        let run = [Val::from(&ids[0])];
        let r = row(
            &*db,
            "SELECT head, status, ended_ms FROM runs WHERE id = ?1",
            &run,
        );
        let (head, status, ended): (String, String, i64) =
            (r.get(0).unwrap(), r.get(1).unwrap(), r.get(2).unwrap());
        exec(&*db, "DELETE FROM calls WHERE run = ?1", &run);
        exec(&*db, "DELETE FROM readings WHERE run = ?1", &run);
        let seal = sluice::internals::audit::chain::Seal::new(&head).finish(
            &sluice::internals::audit::chain::RunEnd {
                status: &status,
                error: None,
                ended_ms: ended,
            },
        );
        exec(
            &*db,
            "UPDATE runs SET seal = ?2 WHERE id = ?1",
            &[Val::from(&ids[0]), Val::from(seal)],
        );
        let (code, report) = verify_json(ws.path(), &[]);
        assert_eq!(code, 1, "{report}");
        assert_eq!(verdict(&report, &ids[0])["intact"], true, "{report}");
        let v = verdict(&report, &ids[1]);
        assert_eq!(v["problem"]["failure"], "predecessor_mismatch");
        assert_eq!(
            v["problem"]["message"],
            format!(
                "predecessor seal does not match: a run was deleted or edited between run #1 ({}) and this \
one (#2): this run commits to the seal of run #1 as it was when this run started, and run #1 holds another \
seal now",
                ids[0]
            )
        );
    }
}

both_stores! {
    fn whole_runs_reordered_fail_verify(store) {
        let ws = workspace();
        let ids: Vec<String> = (1..=2).map(|i| record(ws.path(), i)).collect();
        let db = store.db(ws.path());
        exec(&*db, "UPDATE runs SET n = -1 WHERE id = ?1", &[Val::from(&ids[0])]);
        exec(&*db, "UPDATE runs SET n = 1 WHERE id = ?1", &[Val::from(&ids[1])]);
        exec(&*db, "UPDATE runs SET n = 2 WHERE id = ?1", &[Val::from(&ids[0])]);
        let (code, report) = verify_json(ws.path(), &[]);
        assert_eq!(code, 1, "{report}");
        for id in &ids {
            assert_eq!(
                verdict(&report, id)["problem"]["failure"],
                "run_edited",
                "{report}"
            );
        }
    }
}

// ---- the anchor ----

both_stores! {
    fn an_anchor_names_the_run_count_and_holds_while_more_runs_are_appended(store) {
        let ws = workspace();
        let first = record(ws.path(), 1);
        let a = anchor(ws.path());
        let expected = {
            let db = store.db(ws.path());
            let tip = seal_of(&*db, &first).unwrap();
            format!(
                "sluice-anchor:v1:1:{}",
                sluice::internals::audit::chain::anchor(1, &tip)
            )
        };
        assert_eq!(a, expected);
        let head = sluice_in(ws.path(), &["audit", "anchor", "--json"]);
        let head: Value = serde_json::from_str(&head.stdout).unwrap();
        assert_eq!(
            head,
            json!({"anchor": a, "runs": 1, "run": first, "status": "ok", "covers": "seal", "rows": 3})
        );
        record(ws.path(), 2);
        record(ws.path(), 3);
        let out = verify(ws.path(), &["--anchor", &a]);
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        assert!(
            out.stdout.ends_with(&format!(
                "anchor {a}: held: run #1 ({first}) still has its seal, with 2 runs after it\n"
            )),
            "{}",
            out.stdout
        );
        let (_, report) = verify_json(ws.path(), &["--anchor", &a]);
        assert_eq!(report["anchor"]["held"], true);
        assert_eq!(report["anchor"]["runs"], 3);
    }
}

both_stores! {
    fn the_newest_run_deleted_passes_plain_verify_and_fails_against_the_anchor(store) {
        let ws = workspace();
        record(ws.path(), 1);
        let second = record(ws.path(), 2);
        let a = anchor(ws.path());
        delete_run(&*store.db(ws.path()), &second);
        // What a chain alone cannot show: the shorter record is intact.
        assert_eq!(verify(ws.path(), &[]).code, 0);
        assert_rolled_back_to_one_run(ws.path(), &a, store);
        let (code, report) = verify_json(ws.path(), &["--anchor", &a]);
        assert_eq!((code, &report["intact"]), (1, &json!(false)));
        assert_eq!(report["anchor"]["failure"], "rolled_back");
    }
}

#[test]
fn a_file_rolled_back_to_a_copy_taken_before_the_last_run_fails_against_the_anchor() {
    let ws = workspace();
    record(ws.path(), 1);
    let copy = ws.path().parent().unwrap().join("before.db");
    copy_db(ws.path(), &copy);
    record(ws.path(), 2);
    let a = anchor(ws.path());
    std::fs::copy(&copy, db_of(ws.path())).unwrap();
    assert_eq!(
        verify(ws.path(), &[]).code,
        0,
        "the older copy is intact on its own"
    );
    let (code, report) = verify_json(ws.path(), &["--anchor", &a]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["anchor"]["failure"], "rolled_back");
    // Rolled back, then another run recorded: as many runs, another chain.
    let other = record(ws.path(), 3);
    let out = verify(ws.path(), &["--anchor", &a]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.ends_with(&format!(
            "anchor {a}: NOT HELD: forked: run #2 ({other}) is not the state the anchor covers (neither its \
seal nor its head nor any of its rows hash to it): the record was rolled back and other runs recorded since, \
or run #2 was rewritten\n"
        )),
        "{}",
        out.stdout
    );
}

/// How `verify --anchor` names a rollback of `store`'s kind.
fn rolled_back(store: &Store) -> &'static str {
    match store.kind {
        Kind::Sqlite => "the file was replaced by an older copy of itself",
        Kind::Postgres => "the database was restored to an earlier state of itself",
    }
}

both_stores! {
    /// The store put back as it was before the last run (a file copied
    /// over, a database restored from a dump): intact on its own, and
    /// rolled back against the anchor; once another run is recorded in
    /// the last run's place, forked.
    fn a_store_restored_to_its_state_before_the_last_run_fails_against_the_anchor(store) {
        let ws = workspace();
        record(ws.path(), 1);
        let before = store.snapshot(ws.path());
        let second = record(ws.path(), 2);
        let a = anchor(ws.path());
        store.restore(ws.path(), &before);
        let out = verify(ws.path(), &[]);
        assert_eq!(out.code, 0, "the earlier state is intact on its own: {}", out.stdout);
        let listed = sluice_in(ws.path(), &["audit", "list"]);
        assert!(!listed.stdout.contains(&second[..8]), "{}", listed.stdout);
        assert_rolled_back_to_one_run(ws.path(), &a, store);
        let other = record(ws.path(), 3);
        let (code, report) = verify_json(ws.path(), &["--anchor", &a]);
        assert_eq!(code, 1, "{report}");
        assert_eq!(report["anchor"]["failure"], "forked", "{report}");
        assert_eq!(
            report["anchor"]["message"],
            format!(
                "forked: run #2 ({other}) is not the state the anchor covers (neither its seal nor its head \
nor any of its rows hash to it): the record was rolled back and other runs recorded since, or run #2 was \
rewritten"
            )
        );
    }

    /// A store cut short, every run after run #2 deleted with its calls
    /// and readings: what is left is an intact record of two runs, and
    /// the anchor taken at run #4 says two runs are gone.
    fn a_store_truncated_after_run_2_passes_plain_verify_and_fails_against_the_anchor(store) {
        let ws = workspace();
        let ids: Vec<String> = (1..=4).map(|i| record(ws.path(), i)).collect();
        let a = anchor(ws.path());
        let db = store.db(ws.path());
        for table in ["calls", "readings"] {
            exec(
                &*db,
                &format!("DELETE FROM {table} WHERE run IN (SELECT id FROM runs WHERE n > ?1)"),
                &[Val::from(2_i64)],
            );
        }
        assert_eq!(exec(&*db, "DELETE FROM runs WHERE n > ?1", &[Val::from(2_i64)]), 2);
        let (code, report) = verify_json(ws.path(), &[]);
        assert_eq!(code, 0, "{report}");
        let checked: Vec<&str> = report["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["run"].as_str().unwrap())
            .collect();
        assert_eq!(checked, [&ids[1], &ids[0]], "{report}");
        let out = verify(ws.path(), &["--anchor", &a]);
        assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
        assert!(
            out.stdout.ends_with(&format!(
                "anchor {a}: NOT HELD: rolled back: the anchor covers 4 runs and the newest run in the record \
is #2: the newest 2 runs were deleted, or {}\n",
                rolled_back(store)
            )),
            "{}",
            out.stdout
        );
    }
}

both_stores! {
    fn an_anchor_taken_while_a_run_is_live_holds_after_it_seals(store) {
        let ws = workspace();
        record(ws.path(), 1);
        std::fs::write(ws.file("hold"), "").unwrap();
        let mut live = spawn_lua(
            ws.path(),
            "assert(sluice.write{path = 'started', content = ''})\n\
             assert(sluice.bash{command = 'while [ -e hold ]; do sleep 0.05; done'})\n",
            &[],
        );
        wait_for(&ws.file("started"));
        // The bash call's intent is committed before it runs.
        let deadline = Instant::now() + Duration::from_secs(20);
        let head = loop {
            let out = sluice_in(ws.path(), &["audit", "anchor", "--json"]);
            let head: Value = serde_json::from_str(&out.stdout).unwrap();
            if head["rows"] == 2 || Instant::now() > deadline {
                break head;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(
            (
                &head["runs"],
                &head["status"],
                &head["covers"],
                &head["rows"]
            ),
            (&json!(2), &json!("running"), &json!("row"), &json!(2)),
            "{head}"
        );
        std::fs::remove_file(ws.file("hold")).unwrap();
        assert!(live.wait().unwrap().success());
        let a = head["anchor"].as_str().unwrap();
        let out = verify(ws.path(), &["--anchor", a]);
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        assert!(
            out.stdout.ends_with(&format!(
                "anchor {a}: held: run #2 ({}) still has its row #2, with no run after it\n",
                head["run"].as_str().unwrap()
            )),
            "{}",
            out.stdout
        );
    }
}

both_stores! {
    fn a_malformed_anchor_is_an_error_naming_the_form(store) {
        let ws = workspace();
        record(ws.path(), 1);
        let out = verify(ws.path(), &["--anchor", "sluice-anchor:v1:1:beef"]);
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert_eq!(
            out.stderr,
            "sluice: --anchor \"sluice-anchor:v1:1:beef\": the hash is not 64 lowercase hex digits; write it \
as `sluice audit anchor` printed it: sluice-anchor:v1:RUNS:HEX\n"
        );
    }
}

fn wait_for(p: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !p.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---- an unsealed predecessor, and concurrent runs ----

both_stores! {
    fn a_run_started_while_another_is_live_commits_to_its_rows_so_far_and_both_verify(store) {
        let ws = workspace();
        std::fs::write(ws.file("hold"), "").unwrap();
        let mut live = spawn_lua(
            ws.path(),
            "assert(sluice.write{path = 'started', content = ''})\n\
             assert(sluice.bash{command = 'touch running; while [ -e hold ]; do sleep 0.05; done'})\n",
            &[],
        );
        wait_for(&ws.file("running"));
        let second = record(ws.path(), 2);
        std::fs::remove_file(ws.file("hold")).unwrap();
        assert!(live.wait().unwrap().success());
        let db = store.db(ws.path());
        let first: String = one(&*db, "SELECT id FROM runs WHERE n = 1", &[]);
        let row2: String = one(
            &*db,
            "SELECT hash FROM calls WHERE run = ?1 AND n = 2",
            &[Val::from(&first)],
        );
        assert_eq!(link_of(&*db, &second), (2, Some(row2), Some(2)));
        let (code, report) = verify_json(ws.path(), &[]);
        assert_eq!(code, 0, "{report}");
    }
}

both_stores! {
    fn a_killed_predecessor_is_chained_by_its_last_row_so_rows_cut_from_its_end_show(store)
    {
        let ws = workspace();
        std::fs::write(ws.file("hold"), "").unwrap();
        let mut killed = spawn_lua(
            ws.path(),
            "assert(sluice.write{path = 'started', content = ''})\n\
             assert(sluice.bash{command = 'touch running; while [ -e hold ]; do sleep 0.05; done'})\n",
            &[],
        );
        wait_for(&ws.file("running"));
        killed.kill().unwrap();
        killed.wait().unwrap();
        std::fs::remove_file(ws.file("hold")).unwrap();
        let second = record(ws.path(), 2);
        let db = store.db(ws.path());
        assert_eq!(link_of(&*db, &second).2, Some(2));
        let (code, report) = verify_json(ws.path(), &[]);
        assert_eq!(code, 0, "{report}");
        let first: String = one(&*db, "SELECT id FROM runs WHERE n = 1", &[]);
        assert!(verdict(&report, &first)["warning"]
            .as_str()
            .unwrap()
            .contains("not sealed"));
        // The killed run's last row, which its own record could not show gone.
        exec(
            &*db,
            "DELETE FROM calls WHERE run = ?1 AND n = 2",
            &[Val::from(&first)],
        );
        let (code, report) = verify_json(ws.path(), &[]);
        assert_eq!(code, 1, "{report}");
        assert_eq!(verdict(&report, &first)["intact"], true);
        assert_eq!(
            verdict(&report, &second)["problem"]["message"],
            format!(
                "predecessor seal does not match: a run was deleted or edited between run #1 ({first}) and \
this one (#2): this run commits to row #2 of run #1 as it was when this run started, and run #1 holds no \
row #2 now"
            )
        );
    }
}

both_stores! {
    fn concurrent_runs_on_one_database_each_take_a_place_and_all_verify(store) {
        let ws = workspace();
        let script = "local tag = sluice.args[1]\n\
                      for i = 1, 15 do\n\
                        assert(sluice.write{path = tag .. '-' .. i, content = tag})\n\
                        assert(sluice.read{path = tag .. '-' .. i})\n\
                      end\n";
        let children: Vec<_> = ["a", "b", "c", "d"]
            .iter()
            .map(|tag| spawn_lua(ws.path(), script, &[tag]))
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let db = store.db(ws.path());
        let places: Vec<i64> = column(&*db, "SELECT n FROM runs ORDER BY n", &[]);
        assert_eq!(places, [1, 2, 3, 4]);
        let (code, report) = verify_json(ws.path(), &[]);
        assert_eq!(code, 0, "{report}");
        assert!(report["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["chained"] == true));
        let a = anchor(ws.path());
        assert!(a.starts_with("sluice-anchor:v1:4:"), "{a}");
    }
}

// ---- files that are not audit databases ----

/// The refusal for the file at `db` that `what` describes.
fn refusal(db: &Path, what: &str) -> String {
    let p = db.display();
    format!(
        "sluice: audit database {p} {what}. sluice neither reads it as a record nor starts a new one over it: \
restore the record from a copy, or move the file aside (mv {p} {p}.bad) and a run starts a new record there; \
or give --audit (or SLUICE_AUDIT) another path\n"
    )
}

/// `verify` and `sluice run` both refuse the database, and the run leaves
/// the file as it was and runs nothing.
fn assert_refused(ws: &Path, message: &str) {
    let before = std::fs::read(db_of(ws)).unwrap();
    let out = verify(ws, &[]);
    assert_eq!((out.code, out.stdout.as_str()), (2, ""), "{}", out.stderr);
    assert_eq!(out.stderr, message);
    let run = run_lua(ws, "sluice.write{path = 'ran', content = ''}", &[]);
    assert_ne!(run.code, 0, "sluice run went on: {}", run.stdout);
    assert!(
        run.stderr
            .contains(message.trim_start_matches("sluice: ").trim_end()),
        "{}",
        run.stderr
    );
    assert!(!ws.join("ran").exists(), "the script ran without a record");
    assert_eq!(
        std::fs::read(db_of(ws)).unwrap(),
        before,
        "the file was changed"
    );
    for list in [
        sluice_in(ws, &["audit", "list"]),
        sluice_in(ws, &["audit", "anchor"]),
    ] {
        assert_eq!((list.code, list.stderr.as_str()), (2, message));
    }
}

#[test]
fn a_database_truncated_to_0_bytes_is_an_error_not_an_empty_record() {
    let ws = workspace();
    record(ws.path(), 1);
    std::fs::write(db_of(ws.path()), b"").unwrap();
    let message = refusal(
        &db_of(ws.path()),
        "is empty (0 bytes): it was truncated, or never written by sluice",
    );
    assert_refused(ws.path(), &message);
}

#[test]
fn a_foreign_sqlite_database_is_an_error_naming_its_tables() {
    let ws = workspace();
    std::fs::create_dir(ws.file(".sluice")).unwrap();
    let conn = open(ws.path());
    conn.execute_batch("CREATE TABLE notes (body TEXT); CREATE TABLE tags (name TEXT);")
        .unwrap();
    drop(conn);
    let message = refusal(
        &db_of(ws.path()),
        "is a SQLite database, but not a sluice audit store: it holds the tables notes, tags (an audit \
store holds runs, calls, outputs and readings)",
    );
    assert_refused(ws.path(), &message);
}

#[test]
fn a_foreign_database_with_tables_named_runs_and_calls_is_not_taken_for_schema_1() {
    let ws = workspace();
    std::fs::create_dir(ws.file(".sluice")).unwrap();
    open(ws.path())
        .execute_batch("CREATE TABLE runs (x); CREATE TABLE calls (y); PRAGMA user_version = 1;")
        .unwrap();
    let message = refusal(
        &db_of(ws.path()),
        "is a SQLite database, but not a sluice audit store: it holds the tables calls, runs (an audit \
store holds runs, calls, outputs and readings)",
    );
    assert_refused(ws.path(), &message);
}

#[test]
fn an_empty_sqlite_database_is_an_error_too() {
    let ws = workspace();
    std::fs::create_dir(ws.file(".sluice")).unwrap();
    open(ws.path())
        .execute_batch("CREATE TABLE t (x); DROP TABLE t;")
        .unwrap();
    let message = refusal(
        &db_of(ws.path()),
        "is an empty SQLite database, not a sluice audit store",
    );
    assert_refused(ws.path(), &message);
}

#[test]
fn a_file_of_random_bytes_is_an_error_naming_its_first_bytes() {
    let ws = workspace();
    std::fs::create_dir(ws.file(".sluice")).unwrap();
    let mut bytes = vec![0u8; 4096];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .unwrap();
    bytes[0] = 0x7f; // never "SQLite format 3"
    std::fs::write(db_of(ws.path()), &bytes).unwrap();
    let start: Vec<String> = bytes[..8].iter().map(|b| format!("{b:02x}")).collect();
    let message = refusal(
        &db_of(ws.path()),
        &format!(
            "is not a SQLite database (4096 bytes, beginning {})",
            start.join(" ")
        ),
    );
    assert_refused(ws.path(), &message);
}

#[test]
fn a_missing_database_is_still_created_by_a_run_and_only_by_a_run() {
    let ws = workspace();
    let out = verify(ws.path(), &[]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("no audit database at"),
        "{}",
        out.stderr
    );
    assert!(!db_of(ws.path()).exists(), "verify created a database");
    let id = record(ws.path(), 1);
    let out = verify(ws.path(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, format!("{id}  intact (3 calls, sealed)\n"));
    // No staging file is left beside it (the folder's .gitignore is
    // sluice's own, keeping the record out of git).
    let names: Vec<String> = std::fs::read_dir(ws.file(".sluice"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("audit.db"))
        .collect();
    assert_eq!(names, [".gitignore"]);
}

// ---- a schema 1 database ----

/// Schema 1 as sluice wrote it before runs were chained (user_version 1,
/// no application id): a fixture, kept as it was.
const SCHEMA_1: &str = r#"
CREATE TABLE runs (
  id TEXT PRIMARY KEY, script TEXT NOT NULL, script_sha256 TEXT, policies TEXT NOT NULL,
  args TEXT NOT NULL, workspace TEXT NOT NULL, started_ms INTEGER NOT NULL, ended_ms INTEGER,
  status TEXT NOT NULL, error TEXT, version TEXT NOT NULL, random_seed INTEGER NOT NULL,
  resumed_from TEXT, ceiling TEXT NOT NULL, pid INTEGER NOT NULL, pid_start INTEGER NOT NULL,
  head TEXT NOT NULL, seal TEXT
);
CREATE TABLE calls (
  run TEXT NOT NULL REFERENCES runs(id), task TEXT NOT NULL, seq INTEGER NOT NULL, n INTEGER NOT NULL,
  flow TEXT NOT NULL, tier TEXT NOT NULL, input TEXT NOT NULL, capabilities TEXT NOT NULL,
  decisions TEXT NOT NULL, route TEXT, redacted TEXT NOT NULL, replayed_from TEXT,
  started_ms INTEGER NOT NULL, prev TEXT NOT NULL, hash TEXT NOT NULL, status TEXT, output TEXT,
  output_ref TEXT, error TEXT, capped INTEGER NOT NULL DEFAULT 0, duration_us INTEGER,
  late_decisions TEXT, outcome_hash TEXT, PRIMARY KEY (run, task, seq)
);
CREATE UNIQUE INDEX calls_chain ON calls(run, n);
CREATE TABLE outputs (sha256 TEXT PRIMARY KEY, body TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE readings (
  run TEXT NOT NULL REFERENCES runs(id), task TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
  value REAL NOT NULL, PRIMARY KEY (run, task, seq)
);
PRAGMA user_version = 1;
"#;

/// Inserts a sealed schema 1 run with no calls, hashed as schema 1 did.
fn insert_v1_run(conn: &Connection, id: &str, started_ms: i64) {
    use sluice::internals::audit::chain::{self, RunEnd, RunHead, Seal};
    let head = chain::head(&RunHead {
        id,
        script: "/s/old.lua",
        script_sha256: None,
        policies: "[]",
        args: "[]",
        workspace: "/w",
        started_ms,
        version: "0.1.0",
        random_seed: 1,
        resumed_from: None,
        ceiling: "[]",
        pid: 1,
        pid_start: 0,
        link: None,
    });
    let ended_ms = started_ms + 5;
    let seal = Seal::new(&head).finish(&RunEnd {
        status: "ok",
        error: None,
        ended_ms,
    });
    conn.execute(
        "INSERT INTO runs (id, script, policies, args, workspace, started_ms, ended_ms, status, version,
           random_seed, ceiling, pid, pid_start, head, seal)
         VALUES (?1, '/s/old.lua', '[]', '[]', '/w', ?2, ?3, 'ok', '0.1.0', 1, '[]', 1, 0, ?4, ?5)",
        params![id, started_ms, ended_ms, head, seal],
    )
    .unwrap();
}

#[test]
fn a_schema_1_database_migrates_its_runs_verify_as_they_were_and_new_runs_chain_on() {
    let ws = workspace();
    std::fs::create_dir(ws.file(".sluice")).unwrap();
    let conn = open(ws.path());
    conn.execute_batch(SCHEMA_1).unwrap();
    insert_v1_run(&conn, "old-1", 1_000);
    insert_v1_run(&conn, "old-2", 2_000);
    drop(conn);
    let out = verify(ws.path(), &[]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout,
        "old-2  intact (0 calls, sealed)\nold-1  intact (0 calls, sealed)\n2 runs checked: 2 intact, 0 not\n\
note: runs #1–#2 were recorded before runs were chained to each other (schema 1): each is checked on its \
own, and a whole run deleted or reordered among them would not show\n"
    );
    let conn = open(ws.path());
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, sluice::record::SCHEMA_VERSION);
    assert_eq!(link_of(&conn, "old-1").0, 1);
    let new = record(ws.path(), 3);
    assert_eq!(
        link_of(&conn, &new),
        (3, seal_of(&conn, "old-2"), None),
        "the first chained run commits to the last schema 1 run"
    );
    let (code, report) = verify_json(ws.path(), &[]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["unchainedRuns"], 2);
    assert_eq!(verdict(&report, "old-1")["chained"], false);
    assert_eq!(verdict(&report, &new)["chained"], true);
    // Deleting the last schema 1 run shows at the chained run after it.
    delete_run(&conn, "old-2");
    let (code, report) = verify_json(ws.path(), &[]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(
        verdict(&report, &new)["problem"]["failure"],
        "predecessor_missing"
    );
}
