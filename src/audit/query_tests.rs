//! Tests of reading the record: a database built by hand, hashes computed
//! with `chain` exactly as the writer does, then tampered with.

use super::*;
use crate::audit::store;
use rusqlite::params;

const T0: i64 = 1_796_058_192_000; // 2026-11-30 17:03:12 UTC

fn db() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().expect("temp dir");
    let conn = store::open(&dir.path().join("audit.db")).expect("open the database");
    (dir, conn)
}

/// A call to record: its intent and, when known, its outcome.
struct Spec {
    flow: &'static str,
    tier: &'static str,
    input: String,
    decisions: String,
    route: Option<&'static str>,
    /// (status, output, error, capped)
    outcome: Option<(&'static str, Option<String>, Option<String>, bool)>,
}

fn spec(flow: &'static str, tier: &'static str, input: serde_json::Value) -> Spec {
    Spec {
        flow,
        tier,
        input: input.to_string(),
        decisions: r#"[{"by":"rule default:3","capability":"fs:read:/w/x","decision":"allow","reason":""}]"#
            .into(),
        route: None,
        outcome: Some(("ok", Some(r#"{"content":"hi"}"#.into()), None, false)),
    }
}

fn failed(mut s: Spec, error: serde_json::Value) -> Spec {
    s.outcome = Some(("error", None, Some(error.to_string()), false));
    s
}

/// Inserts run `id` as `sluice run` would, and returns its head. A
/// `running` run carries this process's pid, so the sweep leaves it live.
fn insert_run(conn: &Connection, id: &str, script: &str, started_ms: i64) -> String {
    let policies = r#"[{"name":"default","sha256":"ab12cd34ef56ab12cd34"}]"#;
    let args = r#"["src/main.rs"]"#;
    let pid = std::process::id();
    let pid_start = store::process_start(pid).unwrap_or(0);
    let link = store::next_link(conn).expect("next link");
    let head = chain::head(&RunHead {
        id,
        script,
        script_sha256: Some("3f2a9c1b0e4d5f6a"),
        policies,
        args,
        workspace: "/w",
        started_ms,
        version: "0.1.0",
        random_seed: 42,
        resumed_from: None,
        ceiling: "[]",
        pid: i64::from(pid),
        pid_start: pid_start as i64,
        link: Some(RunLink {
            n: link.n,
            prior: link.prior.as_deref(),
            prior_rows: link.prior_rows,
        }),
    });
    conn.execute(
        "INSERT INTO runs (id, script, script_sha256, policies, args, workspace, started_ms, status,
           version, random_seed, pid, pid_start, head, ceiling, n, prior, prior_rows)
         VALUES (?1, ?2, '3f2a9c1b0e4d5f6a', ?3, ?4, '/w', ?5, 'running', '0.1.0', 42, ?6, ?7, ?8, '[]',
           ?9, ?10, ?11)",
        params![
            id,
            script,
            policies,
            args,
            started_ms,
            pid,
            pid_start,
            head,
            link.n,
            link.prior,
            link.prior_rows
        ],
    )
    .expect("insert run");
    head
}

/// Inserts call `n` (task "0", seq n) linked to `prev`; returns its hash.
fn insert_call(conn: &Connection, run: &str, prev: &str, n: i64, s: &Spec) -> String {
    let started_ms = T0 + n * 100;
    let intent = CallIntent {
        task: "0",
        seq: n,
        n,
        flow: s.flow,
        tier: s.tier,
        input: &s.input,
        capabilities: r#"["fs:read:/w/x"]"#,
        decisions: &s.decisions,
        route: s.route,
        replayed_from: None,
        started_ms,
    };
    let hash = chain::call(prev, &intent);
    conn.execute(
        "INSERT INTO calls (run, task, seq, n, flow, tier, input, capabilities, decisions, route,
           redacted, started_ms, prev, hash)
         VALUES (?1, '0', ?2, ?2, ?3, ?4, ?5, '[\"fs:read:/w/x\"]', ?6, ?7, '[]', ?8, ?9, ?10)",
        params![
            run,
            n,
            s.flow,
            s.tier,
            s.input,
            s.decisions,
            s.route,
            started_ms,
            prev,
            hash
        ],
    )
    .expect("insert call");
    if let Some((status, output, error, capped)) = &s.outcome {
        complete(
            conn,
            run,
            n,
            &hash,
            status,
            output.as_deref(),
            error.as_deref(),
            *capped,
        );
    }
    hash
}

#[allow(clippy::too_many_arguments)]
fn complete(
    conn: &Connection,
    run: &str,
    n: i64,
    hash: &str,
    status: &str,
    output: Option<&str>,
    error: Option<&str>,
    capped: bool,
) {
    let o = CallOutcome {
        status,
        output,
        error,
        capped,
        duration_us: 1500,
        late_decisions: "[]",
        redacted: "[]",
    };
    conn.execute(
        "UPDATE calls SET status = ?3, output = ?4, error = ?5, capped = ?6, duration_us = 1500,
           late_decisions = '[]', outcome_hash = ?7 WHERE run = ?1 AND n = ?2",
        params![
            run,
            n,
            status,
            output,
            error,
            capped,
            chain::outcome(hash, &o)
        ],
    )
    .expect("complete call");
}

/// Ends run `id` with `status` and seals it as the writer does.
fn seal(conn: &Connection, id: &str, status: &str) {
    let (head, ended_ms) = (head_of(conn, id), T0 + 4_200);
    let mut s = Seal::new(&head);
    let mut calls = Vec::new();
    for_each_call(conn, id, |c| {
        calls.push(c);
        Ok::<(), String>(())
    })
    .expect("calls");
    for c in calls {
        s.row(&c.hash, c.outcome_hash.as_deref());
    }
    for r in load_readings(conn, id).expect("readings") {
        s.reading(&Reading {
            task: &r.task,
            seq: r.seq,
            kind: &r.kind,
            value: r.value,
        });
    }
    let seal = s.finish(&RunEnd {
        status,
        error: None,
        ended_ms,
    });
    conn.execute(
        "UPDATE runs SET status = ?2, ended_ms = ?3, seal = ?4 WHERE id = ?1",
        params![id, status, ended_ms, seal],
    )
    .expect("seal");
}

fn head_of(conn: &Connection, id: &str) -> String {
    conn.query_row("SELECT head FROM runs WHERE id = ?1", [id], |r| r.get(0))
        .expect("head")
}

/// Run `id`: five calls (a read, an approved irreversible bash, a denied
/// write, an irreversible post nobody approved, a read of a missing file),
/// two clock readings, sealed `ok`.
fn standard(conn: &Connection, id: &str) {
    let mut prev = insert_run(conn, id, "/w/fix.lua", T0);
    let mut bash = spec(
        "bash",
        "irreversible",
        serde_json::json!({"command": "git push"}),
    );
    bash.decisions = r#"[{"approvedBy":"terminal","by":"rule default:9","capability":"proc:spawn:git push","decision":"ask","reason":"pushes"}]"#.into();
    bash.route = Some(r#"{"host":"unconfined"}"#);
    let mut write = spec(
        "write",
        "compensable",
        serde_json::json!({"path": "/w/.env", "content": "x"}),
    );
    write.decisions = r#"[{"by":"rule default:4","capability":"fs:write:/w/.env","decision":"deny","reason":"secrets"}]"#.into();
    let mut post = spec(
        "http_post",
        "irreversible",
        serde_json::json!({"url": "https://api.example.com/x"}),
    );
    post.decisions = r#"[{"by":"rule default:12","capability":"net:post:api.example.com","decision":"ask","reason":""}]"#.into();
    let specs = [
        spec("read", "sealed", serde_json::json!({"path": "src/a.rs"})),
        bash,
        failed(
            write,
            serde_json::json!({"code": "permission_denied", "message": "denied"}),
        ),
        failed(
            post,
            serde_json::json!({"code": "permission_required", "message": "nobody approved"}),
        ),
        failed(
            spec("read", "sealed", serde_json::json!({"path": "missing.txt"})),
            serde_json::json!({"code": "not_found", "message": "no such file"}),
        ),
    ];
    for (i, s) in specs.iter().enumerate() {
        prev = insert_call(conn, id, &prev, i as i64 + 1, s);
    }
    for (seq, v) in [(1, 1.5e9), (2, 1.75e9)] {
        conn.execute(
            "INSERT INTO readings (run, task, seq, kind, value) VALUES (?1, '0', ?2, 'clock', ?3)",
            params![id, seq, v],
        )
        .expect("reading");
    }
    seal(conn, id, "ok");
}

fn problem(conn: &Connection, id: &str) -> Problem {
    let v = verify(conn, id).expect("verify");
    assert!(!v.intact, "expected a mismatch: {v:?}");
    v.problem.expect("a problem")
}

fn sql(conn: &Connection, statement: &str) {
    conn.execute_batch(statement).expect(statement);
}

// --- verify -----------------------------------------------------------------

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

// --- list -------------------------------------------------------------------

#[test]
fn list_counts_calls_irreversible_calls_and_denials() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    let listing = list(&conn, 20).unwrap();
    let r = &listing.runs[0];
    assert_eq!(
        (r.calls, r.irreversible, r.denials, r.unknown_outcomes),
        (5, 2, 2, 0)
    );
    assert_eq!((r.status.as_str(), r.duration_ms), ("ok", Some(4_200)));
    let text = render_list(&listing);
    assert!(text.contains("2026-11-30 17:03:12"), "{text}");
    assert!(text.contains("4.2s"), "{text}");
}

#[test]
fn list_survives_a_damaged_error_column_and_puts_the_newest_first() {
    let (_d, conn) = db();
    standard(&conn, "old");
    insert_run(&conn, "new", "/w/b.lua", T0 + 60_000);
    sql(
        &conn,
        "UPDATE calls SET error = 'not json' WHERE run = 'old' AND n = 5",
    );
    let listing = list(&conn, 0).unwrap();
    let ids: Vec<_> = listing.runs.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["new", "old"]);
    assert_eq!((listing.runs[0].calls, listing.runs[1].denials), (0, 2));
    assert!(render_list(&listing).contains("running"));
    assert_eq!(list(&conn, 1).unwrap().runs.len(), 1);
}

#[test]
fn list_clips_long_script_paths_from_the_left_to_fit() {
    let (_d, conn) = db();
    let long = format!(
        "/home/someone/{}/workflows/fix_everything.lua",
        "deep/".repeat(20)
    );
    insert_run(&conn, "r1", &long, T0);
    let text = render_list(&list(&conn, 20).unwrap());
    assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
    assert!(
        text.contains("…") && text.contains("workflows/fix_everything.lua"),
        "{text}"
    );
}

// --- show -------------------------------------------------------------------

/// Run `r2`: an irreversible call whose intent was written, then the
/// process died (interrupted, unsealed).
fn killed(conn: &Connection) {
    let head = insert_run(conn, "r2", "/w/deploy.lua", T0);
    let mut push = spec(
        "bash",
        "irreversible",
        serde_json::json!({"command": "git push --force"}),
    );
    push.outcome = None;
    insert_call(conn, "r2", &head, 1, &push);
    sql(
        conn,
        "UPDATE runs SET status = 'interrupted', error = 'killed' WHERE id = 'r2'",
    );
}

#[test]
fn show_says_outcome_unknown_for_a_call_whose_process_died() {
    let (_d, conn) = db();
    killed(&conn);
    let view = show(&conn, "r2").unwrap();
    assert_eq!(view.calls[0].outcome, Outcome::Unknown);
    assert!(render_show(&view).contains("OUTCOME UNKNOWN"));
    let (run, c) = call(&conn, "r2", 1).unwrap();
    assert!(render_call(&run, &c).contains("OUTCOME UNKNOWN"));
    let listing = list(&conn, 20).unwrap();
    assert_eq!(listing.runs[0].unknown_outcomes, 1);
    assert!(render_list(&listing).contains("OUTCOME UNKNOWN"));
    let v = verify(&conn, "r2").unwrap();
    assert!(v.intact && v.warning.is_some(), "{v:?}");
}

#[test]
fn show_says_in_progress_while_the_run_is_live() {
    let (_d, conn) = db();
    killed(&conn);
    sql(&conn, "UPDATE runs SET status = 'running', error = NULL");
    let view = show(&conn, "r2").unwrap();
    assert_eq!(view.calls[0].outcome, Outcome::Pending);
    assert!(!render_show(&view).contains("OUTCOME UNKNOWN"));
}

#[test]
fn show_timeline_summarizes_decisions_routes_and_outcomes() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    let text = render_show(&show(&conn, "r1").unwrap());
    for want in [
        "ask→approved by terminal",
        "deny by rule default:4",
        "ask→not approved",
        "host:unconfined",
        "permission_denied",
        "git push",
        "src/a.rs",
        "sha256 3f2a9c1b0e4d",
        "default (sha256 ab12cd34ef56)",
        "5 (2 irreversible, 2 denied)",
    ] {
        assert!(text.contains(want), "{want:?} missing from\n{text}");
    }
}

