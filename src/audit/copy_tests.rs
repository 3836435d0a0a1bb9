//! Tests of `audit copy` between two SQLite records (the PostgreSQL round
//! trip is `tests/audit_copy.rs`): a copied run keeps every hash and
//! checks whole in the target, and its place there is as tamper-evident as
//! a run recorded there.

use super::*;
use crate::audit::fixtures::*;
use crate::audit::verify::{verify, Failure};
use rusqlite::Connection;

/// Every hash a run carries: head, each row's hash and outcome hash, seal.
fn hashes(db: &dyn Db, id: &str) -> Vec<Option<String>> {
    let mut all: Vec<Option<String>> = db
        .first("SELECT head, seal FROM runs WHERE id = ?1", vals![id])
        .unwrap()
        .map(|r| r.0.iter().map(r_text).collect())
        .unwrap_or_default();
    db.each(
        "SELECT hash, outcome_hash FROM calls WHERE run = ?1 ORDER BY n",
        vals![id],
        &mut |r| {
            all.extend(r.0.iter().map(r_text));
            Ok(())
        },
    )
    .unwrap();
    all
}

fn r_text(v: &Val) -> Option<String> {
    match v {
        Val::Text(t) => Some(t.clone()),
        _ => None,
    }
}

fn intact(db: &dyn Db, id: &str) {
    let v = verify(db, id).unwrap();
    assert!(v.intact && v.chained, "{id}: {v:?}");
}

/// A source holding r1 and r2; a target holding t1 already.
fn two_records() -> (tempfile::TempDir, Connection, tempfile::TempDir, Connection) {
    let (sd, source) = db();
    standard(&source, "r1");
    standard(&source, "r2");
    let (td, target) = db();
    standard(&target, "t1");
    (sd, source, td, target)
}

