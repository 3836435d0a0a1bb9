//! Attacks on `sluice.lsp` through the real binary: hostile language
//! servers (tests/lsp/hostile_server.py) pointing at files outside the
//! workspace or hidden by the policy, leaving their confinement, breaking
//! the protocol; and declarations that would start a launcher or code the
//! run's calls can write. Each beside a control that must still work.

mod common;

use common::*;
use serde_json::Value;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

fn hostile_server() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/lsp/hostile_server.py")
        .display()
        .to_string()
}

fn put(ws: &Workspace, rel: &str, text: &str) {
    let path = ws.file(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn quoted(args: &[&str]) -> String {
    args.iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A policy declaring `bad` (the hostile server with `args`, `extra`
/// fields) for `.bad` files and a well-behaved `good` for `.good` files,
/// with `rules` added to the tests' usual ones.
fn hostile(ws: &Workspace, args: &[&str], extra: &str, rules: &str) -> String {
    let script = hostile_server();
    let folder = Path::new(&script).parent().unwrap().display().to_string();
    put(ws, "x.bad", "one\n");
    put(ws, "x.good", "one\n");
    policy(
        ws,
        "lsp.lua",
        &format!(
            r#"local p = require("sluice.policy")
return {{
  rules = {{ p.allow("fs:read:{folder}/**"), p.allow("fs:write:${{workspace}}/**"), p.allow("fs:read:/proc/**"), {rules} }},
  lsp = {{
    bad = {{ command = {{ "/usr/bin/python3", "{script}", {} }}, extensions = {{ ".bad" }}, timeoutMs = 5000, {extra} }},
    good = {{ command = {{ "/usr/bin/python3", "{script}", "good" }}, extensions = {{ ".good" }} }},
  }},
}}
"#,
            quoted(args)
        ),
    )
}

/// Runs `body` under the default policy and `pol`, failing if the run
/// takes over `limit`; each stdout line as JSON.
fn run_within(ws: &Workspace, pol: &str, body: &str, limit: Duration) -> Vec<Value> {
    run_within_under(ws, pol, body, limit, "auto")
}

/// [`run_within`] with servers confined by `runner` (`--sandbox`).
fn run_within_under(
    ws: &Workspace,
    pol: &str,
    body: &str,
    limit: Duration,
    runner: &str,
) -> Vec<Value> {
    let mut child = spawn_lua_with(
        ws.path(),
        &format!(
            "{EMIT}local function call(i) local r, e = sluice.lsp(i) emit(r or e) end\n{body}"
        ),
        &["--sandbox", runner, "--policy", "default", "--policy", pol],
        &[],
    );
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    let status = exit_within(&mut child, limit);
    let out = reader.join().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status}: {err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

const HOVER_BAD: &str = "call{operation = \"hover\", path = \"x.bad\", line = 1, character = 1}\n";
const HOVER_GOOD: &str =
    "call{operation = \"hover\", path = \"x.good\", line = 1, character = 1}\n";
const DEFINITION_BAD: &str =
    "call{operation = \"definition\", path = \"x.bad\", line = 1, character = 1}\n";

/// The largest the sluice process grew (VmHWM, in KiB).
const PEAK: &str = r#"
local r, e = sluice.read{path = "/proc/self/status"}
emit(r and {peak = tonumber(r.content:match("VmHWM:%s*(%d+)"))} or e)
"#;

fn fine(v: &Value) {
    assert_eq!(v["result"]["contents"]["value"], "fine", "the control: {v}");
}

// 1. Answers pointing at files sluice must not read to convert columns.

/// Where a location at protocol character 4 on line 0 lands, in sluice's
/// characters: 5 when the file was not read (the offset taken as given),
/// 3 when it was read and its line begins with two 2-unit characters.
fn character_of(result: &Value, shown: &str) -> u64 {
    let entry = result
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["uri"] == shown)
        .unwrap_or_else(|| panic!("no {shown} in {result}"));
    assert_eq!(entry["range"]["start"]["line"], 1, "{entry}");
    entry["range"]["start"]["character"].as_u64().unwrap()
}

#[test]
fn locations_in_a_fifo_dev_zero_a_huge_or_a_hidden_file_neither_hang_nor_read_nor_leak() {
    let ws = workspace();
    // Two characters of two UTF-16 units each, then text: a line read
    // turns the protocol's offset 4 into character 3.
    let line = "\u{1D11E}\u{1D11E}secret\n";
    put(&ws, "secret/key.txt", line);
    put(&ws, "control.txt", line);
    let fifo = ws.file("pipe.txt");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let huge = ws.file("huge.txt");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len(64 << 20).unwrap();
    let uri = |p: &Path| format!("file://{}", p.display());
    let uris = [
        uri(&fifo),
        "file:///dev/zero".to_string(),
        uri(&huge),
        uri(&ws.file("secret/key.txt")),
        uri(&ws.file("control.txt")),
    ];
    let mut args = vec!["points"];
    args.extend(uris.iter().map(String::as_str));
    let pol = hostile(&ws, &args, "", "p.deny(\"fs:read:${workspace}/secret/**\")");
    let out = run_within(
        &ws,
        &pol,
        &format!("{DEFINITION_BAD}{HOVER_GOOD}{PEAK}"),
        Duration::from_secs(60),
    );
    let result = &out[0]["result"];
    assert_eq!(out[0]["server"], "bad", "{}", out[0]);
    assert_eq!(character_of(result, "pipe.txt"), 5, "a FIFO is not read");
    assert_eq!(character_of(result, "/dev/zero"), 5, "a device is not read");
    assert_eq!(
        character_of(result, "huge.txt"),
        5,
        "a huge file is not read"
    );
    assert_eq!(
        character_of(result, "secret/key.txt"),
        5,
        "a file the policy hides is not read: its characters would show"
    );
    assert_eq!(
        character_of(result, "control.txt"),
        3,
        "the control: a readable file's columns are converted"
    );
    fine(&out[1]);
    let peak_kib = out[2]["peak"].as_u64().unwrap();
    assert!(peak_kib < 100 * 1024, "sluice grew to {peak_kib} KiB");
}

// 2. Declarations that would start a launcher or the workspace's code.

/// Builds a run declaring server `x` as `lsp` under `env`: its stderr
/// when the run was refused before the script ran.
fn refused_declaration(ws: &Workspace, lsp: &str, env: &[(&str, &str)]) -> String {
    let pol = policy(
        ws,
        "decl.lua",
        &format!("local p = require(\"sluice.policy\")\nreturn {{ rules = {{}}, lsp = {{ x = {{ {lsp} }} }} }}\n"),
    );
    let run = run_lua_env(
        ws.path(),
        "print('ran')",
        &["--policy", "default", "--policy", &pol],
        &[],
        env,
    );
    assert_ne!(run.code, 0, "{lsp}: ran: {}", run.stdout);
    assert!(!run.stdout.contains("ran"), "{lsp}");
    assert!(
        run.stderr.contains("lsp.x.command"),
        "{lsp}: the error names the field: {}",
        run.stderr
    );
    run.stderr
}

#[test]
fn launchers_behind_another_name_and_workspace_code_reached_another_way_are_refused() {
    let ws = workspace();
    let tools = ws.path().parent().unwrap().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    let link = |name: &str, to: &Path| {
        let p = tools.join(name);
        let _ = std::fs::remove_file(&p);
        std::os::unix::fs::symlink(to, &p).unwrap();
        p.display().to_string()
    };
    put(&ws, "bin/server", "#!/bin/sh\n");
    std::fs::set_permissions(
        ws.file("bin/server"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    put(&ws, "pkg/__main__.py", "print('workspace code')\n");
    let mysh = link("mysh", Path::new("/bin/sh"));
    let myenv = link("lsp-env", Path::new("/usr/bin/env"));
    let ash = link("ash", Path::new("/usr/bin/busybox"));
    let into = link("srv", &ws.file("bin/server"));
    let cases = [
        (format!("\"{mysh}\", \"-s\""), "a launcher"),
        (
            format!("\"{myenv}\", \"-S\", \"python3 evil.py\""),
            "a launcher",
        ),
        (format!("\"{ash}\""), "a launcher"),
        (
            format!("\"{into}\", \"--stdio\""),
            "is inside the workspace",
        ),
        ("\"./bin/server\"".to_string(), "is inside the workspace"),
        (
            "\"/usr/bin/python3\", \"pkg\"".to_string(),
            "is inside the workspace",
        ),
        (
            "\"/usr/bin/node\", \".\"".to_string(),
            "is inside the workspace",
        ),
    ];
    for (command, said) in &cases {
        let lsp = format!("command = {{ {command} }}, extensions = {{ \".x\" }}");
        let err = refused_declaration(&ws, &lsp, &[]);
        assert!(err.contains(said), "{command}: {err}");
    }
    // A PATH entry inside the workspace finds the workspace's program.
    let path = format!("{}:/usr/bin:/bin", ws.file("bin").display());
    let err = refused_declaration(
        &ws,
        "command = { \"server\" }, extensions = { \".x\" }",
        &[("PATH", &path)],
    );
    assert!(err.contains("is inside the workspace"), "{err}");
}

#[test]
fn a_declared_path_or_the_working_folder_never_lets_the_workspace_stand_in_for_the_program() {
    let ws = workspace();
    // A `python3` and a module in the workspace, each saying it ran.
    put(
        &ws,
        "bin/python3",
        "#!/bin/sh\necho workspace python ran >&2\nexit 7\n",
    );
    std::fs::set_permissions(
        ws.file("bin/python3"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    put(
        &ws,
        "evil.py",
        &std::fs::read_to_string(hostile_server()).unwrap().replace(
            "answer(message, \"fine\")",
            "answer(message, \"workspace module ran\")",
        ),
    );
    let script = hostile_server();
    let path = format!("{}:/usr/bin:/bin", ws.file("bin").display());
    let out = run_within(
        &ws,
        &hostile(
            &ws,
            &["good"],
            &format!("env = {{ PATH = \"{path}\" }}"),
            "",
        )
        .replace("\"/usr/bin/python3\", \"", "\"python3\", \""),
        &format!("{HOVER_BAD}{HOVER_GOOD}"),
        Duration::from_secs(60),
    );
    assert_eq!(
        out[0]["result"]["contents"]["value"], "fine",
        "the program sluice checked is the one started, whatever the server's PATH: {}",
        out[0]
    );
    fine(&out[1]);
    // `python3 -m evil` started in the workspace would import its evil.py.
    let pol = policy(
        &ws,
        "m.lua",
        &format!("local p = require(\"sluice.policy\")\nreturn {{ rules = {{ p.allow(\"fs:read:{}/**\") }}, lsp = {{ bad = {{ command = {{ \"/usr/bin/python3\", \"-m\", \"evil\", \"good\" }}, extensions = {{ \".bad\" }}, timeoutMs = 5000 }} }} }}\n", Path::new(&script).parent().unwrap().display()),
    );
    let out = run_within(&ws, &pol, HOVER_BAD, Duration::from_secs(60));
    assert_ne!(
        out[0]["result"]["contents"]["value"], "workspace module ran",
        "{}",
        out[0]
    );
}

// 3. Confinement: hidden files, memory.

#[test]
fn a_server_cannot_read_what_the_policy_hides_and_dies_past_its_memory_limit() {
    for runner in ["bwrap", "landlock"] {
        hidden_and_memory_hold_under(runner);
    }
}

fn hidden_and_memory_hold_under(runner: &str) {
    let ws = workspace();
    put(&ws, "secret/key.txt", "hunter2\n");
    put(&ws, "open.txt", "visible\n");
    let deny = "p.deny(\"fs:read:${workspace}/secret/**\")";
    let secret = ws.file("secret/key.txt").display().to_string();
    let open = ws.file("open.txt").display().to_string();
    let out = run_within_under(
        &ws,
        &hostile(
            &ws,
            &["reader"],
            &format!("env = {{ READ = \"{secret}\" }}"),
            deny,
        ),
        HOVER_BAD,
        Duration::from_secs(60),
        runner,
    );
    let said = out[0]["result"]["contents"]["value"].as_str().unwrap();
    assert!(said.starts_with("read failed: "), "{}", out[0]);
    let out = run_within_under(
        &ws,
        &hostile(
            &ws,
            &["reader"],
            &format!("env = {{ READ = \"{open}\" }}"),
            deny,
        ),
        HOVER_BAD,
        Duration::from_secs(60),
        runner,
    );
    assert_eq!(
        out[0]["result"]["contents"]["value"], "read: visible\n",
        "the control: {}",
        out[0]
    );
    let out = run_within_under(
        &ws,
        &hostile(&ws, &["hog"], "memoryMb = 128", ""),
        &format!("{HOVER_BAD}{HOVER_GOOD}"),
        Duration::from_secs(60),
        runner,
    );
    assert_eq!(out[0]["code"], "command_failed", "{}", out[0]);
    fine(&out[1]);
}

// 4. Protocol abuse.

#[test]
fn replies_to_ids_never_sent_are_ignored_and_the_real_answer_taken() {
    let ws = workspace();
    let out = run_within(
        &ws,
        &hostile(&ws, &["strays"], "", ""),
        &format!("{HOVER_BAD}{HOVER_BAD}{HOVER_GOOD}"),
        Duration::from_secs(60),
    );
    fine(&out[0]);
    fine(&out[1]);
    fine(&out[2]);
}

#[test]
fn frames_not_utf8_or_not_json_fail_the_call_and_the_run_goes_on() {
    for mode in ["badutf8", "notjson"] {
        let ws = workspace();
        let out = run_within(
            &ws,
            &hostile(&ws, &[mode], "", ""),
            &format!("{HOVER_BAD}{HOVER_GOOD}"),
            Duration::from_secs(60),
        );
        assert_eq!(out[0]["code"], "command_failed", "{mode}: {}", out[0]);
        let message = out[0]["message"].as_str().unwrap();
        assert!(message.contains("not JSON"), "{mode}: {message}");
        fine(&out[1]);
    }
}

#[test]
fn a_server_that_stops_reading_and_sends_requests_for_ever_leaves_sluice_bounded() {
    let ws = workspace();
    // Each of its requests asks for these settings 2000 times over.
    let settings = format!("settings = {{ big = \"{}\" }}", "s".repeat(2000));
    let pol = hostile(&ws, &["nag"], &settings, "");
    let started = std::time::Instant::now();
    let out = run_within(
        &ws,
        &pol,
        &format!("{HOVER_BAD}{HOVER_GOOD}{PEAK}"),
        Duration::from_secs(90),
    );
    assert_eq!(out[0]["code"], "command_failed", "{}", out[0]);
    let message = out[0]["message"].as_str().unwrap();
    assert!(
        message.contains("the server stopped reading its input"),
        "{message}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    fine(&out[1]);
    let peak_kib = out[2]["peak"].as_u64().unwrap();
    assert!(peak_kib < 200 * 1024, "sluice grew to {peak_kib} KiB");
}
