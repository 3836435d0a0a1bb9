//! `sluice audit copy` through the real binary: runs recorded in a SQLite
//! file copied into a real PostgreSQL and back into another SQLite file
//! keep every hash, and verify at each step; runs recorded after the copy
//! chain onto it; an edited run is not copied.

mod common;

use common::postgres::PgServer;
use common::stores::{column, exec, one};
use common::*;
use sluice::internals::audit::db::{Db, Val};
use sluice::internals::audit::location::Location;
use sluice::internals::audit::{postgres, store};
use std::path::Path;
use std::process::{Command, Stdio};

/// `sluice ARGS` with the PostgreSQL password as the `audit` credential.
fn sluice(ws: &Path, pg: &PgServer, args: &[&str]) -> Run {
    Command::new(sluice_bin())
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .env("SLUICE_CREDENTIAL_AUDIT", pg.password())
        .env_remove("SLUICE_AUDIT")
        .stdin(Stdio::null())
        .output()
        .expect("spawn sluice")
        .into()
}

fn verified(ws: &Path, pg: &PgServer, record: &str) {
    let v = sluice(ws, pg, &["audit", "verify", "--audit", record]);
    assert_eq!(v.code, 0, "verify {record}:\n{}{}", v.stdout, v.stderr);
}

/// Every run's hashes in `db`, by run id: head, seal, then each row's
/// hash and outcome hash in chain order.
fn hashes(db: &dyn Db) -> Vec<(String, Vec<Option<String>>)> {
    let ids: Vec<String> = column(db, "SELECT id FROM runs ORDER BY id", &[]);
    ids.into_iter()
        .map(|id| {
            let mut all: Vec<Option<String>> = Vec::new();
            for sql in [
                "SELECT head, seal FROM runs WHERE id = ?1",
                "SELECT hash, outcome_hash FROM calls WHERE run = ?1 ORDER BY n",
            ] {
                for row in db.query(sql, &[Val::from(&id)]).unwrap() {
                    all.push(row.get(0).unwrap());
                    all.push(row.get(1).unwrap());
                }
            }
            (id, all)
        })
        .collect()
}

fn pg_db(url: &str, pg: &PgServer) -> postgres::Postgres {
    let Location::Postgres(at) = Location::parse(url).unwrap() else {
        unreachable!()
    };
    postgres::open(&at, Some(pg.password())).expect("open the PostgreSQL record")
}

/// Two runs recorded into `ws`'s own SQLite record: one writing and
/// reading files, one running a command.
fn record_two_runs(ws: &Path) {
    run_lua(
        ws,
        "sluice.write{path = 'a.txt', content = 'one'}\nsluice.read{path = 'a.txt'}\n\
         sluice.edit{path = 'a.txt', old = 'one', new = 'two'}\n",
        &[],
    )
    .ok();
    run_lua(
        ws,
        "sluice.bash{command = 'echo hi'}\nsluice.ls{path = '.'}\n",
        &[],
    )
    .ok();
}

