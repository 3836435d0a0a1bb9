//! Every error code the flows on the world (commands, the network, models,
//! tests, language servers) declare beyond the common ones, made to happen
//! through the real `sluice` binary: one scenario per (flow, code) pair, a
//! real setup (loopback HTTP and model servers, the suite's fake language
//! servers, a test runner, a sealed host, a credentials file sluice cannot
//! read) and a Lua call that returns exactly that code with a message only
//! that failure has.
//!
//! Scenarios are grouped by the run they need ([`Stage`]), so each run
//! makes several. A call a task makes when the script ends is cancelled,
//! and its `timeout` is read from the record (the script is gone by then).
//! The last test checks that the scenarios make exactly the codes each
//! flow declares (`sluice flows FLOW --json`).

mod common;
#[path = "common/model_server.rs"]
mod model_server;

use common::flow_errors::{assert_scenarios_match, WORLD_FLOWS};
use common::{exported_calls, lua_str, policy, run_lua_env, Workspace};
use model_server::{openai_error, openai_text, Answer, ModelServer};
use serde_json::Value;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The run a scenario needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Everything allowed and unconfined; a runner whose folder is a file,
    /// one background job at most, no credentials file.
    Host,
    /// The host sealed to a container (`SLUICE_BASH_CONTAINER`).
    Sealed,
    /// A credentials file that is not UTF-8, so it cannot be read.
    Credentials,
    /// The default policy, no runner, search provider or explore model,
    /// and a sandbox runner that is missing.
    Unconfigured,
    /// The default policy and the suite's fake language servers.
    Lsp,
    /// A model provider, a search provider and a test runner, all
    /// answering badly.
    World,
}

/// One scenario: a call of `flow` with `input` (a Lua table; `{WEB}`,
/// `{MODEL}` and `{CLOSED}` stand for the stage's origins) that fails with
/// `code`, its message holding `says`.
struct Case {
    stage: Stage,
    flow: &'static str,
    code: &'static str,
    input: &'static str,
    says: &'static str,
    /// Made in a task the script's end cancels: read from the record.
    cancelled: bool,
}

const fn case(
    stage: Stage,
    flow: &'static str,
    code: &'static str,
    input: &'static str,
    says: &'static str,
) -> Case {
    Case {
        stage,
        flow,
        code,
        input,
        says,
        cancelled: false,
    }
}

const fn cancelled(stage: Stage, flow: &'static str, input: &'static str) -> Case {
    Case {
        stage,
        flow,
        code: "timeout",
        input,
        says: "cancelled: the script ended while task",
        cancelled: true,
    }
}

use Stage::*;

const HI: &str = "{{role = \"user\", content = \"hi\"}}";

