//! Attacks on `except` (a deny's exceptions): an except must take out of its
//! deny exactly what it names, never more. Each attack has a control that
//! must still work: the exception itself stays usable.
//!
//! - paths: `..`, symlinks inside the exception that point into the denied
//!   tree or at `.env`, a dangling symlink, case, a trailing `/`, a
//!   `${workspace}` holding glob characters;
//! - an except that names all of its deny (`**`, the deny itself, a `..`
//!   that normalises to it) is a load error, not a deny that denies nothing;
//! - apply_patch moving a file out of the exception (`*** Move to:`),
//!   grep and glob walking through a symlink in the exception;
//! - commands: a redirection through `..` or a symlink, under bubblewrap
//!   and landlock, which keep the whole denied tree read-only;
//! - several policies: one policy's except never cancels another's deny;
//! - a `proc:spawn` deny with an except, through command wrappers.

mod common;

use common::*;
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::symlink;
use std::process::Command;

const SRC_DENY: &str = "fs:*:${workspace}/src/**";
const REVIEWED: &str = "sources are reviewed";

/// Denies reading and writing `src/` but what is in `src/generated/`, and
/// `.env` anywhere; otherwise opens the workspace and commands.
const CARVED: &str = r#"local p = require("sluice.policy")
return {
  rules = {
    p.programs,
    p.deny("fs:*:${workspace}/src/**", "sources are reviewed",
           {except = {"fs:*:${workspace}/src/generated/**"}}),
    p.deny("fs:*:**/.env", "no secrets"),
    p.allow "fs:read:${workspace}", p.allow "fs:read:${workspace}/**",
    p.allow "fs:write:${workspace}", p.allow "fs:write:${workspace}/**",
    p.allow "proc:spawn:*",
  },
  otherwise = "deny",
}
"#;

/// A workspace with `src/main.rs`, `src/secret.txt`, `.env`, an `out/`
/// folder and, in `src/generated/`, a file and symlinks that lead out of
/// the exception: `evil` to `src/main.rs`, `up` to `src/`, `env` to
/// `.env`, `dangling` to the missing `src/new.rs`.
fn trap() -> (Workspace, String) {
    let ws = workspace();
    fs::create_dir_all(ws.file("src/generated")).unwrap();
    fs::create_dir_all(ws.file("out")).unwrap();
    fs::write(ws.file("src/main.rs"), "old\n").unwrap();
    fs::write(ws.file("src/secret.txt"), "SECRET in src\n").unwrap();
    fs::write(ws.file(".env"), "TOKEN=1\n").unwrap();
    fs::write(
        ws.file("src/generated/api.rs"),
        "old\nSECRET in generated\n",
    )
    .unwrap();
    symlink("../main.rs", ws.file("src/generated/evil")).unwrap();
    symlink("..", ws.file("src/generated/up")).unwrap();
    symlink("../../.env", ws.file("src/generated/env")).unwrap();
    symlink("../new.rs", ws.file("src/generated/dangling")).unwrap();
    let pol = policy(&ws, "carved.lua", CARVED);
    (ws, pol)
}

fn by(pol: &str, rule: &str, at: &str) -> String {
    format!("deny \"{rule}\" ({at} of {pol})")
}

/// The error of a capability the `src/**` deny refuses.
fn src_denied(ws: &Workspace, pol: &str, action: &str, rel: &str) -> Value {
    let cap = format!("{action}:{}", ws.file(rel).display());
    denied(&cap, &by(pol, SRC_DENY, "rules[2]"), REVIEWED)
}

/// The error of a capability the `.env` deny refuses.
fn env_denied(ws: &Workspace, pol: &str, action: &str) -> Value {
    let cap = format!("{action}:{}", ws.file(".env").display());
    denied(&cap, &by(pol, "fs:*:**/.env", "rules[3]"), "no secrets")
}

