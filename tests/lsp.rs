//! `sluice.lsp` and the diagnostics of `write`, `edit` and `apply_patch`
//! through the real binary, with the language servers a policy's `lsp`
//! table declares: basedpyright, typescript-language-server and clangd on
//! small fixture projects (a definition in another file, references,
//! hover, symbols; an edit introducing a type error and the edit fixing
//! it), and hostile servers written to misbehave (one that never answers,
//! one that floods frames, one that sends a 100 MB frame, one that
//! crashes, one that tries to leave its confinement), each beside a
//! well-behaved control. Launchers and servers inside the workspace are
//! refused before the run starts.
//!
//! `scripts/test` installs the servers: basedpyright into
//! target/peers/basedpyright (PyPI), typescript-language-server and
//! typescript into target/peers/lsp (npm), clangd (Debian).

mod common;

use common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers")
}

/// `path`, which the test needs, or a failure saying how to install it.
fn needed(path: PathBuf, install: &str) -> String {
    assert!(
        path.exists(),
        "{} is missing; install it with: {install} (scripts/test does)",
        path.display()
    );
    path.display().to_string()
}

/// A policy (beside the workspace) that lets commands read `reads` and
/// write the workspace, and declares `lsp` (a Lua table's body).
fn lsp_policy(ws: &Workspace, reads: &[String], lsp: &str) -> String {
    let rules = [
        "p.allow(\"fs:write:${workspace}/**\")",
        "p.allow(\"fs:read:/proc/**\")",
    ];
    common::lsp_policy(ws, reads, &rules, lsp)
}

/// Runs `body` (with `emit`) under the default policy and `pol`; each
/// stdout line as JSON.
fn run(ws: &Workspace, pol: &str, body: &str) -> Vec<Value> {
    run_confined_by(ws, pol, body, "auto")
}