/// Every scenario, flow by flow.
const CASES: &[Case] = &[
    // bash
    case(Host, "bash", "outside_declared_reads", "{command = \"cat other/x.txt\", mode = \"hermetic\", reads = {}, writes = {}}", "outside the declared reads"),
    case(Host, "bash", "outside_declared_writes", "{command = \"echo hi > out.txt\", mode = \"hermetic\", reads = {}, writes = {}}", "outside the declared writes"),
    case(Sealed, "bash", "outside_container", "{command = \"true\"}", "this host is sealed to container"),
    case(Host, "bash", "command_failed", "{command = \"sleep 5\", background = true}", "background jobs running, the most it allows"),
    case(Host, "bash", "timeout", "{command = \"sleep 5\", timeoutMs = 300}", "did not finish within 300 ms"),
    case(Host, "bash", "provider_unavailable", "{command = \"true\", container = \"nowhere\"}", "no route into container \"nowhere\""),
    // shell_command
    case(Host, "shell_command", "not_found", "{command = \"true\", workdir = \"missing\"}", "missing does not exist; the command did not run"),
    case(Sealed, "shell_command", "outside_container", "{command = \"true\"}", "this host is sealed to container"),
    case(Host, "shell_command", "command_failed", "{command = \"true\", workdir = \"loop\"}", "Too many levels of symbolic links"),
    cancelled(World, "shell_command", "{command = \"sleep 30\"}"),
    case(Unconfigured, "shell_command", "provider_unavailable", "{command = \"true\"}", "apt-get install bubblewrap"),
    // fetch
    case(Credentials, "fetch", "command_failed", "{url = \"{CLOSED}/a\", headers = {authorization = sluice.credential(\"tok\")}}", "cannot read the credentials file"),
    case(Host, "fetch", "request_failed", "{url = \"{CLOSED}/a\"}", "Connection refused"),
    case(Host, "fetch", "timeout", "{url = \"{WEB}/stall\", timeout = 0.3}", "no complete response within 0.3 s"),
    case(Host, "fetch", "provider_unavailable", "{url = \"{WEB}/ok\", headers = {authorization = sluice.credential(\"nope\")}}", "needs credential `nope`, which is not set"),
    case(Host, "fetch", "response_too_large", "{url = \"{WEB}/huge\"}", "is 6000000 bytes (content-length), over the 5 MiB limit"),
    // http-post
    case(Credentials, "http-post", "command_failed", "{url = \"{CLOSED}/a\", body = \"{}\", headers = {authorization = sluice.credential(\"tok\")}}", "cannot read the credentials file"),
    case(Host, "http-post", "request_failed", "{url = \"{CLOSED}/a\", body = \"{}\"}", "Connection refused"),
    case(Host, "http-post", "timeout", "{url = \"{WEB}/stall\", body = \"{}\", timeout = 0.3}", "no complete response within 0.3 s"),
    case(Host, "http-post", "provider_unavailable", "{url = \"{WEB}/ok\", body = \"{}\", headers = {authorization = sluice.credential(\"nope\")}}", "needs credential `nope`, which is not set"),
    case(Host, "http-post", "response_too_large", "{url = \"{WEB}/huge\", body = \"{}\"}", "is 6000000 bytes (content-length), over the 5 MiB limit"),
    // webfetch
    case(Credentials, "webfetch", "command_failed", "{url = \"{CLOSED}/a\", headers = {authorization = sluice.credential(\"tok\")}}", "cannot read the credentials file"),
    case(Host, "webfetch", "request_failed", "{url = \"{CLOSED}/a\"}", "Connection refused"),
    case(Host, "webfetch", "timeout", "{url = \"{WEB}/stall\", timeout = 0.3}", "no complete response within 0.3 s"),
    case(Host, "webfetch", "provider_unavailable", "{url = \"{WEB}/ok\", headers = {authorization = sluice.credential(\"nope\")}}", "needs credential `nope`, which is not set"),
    case(Host, "webfetch", "unsupported_content_type", "{url = \"{WEB}/image\"}", "answered with image/png; webfetch renders text"),
    case(Host, "webfetch", "response_too_large", "{url = \"{WEB}/huge\"}", "is 6000000 bytes (content-length), over the 5 MiB limit"),
    // websearch
    case(Credentials, "websearch", "command_failed", "{query = \"q\"}", "cannot read the credentials file"),
    case(World, "websearch", "request_failed", "{query = \"bad\"}", "refused the search with HTTP 400"),
    cancelled(World, "websearch", "{query = \"stall\"}"),
    case(World, "websearch", "rate_limited", "{query = \"rate\"}", "is limiting requests (HTTP 429)"),
    case(Unconfigured, "websearch", "provider_unavailable", "{query = \"q\"}", "no search provider is bound"),
    case(World, "websearch", "response_too_large", "{query = \"huge\"}", "is 6000000 bytes (content-length), over the 5 MiB limit"),
    // model
    case(Credentials, "model", "command_failed", "{provider = \"local\", model = \"m\", messages = HI}", "cannot read the credentials file"),
    case(World, "model", "request_failed", "{provider = \"local\", model = \"m-bad\", messages = HI}", "model provider `local` refused the request (HTTP 400"),
    case(World, "model", "timeout", "{provider = \"local\", model = \"m-slow\", messages = HI, timeoutMs = 300}", "gave no whole reply within"),
    case(World, "model", "rate_limited", "{provider = \"local\", model = \"m-rate\", messages = HI}", "model provider `local` is limiting requests (HTTP 429"),
    case(Unconfigured, "model", "provider_unavailable", "{provider = \"nope\", model = \"m\", messages = HI}", "no model provider is named \"nope\""),
    case(World, "model", "response_too_large", "{provider = \"local\", model = \"m-huge\", messages = HI}", "over the 5 MiB limit"),
    // test
    case(Sealed, "test", "outside_container", "{}", "this host is sealed to container"),
    case(Host, "test", "command_failed", "{}", "afile is not a directory; the tests did not run"),
    case(World, "test", "timeout", "{timeoutMs = 300}", "the tests did not finish within 300 ms"),
    case(Unconfigured, "test", "provider_unavailable", "{}", "no test runner is declared"),
    // lsp
    case(Lsp, "lsp", "not_found", "{operation = \"hover\", path = \"sub\", line = 1, character = 1}", "sub is not a file; lsp asks about a file"),
    case(Lsp, "lsp", "not_a_directory", "{operation = \"hover\", path = \"x.good/\", line = 1, character = 1}", "ends in a slash, so it names a folder, but it is a file"),
    case(Lsp, "lsp", "binary_file", "{operation = \"hover\", path = \"bin.good\", line = 1, character = 1}", "holds a NUL byte at byte 3"),
    case(Lsp, "lsp", "command_failed", "{operation = \"hover\", path = \"x.crash\", line = 1, character = 1}", "language server crash failed"),
    case(Lsp, "lsp", "request_failed", "{operation = \"definition\", path = \"x.err\", line = 1, character = 1}", "answered textDocument/definition with error -32603: the index is not built"),
    case(Lsp, "lsp", "timeout", "{operation = \"hover\", path = \"x.slow\", line = 1, character = 1, timeoutMs = 300}", "did not answer initialize within 300 ms"),
    case(Unconfigured, "lsp", "provider_unavailable", "{operation = \"hover\", path = \"x.good\", line = 1, character = 1}", "apt-get install bubblewrap"),
    case(Lsp, "lsp", "unsupported", "{operation = \"hover\", path = \"x.none\", line = 1, character = 1}", "no language server serves"),
    case(Lsp, "lsp", "response_too_large", "{operation = \"hover\", path = \"big.good\", line = 1, character = 1}", "over the 67108864 byte limit for text files"),
    // explore
    case(Credentials, "explore", "command_failed", "{prompt = \"q\"}", "cannot read the credentials file"),
    case(World, "explore", "request_failed", "{prompt = \"ASK-BAD\"}", "explore's model call (turn 1) failed: model provider `local` refused the request (HTTP 400"),
    cancelled(World, "explore", "{prompt = \"ASK-SLOW\"}"),
    case(World, "explore", "rate_limited", "{prompt = \"ASK-RATE\"}", "explore's model call (turn 1) failed: model provider `local` is limiting requests (HTTP 429"),
    case(Unconfigured, "explore", "provider_unavailable", "{prompt = \"q\"}", "explore runs a sub-agent on a model the operator names, and none is named"),
    case(World, "explore", "response_too_large", "{prompt = \"ASK-HUGE\"}", "over the 5 MiB limit"),
];

