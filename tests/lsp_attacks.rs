//! Attacks on `sluice.lsp` through the real binary: hostile language
//! servers (tests/lsp/hostile_server.py) pointing at files outside the
//! workspace or hidden by the policy, leaving their confinement, breaking
//! the protocol; and declarations that would start a launcher or code the
//! run's calls can write. Each beside a control that must still work.

mod common;

use common::*;
use serde_json::{json, Value};
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
    let mut child = spawn_lua_with(
        ws.path(),
        &format!(
            "{EMIT}local function call(i) local r, e = sluice.lsp(i) emit(r or e) end\n{body}"
        ),
        &["--policy", "default", "--policy", pol],
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
