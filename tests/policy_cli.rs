//! The policy author's tools: `sluice policy explain` prints the decision on
//! one capability and the rule or hook that made it; `sluice policy test`
//! runs the `test_*` functions of `*_test.lua` files next to policies; and
//! `sluice run`'s policy flags.

mod common;

use common::*;
use serde_json::json;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn sluice(args: &[&str], cwd: &Path) -> Output {
    Command::new(sluice_bin())
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// `sluice policy explain` in `ws`; the output on success.
fn explain(ws: &Workspace, args: &[&str]) -> String {
    let w = ws.path().display().to_string();
    let mut all = vec!["policy", "explain", "--workspace", &w];
    all.extend_from_slice(args);
    let out = sluice(&all, ws.path());
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(text(&out.stderr), "");
    text(&out.stdout)
}

/// The lines explain prints.
fn lines(cap: &str, flow: &str, decision: &str, by: &str, reason: &str) -> String {
    format!(
        "capability: {cap}\nflow:       {flow}\ndecision:   {decision}\nby:         {by}\nreason:     {reason}\n"
    )
}

const EXPLAINED: &str = r#"local p = require("sluice.policy")
return {
  rules = {
    p.deny("fs:*:**/.env", "secrets stay out"),
    p.allow "fs:read:${workspace}/**",
    p.allow "fs:write:${workspace}/**",
    p.allow "proc:spawn:*",
    p.ask "net:post:*",
  },
  decide = function(req)
    if req.flow == "edit" then return {decision = "ask", reason = "edits get a second look"} end
  end,
  route = function(req)
    if req.resource:match("^cargo ") then return "rust-builder" end
    if req.resource:match("^boom") then error("no route for that") end
  end,
}
"#;

#[test]
fn explain_names_the_rule_that_allowed_or_denied() {
    let ws = workspace();
    let pol = policy(&ws, "mine.lua", EXPLAINED);
    let a = format!("fs:read:{}", ws.file("src/a.rs").display());
    assert_eq!(
        explain(&ws, &["--policy", &pol, &a]),
        lines(
            &a,
            "read",
            "allow",
            &format!("allow \"fs:read:${{workspace}}/**\" (rules[2] of {pol})"),
            "the policy allows it"
        )
    );
    let env = format!("fs:read:{}", ws.file("deploy/.env").display());
    assert_eq!(
        explain(&ws, &["--policy", &pol, &env]),
        lines(
            &env,
            "read",
            "deny",
            &format!("deny \"fs:*:**/.env\" (rules[1] of {pol})"),
            "secrets stay out"
        )
    );
    assert_eq!(
        explain(&ws, &["--policy", &pol, "net:post:api.example.com"]),
        lines(
            "net:post:api.example.com",
            "http-post",
            "ask",
            &format!("ask \"net:post:*\" (rules[5] of {pol})"),
            "the policy asks a person first"
        )
    );
    assert_eq!(
        explain(&ws, &["--policy", &pol, "net:get:example.org"]),
        lines(
            "net:get:example.org",
            "fetch",
            "ask",
            &pol,
            "no rule or hook of the policy matched net:get:example.org"
        )
    );
}

#[test]
fn explain_with_flow_runs_the_decide_hook_for_that_flow() {
    let ws = workspace();
    let pol = policy(&ws, "mine.lua", EXPLAINED);
    let w = format!("fs:write:{}", ws.file("a.txt").display());
    assert_eq!(
        explain(&ws, &["--policy", &pol, &w]),
        lines(
            &w,
            "write",
            "allow",
            &format!("allow \"fs:write:${{workspace}}/**\" (rules[3] of {pol})"),
            "the policy allows it"
        )
    );
    assert_eq!(
        explain(&ws, &["--policy", &pol, &w, "--flow", "edit"]),
        lines(
            &w,
            "edit",
            "ask",
            &format!("decide hook at {pol}:10"),
            "edits get a second look"
        )
    );
}

#[test]
fn explain_with_a_ceiling_denies_outside_it() {
    let ws = workspace();
    let pol = policy(&ws, "mine.lua", EXPLAINED);
    let w = format!("fs:write:{}", ws.file("a.txt").display());
    assert_eq!(
        explain(
            &ws,
            &[
                "--policy",
                &pol,
                "--ceiling",
                "fs:read:${workspace}/**",
                "--ceiling",
                "net:get",
                &w
            ]
        ),
        lines(
            &w,
            "write",
            "deny",
            "the run's ceiling",
            "outside the run's ceiling (fs:read:${workspace}/**, net:get)"
        )
    );
    let r = format!("fs:read:{}", ws.file("a.txt").display());
    assert_eq!(
        explain(
            &ws,
            &["--policy", &pol, "--ceiling", "fs:read:${workspace}/**", &r]
        ),
        lines(
            &r,
            "read",
            "allow",
            &format!("allow \"fs:read:${{workspace}}/**\" (rules[2] of {pol})"),
            "the policy allows it"
        )
    );
}

#[test]
fn explain_proc_spawn_says_where_the_command_runs() {
    let ws = workspace();
    let pol = policy(&ws, "mine.lua", EXPLAINED);
    let by = format!("allow \"proc:spawn:*\" (rules[4] of {pol})");
    assert_eq!(
        explain(&ws, &["--policy", &pol, "proc:spawn:cargo test --all"]),
        lines(
            "proc:spawn:cargo test --all",
            "bash",
            "allow",
            &by,
            "the policy allows it"
        ) + "runs on:    container rust-builder\n"
    );
    assert_eq!(
        explain(
            &ws,
            &[
                "--policy",
                &pol,
                "proc:spawn:ls -l",
                "--flow",
                "shell_command"
            ]
        ),
        lines(
            "proc:spawn:ls -l",
            "shell_command",
            "allow",
            &by,
            "the policy allows it"
        ) + "runs on:    the host\n"
    );
    assert_eq!(
        explain(&ws, &["--policy", &pol, "proc:spawn:boom now"]),
        lines(
            "proc:spawn:boom now",
            "bash",
            "allow",
            &by,
            "the policy allows it"
        ) + &format!(
            "runs on:    refused (route hook at {pol}:13: the hook at {pol}:13 failed: {pol}:15: no route for that)\n"
        )
    );
}

#[test]
fn explain_without_a_policy_uses_the_built_in_default() {
    let ws = workspace();
    let git = format!("fs:write:{}", ws.file(".git/config").display());
    assert_eq!(
        explain(&ws, &[&git]),
        lines(
            &git,
            "write",
            "deny",
            "deny \"fs:write:${workspace}/.git/**\" (rules[2] of policies/default.lua (built in))",
            "the repository's internals (hooks, config) run code later"
        )
    );
    assert_eq!(
        explain(&ws, &["--policy", "readonly", "proc:spawn:ls"]),
        lines(
            "proc:spawn:ls",
            "bash",
            "deny",
            "deny \"proc:spawn\" (rules[2] of policies/readonly.lua (built in))",
            "this seat is read-only"
        ) + "runs on:    the host\n"
    );
}

#[test]
fn explain_rejects_what_is_not_a_capability() {
    let ws = workspace();
    let w = ws.path().display().to_string();
    let out = sluice(
        &["policy", "explain", "--workspace", &w, "disk:read:/x"],
        ws.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(
        text(&out.stderr),
        "sluice: \"disk:read:/x\" is not a capability; write action:resource with an action of fs:read, fs:write, net:get, net:post, net:private, proc:spawn, model:call, cred:use\n"
    );
    let out = sluice(
        &[
            "policy",
            "explain",
            "--workspace",
            &w,
            "--ceiling",
            "fs:exec",
            "fs:read:/x",
        ],
        ws.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr)
            .starts_with("sluice: invalid pattern `fs:exec`: unknown action `fs:exec`"),
        "{}",
        text(&out.stderr)
    );
}

/// How many `function test_` a test file defines.
fn tests_in(file: &Path) -> usize {
    fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter(|l| l.trim_start().starts_with("function test_"))
        .count()
}

#[test]
fn policy_test_passes_the_shipped_policies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = sluice(&["policy", "test", "policies/"], root);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let mut files: Vec<_> = fs::read_dir(root.join("policies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("_test.lua"))
        .collect();
    files.sort();
    let n: usize = files.iter().map(|f| tests_in(f)).sum();
    assert!(n >= 11, "{n}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), n + 1, "{stdout}");
    assert!(
        lines[..n].iter().all(|l| l.starts_with("PASS policies/")),
        "{stdout}"
    );
    assert_eq!(lines[n], format!("{n} passed, 0 failed"));
    assert!(stdout.contains("PASS policies/default_test.lua test_env_files_are_denied_anywhere\n"));
    // The folder is the default.
    let default = sluice(&["policy", "test"], root);
    assert_eq!(text(&default.stdout), stdout);
}

#[test]
fn policy_test_reports_a_failing_test_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(
        d.join("mine.lua"),
        "local p = require(\"sluice.policy\")\nreturn { rules = { p.allow \"fs:read:${workspace}/**\", p.deny(\"fs:write\", \"no writes\") } }\n",
    )
    .unwrap();
    fs::write(
        d.join("mine_test.lua"),
        "function test_reads() policy.allows(\"fs:read:\" .. policy.workspace .. \"/a\") end\n\
         function test_writes() policy.allows(\"fs:write:\" .. policy.workspace .. \"/a\") end\n\
         function test_raises() error(\"custom failure\") end\n\
         function test_decide_table()\n\
           local d = policy.decide(\"fs:write:/workspace/a\", {flow = \"edit\"})\n\
           assert(d.decision == \"deny\" and d.reason == \"no writes\", d.reason)\n\
         end\n\
         function helper() error(\"not a test\") end\n",
    )
    .unwrap();
    let out = sluice(&["policy", "test", "."], d);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "PASS ./mine_test.lua test_decide_table\n\
         FAIL ./mine_test.lua test_raises\n     ./mine_test.lua:3: custom failure\n\
         PASS ./mine_test.lua test_reads\n\
         FAIL ./mine_test.lua test_writes\n     ./mine_test.lua:2: expected allow for fs:write:/workspace/a, got deny by deny \"fs:write\" (rules[2] of ./mine.lua): no writes\n\
         2 passed, 2 failed\n"
    );
}

#[test]
fn policy_test_reports_a_test_file_with_no_policy_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("orphan_test.lua"), "function test_x() end\n").unwrap();
    let out = sluice(&["policy", "test", "orphan_test.lua"], d);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "FAIL orphan_test.lua (did not load)\n     orphan_test.lua tests orphan.lua, which does not exist\n0 passed, 1 failed\n"
    );
    let empty = tempfile::tempdir().unwrap();
    let out = sluice(&["policy", "test", "."], empty.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), "sluice: no *_test.lua files at .\n");
}

