//! Runs on a fleet: a real Temporal dev server, a real `sluice worker`
//! recording into a real PostgreSQL, and `sluice submit` as a user runs
//! them.

mod common;

use common::postgres::PgServer;
use common::temporal::TemporalServer;
use common::*;
use std::process::{Child, Command, Stdio};

/// A `sluice worker` on `queue`, recording into `url`; killed on drop.
struct Worker(Child);

impl Worker {
    fn start(temporal: &TemporalServer, queue: &str, url: &str, pg: &PgServer) -> Worker {
        let child = Command::new(sluice_bin())
            .args([
                "worker",
                "--temporal",
                &temporal.address(),
                "--task-queue",
                queue,
            ])
            .args(["--audit", url])
            .env("SLUICE_CREDENTIAL_AUDIT", pg.password())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sluice worker");
        Worker(child)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn submit(temporal: &TemporalServer, queue: &str, ws: &std::path::Path, extra: &[&str]) -> Run {
    let script = script_file(
        ws,
        "sluice.write{path = 'hello.txt', content = 'hi from the fleet'}\n\
         print(sluice.read{path = 'hello.txt'}.content)\n",
    );
    Command::new(sluice_bin())
        .arg("submit")
        .arg(&script)
        .args(["--temporal", &temporal.address(), "--task-queue", queue])
        .arg("--workspace")
        .arg(ws)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("run sluice submit")
        .into()
}

#[test]
fn a_submitted_run_runs_on_a_worker_into_the_shared_record_and_its_id_is_never_reused() {
    let temporal = TemporalServer::start();
    let pg = PgServer::shared();
    let url = pg.fresh_database();
    let _worker = Worker::start(&temporal, "q1", &url, pg);
    let ws = workspace();
    let out = submit(
        &temporal,
        "q1",
        ws.path(),
        &["--run-id", "fleet-1", "--wait"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "fleet-1\nhi from the fleet\n");
    assert_eq!(
        std::fs::read_to_string(ws.file("hello.txt")).unwrap(),
        "hi from the fleet"
    );
    let listed = Command::new(sluice_bin())
        .args(["audit", "list", "--json", "--audit", &url])
        .env("SLUICE_CREDENTIAL_AUDIT", pg.password())
        .output()
        .unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(runs["runs"][0]["id"], "fleet-1");
    assert_eq!(runs["runs"][0]["status"], "ok");

    let again = submit(&temporal, "q1", ws.path(), &["--run-id", "fleet-1"]);
    assert_eq!(again.code, 2, "{}{}", again.stdout, again.stderr);
    assert!(
        again.stderr.contains("cannot submit run fleet-1"),
        "{}",
        again.stderr
    );
}