#[test]
fn a_capped_output_is_said_so() {
    let (_d, conn) = db();
    let head = insert_run(&conn, "r3", "/w/big.lua", T0);
    let mut big = spec("read", "sealed", serde_json::json!({"path": "huge.log"}));
    let capped = r#"{"bytes":5242880,"capped":true,"head":"aaa","sha256":"beef","tail":"zzz"}"#;
    big.outcome = Some(("ok", Some(capped.into()), None, true));
    insert_call(&conn, "r3", &head, 1, &big);
    let view = show(&conn, "r3").unwrap();
    assert!(render_show(&view).contains("ok, capped"));
    let text = render_call(&view.run, &view.calls[0]);
    assert!(
        text.contains("OUTPUT CAPPED: the output was 5242880 bytes"),
        "{text}"
    );
}

#[test]
fn call_that_does_not_exist_says_how_many_there_are() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    let e = call(&conn, "r1", 9).unwrap_err();
    assert!(e.contains("no call #9 (it has 5 calls)"), "{e}");
}

#[test]
fn recorded_text_cannot_drive_the_terminal() {
    let (_d, conn) = db();
    insert_run(&conn, "r1", "/w/\u{1b}[2Jevil.lua", T0);
    let text = render_list(&list(&conn, 20).unwrap()) + &render_show(&show(&conn, "r1").unwrap());
    assert!(!text.contains('\u{1b}'), "{text:?}");
}

// --- export -----------------------------------------------------------------

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

// --- text helpers -------------------------------------------------------------

#[test]
fn utc_renders_calendar_dates() {
    assert_eq!(utc(T0), "2026-11-30 17:03:12");
    assert_eq!(utc(0), "1970-01-01 00:00:00");
    assert_eq!(utc(1_709_251_199_000), "2024-02-29 23:59:59");
    assert_eq!(utc(-1_000), "1969-12-31 23:59:59");
}

#[test]
fn durations_use_a_readable_unit() {
    assert_eq!(took_us(850), "850µs");
    assert_eq!(took_us(12_345), "12ms");
    assert_eq!(took_us(4_200_000), "4.2s");
    assert_eq!(took_us(187_000_000), "3m07s");
    assert_eq!(took_us(7_500_000_000), "2h05m");
}
