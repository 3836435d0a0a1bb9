//! The library API: a Rust program calls flows through the same door as Lua.

mod common;

use common::guide::{fenced_blocks, file_name, guide_page, named_block, run_shell_block};
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

/// The embedding API's own flows and approver (issue 17).
mod extended {
    use super::block_on;
    use serde_json::{json, Value};
    use sluice::embed::{CustomFlow, FlowInfo, Granted, Reach};
    use sluice::policy::{Answer, Approver, Ask, Source};
    use sluice::{BuildErrorKind, ErrorCode, FlowError, Runtime, Tier};
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    /// `wordcount{path}`: the words of a file. Counts its runs, so a test
    /// sees which calls reached it.
    #[derive(Default)]
    struct WordCount {
        runs: Arc<AtomicUsize>,
    }

    impl CustomFlow for WordCount {
        fn info(&self) -> FlowInfo {
            FlowInfo {
                name: "wordcount".into(),
                description: "Counts the words of a text file.".into(),
                tier: Tier::Sealed,
                input_schema: json!({"type": "object", "required": ["path"],
                    "properties": {"path": {"type": "string", "description": "The file."}}}),
                output_schema: json!({"type": "object",
                    "properties": {"words": {"type": "integer", "description": "Words in it."}}}),
            }
        }

        fn plan(&self, input: &Value, _workspace: &Path) -> Result<Reach, FlowError> {
            let path = input["path"].as_str().ok_or_else(|| {
                FlowError::invalid_input("path", "wordcount needs `path`, a string")
            })?;
            Ok(Reach {
                reads: vec![PathBuf::from(path)],
                ..Reach::default()
            })
        }

        fn run(&self, _input: Value, granted: &Granted) -> Result<Value, FlowError> {
            self.runs.fetch_add(1, Ordering::SeqCst);
            let text = std::fs::read_to_string(&granted.reads[0])
                .map_err(|e| FlowError::new(ErrorCode::NotFound, e.to_string()))?;
            Ok(json!({"words": text.split_whitespace().count(), "seq": granted.call_seq}))
        }
    }

    /// Says yes (for the run) to reads of `yes.txt` and to commands, no to
    /// anything else,
    /// and keeps every ask it was shown.
    #[derive(Default)]
    struct Picky {
        shown: Mutex<Vec<Ask>>,
    }

    impl Approver for Picky {
        fn ask(&self, ask: &Ask) -> Answer {
            self.shown.lock().unwrap().push(ask.clone());
            if ask.capability.ends_with("/yes.txt") || ask.capability.starts_with("proc:spawn:") {
                Answer::ForRun
            } else {
                Answer::No(Some("not on my list".into()))
            }
        }

        fn who(&self) -> String {
            "the test's approver".into()
        }
    }

    /// Workspace reads at the top allowed, `shared/` asked, the rest denied.
    const POLICY: &str = r#"local p = require("sluice.policy")
return {
  rules = {
    p.allow "fs:read:${workspace}/*.txt",
    p.ask("fs:read:${workspace}/shared/**", "shared files need a yes"),
  },
  otherwise = "deny",
}
"#;

    fn files() -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("a.txt"), "one two three").unwrap();
        std::fs::create_dir(ws.path().join("shared")).unwrap();
        std::fs::write(ws.path().join("shared/yes.txt"), "four five").unwrap();
        std::fs::write(ws.path().join("shared/no.txt"), "six").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("x.txt"), "seven").unwrap();
        let policy = ws.path().join("policy.lua");
        std::fs::write(&policy, POLICY).unwrap();
        (ws, outside, policy)
    }

    const SCRIPT: &str = r#"
