//! Tests of `list` and `show`, and of their text.

use super::*;
use crate::audit::fixtures::*;
use crate::audit::list::list;
use crate::audit::render::{render_call, render_list, render_show, WIDTH};
use crate::audit::verify::{verify, Failure};
use rusqlite::Connection;

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
    assert!(render_show(&view, &Facts).contains("OUTCOME UNKNOWN"));
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
    assert!(!render_show(&view, &Facts).contains("OUTCOME UNKNOWN"));
}

#[test]
fn show_timeline_summarizes_decisions_routes_and_outcomes() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    let text = render_show(&show(&conn, "r1").unwrap(), &Facts);
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
    assert!(render_show(&view, &Facts).contains("ok, capped"));
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
    let text =
        render_list(&list(&conn, 20).unwrap()) + &render_show(&show(&conn, "r1").unwrap(), &Facts);
    assert!(!text.contains('\u{1b}'), "{text:?}");
}

// --- model calls ------------------------------------------------------------

/// Run `r4`: two model calls (the second served partly from the prompt
/// cache), a read between them, and a model call a resume copied.
fn models(conn: &Connection) {
    let mut prev = insert_run(conn, "r4", "/w/agent.lua", T0);
    let answer = |input: u64, cached: u64, latency: u64| {
        serde_json::json!({
            "text": "ok", "toolCalls": [], "stopReason": "end_turn", "model": "claude-x",
            "usage": {"inputTokens": input, "outputTokens": 85, "cachedTokens": cached},
            "latencyMs": latency, "firstTokenMs": 300,
        })
    };
    let model = |out: Value| {
        let mut s = spec(
            "model",
            "sealed",
            serde_json::json!({"messages": [{"role": "user", "content": "hi"}]}),
        );
        s.outcome = Some(("ok", Some(out.to_string()), None, false));
        s
    };
    let specs = [
        model(answer(1200, 0, 2100)),
        spec("read", "sealed", serde_json::json!({"path": "src/a.rs"})),
        model(answer(1400, 1000, 900)),
        model(answer(900, 0, 400)),
    ];
    for (i, s) in specs.iter().enumerate() {
        prev = insert_call(conn, "r4", &prev, i as i64 + 1, s);
    }
    sql(
        conn,
        "UPDATE calls SET replayed_from = 'r0' WHERE run = 'r4' AND n = 4",
    );
}

#[test]
fn show_gives_each_model_calls_tokens_and_latency_and_the_runs_totals() {
    let (_d, conn) = db();
    models(&conn);
    let view = show(&conn, "r4").unwrap();
    let text = render_show(&view, &Facts);
    for want in [
        // The model's facts lead the input's cell, which is clipped from
        // the right to fit.
        "claude-x, 1200 in / 85 out, 2.1s: {",
        "claude-x, 1400 in / 85 out (1000 cached)",
        "models       2 calls, 2600 in / 170 out tokens (1000 cached), 3.0s; 1 more replayed, not counted",
    ] {
        assert!(text.contains(want), "{want:?} missing from\n{text}");
    }
    assert!(text.contains("src/a.rs"), "{text}");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(rows.len(), 5, "{text}");
    assert!(rows.iter().all(|l| l.chars().count() <= WIDTH), "{text}");
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(
        json["models"],
        serde_json::json!({"calls": 2, "inputTokens": 2600, "cachedTokens": 1000, "outputTokens": 170,
            "latencyMs": 3000, "replayed": 1})
    );
    let (run, c) = call(&conn, "r4", 3).unwrap();
    let whole = render_call(&run, &c);
    assert!(
        whole.contains("model        claude-x, 1400 in / 85 out (1000 cached), 900ms"),
        "{whole}"
    );
}

#[test]
fn a_run_without_model_calls_shows_no_models_line_and_zero_totals() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    let view = show(&conn, "r1").unwrap();
    assert!(!render_show(&view, &Facts).contains("models"));
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(json["models"]["calls"], 0);
    assert!(
        json["calls"][0].get("parts").is_none(),
        "{}",
        json["calls"][0]
    );
}

// --- calls from an MCP client -------------------------------------------------

/// The words of the timeline's header line.
fn header(text: &str) -> Vec<&str> {
    let line = text.lines().find(|l| l.starts_with("#  ")).unwrap();
    line.split_whitespace().collect()
}

