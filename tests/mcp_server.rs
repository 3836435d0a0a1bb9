//! `sluice mcp` driven by a real MCP client: the official Python `mcp`
//! package (2.x, from PyPI; `scripts/test` installs it into
//! target/peers/mcp), over stdio and streamable HTTP, in the 2026-07-28
//! stateless form and the `initialize` form (2025-11-25, 2025-06-18).
//! `tests/mcp/drive.py` runs one scenario and prints what it saw as JSON.

mod common;

use common::mcp::{self, recorded_calls, tools, Http, Server};
use common::{sluice_in, workspace};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::Path;

/// The protocol forms a client may speak, and what each negotiates.
const FORMS: [(&str, &str); 3] = [
    ("2026", "2026-07-28"),
    ("2025-11-25", "2025-11-25"),
    ("2025-06-18", "2025-06-18"),
];

/// The client's name and version, as the record names it.
const CLIENT: &str = "sluice-tests 1.2.3";

/// One scenario of `tests/mcp/drive.py`, as JSON.
fn drive(scenario: &str, form: &str, server: Server, opts: &[&str]) -> Value {
    mcp::driver("drive.py", scenario, form, server, opts)
}

fn call_spec(tool: &str, input: Value) -> String {
    json!({"tool": tool, "input": input}).to_string()
}

#[test]
fn tools_list_is_one_tool_per_flow_in_manifest_order_with_hints_from_the_tier() {
    let ws = workspace();
    for (form, protocol) in FORMS {
        let seen = drive("list", form, Server::Stdio(ws.path(), &[]), &[]);
        assert_eq!(seen["protocol"], protocol, "{form}");
        assert_eq!(
            seen["tools"],
            json!([
                "read",
                "write",
                "edit",
                "apply_patch",
                "ls",
                "glob",
                "grep",
                "bash",
                "shell_command",
                "fetch",
                "http-post",
                "webfetch",
                "websearch",
                "model",
                "update_plan",
                "job_read",
                "job_wait",
                "job_kill"
            ]),
            "{form}"
        );
        let hints = &seen["annotations"];
        assert_eq!(
            hints["read"],
            json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false})
        );
        assert_eq!(
            hints["write"],
            json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false})
        );
        assert_eq!(
            hints["bash"],
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true})
        );
        assert_eq!(hints["fetch"]["readOnlyHint"], true);
        assert_eq!(hints["fetch"]["openWorldHint"], true);
        assert_eq!(seen["outputSchema"]["read"], true);
        assert_eq!(seen["outputSchema"]["job_read"], false);
    }
}

#[test]
fn a_policy_that_denies_every_call_of_a_flow_keeps_it_off_the_list_and_flows_narrows_it() {
    let ws = workspace();
    let seen = drive(
        "list",
        "2026",
        Server::Stdio(ws.path(), &["--policy", "readonly"]),
        &[],
    );
    // update_plan asks for nothing, so no policy refuses it.
    assert_eq!(
        seen["tools"],
        json!(["read", "ls", "glob", "grep", "update_plan"])
    );
    let seen = drive(
        "list",
        "2025-11-25",
        Server::Stdio(ws.path(), &["--flows", "read,grep,http_post"]),
        &[],
    );
    assert_eq!(seen["tools"], json!(["read", "grep", "http-post"]));
    // Asked for by --flows, still refused by the policy: not served.
    let seen = drive(
        "list",
        "2026",
        Server::Stdio(
            ws.path(),
            &["--policy", "readonly", "--flows", "read,write"],
        ),
        &[],
    );
    assert_eq!(seen["tools"], json!(["read"]));
    let bad = sluice_in(ws.path(), &["mcp", "--flows", "read,cat"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr
            .contains("--flows names \"cat\", which is no flow; the flows are read, write,"),
        "{}",
        bad.stderr
    );
}

/// The driver's `calls` scenario: a sealed, a compensable and an
/// irreversible call of each kind, as the client received them.
fn assert_calls(seen: &Value, ws: &Path, form: &str) {
    let r = |k: &str| &seen[k];
    assert_eq!(
        r("write")["structured"],
        json!({"bytesWritten": 8, "created": true}),
        "{form}"
    );
    assert_eq!(r("read")["structured"]["content"], "one\ntwo", "{form}");
    assert_eq!(r("read")["text"], "one\ntwo", "{form}");
    assert_eq!(r("edit")["structured"]["replacements"], 1, "{form}");
    assert_eq!(r("grep")["text"], "notes.md:1:one", "{form}");
    assert_eq!(r("glob")["text"], "notes.md", "{form}");
    let bash = r("bash");
    assert_eq!(bash["isError"], false, "{form}: a non-zero exit is a value");
    assert_eq!(bash["structured"]["exitCode"], 3);
    assert_eq!(bash["structured"]["stdout"], "one\n2\n");
    assert_eq!(bash["structured"]["stderr"], "err\n");
    assert_eq!(
        bash["text"],
        "exit code 3\n--- stdout ---\none\n2\n\n--- stderr ---\nerr\n"
    );
    assert_eq!(r("shell_command")["structured"]["exitCode"], 0);
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.md")).unwrap(),
        "one\n2\n"
    );
}