#[test]
fn policy_test_reports_a_policy_that_does_not_load() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("bad.lua"), "return { rulez = {} }\n").unwrap();
    fs::write(d.join("bad_test.lua"), "function test_x() end\n").unwrap();
    let out = sluice(&["policy", "test", "."], d);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "FAIL ./bad_test.lua (did not load)\n     policy ./bad.lua: unknown key rulez; a policy returns {rules = {...}, decide = fn?, route = fn?, containers = {NAME = {image = ...}}?, providers = {NAME = {api = ..., url = ...}}?, otherwise = \"ask\"|\"deny\"}\n0 passed, 1 failed\n"
    );
}

#[test]
fn run_help_mentions_the_policy_flags() {
    let out = sluice(&["run", "--help"], Path::new("."));
    assert!(out.status.success());
    let help = text(&out.stdout);
    for flag in [
        "--policy <FILE>",
        "--ceiling <PATTERN>",
        "--approve <PATTERN>",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
    assert!(help.contains("a deny from any wins"), "{help}");
    assert!(
        help.contains("`default`, `readonly`, `ci` and `unconfined`"),
        "{help}"
    );
}

#[test]
fn the_built_in_readonly_policy_denies_a_write() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    let run = run_lua_with(
        ws.path(),
        &format!(
            "{EMIT}emit(sluice.read{{path = \"a.txt\"}}.content)\nlocal r, e = sluice.write{{path = \"a.txt\", content = \"b\"}}\nemit(e)"
        ),
        &["--policy", "readonly"],
        &[],
    )
    .ok();
    let c = format!("fs:write:{}", ws.file("a.txt").display());
    let by = "deny \"fs:write\" (rules[1] of policies/readonly.lua (built in))";
    let reason = "this seat is read-only";
    assert_eq!(
        run.stdout,
        format!(
            "\"a\"\n{}\n",
            json!({
                "code": "permission_denied",
                "message": format!("{c} is denied by {by}: {reason}."),
                "capability": c,
                "by": by,
                "reason": reason,
            })
        )
    );
    assert_eq!(fs::read_to_string(ws.file("a.txt")).unwrap(), "a\n");
}

#[test]
fn bad_ceiling_or_approve_patterns_stop_the_run_naming_the_flag() {
    let ws = workspace();
    for (flag, pattern, message) in [
        (
            "--ceiling",
            "fs:read:src/**",
            "--ceiling \"fs:read:src/**\": invalid pattern `fs:read:src/**`: the fs resource `src/**` is relative",
        ),
        (
            "--approve",
            "disk:*",
            "--approve \"disk:*\": invalid pattern `disk:*`: unknown action family `disk`",
        ),
    ] {
        let run = run_lua_with(ws.path(), "print('ran')", &[flag, pattern], &[]);
        assert_eq!(run.code, 2, "{flag}");
        assert_eq!(run.stdout, "", "{flag}");
        assert!(
            run.stderr.starts_with(&format!("sluice: {message}")),
            "{flag}: {}",
            run.stderr
        );
    }
}
