//! Tests of a model conversation's record: each message kept once by
//! content, and every reader seeing each call's input whole.

use super::export::{export, Format};
use super::fixtures::*;
use super::recorder::{CallRow, Recorder};
use super::redact::Redaction;
use super::render::render_verify;
use super::replay::{Answer, Mode, Record, Replay};
use super::session::{Begin, Session};
use super::verify::{verify, Failure};
use super::{rows, show};
use crate::call::Tier;
use rusqlite::Connection;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const TURNS: usize = 50;

/// A 50-turn conversation recorded as run `r1`: call k sends messages
/// 0..=k. Returns the database's folder, its path and each call's input.
fn conversation() -> (tempfile::TempDir, PathBuf, Connection, Vec<Value>) {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    let msgs = messages(TURNS);
    let inputs: Vec<Value> = (0..TURNS).map(|k| model_input(&msgs, k)).collect();
    let rows = inputs.iter().enumerate();
    let rows = rows
        .map(|(k, i)| model_row(k as u64 + 1, i.clone()))
        .collect();
    record_run(&path, "r1", rows);
    (dir, path, conn, inputs)
}

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).expect(sql)
}

fn text(v: &Value) -> String {
    Redaction::input(v, &[]).1
}

#[test]
fn a_conversation_keeps_each_message_once_and_grows_linearly() {
    let (_d, _p, conn, inputs) = conversation();
    // Model outputs are small (inline): every body is a message.
    assert_eq!(count(&conn, "SELECT count(*) FROM outputs"), TURNS as i64);
    let bodies = count(&conn, "SELECT sum(length(body)) FROM outputs");
    let each: usize = messages(TURNS).iter().map(|m| m.to_string().len()).sum();
    assert_eq!(bodies, each as i64, "each message's bytes once");
    // The inputs hold the rest of each call's input only, and the keys.
    let inputs_bytes = count(&conn, "SELECT sum(length(input)) FROM calls");
    assert!(inputs_bytes < 50 * TURNS as i64, "{inputs_bytes}");
    let keys = count(&conn, "SELECT sum(length(parts)) FROM calls");
    let whole: usize = inputs.iter().map(|i| text(i).len()).sum();
    assert!(keys * 2 < whole as i64, "keys {keys}, whole inputs {whole}");
    // Each call's keys name the call before it and add its new message:
    // the keys too grow linearly.
    let last: String = conn
        .query_row("SELECT parts FROM calls WHERE n = 50", [], |r| r.get(0))
        .unwrap();
    let want =
        json!({"messages": {"after": {"task": "0", "seq": 49}, "keep": 49, "add": [key_of(49)]}});
    assert_eq!(last, want.to_string());
    assert!(keys < 200 * TURNS as i64, "keys {keys}");
}

#[test]
fn every_reader_sees_each_input_whole_byte_for_byte() {
    let (_d, _p, conn, inputs) = conversation();
    let c = rows::call(&conn, "r1", 30).unwrap().unwrap();
    assert_eq!(c.input, text(&inputs[29]));
    let view = show::show(&conn, "r1").unwrap();
    for (k, (c, input)) in view.calls.iter().zip(&inputs).enumerate() {
        assert_eq!(&c.input, input);
        let stored = &c.parts.as_ref().unwrap()["messages"];
        match k {
            0 => assert_eq!(stored.as_array().unwrap().len(), 1),
            _ => assert_eq!(
                (
                    stored["keep"].as_u64(),
                    stored["add"].as_array().map(Vec::len)
                ),
                (Some(k as u64), Some(1))
            ),
        }
    }
    let mut out = Vec::new();
    export(&conn, "r1", Format::Jsonl, &mut out).unwrap();
    let lines: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[50]["input"], inputs[49]);
    let mut csv = Vec::new();
    export(&conn, "r1", Format::Csv, &mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    assert!(
        csv.contains(&super::export::csv_field(&text(&inputs[49]))),
        "the CSV input is whole"
    );
}

#[test]
fn a_replay_of_the_same_conversation_is_answered_from_the_record() {
    let (_d, _p, conn, inputs) = conversation();
    let replay = Replay::new(Record::load(&conn, "r1").unwrap(), Mode::Replay);
    for (k, input) in inputs.iter().enumerate() {
        match replay.answer("0", k as u64 + 1, "model", input) {
            Answer::Recorded(Ok(out), _) => assert_eq!(out, model_output(k)),
            other => panic!("call {k} was not answered: {other:?}"),
        }
    }
}

