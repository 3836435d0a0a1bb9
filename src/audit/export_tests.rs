//! Tests of `export`: what is written reads back to what is stored.

use super::*;
use crate::audit::fixtures::*;
use serde_json::Value;

#[test]
fn csv_quotes_commas_quotes_and_line_breaks() {
    assert_eq!(csv_field("plain"), "plain");
    assert_eq!(csv_field("a,b \"c\"\nd"), "\"a,b \"\"c\"\"\nd\"");
}

#[test]
fn csv_export_reads_back_to_the_stored_json() {
    let (_d, conn) = db();
    let head = insert_run(&conn, "r1", "/w/a.lua", T0);
    let input = serde_json::json!({"content": "a, \"quoted\"\nline", "path": "x.txt"});
    insert_call(
        &conn,
        "r1",
        &head,
        1,
        &spec("write", "compensable", input.clone()),
    );
    let mut out = Vec::new();
    export(&conn, "r1", Format::Csv, &mut out).unwrap();
    let records = parse_csv(&String::from_utf8(out).unwrap());
    assert_eq!(records.len(), 2);
    let col = records[0].iter().position(|h| h == "input").unwrap();
    assert_eq!(records[1][col], input.to_string());
    let outcome = records[0].iter().position(|h| h == "outcome").unwrap();
    assert_eq!(records[1][outcome], "ok");
}

/// A strict RFC 4180 reader, to check the writer against.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut records, mut record, mut field) = (Vec::new(), Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\r') => assert_eq!(chars.next(), Some('\n'), "CR without LF"),
            (false, '\n') => panic!("a bare LF ends a record"),
            (false, c) => field.push(c),
        }
        if !quoted && c == '\r' {
            record.push(std::mem::take(&mut field));
            records.push(std::mem::take(&mut record));
        }
    }
    records
}

#[test]
fn jsonl_export_embeds_json_columns_as_json() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    let mut out = Vec::new();
    export(&conn, "r1", Format::Jsonl, &mut out).unwrap();
    let lines: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 6);
    assert_eq!(lines[0]["type"], "run");
    assert_eq!(lines[0]["args"], serde_json::json!(["src/main.rs"]));
    assert_eq!(lines[1]["type"], "call");
    assert_eq!(lines[1]["input"]["path"], "src/a.rs");
    assert_eq!(lines[1]["output"]["content"], "hi");
    assert_eq!(lines[2]["route"]["host"], "unconfined");
    assert_eq!(lines[3]["decisions"][0]["decision"], "deny");
    assert_eq!(lines[3]["error"]["code"], "permission_denied");
    assert_eq!(lines[3]["outcome"], "error");
}

/// Run `id`'s CSV export: the header, then a record per call.
fn csv_of(conn: &rusqlite::Connection, id: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    export(conn, id, Format::Csv, &mut out).unwrap();
    parse_csv(&String::from_utf8(out).unwrap())
}

/// Run `id`'s JSON lines export, the run's line first.
fn jsonl_of(conn: &rusqlite::Connection, id: &str) -> Vec<Value> {
    let mut out = Vec::new();
    export(conn, id, Format::Jsonl, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn csv_export_gives_each_calls_client_in_the_last_column() {
    let (_d, conn) = db();
    mcp(&conn, "m1");
    standard(&conn, "r1");
    let records = csv_of(&conn, "m1");
    assert_eq!(records[0].last().map(String::as_str), Some("client"));
    let clients: Vec<&str> = records[1..].iter().map(|r| r[24].as_str()).collect();
    assert_eq!(clients, [CLIENT, CLIENT, ""]);
    assert!(records.iter().all(|r| r.len() == 25));
    let records = csv_of(&conn, "r1");
    assert!(records[1..].iter().all(|r| r[24].is_empty()));
}

#[test]
fn jsonl_export_gives_each_calls_client_or_null() {
    let (_d, conn) = db();
    mcp(&conn, "m1");
    standard(&conn, "r1");
    let lines = jsonl_of(&conn, "m1");
    let clients: Vec<&Value> = lines[1..].iter().map(|l| &l["client"]).collect();
    let client = Value::from(CLIENT);
    assert_eq!(clients, [&client, &client, &Value::Null]);
    let lines = jsonl_of(&conn, "r1");
    assert!(lines[1..]
        .iter()
        .all(|l| l.get("client") == Some(&Value::Null)));
}
