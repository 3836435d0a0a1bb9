//! Issue 13, item 6: a command's environment is judged. The `env` of a
//! `bash` call is judged as the line's leading assignments are, and a
//! variable of the table (src/kernel/programs.rs: ones that make a program
//! run code or read another configuration) is granted only by a rule that
//! spells it, never by a wildcard, `proc:spawn:*` included. Each attack
//! runs real git under a policy allowing `git *`, and is refused with its
//! marker never made; the same call under a rule that names the variable
//! makes the marker, so the attack is real and naming is what grants it.

mod common;
mod policy_support;

use policy_support::{bash, policy, ran, refused, repo};
use serde_json::{json, Value};
use std::fs;

const MARKER: &str = "MARKER";

/// A workspace holding a git repository (see [`repo`]) and the files the
/// attacks point git at: a config with `core.fsmonitor` set to make the
/// marker, a home and an XDG folder holding it, and a folder with a fake
/// `git`.
fn setup() -> common::Workspace {
    let ws = common::workspace();
    repo(ws.path());
    let config = format!(
        "[core]\n\tfsmonitor = touch {}\n",
        ws.file(MARKER).display()
    );
    fs::write(ws.file("evil.gitconfig"), &config).unwrap();
    fs::create_dir_all(ws.file("home")).unwrap();
    fs::write(ws.file("home/.gitconfig"), &config).unwrap();
    fs::create_dir_all(ws.file("xdg/git")).unwrap();
    fs::write(ws.file("xdg/git/config"), &config).unwrap();
    fs::create_dir_all(ws.file("bin")).unwrap();
    let fake = ws.file("bin/git");
    fs::write(
        &fake,
        format!("#!/bin/sh\ntouch {}\n", ws.file(MARKER).display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
    ws
}

/// The `env` attacks: (what, command, env, the rule that names it).
fn attacks(ws: &common::Workspace) -> Vec<(&'static str, &'static str, Value, String)> {
    let path = |rel: &str| ws.file(rel).display().to_string();
    vec![
        (
            "GIT_CONFIG_* setting core.fsmonitor",
            "git status",
            json!({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "touch MARKER"}),
            "proc:spawn:GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=* git status".into(),
        ),
        (
            "GIT_SSH_COMMAND",
            "git ls-remote ssh://example.invalid/x",
            json!({"GIT_SSH_COMMAND": "touch MARKER"}),
            "proc:spawn:GIT_SSH_COMMAND=* git ls-remote *".into(),
        ),
        (
            "GIT_EDITOR",
            "git -c user.name=t -c user.email=t@example.org commit --allow-empty",
            json!({"GIT_EDITOR": "touch MARKER"}),
            "proc:spawn:GIT_EDITOR=* git *".into(),
        ),
        (
            "GIT_CONFIG_GLOBAL naming a config with core.fsmonitor",
            "git status",
            json!({"GIT_CONFIG_GLOBAL": path("evil.gitconfig")}),
            "proc:spawn:GIT_CONFIG_GLOBAL=* git status".into(),
        ),
        (
            "HOME holding a .gitconfig with core.fsmonitor",
            "git status",
            json!({"HOME": path("home")}),
            "proc:spawn:HOME=* git status".into(),
        ),
        (
            "XDG_CONFIG_HOME holding git/config with core.fsmonitor",
            "git status",
            json!({"XDG_CONFIG_HOME": path("xdg")}),
            "proc:spawn:XDG_CONFIG_HOME=* git status".into(),
        ),
        (
            "PATH finding a fake git first",
            "git status",
            json!({"PATH": format!("{}:{}", path("bin"), policy_support::PATH)}),
            "proc:spawn:PATH=* git status".into(),
        ),
        (
            "GIT_EXTERNAL_DIFF",
            "git diff",
            json!({"GIT_EXTERNAL_DIFF": "touch MARKER"}),
            "proc:spawn:GIT_EXTERNAL_DIFF=* git diff".into(),
        ),
    ]
}

#[test]
fn env_that_steers_git_is_refused_under_git_star_and_runs_only_under_a_rule_naming_it() {
    let ws = setup();
    let only_git = policy(&ws, "git.lua", &["proc:spawn:git *"]);
    for (what, line, env, naming) in attacks(&ws) {
        let (out, err) = bash(&ws, &only_git, line, json!({"env": env}));
        refused(what, &out, &err);
        assert!(!ws.file(MARKER).exists(), "{what}: the marker was made");
        // A background job is judged the same way.
        let (out, err) = bash(
            &ws,
            &only_git,
            line,
            json!({"env": env, "background": true}),
        );
        refused(&format!("{what} (background)"), &out, &err);
        // Not even a rule granting every command line grants the variable.
        let any = policy(&ws, "any.lua", &["proc:spawn:*"]);
        let (out, err) = bash(&ws, &any, line, json!({"env": env}));
        refused(&format!("{what} under proc:spawn:*"), &out, &err);
        assert!(!ws.file(MARKER).exists(), "{what}: the marker was made");
        // A rule that spells the variable grants it, and the attack is real.
        let named = policy(&ws, "named.lua", &["proc:spawn:git *", &naming]);
        let (out, err) = bash(&ws, &named, line, json!({"env": env}));
        assert!(err.is_null(), "{what} under {naming}: {err}");
        assert!(
            ws.file(MARKER).exists(),
            "{what}: the control under {naming} did not make the marker: {out}"
        );
        fs::remove_file(ws.file(MARKER)).unwrap();
    }
}

#[test]
fn the_refusal_names_the_variable_and_the_rule_that_would_grant_it() {
    let ws = setup();
    let only_git = policy(&ws, "git.lua", &["proc:spawn:*"]);
    let (_, err) = bash(
        &ws,
        &only_git,
        "git -p log",
        json!({"env": {"PAGER": "touch MARKER"}}),
    );
    let reason = err["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("sets PAGER")
            && reason.contains(r#"p.allow "proc:spawn:PAGER='touch MARKER' git -p log""#),
        "{err}"
    );
}

#[test]
fn ordinary_git_and_ordinary_env_still_run() {
    let ws = setup();
    let only_git = policy(&ws, "git.lua", &["proc:spawn:git *"]);
    for line in ["git status", "git log --oneline", "git diff --stat"] {
        let (out, err) = bash(&ws, &only_git, line, json!({}));
        ran(line, &out, &err);
    }
    // A variable outside the table is judged as text, like a leading
    // assignment: a wildcard rule grants it.
    let any = policy(&ws, "any.lua", &["proc:spawn:*"]);
    let (out, err) = bash(
        &ws,
        &any,
        "git status",
        json!({"env": {"LANG": "C", "GIT_AUTHOR_NAME": "t"}}),
    );
    ran("git status with LANG", &out, &err);
    let lang = policy(&ws, "lang.lua", &["proc:spawn:LANG=C git *"]);
    let (out, err) = bash(&ws, &lang, "git status", json!({"env": {"LANG": "C"}}));
    ran("LANG=C git status", &out, &err);
    assert!(!ws.file(MARKER).exists());
}

#[test]
fn assignments_in_the_line_follow_the_same_table() {
    let ws = setup();
    let any = policy(&ws, "any.lua", &["proc:spawn:*"]);
    for line in [
        "GIT_EXTERNAL_DIFF='touch MARKER' git diff",
        "export GIT_EXTERNAL_DIFF='touch MARKER'; git diff",
        "GIT_EXTERNAL_DIFF='touch MARKER'; export GIT_EXTERNAL_DIFF; git diff",
        "env GIT_EXTERNAL_DIFF='touch MARKER' git diff",
        "GIT_EXTERNAL_DIFF='touch MARKER' timeout 5 git diff",
        "GIT_EXTERNAL_DIFF='touch MARKER' sh -c 'git diff'",
        "PAGER='touch MARKER' git -p log",
    ] {
        let (out, err) = bash(&ws, &any, line, json!({}));
        refused(line, &out, &err);
        assert!(!ws.file(MARKER).exists(), "{line}: the marker was made");
    }
    // Spelled by the rule, the same assignment runs.
    let named = policy(
        &ws,
        "named.lua",
        &["proc:spawn:*", "proc:spawn:GIT_EXTERNAL_DIFF=* git *"],
    );
    let (out, err) = bash(
        &ws,
        &named,
        "GIT_EXTERNAL_DIFF='touch MARKER' git diff",
        json!({}),
    );
    ran(
        "GIT_EXTERNAL_DIFF=... git diff under a rule naming it",
        &out,
        &err,
    );
    assert!(
        ws.file(MARKER).exists(),
        "the named GIT_EXTERNAL_DIFF did not run"
    );
}

#[test]
fn a_rule_naming_one_value_does_not_grant_another() {
    let ws = setup();
    let less = policy(&ws, "less.lua", &["proc:spawn:PAGER=cat git *"]);
    let (out, err) = bash(&ws, &less, "git -p log", json!({"env": {"PAGER": "cat"}}));
    ran("PAGER=cat git -p log", &out, &err);
    let (out, err) = bash(
        &ws,
        &less,
        "git -p log",
        json!({"env": {"PAGER": "cat; touch MARKER"}}),
    );
    refused("PAGER='cat; touch MARKER'", &out, &err);
    assert!(!ws.file(MARKER).exists());
}

#[test]
fn policy_explain_judges_an_env_entry() {
    let ws = setup();
    let any = policy(&ws, "any.lua", &["proc:spawn:*"]);
    let explain = |env: &[&str]| {
        let mut cmd = std::process::Command::new(common::sluice_bin());
        cmd.args([
            "policy",
            "explain",
            "proc:spawn:git status",
            "--policy",
            &any,
        ]);
        for e in env {
            cmd.args(["--env", e]);
        }
        String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned()
    };
    assert!(
        explain(&[]).contains("decision:   allow"),
        "{}",
        explain(&[])
    );
    let text = explain(&["GIT_SSH_COMMAND=touch x"]);
    assert!(
        text.contains("decision:   deny") && text.contains("sets GIT_SSH_COMMAND"),
        "{text}"
    );
}