both_stores! {
    fn each_flow_kind_runs_through_the_door_over_stdio_in_every_protocol_form(store) {
        for (form, protocol) in FORMS {
            let ws = workspace();
            let seen = drive("calls", form, Server::Stdio(ws.path(), &[]), &[]);
            assert_eq!(seen["protocol"], protocol);
            assert_calls(&seen, ws.path(), form);
            let calls = recorded_calls(ws.path());
            let flows: Vec<&str> = calls.iter().map(|c| c["flow"].as_str().unwrap()).collect();
            assert_eq!(
                flows,
                [
                    "write",
                    "read",
                    "edit",
                    "grep",
                    "glob",
                    "ls",
                    "bash",
                    "shell_command"
                ]
            );
            assert!(calls.iter().all(|c| c["client"] == CLIENT), "{calls:?}");
            sluice_in(ws.path(), &["audit", "verify"]).ok();
        }
    }
}

#[test]
fn each_flow_kind_runs_through_the_door_over_http_in_the_stateless_and_initialize_forms() {
    for (form, _) in FORMS {
        let ws = workspace();
        let server = Http::start(ws.path(), &[], None);
        let seen = drive("calls", form, Server::Http(&server), &[]);
        assert_calls(&seen, ws.path(), form);
        drop(server);
        let calls = recorded_calls(ws.path());
        assert_eq!(calls.len(), 8, "{calls:?}");
        assert!(calls.iter().all(|c| c["client"] == CLIENT));
    }
}

#[test]
fn a_denied_call_is_an_error_result_naming_the_code_the_capability_and_the_rule() {
    let ws = workspace();
    std::fs::write(ws.file(".env"), "KEY=1\n").unwrap();
    for (form, _) in FORMS {
        let seen = drive(
            "call",
            form,
            Server::Stdio(ws.path(), &[]),
            &["--arg", &call_spec("read", json!({"path": ".env"}))],
        );
        let r = &seen["results"][0];
        assert_eq!(r["isError"], true);
        assert_eq!(r["structured"], Value::Null);
        let text = r["text"].as_str().unwrap();
        let cap = format!("fs:read:{}/.env", ws.path().display());
        assert!(
            text.starts_with(&format!("permission_denied: {cap} is denied")),
            "{text}"
        );
        assert!(text.contains("policies/default.lua"), "{text}");
    }
}

