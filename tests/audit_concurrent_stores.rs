//! Many writers, one PostgreSQL record: eight `sluice run`s at once, each
//! of 500 calls (sealed reads and irreversible commands, whose intents are
//! committed before they run), record into one database; every row is
//! there, each run's chain is unbroken and `verify` passes the whole store.
//! SQLite, one writer at a time, runs the same as the control.

mod common;

use common::stores::one;
use common::*;
use sluice::internals::audit::db::{Db, Val};
use std::process::Stdio;

const RUNS: usize = 8;
const PAIRS: usize = 250;

both_stores! {
    fn eight_runs_of_500_calls_at_once_all_land_and_verify(store) {
        let ws = workspace();
        std::fs::write(ws.file("f"), "x").unwrap();
        let script = script_file(
            ws.path(),
            &format!(
                "for i = 1, {PAIRS} do\n  assert(sluice.read{{path = 'f'}})\n  \
                 assert(sluice.bash{{command = 'true'}})\nend\n"
            ),
        );
        let started = std::time::Instant::now();
        let runs: Vec<_> = (0..RUNS)
            .map(|_| {
                sluice_run(ws.path(), &script, &[], &[])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn sluice run")
            })
            .collect();
        for run in runs {
            let out = run.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        eprintln!("{RUNS} runs of {} calls: {:?}", PAIRS * 2, started.elapsed());
        let opened = store.db(ws.path());
        let db: &dyn Db = &*opened;
        assert_eq!(one::<i64>(db, "SELECT count(*) FROM runs WHERE status = 'ok'", &[]), RUNS as i64);
        let ids = db.column::<String>("SELECT id FROM runs", &[]).unwrap();
        for id in &ids {
            let calls: i64 = one(db, "SELECT count(*) FROM calls WHERE run = ?1", &[Val::from(id)]);
            assert_eq!(calls, (PAIRS * 2) as i64, "run {id}");
            let top: i64 = one(db, "SELECT max(n) FROM calls WHERE run = ?1", &[Val::from(id)]);
            assert_eq!(top, (PAIRS * 2) as i64, "run {id}'s chain has no gap");
            let irreversible: i64 = one(
                db,
                "SELECT count(*) FROM calls WHERE run = ?1 AND tier = 'irreversible' AND status = 'ok'",
                &[Val::from(id)],
            );
            assert_eq!(irreversible, PAIRS as i64, "run {id}");
        }
        // Eight places in the chain of runs, one each.
        let places = db.column::<i64>("SELECT n FROM runs ORDER BY n", &[]).unwrap();
        assert_eq!(places, (1..=RUNS as i64).collect::<Vec<_>>());
        let verified = sluice_in(ws.path(), &["audit", "verify"]);
        assert_eq!(verified.code, 0, "{}{}", verified.stdout, verified.stderr);
    }
}
