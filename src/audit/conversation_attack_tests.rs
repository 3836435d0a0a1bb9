//! Attacks on the record of a conversation: a `parts` column edited to
//! loop, to name a later row or another run's, bodies swapped; inputs a
//! hostile script shapes like the record's own format. The readers
//! (`audit show`, `export`, one call whole, the replay's record) must not
//! crash or hang, and must not show a list that is not the one written;
//! `verify` names the row. Controls: the same readers on the record as
//! written, and a long conversation whose every row continues the one
//! before.

use super::fixtures::*;
use super::recorder::{Outcome, Recorder};
use super::replay::Record;
use super::verify::{verify, Failure};
use super::{rows, show};
use rusqlite::Connection;
use serde_json::{json, Value};
use std::path::PathBuf;

const TURNS: usize = 30;

/// A conversation of `TURNS` calls recorded as `r1`, call k sending
/// messages 0..=k; each call's input.
fn conversation() -> (tempfile::TempDir, PathBuf, Connection, Vec<Value>) {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    let msgs = messages(TURNS);
    let inputs: Vec<Value> = (0..TURNS).map(|k| model_input(&msgs, k)).collect();
    let rows = inputs
        .iter()
        .enumerate()
        .map(|(k, i)| model_row(k as u64 + 1, i.clone()))
        .collect();
    record_run(&path, "r1", rows);
    (dir, path, conn, inputs)
}

fn parts_of(conn: &Connection, run: &str, n: i64) -> String {
    conn.query_row(
        "SELECT parts FROM calls WHERE run = ?1 AND n = ?2",
        rusqlite::params![run, n],
        |r| r.get(0),
    )
    .unwrap()
}

/// Sets row `n`'s parts column to continue call (task 0, `seq`).
fn continue_at(conn: &Connection, run: &str, n: i64, seq: i64, keep: usize) {
    let column = json!({"messages": {"after": {"task": "0", "seq": seq}, "keep": keep, "add": []}});
    conn.execute(
        "UPDATE calls SET parts = ?1 WHERE run = ?2 AND n = ?3",
        rusqlite::params![column.to_string(), run, n],
    )
    .unwrap();
}

/// Every reader on run `run`, none of which may crash or hang: returns
/// whether call `n` read whole came back with an item missing (its list
/// unknown), and what verify found.
fn read_everything(conn: &Connection, run: &str, n: i64) -> (bool, Option<Failure>) {
    let one = rows::call(conn, run, n).unwrap().unwrap();
    let missing = one.parts.as_ref().unwrap().missing.is_some();
    let view = show::show(conn, run).unwrap();
    assert_eq!(
        view.calls.len() as i64,
        rows::call_count(conn, run).unwrap()
    );
    let mut out = Vec::new();
    super::export::export(conn, run, super::export::Format::Jsonl, &mut out).unwrap();
    // A record with a list it cannot put back is refused for replay.
    let loaded = Record::load(conn, run);
    assert_eq!(loaded.is_err(), missing, "{:?}", loaded.err());
    let v = verify(conn, run).unwrap();
    (missing, v.problem.map(|p| p.failure))
}

#[test]
fn control_every_reader_puts_each_row_back_as_written() {
    let (_d, _p, conn, inputs) = conversation();
    let (missing, problem) = read_everything(&conn, "r1", TURNS as i64);
    assert!(!missing);
    assert_eq!(problem, None);
    let view = show::show(&conn, "r1").unwrap();
    for (c, input) in view.calls.iter().zip(&inputs) {
        assert_eq!(&c.input, input);
    }
}

#[test]
fn a_row_whose_parts_continue_itself_is_read_without_looping() {
    let (_d, _p, conn, _) = conversation();
    continue_at(&conn, "r1", 10, 10, 3);
    let (missing, problem) = read_everything(&conn, "r1", 10);
    assert!(missing, "a list that names itself is not a list");
    assert_eq!(problem, Some(Failure::ContentEdited));
    // The rows after it, continuing it, are read as not whole either.
    let next = rows::call(&conn, "r1", 11).unwrap().unwrap();
    assert!(next.parts.unwrap().missing.is_some());
}