#[test]
fn an_ask_goes_to_the_person_behind_the_client_yes_runs_and_no_refuses() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    let outside = std::fs::canonicalize(outside.path()).unwrap();
    let http = Http::start(ws.path(), &[], None);
    for (form, _) in FORMS {
        for (via, server) in [
            ("stdio", Server::Stdio(ws.path(), &[])),
            ("http", Server::Http(&http)),
        ] {
            for (answer, written) in [("accept", true), ("decline", false)] {
                let file = outside.join(format!("{via}-{form}-{answer}.txt"));
                let spec = call_spec("write", json!({"path": file, "content": "hi"}));
                let server = match &server {
                    Server::Stdio(w, e) => Server::Stdio(w, e),
                    Server::Http(h) => Server::Http(h),
                };
                let seen = drive("call", form, server, &["--answer", answer, "--arg", &spec]);
                let asked = seen["asked"].as_array().unwrap();
                assert_eq!(asked.len(), 1, "{via} {form} {answer}: {seen}");
                let question = asked[0].as_str().unwrap();
                let cap = format!("fs:write:{}", file.display());
                assert!(
                    question.starts_with(&format!(
                        "sluice: the write call asks for {cap}.\nAsked by ask \"fs:*\""
                    )),
                    "{question}"
                );
                assert!(
                    question.contains("it is outside the workspace, so a person decides"),
                    "{question}"
                );
                let r = &seen["results"][0];
                assert_eq!(file.exists(), written, "{via} {form} {answer}: {r}");
                assert_eq!(r["isError"], !written);
                if !written {
                    let text = r["text"].as_str().unwrap();
                    assert!(
                        text.starts_with(&format!("permission_denied: {cap} was refused")),
                        "{text}"
                    );
                    assert!(
                        text.contains(&format!("the person behind {CLIENT} declined")),
                        "{text}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_yes_for_the_run_covers_the_same_ask_again_and_a_yes_once_does_not() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    let file = std::fs::canonicalize(outside.path())
        .unwrap()
        .join("again.txt");
    for (answer, questions) in [("accept-run", 1), ("accept", 2)] {
        let spec = json!({"tool": "write", "input": {"path": file, "content": "hi"}, "times": 2})
            .to_string();
        let seen = drive(
            "call",
            "2026",
            Server::Stdio(ws.path(), &[]),
            &["--answer", answer, "--arg", &spec],
        );
        assert_eq!(
            seen["asked"].as_array().unwrap().len(),
            questions,
            "{answer}: {seen}"
        );
        assert!(seen["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["isError"] == false));
    }
}

#[test]
fn a_client_without_elicitation_gets_permission_required_naming_the_approve_pattern() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    let file = std::fs::canonicalize(outside.path())
        .unwrap()
        .join("no.txt");
    for (form, _) in FORMS {
        let spec = call_spec("write", json!({"path": file, "content": "hi"}));
        let seen = drive(
            "call",
            form,
            Server::Stdio(ws.path(), &[]),
            &["--arg", &spec],
        );
        let text = seen["results"][0]["text"].as_str().unwrap();
        let cap = format!("fs:write:{}", file.display());
        assert!(
            text.starts_with(&format!("permission_required: {cap} needs approval")),
            "{text}"
        );
        assert!(text.contains("declared no elicitation support"), "{text}");
        assert!(
            text.contains(&format!("Pre-approve it with --approve '{cap}'")),
            "{text}"
        );
        assert!(!file.exists());
    }
    // The pattern it names grants it.
    let approve = format!("fs:write:{}", file.display());
    let spec = call_spec("write", json!({"path": file, "content": "hi"}));
    let seen = drive(
        "call",
        "2026",
        Server::Stdio(ws.path(), &["--approve", &approve]),
        &["--arg", &spec],
    );
    assert_eq!(seen["results"][0]["isError"], false, "{seen}");
    assert!(file.exists());
}

#[test]
fn cancelling_a_sleeping_command_stops_its_process_and_records_the_call_cancelled() {
    for runner in ["bwrap", "landlock"] {
        for (form, _) in [FORMS[0], FORMS[1]] {
            let ws = workspace();
            let marker = format!("1000.{}{}", std::process::id() % 1000, form.len());
            let spec = json!({"marker": marker, "command": format!("sleep {marker}")}).to_string();
            let seen = drive(
                "cancel",
                form,
                Server::Stdio(ws.path(), &["--sandbox", runner]),
                &["--arg", &spec],
            );
            assert_eq!(seen["found"], true, "{runner} {form}: {seen}");
            let gone = seen["goneAfterS"].as_f64().unwrap_or(f64::MAX);
            assert!(
                gone < 5.0,
                "{runner} {form}: the command outlived its cancelled call: {seen}"
            );
            assert_eq!(
                seen["after"], false,
                "the session goes on after a cancellation"
            );
            let calls = recorded_calls(ws.path());
            let bash = &calls[0];
            assert_eq!(bash["flow"], "bash");
            assert_eq!(bash["error"]["code"], "timeout", "{bash}");
            assert_eq!(bash["error"]["cancelled"], bash["task"], "{bash}");
            assert!(
                bash["error"]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("the command was cancelled by its caller"),
                "{bash}"
            );
        }
    }
}

#[test]
fn a_command_that_ignores_term_is_killed_after_the_grace_when_its_call_is_cancelled() {
    for runner in ["bwrap", "landlock"] {
        let ws = workspace();
        let marker = format!("1001.{}", std::process::id() % 1000);
        let spec = json!({"marker": marker, "command": format!("trap '' TERM; sleep {marker}; echo survived")}).to_string();
        let seen = drive(
            "cancel",
            "2026",
            Server::Stdio(ws.path(), &["--sandbox", runner]),
            &["--arg", &spec],
        );
        let gone = seen["goneAfterS"].as_f64().unwrap_or(f64::MAX);
        assert!(gone < 6.0, "{runner}: {seen}");
        let calls = recorded_calls(ws.path());
        assert_eq!(
            calls[0]["error"]["stdout"], "",
            "{runner}: it never got past the sleep"
        );
    }
}

#[test]
fn cancelling_over_http_in_the_stateless_form_stops_the_command() {
    let ws = workspace();
    let server = Http::start(ws.path(), &[], None);
    let spec = json!({"marker": "1002.5", "command": "sleep 1002.5"}).to_string();
    let seen = drive("cancel", "2026", Server::Http(&server), &["--arg", &spec]);
    assert!(
        seen["goneAfterS"].as_f64().unwrap_or(f64::MAX) < 5.0,
        "{seen}"
    );
    drop(server);
    assert_eq!(recorded_calls(ws.path())[0]["error"]["code"], "timeout");
}

#[test]
fn a_running_commands_output_arrives_as_progress_notifications_before_the_result() {
    let ws = workspace();
    let http = Http::start(ws.path(), &[], None);
    let spec = call_spec(
        "bash",
        json!({"command": "for i in 1 2 3; do echo line$i; sleep 0.3; done"}),
    );
    for (form, _) in FORMS {
        for server in [Server::Stdio(ws.path(), &[]), Server::Http(&http)] {
            let seen = drive("progress", form, server, &["--arg", &spec]);
            let notes = seen["notes"].as_array().unwrap();
            let text: String = notes
                .iter()
                .map(|n| n["message"].as_str().unwrap())
                .collect();
            assert_eq!(text, "line1\nline2\nline3\n", "{form}: {seen}");
            assert!(
                notes.len() >= 2,
                "the lines came as they were printed: {seen}"
            );
            assert!(notes.iter().all(|n| n["beforeResult"] == true));
            let progress: Vec<f64> = notes
                .iter()
                .map(|n| n["progress"].as_f64().unwrap())
                .collect();
            assert!(
                progress.windows(2).all(|w| w[0] < w[1]),
                "progress increases: {progress:?}"
            );
            assert_eq!(
                seen["result"]["structured"]["stdout"],
                "line1\nline2\nline3\n"
            );
        }
    }
}

#[test]
fn a_background_job_is_read_waited_and_killed_through_the_job_tools() {
    let ws = workspace();
    for (form, _) in FORMS {
        let seen = drive("job", form, Server::Stdio(ws.path(), &[]), &[]);
        assert_eq!(seen["started"]["structured"]["status"], "running", "{seen}");
        let out = seen["read"]["structured"]["stdout"].as_str().unwrap();
        assert!(out.starts_with("tick\ntick\n"), "{seen}");
        assert_eq!(seen["kill"]["structured"], json!({"killed": true}));
        assert_eq!(seen["wait"]["structured"]["ended"], true);
        assert_eq!(seen["wait"]["structured"]["state"]["status"], "killed");
    }
    let calls = recorded_calls(ws.path());
    let flows: Vec<&str> = calls.iter().map(|c| c["flow"].as_str().unwrap()).collect();
    assert_eq!(
        flows,
        ["bash", "job.read", "job.kill", "job.wait", "job.state"]
    );
}

const PEEK: &str = r#"return {
  name = "peek",
  description = "Reads a file and says how many lines it has.",
  input = {type = "object", properties = {path = {type = "string"}}, required = {"path"}},
  run = function(input)
    print("peek", input.path)  -- to stderr: stdout carries the protocol
    local page, err = sluice.read{path = input.path}
    if not page then return nil, err end
    return {lines = page.totalLines, first = page.content:match("[^\n]*")}
  end,
}"#;

#[test]
fn a_lua_tools_flow_calls_pass_the_door_and_a_refused_one_is_its_error() {
    let ws = workspace();
    std::fs::write(ws.file(".env"), "KEY=1\n").unwrap();
    std::fs::write(ws.file("a.txt"), "alpha\nbeta\n").unwrap();
    let dir = tools(&[("peek.lua", PEEK)]);
    let extra = ["--tools", dir.path().to_str().unwrap()];
    for (form, _) in FORMS {
        let seen = drive("list", form, Server::Stdio(ws.path(), &extra), &[]);
        assert_eq!(seen["tools"].as_array().unwrap().last().unwrap(), "peek");
        let ok = drive(
            "call",
            form,
            Server::Stdio(ws.path(), &extra),
            &["--arg", &call_spec("peek", json!({"path": "a.txt"}))],
        );
        assert_eq!(
            ok["results"][0]["structured"],
            json!({"lines": 2, "first": "alpha"}),
            "{ok}"
        );
        let refused = drive(
            "call",
            form,
            Server::Stdio(ws.path(), &extra),
            &["--arg", &call_spec("peek", json!({"path": ".env"}))],
        );
        let r = &refused["results"][0];
        assert_eq!(r["isError"], true);
        let text = r["text"].as_str().unwrap();
        assert!(
            text.starts_with(&format!(
                "permission_denied: fs:read:{}/.env is denied",
                ws.path().display()
            )),
            "{text}"
        );
    }
    // The inner calls are the request's: recorded with its client, under its task.
    let calls = recorded_calls(ws.path());
    assert_eq!(calls.last().unwrap()["flow"], "read");
    assert_eq!(calls.last().unwrap()["client"], CLIENT);
    assert_eq!(
        calls.last().unwrap()["error"]["code"],
        "permission_denied",
        "{:?}",
        calls.last()
    );
}

#[test]
fn a_lua_tool_requires_modules_from_its_own_folder_never_the_workspace() {
    let ws = workspace();
    // What an agent could write into the workspace to hijack a vetted tool.
    std::fs::create_dir(ws.file("lib")).unwrap();
    std::fs::write(
        ws.file("lib/helpers.lua"),
        "return {greet = function() return 'hijacked' end}",
    )
    .unwrap();
    let tool = r#"return {name = "greet", description = "Greets.", input = {type = "object"},
      run = function() return require("lib.helpers").greet() end}"#;
    let dir = tools(&[("greet.lua", tool)]);
    let extra = ["--tools", dir.path().to_str().unwrap()];
    let seen = drive(
        "call",
        "2026",
        Server::Stdio(ws.path(), &extra),
        &["--arg", &call_spec("greet", json!({}))],
    );
    let r = &seen["results"][0];
    assert_eq!(r["isError"], true, "{seen}");
    assert!(
        r["text"]
            .as_str()
            .unwrap()
            .contains("module \"lib.helpers\" not found"),
        "{seen}"
    );
    // Control: the tools' folder is where their modules come from (in a
    // subfolder: each *.lua at its top is a tool).
    std::fs::create_dir(dir.path().join("lib")).unwrap();
    std::fs::write(
        dir.path().join("lib/helpers.lua"),
        "return {greet = function() return 'hello' end}",
    )
    .unwrap();
    let seen = drive(
        "call",
        "2026",
        Server::Stdio(ws.path(), &extra),
        &["--arg", &call_spec("greet", json!({}))],
    );
    assert_eq!(seen["results"][0]["structured"], "hello", "{seen}");
}

#[test]
fn a_bad_tool_file_stops_the_server_naming_the_file_and_the_fix() {
    let ws = workspace();
    for (text, says) in [
        ("return {name = 'read', description = 'x', input = {type = 'object'}, run = function() end}", "a tool named \"read\" is already served"),
        ("return {name = 'x', description = 'x', input = {type = 'string'}, run = function() end}", "`input` must be an object's schema"),
        ("return {name = 'x', description = 'x', input = {type = 'object'}}", "`run` must be a function"),
        ("return {name = 'x', description = 'x', input = {type = 'object'}, run = print, extra = 1}", "unknown field extra"),
        ("return 42", "a tool file returns a table"),
        (
            "return {name = 'x', description = 'x', input = {type = 'object', properties = {p = {oneOf = {}}}}, run = print}",
            "`oneOf` (at input.properties.p.oneOf) is a keyword sluice does not check",
        ),
        ("error('boom')", "loading it raised"),
    ] {
        let dir = tools(&[("bad.lua", text)]);
        let run = sluice_in(ws.path(), &["mcp", "--tools", dir.path().to_str().unwrap()]);
        assert_eq!(run.code, 2, "{text}");
        assert!(run.stderr.contains("bad.lua: ") && run.stderr.contains(says), "{text}: {}", run.stderr);
    }
}

/// Issue 36, item 5: there is always a token; without one given, the
/// server makes one, says it once and keeps it in a file of the user's.
#[test]
fn http_without_a_token_given_generates_one_says_it_once_and_keeps_it_for_the_user() {
    use std::os::unix::fs::PermissionsExt;
    let ws = workspace();
    std::fs::write(ws.file("a.txt"), "hi\n").unwrap();
    let server = Http::start(ws.path(), &[], None);
    let token = server.token.clone().unwrap();
    assert_eq!(token.len(), 64, "{token}");
    let file = server.token_file.clone().unwrap();
    assert!(
        file.ends_with(format!("127.0.0.1-{}.token", server.port())),
        "{file:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("{token}\n")
    );
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    // A client without it is refused; with it, served.
    let raw = |auth: Option<&str>| {
        let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
        let auth = auth
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let req = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}", server.addr(), body.len());
        std::io::Write::write_all(&mut s, req.as_bytes()).unwrap();
        let mut status = [0u8; 12];
        std::io::Read::read_exact(&mut s, &mut status).unwrap();
        String::from_utf8_lossy(&status[9..12]).to_string()
    };
    assert_eq!(raw(None), "401");
    assert_eq!(raw(Some("0123")), "401");
    assert_eq!(raw(Some(&token)), "200");
    let seen = drive(
        "call",
        "2026",
        Server::Http(&server),
        &["--arg", &call_spec("read", json!({"path": "a.txt"}))],
    );
    assert_eq!(seen["results"][0]["text"], "hi");
    drop(server);
    assert!(!file.exists(), "the token's file outlived its server");
}

#[test]
fn http_with_a_token_refuses_clients_without_it_and_serves_those_with_it() {
    let ws = workspace();
    std::fs::write(ws.file("a.txt"), "hi\n").unwrap();
    let server = Http::start(ws.path(), &[], Some("s3cret-token"));
    let (status, reply) = server.post(&[]);
    assert_eq!(status, 401, "{reply}");
    assert!(
        reply.to_lowercase().contains("www-authenticate: bearer"),
        "{reply}"
    );
    let (status, _) = server.post(&[("Authorization", "Bearer wrong-token!")]);
    assert_eq!(status, 401);
    let (status, reply) = server.post(&[("Authorization", "Bearer s3cret-token")]);
    assert_eq!(status, 200, "{reply}");
    let seen = drive(
        "call",
        "2026",
        Server::Http(&server),
        &["--arg", &call_spec("read", json!({"path": "a.txt"}))],
    );
    assert_eq!(seen["results"][0]["text"], "hi");
}

#[test]
fn http_refuses_a_page_of_another_origin_and_serves_this_machines_own() {
    let ws = workspace();
    let server = Http::start(ws.path(), &[], None);
    let (status, reply) = server.post(&[("Origin", "http://evil.example")]);
    assert_eq!(status, 403, "{reply}");
    let (status, reply) = server.post(&[("Origin", "http://attacker.test:8080")]);
    assert_eq!(status, 403, "{reply}");
    let own = format!("http://{}", server.addr());
    let (status, reply) = server.post(&[("Origin", &own)]);
    assert_eq!(status, 200, "{reply}");
    let (status, reply) = server.post(&[]);
    assert_eq!(
        status, 200,
        "a client that sends no Origin is no browser page: {reply}"
    );
}

both_stores! {
    fn stdin_closing_ends_the_server_and_seals_its_one_run(store) {
        let ws = workspace();
        std::fs::write(ws.file("a.txt"), "hi\n").unwrap();
        for _ in 0..2 {
            drive(
                "call",
                "2026",
                Server::Stdio(ws.path(), &[]),
                &["--arg", &call_spec("read", json!({"path": "a.txt"}))],
            );
        }
        let list = sluice_in(ws.path(), &["audit", "list", "--json"]).ok();
        let runs: Value = serde_json::from_str(&list.stdout).unwrap();
        let runs = runs["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "one run per server process");
        assert!(
            runs.iter()
                .all(|r| r["status"] == "ok" && r["script"] == "sluice mcp"),
            "{runs:?}"
        );
        sluice_in(ws.path(), &["audit", "verify"]).ok();
        // No script to re-run: replay says so, and where to look instead.
        let replay = sluice_in(ws.path(), &["replay", "last"]);
        assert_eq!(replay.code, 2);
        assert!(
            replay
                .stderr
                .contains("was served by sluice mcp: its calls came from an MCP client"),
            "{}",
            replay.stderr
        );
    }
}

/// A loopback HTTP server answering every request with 200 and `hello`.
fn hello_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello");
        }
    });
    port
}

