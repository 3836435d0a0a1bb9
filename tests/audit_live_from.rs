//! `sluice resume RUN --script FILE --live-from N`: after fixing a script,
//! the calls before #N replay (touching nothing) and #N on run live,
//! recorded as a new run linked to the old one; on both stores.

mod common;

use common::{run_lua, script_file, sluice_in, workspace, Workspace};
use serde_json::Value;
use std::fs;

const THREE_WRITES: &str = "sluice.write{path = 'a.txt', content = 'one'}\n\
sluice.write{path = 'b.txt', content = 'two'}\n\
sluice.write{path = 'c.txt', content = 'three'}\n";

/// A workspace where a script made three writes (run ok), its first two
/// files since changed by hand, so a replayed write would show; and the
/// fixed script, whose third write differs.
fn recorded() -> (Workspace, String) {
    let ws = workspace();
    run_lua(ws.path(), THREE_WRITES, &[]).ok();
    fs::write(ws.file("a.txt"), "by hand").unwrap();
    fs::write(ws.file("b.txt"), "by hand").unwrap();
    let fixed = THREE_WRITES.replace("'three'", "'three, fixed'");
    let fixed = script_file(ws.path(), &fixed);
    (ws, fixed.to_str().unwrap().to_string())
}

fn show(ws: &Workspace, run: &str) -> Value {
    let out = sluice_in(ws.path(), &["audit", "show", run, "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

both_stores! {
    fn live_from_3_replays_calls_1_and_2_and_runs_3_live_as_a_linked_run(store) {
        let (ws, fixed) = recorded();
        let old = show(&ws, "last")["run"]["id"].as_str().unwrap().to_string();
        let out = sluice_in(
            ws.path(),
            &["resume", "last", "--script", &fixed, "--live-from", "3"],
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(
            out.stderr.contains(&format!("resumed run {old} as run "))
                && out
                    .stderr
                    .contains(": 2 calls answered from the record, then live (--live-from 3)"),
            "{}",
            out.stderr
        );
        // Calls 1 and 2 touched nothing; 3 ran.
        assert_eq!(fs::read_to_string(ws.file("a.txt")).unwrap(), "by hand");
        assert_eq!(fs::read_to_string(ws.file("b.txt")).unwrap(), "by hand");
        assert_eq!(
            fs::read_to_string(ws.file("c.txt")).unwrap(),
            "three, fixed"
        );
        let new = show(&ws, "last");
        assert_eq!(new["run"]["resumedFrom"], old.as_str());
        assert_eq!(new["run"]["status"], "ok");
        let calls = new["calls"].as_array().unwrap();
        assert_eq!(calls.len(), 3, "{new:#}");
        assert_eq!(calls[0]["replayedFrom"], old.as_str());
        assert_eq!(calls[1]["replayedFrom"], old.as_str());
        assert_eq!(calls[2]["replayedFrom"], Value::Null);
        assert_eq!(calls[2]["input"]["content"], "three, fixed");
        // The timeline's header says so.
        let text = sluice_in(ws.path(), &["audit", "show", "last"]);
        assert!(
            text.stdout.contains(&format!(
                "resumed      from run {old} (2 calls replayed from it, live from #3)"
            )),
            "{}",
            text.stdout
        );
        // The new run verifies, and replays as recorded.
        assert_eq!(sluice_in(ws.path(), &["audit", "verify"]).code, 0);
    }
}

both_stores! {
    fn script_without_live_from_stops_at_the_changed_call_and_says_how_to_go_on(store) {
        let (ws, fixed) = recorded();
        // An ok run needs --live-from; an interrupted or failed one does not.
        let out = sluice_in(ws.path(), &["resume", "last", "--script", &fixed]);
        assert_eq!(out.code, 2);
        assert!(
            out.stderr
                .contains("(or, with --live-from N, runs a finished one live from its call #N)"),
            "{}",
            out.stderr
        );
        let ws2 = workspace();
        run_lua(ws2.path(), &format!("{THREE_WRITES}error('late')\n"), &[]);
        let fixed = script_file(ws2.path(), &THREE_WRITES.replace("'three'", "'3'"));
        let out = sluice_in(
            ws2.path(),
            &["resume", "last", "--script", fixed.to_str().unwrap()],
        );
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(
            out.stderr.contains("replay diverged at call #3"),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr.contains(
                "to run live from this call on (the calls before it still replay), resume with --script FILE --live-from 3"
            ),
            "{}",
            out.stderr
        );
        assert_eq!(fs::read_to_string(ws2.file("c.txt")).unwrap(), "three");
        // That resume is a run of its own holding the two calls that matched:
        // resuming it live from the changed call runs that one.
        let out = sluice_in(
            ws2.path(),
            &[
                "resume",
                "last",
                "--script",
                fixed.to_str().unwrap(),
                "--live-from",
                "3",
            ],
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(fs::read_to_string(ws2.file("c.txt")).unwrap(), "3");
    }
}

both_stores! {
    fn a_call_before_n_that_differs_stops_the_resume_suggesting_a_smaller_n(store) {
        let ws = workspace();
        run_lua(ws.path(), THREE_WRITES, &[]).ok();
        let changed = THREE_WRITES
            .replace("'two'", "'2'")
            .replace("'three'", "'3'");
        let changed = script_file(ws.path(), &changed);
        let out = sluice_in(
            ws.path(),
            &[
                "resume",
                "last",
                "--script",
                changed.to_str().unwrap(),
                "--live-from",
                "3",
            ],
        );
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(
            out.stderr.contains("replay diverged at call #2"),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr.contains("content: recorded \"two\", now \"2\""),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr.contains(
                "--live-from 3 replays every call before #3, and this one differs: give --live-from 2 (or smaller) to run live from here"
            ),
            "{}",
            out.stderr
        );
        assert_eq!(fs::read_to_string(ws.file("b.txt")).unwrap(), "two");
        assert_eq!(fs::read_to_string(ws.file("c.txt")).unwrap(), "three");
    }
}

both_stores! {
    fn live_from_past_the_end_and_not_a_number_are_refused_with_the_range(store) {
        let (ws, fixed) = recorded();
        let id = show(&ws, "last")["run"]["id"].as_str().unwrap().to_string();
        let range = format!(
            "run {id} recorded 3 calls (`sluice audit show {id}` numbers them #1 to #3), so N is 1 to 4 (4: replay them all, then live)"
        );
        for (n, says) in [
            ("5", format!("--live-from 5 is past the run's end: {range}")),
            ("0", format!("--live-from 0 is past the run's end: {range}")),
            ("x", format!("--live-from \"x\" is not a call number: give N as the #N of `sluice audit show`'s timeline; {range}")),
            ("#3", format!("--live-from \"#3\" is not a call number: give N as the #N of `sluice audit show`'s timeline; {range}")),
        ] {
            let out = sluice_in(ws.path(), &["resume", "last", "--script", &fixed, "--live-from", n]);
            assert_eq!(out.code, 2, "{n}: {}", out.stderr);
            assert_eq!(out.stderr, format!("sluice: {says}\n"));
        }
        assert_eq!(fs::read_to_string(ws.file("c.txt")).unwrap(), "three");
        // N = calls + 1: everything replays, nothing differs, nothing runs.
        let same = script_file(ws.path(), THREE_WRITES);
        let out = sluice_in(
            ws.path(),
            &[
                "resume",
                "last",
                "--script",
                same.to_str().unwrap(),
                "--live-from",
                "4",
            ],
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(
            out.stderr.contains(": 3 calls answered from the record\n"),
            "{}",
            out.stderr
        );
        assert_eq!(fs::read_to_string(ws.file("a.txt")).unwrap(), "by hand");
    }
}

#[test]
fn resume_help_names_the_numbering_of_live_from() {
    let ws = workspace();
    let help = sluice_in(ws.path(), &["resume", "--help"]);
    assert!(
        help.stdout.contains("N as `sluice audit show RUN` numbers the run's calls (the timeline's #N, one numbering across tasks)"),
        "{}",
        help.stdout
    );
    assert!(help.stdout.contains("--live-from <N>"), "{}", help.stdout);
}