// ---- the servers ----

/// Bytes a "huge" response announces: over the 5 MiB a response may have.
const HUGE: usize = 6_000_000;

/// A loopback HTTP/1.1 server answering by the request's target: `/stall`
/// (and a search for `stall`) never answers, `/huge` (and `huge`)
/// announces [`HUGE`] bytes, `/image` is a PNG, a search for `rate` is a
/// 429 and for `bad` a 400, anything else a 200 `ok`. Its threads outlive
/// the test, sleeping.
fn web() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || answer(conn));
        }
    });
    origin
}

fn answer(mut conn: TcpStream) {
    let Some(target) = common::http::read_request(&mut conn).map(|r| r.target) else {
        return;
    };
    let has = |word: &str| target == format!("/{word}") || target.contains(&format!("q={word}"));
    let (status, ct, body): (u16, &str, Vec<u8>) = if has("stall") {
        std::thread::sleep(Duration::from_secs(30));
        return;
    } else if has("huge") {
        let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {HUGE}\r\nconnection: close\r\n\r\n");
        let _ = conn.write_all(head.as_bytes());
        std::thread::sleep(Duration::from_secs(5));
        return;
    } else if has("image") {
        (200, "image/png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec())
    } else if has("rate") {
        (429, "application/json", b"{}".to_vec())
    } else if has("bad") {
        (400, "application/json", b"{\"error\": \"no\"}".to_vec())
    } else {
        (200, "text/plain", b"ok".to_vec())
    };
    let head = format!(
        "HTTP/1.1 {status} Scripted\r\ncontent-type: {ct}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(&body);
}

/// An origin nothing listens on.
fn closed() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

/// A model provider (OpenAI's protocol) answering by the model asked for,
/// or for explore's model by the question: `bad` a 400, `rate` a 429 that
/// asks for a wait longer than any call has, `slow` after 30 s, `huge`
/// [`HUGE`] bytes.
fn model() -> ModelServer {
    ModelServer::respond(|req| {
        let model = req.body["model"].as_str().unwrap_or_default();
        let said = |word: &str| {
            model == format!("m-{word}")
                || req.text.contains(&format!("ASK-{}", word.to_uppercase()))
        };
        if said("bad") {
            Answer::error(
                400,
                openai_error("invalid_request_error", None, "no such thing"),
            )
        } else if said("rate") {
            Answer::error(429, openai_error("rate_limit_exceeded", None, "slow down"))
                .header("retry-after-ms", "1000000")
        } else if said("slow") {
            Answer::json(openai_text("late")).delay(Duration::from_secs(30))
        } else if said("huge") {
            Answer::raw(200, "application/json", vec![b' '; HUGE])
        } else {
            Answer::json(openai_text("{\"findings\": []}"))
        }
    })
}

// ---- the runs ----

/// Lua prelude: `try(flow, input)` prints `{ok = flow}` or the error.
const PRELUDE: &str = r#"local function emit(v) print(sluice.json.encode(v)) end
local function try(name, input)
  local r, e = sluice.call(name, input)
  if r then emit({ok = name}) else emit(e) end
end
"#;

/// A policy allowing everything, with `extra` fields.
fn allow_all(ws: &Workspace, name: &str, extra: &str) -> String {
    policy(
        ws,
        name,
        &format!("local p = require(\"sluice.policy\")\nreturn {{\n  rules = {{ p.allow \"*\" }},\n  {extra}\n}}\n"),
    )
}

/// What a stage's run needs: its flags, sluice's environment, the origins
/// its inputs name, and what it must keep alive while it runs.
struct Setup {
    flags: Vec<String>,
    env: Vec<(&'static str, String)>,
    origins: Vec<(&'static str, String)>,
    _model: Option<ModelServer>,
}

impl Setup {
    fn new(flags: Vec<String>) -> Setup {
        Setup {
            flags,
            env: Vec::new(),
            origins: vec![("{CLOSED}", closed())],
            _model: None,
        }
    }
}

/// A path beside the workspace where no credentials file is.
fn no_credentials(ws: &Workspace) -> String {
    ws.path()
        .parent()
        .unwrap()
        .join("no-credentials")
        .display()
        .to_string()
}

fn host(ws: &Workspace) -> Setup {
    std::fs::write(ws.file("afile"), "a file, not a folder\n").unwrap();
    std::os::unix::fs::symlink("loop", ws.file("loop")).unwrap();
    let pol = allow_all(
        ws,
        "host.lua",
        "test = { command = \"sleep 5\", cwd = \"afile\" },",
    );
    let mut s = Setup::new(strings(&[
        "--policy",
        &pol,
        "--max-jobs",
        "1",
        "--credentials",
        &no_credentials(ws),
    ]));
    s.origins.push(("{WEB}", web()));
    s
}

fn sealed(ws: &Workspace) -> Setup {
    let pol = allow_all(ws, "sealed.lua", "test = { command = \"sleep 5\" },");
    let mut s = Setup::new(strings(&["--policy", &pol]));
    s.env
        .push(("SLUICE_BASH_CONTAINER", "sluice-flow-errors-nowhere".into()));
    s
}

fn credentials(ws: &Workspace) -> Setup {
    use std::os::unix::fs::PermissionsExt;
    let file = ws.path().parent().unwrap().join("credentials");
    std::fs::write(&file, b"tok = \xff\xfe not UTF-8\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let pol = allow_all(ws, "creds.lua", "");
    let nowhere = closed();
    Setup::new(strings(&[
        "--policy",
        &pol,
        "--credentials",
        &file.display().to_string(),
        "--provider",
        &format!("local=openai:{nowhere}/v1"),
        "--explore-model",
        "local/explorer",
        "--search",
        &format!("exa={nowhere}/search"),
    ]))
}

/// A policy declaring the servers of `lsp` and letting them read `reads`.
fn lsp_policy(ws: &Workspace, lsp: &str, reads: &[&Path]) -> String {
    let reads: Vec<String> = reads.iter().map(|r| r.display().to_string()).collect();
    common::lsp_policy(ws, &reads, &[], lsp)
}

fn lsp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lsp")
}

/// `NAME = {the fake server in MODE}` for `.EXT` files.
fn fake(name: &str, mode: &str, ext: &str) -> String {
    let script = lsp_dir().join("fake_server.py");
    format!(
        "{name} = {{ command = {{ \"/usr/bin/python3\", \"{}\", \"{mode}\" }}, extensions = {{ \".{ext}\" }} }}",
        script.display()
    )
}

fn unconfigured(ws: &Workspace) -> Setup {
    std::fs::write(ws.file("x.good"), "one\n").unwrap();
    let pol = lsp_policy(ws, &fake("good", "good", "good"), &[&lsp_dir()]);
    let mut s = Setup::new(strings(&[
        "--policy",
        "default",
        "--policy",
        &pol,
        "--sandbox",
        "bwrap",
    ]));
    s.env.push(("SLUICE_BWRAP", "/nonexistent/bwrap".into()));
    s
}

/// A language server offering definition, which it answers with an
/// error: the framing is the suite's (tests/lsp/frames.py).
const ERRING_SERVER: &str = r#"import sys
sys.path.insert(0, sys.argv[1])
from frames import read, send
while True:
    m = read()
    if m.get("method") == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"capabilities": {"definitionProvider": True, "textDocumentSync": 1}}})
    elif m.get("method") == "exit":
        break
    elif "id" in m and m.get("method") == "shutdown":
        send({"jsonrpc": "2.0", "id": m["id"], "result": None})
    elif "id" in m:
        send({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32603, "message": "the index is not built"}})