#[test]
fn an_ask_deep_in_a_running_call_is_not_put_in_a_served_run_and_names_its_approve_pattern() {
    let ws = workspace();
    let port = hello_server();
    let url = format!("http://local.test:{port}/");
    let origin = format!("http://local.test:{port}");
    let resolve = "local.test=127.0.0.1";
    let get = format!("net:get:{origin}");
    // net:get is granted at step 4; the private address the name resolves
    // to is found while the call runs, and would need the person then.
    let extra = ["--resolve", resolve, "--approve", get.as_str()];
    let spec = call_spec("fetch", json!({"url": url}));
    let seen = drive(
        "call",
        "2026",
        Server::Stdio(ws.path(), &extra),
        &["--answer", "accept", "--arg", &spec],
    );
    assert_eq!(seen["asked"], json!([]), "nobody is asked: {seen}");
    let text = seen["results"][0]["text"].as_str().unwrap();
    let cap = format!("net:private:{origin}");
    assert!(
        text.starts_with(&format!("permission_required: {cap} needs approval")),
        "{text}"
    );
    assert!(text.contains("came up while the call ran"), "{text}");
    assert!(
        text.contains(&format!("Pre-approve it with --approve '{cap}'")),
        "{text}"
    );
    // Control: the pattern it names grants it.
    let extra = [
        "--resolve",
        resolve,
        "--approve",
        get.as_str(),
        "--approve",
        cap.as_str(),
    ];
    let seen = drive(
        "call",
        "2026",
        Server::Stdio(ws.path(), &extra),
        &["--arg", &spec],
    );
    assert_eq!(seen["results"][0]["structured"]["body"], "hello", "{seen}");
}