#[test]
fn symlinks_and_dot_dot_out_of_the_exception_meet_the_deny_they_lead_into() {
    let (ws, pol) = trap();
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"try("write", {path = "src/generated/evil", content = "pwn\n"})
try("write", {path = "src/generated/up/main.rs", content = "pwn\n"})
try("write", {path = "src/generated/../main.rs", content = "pwn\n"})
try("write", {path = "src/generated/env", content = "pwn\n"})
try("write", {path = "src/generated/dangling", content = "pwn\n"})
try("edit", {path = "src/generated/evil", oldString = "old", newString = "pwn"})
try("read", {path = "src/generated/evil"})
try("read", {path = "src/generated/up/secret.txt"})
try("read", {path = "src/generated/env"})
try("write", {path = "src/generated/new.rs", content = "made\n"})
try("edit", {path = "src/generated/api.rs", oldString = "old", newString = "new"})
try("read", {path = "src/generated/api.rs"})"#,
    );
    assert_eq!(
        out,
        vec![
            src_denied(&ws, &pol, "fs:write", "src/main.rs"),
            src_denied(&ws, &pol, "fs:write", "src/main.rs"),
            src_denied(&ws, &pol, "fs:write", "src/main.rs"),
            env_denied(&ws, &pol, "fs:write"),
            // A dangling link is judged where it would create the file.
            src_denied(&ws, &pol, "fs:write", "src/new.rs"),
            src_denied(&ws, &pol, "fs:read", "src/main.rs"),
            src_denied(&ws, &pol, "fs:read", "src/main.rs"),
            src_denied(&ws, &pol, "fs:read", "src/secret.txt"),
            env_denied(&ws, &pol, "fs:read"),
            // The control: the exception itself is open.
            json!({"ok": "write"}),
            json!({"ok": "edit"}),
            json!({"ok": "read"}),
        ]
    );
    assert_eq!(fs::read_to_string(ws.file("src/main.rs")).unwrap(), "old\n");
    assert_eq!(fs::read_to_string(ws.file(".env")).unwrap(), "TOKEN=1\n");
    assert!(!ws.file("src/new.rs").exists());
    assert_eq!(
        fs::read_to_string(ws.file("src/generated/new.rs")).unwrap(),
        "made\n"
    );
}

/// An apply_patch input of `body`.
fn patch(body: &str) -> String {
    format!(
        "try(\"apply_patch\", {{input = {}}})",
        lua_str(&format!("*** Begin Patch\n{body}*** End Patch\n"))
    )
}

#[test]
fn apply_patch_cannot_move_or_add_a_file_out_of_the_exception() {
    let (ws, pol) = trap();
    let script = [
        patch("*** Update File: src/generated/api.rs\n*** Move to: src/moved.rs\n@@\n-old\n+new\n"),
        patch("*** Update File: src/generated/api.rs\n*** Move to: src/generated/up/moved.rs\n@@\n-old\n+new\n"),
        patch("*** Add File: src/generated/../added.rs\n+x\n"),
        patch("*** Update File: src/generated/evil\n@@\n-old\n+pwn\n"),
        // The control: a move inside the exception.
        patch("*** Update File: src/generated/api.rs\n*** Move to: src/generated/moved.rs\n@@\n-old\n+new\n"),
    ]
    .join("\n");
    let out = lua(&ws, &["--policy", &pol], &script);
    assert_eq!(out.len(), 5, "{out:?}");
    assert_eq!(
        out[..4],
        [
            src_denied(&ws, &pol, "fs:write", "src/moved.rs"),
            src_denied(&ws, &pol, "fs:write", "src/moved.rs"),
            src_denied(&ws, &pol, "fs:write", "src/added.rs"),
            src_denied(&ws, &pol, "fs:read", "src/main.rs"),
        ]
    );
    assert_eq!(out[4], json!({"ok": "apply_patch"}));
    assert!(!ws.file("src/moved.rs").exists());
    assert!(!ws.file("src/added.rs").exists());
    assert_eq!(fs::read_to_string(ws.file("src/main.rs")).unwrap(), "old\n");
    assert!(!ws.file("src/generated/api.rs").exists());
    assert_eq!(
        fs::read_to_string(ws.file("src/generated/moved.rs")).unwrap(),
        "new\nSECRET in generated\n"
    );
}