local out = {}
local function count(path)
  local r, err = sluice.wordcount{path = path}
  if r then
    out[#out + 1] = tostring(r.words)
  elseif err.by == "the test's approver" then
    out[#out + 1] = err.code .. " by the approver: " .. err.reason
  else
    out[#out + 1] = err.code
  end
end
count("a.txt")
count("shared/yes.txt")
count("shared/yes.txt")
count("shared/no.txt")
count(OUTSIDE)
RESULT = table.concat(out, "|")
"#;

    #[test]
    fn an_embedded_flow_passes_the_door_and_an_embedded_approver_answers_its_asks() {
        let (ws, outside, policy) = files();
        let db = ws.path().join("audit.db");
        let runs = Arc::new(AtomicUsize::new(0));
        let picky = Arc::new(Picky::default());
        let rt = Runtime::builder()
            .workspace(ws.path())
            .policy(Source::File(policy.clone()))
            .audit(&db)
            .flow(WordCount { runs: runs.clone() })
            .approver(picky.clone())
            .build()
            .unwrap();
        let x = outside.path().join("x.txt");
        let script = SCRIPT.replace("OUTSIDE", &format!("{:?}", x.display().to_string()));
        block_on(rt.run_source("embedded", &script)).unwrap();
        let result: String = rt
            .function("function() return RESULT end")
            .unwrap()
            .call(())
            .unwrap();
        assert_eq!(
            result,
            "3|2|2|permission_denied by the approver: not on my list|permission_denied"
        );
        // Three calls ran: the allowed one and the two approved; the
        // refused and the denied never reached the flow.
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        // Asked twice: "for the run" covered the second read of yes.txt.
        let shown = picky.shown.lock().unwrap().clone();
        let shared = std::fs::canonicalize(ws.path()).unwrap().join("shared");
        assert_eq!(shown.len(), 2, "{shown:?}");
        assert_eq!(
            shown[0].capability,
            format!("fs:read:{}", shared.join("yes.txt").display())
        );
        assert_eq!(shown[0].flow, "wordcount");
        assert_eq!(shown[0].reason, "shared files need a yes");
        assert!(shown[0].by.contains("policy.lua"), "{}", shown[0].by);
        assert_eq!(shown[0].input, r#"{"path":"shared/yes.txt"}"#);
        assert_eq!(shown[0].justification, None);
        assert!(!shown[0].once_only);
        assert_eq!(
            shown[1].capability,
            format!("fs:read:{}", shared.join("no.txt").display())
        );
        // The manifest of the run lists it after sluice's own.
        let manifest = rt.manifest();
        let names: Vec<&str> = manifest["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.last(), Some(&"wordcount"));
        assert!(manifest["readOnly"]
            .as_array()
            .unwrap()
            .contains(&json!("wordcount")));
        rt.end("ok", None).unwrap();
        let id = rt.run_id().to_string();
        drop(rt);

        // Every call is recorded, with who approved it.
        let conn = sluice::record::open_existing(&db).unwrap();
        let mut stmt = conn
            .prepare("SELECT decisions, error FROM calls WHERE flow = 'wordcount' ORDER BY seq")
            .unwrap();
        let rows: Vec<(String, Option<String>)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(rows.len(), 5);
        let approved: Vec<Value> = rows
            .iter()
            .map(|(d, _)| serde_json::from_str::<Value>(d).unwrap()[0]["approvedBy"].clone())
            .collect();
        assert_eq!(
            approved,
            vec![
                Value::Null,
                json!("the test's approver, for the rest of the run"),
                json!("the test's approver, for the rest of the run"),
                Value::Null,
                Value::Null
            ]
        );
        assert!(rows[3].1.as_deref().unwrap().contains("not on my list"));

        // A replay answers the embedder's flow from the record: the flow
        // does not run, nobody is asked, and the script sees the same.
        drop(stmt);
        let record = sluice::record::Record::load(&conn, &id).unwrap();
        let again = Arc::new(AtomicUsize::new(0));
        let rt = Runtime::builder()
            .workspace(ws.path())
            .policy(Source::File(policy))
            .flow(WordCount {
                runs: again.clone(),
            })
            .replay(record, sluice::record::Mode::Replay)
            .build()
            .unwrap();
        std::fs::write(ws.path().join("a.txt"), "changed").unwrap();
        block_on(rt.run_source("embedded", &script)).unwrap();
        let replayed: String = rt
            .function("function() return RESULT end")
            .unwrap()
            .call(())
            .unwrap();
        assert_eq!(replayed, result);
        assert_eq!(again.load(Ordering::SeqCst), 0);
        assert_eq!(rt.replayed_calls(), 5);
    }

    #[test]
    fn an_embedded_flow_is_refused_outside_the_workspace_before_it_runs() {
        let (ws, outside, policy) = files();
        let runs = Arc::new(AtomicUsize::new(0));
        let rt = Runtime::builder()
            .workspace(ws.path())
            .policy(Source::File(policy))
            .flow(WordCount { runs: runs.clone() })
            .build()
            .unwrap();
        let x = std::fs::canonicalize(outside.path().join("x.txt")).unwrap();
        let e = block_on(rt.call("wordcount", json!({"path": x}))).unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied, "{}", e.message);
        assert_eq!(e.details["capability"], format!("fs:read:{}", x.display()));
        // A symlink inside the workspace is judged by where it leads.
        std::os::unix::fs::symlink(&x, ws.path().join("link.txt")).unwrap();
        let e = block_on(rt.call("wordcount", json!({"path": "link.txt"}))).unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied, "{}", e.message);
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        // The control: a file the policy allows is counted.
        let out = block_on(rt.call("wordcount", json!({"path": "a.txt"}))).unwrap();
        assert_eq!(out, json!({"words": 3, "seq": 3}));
        // Its plan's own error reaches the caller as it made it.
        let e = block_on(rt.call("wordcount", json!({"file": "a.txt"}))).unwrap_err();
        assert_eq!(e.details["field"], "path");
        let e = block_on(rt.call("wordcount", json!("a.txt"))).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    /// A flow named `name`, otherwise WordCount.
    struct Named(&'static str);

    impl CustomFlow for Named {
        fn info(&self) -> FlowInfo {
            FlowInfo {
                name: self.0.into(),
                ..WordCount::default().info()
            }
        }
        fn plan(&self, input: &Value, ws: &Path) -> Result<Reach, FlowError> {
            WordCount::default().plan(input, ws)
        }
        fn run(&self, input: Value, granted: &Granted) -> Result<Value, FlowError> {
            WordCount::default().run(input, granted)
        }
    }

    #[test]
    fn an_embedded_flow_whose_name_is_taken_or_not_a_lua_name_fails_the_build() {
        let ws = tempfile::tempdir().unwrap();
        for (name, says) in [
            ("read", "clashes with sluice's own flow \"read\""),
            ("http_post", "clashes with sluice's own flow \"http-post\""),
            ("word-count", "is not a Lua identifier"),
            ("9lives", "is not a Lua identifier"),
            ("end", "is not a Lua identifier"),
            ("call", "would hide sluice.call"),
        ] {
            let e = Runtime::builder()
                .workspace(ws.path())
                .flow(Named(name))
                .build()
                .unwrap_err();
            assert_eq!(e.kind, BuildErrorKind::Flow, "{name}");
            assert!(
                e.message.contains(&format!("flow {name:?}")),
                "{}",
                e.message
            );
            assert!(e.message.contains(says), "{name}: {}", e.message);
        }
        let e = Runtime::builder()
            .workspace(ws.path())
            .flow(Named("twice"))
            .flow(Named("twice"))
            .build()
            .unwrap_err();
        assert!(e.message.contains("clashes"), "{}", e.message);
        // The control: a free Lua name builds, and scripts see it.
        let rt = Runtime::builder()
            .workspace(ws.path())
            .flow(Named("count_words"))
            .build()
            .unwrap();
        let kind: String = rt
            .function("function() return type(sluice.count_words) end")
            .unwrap()
            .call(())
            .unwrap();
        assert_eq!(kind, "function");
    }

    /// An ask that must never ride on an earlier yes is asked every time,
    /// and the approver is told so.
    #[test]
    fn an_approver_is_told_when_its_answer_counts_once_and_it_is_asked_again() {
        let ws = tempfile::tempdir().unwrap();
        let picky = Arc::new(Picky::default());
        let rt = Runtime::builder()
            .workspace(ws.path())
            .approver(picky.clone())
            .build()
            .unwrap();
        let wider = json!({"command": "echo hi", "sandboxPermissions": "danger-full-access",
                           "justification": "it needs the whole disk"});
        for _ in 0..2 {
            let out = block_on(rt.call("bash", wider.clone())).unwrap();
            assert_eq!(out["stdout"], "hi\n");
        }
        let shown = picky.shown.lock().unwrap().clone();
        assert_eq!(shown.len(), 2, "asked each time: {shown:?}");
        for ask in &shown {
            assert!(ask.once_only);
            assert_eq!(ask.capability, "proc:spawn:echo hi");
            assert_eq!(ask.by, "sandboxPermissions");
            assert_eq!(
                ask.justification.as_deref(),
                Some("it needs the whole disk")
            );
        }
    }

    #[test]
    fn an_embedded_run_is_named_in_the_record() {
        let ws = tempfile::tempdir().unwrap();
        let db = ws.path().join("audit.db");
        std::fs::write(ws.path().join("a.txt"), "x").unwrap();
        let rt = Runtime::builder()
            .workspace(ws.path())
            .audit(&db)
            .name("nightly-triage")
            .build()
            .unwrap();
        block_on(rt.call("read", json!({"path": "a.txt"}))).unwrap();
        rt.end("ok", None).unwrap();
        let id = rt.run_id().to_string();
        drop(rt);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["audit", "list", "--audit"])
            .arg(&db)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let row = text
            .lines()
            .find(|l| l.starts_with(&id[..8]) || l.contains(&id))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(row.contains("nightly-triage"), "{text}");
    }
}

/// `Runtime::call` takes the flow's name as scripts spell it too.
#[test]
fn a_rust_caller_names_http_post_either_way() {
    let ws = tempfile::tempdir().unwrap();
    let rt = Runtime::builder().workspace(ws.path()).build().unwrap();
    for name in ["http_post", "http-post"] {
        let e = block_on(rt.call(
            name,
            json!({"url": "https://example.org/hook", "body": "{}"}),
        ))
        .unwrap_err();
        // Reached and planned: its net:post asks, and nobody answers.
        assert_eq!(
            e.code,
            ErrorCode::PermissionRequired,
            "{name}: {}",
            e.message
        );
        assert_eq!(e.details["capability"], "net:post:example.org");
    }
    let e = block_on(rt.call("http_pots", json!({}))).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(e.message.contains("http-post"), "{}", e.message);
}

/// A Rust caller passes a credential as the reference a script's
/// `sluice.credential` makes; the secret comes from the credentials file
/// and is cut from what comes back.
#[test]
fn a_rust_caller_sends_a_credential_by_reference() {
    use std::os::unix::fs::PermissionsExt;
    let ws = tempfile::tempdir().unwrap();
    let file = ws.path().join("credentials");
    std::fs::write(&file, "gh = s3cr3t-from-the-file\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let input = json!({"command": "printf %s \"$T\" | wc -c; printf %s \"$T\"",
                       "env": {"T": {"credential": "gh"}}});
    let rt = Runtime::builder()
        .workspace(ws.path())
        .credentials(&file)
        .build()
        .unwrap();
    let e = block_on(rt.call("bash", input.clone())).unwrap_err();
    assert_eq!(e.code, ErrorCode::PermissionRequired, "{}", e.message);
    assert_eq!(e.details["capability"], "cred:use:gh@command");
    let rt = Runtime::builder()
        .workspace(ws.path())
        .credentials(&file)
        .approve("cred:use:gh@command")
        .build()
        .unwrap();
    let out = block_on(rt.call("bash", input)).unwrap();
    assert_eq!(out["stdout"], "20\n[redacted]", "{out}");
}

/// An embedded run is recorded where `sluice run` records: the
/// workspace's `.sluice/audit.db`, its folder kept out of git; `no_audit`
/// records nothing, and neither does a replay given no record.
#[test]
fn an_embedded_run_records_in_the_workspace_unless_told_not_to() {
    use sluice::record::{Location, Mode, Record};
    let ws = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::write(root.join("a.txt"), "one").unwrap();
    let rt = Runtime::builder().workspace(&root).build().unwrap();
    let db = root.join(".sluice/audit.db");
    assert_eq!(rt.recorded_in(), Some(&Location::Sqlite(db.clone())));
    block_on(rt.call("read", json!({"path": "a.txt"}))).unwrap();
    rt.end("ok", None).unwrap();
    let id = rt.run_id().to_string();
    drop(rt);
    assert_eq!(
        std::fs::read_to_string(root.join(".sluice/.gitignore")).unwrap(),
        "# sluice's audit record: never commit it.\n*\n"
    );
    let conn = sluice::record::open_existing(&db).unwrap();
    let record = Record::load(&conn, &id).unwrap();
    assert_eq!((record.run.status.as_str(), record.len()), ("ok", 1));

    // A replay of it, given no record, records nothing more.
    let replay = Runtime::builder()
        .workspace(&root)
        .replay(record, Mode::Replay)
        .build()
        .unwrap();
    assert_eq!(replay.recorded_in(), None);
    block_on(replay.call("read", json!({"path": "a.txt"}))).unwrap();
    drop(replay);
    let runs: i64 = conn
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, 1);

    let bare = tempfile::tempdir().unwrap();
    std::fs::write(bare.path().join("a.txt"), "one").unwrap();
    let rt = Runtime::builder()
        .workspace(bare.path())
        .no_audit()
        .build()
        .unwrap();
    assert_eq!(rt.recorded_in(), None);
    block_on(rt.call("read", json!({"path": "a.txt"}))).unwrap();
    rt.end("ok", None).unwrap();
    assert!(!bare.path().join(".sluice").exists());
}

/// `examples/embed.rs`, the guide's embedding example, run as `cargo run
/// --example embed` runs it (its `main` calls this `run`).
#[path = "../examples/embed.rs"]
#[allow(dead_code)]
mod embed;

#[test]
fn the_embedding_example_runs_and_its_record_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(dir.path()).unwrap();
    let done = embed::run(&dir).unwrap();
    assert_eq!(done.summary, "README.md: 3 lines");
    assert_eq!(done.refused, ErrorCode::PermissionRequired);
    let project = dir.join("project");
    assert_eq!(
        done.record,
        project.join(".sluice/audit.db").display().to_string()
    );
    let verify = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["audit", "verify", "--workspace"])
        .arg(&project)
        .env_remove("SLUICE_AUDIT")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verify.stdout);
    assert_eq!(
        said,
        format!("{}  intact (4 calls, sealed)\n", done.run_id),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(verify.status.success());
}