/// With a runner declared, `test` is a tool: its result is the flow's
/// output, and its text the verdict, each failure and the tail. Without
/// one it is not listed (no call of it could run).
#[test]
fn the_test_flow_is_served_when_a_runner_is_declared_and_not_listed_without_one() {
    let ws = workspace();
    std::fs::write(
        ws.file("suite.sh"),
        "echo 1..2\necho ok 1 - adds\necho not ok 2 - breaks\nexit 1\n",
    )
    .unwrap();
    let runner = common::policy(
        &ws,
        "runner.lua",
        "return { test = { command = \"sh suite.sh\" } }",
    );
    let flags = ["--policy", "default", "--policy", runner.as_str()];
    let seen = drive("list", "2026", Server::Stdio(ws.path(), &flags), &[]);
    assert!(
        seen["tools"].as_array().unwrap().contains(&json!("test")),
        "{seen}"
    );
    assert_eq!(seen["annotations"]["test"]["destructiveHint"], true);
    let seen = drive(
        "call",
        "2026",
        Server::Stdio(ws.path(), &flags),
        &["--arg", &call_spec("test", json!({}))],
    );
    let r = &seen["results"][0];
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structured"]["runner"], "tap");
    assert_eq!(r["structured"]["passed"], 1);
    assert_eq!(r["structured"]["failed"][0]["name"], "breaks");
    let text = r["text"].as_str().unwrap();
    assert!(
        text.starts_with("exit code 1: 1 passed, 1 failed, 0 skipped (tap)\nFAILED breaks"),
        "{text}"
    );
    assert!(text.contains("--- tail ---\n1..2\nok 1 - adds"), "{text}");
    let seen = drive("list", "2026", Server::Stdio(ws.path(), &[]), &[]);
    assert!(
        !seen["tools"].as_array().unwrap().contains(&json!("test")),
        "{seen}"
    );
}

