//! `sluice audit show` tells the truth about the record's integrity: it
//! verifies the run as it shows it, says "sealed, verified intact" only of
//! a run that verifies, and marks the call where an edited record breaks
//! (✗ on its row, a line saying what does not match), in text and in
//! `--json`'s `integrity` and the row's `broken`. On both stores.

mod common;

use common::stores::{exec, one, Store};
use common::*;
use serde_json::Value;
use sluice::internals::audit::db::Val;

use common::sluice_in as sluice;

/// A run of three reads, recorded in `store`; its id.
fn three_reads(ws: &Workspace, store: &Store) -> String {
    std::fs::write(ws.file("a.txt"), "one\n").unwrap();
    std::fs::write(ws.file("b.txt"), "two\n").unwrap();
    run_lua(
        ws.path(),
        "sluice.read{path = 'a.txt'}\nsluice.read{path = 'b.txt'}\nsluice.read{path = 'a.txt'}\n",
        &[],
    )
    .ok();
    let db = store.db(ws.path());
    one(&*db, "SELECT id FROM runs ORDER BY n DESC LIMIT 1", &[])
}

/// The header's `chain` line of `sluice audit show`'s text.
fn chain_line(text: &str) -> &str {
    text.lines()
        .find(|l| l.starts_with("chain "))
        .unwrap_or_else(|| panic!("no chain line in\n{text}"))
}

/// The timeline row of call `#n`.
fn row(text: &str, n: i64) -> &str {
    let tag = format!("#{n} ");
    text.lines()
        .find(|l| l.starts_with(&tag))
        .unwrap_or_else(|| panic!("no row #{n} in\n{text}"))
}

both_stores! {
    fn an_intact_run_shows_sealed_and_verified_in_text_and_json(store) {
        let ws = workspace();
        let id = three_reads(&ws, store);
        let text = sluice(ws.path(), &["audit", "show", &id]);
        assert_eq!(text.code, 0, "{}", text.stderr);
        assert_eq!(chain_line(&text.stdout), "chain        sealed, verified intact");
        assert!(!text.stdout.contains('✗') && !text.stdout.contains("BROKEN"), "{}", text.stdout);

        let json = sluice(ws.path(), &["audit", "show", &id, "--json"]);
        let v: Value = serde_json::from_str(&json.stdout).unwrap();
        assert_eq!(
            v["integrity"],
            serde_json::json!({"intact": true, "sealed": true, "warning": null, "problem": null})
        );
        let calls = v["calls"].as_array().unwrap();
        assert_eq!(calls.len(), 3);
        assert!(calls.iter().all(|c| c.get("broken").is_none()), "{}", json.stdout);
    }
}

both_stores! {
    fn an_edited_output_is_named_at_its_call_in_text_and_json(store) {
        let ws = workspace();
        let id = three_reads(&ws, store);
        let db = store.db(ws.path());
        let edited = exec(
            &*db,
            "UPDATE calls SET output = replace(output, 'two', 'TWO') WHERE run = ?1 AND n = 2",
            &[Val::from(&id)],
        );
        assert_eq!(edited, 1);
        let message = "outcome edited: its status, output, error, duration, late decisions or redactions \
do not hash to its outcome hash";

        let text = sluice(ws.path(), &["audit", "show", &id]);
        assert_eq!(text.code, 0, "{}", text.stderr);
        let out = &text.stdout;
        assert_eq!(
            chain_line(out),
            "chain        BROKEN at call #2 (task 0, seq 2, read): outcome edited (see CHAIN BROKEN below)"
        );
        assert!(row(out, 2).starts_with("#2 ✗ "), "{out}");
        assert!(!row(out, 1).contains('✗') && !row(out, 3).contains('✗'), "{out}");
        assert!(row(out, 2).contains("b.txt"), "{out}");
        // The note under the timeline, its lines joined again.
        let note: Vec<&str> = out
            .lines()
            .skip_while(|l| !l.starts_with("CHAIN BROKEN"))
            .take_while(|l| !l.is_empty() && !l.starts_with('`'))
            .collect();
        assert_eq!(
            note.join(" "),
            format!(
                "CHAIN BROKEN at call #2 (✗ above): {message}. The record was changed after it was \
written: what it shows from there on is not what was recorded (`sluice audit verify {id}`)."
            ),
            "{out}"
        );
        assert!(!out.contains("verified intact"), "{out}");

        let json = sluice(ws.path(), &["audit", "show", &id, "--json"]);
        assert_eq!(json.code, 0, "{}", json.stderr);
        let v: Value = serde_json::from_str(&json.stdout).unwrap();
        let integrity = &v["integrity"];
        assert_eq!(integrity["intact"], false);
        assert_eq!(integrity["sealed"], true);
        assert_eq!(
            integrity["problem"],
            serde_json::json!({"failure": "outcome_edited", "n": 2, "task": "0", "seq": 2,
                               "flow": "read", "message": message})
        );
        let calls = v["calls"].as_array().unwrap();
        assert_eq!(
            calls[1]["broken"],
            serde_json::json!({"failure": "outcome_edited", "message": message})
        );
        assert!(calls[0].get("broken").is_none() && calls[2].get("broken").is_none());
        // The row shows what the record holds now: the edited output.
        assert!(calls[1]["output"]["content"].as_str().unwrap().contains("TWO"));
    }
}
