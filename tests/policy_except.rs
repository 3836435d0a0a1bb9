//! Deny rules with `except`: `p.deny(PATTERN, reason, {except = {...}})`
//! takes what the except names out of that deny alone. It allows nothing by
//! itself (the capability goes on to the other denies, allow, ask and
//! `otherwise`), it must select the deny's own actions and name something
//! the deny names, and only a deny may have one. Commands cannot be given
//! the carved-out subtree (a mount cannot hide a tree but one subtree), so
//! their results say `enforcement = "partial"`, naming the rule.

mod common;

use common::*;
use serde_json::Value;
use std::fs;
use std::process::Command;

/// A policy that denies writing `src/` but `src/generated/`, and otherwise
/// opens the workspace to reads and writes, and commands.
const CARVED: &str = r#"local p = require("sluice.policy")
return {
  rules = {
    p.programs,
    p.deny("fs:write:${workspace}/src/**", "sources are reviewed",
           {except = {"fs:write:${workspace}/src/generated/**"}}),
    p.deny("fs:write:**/*.lock", "lock files are the package manager's"),
    p.allow "fs:read:${workspace}", p.allow "fs:read:${workspace}/**",
    p.allow "fs:write:${workspace}", p.allow "fs:write:${workspace}/**",
    p.allow "proc:spawn:*",
  },
  otherwise = "deny",
}
"#;

/// A workspace with `src/generated/` and `out/` folders and the policy.
fn carved() -> (Workspace, String) {
    let ws = workspace();
    fs::create_dir_all(ws.file("src/generated")).unwrap();
    fs::create_dir_all(ws.file("out")).unwrap();
    fs::write(ws.file("src/lib.rs"), "old\n").unwrap();
    fs::write(ws.file("src/generated/api.rs"), "old\n").unwrap();
    let pol = policy(&ws, "carved.lua", CARVED);
    (ws, pol)
}

fn by(pol: &str, rule: &str, at: &str) -> String {
    format!("deny \"{rule}\" ({at} of {pol})")
}

#[test]
fn file_flows_write_inside_the_exception_and_are_denied_the_rest_of_the_tree() {
    let (ws, pol) = carved();
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"try("write", {path = "src/generated/new.rs", content = "made\n"})
try("edit", {path = "src/generated/api.rs", oldString = "old", newString = "new"})
try("write", {path = "src/new.rs", content = "made\n"})
try("edit", {path = "src/lib.rs", oldString = "old", newString = "new"})
try("read", {path = "src/lib.rs"})
try("write", {path = "src/generated/deps.lock", content = "x"})"#,
    );
    let src = "fs:write:${workspace}/src/**";
    let reviewed = "sources are reviewed";
    let cap = |rel: &str| format!("fs:write:{}", ws.file(rel).display());
    assert_eq!(
        out,
        vec![
            serde_json::json!({"ok": "write"}),
            serde_json::json!({"ok": "edit"}),
            denied(&cap("src/new.rs"), &by(&pol, src, "rules[2]"), reviewed),
            denied(&cap("src/lib.rs"), &by(&pol, src, "rules[2]"), reviewed),
            serde_json::json!({"ok": "read"}),
            // The except takes the path out of its own deny only.
            denied(
                &cap("src/generated/deps.lock"),
                &by(&pol, "fs:write:**/*.lock", "rules[3]"),
                "lock files are the package manager's"
            ),
        ]
    );
    assert_eq!(
        fs::read_to_string(ws.file("src/generated/new.rs")).unwrap(),
        "made\n"
    );
    assert_eq!(
        fs::read_to_string(ws.file("src/generated/api.rs")).unwrap(),
        "new\n"
    );
    assert!(!ws.file("src/new.rs").exists());
    assert_eq!(fs::read_to_string(ws.file("src/lib.rs")).unwrap(), "old\n");
}

#[test]
fn an_except_allows_nothing_by_itself() {
    let ws = workspace();
    fs::create_dir_all(ws.file("src/generated")).unwrap();
    // No allow rule opens writes: what the except takes out of the deny
    // falls through to `otherwise`.
    let pol = policy(
        &ws,
        "bare.lua",
        r#"local p = require("sluice.policy")
return {
  rules = {
    p.deny("fs:write:${workspace}/src/**", "sources are reviewed",
           {except = {"fs:write:${workspace}/src/generated/**"}}),
    p.allow "fs:read:${workspace}/**",
  },
  otherwise = "deny",
}
"#,
    );
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"try("write", {path = "src/generated/new.rs", content = "x"})"#,
    );
    let cap = format!("fs:write:{}", ws.file("src/generated/new.rs").display());
    assert_eq!(
        out,
        vec![denied(
            &cap,
            &pol,
            &format!("no rule or hook of the policy matched {cap} (the deny \"fs:write:${{workspace}}/src/**\" (rules[1] of {pol}) does not apply: its except \"fs:write:${{workspace}}/src/generated/**\" names it)")
        )]
    );
    assert!(!ws.file("src/generated/new.rs").exists());
}

