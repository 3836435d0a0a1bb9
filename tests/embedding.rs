//! The library API: a Rust program calls flows through the same door as Lua.

use serde_json::json;
use sluice::{ErrorCode, Runtime};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn rust_callers_use_the_same_pipeline() {
    let ws = tempfile::tempdir().unwrap();
    let rt = Runtime::builder().workspace(ws.path()).build().unwrap();
    block_on(async {
        let w = rt
            .call("write", json!({"path": "a.txt", "content": "hi\n"}))
            .await
            .unwrap();
        assert_eq!(w, json!({"bytesWritten": 3, "created": true}));
        let r = rt.call("read", json!({"path": "a.txt"})).await.unwrap();
        assert_eq!(r["content"], "hi");
        let e = rt
            .call("read", json!({"path": "a.txt", "colour": 1}))
            .await
            .unwrap_err();
        assert_eq!(
            (e.code, e.details["field"].as_str()),
            (ErrorCode::InvalidInput, Some("colour"))
        );
        let e = rt
            .call("read", json!({"path": "/nonexistent-sluice-dir/x"}))
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionRequired);
        assert_eq!(e.details["capability"], "fs:read:/nonexistent-sluice-dir/x");
    });
}

#[test]
fn run_source_reports_lua_errors() {
    let ws = tempfile::tempdir().unwrap();
    let rt = Runtime::builder().workspace(ws.path()).build().unwrap();
    let err = block_on(rt.run_source("inline", "local x = nil; return x.y")).unwrap_err();
    assert!(
        err.message
            .starts_with("inline:1: attempt to index a nil value"),
        "{}",
        err.message
    );
}