#[test]
fn grep_and_glob_through_a_symlink_in_the_exception_see_nothing_of_the_denied_tree() {
    let (ws, pol) = trap();
    let run = run_lua_with(
        ws.path(),
        &format!(
            "{EMIT}for _, root in ipairs({{'.', 'src/generated/up'}}) do\n\
             local g = sluice.grep{{pattern = 'SECRET', root = root, hidden = true, noIgnore = true}}\n\
             local paths = {{}}\n\
             for _, m in ipairs(g.matches) do paths[#paths + 1] = m.file end\n\
             emit({{grep = paths, denied = g.skippedDenied}})\n\
             local l = sluice.glob{{pattern = '**/*', root = root, hidden = true, noIgnore = true}}\n\
             emit({{glob = l.paths}})\n\
             end"
        ),
        &["--policy", &pol],
        &[],
    )
    .ok();
    let all = run.stdout;
    // Whatever the walk reaches, it never shows a file of the denied part.
    for secret in ["secret.txt", "main.rs", ".env", "TOKEN"] {
        assert!(!all.contains(secret), "{secret} leaked: {all}");
    }
    let lines: Vec<Value> = all
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The control: the walk from the workspace finds the exception's match.
    assert!(lines[0]["denied"].as_u64().unwrap() >= 1, "{all}");
    // From the symlink to `src/`, only the exception's file again.
    assert_eq!(lines[2]["grep"], json!(["src/generated/api.rs"]), "{all}");
    assert_eq!(lines[0]["grep"], lines[2]["grep"], "{all}");
}

/// The same attack as a command: a redirection into the denied tree
/// through the exception, under each runner.
#[test]
fn a_command_cannot_write_the_denied_tree_through_the_exception() {
    for runner in runners() {
        let (ws, pol) = trap();
        let script = r#"local function emit(v) print(sluice.json.encode(v)) end
for _, c in ipairs({
  "echo pwn > src/generated/../main.rs",
  "echo pwn > src/generated/evil",
  "echo pwn > src/generated/up/main.rs",
  "cd src/generated && echo pwn > ../main.rs",
  "cp src/generated/api.rs src/generated/up/copied.rs",
  "mv src/generated/api.rs src/moved.rs",
  "echo ok > out/ok.txt",
}) do
  local r, e = sluice.bash{command = c}
  if r then emit({exit = r.exitCode, partial = r.sandbox and r.sandbox.enforcement}) else emit({denied = e.code}) end
end"#;
        let run = run_lua_with(
            ws.path(),
            script,
            &["--sandbox", &runner, "--policy", &pol],
            &[],
        )
        .ok();
        let lines: Vec<Value> = run
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 7, "{runner}: {}", run.stdout);
        for (i, line) in lines[..6].iter().enumerate() {
            let refused = line["denied"] == "permission_denied"
                || line["exit"].as_i64().is_some_and(|c| c != 0);
            assert!(refused, "{runner}: command {i} went through: {line}");
        }
        assert_eq!(
            fs::read_to_string(ws.file("src/main.rs")).unwrap(),
            "old\n",
            "{runner}"
        );
        assert!(!ws.file("src/copied.rs").exists(), "{runner}");
        assert!(!ws.file("src/moved.rs").exists(), "{runner}");
        assert!(ws.file("src/generated/api.rs").exists(), "{runner}");
        // The control: outside the denied tree the command writes.
        assert_eq!(lines[6]["exit"], 0, "{runner}: {}", run.stdout);
        assert_eq!(lines[6]["partial"], "partial", "{runner}: {}", run.stdout);
        assert_eq!(
            fs::read_to_string(ws.file("out/ok.txt")).unwrap(),
            "ok\n",
            "{runner}"
        );
    }
}

/// Opens the workspace to reads and writes; `deny` adds rules.
fn open_with(deny: &str) -> String {
    format!(
        "local p = require(\"sluice.policy\")\nreturn {{ rules = {{\n  {deny},\n  \
         p.allow \"fs:read:${{workspace}}/**\", p.allow \"fs:write:${{workspace}}/**\",\n}}, otherwise = \"deny\" }}\n"
    )
}