/// Python that tries to write each of `paths` and prints what happened.
fn writes(paths: &[&str]) -> String {
    let list: Vec<String> = paths.iter().map(|p| format!("{p:?}")).collect();
    format!(
        "for p in [{}]:\n    try:\n        open(p, 'w').write('x')\n        print(p, 'written')\n    except OSError as e:\n        print(p, 'refused')\n",
        list.join(", ")
    )
}

#[test]
fn commands_keep_the_whole_denied_tree_read_only_and_say_the_except_is_partial() {
    for runner in RUNNERS {
        let (ws, pol) = carved();
        let out = confined_python(
            ws.path(),
            runner,
            &["--policy", &pol],
            &[],
            &writes(&["out/made.txt", "src/generated/made.txt", "src/made.txt"]),
        );
        assert_eq!(
            out["stdout"],
            "out/made.txt written\nsrc/generated/made.txt refused\nsrc/made.txt refused\n",
            "{runner}: {out}"
        );
        assert!(ws.file("out/made.txt").exists(), "{runner}");
        assert!(!ws.file("src/generated/made.txt").exists(), "{runner}");
        assert!(!ws.file("src/made.txt").exists(), "{runner}");
        let sandbox = &out["sandbox"];
        assert_eq!(sandbox["enforcement"], "partial", "{runner}: {out}");
        let note = "the deny \"fs:write:${workspace}/src/**\" (rules[2]) excepts \"fs:write:${workspace}/src/generated/**\", which the sandbox cannot carve out of it: commands get all of what the deny names withheld (read-only, or hidden), the except included; the file flows follow the except";
        let partial: Vec<&str> = sandbox["partial"]
            .as_array()
            .unwrap_or_else(|| panic!("{runner}: {out}"))
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(partial.contains(&note), "{runner}: {partial:?}");
    }
}

#[test]
fn without_an_except_the_same_policy_reports_no_partial_enforcement_for_it() {
    // The control: the note comes from the except, not from the deny.
    for runner in RUNNERS {
        let (ws, _) = carved();
        let plain = policy(
            &ws,
            "plain.lua",
            &CARVED.replace(
                ",\n           {except = {\"fs:write:${workspace}/src/generated/**\"}}",
                "",
            ),
        );
        assert!(!fs::read_to_string(&plain).unwrap().contains("except"));
        let out = confined_python(
            ws.path(),
            runner,
            &["--policy", &plain],
            &[],
            &writes(&["src/generated/made.txt"]),
        );
        assert_eq!(
            out["stdout"], "src/generated/made.txt refused\n",
            "{runner}: {out}"
        );
        let partial = out["sandbox"]["partial"].to_string();
        assert!(!partial.contains("excepts"), "{runner}: {partial}");
    }
}