#[test]
fn a_copied_run_keeps_every_hash_and_takes_the_next_place_in_the_target() {
    let (_s, source, _t, target) = two_records();
    let out = copy_run(&source, &target, "r2").unwrap();
    assert_eq!(out, Outcome::Copied { n: 2, calls: 5 });
    assert_eq!(hashes(&source, "r2"), hashes(&target, "r2"));
    assert_eq!(hashes(&target, "r2").len(), 12);
    intact(&target, "r2");
    // Its head covers its place in the source (#2 after r1's seal).
    let origin: String = (&target as &dyn Db)
        .value("SELECT origin FROM runs WHERE id = 'r2'", &[])
        .unwrap()
        .unwrap();
    let r1_seal: String = (&source as &dyn Db)
        .value("SELECT seal FROM runs WHERE id = 'r1'", &[])
        .unwrap()
        .unwrap();
    assert_eq!(
        origin,
        format!(r#"{{"n":2,"prior":"{r1_seal}","priorRows":null}}"#)
    );
    // Readings came along: the seal covers them, and it verified.
    let readings: i64 = (&target as &dyn Db)
        .value("SELECT count(*) FROM readings WHERE run = 'r2'", &[])
        .unwrap()
        .unwrap();
    assert_eq!(readings, 2);
}

#[test]
fn a_run_recorded_after_a_copied_one_commits_to_its_place_and_verifies() {
    let (_s, source, _t, target) = two_records();
    copy_run(&source, &target, "r2").unwrap();
    standard(&target, "t3");
    let joined: String = (&target as &dyn Db)
        .value("SELECT joined FROM runs WHERE id = 'r2'", &[])
        .unwrap()
        .unwrap();
    let prior: String = (&target as &dyn Db)
        .value("SELECT prior FROM runs WHERE id = 't3'", &[])
        .unwrap()
        .unwrap();
    assert_eq!(prior, joined);
    for id in ["t1", "r2", "t3"] {
        intact(&target, id);
    }
    // The anchor covers the copied run's place when it is the newest.
    let (_s2, source2, _t2, target2) = two_records();
    copy_run(&source2, &target2, "r1").unwrap();
    let head = crate::audit::anchor::head(&target2).unwrap();
    assert_eq!((head.runs, head.run.as_str()), (2, "r1"));
    let joined: String = (&target2 as &dyn Db)
        .value("SELECT joined FROM runs WHERE id = 'r1'", &[])
        .unwrap()
        .unwrap();
    assert_eq!(
        head.anchor,
        format!("sluice-anchor:v1:2:{}", chain::anchor(2, &joined))
    );
}

#[test]
fn a_copied_run_deleted_from_the_target_shows_at_the_run_after_it() {
    let (_s, source, _t, target) = two_records();
    copy_run(&source, &target, "r2").unwrap();
    standard(&target, "t3");
    sql(
        &target,
        "DELETE FROM calls WHERE run = 'r2'; DELETE FROM readings WHERE run = 'r2'; \
         DELETE FROM runs WHERE id = 'r2'",
    );
    let v = verify(&target, "t3").unwrap();
    assert_eq!(
        v.problem.map(|p| p.failure),
        Some(Failure::PredecessorMissing)
    );
}

#[test]
fn a_copied_run_moved_cut_or_stripped_of_its_origin_in_the_target_is_named() {
    let cases = [
        // Moved to another place (its successor's too, so only it shows).
        "UPDATE runs SET n = 7 WHERE id = 'r2'",
        // Its last row gone, and its seal dropped as if it had been killed.
        "DELETE FROM calls WHERE run = 'r2' AND n = 5; UPDATE runs SET seal = NULL, \
         status = 'interrupted' WHERE id = 'r2'",
        // Passed off as a run recorded here.
        "UPDATE runs SET origin = NULL, joined = NULL WHERE id = 'r2'",
        "UPDATE runs SET origin = '{\"n\":2}' WHERE id = 'r2'",
        "UPDATE runs SET joined = NULL WHERE id = 'r2'",
        // A run recorded here dressed as a copy.
        "UPDATE runs SET joined = 'ab' WHERE id = 't1'",
    ];
    for tamper in cases {
        let (_s, source, _t, target) = two_records();
        copy_run(&source, &target, "r2").unwrap();
        sql(&target, tamper);
        let id = if tamper.contains("'t1'") { "t1" } else { "r2" };
        let v = verify(&target, id).unwrap();
        let failure = v.problem.as_ref().map(|p| p.failure);
        assert!(
            matches!(
                failure,
                Some(Failure::RunEdited | Failure::PredecessorMissing)
            ),
            "{tamper}: {v:?}"
        );
    }
}

#[test]
fn a_run_copied_on_keeps_its_origin_and_verifies_in_a_third_record() {
    let (_s, source, _t, target) = two_records();
    copy_run(&source, &target, "r2").unwrap();
    let (_c, third) = db();
    standard(&third, "c1");
    standard(&third, "c2");
    assert_eq!(
        copy_run(&target, &third, "r2").unwrap(),
        Outcome::Copied { n: 3, calls: 5 }
    );
    intact(&third, "r2");
    assert_eq!(hashes(&source, "r2"), hashes(&third, "r2"));
    let origin = |db: &dyn Db| -> String {
        db.value("SELECT origin FROM runs WHERE id = 'r2'", &[])
            .unwrap()
            .unwrap()
    };
    assert_eq!(origin(&target), origin(&third));
    // And back into the record it came from: it is there already.
    assert_eq!(
        copy_run(&third, &source, "r2").unwrap(),
        Outcome::AlreadyThere { n: 2 }
    );
}

#[test]
fn a_conversation_copies_with_each_message_kept_once() {
    let (dir, source) = db();
    let msgs = messages(6);
    let rows = (0..6)
        .map(|k| model_row(k as u64 + 1, model_input(&msgs, k)))
        .collect();
    record_run(&dir.path().join("audit.db"), "r1", rows);
    let (_t, target) = db();
    assert_eq!(
        copy_run(&source, &target, "r1").unwrap(),
        Outcome::Copied { n: 1, calls: 6 }
    );
    intact(&target, "r1");
    let count = |db: &dyn Db| -> i64 {
        db.value("SELECT count(*) FROM outputs", &[])
            .unwrap()
            .unwrap()
    };
    assert_eq!(count(&source), count(&target));
    assert!(count(&target) >= 6, "the messages came along");
}

#[test]
fn a_run_that_does_not_verify_is_running_or_clashes_is_refused_and_nothing_is_written() {
    let (_s, source, _t, target) = two_records();
    sql(
        &source,
        r#"UPDATE calls SET input = '{"path":"x"}' WHERE run = 'r2' AND n = 1"#,
    );
    let refused = |out: Outcome, wanted: &str| match out {
        Outcome::Refused { reason } => assert!(reason.contains(wanted), "{reason}"),
        other => panic!("copied: {other:?}"),
    };
    refused(
        copy_run(&source, &target, "r2").unwrap(),
        "does not verify in the source (content edited",
    );
    insert_run(&source, "r3", "/w/live.lua", T0);
    refused(copy_run(&source, &target, "r3").unwrap(), "still running");
    standard(&target, "r1");
    refused(
        copy_run(&source, &target, "r1").unwrap(),
        "another run with this id",
    );
    let runs: i64 = (&target as &dyn Db)
        .value("SELECT count(*) FROM runs", &[])
        .unwrap()
        .unwrap();
    assert_eq!(runs, 2, "only t1 and the target's own r1");
}

#[test]
fn a_killed_run_copies_unsealed_and_its_place_covers_its_last_row() {
    let (_s, source, _t, target) = two_records();
    // Killed after two rows: no seal, interrupted.
    let mut prev = insert_run(&source, "r3", "/w/killed.lua", T0);
    for n in 1..=2 {
        prev = insert_call(
            &source,
            "r3",
            &prev,
            n,
            &spec("read", "sealed", serde_json::json!({"path": "a"})),
        );
    }
    sql(
        &source,
        "UPDATE runs SET status = 'interrupted' WHERE id = 'r3'",
    );
    assert_eq!(
        copy_run(&source, &target, "r3").unwrap(),
        Outcome::Copied { n: 2, calls: 2 }
    );
    let v = verify(&target, "r3").unwrap();
    assert!(v.intact && !v.sealed && v.warning.is_some(), "{v:?}");
    // Its last row removed in the target: the place no longer covers it.
    sql(&target, "DELETE FROM calls WHERE run = 'r3' AND n = 2");
    let v = verify(&target, "r3").unwrap();
    assert_eq!(v.problem.map(|p| p.failure), Some(Failure::RunEdited));
}

#[test]
fn every_run_is_copied_oldest_first_when_none_is_named() {
    let (_s, source, _t, _target) = two_records();
    assert_eq!(runs_to_copy(&source, &[]).unwrap(), ["r1", "r2"]);
    assert_eq!(
        runs_to_copy(&source, &["last".to_string()]).unwrap(),
        ["r2"]
    );
}