#[test]
fn a_run_with_calls_from_a_client_shows_a_client_column_and_json_field() {
    let (_d, conn) = db();
    mcp(&conn, "m1");
    let view = show(&conn, "m1").unwrap();
    let text = render_show(&view, &Facts);
    assert_eq!(
        header(&text),
        ["#", "CLIENT", "AT", "FLOW", "TIER", "DECISION", "OUTCOME", "TOOK", "INPUT"]
    );
    let row = |n: &str| text.lines().find(|l| l.starts_with(n)).unwrap();
    assert!(row("#1 ").starts_with(&format!("#1  {CLIENT}  ")), "{text}");
    assert!(row("#2 ").contains(CLIENT), "{text}");
    // A job operation came from no client.
    assert_eq!(row("#3 ").split_whitespace().nth(1), Some("—"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(json["calls"][0]["client"], CLIENT);
    assert_eq!(json["calls"][2]["client"], Value::Null);
}

#[test]
fn a_call_from_a_client_names_it_and_a_call_without_one_does_not() {
    let (_d, conn) = db();
    mcp(&conn, "m1");
    let (run, c) = call(&conn, "m1", 2).unwrap();
    let page = render_call(&run, &c);
    assert!(
        page.contains(&format!("\nclient       {CLIENT}\n")),
        "{page}"
    );
    let (run, c) = call(&conn, "m1", 3).unwrap();
    assert!(!render_call(&run, &c).contains("client"));
}

#[test]
fn a_run_without_clients_keeps_its_timeline_and_gives_null_in_json() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    let view = show(&conn, "r1").unwrap();
    let text = render_show(&view, &Facts);
    assert!(!text.contains("CLIENT"), "{text}");
    let json = serde_json::to_value(&view).unwrap();
    for c in json["calls"].as_array().unwrap() {
        assert_eq!(c.get("client"), Some(&Value::Null), "{c}");
    }
    let (run, c) = call(&conn, "r1", 1).unwrap();
    assert!(!render_call(&run, &c).contains("client"));
}

#[test]
fn a_clients_name_cannot_drive_the_terminal_and_a_long_one_is_clipped() {
    let (_d, conn) = db();
    mcp(&conn, "m1");
    let long = format!("\u{1b}[2Jevil {}", "x".repeat(200));
    conn.execute("UPDATE calls SET client = ?1 WHERE n = 1", [&long])
        .unwrap();
    rehash(&conn, "m1");
    let view = show(&conn, "m1").unwrap();
    let text = render_show(&view, &Facts);
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
    let (run, c) = call(&conn, "m1", 1).unwrap();
    let page = render_call(&run, &c);
    assert!(
        !page.contains('\u{1b}') && page.contains(&"x".repeat(200)),
        "{page:?}"
    );
}

/// What `sluice audit show` writes of run `id`, read one call at a time.
fn streamed(conn: &Connection, id: &str, json: bool) -> String {
    let integrity = Integrity::of(&crate::audit::verify::verify(conn, id).unwrap());
    let (run, calls) = Recorded::open(conn, id).unwrap();
    let mut out = Vec::new();
    if json {
        write_json(&run, &integrity, &calls, &mut out).unwrap();
    } else {
        crate::audit::render::write_show(&run, &integrity, &calls, &Facts, &mut out).unwrap();
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn show_streams_the_same_bytes_as_the_view_held_whole() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    insert_run(&conn, "empty", "/w/e.lua", T0 + 60_000);
    for id in ["r1", "empty"] {
        let view = show(&conn, id).unwrap();
        let mut whole = serde_json::to_string_pretty(&view).unwrap();
        whole.push('\n');
        assert_eq!(streamed(&conn, id, true), whole, "--json of {id}");
        assert_eq!(
            streamed(&conn, id, false),
            render_show(&view, &Facts),
            "text of {id}"
        );
    }
}

#[test]
fn show_says_sealed_only_of_a_run_that_verifies_and_marks_the_call_where_it_breaks() {
    let (_d, conn) = db();
    standard(&conn, "r1");
    let intact = render_show(&show(&conn, "r1").unwrap(), &Facts);
    assert!(
        intact.contains("\nchain        sealed, verified intact\n"),
        "{intact}"
    );
    assert!(!intact.contains('✗'), "{intact}");

    sql(
        &conn,
        "UPDATE calls SET input = replace(input, 'missing.txt', 'other.txt') WHERE run = 'r1' AND n = 5",
    );
    let view = show(&conn, "r1").unwrap();
    let problem = view.integrity.problem.clone().unwrap();
    assert_eq!(
        (problem.failure, problem.n),
        (Failure::ContentEdited, Some(5))
    );
    assert_eq!(view.integrity.broken_at().map(|(n, _)| n), Some(5));
    let text = render_show(&view, &Facts);
    assert!(!text.contains("verified intact"), "{text}");
    let chain = text.lines().find(|l| l.starts_with("chain ")).unwrap();
    assert_eq!(
        chain,
        "chain        BROKEN at call #5 (task 0, seq 5, read): content edited (see CHAIN BROKEN below)"
    );
    let rows: Vec<&str> = text.lines().filter(|l| l.contains('✗')).collect();
    assert_eq!(
        rows.len(),
        2,
        "the row and the note under the timeline: {text}"
    );
    assert!(rows[0].starts_with("#5 ✗ "), "{text}");
    assert!(
        rows[1].starts_with(
            "CHAIN BROKEN at call #5 (✗ above): content edited: its fields do not hash to its recorded hash."
        ),
        "{text}"
    );
    let note = text.lines().skip_while(|l| !l.starts_with("CHAIN BROKEN"));
    assert!(
        note.take_while(|l| !l.is_empty())
            .all(|l| l.chars().count() <= WIDTH),
        "{text}"
    );
    // Streamed, one call at a time, the view says the same.
    assert_eq!(streamed(&conn, "r1", false), text);
    let json: serde_json::Value = serde_json::from_str(&streamed(&conn, "r1", true)).unwrap();
    assert_eq!(json["integrity"]["problem"]["n"], 5);
    assert_eq!(json["calls"][4]["broken"]["failure"], "content_edited");
    assert!(json["calls"][3].get("broken").is_none());
}