/// `sluice policy explain ARGS` in `ws`: exit code, stdout, stderr.
fn explain(ws: &Workspace, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(sluice_bin())
        .args(["policy", "explain", "--workspace"])
        .arg(ws.path())
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn explain_names_the_deny_and_the_except_that_took_a_capability_out_of_it() {
    let (ws, pol) = carved();
    let inside = format!("fs:write:{}", ws.file("src/generated/api.rs").display());
    let (code, out, err) = explain(&ws, &["--policy", &pol, &inside]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out,
        format!(
            "capability: {inside}\nflow:       write\ndecision:   allow\n\
             by:         allow \"fs:write:${{workspace}}/**\" (rules[7] of {pol})\n\
             reason:     the policy allows it (the deny \"fs:write:${{workspace}}/src/**\" (rules[2] of {pol}) does not apply: its except \"fs:write:${{workspace}}/src/generated/**\" names it)\n"
        )
    );
    let rest = format!("fs:write:{}", ws.file("src/lib.rs").display());
    let (code, out, _) = explain(&ws, &["--policy", &pol, &rest]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        format!(
            "capability: {rest}\nflow:       write\ndecision:   deny\n\
             by:         deny \"fs:write:${{workspace}}/src/**\" (rules[2] of {pol})\n\
             reason:     sources are reviewed\n"
        )
    );
}

#[test]
fn a_command_deny_with_an_except_leaves_out_the_commands_it_names() {
    let ws = workspace();
    let pol = policy(
        &ws,
        "git.lua",
        r#"local p = require("sluice.policy")
return {
  rules = {
    p.deny("proc:spawn:git *", "git is read-only here", {except = {"proc:spawn:git status *", "proc:spawn:git log *"}}),
    p.allow "proc:spawn:*",
  },
}
"#,
    );
    let decision = |line: &str| {
        let (code, out, err) = explain(&ws, &["--policy", &pol, &format!("proc:spawn:{line}")]);
        assert_eq!(code, 0, "{err}");
        out.lines()
            .find_map(|l| l.strip_prefix("decision:   "))
            .unwrap()
            .to_string()
    };
    assert_eq!(decision("git status"), "allow");
    assert_eq!(decision("git status --short"), "allow");
    assert_eq!(decision("git log -1"), "allow");
    assert_eq!(decision("git push"), "deny");
    assert_eq!(decision("git"), "deny");
    // One part of a line excepted does not carry the rest.
    assert_eq!(decision("git status && git push"), "deny");
    // A program known only at run time meets every command deny, except
    // or not.
    assert_eq!(decision("$G status"), "deny");
}

/// `sluice run` of a script that prints `ran` under the policy `text`.
fn run_under(text: &str) -> Run {
    let ws = workspace();
    let pol = policy(&ws, "bad.lua", text);
    let run = run_lua_with(ws.path(), "print('ran')", &["--policy", &pol], &[]);
    Run {
        stderr: run.stderr.replace(&pol, "POLICY"),
        ..run
    }
}

const RUNNERS: [&str; 2] = ["bwrap", "landlock"];

const P: &str = "local p = require(\"sluice.policy\")\n";

#[test]
fn a_bad_except_is_a_load_error_naming_the_rule() {
    for (rules, message) in [
        (
            r#"p.allow "fs:read:**", p.allow("fs:write:${workspace}/**", nil, {except = {"fs:write:${workspace}/src/**"}})"#,
            "sluice: policy POLICY: rules[2]: allow \"fs:write:${workspace}/**\" has an except, which only a deny rule may have (it carves capabilities out of the deny); narrow the allow rule's pattern instead, or add a deny for what it should leave out\n",
        ),
        (
            r#"p.deny("fs:write:${workspace}/src/**", "why", {except = {"fs:write:src/generated/**"}})"#,
            "sluice: policy POLICY: rules[1]: except[1]: invalid pattern `fs:write:src/generated/**`: the fs resource `src/generated/**` is relative, but fs capabilities name canonical absolute paths; write `${workspace}/src/generated/**` for a path in the workspace, or `**/src/generated/**` to match at any depth\n",
        ),
        (
            r#"p.deny("fs:write:${workspace}/src/**", "why", {except = {"fs:*:${workspace}/src/generated/**"}})"#,
            "sluice: policy POLICY: rules[1]: except[1] \"fs:*:${workspace}/src/generated/**\" selects fs:read, which the deny \"fs:write:${workspace}/src/**\" does not: an except only takes capabilities out of its deny; write it with the deny's action (fs:write)\n",
        ),
        (
            r#"p.deny("fs:write:${workspace}/src/**", "why", {except = {"fs:write:${workspace}/docs/**"}})"#,
            "sluice: policy POLICY: rules[1]: except[1] \"fs:write:${workspace}/docs/**\" names WS/docs/**, which the deny \"fs:write:${workspace}/src/**\" does not name, so it takes nothing out of it; write a path inside what the deny names\n",
        ),
        (
            r#"p.deny("fs:write:${workspace}/src/**", "why", {except = "fs:write:${workspace}/src/gen/**"})"#,
            "sluice: policy POLICY: rules[1]: except is a string; it is a list of patterns: p.deny(\"fs:write:${workspace}/src/**\", \"why\", {except = {\"...\"}})\n",
        ),
    ] {
        let run = run_under(&format!("{P}return {{ rules = {{ {rules} }} }}\n"));
        assert_eq!(run.code, 2, "{rules}: {}", run.stderr);
        assert_eq!(run.stdout, "", "{rules}");
        // The workspace differs per run; the message names it.
        let stderr = run
            .stderr
            .split_whitespace()
            .map(|w| if w.ends_with("/ws/docs/**,") { "WS/docs/**," } else { w })
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(stderr, message.trim_end(), "{rules}");
    }
}

#[test]
fn the_lua_helper_refuses_an_unknown_option() {
    let run = run_under(&format!(
        "{P}return {{ rules = {{ p.deny(\"fs:write\", \"why\", {{excepts = {{}}}}) }} }}\n"
    ));
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("deny(\"fs:write\", reason, options): unknown option excepts; the one option is except = {patterns}"),
        "{}",
        run.stderr
    );
}