/// `update_plan` is a tool, and what it set is what the client reads back
/// from the `sluice://plan` resource: the plan before any call is empty,
/// a refused plan changes nothing; `explore` is listed only once a model
/// is named for it.
#[test]
fn the_plan_a_client_sets_is_what_it_reads_back_from_the_plan_resource() {
    let ws = workspace();
    let plan = json!({"explanation": "Found it.", "plan": [
        {"step": "Read the test", "status": "completed"},
        {"step": "Fix it", "status": "in_progress"}]});
    for (form, _) in FORMS {
        let seen = drive(
            "plan",
            form,
            Server::Stdio(ws.path(), &[]),
            &["--arg", &plan.to_string()],
        );
        assert_eq!(
            seen["resources"],
            json!([{"uri": "sluice://plan", "name": "plan", "mimeType": "application/json"}]),
            "{form}"
        );
        assert_eq!(seen["before"]["json"], json!({"plan": []}), "{form}");
        assert_eq!(seen["call"]["isError"], false, "{form}: {seen}");
        assert_eq!(
            seen["call"]["structured"],
            json!({"output": "Plan updated"})
        );
        assert_eq!(seen["after"]["mimeType"], "application/json");
        assert_eq!(seen["after"]["json"], plan, "{form}");
        assert_eq!(seen["refused"]["isError"], true, "{form}");
        assert!(
            seen["refused"]["text"]
                .as_str()
                .unwrap()
                .contains("invalid_input"),
            "{seen}"
        );
        assert_eq!(seen["still"]["json"], plan, "{form}");
    }
    let listed = drive(
        "list",
        "2026",
        Server::Stdio(
            ws.path(),
            &[
                "--provider",
                "local=openai:http://127.0.0.1:9/v1",
                "--explore-model",
                "local/m",
            ],
        ),
        &[],
    );
    let tools = listed["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("explore")), "{listed}");
    assert_eq!(listed["annotations"]["explore"]["readOnlyHint"], true);
    assert_eq!(listed["annotations"]["explore"]["openWorldHint"], true);
}

#[test]
fn a_session_the_client_ends_over_http_is_answered_as_the_official_client_expects() {
    let ws = workspace();
    let server = Http::start(ws.path(), &[], None);
    for form in ["2025-11-25", "2025-06-18"] {
        let seen = drive("terminate", form, Server::Http(&server), &[]);
        assert_eq!(seen["protocol"], form, "{seen}");
        assert_eq!(
            seen["warnings"],
            json!([]),
            "the client warned when it ended its session: {seen}"
        );
    }
    // By hand: DELETE ends the session (200), and it is gone after.
    let (status, reply) = server.post(&[]);
    assert_eq!(status, 200, "{reply}");
    let session = reply
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no session id: {reply}"));
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let (status, reply) = server.raw("DELETE", "/mcp", &server.addr(), &headers);
    assert_eq!(status, 200, "{reply}");
    let (status, reply) = server.raw("GET", "/mcp", &server.addr(), &headers);
    assert_eq!(status, 404, "an ended session is gone: {reply}");
}

/// `sluice mcp` over stdio, driven by hand as a client that ends its
/// session with a signal (Claude Code, Codex) rather than by closing stdin.
struct Session {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Session {
    /// Starts the server and initializes a 2025-11-25 session.
    fn start(ws: &Path) -> Session {
        let mut child = std::process::Command::new(common::sluice_bin())
            .args(["mcp", "--workspace"])
            .arg(ws)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn sluice mcp");
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut s = Session { child, out };
        s.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "by-hand", "version": "1"}}}),
        );
        assert_eq!(s.reply()["id"], 1);
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, message: Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message that answers a request.
    fn reply(&mut self) -> Value {
        loop {
            let mut line = String::new();
            assert!(
                std::io::BufRead::read_line(&mut self.out, &mut line).unwrap() > 0,
                "the server closed its output"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id").is_some() {
                return v;
            }
        }
    }

    /// `tools/call` of `tool` with `input`, as request `id`.
    fn call(&mut self, id: u64, tool: &str, input: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": input}}));
    }

    /// Sends `sig` `times` times with stdin still open; the exit code.
    fn signal_times(mut self, sig: nix::sys::signal::Signal, times: usize) -> Option<i32> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        for _ in 0..times {
            nix::sys::signal::kill(pid, sig).unwrap();
        }
        common::exit_within(&mut self.child, std::time::Duration::from_secs(10)).code()
    }

    /// Sends `sig` once with stdin still open; the exit code.
    fn signal(self, sig: nix::sys::signal::Signal) -> Option<i32> {
        self.signal_times(sig, 1)
    }
}