#[test]
fn an_except_in_one_policy_never_cancels_another_policys_deny() {
    let ws = workspace();
    fs::create_dir_all(ws.file("src/generated")).unwrap();
    let carved = policy(
        &ws,
        "carved.lua",
        &open_with(
            r#"p.deny("fs:write:${workspace}/src/**", "reviewed", {except = {"fs:write:${workspace}/src/generated/**"}})"#,
        ),
    );
    let strict = policy(
        &ws,
        "strict.lua",
        &open_with(r#"p.deny("fs:write:${workspace}/src/**", "frozen")"#),
    );
    let cap = format!("fs:write:{}", ws.file("src/generated/x.rs").display());
    let frozen = denied(
        &cap,
        &by(&strict, "fs:write:${workspace}/src/**", "rules[1]"),
        "frozen",
    );
    let body = r#"try("write", {path = "src/generated/x.rs", content = "x"})"#;
    for order in [[&carved, &strict], [&strict, &carved]] {
        let out = lua(&ws, &["--policy", order[0], "--policy", order[1]], body);
        assert_eq!(out, vec![frozen.clone()], "{order:?}");
    }
    assert!(!ws.file("src/generated/x.rs").exists());
    // The control: the carving policy alone lets it through.
    assert_eq!(
        lua(&ws, &["--policy", &carved], body),
        vec![json!({"ok": "write"})]
    );
}

/// The load error a policy with `rules` gets, with its path as POLICY.
fn load_error(rules: &str) -> String {
    let ws = workspace();
    let pol = policy(
        &ws,
        "bad.lua",
        &format!("local p = require(\"sluice.policy\")\nreturn {{ rules = {{ {rules} }} }}\n"),
    );
    let run = run_lua_with(ws.path(), "print('ran')", &["--policy", &pol], &[]);
    assert_eq!(run.code, 2, "{rules}: {}", run.stderr);
    assert_eq!(run.stdout, "", "{rules}");
    run.stderr.replace(&pol, "POLICY")
}

#[test]
fn an_except_that_names_all_of_its_deny_is_a_load_error() {
    let src = "fs:write:${workspace}/src/**";
    for except in [
        "fs:write:**",
        "fs:write",
        "fs:write:*",
        "fs:*",
        "*",
        "fs:write:${workspace}/src/**",
        "fs:write:${workspace}/src/generated/../**",
        "fs:write:${workspace}//src/./**",
    ] {
        let stderr = load_error(&format!(
            "p.deny(\"{src}\", \"why\", {{except = {{\"{except}\"}}}})"
        ));
        let expected = format!(
            "sluice: policy POLICY: rules[1]: except[1] \"{except}\" names everything the deny \"{src}\" names, \
             so the deny would deny nothing; narrow the except to the part to leave out, or drop the deny\n"
        );
        // A wider action set fails on the actions first; either way it loads not.
        if except == "fs:*" || except == "*" {
            assert!(stderr.contains("which the deny"), "{except}: {stderr}");
        } else {
            assert_eq!(stderr, expected, "{except}");
        }
    }
    for except in ["proc:spawn:*", "proc:spawn", "proc:spawn:git *"] {
        let stderr = load_error(&format!(
            "p.deny(\"proc:spawn:git *\", \"why\", {{except = {{\"{except}\"}}}})"
        ));
        assert!(
            stderr.contains(&format!(
                "except[1] \"{except}\" names everything the deny \"proc:spawn:git *\" names"
            )),
            "{except}: {stderr}"
        );
    }
    // A deny of two actions with an except of one still denies the other.
    let ws = workspace();
    let pol = policy(
        &ws,
        "half.lua",
        &open_with(
            r#"p.deny("fs:*:${workspace}/src/**", "why", {except = {"fs:write:${workspace}/src/**"}})"#,
        ),
    );
    fs::create_dir_all(ws.file("src")).unwrap();
    fs::write(ws.file("src/a"), "a").unwrap();
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"try("write", {path = "src/b", content = "b"})
try("read", {path = "src/a"})"#,
    );
    assert_eq!(out[0], json!({"ok": "write"}));
    assert_eq!(out[1]["code"], "permission_denied", "{out:?}");
}

