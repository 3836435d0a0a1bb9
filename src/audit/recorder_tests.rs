//! Tests of the writer: what it stores of a call that came from outside the
//! script (an MCP client), as the readers and `verify` then see it.

use super::*;
use crate::audit::fixtures::*;
use crate::audit::replay::{Mode, Record, Replay};
use crate::audit::session::{Begin, Session};
use crate::audit::verify::{verify, Failure};
use crate::audit::{rows, show};
use serde_json::json;

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
