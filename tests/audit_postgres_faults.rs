//! Faults of a PostgreSQL record: the server stopped with `pg_ctl -m
//! immediate` in the middle of a run, then started again. What a run does
//! today: its next write fails, an irreversible call whose intent cannot be
//! committed does not run, and the run ends failed saying so; every row
//! committed before the stop is there after the restart, and the record
//! verifies.

mod common;

use common::postgres::PgServer;
use common::*;
use sluice::internals::audit::db::{Db, Val};
use sluice::internals::audit::location::Location;
use sluice::internals::audit::postgres;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn marked(ws: &std::path::Path) -> usize {
    std::fs::read_to_string(ws.join("marker"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_server_stopped_mid_run_loses_no_committed_row_and_runs_no_unrecorded_command() {
    let mut server = PgServer::start();
    let url = server.fresh_database();
    let ws = workspace();
    let script = script_file(
        ws.path(),
        "for i = 1, 2000 do\n  assert(sluice.bash{command = 'echo ' .. i .. ' >> marker'})\n  \
         sluice.sleep(20)\nend\n",
    );
    let run = sluice_run(ws.path(), &script, &[], &[])
        .env("SLUICE_AUDIT", &url)
        .env("SLUICE_CREDENTIAL_AUDIT", server.password())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sluice run");
    let deadline = Instant::now() + Duration::from_secs(30);
    while marked(ws.path()) < 5 {
        assert!(
            Instant::now() < deadline,
            "the run never marked five commands"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server.stop_immediate();
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("so it did not run") || err.contains("could not record"),
        "the run says what was not recorded: {err}"
    );
    let commands = marked(ws.path());
    server.restart();

    let Location::Postgres(at) = Location::parse(&url).unwrap() else {
        unreachable!()
    };
    let pg = postgres::open(&at, Some(server.password())).expect("the store after the restart");
    let db: &dyn Db = &pg;
    let run_id: String = db
        .value("SELECT id FROM runs", &[])
        .unwrap()
        .expect("the run's row survived");
    // Every command that ran had its intent committed first: one row each.
    let rows: i64 = db
        .value(
            "SELECT count(*) FROM calls WHERE run = ?1 AND flow = 'bash'",
            &[Val::from(&run_id)],
        )
        .unwrap()
        .unwrap();
    assert!(
        commands as i64 <= rows,
        "{commands} commands ran, {rows} intents were committed"
    );
    let verified = std::process::Command::new(sluice_bin())
        .args(["audit", "verify", "--audit", &url])
        .env("SLUICE_CREDENTIAL_AUDIT", server.password())
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
}
