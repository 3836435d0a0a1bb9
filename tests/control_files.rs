//! Issue 13, item 9: repository control files (src/kernel/control.rs) are
//! granted only by a rule that names them. Under a broad
//! `fs:write:${workspace}/**`, the file flows (write, edit, apply_patch)
//! and a command's redirection cannot put `core.fsmonitor` into
//! `.git/config`, a hook into `.git/hooks`, a `gitdir:` file or a `.git`
//! folder anywhere: the user's next ordinary `git status` (run here, for
//! real, outside sluice) runs nothing. A rule naming the file grants it,
//! and then that `git status` does run the command, so the attack is real.

mod common;
mod policy_support;

use policy_support::{call, git, policy, refused, repo};
use serde_json::json;
use std::fs;
use std::process::Command;

const FSMONITOR: &str = "[core]\n\tfsmonitor = touch MARKER\n";

/// The user's own `git status` in `dir`, outside any sandbox.
fn user_git_status(dir: &std::path::Path) {
    let out = Command::new("git")
        .arg("status")
        .current_dir(dir)
        .env("PATH", policy_support::PATH)
        .output()
        .expect("git runs");
    let _ = out;
}

fn workspace() -> common::Workspace {
    let ws = common::workspace();
    repo(ws.path());
    ws
}

#[test]
fn the_file_flows_cannot_write_control_files_under_a_broad_grant() {
    let ws = workspace();
    fs::create_dir_all(ws.file("sub")).unwrap();
    let broad = policy(&ws, "broad.lua", &[]);
    let config = fs::read_to_string(ws.file(".git/config")).unwrap();
    let attempts = [
        (
            "write",
            json!({"path": ".git/config", "content": FSMONITOR}),
        ),
        (
            "write",
            json!({"path": ".git/config.worktree", "content": FSMONITOR}),
        ),
        (
            "write",
            json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch MARKER\n"}),
        ),
        (
            "write",
            json!({"path": ".git/commondir", "content": "../elsewhere\n"}),
        ),
        (
            "write",
            json!({"path": ".git/info/attributes", "content": "* filter=x\n"}),
        ),
        (
            "write",
            json!({"path": ".git/modules/m/config", "content": FSMONITOR}),
        ),
        (
            "write",
            json!({"path": ".git/worktrees/w/gitdir", "content": "/x\n"}),
        ),
        (
            "write",
            json!({"path": "sub/.git", "content": "gitdir: ../evil\n"}),
        ),
        (
            "write",
            json!({"path": "deep/er/.git/config", "content": FSMONITOR}),
        ),
        (
            "edit",
            json!({"path": ".git/config", "oldString": "[core]", "newString": "[core]\n\tfsmonitor = touch MARKER"}),
        ),
        (
            "apply_patch",
            json!({"input": "*** Begin Patch\n*** Add File: .git/hooks/post-checkout\n+#!/bin/sh\n+touch MARKER\n*** End Patch"}),
        ),
        (
            "apply_patch",
            json!({"input": "*** Begin Patch\n*** Update File: .git/config\n@@\n [core]\n+\tfsmonitor = touch MARKER\n*** End Patch"}),
        ),
        (
            "apply_patch",
            json!({"input": "*** Begin Patch\n*** Delete File: .git/config\n*** End Patch"}),
        ),
        (
            "apply_patch",
            json!({"input": "*** Begin Patch\n*** Update File: a.txt\n*** Move to: .git/hooks/pre-commit\n@@\n-three\n+touch MARKER\n*** End Patch"}),
        ),
        (
            "bash",
            json!({"command": "printf '[core]\\n\\tfsmonitor = touch MARKER\\n' >> .git/config"}),
        ),
    ];
    let broad_any = policy(&ws, "broad-any.lua", &["proc:spawn:*"]);
    for (flow, input) in attempts {
        let p = if flow == "bash" { &broad_any } else { &broad };
        let (out, err) = call(&ws, p, flow, input.clone());
        refused(&format!("{flow} {input}"), &out, &err);
        let reason = err["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("repository control file"),
            "{flow} {input}: {err}"
        );
    }
    assert_eq!(fs::read_to_string(ws.file(".git/config")).unwrap(), config);
    assert!(!ws.file(".git/hooks/pre-commit").exists());
    assert!(!ws.file("sub/.git").exists());
    assert!(!ws.file("deep").exists());
    user_git_status(ws.path());
    assert!(
        !ws.file("MARKER").exists(),
        "the user's git status ran a command"
    );
}

#[test]
fn ordinary_files_next_to_them_are_still_written() {
    let ws = workspace();
    let broad = policy(&ws, "broad.lua", &[]);
    for path in [
        ".gitignore",
        ".gitattributes",
        "src/config",
        "hooks/pre-commit",
        "x.git/config",
        ".github/workflows/ci.yml",
    ] {
        let (out, err) = call(
            &ws,
            &broad,
            "write",
            json!({"path": path, "content": "x\n"}),
        );
        assert!(err.is_null(), "{path}: {err}");
        assert_eq!(out["created"], true, "{path}: {out}");
    }
}

#[test]
fn a_rule_naming_the_file_grants_it_and_the_attack_is_real() {
    let ws = workspace();
    let named = policy(
        &ws,
        "named.lua",
        &[
            "fs:write:${workspace}/.git/config",
            "fs:write:${workspace}/.git/hooks/**",
        ],
    );
    let (_, err) = call(
        &ws,
        &named,
        "write",
        json!({"path": ".git/config", "content": FSMONITOR}),
    );
    assert!(err.is_null(), "{err}");
    let (_, err) = call(
        &ws,
        &named,
        "write",
        json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}),
    );
    assert!(err.is_null(), "{err}");
    // Naming one control file grants that one only.
    let (out, err) = call(
        &ws,
        &named,
        "write",
        json!({"path": ".git/info/attributes", "content": "x\n"}),
    );
    refused(".git/info/attributes", &out, &err);
    user_git_status(ws.path());
    assert!(
        ws.file("MARKER").exists(),
        "the fsmonitor written under the naming rule did not run"
    );
    git(ws.path(), &["status"]);
}

#[test]
fn policy_explain_says_why_and_names_the_rule_that_would_grant_it() {
    let ws = workspace();
    let broad = policy(&ws, "broad.lua", &[]);
    let cap = format!("fs:write:{}/.git/hooks/pre-commit", ws.path().display());
    let out = Command::new(common::sluice_bin())
        .args(["policy", "explain", &cap, "--policy", &broad, "--workspace"])
        .arg(ws.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("decision:   deny"), "{text}");
    assert!(
        text.contains("repository control file (.git/hooks)")
            && text.contains(&format!(
                r#"p.allow "fs:write:{}/.git/hooks/pre-commit""#,
                ws.path().display()
            ))
            && text.contains("`…/.git/hooks/**`"),
        "{text}"
    );
}