/// [`run`] with commands, and so servers, confined by `runner`
/// (`sluice run --sandbox`).
fn run_confined_by(ws: &Workspace, pol: &str, body: &str, runner: &str) -> Vec<Value> {
    let out = run_lua_with(
        ws.path(),
        &format!(
            "{EMIT}local function call(i) local r, e = sluice.lsp(i) emit(r or e) end\n{body}"
        ),
        &["--sandbox", runner, "--policy", "default", "--policy", pol],
        &[],
    )
    .ok();
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

fn put(ws: &Workspace, rel: &str, text: &str) {
    let path = ws.file(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn range(line: u64, from: u64, to: u64) -> Value {
    json!({"start": {"line": line, "character": from}, "end": {"line": line, "character": to}})
}

/// The interpreter folder a Python script's `#!` line names.
fn interpreter_prefix(script: &str) -> String {
    let text = std::fs::read_to_string(script).unwrap();
    let first = text.lines().next().unwrap().trim_start_matches("#!");
    let real = std::fs::canonicalize(first).unwrap();
    real.parent()
        .unwrap()
        .parent()
        .unwrap()
        .display()
        .to_string()
}

const PY_LIB: &str = "def greet(name: str) -> str:\n    return \"hi \" + name\n";
const PY_MAIN: &str = "from lib import greet\n\nx = greet(\"bob\")\n";

#[test]
fn basedpyright_answers_each_operation_and_diagnoses_an_edit_and_its_fix() {
    let dir = peers().join("basedpyright");
    let server = needed(
        dir.join("bin/basedpyright-langserver"),
        "python3 -m pip install --target target/peers/basedpyright basedpyright==1.40.2",
    );
    let ws = workspace();
    put(&ws, "lib.py", PY_LIB);
    put(&ws, "main.py", PY_MAIN);
    let lsp = format!(
        "python = {{ command = {{ \"{server}\", \"--stdio\" }}, extensions = {{ \".py\" }}, env = {{ PYTHONPATH = \"{}\" }} }}",
        dir.display()
    );
    let pol = lsp_policy(
        &ws,
        &[dir.display().to_string(), interpreter_prefix(&server)],
        &lsp,
    );
    let out = run(
        &ws,
        &pol,
        r#"
call{operation = "definition", path = "main.py", line = 3, character = 5}
call{operation = "references", path = "lib.py", line = 1, character = 5}
call{operation = "hover", path = "main.py", line = 3, character = 1}
call{operation = "documentSymbols", path = "lib.py"}
call{operation = "workspaceSymbols", query = "greet"}
local r, e = sluice.edit{path = "main.py", oldString = 'greet("bob")', newString = 'greet(3)'}
emit(r or e)
r, e = sluice.edit{path = "main.py", oldString = 'greet(3)', newString = 'greet("bob")'}
emit(r or e)
"#,
    );
    assert_eq!(
        out[0],
        json!({"result": [{"uri": "lib.py", "range": range(1, 5, 10)}], "server": "python"})
    );
    let refs = out[1]["result"].as_array().unwrap();
    let mut places: Vec<(String, u64)> = refs
        .iter()
        .map(|r| {
            (
                r["uri"].as_str().unwrap().to_string(),
                r["range"]["start"]["line"].as_u64().unwrap(),
            )
        })
        .collect();
    places.sort();
    assert_eq!(
        places,
        vec![
            ("lib.py".into(), 1),
            ("main.py".into(), 1),
            ("main.py".into(), 3)
        ],
        "{}",
        out[1]
    );
    assert_eq!(
        out[2]["result"]["contents"]["value"], "```python\n(variable) x: str\n```",
        "{}",
        out[2]
    );
    assert_eq!(out[3]["result"][0]["name"], "greet", "{}", out[3]);
    assert_eq!(out[3]["result"][0]["selectionRange"], range(1, 5, 10));
    assert_eq!(
        out[4]["result"][0]["location"],
        json!({"uri": "lib.py", "range": range(1, 5, 10)}),
        "{}",
        out[4]
    );
    let broken = &out[5]["diagnostics"];
    assert_eq!(broken["status"], "errors", "{}", out[5]);
    assert_eq!(broken["errors"].as_array().unwrap().len(), 1, "{broken}");
    let error = &broken["errors"][0];
    assert_eq!(
        (
            error["path"].as_str(),
            error["line"].as_u64(),
            error["character"].as_u64()
        ),
        (Some("main.py"), Some(3), Some(11))
    );
    assert_eq!(error["code"], "reportArgumentType");
    assert_eq!(error["source"], "basedpyright");
    assert_eq!(
        out[6]["diagnostics"],
        json!({"status": "clean", "errors": []})
    );
}

const TS_LIB: &str = "export function add(a: number, b: number): number {\n  return a + b;\n}\n";
const TS_MAIN: &str = "import { add } from \"./lib\";\n\nexport const total: number = add(1, 2);\n";

#[test]
fn typescript_language_server_answers_each_operation_and_diagnoses_an_edit_and_its_fix() {
    let dir = peers().join("lsp");
    let server = needed(
        dir.join("node_modules/.bin/typescript-language-server"),
        "npm install --prefix target/peers/lsp typescript-language-server@5.1.3 typescript@5.9.3",
    );
    let ws = workspace();
    put(&ws, "lib.ts", TS_LIB);
    put(&ws, "main.ts", TS_MAIN);
    put(
        &ws,
        "tsconfig.json",
        "{\"compilerOptions\": {\"strict\": true, \"noEmit\": true}}\n",
    );
    let lsp =
        format!("ts = {{ command = {{ \"{server}\", \"--stdio\" }}, extensions = {{ \".ts\" }} }}");
    let pol = lsp_policy(&ws, &[dir.display().to_string()], &lsp);
    let out = run(
        &ws,
        &pol,
        r#"
call{operation = "definition", path = "main.ts", line = 1, character = 23}
call{operation = "references", path = "lib.ts", line = 1, character = 17}
call{operation = "hover", path = "main.ts", line = 3, character = 14}
call{operation = "documentSymbols", path = "lib.ts"}
call{operation = "workspaceSymbols", query = "add"}
local r, e = sluice.edit{path = "main.ts", oldString = 'add(1, 2)', newString = 'add(1, "2")'}
emit(r or e)
r, e = sluice.edit{path = "main.ts", oldString = 'add(1, "2")', newString = 'add(1, 2)'}
emit(r or e)
"#,
    );
    // The module's specifier leads to the other file (tsserver answers a
    // use of the imported name with its import).
    assert_eq!(
        out[0]["result"],
        json!([{"originSelectionRange": range(1, 21, 28), "targetUri": "lib.ts", "targetRange": range(1, 1, 1), "targetSelectionRange": range(1, 1, 1)}]),
        "{}",
        out[0]
    );
    assert_eq!(
        out[1]["result"],
        json!([{"uri": "lib.ts", "range": range(1, 17, 20)}, {"uri": "main.ts", "range": range(1, 10, 13)}, {"uri": "main.ts", "range": range(3, 30, 33)}]),
        "{}",
        out[1]
    );
    assert_eq!(
        out[2]["result"]["contents"]["value"], "\n```typescript\nconst total: number\n```\n",
        "{}",
        out[2]
    );
    assert_eq!(out[3]["result"][0]["name"], "add", "{}", out[3]);
    assert_eq!(
        out[3]["result"][0]["selectionRange"],
        range(1, 17, 20),
        "{}",
        out[3]
    );
    assert_eq!(
        out[4]["result"],
        json!([{"kind": 12, "name": "add", "location": {"uri": "lib.ts", "range": {"start": {"line": 1, "character": 1}, "end": {"line": 3, "character": 2}}}}]),
        "{}",
        out[4]
    );
    let broken = &out[5]["diagnostics"];
    assert_eq!(broken["status"], "errors", "{}", out[5]);
    let error = &broken["errors"][0];
    assert_eq!(
        (
            error["path"].as_str(),
            error["line"].as_u64(),
            error["character"].as_u64()
        ),
        (Some("main.ts"), Some(3), Some(37)),
        "{broken}"
    );
    assert_eq!(error["code"], "2345", "{broken}");
    assert_eq!(
        out[6]["diagnostics"],
        json!({"status": "clean", "errors": []}),
        "{}",
        out[6]
    );
}

const C_HEADER: &str = "int add(int a, int b);\n";
const C_LIB: &str = "#include \"util.h\"\n\nint add(int a, int b) { return a + b; }\n";
const C_MAIN: &str = "#include \"util.h\"\n\nint main(void) { return add(1, 2); }\n";

#[test]
fn clangd_answers_each_operation_and_diagnoses_an_edit_and_its_fix() {
    let clangd = needed(PathBuf::from("/usr/bin/clangd"), "apt-get install clangd");
    let ws = workspace();
    put(&ws, "util.h", C_HEADER);
    put(&ws, "util.c", C_LIB);
    put(&ws, "main.c", C_MAIN);
    let lsp = format!(
        "c = {{ command = {{ \"{clangd}\", \"--background-index=false\", \"--log=error\" }}, extensions = {{ \".c\", \".h\" }} }}"
    );
    let pol = lsp_policy(&ws, &[], &lsp);
    let out = run(
        &ws,
        &pol,
        r#"
call{operation = "diagnostics", path = "main.c"}
call{operation = "definition", path = "main.c", line = 3, character = 25}
call{operation = "references", path = "main.c", line = 3, character = 25}
call{operation = "hover", path = "main.c", line = 3, character = 25}
call{operation = "documentSymbols", path = "util.c"}
call{operation = "workspaceSymbols", query = "add"}
local r, e = sluice.edit{path = "main.c", oldString = 'add(1, 2)', newString = 'add(1, 2, 3)'}
emit(r or e)
r, e = sluice.edit{path = "main.c", oldString = 'add(1, 2, 3)', newString = 'add(1, 2)'}
emit(r or e)
"#,
    );
    // Asked first, it also waits until clangd has built the file with its
    // header: a definition asked earlier is answered without the header.
    assert_eq!(out[0], json!({"result": [], "server": "c"}));
    assert_eq!(
        out[1]["result"],
        json!([{"uri": "util.h", "range": range(1, 5, 8)}]),
        "{}",
        out[1]
    );
    assert_eq!(
        out[2]["result"],
        json!([{"uri": "main.c", "range": range(3, 25, 28)}]),
        "{}",
        out[2]
    );
    let hover = out[3]["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_default();
    assert!(
        hover.starts_with("### function `add`") && hover.contains("int add(int a, int b)"),
        "{}",
        out[3]
    );
    assert_eq!(out[4]["result"][0]["name"], "add", "{}", out[4]);
    assert_eq!(
        out[4]["result"][0]["selectionRange"],
        range(3, 5, 8),
        "{}",
        out[4]
    );
    assert_eq!(out[5]["result"][0]["name"], "add", "{}", out[5]);
    assert_eq!(
        out[5]["result"][0]["location"],
        json!({"uri": "util.c", "range": range(3, 5, 8)}),
        "{}",
        out[5]
    );
    let broken = &out[6]["diagnostics"];
    assert_eq!(broken["status"], "errors", "{}", out[6]);
    let error = &broken["errors"][0];
    assert_eq!(
        (
            error["path"].as_str(),
            error["line"].as_u64(),
            error["character"].as_u64()
        ),
        (Some("main.c"), Some(3), Some(35)),
        "{broken}"
    );
    assert_eq!(error["code"], "typecheck_call_too_many_args", "{broken}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("Too many arguments to function call, expected 2, have 3"),
        "{broken}"
    );
    assert_eq!(
        out[7]["diagnostics"],
        json!({"status": "clean", "errors": []}),
        "{}",
        out[7]
    );
}

// Hostile servers.

fn fake_server() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/lsp/fake_server.py")
        .display()
        .to_string()
}

/// Declares `bad` (fake server in `mode`, with `args`) for `.bad` files
/// and a well-behaved one for `.good` files, each waiting `timeout_ms`.
fn hostile(ws: &Workspace, mode: &str, args: &[&str], timeout_ms: u64) -> String {
    let script = fake_server();
    let argv = |mode: &str, args: &[&str]| {
        [mode]
            .iter()
            .chain(args)
            .map(|a| format!("\"{a}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let lsp = format!(
        "bad = {{ command = {{ \"/usr/bin/python3\", \"{script}\", {} }}, extensions = {{ \".bad\" }}, timeoutMs = {timeout_ms} }},\n    good = {{ command = {{ \"/usr/bin/python3\", \"{script}\", {} }}, extensions = {{ \".good\" }}, timeoutMs = {timeout_ms} }}",
        argv(mode, args),
        argv("good", &[]),
    );
    put(ws, "x.bad", "one\n");
    put(ws, "x.good", "one\n");
    let folder = Path::new(&script).parent().unwrap().display().to_string();
    lsp_policy(ws, &[folder], &lsp)
}

const HOVER_BAD: &str = "call{operation = \"hover\", path = \"x.bad\", line = 1, character = 1}\n";
const HOVER_GOOD: &str =
    "call{operation = \"hover\", path = \"x.good\", line = 1, character = 1}\n";

#[test]
fn a_server_that_never_answers_times_out_and_an_edit_still_succeeds_with_status_timeout() {
    let ws = workspace();
    let pol = hostile(&ws, "silent", &[], 1500);
    let out = run(
        &ws,
        &pol,
        &format!("{HOVER_BAD}local r, e = sluice.edit{{path = \"x.bad\", oldString = \"one\", newString = \"two\"}}\nemit(r or e)\n{HOVER_GOOD}"),
    );
    assert_eq!(out[0]["code"], "timeout", "{}", out[0]);
    assert_eq!(out[0]["server"], "bad");
    assert_eq!(out[1]["replacements"], 1, "{}", out[1]);
    assert_eq!(
        out[1]["diagnostics"],
        json!({"status": "timeout", "errors": [], "reason": "language server bad did not answer initialize within 1500 ms; raise timeoutMs if it is still indexing"})
    );
    assert_eq!(std::fs::read_to_string(ws.file("x.bad")).unwrap(), "two\n");
    assert_eq!(
        out[2]["result"]["contents"]["value"], "fine",
        "the control: {}",
        out[2]
    );
}

/// The largest the sluice process grew (VmHWM, in KiB), as it reads it.
const PEAK: &str = r#"
local r, e = sluice.read{path = "/proc/self/status"}
emit(r and {peak = tonumber(r.content:match("VmHWM:%s*(%d+)"))} or e)
"#;

#[test]
fn a_server_flooding_frames_is_answered_with_bounded_memory() {
    let ws = workspace();
    let pol = hostile(&ws, "flood", &[], 60_000);
    let out = run(&ws, &pol, &format!("{HOVER_BAD}{HOVER_GOOD}{PEAK}"));
    assert_eq!(out[0]["result"]["contents"]["value"], "fine", "{}", out[0]);
    assert_eq!(
        out[1]["result"]["contents"]["value"], "fine",
        "the control: {}",
        out[1]
    );
    let peak_kib = out[2]["peak"].as_u64().unwrap();
    assert!(
        peak_kib < 150 * 1024,
        "sluice grew to {peak_kib} KiB reading 200 MB of frames"
    );
}

#[test]
fn a_100_mb_frame_is_refused_unread_with_bounded_memory() {
    let ws = workspace();
    let pol = hostile(&ws, "huge", &[], 60_000);
    let out = run(&ws, &pol, &format!("{HOVER_BAD}{HOVER_GOOD}{PEAK}"));
    assert_eq!(out[0]["code"], "command_failed", "{}", out[0]);
    let message = out[0]["message"].as_str().unwrap();
    assert!(
        message.contains("a frame of 104857600 bytes, over the 8 MiB limit"),
        "{message}"
    );
    assert_eq!(
        out[1]["result"]["contents"]["value"], "fine",
        "the control: {}",
        out[1]
    );
    let peak_kib = out[2]["peak"].as_u64().unwrap();
    assert!(peak_kib < 100 * 1024, "sluice grew to {peak_kib} KiB");
}

#[test]
fn a_crashing_server_is_restarted_once_then_fails_with_its_stderr() {
    let ws = workspace();
    let pol = hostile(&ws, "crash", &[], 10_000);
    let out = run(
        &ws,
        &pol,
        &format!("{HOVER_BAD}{HOVER_BAD}{HOVER_GOOD}local r, e = sluice.edit{{path = \"x.bad\", oldString = \"one\", newString = \"two\"}}\nemit(r or e)\n"),
    );
    assert_eq!(out[0]["code"], "command_failed", "{}", out[0]);
    assert_eq!(
        out[0]["restarts"], 1,
        "it was started twice for the first call: {}",
        out[0]
    );
    let stderr = out[0]["stderr"].as_str().unwrap();
    assert!(
        stderr.starts_with("crash server ") && stderr.ends_with(" is going down\n"),
        "{stderr:?}"
    );
    assert_eq!(out[1]["code"], "command_failed", "{}", out[1]);
    assert!(
        out[1]["message"]
            .as_str()
            .unwrap()
            .contains("not started again"),
        "{}",
        out[1]
    );
    assert_eq!(
        out[2]["result"]["contents"]["value"], "fine",
        "the control: {}",
        out[2]
    );
    // An edit of its file still lands, and says why nothing checked it.
    assert_eq!(out[3]["replacements"], 1, "{}", out[3]);
    let diagnostics = &out[3]["diagnostics"];
    assert_eq!(diagnostics["status"], "unchecked", "{diagnostics}");
    let reason = diagnostics["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("language server bad failed: it died again after its restart")
            && reason.contains("; its standard error ends: crash server ")
            && reason.ends_with(" is going down"),
        "{reason}"
    );
}

#[test]
fn a_server_cannot_write_outside_its_cache_nor_reach_the_network() {
    for runner in ["bwrap", "landlock"] {
        escape_attempt_fails_under(runner);
    }
}

fn escape_attempt_fails_under(runner: &str) {
    let ws = workspace();
    // Not under /tmp, which is the server's own private folder under
    // bubblewrap (its cache): a write there never reaches the host's.
    let outside = PathBuf::from(format!(
        "/var/tmp/sluice-lsp-escape-{}.txt",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&outside);
    let inside = ws.file("escaped.txt");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let (o, i) = (outside.display().to_string(), inside.display().to_string());
    let pol = hostile(&ws, "escape", &[&o, &i, &port], 20_000);
    let out = run_confined_by(&ws, &pol, &format!("{HOVER_BAD}{HOVER_GOOD}"), runner);
    let said = out[0]["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_default();
    assert!(
        said.starts_with("write failed: ")
            && said.contains("; write failed: ")
            && said.contains("; connect failed: "),
        "{runner}: {}",
        out[0]
    );
    assert!(!outside.exists() && !inside.exists(), "{runner}");
    assert!(
        listener.accept().is_err(),
        "{runner}: the listener saw a connection"
    );
    assert_eq!(
        out[1]["result"]["contents"]["value"], "fine",
        "{runner}: the control: {}",
        out[1]
    );
}

#[test]
fn launchers_and_servers_inside_the_workspace_are_refused_before_the_run() {
    let ws = workspace();
    put(&ws, "bin/server", "#!/bin/sh\n");
    let cases = [
        (
            "x = { command = { \"sh\", \"-c\", \"pyls\" }, extensions = { \".x\" } }",
            "lsp.lua: lsp.x.command starts sh, a launcher",
        ),
        (
            "x = { command = { \"/usr/bin/env\", \"pyls\" }, extensions = { \".x\" } }",
            "lsp.x.command starts /usr/bin/env, a launcher",
        ),
        (
            "x = { command = { \"npx\", \"pyright\" }, extensions = { \".x\" } }",
            "lsp.x.command starts npx, a launcher",
        ),
        (
            "x = { command = { \"bin/server\" }, extensions = { \".x\" } }",
            "is inside the workspace",
        ),
        (
            "x = { command = { \"/usr/bin/python3\", \"bin/server\" }, extensions = { \".x\" } }",
            "is inside the workspace",
        ),
        (
            "x = { command = { \"pyls\" }, extensions = { \".x\" }, cmd = 1 }",
            "lsp.x.cmd is not a field of a language server",
        ),
    ];
    for (lsp, said) in cases {
        let pol = lsp_policy(&ws, &[], lsp);
        let run = run_lua_with(
            ws.path(),
            "print('ran')",
            &["--policy", "default", "--policy", &pol],
            &[],
        );
        assert_ne!(run.code, 0, "{lsp}");
        assert!(run.stderr.contains(said), "{lsp}: {}", run.stderr);
        assert!(!run.stdout.contains("ran"));
    }
    let flag = run_lua_with(
        ws.path(),
        "print('ran')",
        &["--lsp", "x=.x:bash -c pyls"],
        &[],
    );
    assert!(
        flag.stderr
            .contains("--lsp: lsp.x.command starts bash, a launcher"),
        "{}",
        flag.stderr
    );
}

#[test]
fn a_server_answering_an_open_and_a_change_with_one_versionless_publish_is_followed_not_timed_out()
{
    // The document is opened by a hover and never answered on its own;
    // the edit's change is answered once, for both. Waiting for a second
    // publish would time out; the one that came is the edit's.
    let ws = workspace();
    let pol = hostile(&ws, "coalesce", &[], 8_000);
    let out = run(
        &ws,
        &pol,
        &format!("{HOVER_BAD}local r, e = sluice.edit{{path = \"x.bad\", oldString = \"one\", newString = \"bad\"}}\nemit(r or e)\nr, e = sluice.edit{{path = \"x.bad\", oldString = \"bad\", newString = \"one\"}}\nemit(r or e)\n"),
    );
    assert_eq!(out[0]["result"]["contents"]["value"], "fine", "{}", out[0]);
    assert_eq!(
        out[1]["diagnostics"],
        json!({"status": "errors", "errors": [{"path": "x.bad", "line": 1, "character": 1, "message": "bad is not allowed"}]}),
        "{}",
        out[1]
    );
    assert_eq!(
        out[2]["diagnostics"],
        json!({"status": "clean", "errors": []}),
        "{}",
        out[2]
    );
}
