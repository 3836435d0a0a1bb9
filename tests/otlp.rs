//! OpenTelemetry export against a real receiver, Arize Phoenix (started by
//! the test, tests/common/phoenix.rs), queried through its REST API for
//! what arrived.
//!
//! The run is agent-like and real: a model call to the scripted
//! OpenAI-compatible server (tests/common/model_server.rs) whose reply
//! leaks a credential the run was given, a write, a read the default policy
//! denies, two reads in tasks (`sluice.map`), and `sluice.explore`, whose
//! sub-agent's model and tool calls are inner calls of the explore call.
//! `sluice audit export --otlp` and `sluice run --otlp` (live) must each
//! deliver it as one trace whose span tree, names and attributes are what
//! the record says, with no content unless `--otlp-content`, and the
//! credential never; a receiver that is not there fails neither the run
//! nor the record, and an export to it exits non-zero naming it. The
//! export and the live run are checked on both stores.

mod common;
#[path = "common/model_server.rs"]
mod model_server;
#[path = "common/phoenix.rs"]
mod phoenix;

use common::{sluice_in, sluice_run, workspace, Workspace};
use model_server::{openai_text, openai_tools, tool_results, Answer, ModelServer, Request};
use phoenix::Phoenix;
use serde_json::{json, Value};
use sha2::Digest;
use std::collections::HashMap;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// The credential the run is given (the provider's key), which the model's
/// reply and the script's own message carry: the record cuts it, so no
/// receiver may ever see it.
const SECRET: &str = "sk-otlp-7f3a9c41d2e8b605";

/// Calls the run makes: model, write, the denied read, two reads in
/// tasks, explore, and explore's model, read and model.
const CALLS: usize = 9;
/// Tasks: the main chunk and `sluice.map`'s two.
const TASKS: usize = 3;

/// The agent-like run; with `pause`, it waits that long after its last
/// call (a live export sends the calls meanwhile).
fn script(pause_ms: u64) -> String {
    format!(
        r#"local SECRET = "{SECRET}"
local r = assert(sluice.model{{provider = "local", model = "m1", system = "be brief",
  messages = {{{{role = "user", content = "note the key " .. SECRET}}}}}})
assert(sluice.write{{path = "notes.txt", content = r.text}})
local denied, err = sluice.read{{path = "/etc/shadow"}}
assert(denied == nil and err.code == "permission_denied")
sluice.map({{"notes.txt", "calc.py"}}, function(p) return assert(sluice.read{{path = p}}) end)
assert(sluice.explore{{prompt = "Where is mean defined?"}})
sluice.sleep({pause_ms})
print("done")
"#
    )
}

/// The model: `m1` answers leaking the key; explore's `explorer-1` reads
/// calc.py, then answers.
fn model(req: &Request) -> Answer {
    if req.body["model"] == "m1" {
        return Answer::json(openai_text(&format!("noted: the key is {SECRET}")));
    }
    match tool_results(req).len() {
        0 => Answer::json(openai_tools(vec![(
            "c1",
            "read",
            json!({"path": "calc.py"}),
        )])),
        _ => Answer::json(openai_text(
            "mean is defined in calc.py.\n{\"findings\": []}",
        )),
    }
}

/// A workspace with calc.py, and the model server.
fn setup() -> (Workspace, ModelServer) {
    let ws = workspace();
    std::fs::write(
        ws.file("calc.py"),
        "def mean(values):\n    return sum(values) / len(values)\n",
    )
    .unwrap();
    (ws, ModelServer::respond(model))
}