/// Each Rust block of the guide's embedding page (`file=embed.rs`) is the
/// example's code, line for line, so the page shows what `cargo test`
/// builds and runs.
#[test]
fn the_guides_rust_blocks_are_the_examples_code() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = std::fs::read_to_string(root.join("examples/embed.rs")).unwrap();
    let lines: Vec<&str> = example.lines().map(str::trim).collect();
    let blocks: Vec<String> = fenced_blocks(&guide_page("embedding.md"))
        .into_iter()
        .filter(|b| b.info.starts_with("rust"))
        .map(|b| {
            assert_eq!(file_name(&b.info), Some("embed.rs"), "{}", b.text);
            b.text
        })
        .collect();
    assert!(blocks.len() >= 4, "found {} Rust blocks", blocks.len());
    for block in &blocks {
        let block: Vec<&str> = block.lines().map(str::trim).collect();
        let found = lines.windows(block.len()).any(|w| w == block.as_slice());
        assert!(found, "not in examples/embed.rs:\n{}", block.join("\n"));
    }
}

/// The page's `cargo run --example embed` (the example binary `cargo test`
/// built, given a folder), then the page's commands on the record it
/// made, with that folder's project for `/srv/app/project`: listed, shown,
/// verified, and a replay that ends short, as the page says.
#[test]
fn the_guides_embedding_commands_run_as_the_page_says() {
    let run = named_block("embedding.md", "embed-run.sh");
    assert_eq!(run.trim(), "cargo run --example embed");
    let example = common::sluice_bin()
        .parent()
        .unwrap()
        .join("examples/embed");
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(&example)
        .arg(dir.path())
        .env_remove("SLUICE_AUDIT")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (cargo test builds it)", example.display()));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}");
    assert!(
        said.starts_with(
            "the workflow wrote: README.md: 3 lines\na write of README.md: permission_required\n"
        ),
        "{said}"
    );
    let project = dir.path().join("project");
    let record = named_block("embedding.md", "embed-record.sh");
    let out = run_shell_block(
        &record,
        &[("/srv/app/project", project.to_str().unwrap())],
        dir.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    for shown in [
        "summarize.lua",
        "chain        sealed, verified intact",
        "intact (4 calls, sealed)",
    ] {
        assert!(stdout.contains(shown), "no {shown:?} in:\n{stdout}");
    }
    assert!(
        stderr.contains("the script ended after 2 of the 4 calls"),
        "{stderr}"
    );
}

/// The page's dependency line for sluice turns the default features off
/// and names only features Cargo.toml declares.
#[test]
fn the_guides_dependency_table_names_features_sluice_has() {
    let deps = named_block("embedding.md", "Cargo.toml");
    let ours = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let line = deps
        .lines()
        .find(|l| l.starts_with("sluice = {"))
        .expect("the page's table names sluice");
    assert!(line.contains("default-features = false"), "{line}");
    let listed = line.split("features = [").nth(1).expect("features listed");
    let listed = &listed[..listed.find(']').unwrap()];
    let features = ours
        .split("\n[features]\n")
        .nth(1)
        .expect("Cargo.toml has [features]");
    let features = &features[..features.find("\n[").unwrap_or(features.len())];
    for name in listed.split(',').map(|f| f.trim().trim_matches('"')) {
        assert!(
            features
                .lines()
                .any(|l| l.starts_with(&format!("{name} = "))),
            "Cargo.toml declares no feature {name}"
        );
    }
}
