//! `sluice run --run-id ID`: the run keeps the id it is given (what a
//! fleet worker gives the run it takes), an id already in the record is
//! refused without touching it, and an id that is not one is refused
//! before anything runs.

mod common;

use common::*;

#[test]
fn a_run_keeps_the_id_it_is_given_and_a_second_run_of_it_is_refused() {
    let ws = workspace();
    let script = script_file(ws.path(), "sluice.write{path = 'out', content = 'x'}\n");
    let path = script.to_str().unwrap();
    let first = sluice_in(ws.path(), &["run", path, "--run-id", "fleet-run.1"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let listed = sluice_in(ws.path(), &["audit", "list", "--json"]);
    let runs: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(runs["runs"][0]["id"], "fleet-run.1");

    std::fs::remove_file(ws.file("out")).unwrap();
    let again = sluice_in(ws.path(), &["run", path, "--run-id", "fleet-run.1"]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(
        again
            .stderr
            .contains("run fleet-run.1 is in the record already"),
        "{}",
        again.stderr
    );
    assert!(!ws.file("out").exists(), "the refused run ran nothing");
    let verify = sluice_in(ws.path(), &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
    assert!(
        verify
            .stdout
            .contains("fleet-run.1  intact (1 call, sealed)"),
        "{}",
        verify.stdout
    );
}

#[test]
fn an_id_that_is_not_one_is_refused_saying_what_an_id_is() {
    let ws = workspace();
    let script = script_file(ws.path(), "sluice.write{path = 'out', content = 'x'}\n");
    for bad in ["../x", "", "-x", &"a".repeat(65), "a b"] {
        let flag = format!("--run-id={bad}");
        let out = sluice_in(ws.path(), &["run", script.to_str().unwrap(), &flag]);
        assert_eq!(out.code, 2, "{bad:?}: {}", out.stderr);
        assert!(
            out.stderr
                .contains("use 1 to 64 letters, digits, '.', '_' or '-'"),
            "{bad:?}: {}",
            out.stderr
        );
        assert!(!ws.file("out").exists(), "{bad:?} ran the script");
    }
}
