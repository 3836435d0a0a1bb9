//! Naming a run: ids whose first characters differ between runs, and
//! `last` / `last~N` wherever a command takes a RUN (`audit show`,
//! `export`, `verify`, `replay`, `resume`, and their `--json` forms), on
//! both stores.

mod common;

use common::{run_lua, script_file, sluice_in, workspace};
use serde_json::Value;

/// The ids of the runs recorded in `ws`, newest first.
fn run_ids(ws: &std::path::Path) -> Vec<String> {
    let list = sluice_in(ws, &["audit", "list", "--json"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let v: Value = serde_json::from_str(&list.stdout).unwrap();
    v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

fn json_of(ws: &std::path::Path, args: &[&str]) -> Value {
    let out = sluice_in(ws, args);
    assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

both_stores! {
    fn run_ids_begin_with_random_digits_so_a_short_prefix_names_one_run(store) {
        let ws = workspace();
        for _ in 0..6 {
            run_lua(ws.path(), "", &[]).ok();
        }
        let ids = run_ids(ws.path());
        assert_eq!(ids.len(), 6);
        for id in &ids {
            let (random, time) = id.split_once('-').unwrap();
            assert_eq!(random.len(), 8, "{id}");
            assert!(random.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
            assert!(u64::from_str_radix(time, 16).is_ok(), "{id}");
        }
        // Runs of the same second share no first four characters (a clash
        // has a chance of 15 in 65,536 among six runs).
        let mut heads: Vec<&str> = ids.iter().map(|id| &id[..4]).collect();
        heads.sort();
        heads.dedup();
        assert_eq!(heads.len(), 6, "{ids:?}");
        let shown = json_of(ws.path(), &["audit", "show", &ids[3][..6], "--json"]);
        assert_eq!(shown["run"]["id"], ids[3]);
    }
}

both_stores! {
    fn last_tilde_n_names_the_same_run_in_every_command(store) {
        let ws = workspace();
        let first = script_file(ws.path(), "sluice.write{path = 'a.txt', content = 'one'}\n");
        let first = first.to_str().unwrap();
        let run = |flags: &[&str]| {
            let mut args = vec!["run", first];
            args.extend_from_slice(flags);
            sluice_in(ws.path(), &args)
        };
        assert_eq!(run(&[]).code, 0);
        run_lua(ws.path(), "sluice.read{path = 'a.txt'}\n", &[]).ok();
        run_lua(ws.path(), "", &[]).ok();
        let ids = run_ids(ws.path());
        let id = |v: &Value| v["run"]["id"].as_str().unwrap().to_string();
        assert_eq!(
            id(&json_of(ws.path(), &["audit", "show", "last", "--json"])),
            ids[0]
        );
        let shown = json_of(ws.path(), &["audit", "show", "last~2", "--json"]);
        assert_eq!(id(&shown), ids[2]);
        assert_eq!(shown["calls"][0]["flow"], "write");
        let verified = json_of(ws.path(), &["audit", "verify", "last~1", "--json"]);
        assert_eq!(verified["runs"][0]["run"], ids[1], "{verified:#}");
        let export = sluice_in(ws.path(), &["audit", "export", "last~2"]);
        assert_eq!(export.code, 0, "{}", export.stderr);
        assert!(export.stdout.contains(&ids[2]), "{}", export.stdout);
        let replay = sluice_in(ws.path(), &["replay", "last~2"]);
        assert_eq!(replay.code, 0, "{}", replay.stderr);
        assert!(
            replay
                .stderr
                .contains(&format!("run {} reproduced", ids[2])),
            "{}",
            replay.stderr
        );
        // Past the oldest run: how many there are.
        let past = sluice_in(ws.path(), &["replay", "last~3"]);
        assert_eq!(past.code, 2);
        assert_eq!(
            past.stderr,
            "sluice: \"last~3\" names no run: the audit database holds 3 runs, `last` the newest and `last~2` the oldest\n"
        );
        let bad = sluice_in(ws.path(), &["audit", "show", "last~one"]);
        assert_ne!(bad.code, 0);
        assert!(
            bad.stderr.contains("N in last~N is a whole number"),
            "{}",
            bad.stderr
        );
    }
}

both_stores! {
    fn resume_last_names_the_run_before_the_resume_itself(store) {
        let ws = workspace();
        // Fails after one write; the resume fixes nothing, so it fails too,
        // but it resumes the failed run, not itself.
        run_lua(
            ws.path(),
            "sluice.write{path = 'a.txt', content = 'one'}\nerror('boom')\n",
            &[],
        );
        let failed = run_ids(ws.path())[0].clone();
        let resumed = sluice_in(ws.path(), &["resume", "last"]);
        assert_eq!(resumed.code, 1, "{}", resumed.stderr);
        assert!(
            resumed
                .stderr
                .contains(&format!("resumed run {failed} as run ")),
            "{}",
            resumed.stderr
        );
        let ids = run_ids(ws.path());
        assert_eq!(ids[1], failed);
        let shown = json_of(ws.path(), &["audit", "show", "last", "--json"]);
        assert_eq!(shown["run"]["resumedFrom"], failed, "{shown:#}");
    }
}

#[test]
fn every_command_that_takes_a_run_names_last_tilde_n_in_its_help() {
    let ws = workspace();
    for cmd in [
        &["audit", "show"][..],
        &["audit", "export"],
        &["audit", "verify"],
        &["replay"],
        &["resume"],
    ] {
        let mut args = cmd.to_vec();
        args.push("--help");
        let help = sluice_in(ws.path(), &args);
        assert_eq!(help.code, 0, "{cmd:?}");
        assert!(
            help.stdout
                .contains("`last` (the newest) or `last~N` (N runs before it)"),
            "{cmd:?}: {}",
            help.stdout
        );
    }
}