/// The newest run's status in the workspace's record, and its calls.
fn last_run(ws: &Path) -> (Value, Vec<Value>) {
    let shown = sluice_in(ws, &["audit", "show", "last", "--json"]).ok();
    let v: Value = serde_json::from_str(&shown.stdout).unwrap();
    (
        v["run"]["status"].clone(),
        v["calls"].as_array().cloned().unwrap_or_default(),
    )
}

#[test]
fn a_signal_with_no_call_under_way_ends_the_session_ok_and_one_mid_call_interrupts() {
    use nix::sys::signal::Signal;
    let ws = workspace();
    std::fs::write(ws.file("a.txt"), "hi\n").unwrap();
    // Twice at once: the second signal ends the process through the
    // backstop, which seals what the first meant, the session ended `ok`.
    for (sig, times) in [
        (Signal::SIGTERM, 1),
        (Signal::SIGINT, 1),
        (Signal::SIGTERM, 2),
    ] {
        let mut s = Session::start(ws.path());
        s.call(2, "read", json!({"path": "a.txt"}));
        let answer = s.reply();
        assert_eq!(
            answer["result"]["structuredContent"]["content"], "hi",
            "{answer}"
        );
        assert_eq!(s.signal_times(sig, times), Some(0), "{sig} x{times}");
        let (status, calls) = last_run(ws.path());
        assert_eq!(status, "ok", "{sig}: the client ended its session");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0]["outcome"], "ok");
    }
    // The control: a signal while a command runs stops it and interrupts
    // the run.
    let marker = common::unique_sleep();
    let mut s = Session::start(ws.path());
    s.call(2, "bash", json!({"command": format!("sleep {marker}")}));
    let started = std::time::Instant::now();
    while last_run(ws.path()).1.is_empty() {
        assert!(
            started.elapsed().as_secs() < 10,
            "the call was never recorded"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(s.signal(Signal::SIGTERM), Some(143));
    let (status, calls) = last_run(ws.path());
    assert_eq!(status, "interrupted");
    assert_eq!(calls[0]["error"]["interrupted"], "SIGTERM", "{calls:?}");
}