#[test]
fn rust_callers_run_commands_and_background_jobs() {
    let ws = tempfile::tempdir().unwrap();
    let rt = Runtime::builder().workspace(ws.path()).build().unwrap();
    block_on(async {
        let out = rt
            .call("bash", json!({"command": "echo hi; exit 4"}))
            .await
            .unwrap();
        assert_eq!(out["exitCode"], 4);
        assert_eq!(out["stdout"], "hi\n");
        let started = rt
            .call(
                "bash",
                json!({"command": "echo bg; sleep 30", "background": true}),
            )
            .await
            .unwrap();
        assert_eq!(started["status"], "running");
        let id = started["jobId"].as_u64().unwrap();
        assert!(started["pid"].as_u64().unwrap() > 1);
        let mut seen = String::new();
        for _ in 0..200 {
            seen += rt.job_read(id).unwrap()["stdout"].as_str().unwrap();
            if !seen.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(seen, "bg\n");
        // The end of the run stops it.
        rt.shutdown().await;
        assert_eq!(rt.job_state(id).unwrap()["status"], "killed");
    });
}

#[test]
fn a_rust_caller_can_record_a_run_and_replay_it() {
    use sluice::record::{Mode, Record};
    let ws = tempfile::tempdir().unwrap();
    let db = ws.path().join("audit.db");
    std::fs::write(ws.path().join("a.txt"), "one").unwrap();
    let id = {
        let rt = Runtime::builder()
            .workspace(ws.path())
            .audit(&db)
            .build()
            .unwrap();
        let out = block_on(rt.call("read", json!({"path": "a.txt"}))).unwrap();
        assert_eq!(out["content"], "one");
        rt.end("ok", None).unwrap();
        rt.run_id().to_string()
    };
    std::fs::write(ws.path().join("a.txt"), "two").unwrap();
    let conn = sluice::record::open_existing(&db).unwrap();
    let record = Record::load(&conn, &id).unwrap();
    assert_eq!(record.run.status, "ok");
    let rt = Runtime::builder()
        .workspace(ws.path())
        .replay(record, Mode::Replay)
        .build()
        .unwrap();
    let out = block_on(rt.call("read", json!({"path": "a.txt"}))).unwrap();
    assert_eq!(out["content"], "one", "the recorded result, not the file");
    let diverged = block_on(rt.call("read", json!({"path": "b.txt"}))).unwrap_err();
    assert_eq!(diverged.code, ErrorCode::ReplayDiverged);
    assert!(rt.halted().is_some());
}

#[test]
fn a_run_that_cannot_be_set_up_says_which_input_is_at_fault() {
    use sluice::policy::Source;
    use sluice::BuildErrorKind;
    let ws = tempfile::tempdir().unwrap();
    let missing = ws.path().join("nope");
    let e = Runtime::builder().workspace(&missing).build().unwrap_err();
    assert_eq!(e.kind, BuildErrorKind::Workspace);
    assert!(e.message.contains("--workspace DIR"), "{}", e.message);

    let bad = ws.path().join("bad.lua");
    std::fs::write(&bad, "return {rules = {allow = {42}}").unwrap();
    let e = Runtime::builder()
        .workspace(ws.path())
        .policy(Source::File(bad))
        .build()
        .unwrap_err();
    assert_eq!(e.kind, BuildErrorKind::Policy, "{}", e.message);

    let e = Runtime::builder()
        .workspace(ws.path())
        .ceiling("nope:thing")
        .build()
        .unwrap_err();
    assert_eq!(e.kind, BuildErrorKind::Pattern, "{}", e.message);
    assert!(
        e.message.starts_with("--ceiling \"nope:thing\""),
        "{}",
        e.message
    );

    // The control: the same builder with good inputs runs.
    assert!(Runtime::builder().workspace(ws.path()).build().is_ok());
}

#[test]
fn a_kill_from_rust_passes_the_gate_and_is_recorded() {
    let ws = tempfile::tempdir().unwrap();
    let db = ws.path().join("audit.db");
    let rt = Runtime::builder()
        .workspace(ws.path())
        .audit(&db)
        .build()
        .unwrap();
    block_on(async {
        let started = rt
            .call("bash", json!({"command": "sleep 30", "background": true}))
            .await
            .unwrap();
        let id = started["jobId"].as_u64().unwrap();
        assert!(rt.job_kill(id).unwrap(), "the job was running");
        let ended = rt.job_wait(id, Some(std::time::Duration::from_secs(5)));
        assert!(ended.await.unwrap());
        assert_eq!(rt.job_state(id).unwrap()["status"], "killed");
        let e = rt.job_kill(id + 7).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert_eq!(e.details["field"], "jobId");
        rt.shutdown().await;
    });
    rt.end("ok", None).unwrap();
    let conn = sluice::record::open_existing(&db).unwrap();
    let (flow, decisions): (String, String) = conn
        .query_row(
            "SELECT flow, decisions FROM calls WHERE flow = 'job.kill'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(flow, "job.kill");
    let decisions: serde_json::Value = serde_json::from_str(&decisions).unwrap();
    assert_eq!(decisions[0]["capability"], "proc:spawn:sleep 30");
    assert_eq!(decisions[0]["decision"], "allow");
}

#[test]
fn a_policy_can_refuse_a_kill_and_the_job_keeps_running() {
    use sluice::policy::Source;
    let ws = tempfile::tempdir().unwrap();
    let policy = ws.path().join("nokill.lua");
    std::fs::write(
        &policy,
        "local p = require(\"sluice.policy\")\n\
         return {\n  rules = { p.allow \"proc:spawn:sleep *\" },\n  \
         decide = function(req)\n    if req.flow == \"job.kill\" then return \"deny\" end\n  end,\n}\n",
    )
    .unwrap();
    let rt = Runtime::builder()
        .workspace(ws.path())
        .policy(Source::File(policy))
        .build()
        .unwrap();
    block_on(async {
        let started = rt
            .call("bash", json!({"command": "sleep 30", "background": true}))
            .await
            .unwrap();
        let id = started["jobId"].as_u64().unwrap();
        let e = rt.job_kill(id).unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied, "{}", e.message);
        assert_eq!(e.details["capability"], "proc:spawn:sleep 30");
        assert_eq!(rt.job_state(id).unwrap()["status"], "running");
        rt.shutdown().await;
        assert_eq!(rt.job_state(id).unwrap()["status"], "killed");
    });
}