#[test]
fn two_rows_whose_parts_continue_each_other_are_read_without_looping() {
    let (_d, _p, conn, _) = conversation();
    continue_at(&conn, "r1", 10, 20, 3);
    continue_at(&conn, "r1", 20, 10, 3);
    for n in [10, 20, 25] {
        let (missing, problem) = read_everything(&conn, "r1", n);
        assert!(missing, "row {n}");
        assert_eq!(problem, Some(Failure::ContentEdited));
    }
}

#[test]
fn a_row_whose_parts_continue_a_later_row_is_not_put_together_from_it() {
    let (_d, _p, conn, _) = conversation();
    // Row 10 written as the first 5 keys of row 25, which holds them.
    continue_at(&conn, "r1", 10, 25, 5);
    let (missing, problem) = read_everything(&conn, "r1", 10);
    assert!(missing, "the writer only continues an earlier row");
    assert_eq!(problem, Some(Failure::ContentEdited));
}

#[test]
fn a_row_whose_parts_name_another_runs_row_is_not_put_together_from_it() {
    let (_d, path, conn, _) = conversation();
    // Run r2 has three calls; its third is edited to continue call seq 20,
    // which r2 does not have and r1 does.
    let msgs = messages(3);
    let rows = (0..3)
        .map(|k| model_row(k as u64 + 1, model_input(&msgs, k)))
        .collect();
    record_run(&path, "r2", rows);
    continue_at(&conn, "r2", 3, 20, 2);
    let (missing, problem) = read_everything(&conn, "r2", 3);
    assert!(missing);
    assert_eq!(problem, Some(Failure::ContentEdited));
    // Control: r1 is untouched by it.
    assert_eq!(read_everything(&conn, "r1", 20), (false, None));
}

#[test]
fn a_continuation_keeping_more_keys_than_its_base_holds_is_unknown() {
    let (_d, _p, conn, _) = conversation();
    continue_at(&conn, "r1", 10, 9, 1_000_000);
    let (missing, problem) = read_everything(&conn, "r1", 10);
    assert!(missing);
    assert_eq!(problem, Some(Failure::ContentEdited));
}