/// A run of `ws` recorded straight into the PostgreSQL record at `url`.
fn record_in_team(ws: &Path, pg: &PgServer, url: &str) {
    let out = Command::new(sluice_bin())
        .args(["run", "--audit", url])
        .arg(script_file(ws, "sluice.ls{path = '.'}\n"))
        .current_dir(ws)
        .env("SLUICE_CREDENTIAL_AUDIT", pg.password())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_round_trip_sqlite_postgres_sqlite_keeps_every_hash_and_verifies_at_each_step() {
    let pg = PgServer::shared();
    let url = pg.fresh_database();
    let ws = workspace();
    record_two_runs(ws.path());
    let laptop = store::default_path(ws.path());
    let laptop_db = store::open_existing(&laptop).unwrap();
    let before = hashes(&laptop_db);
    assert_eq!(before.len(), 2);

    // The team's store holds a run of its own first: the copies take
    // places 2 and 3 there.
    let other = workspace();
    record_in_team(other.path(), pg, &url);

    let up = sluice(ws.path(), pg, &["audit", "copy", "--to", &url]);
    assert_eq!(up.code, 0, "{}{}", up.stdout, up.stderr);
    let lines: Vec<&str> = up.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", up.stdout);
    assert!(lines[0].contains("as run #2 (3 calls)"), "{}", up.stdout);
    assert!(lines[1].contains("as run #3 (2 calls)"), "{}", up.stdout);
    verified(ws.path(), pg, &url);
    let team = pg_db(&url, pg);
    let in_team: Vec<_> = hashes(&team)
        .into_iter()
        .filter(|(id, _)| before.iter().any(|(b, _)| b == id))
        .collect();
    assert_eq!(in_team, before, "the same hashes in PostgreSQL");

    // Copying again changes nothing.
    let again = sluice(ws.path(), pg, &["audit", "copy", "--to", &url]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(
        again.stdout.matches("already in").count(),
        2,
        "{}",
        again.stdout
    );
    assert_eq!(one::<i64>(&team, "SELECT count(*) FROM runs", &[]), 3);

    // A run recorded in the team's store after the copies chains onto them.
    record_in_team(other.path(), pg, &url);
    verified(ws.path(), pg, &url);

    // And back down into a new SQLite file: every run of the team's store.
    let back = ws.path().join("back.db");
    let back_text = back.display().to_string();
    let down = sluice(
        ws.path(),
        pg,
        &["audit", "copy", "--from", &url, "--to", &back_text],
    );
    assert_eq!(down.code, 0, "{}{}", down.stdout, down.stderr);
    assert_eq!(
        down.stdout.matches("copied into").count(),
        4,
        "{}",
        down.stdout
    );
    verified(ws.path(), pg, &back_text);
    let back_db = store::open_existing(&back).unwrap();
    assert_eq!(
        hashes(&back_db),
        hashes(&team),
        "the same hashes back in SQLite"
    );
    let in_back: Vec<_> = hashes(&back_db)
        .into_iter()
        .filter(|(id, _)| before.iter().any(|(b, _)| b == id))
        .collect();
    assert_eq!(in_back, before);
    // The copies keep the link they were recorded with on the laptop.
    let origin: String = one(
        &back_db,
        "SELECT origin FROM runs WHERE id = ?1",
        &[Val::from(&before[0].0)],
    );
    assert!(origin.starts_with("{\"n\":"), "{origin}");
}

#[test]
fn an_edited_run_is_not_copied_and_a_copied_run_edited_in_postgres_fails_verify() {
    let pg = PgServer::shared();
    let url = pg.fresh_database();
    let ws = workspace();
    record_two_runs(ws.path());
    let laptop = store::open_existing(&store::default_path(ws.path())).unwrap();
    let first: String = one(&laptop, "SELECT id FROM runs WHERE n = 1", &[]);
    exec(
        &laptop,
        "UPDATE calls SET input = ?1 WHERE run = ?2 AND n = 1",
        &[Val::from("{\"path\":\"b.txt\"}"), Val::from(&first)],
    );
    let out = sluice(ws.path(), pg, &["audit", "copy", "--to", &url, "--json"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs[0]["run"], first.as_str());
    assert_eq!(runs[0]["outcome"], "refused");
    assert!(
        runs[0]["reason"]
            .as_str()
            .unwrap()
            .contains("does not verify in the source"),
        "{report}"
    );
    assert_eq!(runs[1]["outcome"], "copied");
    assert_eq!(runs[1]["n"], 1);

    let team = pg_db(&url, pg);
    let second = runs[1]["run"].as_str().unwrap().to_string();
    exec(
        &team,
        "UPDATE runs SET joined = NULL WHERE id = ?1",
        &[Val::from(&second)],
    );
    let v = sluice(ws.path(), pg, &["audit", "verify", "--audit", &url]);
    assert_eq!(v.code, 1, "{}{}", v.stdout, v.stderr);
    assert!(v.stdout.contains("copy link"), "{}", v.stdout);
}
