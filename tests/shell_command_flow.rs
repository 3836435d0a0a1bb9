//! `sluice.shell_command` driven through the real binary: Codex's fields
//! (`command`, `workdir`, `timeout_ms`) and Codex's rendering of the result
//! (exit code, wall time, the interleaved output cut in the middle to a
//! 10,000-token budget), a timeout as exit code 124, and nothing else
//! accepted.

mod common;

use serde_json::{json, Value};
use std::fs;
use std::path::Path;

/// Lua prelude: `emit(v)` and `s(input)`, which calls `sluice.shell_command`
/// and emits `{out = ..., err = ...}`.
const PRELUDE: &str = "local function emit(v) print(sluice.json.encode(v)) end\n\
     local function s(t) local r, e = sluice.shell_command(t) emit({out = r, err = e}) end\n";

/// `s(<input>)` once: `(out, err)`, each JSON null when absent.
fn shell(ws: &Path, input: &str) -> (Value, Value) {
    let run = common::run_lua(ws, &format!("{PRELUDE}s({input})\n"), &[]).ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one emitted line: {:?}", run.stdout);
    let mut v: Value = serde_json::from_str(lines[0]).unwrap();
    (v["out"].take(), v["err"].take())
}

fn shell_ok(ws: &Path, input: &str) -> Value {
    let (out, err) = shell(ws, input);
    assert_eq!(err, Value::Null, "unexpected error for {input}");
    out
}

fn shell_err(ws: &Path, input: &str) -> Value {
    let (out, err) = shell(ws, input);
    assert_eq!(out, Value::Null, "unexpected success for {input}");
    err
}

/// `output` with its `Wall time: S seconds` line (the second) checked to
/// match `Wall time: \d+\.\d seconds` and replaced by `Wall time: W seconds`;
/// also returns S.
fn without_wall_time(output: &str) -> (String, f64) {
    let mut parts: Vec<&str> = output.splitn(3, '\n').collect();
    assert_eq!(parts.len(), 3, "too short: {output:?}");
    let secs = parts[1]
        .strip_prefix("Wall time: ")
        .and_then(|r| r.strip_suffix(" seconds"))
        .unwrap_or_else(|| panic!("not a wall time line: {:?}", parts[1]));
    let (whole, tenths) = secs.split_once('.').expect("one decimal");
    assert!(
        !whole.is_empty() && whole.bytes().all(|b| b.is_ascii_digit()),
        "{secs}"
    );
    assert!(
        tenths.len() == 1 && tenths.bytes().all(|b| b.is_ascii_digit()),
        "{secs}"
    );
    let value: f64 = secs.parse().unwrap();
    parts[1] = "Wall time: W seconds";
    (parts.join("\n"), value)
}

