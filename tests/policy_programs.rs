//! Issue 13, item 8: rules on a program apply by its name and by the file
//! that name resolves to, and a program known only at run time matches
//! every deny rule and no allow rule. A deny-list of programs stays
//! advisory (README); these are the spellings it must still catch.

mod common;
mod policy_support;

use policy_support::{bash, policy, ran, refused, PATH};
use serde_json::json;
use std::fs;

#[test]
fn a_deny_on_a_name_catches_its_paths_and_run_time_spellings() {
    let ws = common::workspace();
    let p = policy(
        &ws,
        "deny-touch.lua",
        &["p.deny \"proc:spawn:touch *\"", "proc:spawn:*"],
    );
    for line in [
        "touch MARKER",
        "/usr/bin/touch MARKER",
        "/bin/touch MARKER",
        "env -i /usr/bin/touch MARKER",
        "$(echo touch) MARKER",
        "`echo touch` MARKER",
        "T=touch; $T MARKER",
        "\"$(command -v touch)\" MARKER",
        "sh -c \"$(echo touch) MARKER\"",
        "eval \"$(echo touch) MARKER\"",
    ] {
        let (out, err) = bash(&ws, &p, line, json!({}));
        refused(line, &out, &err);
        assert!(!ws.file("MARKER").exists(), "{line} made the marker");
    }
    // Other programs still run.
    let (out, err) = bash(&ws, &p, "echo ok && ls /", json!({}));
    ran("echo ok && ls /", &out, &err);
}

#[test]
fn a_deny_on_a_path_catches_the_name_that_resolves_to_it() {
    let ws = common::workspace();
    let p = policy(
        &ws,
        "deny-path.lua",
        &["p.deny \"proc:spawn:/usr/bin/touch *\"", "proc:spawn:*"],
    );
    for line in ["touch MARKER", "command touch MARKER", "/bin/touch MARKER"] {
        let (out, err) = bash(&ws, &p, line, json!({}));
        refused(line, &out, &err);
        assert!(!ws.file("MARKER").exists(), "{line} made the marker");
    }
    let (out, err) = bash(&ws, &p, "echo ok", json!({}));
    ran("echo ok", &out, &err);
}

#[test]
fn an_allow_by_name_grants_the_path_it_resolves_to_and_nothing_else() {
    let ws = common::workspace();
    let p = policy(&ws, "touch.lua", &["proc:spawn:touch *"]);
    let (out, err) = bash(&ws, &p, "/usr/bin/touch made", json!({}));
    ran("/usr/bin/touch made", &out, &err);
    assert!(ws.file("made").exists());
    // A program of the same name elsewhere is another program.
    fs::create_dir_all(ws.file("bin")).unwrap();
    fs::copy("/bin/sh", ws.file("bin/touch")).unwrap();
    let (out, err) = bash(&ws, &p, "bin/touch -c 'echo x > MARKER'", json!({}));
    refused("bin/touch (a shell named touch)", &out, &err);
    assert!(!ws.file("MARKER").exists());
}

#[test]
fn an_allow_by_path_grants_the_name_unless_a_writable_folder_comes_first_in_path() {
    let ws = common::workspace();
    policy_support::repo(ws.path());
    // The git PATH finds (/usr/local/bin/git on some machines).
    let git = PATH
        .split(':')
        .map(|d| std::path::Path::new(d).join("git"))
        .find(|p| p.is_file())
        .expect("git is installed");
    let rule = format!("proc:spawn:{} *", git.display());
    let p = policy(&ws, "git-path.lua", &[&rule]);
    let (out, err) = bash(&ws, &p, "git status", json!({}));
    ran(&format!("git status under {rule}"), &out, &err);
    // With a folder the command may write ahead of /usr/bin in sluice's own
    // PATH, `git` could be a file the line made there: not granted.
    fs::create_dir_all(ws.file("bin")).unwrap();
    let path = format!("{}:{PATH}", ws.file("bin").display());
    let script = "local r, e = sluice.bash{command = 'git status'}\nprint(e and e.code)\n";
    let run = common::run_lua_env(
        ws.path(),
        script,
        &["--policy", &p, "--no-audit"],
        &[],
        &[("PATH", &path)],
    );
    assert_eq!(run.stdout.trim(), "permission_denied", "{}", run.stderr);
}

#[test]
fn a_program_known_only_at_run_time_is_granted_by_no_allow_rule() {
    let ws = common::workspace();
    let p = policy(&ws, "any.lua", &["proc:spawn:*"]);
    let (out, err) = bash(&ws, &p, "T=touch; $T MARKER", json!({}));
    refused("$T under proc:spawn:*", &out, &err);
    let reason = err["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("the program `$T` is only known when the command runs"),
        "{err}"
    );
    assert!(!ws.file("MARKER").exists());
    // Named in the line, the same command runs.
    let (out, err) = bash(&ws, &p, "touch made", json!({}));
    ran("touch made", &out, &err);
}