/// `sluice run` of [`script`] with `flags`, sending to Phoenix project
/// `project` (its `x-project-name` header, given as OpenTelemetry's
/// exporters take headers).
fn run_command(
    ws: &Workspace,
    server: &ModelServer,
    pause_ms: u64,
    flags: &[&str],
    project: &str,
) -> std::process::Command {
    let path = common::script_file(ws.path(), &script(pause_ms));
    let mut all = model_server::local_openai_flags(server);
    all.extend(["--explore-model".into(), "local/explorer-1".into()]);
    all.extend(flags.iter().map(|f| f.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let mut cmd = sluice_run(ws.path(), &path, &all, &[]);
    cmd.env("SLUICE_CREDENTIAL_LOCAL", SECRET).env(
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        format!("x-project-name={project}"),
    );
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A project name of this test's own.
fn project(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{name}-{}-{nanos}", std::process::id())
}

/// `sluice ARGS --workspace WS` with `env` added to the store's.
fn sluice_with_env(ws: &Workspace, args: &[&str], env: &[(&str, &str)]) -> common::Run {
    std::process::Command::new(common::sluice_bin())
        .args(args)
        .arg("--workspace")
        .arg(ws.path())
        .envs(common::stores::current_env())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into()
}

/// The trace id sluice derives from run `id`: SHA-256's first 16 bytes.
fn trace_of(id: &str) -> String {
    let digest = sha2::Sha256::digest(id.as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The record of the workspace's last run, as `sluice audit show --json`.
fn recorded(ws: &Workspace) -> Value {
    let show = sluice_in(ws.path(), &["audit", "show", "last", "--json"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    serde_json::from_str(&show.stdout).unwrap()
}

/// A span's attributes, each the value Phoenix holds (the one field of
/// OTLP's AnyValue that is set).
fn attributes(span: &Value) -> HashMap<String, Value> {
    let mut found = HashMap::new();
    for kv in span["attributes"].as_array().into_iter().flatten() {
        let set = kv["value"]
            .as_object()
            .and_then(|v| v.values().find(|x| !x.is_null()).cloned())
            .unwrap_or(Value::Null);
        found.insert(kv["key"].as_str().unwrap().to_string(), set);
    }
    found
}

/// What may only travel with `--otlp-content`: sluice's and the GenAI
/// conventions' names. (Phoenix derives `output.value` from
/// `gen_ai.response.model` too: what no content check may key on, so
/// [`check_no_content`] also looks for the run's texts anywhere.)
const CONTENT_KEYS: [&str; 8] = [
    "sluice.input",
    "sluice.output",
    "sluice.error",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
];

/// Checks that `spans` are run `run`'s trace as its record says: one
/// trace, the run's span at the root, a span per task under its parent,
/// each call under its task (explore's inner calls under the explore
/// call), named and attributed from the record.
fn check_tree(spans: &[Value], run: &Value) {
    let calls = run["calls"].as_array().unwrap();
    assert_eq!(calls.len(), CALLS, "{run}");
    assert_eq!(spans.len(), CALLS + TASKS + 1);
    let trace = spans[0]["trace_id"].as_str().unwrap();
    assert!(spans.iter().all(|s| s["trace_id"] == trace), "one trace");
    check_run_and_tasks(spans, run);
    for c in calls {
        let s = span_of_call(spans, &c["n"]);
        let task = c["task"].as_str().unwrap();
        let parent = match task.split_once(".c") {
            Some((outer, seq)) => {
                let seq: i64 = seq.parse().unwrap();
                let maker = calls
                    .iter()
                    .find(|m| m["task"] == outer && m["seq"] == seq)
                    .unwrap();
                assert_eq!(
                    maker["flow"], "explore",
                    "only explore makes inner calls here"
                );
                span_of_call(spans, &maker["n"])
            }
            None => named(spans, &format!("task {task}")),
        };
        assert_eq!(s["parent_span_id"], parent["span_id"], "call #{}", c["n"]);
        let a = attributes(s);
        for (key, want) in [
            ("sluice.task", &c["task"]),
            ("sluice.call.seq", &c["seq"]),
            ("sluice.tier", &c["tier"]),
            ("sluice.outcome", &c["outcome"]),
        ] {
            assert_eq!(a.get(key), Some(want), "{key} of call #{}", c["n"]);
        }
        check_call(s, &a, c);
    }
    // The explore call made its sub-agent's three calls.
    let explore = calls.iter().find(|c| c["flow"] == "explore").unwrap();
    let explore = span_of_call(spans, &explore["n"]);
    assert_eq!(explore["name"], "execute_tool explore");
    let under = spans
        .iter()
        .filter(|s| s["parent_span_id"] == explore["span_id"])
        .count();
    assert_eq!(under, 3);
}

/// The run's span at the root, the main chunk's task under it and the two
/// tasks `sluice.map` started under that.
fn check_run_and_tasks(spans: &[Value], run: &Value) {
    let script = run["run"]["script"].as_str().unwrap();
    let root = named(
        spans,
        &format!("run {}", script.rsplit('/').next().unwrap()),
    );
    assert_eq!(root["parent_span_id"], Value::Null);
    let a = attributes(root);
    assert_eq!(a["sluice.run.id"], run["run"]["id"]);
    assert_eq!(a["sluice.script"], script);
    assert_eq!(a["sluice.run.status"], "ok");
    assert_eq!(a["sluice.run.calls"], json!(CALLS));
    let main = named(spans, "task 0");
    assert_eq!(main["parent_span_id"], root["span_id"]);
    for task in ["task 0.1", "task 0.2"] {
        assert_eq!(
            named(spans, task)["parent_span_id"],
            main["span_id"],
            "{task}"
        );
    }
}

/// The one span named `name`.
fn named<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found: Vec<&Value> = spans.iter().filter(|s| s["name"] == name).collect();
    assert_eq!(found.len(), 1, "spans named {name:?}");
    found[0]
}

/// One call's name, GenAI attributes and status, as its record says.
fn check_call(s: &Value, a: &HashMap<String, Value>, c: &Value) {
    let flow = c["flow"].as_str().unwrap();
    if flow == "model" {
        let (input, output) = (&c["input"], &c["output"]);
        assert_eq!(
            s["name"],
            format!("chat {}", input["model"].as_str().unwrap())
        );
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.system"], "local");
        assert_eq!(a["gen_ai.request.model"], input["model"]);
        assert_eq!(a["gen_ai.response.model"], output["model"]);
        assert_eq!(a["gen_ai.response.model"], model_server::REPLY_MODEL);
        let usage = &output["usage"];
        assert_eq!(a["gen_ai.usage.input_tokens"], usage["inputTokens"]);
        assert_eq!(a["gen_ai.usage.output_tokens"], usage["outputTokens"]);
        assert_eq!(
            a["gen_ai.usage.cache_read.input_tokens"],
            usage["cachedTokens"]
        );
        assert_eq!(usage["inputTokens"], json!(model_server::INPUT_TOKENS));
    } else {
        assert_eq!(s["name"], format!("execute_tool {flow}"));
        assert_eq!(a["gen_ai.operation.name"], "execute_tool");
        assert_eq!(a["gen_ai.tool.name"], flow);
    }
    if c["outcome"] == "error" {
        let code = &c["error"]["code"];
        assert_eq!(a["sluice.error.code"], *code);
        assert_eq!(s["status"]["code"], 2, "{s}");
        assert!(
            a["sluice.decision"]
                .as_str()
                .unwrap()
                .starts_with("deny by "),
            "{a:?}"
        );
    } else {
        assert_ne!(s["status"]["code"], 2, "{s}");
    }
}

/// The span of call `#n`.
fn span_of_call<'a>(spans: &'a [Value], n: &Value) -> &'a Value {
    spans
        .iter()
        .find(|s| attributes(s).get("sluice.call.n") == Some(n))
        .unwrap_or_else(|| panic!("no span of call #{n}"))
}

/// No attribute of `spans` carries content, and no text of the run's
/// inputs or outputs is anywhere in them.
fn check_no_content(spans: &[Value]) {
    for s in spans {
        let a = attributes(s);
        for key in CONTENT_KEYS {
            assert!(!a.contains_key(key), "{key} without --otlp-content: {s}");
        }
    }
    let all = serde_json::to_string(spans).unwrap();
    for text in [
        "note the key",
        "noted: the key",
        "def mean",
        "be brief",
        "[redacted]",
        SECRET,
    ] {
        assert!(
            !all.contains(text),
            "{text:?} reached the receiver without --otlp-content"
        );
    }
}

/// The spans of `project` once all have arrived.
fn arrived(project: &str) -> Vec<Value> {
    Phoenix::shared().wait_for(project, CALLS + TASKS + 1, Duration::from_secs(60))
}

both_stores! {
    fn an_exported_agent_run_is_one_trace_with_the_records_tree_and_tokens_and_no_content(store) {
        let phoenix = Phoenix::shared();
        let (ws, server) = setup();
        let out = run_command(&ws, &server, 0, &[], "unused").output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let run = recorded(&ws);
        let project = project("export");
        let export = sluice_with_env(
            &ws,
            &["audit", "export", "last", "--otlp", &phoenix.url()],
            &[("OTEL_EXPORTER_OTLP_TRACES_HEADERS", &format!("x-project-name={project}"))],
        );
        assert_eq!(export.code, 0, "{}", export.stderr);
        let trace = &trace_of(run["run"]["id"].as_str().unwrap());
        assert_eq!(
            export.stdout,
            format!(
                "run {}: {} spans sent to {}/v1/traces as trace {trace}\n",
                run["run"]["id"].as_str().unwrap(),
                CALLS + TASKS + 1,
                phoenix.url()
            )
        );
        let spans = arrived(&project);
        check_tree(&spans, &run);
        check_no_content(&spans);
        assert_eq!(phoenix.traces(&project), [trace.to_string()]);
    }

    fn a_live_run_sends_each_call_once_settled_and_the_tree_at_its_end(store) {
        let phoenix = Phoenix::shared();
        let (ws, server) = setup();
        let project = project("live");
        let mut child = run_command(&ws, &server, 10_000, &["--otlp", &phoenix.url()], &project)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Every call's span arrives while the run still sleeps after its
        // last call; the tasks' and the run's only once it has ended.
        let started = Instant::now();
        let mut seen = Vec::new();
        while started.elapsed() < Duration::from_secs(9) {
            let (status, _) = phoenix.get(&format!("/v1/projects/{project}")).unwrap();
            seen = if status == 200 { phoenix.spans(&project) } else { Vec::new() };
            if seen.len() >= CALLS {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(child.try_wait().unwrap(), None, "the run was still sleeping");
        let names: Vec<&str> = seen.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(names.len(), CALLS, "{names:?}");
        assert!(
            names.iter().all(|n| n.starts_with("chat ") || n.starts_with("execute_tool ")),
            "{names:?}"
        );
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        assert!(out.stderr.is_empty(), "{}", text(&out));
        let spans = arrived(&project);
        check_tree(&spans, &recorded(&ws));
        check_no_content(&spans);
        assert_eq!(phoenix.traces(&project).len(), 1);
    }
}

#[test]
fn with_otlp_content_the_records_text_arrives_and_the_credential_never_does() {
    let phoenix = Phoenix::shared();
    let (ws, server) = setup();
    let project = project("content");
    let flags = ["--otlp", &phoenix.url(), "--otlp-content"];
    let out = run_command(&ws, &server, 0, &flags, &project)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let run = recorded(&ws);
    let spans = arrived(&project);
    check_tree(&spans, &run);
    let all = serde_json::to_string(&spans).unwrap();
    assert!(!all.contains(SECRET), "the credential reached the receiver");
    let calls = run["calls"].as_array().unwrap();
    let first_model = &calls[0];
    assert_eq!(first_model["flow"], "model");
    let s = span_of_call(&spans, &first_model["n"]);
    let a = attributes(s);
    // The record's text, as recorded: the key already cut there.
    assert_eq!(a["sluice.input"], first_model["input"].to_string());
    assert_eq!(a["sluice.output"], first_model["output"].to_string());
    assert!(a["sluice.input"]
        .as_str()
        .unwrap()
        .contains("note the key [redacted]"));
    let messages: Value =
        serde_json::from_str(a["gen_ai.input.messages"].as_str().unwrap()).unwrap();
    assert_eq!(
        messages,
        json!([{"role": "user", "parts": [{"type": "text", "content": "note the key [redacted]"}]}])
    );
    let answer: Value =
        serde_json::from_str(a["gen_ai.output.messages"].as_str().unwrap()).unwrap();
    assert_eq!(
        answer[0]["parts"][0]["content"],
        "noted: the key is [redacted]"
    );
    assert_eq!(
        a["gen_ai.system_instructions"],
        r#"[{"content":"be brief","type":"text"}]"#
    );
    // A tool call: its arguments and result; the denied one: its error.
    let denied = calls.iter().find(|c| c["outcome"] == "error").unwrap();
    let d = span_of_call(&spans, &denied["n"]);
    let da = attributes(d);
    assert_eq!(da["sluice.error"], denied["error"].to_string());
    assert_eq!(
        da["gen_ai.tool.call.arguments"],
        r#"{"path":"/etc/shadow"}"#
    );
    let message = denied["error"]["message"].as_str().unwrap();
    assert_eq!(
        d["status"]["message"],
        format!("permission_denied: {message}")
    );
}

#[test]
fn a_run_of_more_calls_than_a_request_carries_arrives_whole_in_its_one_trace() {
    let phoenix = Phoenix::shared();
    let ws = workspace();
    std::fs::write(ws.file("a.txt"), "a\n").unwrap();
    // 1,100 calls: three requests of 512 spans at most, and more spans
    // than one page of Phoenix's answer.
    let out = common::run_lua(
        ws.path(),
        "for i = 1, 1100 do assert(sluice.read{path = \"a.txt\"}) end",
        &[],
    )
    .ok();
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let project = project("batches");
    let export = sluice_with_env(
        &ws,
        &["audit", "export", "last", "--otlp", &phoenix.url()],
        &[(
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            &format!("x-project-name={project}"),
        )],
    );
    assert_eq!(export.code, 0, "{}", export.stderr);
    assert!(
        export.stdout.contains(": 1102 spans sent to "),
        "{}",
        export.stdout
    );
    let spans = phoenix.wait_for(&project, 1102, Duration::from_secs(60));
    let mut ns: Vec<i64> = spans
        .iter()
        .filter_map(|s| attributes(s).get("sluice.call.n").and_then(Value::as_i64))
        .collect();
    ns.sort_unstable();
    assert_eq!(ns, (1..=1100).collect::<Vec<i64>>());
    assert_eq!(phoenix.traces(&project).len(), 1);
}

#[test]
fn an_unreachable_receiver_fails_neither_the_run_nor_its_record_and_is_said_once() {
    let (ws, server) = setup();
    let url = format!("http://127.0.0.1:{}", closed_port());
    let started = Instant::now();
    let out = run_command(&ws, &server, 2500, &["--otlp", &url], "none")
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let run = recorded(&ws);
    let id = run["run"]["id"].as_str().unwrap();
    // One line, from the first failed request on; nothing more was tried.
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let line = stderr.trim_end();
    assert!(
        line.starts_with(&format!(
            "sluice: OpenTelemetry export to {url}/v1/traces failed: cannot connect (Connection refused"
        )),
        "{stderr}"
    );
    assert!(
        line.ends_with(&format!(
            "; the run goes on and is recorded as usual; `sluice audit export {id} --otlp {url}/v1/traces` sends it again"
        )),
        "{stderr}"
    );
    // The run took its pause and its calls, not a retry's waits.
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_eq!(run["run"]["status"], "ok");
    assert_eq!(run["calls"].as_array().unwrap().len(), CALLS);
    let verify = sluice_in(ws.path(), &["audit", "verify", "last"]);
    assert_eq!(verify.code, 0, "{}", verify.stderr);
}

#[test]
fn audit_export_to_an_unreachable_receiver_exits_non_zero_naming_it_and_bad_flags_are_refused() {
    let (ws, server) = setup();
    let out = run_command(&ws, &server, 0, &[], "none").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let url = format!("http://127.0.0.1:{}", closed_port());
    let export = sluice_in(ws.path(), &["audit", "export", "last", "--otlp", &url]);
    assert_eq!(export.code, 1, "{}", export.stderr);
    assert!(export.stdout.is_empty());
    assert!(
        export.stderr.starts_with(&format!(
            "sluice: OpenTelemetry export to {url}/v1/traces failed: cannot connect ("
        )) && export.stderr.contains("is a receiver listening there?"),
        "{}",
        export.stderr
    );
    for (args, says) in [
        (
            vec!["--otlp", url.as_str(), "--format", "csv"],
            "cannot be used with",
        ),
        (
            vec!["--otlp", url.as_str(), "--output", "x.jsonl"],
            "cannot be used with",
        ),
        (
            vec!["--otlp", url.as_str(), "--json"],
            "cannot be used with",
        ),
        (vec!["--otlp-content"], "--otlp <URL>"),
        (
            vec!["--otlp", "grpc://127.0.0.1:4317"],
            "OTLP/HTTP needs an http:// or https:// URL",
        ),
    ] {
        let mut all = vec!["audit", "export", "last"];
        all.extend(args.iter().copied());
        let run = sluice_in(ws.path(), &all);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
    let path = common::script_file(ws.path(), "print(1)");
    let no_record = sluice_run(ws.path(), &path, &["--otlp", &url, "--no-audit"], &[])
        .output()
        .unwrap();
    assert_eq!(no_record.status.code(), Some(2), "{}", text(&no_record));
    assert!(String::from_utf8_lossy(&no_record.stderr).contains("cannot be used with"));
    // A URL that is no OTLP/HTTP one stops the run before it starts.
    let runs_before = recorded(&ws)["run"]["id"].clone();
    let wrong = sluice_run(ws.path(), &path, &["--otlp", "ftp://127.0.0.1/x"], &[])
        .output()
        .unwrap();
    assert_eq!(wrong.status.code(), Some(2), "{}", text(&wrong));
    assert!(
        String::from_utf8_lossy(&wrong.stderr)
            .contains("--otlp \"ftp://127.0.0.1/x\": OTLP/HTTP needs"),
        "{}",
        text(&wrong)
    );
    assert_eq!(
        recorded(&ws)["run"]["id"],
        runs_before,
        "no run was recorded"
    );
}

/// A port on 127.0.0.1 nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}