/// Compares long texts without printing all of them on a mismatch.
fn assert_text_eq(got: &str, want: &str) {
    if got != want {
        let at = got
            .bytes()
            .zip(want.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        let from = at.saturating_sub(60);
        panic!(
            "texts differ at byte {at} (got {} bytes, want {}):\n got: {:?}\nwant: {:?}",
            got.len(),
            want.len(),
            String::from_utf8_lossy(&got.as_bytes()[from..(at + 60).min(got.len())]),
            String::from_utf8_lossy(&want.as_bytes()[from..(at + 60).min(want.len())]),
        );
    }
}

#[test]
fn shell_command_renders_exit_code_wall_time_and_output_as_codex_does() {
    let ws = common::workspace();
    let out = shell_ok(ws.path(), r#"{command = "echo hi"}"#);
    assert_eq!(out["exitCode"], 0);
    let (text, secs) = without_wall_time(out["output"].as_str().unwrap());
    assert_eq!(text, "Exit code: 0\nWall time: W seconds\nOutput:\nhi\n");
    assert!(secs < 3.0);
    assert_eq!(
        out.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["exitCode", "output", "sandbox"]
    );
    // The sandbox facts of the default policy: the workspace writable, and
    // enforcement full, its `**/.env` and `**/.git/**` denies expanded in
    // the workspace at spawn; and its resource limits, each enforced by a
    // mechanism of this machine (tests/limits.rs pins which).
    let mut sandbox = out["sandbox"].clone();
    let limits = sandbox.as_object_mut().unwrap().remove("limits").unwrap();
    assert_eq!(
        sandbox,
        json!({"mode": "workspace-write", "network": "closed", "denied": false, "enforcement": "full"})
    );
    for (name, value) in [
        ("memoryMb", 8192),
        ("pids", 2048),
        ("cpuSeconds", 7200),
        ("fileSizeMb", 4096),
    ] {
        assert_eq!(limits[name], value, "{limits}");
        assert!(limits["enforcement"][name].is_string(), "{limits}");
    }
}

#[test]
fn shell_command_nonzero_exit_is_a_value() {
    let ws = common::workspace();
    let out = shell_ok(ws.path(), r#"{command = "echo no; exit 3"}"#);
    assert_eq!(out["exitCode"], 3);
    let (text, _) = without_wall_time(out["output"].as_str().unwrap());
    assert_eq!(text, "Exit code: 3\nWall time: W seconds\nOutput:\nno\n");
}

#[test]
fn shell_command_interleaves_stdout_and_stderr_in_write_order() {
    let ws = common::workspace();
    let out = shell_ok(ws.path(), r#"{command = "echo a; echo b >&2; echo c"}"#);
    assert_eq!(out["exitCode"], 0);
    let (text, _) = without_wall_time(out["output"].as_str().unwrap());
    assert_eq!(
        text,
        "Exit code: 0\nWall time: W seconds\nOutput:\na\nb\nc\n"
    );
}

#[test]
fn shell_command_timeout_is_exit_code_124_as_a_value_with_what_was_printed() {
    let ws = common::workspace();
    let out = shell_ok(
        ws.path(),
        r#"{command = "echo x; sleep 5", timeout_ms = 200}"#,
    );
    assert_eq!(out["exitCode"], 124);
    let (text, secs) = without_wall_time(out["output"].as_str().unwrap());
    let rest = text
        .strip_prefix("Exit code: 124\nWall time: W seconds\nOutput:\ncommand timed out after ")
        .unwrap_or_else(|| panic!("{text:?}"));
    let (ms, rest) = rest.split_once(' ').unwrap();
    assert_eq!(rest, "milliseconds\nx\n");
    let ms: u64 = ms.parse().unwrap();
    assert!((200..2000).contains(&ms), "{ms} ms");
    assert!(secs < 2.0);
}

#[test]
fn shell_command_large_output_keeps_head_and_tail_around_one_token_marker() {
    let ws = common::workspace();
    // 100,000 numbered lines, written at once.
    fs::write(
        ws.file("gen.py"),
        "import sys\nsys.stdout.write(''.join(f'{i}\\n' for i in range(1, 100001)))\n",
    )
    .unwrap();
    let out = shell_ok(ws.path(), r#"{command = "python3 gen.py"}"#);
    assert_eq!(out["exitCode"], 0);
    let whole: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(whole.len(), 588_895);
    // Codex's rule: 40,000 bytes kept, half from each end; the rest counted
    // as ceil(bytes / 4) tokens.
    let removed = (whole.len() - 40_000).div_ceil(4);
    assert_eq!(removed, 137_224);
    let want = format!(
        "Exit code: 0\nWall time: W seconds\nTotal output lines: 100000\nOutput:\n{}\u{2026}{removed} tokens truncated\u{2026}{}",
        &whole[..20_000],
        &whole[whole.len() - 20_000..]
    );
    let (text, _) = without_wall_time(out["output"].as_str().unwrap());
    assert_eq!(text.matches("tokens truncated").count(), 1);
    assert!(
        text.contains("Output:\n1\n2\n3\n"),
        "head starts with line 1: {:?}",
        &text[..150]
    );
    assert!(
        text.ends_with("99999\n100000\n"),
        "tail ends with the last line: {:?}",
        &text[text.len() - 40..]
    );
    assert_text_eq(&text, &want);
}

#[test]
fn shell_command_workdir_is_relative_to_the_workspace() {
    let ws = common::workspace();
    fs::create_dir_all(ws.file("sub/dir")).unwrap();
    let out = shell_ok(ws.path(), r#"{command = "pwd", workdir = "sub/dir"}"#);
    let (text, _) = without_wall_time(out["output"].as_str().unwrap());
    assert_eq!(
        text,
        format!(
            "Exit code: 0\nWall time: W seconds\nOutput:\n{}\n",
            ws.file("sub/dir").display()
        )
    );
    let out = shell_ok(ws.path(), r#"{command = "pwd"}"#);
    let (text, _) = without_wall_time(out["output"].as_str().unwrap());
    assert_eq!(
        text,
        format!(
            "Exit code: 0\nWall time: W seconds\nOutput:\n{}\n",
            ws.path().display()
        )
    );
}

#[test]
fn shell_command_missing_workdir_is_not_found_and_nothing_runs() {
    let ws = common::workspace();
    let marker = ws.file("ran");
    let err = shell_err(
        ws.path(),
        &format!(
            "{{command = \"touch {}\", workdir = \"nope\"}}",
            marker.display()
        ),
    );
    assert_eq!(
        err,
        json!({
            "code": "not_found",
            "field": "workdir",
            "message": format!("working directory {} does not exist; the command did not run", ws.file("nope").display()),
        })
    );
    assert!(!marker.exists());
}

#[test]
fn shell_command_refuses_unknown_fields_naming_them() {
    let ws = common::workspace();
    for (field, value) in [
        ("login", "true"),
        ("sandbox_permissions", "\"require_escalated\""),
        ("justification", "\"please\""),
        ("prefix_rule", "{\"rm\"}"),
        ("timeoutMs", "100"),
    ] {
        let err = shell_err(
            ws.path(),
            &format!("{{command = \"echo hi\", {field} = {value}}}"),
        );
        assert_eq!(
            err,
            json!({
                "code": "invalid_input",
                "field": field,
                "message": format!("shell_command: `{field}`: unknown field `{field}`, expected one of `command`, `workdir`, `timeout_ms`. `sluice flows shell_command` shows every field."),
            }),
            "{field}"
        );
    }
}