"#;

fn lsp(ws: &Workspace) -> Setup {
    let dir = ws.path().parent().unwrap().join("servers");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("erring.py"), ERRING_SERVER).unwrap();
    for f in ["x.good", "x.slow", "x.crash", "x.err", "x.none"] {
        std::fs::write(ws.file(f), "one\n").unwrap();
    }
    std::fs::write(ws.file("bin.good"), b"one\0two\n").unwrap();
    let big = std::fs::File::create(ws.file("big.good")).unwrap();
    big.set_len(65 << 20).unwrap();
    std::fs::create_dir(ws.file("sub")).unwrap();
    let erring = format!(
        "err = {{ command = {{ \"/usr/bin/python3\", \"{}\", \"{}\" }}, extensions = {{ \".err\" }} }}",
        dir.join("erring.py").display(),
        lsp_dir().display()
    );
    let servers = [
        fake("good", "good", "good"),
        fake("slow", "silent", "slow"),
        fake("crash", "crash", "crash"),
        erring,
    ];
    let pol = lsp_policy(ws, &servers.join(",\n    "), &[&lsp_dir(), &dir]);
    Setup::new(strings(&["--policy", "default", "--policy", &pol]))
}

fn world(ws: &Workspace) -> Setup {
    let server = model();
    let pol = allow_all(ws, "world.lua", "test = { command = \"sleep 5\" },");
    let web = web();
    let mut s = Setup::new(strings(&[
        "--policy",
        &pol,
        "--credentials",
        &no_credentials(ws),
        "--provider",
        &format!("local=openai:{}", server.url()),
        "--explore-model",
        "local/explorer",
        "--search",
        &format!("searxng={web}"),
    ]));
    s.origins.push(("{WEB}", web));
    s.origins.push(("{MODEL}", server.origin()));
    s._model = Some(server);
    s
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// `case`'s input with the stage's origins put in.
fn input(case: &Case, setup: &Setup) -> String {
    let mut text = case
        .input
        .replace("messages = HI", &format!("messages = {HI}"));
    for (name, origin) in &setup.origins {
        text = text.replace(name, origin);
    }
    text
}

/// Runs the scenarios of `stage` in one run set up by `setup`, and checks
/// each: the code, and the part of the message only that failure has.
fn check(stage: Stage, setup: fn(&Workspace) -> Setup) {
    let ws = common::workspace();
    let setup = setup(&ws);
    let cases: Vec<&Case> = CASES.iter().filter(|c| c.stage == stage).collect();
    let mut script = String::from(PRELUDE);
    // The first background job takes the only place the host stage has.
    if stage == Host {
        script.push_str("assert(sluice.bash{command = \"sleep 5\", background = true})\n");
    }
    for c in cases.iter().filter(|c| !c.cancelled) {
        script.push_str(&format!("try({}, {})\n", lua_str(c.flow), input(c, &setup)));
    }
    let late: Vec<&&Case> = cases.iter().filter(|c| c.cancelled).collect();
    for c in &late {
        script.push_str(&format!(
            "sluice.spawn(function() sluice.call({}, {}) end)\n",
            lua_str(c.flow),
            input(c, &setup)
        ));
    }
    if !late.is_empty() {
        script.push_str("sluice.sleep(500)\n");
    }
    // Loopback is private: each origin needs its exact grant.
    let mut flags: Vec<&str> = setup.flags.iter().map(String::as_str).collect();
    let grants: Vec<String> = setup
        .origins
        .iter()
        .map(|(_, o)| format!("net:private:{o}"))
        .collect();
    for g in &grants {
        flags.extend(["--approve", g]);
    }
    let env: Vec<(&str, &str)> = setup.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = run_lua_env(ws.path(), &script, &flags, &[], &env);
    assert_eq!(
        run.code, 0,
        "{stage:?}: sluice run failed\n{}\n{}",
        run.stdout, run.stderr
    );
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect();
    let made: Vec<&&Case> = cases.iter().filter(|c| !c.cancelled).collect();
    assert_eq!(
        lines.len(),
        made.len(),
        "{stage:?}: one line a call: {lines:?}"
    );
    for (c, got) in made.iter().zip(&lines) {
        assert_made(c, got);
    }
    if late.is_empty() {
        return;
    }
    // The spawned tasks' calls (the main chunk's task is "0"); explore's
    // error is its inner model call's, which the cancellation cut.
    let calls = exported_calls(ws.path());
    for c in late {
        let got = calls
            .iter()
            .find(|r| r["flow"] == c.flow && r["task"] != "0")
            .unwrap_or_else(|| {
                let seen: Vec<(&Value, &Value)> =
                    calls.iter().map(|r| (&r["flow"], &r["task"])).collect();
                panic!("{}: no call of a spawned task recorded: {seen:?}", c.flow)
            });
        assert_made(c, &got["error"]);
    }
}

fn assert_made(c: &Case, got: &Value) {
    assert_eq!(got["code"], c.code, "{} {}: {got}", c.flow, c.input);
    let message = got["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(c.says),
        "{} {}: the message does not say {:?}: {message}",
        c.flow,
        c.code,
        c.says
    );
}

#[test]
fn on_the_host_commands_requests_and_the_runner_fail_each_with_its_code() {
    check(Host, host);
}

#[test]
fn on_a_sealed_host_every_command_is_outside_its_container() {
    check(Sealed, sealed);
}

#[test]
fn a_credentials_file_that_cannot_be_read_fails_every_flow_that_sends_a_credential() {
    check(Credentials, credentials);
}

#[test]
fn what_the_operator_did_not_declare_or_install_is_provider_unavailable() {
    check(Unconfigured, unconfigured);
}

#[test]
fn language_servers_and_the_files_asked_about_fail_each_with_their_code() {
    check(Lsp, lsp);
}

#[test]
fn models_searches_and_tests_that_answer_badly_fail_each_with_their_code() {
    check(World, world);
}

#[test]
fn the_world_flows_declare_exactly_the_codes_their_scenarios_make() {
    let pairs: Vec<(&str, &str)> = CASES.iter().map(|c| (c.flow, c.code)).collect();
    assert_scenarios_match(WORLD_FLOWS, &pairs);
}