fn diverged(replay: &Replay, seq: u64, input: &Value) -> String {
    match replay.answer("0", seq, "model", input) {
        Answer::Halt(e) => e.message,
        other => panic!("expected a divergence: {other:?}"),
    }
}

#[test]
fn a_changed_message_diverges_naming_the_first_that_differs() {
    let (_d, _p, conn, inputs) = conversation();
    let replay = Replay::new(Record::load(&conn, "r1").unwrap(), Mode::Replay);
    let mut changed = inputs[9].clone();
    changed["messages"][2]["content"] = json!("something else");
    let m = diverged(&replay, 10, &changed);
    assert!(
        m.contains(r#"messages[2]: recorded {"content":"turn 2: words"#),
        "{m}"
    );
    assert!(m.contains(r#"now {"content":"something else""#), "{m}");
    assert!(!m.contains("messages[3]") && !m.contains("items"), "{m}");
    let mut shorter = inputs[4].clone();
    shorter["messages"].as_array_mut().unwrap().pop();
    let m = diverged(&replay, 5, &shorter);
    assert!(m.contains("messages[4]: recorded {"), "{m}");
    assert!(m.contains(", now (absent)"), "{m}");
    assert!(m.contains("messages: recorded 5 items, now 4 items"), "{m}");
}

/// The key of message `i` of the conversation.
fn key_of(i: usize) -> String {
    crate::digest::sha256_hex(messages(TURNS)[i].to_string().as_bytes())
}

/// Deletes message `i`'s body from the record.
fn lose_message(conn: &Connection, i: usize) {
    sql(
        conn,
        &format!("DELETE FROM outputs WHERE sha256 = '{}'", key_of(i)),
    );
}

#[test]
fn verify_passes_then_names_the_call_and_message_edited() {
    let (_d, _p, conn, _) = conversation();
    let v = verify(&conn, "r1").unwrap();
    assert!(v.intact && v.problem.is_none(), "{v:?}");
    sql(
        &conn,
        &format!(
            "UPDATE outputs SET body = replace(body, 'turn 2:', 'turn 9:') WHERE sha256 = '{}'",
            key_of(2)
        ),
    );
    let v = verify(&conn, "r1").unwrap();
    let p = v.problem.clone().expect("a problem");
    assert_eq!((p.failure, p.n), (Failure::ContentEdited, Some(3)));
    let text = render_verify(&[v]);
    assert!(
        text.contains("NOT INTACT at #3 (task 0, seq 3, model): content edited: messages[2] of its input, kept by content, was changed"),
        "{text}"
    );
}

#[test]
fn verify_names_a_deleted_message_and_a_replay_refuses_the_record() {
    let (_d, _p, conn, _) = conversation();
    lose_message(&conn, 7);
    let v = verify(&conn, "r1").unwrap();
    let p = v.problem.expect("a problem");
    assert_eq!((p.failure, p.n), (Failure::ContentEdited, Some(8)));
    assert!(
        p.message
            .contains("messages[7] of its input, kept by content, is gone"),
        "{}",
        p.message
    );
    let e = Record::load(&conn, "r1").unwrap_err();
    assert!(
        e.contains("call #8 (model): messages[7] of its input is gone"),
        "{e}"
    );
}

/// A replay verified beside its script loads the record without the
/// items check (the verification does it): the calls before the lost item
/// are answered, and the call that needs it stops the replay, naming it.
#[test]
fn a_record_loaded_as_verified_stops_at_the_call_whose_message_is_gone() {
    let (_d, _p, conn, inputs) = conversation();
    lose_message(&conn, 7);
    let replay = Replay::new(Record::load_verified(&conn, "r1").unwrap(), Mode::Replay);
    for (k, input) in inputs.iter().enumerate().take(7) {
        match replay.answer("0", k as u64 + 1, "model", input) {
            Answer::Recorded(Ok(out), _) => assert_eq!(out, model_output(k)),
            other => panic!("call {k} was not answered: {other:?}"),
        }
    }
    let Answer::Halt(e) = replay.answer("0", 8, "model", &inputs[7]) else {
        panic!("the call whose message is gone was answered");
    };
    assert!(
        e.message
            .contains("call #8 (model): messages[7] of its input is gone from the record"),
        "{}",
        e.message
    );
}

#[test]
fn verify_names_a_call_whose_message_keys_were_edited() {
    let (_d, _p, conn, _) = conversation();
    // Dropping a message from a call's list of keys.
    sql(
        &conn,
        "UPDATE calls SET parts = replace(parts, '\"keep\":5', '\"keep\":4') WHERE n = 6",
    );
    let p = verify(&conn, "r1").unwrap().problem.expect("a problem");
    assert_eq!((p.failure, p.n), (Failure::ContentEdited, Some(6)));
}

/// The database file's bytes, with its write-ahead log's.
fn file_bytes(path: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(path).unwrap();
    let wal = path.with_file_name("audit.db-wal");
    bytes.extend(std::fs::read(wal).unwrap_or_default());
    bytes
}

fn holds(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Loads credential `name` = `value` from a credentials file, as a
/// provider's key is loaded.
fn load_credential(dir: &Path, name: &str, value: &str) {
    use std::os::unix::fs::PermissionsExt;
    let file = dir.join("credentials");
    std::fs::write(&file, format!("{name} = {value}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let got = crate::credentials::Credentials::with_file(&file)
        .get(name)
        .unwrap();
    assert_eq!(got.map(|s| s.expose().to_string()).as_deref(), Some(value));
}

#[test]
fn a_secret_in_a_message_never_reaches_the_database() {
    let (dir, conn) = db();
    let path = dir.path().join("audit.db");
    let (header, credential) = ("hdr-5ecret-9d8e7f", "cred-5ecret-1a2b3c");
    load_credential(dir.path(), "audit-parts-key", credential);
    // An earlier call sends the header, so the run learns its value.
    let fetch = CallRow::new(
        "0",
        1,
        "http_post",
        Tier::Irreversible,
        json!({"url": "https://a.example/", "headers": {"authorization": format!("Bearer {header}")}}),
        super::now_ms(),
    );
    let said =
        json!({"role": "user", "content": format!("the key is {header}, the other {credential}")});
    let msgs = vec![
        said.clone(),
        json!({"role": "assistant", "content": "noted"}),
    ];
    let calls = vec![
        fetch,
        model_row(2, json!({"messages": &msgs[..1]})),
        model_row(3, json!({"messages": msgs})),
    ];
    record_run(&path, "r1", calls);
    let bytes = file_bytes(&path);
    assert!(
        holds(&bytes, "the key is [redacted]"),
        "the message is in the file"
    );
    assert!(
        !holds(&bytes, header) && !holds(&bytes, credential),
        "a secret was stored"
    );
    let body = count(&conn, "SELECT count(*) FROM outputs WHERE body LIKE '%the key is [redacted], the other [redacted]%'");
    assert_eq!(body, 1);
    let c = rows::call(&conn, "r1", 3).unwrap().unwrap();
    assert!(
        c.redacted
            .contains("input.messages[0].content (a secret's value)"),
        "{}",
        c.redacted
    );
    assert!(verify(&conn, "r1").unwrap().intact);
}

#[test]
fn a_resume_copies_a_conversation_as_compactly() {
    let (_d, path, conn, inputs) = conversation();
    let record = Record::load(&conn, "r1").unwrap();
    let replay = Replay::new(
        record,
        Mode::Resume {
            retry_unknown: false,
            unknown_ran: false,
            live_from: None,
        },
    );
    let recorder = Recorder::start(&path, run_start("r2")).unwrap();
    let session = Session::new(Some(recorder), Some(replay));
    for input in &inputs {
        assert!(matches!(
            session.begin("0", "model", input),
            Begin::Answered(Ok(_))
        ));
    }
    session.recorder.as_ref().unwrap().end("ok", None).unwrap();
    assert_eq!(count(&conn, "SELECT count(*) FROM outputs"), TURNS as i64);
    let compact = count(&conn, "SELECT count(*) FROM calls WHERE run = 'r2' AND parts IS NOT NULL AND replayed_from = 'r1'");
    assert_eq!(compact, TURNS as i64);
    assert!(verify(&conn, "r2").unwrap().intact);
    let view = show::show(&conn, "r2").unwrap();
    assert_eq!(view.calls[49].input, inputs[49]);
    assert_eq!((view.models.calls, view.models.replayed), (0, TURNS as u64));
}
