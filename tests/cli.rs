//! The command line: `sluice flows`, `--help` on every subcommand, and how
//! `sluice run` picks its workspace.

mod common;

use common::{script_file, sluice_bin, workspace};
use serde_json::Value;
use std::fs;
use std::process::Command;

fn sluice(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(sluice_bin()).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn flows_json_is_the_manifest_with_the_read_only_set() {
    let (code, stdout, _) = sluice(&["flows", "--json"]);
    assert_eq!(code, 0);
    let m: Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = m["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
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
            "test",
            "lsp",
            "update_plan",
            "explore"
        ]
    );
    assert_eq!(
        m["readOnly"],
        serde_json::json!([
            "read",
            "ls",
            "glob",
            "grep",
            "fetch",
            "webfetch",
            "lsp",
            "update_plan",
            "explore"
        ])
    );
    let tiers: Vec<&str> = m["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["tier"].as_str().unwrap())
        .collect();
    assert_eq!(
        tiers,
        [
            "sealed",
            "compensable",
            "compensable",
            "compensable",
            "sealed",
            "sealed",
            "sealed",
            "irreversible",
            "irreversible",
            "sealed",
            "irreversible",
            "sealed",
            "sealed",
            "sealed",
            "irreversible",
            "sealed",
            "sealed",
            "sealed"
        ]
    );
    let edit = &m["flows"][2];
    assert_eq!(
        edit["capabilities"],
        serde_json::json!(["fs:read", "fs:write"])
    );
    assert_eq!(
        edit["inputSchema"]["required"],
        serde_json::json!(["path", "newString"])
    );
    assert_eq!(edit["inputSchema"]["additionalProperties"], false);
}

#[test]
fn flows_json_shows_each_flows_output_schema() {
    let (code, stdout, _) = sluice(&["flows", "--json"]);
    assert_eq!(code, 0);
    let m: Value = serde_json::from_str(&stdout).unwrap();
    for f in m["flows"].as_array().unwrap() {
        let out = &f["outputSchema"];
        assert!(
            out["type"] == "object" || out["oneOf"].is_array(),
            "{}: {out}",
            f["name"]
        );
    }
    let read = &m["flows"][0]["outputSchema"];
    assert_eq!(read["additionalProperties"], false);
    assert_eq!(
        read["required"],
        serde_json::json!(["content", "startLine", "endLine", "totalLines", "truncated"])
    );
    assert!(read["properties"]["notice"]["description"].is_string());
    let (code, stdout, _) = sluice(&["flows", "grep"]);
    assert_eq!(code, 0);
    let grep: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        grep["outputSchema"]["properties"]["matches"]["items"]["title"],
        "GrepMatch"
    );
}

#[test]
fn flows_lua_prints_the_checked_in_annotations() {
    let (code, stdout, _) = sluice(&["flows", "--lua"]);
    assert_eq!(code, 0);
    let checked_in =
        fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/sluice.d.lua")).unwrap();
    assert!(
        stdout == checked_in,
        "lua/sluice.d.lua is stale: regenerate it with `cargo run -q -- flows --lua > lua/sluice.d.lua`"
    );
}

#[test]
fn run_help_names_every_flow_of_the_manifest() {
    let (code, stdout, _) = sluice(&["run", "--help"]);
    assert_eq!(code, 0);
    for f in sluice::manifest()["flows"].as_array().unwrap() {
        let lua = format!("sluice.{}", f["name"].as_str().unwrap().replace('-', "_"));
        assert!(
            stdout.contains(&format!("{lua},")) || stdout.contains(&format!("{lua} (")),
            "{lua} missing from:\n{stdout}"
        );
    }
}

#[test]
fn flows_table_has_a_row_per_flow() {
    let (code, stdout, _) = sluice(&["flows"]);
    assert_eq!(code, 0);
    let rows: Vec<&str> = stdout.lines().collect();
    assert!(rows[0].starts_with("FLOW"), "{stdout}");
    assert!(
        rows[1].starts_with("read          sealed       fs:read "),
        "{stdout}"
    );
    assert!(
        rows[3].starts_with("edit          compensable  fs:read,fs:write "),
        "{stdout}"
    );
    assert_eq!(
        *rows.last().unwrap(),
        "read-only seat: read, ls, glob, grep, fetch, webfetch, lsp, update_plan, explore"
    );
}

#[test]
fn flows_name_shows_one_schema_and_unknown_names_exit_2() {
    let (code, stdout, _) = sluice(&["flows", "read"]);
    assert_eq!(code, 0);
    let f: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(f["name"], "read");
    assert!(f["inputSchema"]["properties"]["offset"].is_object());
    let (code, _, stderr) = sluice(&["flows", "teleport"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("no flow named \"teleport\"; the flows are: read, write, edit, apply_patch, ls, glob, grep, bash, shell_command, fetch, http-post, webfetch, websearch"));
}

#[test]
fn every_subcommand_help_teaches_with_an_example() {
    for args in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["flows", "--help"],
    ] {
        let (code, stdout, _) = sluice(&args);
        assert_eq!(code, 0, "{args:?}");
        assert!(
            stdout.contains("Examples:\n  sluice "),
            "{args:?}: {stdout}"
        );
    }
}

#[test]
fn run_defaults_the_workspace_to_the_current_folder() {
    let ws = workspace();
    let script = script_file(
        ws.path(),
        "print(sluice.workspace); sluice.write{path = 'here.txt', content = 'x'}",
    );
    let out = Command::new(sluice_bin())
        .arg("run")
        .arg(&script)
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        fs::canonicalize(ws.path()).unwrap().display().to_string()
    );
    assert_eq!(fs::read_to_string(ws.path().join("here.txt")).unwrap(), "x");
}

#[test]
fn a_missing_workspace_exits_2_and_says_what_to_give() {
    let ws = workspace();
    let script = script_file(ws.path(), "print('never')");
    let missing = ws.path().join("nope");
    let (code, stdout, stderr) = sluice(&[
        "run",
        script.to_str().unwrap(),
        "--workspace",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert_eq!(stdout, "");
    assert!(
        stderr.contains("Give an existing folder with --workspace DIR."),
        "{stderr}"
    );
}

#[test]
fn a_missing_script_exits_1_naming_it() {
    let ws = workspace();
    let (code, _, stderr) = sluice(&[
        "run",
        "/nonexistent/x.lua",
        "--workspace",
        ws.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("cannot read script /nonexistent/x.lua"),
        "{stderr}"
    );
}

#[test]
fn the_readme_example_runs_and_reports_each_step() {
    let ws = workspace();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/hello.lua");
    let (code, stdout, stderr) =
        sluice(&["run", example, "--workspace", ws.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("write: 56 bytes to notes/todo.md (created: true)"),
        "{stdout}"
    );
    assert!(stdout.contains("edit by text: 1 replacement"), "{stdout}");
    assert!(
        stdout.contains("a missed anchor: no_match (nearest region: lines 3-4 hold:)"),
        "{stdout}"
    );
    assert!(stdout.contains("ls: todo.md (file)\n"), "{stdout}");
    assert!(
        stdout.ends_with("bash: 3 items in the list (exit 0)\n"),
        "{stdout}"
    );
    assert_eq!(
        fs::read_to_string(ws.path().join("notes/todo.md")).unwrap(),
        "# Todo\n\n- write the report\n- [x] review the patch\n- ship it on Friday\n"
    );
}
