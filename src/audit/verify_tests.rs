//! Tests of `verify`: a record built by hand, then tampered with.

use super::*;
use crate::audit::fixtures::*;
use crate::audit::render::render_verify;
use rusqlite::Connection;

fn problem(conn: &Connection, id: &str) -> Problem {
    let v = verify(conn, id).expect("verify");
    assert!(!v.intact, "expected a mismatch: {v:?}");
    v.problem.expect("a problem")
}

#[test]
fn verify_passes_an_intact_sealed_run() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    let v = verify(&conn, "r1").unwrap();
    assert!(
        v.intact && v.sealed && v.problem.is_none() && v.warning.is_none(),
        "{v:?}"
    );
    assert_eq!(render_verify(&[v]), "r1  intact (5 calls, sealed)\n");
}

#[test]
fn verify_names_the_row_whose_input_was_edited() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    sql(
        &conn,
        r#"UPDATE calls SET input = '{"path":"src/b.rs"}' WHERE n = 1"#,
    );
    let p = problem(&conn, "r1");
    assert_eq!((p.failure, p.n), (Failure::ContentEdited, Some(1)));
    let v = verify(&conn, "r1").unwrap();
    let text = render_verify(&[v]);
    assert!(
        text.contains("NOT INTACT at #1 (task 0, seq 1, read): content edited"),
        "{text}"
    );
}

#[test]
fn verify_detects_a_deleted_middle_row() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    sql(&conn, "DELETE FROM calls WHERE n = 3");
    let p = problem(&conn, "r1");
    assert_eq!((p.failure, p.n), (Failure::RowMissing, Some(4)));
    assert!(p.message.contains("#3 is absent"), "{}", p.message);
}

#[test]
fn verify_detects_two_rows_swapped() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    sql(&conn, "UPDATE calls SET n = 100 WHERE n = 2; UPDATE calls SET n = 2 WHERE n = 3; UPDATE calls SET n = 3 WHERE n = 100;");
    let p = problem(&conn, "r1");
    assert_eq!(
        (p.failure, p.n, p.flow.as_deref()),
        (Failure::OutOfOrder, Some(2), Some("write"))
    );
}

#[test]
fn verify_detects_an_edited_outcome() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    sql(
        &conn,
        r#"UPDATE calls SET output = '{"content":"bye"}' WHERE n = 1"#,
    );
    let p = problem(&conn, "r1");
    assert_eq!((p.failure, p.n), (Failure::OutcomeEdited, Some(1)));
}

#[test]
fn verify_detects_an_outcome_removed() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    sql(
        &conn,
        "UPDATE calls SET status = NULL, output = NULL, duration_us = NULL WHERE n = 2",
    );
    let p = problem(&conn, "r1");
    assert_eq!((p.failure, p.n), (Failure::OutcomeEdited, Some(2)));
}

#[test]
fn verify_detects_a_status_changed_after_sealing() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    sql(&conn, "UPDATE runs SET status = 'failed'");
    let p = problem(&conn, "r1");
    assert_eq!((p.failure, p.n), (Failure::SealMismatch, None));
}

#[test]
fn verify_detects_the_last_row_dropped_from_a_sealed_run() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    sql(&conn, "DELETE FROM calls WHERE n = 5");
    assert_eq!(problem(&conn, "r1").failure, Failure::SealMismatch);
}

#[test]
fn verify_detects_edited_run_fields() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    sql(&conn, r#"UPDATE runs SET args = '["other"]'"#);
    assert_eq!(problem(&conn, "r1").failure, Failure::RunEdited);
}

#[test]
fn verify_warns_for_an_interrupted_run_and_fails_an_unsealed_finished_one() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    sql(&conn, "UPDATE runs SET status = 'interrupted', seal = NULL");
    let v = verify(&conn, "r1").unwrap();
    assert!(v.intact && v.warning.is_some(), "{v:?}");
    assert!(render_verify(&[v]).contains("not sealed"));
    sql(&conn, "UPDATE runs SET status = 'ok'");
    assert_eq!(problem(&conn, "r1").failure, Failure::NotSealed);
}

#[test]
fn verify_all_checks_every_run() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    standard(&conn, "r2");
    sql(
        &conn,
        r#"UPDATE calls SET input = '{}' WHERE run = 'r2' AND n = 4"#,
    );
    let all = verify_all(&conn).unwrap();
    let broken: Vec<_> = all
        .iter()
        .filter(|v| !v.intact)
        .map(|v| v.run.as_str())
        .collect();
    assert_eq!(broken, ["r2"]);
    assert!(render_verify(&all).ends_with("2 runs checked: 1 intact, 1 not\n"));
}

#[test]
fn verify_passes_a_run_with_clients_and_names_the_row_whose_client_was_edited() {
    let (_d, conn) = db();
    mcp(&conn, "m1");
    assert!(verify(&conn, "m1").unwrap().intact);
    // Another client, none, or one where the call came from the script:
    // each is named at its row.
    for (edit, n) in [
        (
            "UPDATE calls SET client = 'claude-code 1.2.4' WHERE n = 1",
            1,
        ),
        ("UPDATE calls SET client = NULL WHERE n = 2", 2),
        (
            "UPDATE calls SET client = 'claude-code 1.2.3' WHERE n = 3",
            3,
        ),
    ] {
        let (_d, conn) = db();
        mcp(&conn, "m1");
        sql(&conn, edit);
        let p = problem(&conn, "m1");
        assert_eq!(
            (p.failure, p.n),
            (Failure::ContentEdited, Some(n)),
            "{edit}"
        );
        let text = render_verify(&[verify(&conn, "m1").unwrap()]);
        assert!(
            text.contains(&format!("NOT INTACT at #{n} (task 0, seq {n}, ")),
            "{text}"
        );
    }
}