#[test]
fn a_parts_column_of_any_other_shape_is_read_as_unknown() {
    let (_d, _p, conn, _) = conversation();
    for (n, column) in [
        (5, "not json"),
        (6, r#"{"messages": 7}"#),
        (
            7,
            r#"{"messages": {"after": {"task": 1, "seq": "x"}, "keep": -1, "add": [1]}}"#,
        ),
        (8, r#"{"messages": ["not a key"]}"#),
        (9, r#"{"messages": [], "other": []}"#),
    ] {
        sql(
            &conn,
            &format!("UPDATE calls SET parts = '{column}' WHERE n = {n}"),
        );
    }
    for n in 5..=9 {
        let (missing, problem) = read_everything(&conn, "r1", n);
        assert!(missing, "row {n}");
        assert_eq!(problem, Some(Failure::ContentEdited));
    }
}

#[test]
fn two_message_bodies_swapped_are_named_by_verify() {
    let (_d, _p, conn, _) = conversation();
    let key = |i: usize| crate::digest::sha256_hex(messages(TURNS)[i].to_string().as_bytes());
    let (a, b) = (key(3), key(4));
    sql(
        &conn,
        &format!(
            "UPDATE outputs SET body = CASE sha256 WHEN '{a}' THEN (SELECT body FROM outputs WHERE sha256 = '{b}')
             ELSE (SELECT body FROM outputs WHERE sha256 = '{a}') END WHERE sha256 IN ('{a}', '{b}')"
        ),
    );
    let v = verify(&conn, "r1").unwrap();
    let p = v.problem.expect("swapped bodies are found");
    assert_eq!((p.failure, p.n), (Failure::ContentEdited, Some(4)));
    assert!(p.message.contains("messages[3]"), "{}", p.message);
}

/// A legitimate conversation whose every call continues the one before (a
/// shared first message, then its own): the chain is as long as the run.
/// Reading the last call alone walks all of it back, without recursion.
#[test]
fn control_a_long_chain_of_continuations_reads_back_whole() {
    const CALLS: usize = 2000;
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    let shared = json!({"role": "user", "content": "You sort one item a call."});
    let inputs: Vec<Value> = (0..CALLS)
        .map(|k| {
            json!({"model": "m", "messages": [shared, {"role": "user", "content": format!("item {k}")}]})
        })
        .collect();
    // As `record_run`, without waiting for each row's commit.
    let recorder = Recorder::start(&path, run_start("r1")).unwrap();
    for (k, input) in inputs.iter().enumerate() {
        let outcome = Outcome::new(Ok(model_output(k)), 1500, Vec::new());
        let row = model_row(k as u64 + 1, input.clone());
        recorder.call(row, outcome, false).unwrap();
    }
    recorder.end("ok", None).unwrap();
    let last = parts_of(&conn, "r1", CALLS as i64);
    assert!(last.contains("\"after\""), "{last}");
    // Run on a thread with a small stack: the walk back must not grow it.
    let db_path = path.clone();
    let want = inputs[CALLS - 1].clone();
    std::thread::Builder::new()
        .stack_size(128 << 10)
        .spawn(move || {
            let conn = super::store::open(&db_path).unwrap();
            let c = rows::call(&conn, "r1", CALLS as i64).unwrap().unwrap();
            assert!(c.parts.as_ref().unwrap().missing.is_none());
            assert_eq!(c.input, super::redact::Redaction::input(&want, &[]).1);
        })
        .unwrap()
        .join()
        .expect("read on a small stack");
    assert!(verify(&conn, "r1").unwrap().intact);
}

/// Inputs a hostile script shapes like the record's format: a `messages`
/// that is the continuation object, items that are keys, items that are
/// another call's messages in another order, a top-level `parts` field.
/// Each is stored and read back exactly as given, and verifies.
#[test]
fn inputs_shaped_like_the_records_format_read_back_as_given() {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    let msgs = messages(4);
    let key0 = crate::digest::sha256_hex(msgs[0].to_string().as_bytes());
    let inputs = vec![
        json!({"model": "m", "messages": [msgs[0], msgs[1], msgs[2]]}),
        json!({"model": "m", "messages": {"after": {"task": "0", "seq": 1}, "keep": 2, "add": []}}),
        json!({"model": "m", "messages": [key0, key0]}),
        json!({"model": "m", "messages": [msgs[2], msgs[1], msgs[0]]}),
        json!({"model": "m", "messages": [msgs[0]], "parts": {"messages": [key0]}, "after": 1}),
        json!({"model": "m", "messages": [{"after": {"task": "0", "seq": 1}, "keep": 3, "add": []}]}),
        json!({"model": "m", "messages": []}),
        json!({"model": "m", "messages": [null, 1e300, -0.0, "x", [[]]]}),
    ];
    let rows = inputs
        .iter()
        .enumerate()
        .map(|(k, i)| model_row(k as u64 + 1, i.clone()))
        .collect();
    record_run(&path, "r1", rows);
    let view = show::show(&conn, "r1").unwrap();
    for (k, (c, input)) in view.calls.iter().zip(&inputs).enumerate() {
        let text = super::redact::Redaction::input(input, &[]).1;
        let back = rows::call(&conn, "r1", k as i64 + 1).unwrap().unwrap();
        assert_eq!(back.input, text, "call {}", k + 1);
        assert_eq!(c.input, serde_json::from_str::<Value>(&text).unwrap());
    }
    assert!(verify(&conn, "r1").unwrap().intact);
    assert!(Record::load(&conn, "r1").is_ok());
}
