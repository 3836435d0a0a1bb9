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
    // A row per flow and nothing else: no line of words the table does
    // not explain (the manifest's readOnly set is --json's).
    assert_eq!(rows.len(), 1 + 18, "{stdout}");
    assert!(rows.last().unwrap().starts_with("explore "), "{stdout}");
    assert!(!stdout.contains("seat"), "{stdout}");
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

/// The subcommands, in `sluice --help`'s order.
const SUBCOMMANDS: [&str; 18] = [
    "run",
    "flows",
    "policy",
    "audit",
    "replay",
    "resume",
    "doctor",
    "mcp",
    "worker",
    "submit",
    "runs",
    "status",
    "cancel",
    "resolve",
    "asks",
    "answer",
    "completions",
    "man",
];

#[test]
fn every_subcommand_help_teaches_with_an_example() {
    let (code, stdout, _) = sluice(&["--help"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("Examples:\n  sluice "), "{stdout}");
    let listed: Vec<&str> = stdout
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert_eq!(listed, SUBCOMMANDS, "{stdout}");
    for name in SUBCOMMANDS {
        let (code, stdout, _) = sluice(&[name, "--help"]);
        assert_eq!(code, 0, "{name}");
        let examples = stdout
            .split_once("Examples:\n")
            .unwrap_or_else(|| panic!("sluice {name} --help has no examples: {stdout}"))
            .1;
        let block: Vec<&str> = examples
            .lines()
            .take_while(|l| l.starts_with("  "))
            .collect();
        assert!(
            block.iter().any(|l| l.contains(&format!("sluice {name} "))),
            "sluice {name} --help: an example should run it: {block:?}"
        );
    }
}

/// `bash -c SCRIPT` with `sluice completions bash` sourced first; its
/// stdout.
fn in_bash_with_completions(script: &str) -> String {
    let (code, completions, stderr) = sluice(&["completions", "bash"]);
    assert_eq!(code, 0, "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sluice.bash");
    fs::write(&file, completions).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {}\n{script}", file.display()))
        .output()
        .expect("run bash");
    assert!(
        out.status.success(),
        "bash: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_bash_completion_completes_subcommands_and_their_flags() {
    let registered = in_bash_with_completions("complete -p sluice");
    assert!(
        registered.starts_with("complete ")
            && registered.contains(" -F _sluice ")
            && registered.trim_end().ends_with(" sluice"),
        "{registered}"
    );
    // What bash offers at `sluice au<TAB>` and `sluice audit <TAB>`.
    let offer = |words: &str, cword: usize| {
        in_bash_with_completions(&format!(
            "COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}\n\
             _sluice sluice \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"\n\
             printf '%s\\n' \"${{COMPREPLY[@]}}\""
        ))
    };
    assert_eq!(offer("sluice au", 1).lines().collect::<Vec<_>>(), ["audit"]);
    let audit: Vec<String> = offer("sluice audit ''", 2)
        .lines()
        .map(String::from)
        .collect();
    for sub in ["list", "show", "verify", "export"] {
        assert!(audit.iter().any(|w| w == sub), "{sub}: {audit:?}");
    }
    let doctor = offer("sluice doctor --", 2);
    assert!(doctor.lines().any(|w| w == "--image"), "{doctor}");
}

#[test]
fn zsh_and_fish_completions_name_the_subcommands() {
    let (code, zsh, _) = sluice(&["completions", "zsh"]);
    assert_eq!(code, 0);
    assert!(zsh.starts_with("#compdef sluice\n"), "{zsh}");
    let (code, fish, _) = sluice(&["completions", "fish"]);
    assert_eq!(code, 0);
    for name in SUBCOMMANDS {
        assert!(zsh.contains(&format!("'{name}:")), "zsh: {name}");
        assert!(fish.contains(&format!("-a \"{name}\"")), "fish: {name}");
    }
    let (code, _, stderr) = sluice(&["completions", "tcsh"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("[possible values: bash, elvish, fish, powershell, zsh]"),
        "{stderr}"
    );
}

/// `groff -man ARGS` of a roff page: its stdout and stderr.
fn groff(args: &[&str], roff: &str) -> (String, String) {
    use std::io::Write;
    let mut groff = Command::new("groff")
        .arg("-man")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("groff checks the man page: install it with `apt-get install -y groff-base`");
    groff
        .stdin
        .take()
        .unwrap()
        .write_all(roff.as_bytes())
        .unwrap();
    let out = groff.wait_with_output().unwrap();
    assert!(out.status.success());
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// groff's warnings (`-ww`) about a roff page; empty when it is clean.
fn groff_warnings(roff: &str) -> String {
    groff(&["-Tutf8", "-ww", "-z"], roff).1
}

#[test]
fn the_man_page_is_clean_roff_naming_every_subcommand() {
    let (code, page, stderr) = sluice(&["man"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(page.starts_with(".ie \\n(.g .ds Aq \\(aq"), "{page}");
    assert!(page.contains("\n.TH sluice 1 "), "{page}");
    assert_eq!(groff_warnings(&page), "", "{page}");
    let (text, _) = groff(&["-Tutf8", "-P-cbou"], &page);
    assert!(text.contains("SUBCOMMANDS"), "{text}");
    for name in SUBCOMMANDS {
        assert!(
            text.contains(&format!("sluice-{name}(1)")),
            "{name}: {text}"
        );
    }
    assert!(
        text.contains("sluice audit list --workspace /tmp/w"),
        "the examples: {text}"
    );
    // A subcommand's own page.
    let (code, audit, _) = sluice(&["man", "audit"]);
    assert_eq!(code, 0);
    assert!(
        audit.contains("\n.TH sluice-audit 1  \"sluice-audit 0.1.0\""),
        "{audit}"
    );
    assert_eq!(groff_warnings(&audit), "", "{audit}");
    let (code, _, stderr) = sluice(&["man", "teleport"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("no subcommand named \"teleport\"; the subcommands are: run, flows, "),
        "{stderr}"
    );
}

/// Every member of the `sluice` module a script sees is annotated in
/// lua/sluice.d.lua, as a function or a field.
#[test]
fn every_member_of_the_sluice_module_is_in_sluice_d_lua() {
    let ws = workspace();
    let run = common::run_lua(
        ws.path(),
        "local names = {}\nfor k in pairs(sluice) do names[#names + 1] = k end\ntable.sort(names)\nprint(table.concat(names, ' '))\n",
        &[],
    )
    .ok();
    let annotations =
        fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/sluice.d.lua")).unwrap();
    let names: Vec<&str> = run.stdout.split_whitespace().collect();
    assert!(names.contains(&"tools"), "{names:?}");
    let missing: Vec<&&str> = names
        .iter()
        .filter(|n| {
            !annotations.contains(&format!("function sluice.{n}("))
                && !annotations.contains(&format!("\nsluice.{n} = "))
                && !annotations.contains(&format!("\n---@field {n} "))
        })
        .collect();
    assert!(missing.is_empty(), "not in lua/sluice.d.lua: {missing:?}");
}

/// Each `stopReason` a model call gives is explained where a script
/// author looks (`sluice flows model`, and so sluice.d.lua), and each the
/// agent loop gives in lua/sluice/agent.lua's doc of `run`.
#[test]
fn every_stop_reason_is_documented() {
    let (code, stdout, _) = sluice(&["flows", "model"]);
    assert_eq!(code, 0);
    let model: Value = serde_json::from_str(&stdout).unwrap();
    let stop = &model["outputSchema"]["properties"]["stopReason"];
    let values: Vec<&str> = stop["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        values,
        [
            "end_turn",
            "tool_use",
            "max_tokens",
            "stop_sequence",
            "content_filter",
            "other"
        ]
    );
    let said = stop["description"].as_str().unwrap();
    for v in &values {
        assert!(said.contains(&format!("`{v}`, ")), "{v}: {said}");
    }
    let agent =
        fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/sluice/agent.lua")).unwrap();
    let doc = agent
        .split_once("--- Runs the loop.")
        .and_then(|(_, rest)| rest.split_once("function M.run"))
        .unwrap()
        .0;
    // The model's final answers become "final"; the rest pass through.
    let agents = [
        "final",
        "max_turns",
        "budget",
        "max_tokens",
        "content_filter",
        "other",
        "tool_use",
    ];
    for v in agents {
        assert!(doc.contains(&format!("---   \"{v}\" ")), "{v}: {doc}");
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
