//! Tests of the readers' paged walks: a run longer than a page is read
//! whole, in chain order, each row once, by every reader.

use super::*;
use crate::audit::anchor::{self, Anchor, Covers};
use crate::audit::fixtures::db;
use crate::audit::fixtures::*;
use crate::audit::verify::{verify, Failure};
use rusqlite::Connection;
use serde_json::json;

/// Calls in the long run: two pages and a bit.
const LONG: i64 = 2 * PAGE as i64 + 3;

/// Run `long`: [`LONG`] reads, every seventh refused; readings in tasks
/// whose names sort apart from their numbers ("0.10" before "0.2"), more
/// than a page of them; sealed `ok`. Returns the refused calls' count.
fn long_run(conn: &Connection) -> i64 {
    sql(conn, "BEGIN");
    let mut prev = insert_run(conn, "long", "/w/long.lua", T0);
    let mut refused = 0;
    for n in 1..=LONG {
        let read = spec("read", "sealed", json!({ "path": format!("f{n}.txt") }));
        let s = if n % 7 == 0 {
            refused += 1;
            failed(read, json!({"code": "permission_denied", "message": "no"}))
        } else {
            read
        };
        prev = insert_call(conn, "long", &prev, n, &s);
    }
    for (i, task) in ["0.2", "0", "0.10", "0.1"].iter().enumerate() {
        for seq in 1..=(PAGE as i64 / 2 + i as i64) {
            conn.execute(
                "INSERT INTO readings (run, task, seq, kind, value) VALUES ('long', ?1, ?2, 'ms', ?3)",
                rusqlite::params![task, seq, seq as f64],
            )
            .expect("reading");
        }
    }
    sql(conn, "COMMIT");
    seal(conn, "long", "ok");
    refused
}

/// The places of run `run`'s calls as `each_call` hands them over.
fn places(db: &dyn Db, run: &str, output: Output) -> Vec<i64> {
    let mut seen = Vec::new();
    each_call(
        db,
        run,
        output,
        |e| e,
        |c| {
            seen.push(c.n);
            Ok(())
        },
    )
    .unwrap();
    seen
}

#[test]
fn a_run_longer_than_two_pages_is_read_whole_in_chain_order_by_every_reader() {
    let (_d, conn) = db();
    let refused = long_run(&conn);
    let all: Vec<i64> = (1..=LONG).collect();
    assert_eq!(places(&conn, "long", Output::Inline), all);
    assert_eq!(places(&conn, "long", Output::Resolved), all);
    let v = verify(&conn, "long").unwrap();
    assert!(v.intact, "{v:?}");
    assert_eq!(v.calls, LONG as usize);
    // The refusals are told from the errors' JSON, on every page.
    let t = &tallies(&conn, 1).unwrap()[0];
    assert_eq!((t.id.as_str(), t.calls, t.denials), ("long", LONG, refused));
    let head = anchor::head(&conn).unwrap();
    assert_eq!((head.rows, head.covers), (LONG, Covers::Seal));
}

#[test]
fn readings_over_a_page_come_in_task_then_sequence_order_each_once() {
    let (_d, conn) = db();
    long_run(&conn);
    let mut read = Vec::new();
    each_reading(&conn, "long", |r| read.push((r.task, r.seq))).unwrap();
    let mut expected = read.clone();
    expected.sort();
    expected.dedup();
    assert_eq!(read, expected);
    let per_task = |t: &str| read.iter().filter(|(task, _)| task == t).count();
    let half = PAGE / 2;
    assert_eq!(
        [
            per_task("0"),
            per_task("0.1"),
            per_task("0.10"),
            per_task("0.2")
        ],
        [half + 1, half + 3, half + 2, half]
    );
}

#[test]
fn an_anchor_on_a_row_of_the_last_page_is_found_there() {
    let (_d, conn) = db();
    long_run(&conn);
    let n = LONG - 1;
    let hash = row_hash(&conn, "long", n).unwrap().unwrap();
    let a = Anchor {
        runs: 1,
        hash: crate::audit::chain::anchor(1, &hash),
    };
    let c = anchor::check(&conn, &a).unwrap();
    assert!(c.held, "{c:?}");
    assert_eq!(
        c.message,
        format!("held: run #1 (long) still has its row #{n}, with no run after it")
    );
}

#[test]
fn two_rows_sharing_a_place_across_a_page_boundary_are_both_read_and_verify_names_the_second() {
    let (_d, conn) = db();
    long_run(&conn);
    // A damaged record: the index that keeps places unique is gone, and
    // row #513 claims #512, the last place of the first page.
    let last = PAGE as i64;
    sql(&conn, "DROP INDEX calls_chain");
    sql(
        &conn,
        &format!(
            "UPDATE calls SET n = {last} WHERE run = 'long' AND n = {}",
            last + 1
        ),
    );
    assert_eq!(places(&conn, "long", Output::Inline).len(), LONG as usize);
    let v = verify(&conn, "long").unwrap();
    let p = v.problem.expect("a problem");
    assert_eq!(
        (p.failure, p.n, p.seq),
        (Failure::OutOfOrder, Some(last), Some(last + 1))
    );
    assert_eq!(
        p.message,
        format!(
            "rows out of order: it is numbered #{last} where #{} belongs",
            last + 1
        )
    );
}

#[test]
fn outputs_kept_by_content_come_once_each_in_key_order_whole_or_in_pages() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    // Four bodies: the first returned by rows #1 and #2, the others by
    // rows #3, #4 and #5.
    let mut expected = Vec::new();
    for (i, rows) in ["1, 2", "3", "4", "5"].iter().enumerate() {
        let body = format!("{{\"content\":\"body {i}\"}}");
        let key = crate::digest::sha256_hex(body.as_bytes());
        conn.execute(
            "INSERT INTO outputs (sha256, body) VALUES (?1, ?2)",
            rusqlite::params![key, body],
        )
        .unwrap();
        sql(
            &conn,
            &format!("UPDATE calls SET output_ref = '{key}' WHERE run = 'r1' AND n IN ({rows})"),
        );
        expected.push((key, body));
    }
    expected.sort();
    let read = |size: Option<usize>, stop_after: usize| {
        let mut got = Vec::new();
        each_output_paged(&conn, "r1", size, |key, body| {
            got.push((key, body));
            got.len() < stop_after
        })
        .unwrap();
        got
    };
    assert_eq!(read(None, usize::MAX), expected);
    assert_eq!(read(Some(3), usize::MAX), expected);
    assert_eq!(read(Some(2), usize::MAX), expected);
    assert_eq!(read(Some(1), usize::MAX), expected);
    // Told to stop, it stops, on a page's last row or inside one.
    assert_eq!(read(Some(2), 2), expected[..2]);
    assert_eq!(read(Some(2), 3), expected[..3]);
    assert_eq!(read(None, 1), expected[..1]);
}