#[test]
fn case_and_a_trailing_slash_do_not_widen_an_except() {
    let stderr = load_error(
        r#"p.deny("fs:write:${workspace}/src/**", "why", {except = {"fs:write:${workspace}/SRC/generated/**"}})"#,
    );
    assert!(
        stderr.contains("which the deny \"fs:write:${workspace}/src/**\" does not name"),
        "{stderr}"
    );
    // `src/generated/` is the folder's own entry, not what is in it.
    let ws = workspace();
    fs::create_dir_all(ws.file("src/generated")).unwrap();
    let pol = policy(
        &ws,
        "slash.lua",
        &open_with(
            r#"p.deny("fs:write:${workspace}/src/**", "reviewed", {except = {"fs:write:${workspace}/src/generated/"}})"#,
        ),
    );
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"try("write", {path = "src/generated/x.rs", content = "x"})"#,
    );
    assert_eq!(out[0]["code"], "permission_denied", "{out:?}");
    assert!(!ws.file("src/generated/x.rs").exists());
}

#[test]
fn a_workspace_holding_glob_characters_excepts_only_itself() {
    // `${workspace}` expands literally: a workspace named `w*` must not
    // carve its sibling `wX` out of a deny.
    let root = workspace();
    let ws = root.file("w*[a]");
    let sibling = root.file("wXa");
    for dir in [&ws, &sibling] {
        fs::create_dir_all(dir.join("src/generated")).unwrap();
    }
    let pol = policy(
        &root,
        "glob.lua",
        r#"local p = require("sluice.policy")
return { rules = {
  p.deny("fs:write:**/src/**", "sources are reviewed", {except = {"fs:write:${workspace}/src/generated/**"}}),
  p.allow "fs:write:**", p.allow "fs:read:**",
}, otherwise = "deny" }
"#,
    );
    let target = sibling.join("src/generated/x.rs");
    let script = format!(
        "{EMIT}{TRY}try('write', {{path = {}, content = 'x'}})\ntry('write', {{path = 'src/generated/x.rs', content = 'x'}})",
        lua_str(&target.display().to_string())
    );
    let run = run_lua_with(&ws, &script, &["--policy", &pol, "--no-audit"], &[]).ok();
    let out: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(out[0]["code"], "permission_denied", "{out:?}");
    assert_eq!(out[0]["by"], by(&pol, "fs:write:**/src/**", "rules[1]"));
    assert!(!target.exists());
    // The control: the workspace's own exception is open.
    assert_eq!(out[1], json!({"ok": "write"}));
    assert!(ws.join("src/generated/x.rs").exists());
}

/// `sluice policy explain proc:spawn:LINE`'s decision under `pol`.
fn decision(ws: &Workspace, pol: &str, line: &str) -> String {
    let out = Command::new(sluice_bin())
        .args(["policy", "explain", "--workspace"])
        .arg(ws.path())
        .args(["--policy", pol, &format!("proc:spawn:{line}")])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("decision:   "))
        .unwrap_or_else(|| panic!("{line}: {text}{}", String::from_utf8_lossy(&out.stderr)))
        .to_string()
}

#[test]
fn a_command_except_does_not_reach_through_wrappers_or_other_commands_of_the_line() {
    let ws = workspace();
    let pol = policy(
        &ws,
        "git.lua",
        r#"local p = require("sluice.policy")
return { rules = {
  p.deny("proc:spawn:git *", "git is read-only here", {except = {"proc:spawn:git status *"}}),
  p.allow "proc:spawn:*",
} }
"#,
    );
    for line in [
        "env git push",
        "timeout 5 git push",
        "sh -c 'git push'",
        "bash -c 'git status && git push'",
        "git status; git push",
        "git status $(git push)",
        "git status `git push`",
        "command git push",
        "exec git push",
        "nice git push",
        "xargs git push",
        "echo push | xargs git",
        "find . -exec git push ;",
        "/usr/bin/git push",
        "git -C /tmp status",
        "git statusx",
        "git",
        "$G status",
    ] {
        assert_eq!(decision(&ws, &pol, line), "deny", "{line}");
    }
    // The control: the excepted command, bare, with arguments, wrapped.
    for line in [
        "git status",
        "git status --short",
        "env git status",
        "timeout 5 git status",
    ] {
        assert_eq!(decision(&ws, &pol, line), "allow", "{line}");
    }
}
